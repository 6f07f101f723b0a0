//! SQOS records held back until their flows are final, each in the few bytes that give it
//! whole again.

mod bytes;
mod record;

use std::mem::size_of;

use uuid::Uuid;

use super::SqosRecord;
use bytes::Reader;
use record::{put_record, take_record, Aside, Taken, MAX_FIXED};

/// Bytes of a block records are written to (more where one record needs more).
const BLOCK: usize = 64 << 10;

/// SQOS records held back until their flows are final (`filter::HoldMessages`), each filed
/// under a flow, given back in the order they came.
///
/// A record takes ~90 bytes besides its buffer and name, where an [`SqosRecord`] takes 552
/// (and a [`super::CompactRecord`] all of them): most of those are its decoded body, which
/// decoding the buffer alone makes again, but for the findings the checks against the IOCTL
/// and the matched request appended (kept aside, with the frame copies of `keep_frames`); the
/// numbers are written in as few bytes as they need, the fields a record lacks not at all.
/// The records are written one after another into blocks of 64 KiB: a lean struct a message
/// instead (boxed, its buffer and name apart, a slot in a list doubling as it grew) took ~300
/// bytes a message and the list's doubling on top (9,944 messages: 5.07 MB of heap in use and
/// 1.36 MB mapped, against 3.61 and 0.70 in blocks).
#[derive(Default)]
pub struct HeldRecords {
    /// Written blocks, and the block being written.
    full: Vec<Vec<u8>>,
    current: Vec<u8>,
    aside: Aside,
    bytes: usize,
}

impl HeldRecords {
    /// Holds `rec`, filed under `flow`. Returns what that cost, counted as
    /// [`SqosRecord::held_bytes`] counts: its bytes, what is kept aside, and the unused end of
    /// a block it did not fit in.
    pub fn push(&mut self, rec: SqosRecord, flow: Option<Uuid>) -> usize {
        let name = rec.file_name.as_ref().map_or(0, String::len);
        let most = MAX_FIXED + rec.buffer.len() + name;
        let mut cost = 0;
        if self.current.capacity() - self.current.len() < most {
            let next = Vec::with_capacity(most.max(BLOCK));
            let done = std::mem::replace(&mut self.current, next);
            cost += done.capacity() - done.len() + size_of::<Vec<u8>>();
            if done.capacity() > 0 {
                self.full.push(done);
            }
        }
        let before = self.current.len();
        cost += put_record(rec, flow, &mut self.current, &mut self.aside);
        let written = self.current.len() - before;
        debug_assert!(written <= most, "{written} bytes written, at most {most}");
        cost += written;
        self.bytes += cost;
        cost
    }

    /// What the records held cost ([`HeldRecords::push`]).
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl IntoIterator for HeldRecords {
    type Item = (SqosRecord, Option<Uuid>);
    type IntoIter = Drain;

    fn into_iter(mut self) -> Drain {
        self.full.push(self.current);
        Drain {
            blocks: self.full.into_iter(),
            block: Vec::new(),
            pos: 0,
            aside: self.aside.into(),
        }
    }
}

/// The held records, in the order they came, each with the flow it was filed under; a block
/// is let go once read.
pub struct Drain {
    blocks: std::vec::IntoIter<Vec<u8>>,
    block: Vec<u8>,
    pos: usize,
    aside: Taken,
}

impl Iterator for Drain {
    type Item = (SqosRecord, Option<Uuid>);

    fn next(&mut self) -> Option<Self::Item> {
        while self.pos >= self.block.len() {
            self.block = self.blocks.next()?;
            self.pos = 0;
        }
        let mut r = Reader::at(&self.block, self.pos);
        let item = take_record(&mut r, &mut self.aside);
        self.pos = r.pos();
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::FrameCopy;
    use crate::pipeline::{CompactRecord, Kept, PipelineConfig, SqosBody};
    use crate::sqos::{Dissection, Finding, FindingCode};
    use std::sync::Arc;

    /// Every message of the committed captures; every other capture read keeping frames (the
    /// records then carry their first frame and a frame copy).
    fn committed_messages() -> Vec<SqosRecord> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/captures");
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .expect("captures")
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.to_string_lossy().contains(".pcap"))
            .collect();
        paths.sort();
        assert_eq!(paths.len(), 16, "{paths:?}");
        let mut kept = Kept::default();
        for (i, path) in paths.iter().enumerate() {
            let cfg = PipelineConfig {
                keep_frames: i % 2 == 0,
                ..Default::default()
            };
            crate::run::run_path(path, cfg, &mut kept).expect("readable");
        }
        kept.0
    }

    fn flow_of(i: usize) -> Option<Uuid> {
        (i % 3 != 0).then(|| Uuid::from_u128(i as u128 * 0x0123_4567_89ab_cdef))
    }

    #[test]
    fn held_records_are_lean_and_come_back_the_same() {
        let messages = committed_messages();
        assert_eq!(messages.len(), 782);
        let mut held = HeldRecords::default();
        let (mut lean, mut compact) = (0, 0);
        for (i, rec) in messages.iter().enumerate() {
            let blocks = held.full.len();
            let cost = held.push(rec.clone(), flow_of(i));
            let kept = CompactRecord::new(rec.clone()).held_bytes();
            // Frame copies cost both the same.
            if rec.frame_copy.is_none() {
                lean += cost;
                compact += kept;
            }
            // Except where a record opened a block (its cost the end of the one before).
            if i > 0 && held.full.len() == blocks {
                assert!(cost + 400 <= kept, "frame {}: {cost} bytes", rec.frame);
            }
        }
        assert!(lean * 3 < compact, "{lean} bytes held, {compact} compact");
        // Blocks as they were filled (the unused ends of full ones too), what was kept
        // aside, and a slot for each block.
        let aside = &held.aside;
        let frame = |f: &Arc<FrameCopy>| size_of::<Arc<FrameCopy>>() + f.data.len();
        let frames: usize = aside.frames.iter().map(frame).sum();
        let finding = |f: &Finding| size_of::<Finding>() + f.message.len();
        let findings: usize = aside.findings.iter().map(finding).sum();
        let blocks: usize = held.full.iter().map(Vec::capacity).sum();
        let slots = size_of::<Vec<u8>>() * (held.full.len() + 1);
        assert_eq!(
            held.bytes(),
            blocks + held.current.len() + frames + findings + slots
        );
        // What the records covered: findings the checks appended (faulty-server's answers),
        // IPv6, names, frames kept, each kind of body, none held whole.
        assert_eq!(held.aside.findings.len(), 2);
        assert!(held.aside.bodies.is_empty());
        let count = |f: &dyn Fn(&SqosRecord) -> bool| messages.iter().filter(|r| f(r)).count();
        assert!(count(&|r| r.src.is_ipv6()) > 0);
        assert!(count(&|r| r.file_name.is_some()) > 0);
        assert!(count(&|r| r.frame_copy.is_some() && r.first_frame.is_some()) > 0);
        let kinds = [
            count(&|r| matches!(r.body, SqosBody::Request(_))),
            count(&|r| matches!(r.body, SqosBody::Response(_))),
            count(&|r| matches!(r.body, SqosBody::NoBuffer)),
        ];
        assert_eq!(kinds, [392, 297, 93]);

        let mut n = 0;
        for (i, ((again, flow), rec)) in held.into_iter().zip(&messages).enumerate() {
            assert_eq!(
                format!("{again:?}"),
                format!("{rec:?}"),
                "frame {}",
                rec.frame
            );
            assert_eq!(flow, flow_of(i));
            n += 1;
        }
        assert_eq!(n, messages.len());
    }

    #[test]
    fn a_body_the_buffer_does_not_give_again_is_held_aside() {
        let messages = committed_messages();
        let decoded =
            |r: &&SqosRecord| matches!(&r.body, SqosBody::Request(d) if d.message.is_some());
        let plain = messages.iter().find(decoded).expect("a decoded request");
        let found = messages
            .iter()
            .filter(decoded)
            .find(|r| !r.body.findings().is_empty())
            .expect("a decoded request with findings");
        // Another limit than the buffer's; a finding before the decoder's; no field list.
        let (mut limit, mut first, mut fieldless) = (plain.clone(), found.clone(), plain.clone());
        if let SqosBody::Request(Dissection {
            message: Some(m), ..
        }) = &mut limit.body
        {
            m.limit += 1;
        }
        if let SqosBody::Request(d) = &mut first.body {
            let not_the_decoders = Finding::new(FindingCode::ShortBuffer, "not the decoder's");
            d.findings.insert(0, not_the_decoders);
        }
        if let SqosBody::Request(d) = &mut fieldless.body {
            d.fields.clear();
        }
        let mut held = HeldRecords::default();
        let mut changed = Vec::new();
        for (original, rec) in [(plain, limit), (found, first), (plain, fieldless)] {
            assert_ne!(format!("{rec:?}"), format!("{original:?}"));
            // A copy's lists are as long as they are full, as the body held aside is.
            let aside = size_of::<SqosBody>() + rec.clone().body.heap_bytes();
            let frame = rec
                .frame_copy
                .as_ref()
                .map_or(0, |f| size_of::<Arc<FrameCopy>>() + f.data.len());
            let before = held.current.len();
            let cost = held.push(rec.clone(), None);
            // The first opened the first block.
            let opened = if before == 0 { size_of::<Vec<u8>>() } else { 0 };
            assert_eq!(cost, held.current.len() - before + aside + frame + opened);
            changed.push(rec);
        }
        assert_eq!(held.aside.bodies.len(), 3);
        let again: Vec<_> = held.into_iter().map(|(r, _)| format!("{r:?}")).collect();
        let expected: Vec<_> = changed.iter().map(|r| format!("{r:?}")).collect();
        assert_eq!(again, expected);
    }

    #[test]
    fn a_record_larger_than_a_block_gets_a_block_of_its_own() {
        let messages = committed_messages();
        let mut big = messages[0].clone();
        big.file_name = Some("n".repeat(BLOCK));
        let mut held = HeldRecords::default();
        held.push(messages[1].clone(), None);
        held.push(big.clone(), None);
        held.push(messages[2].clone(), None);
        assert_eq!(held.full.len(), 2);
        assert!(held.full[1].len() > BLOCK);
        let again: Vec<_> = held.into_iter().map(|(r, _)| format!("{r:?}")).collect();
        let expected: Vec<_> = [&messages[1], &big, &messages[2]]
            .iter()
            .map(|r| format!("{r:?}"))
            .collect();
        assert_eq!(again, expected);
    }
}
