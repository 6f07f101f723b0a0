//! Where a capture file's records can be cut into parts, each walked on its own thread: a
//! legacy pcap file's records, and (for the indexer, `capture::index`) a pcapng file's blocks.
//!
//! A pcap file has no marks between its records: the next record starts where the last one's
//! length says. On one core the walk along that chain is bound by the core's memory (each
//! record's length waits for its line), not the machine's: two walks at once on two cores
//! take about as long as one. So the walk scales only if each core walks its own part of the
//! file, and a part other than the first must find where a record starts by itself.
//!
//! [`record_start`] finds it from the bytes alone: the first offset from which a chain of
//! records all look sane (sizes, fractions of a second, times close together). That can be
//! fooled (a frame's payload may hold such a chain), so a cut found this way is only a guess,
//! and the reader of the part before it checks it: its walk from a known record start ends
//! exactly at the cut when the cut is a record start, and runs past it (a record cut off)
//! when it is not. The first part starts after the file header, so by induction every cut a
//! clean end confirms is right.

use std::ops::Range;

/// Records that must chain from a candidate start before it is taken (or reach the end).
const CHAIN: usize = 16;
/// Largest captured length a plausible record has: tcpdump's largest snap length.
const MAX_CAPTURED: u32 = 256 << 10;
/// Largest original length (segmentation offload hands the capture frames of up to 256 KiB;
/// room for more).
const MAX_ORIGINAL: u32 = 16 << 20;
/// Records of a chain lie within this many seconds of its first.
const SPREAD_SECS: u32 = 86_400;
/// How far past the asked offset a record start is looked for: more than any record.
const SEARCH: usize = 2 * (MAX_CAPTURED as usize + 24);

/// Largest pcapng block a chain takes: an enhanced packet block of the largest snap length,
/// its options included.
const MAX_BLOCK: u32 = MAX_CAPTURED + (4 << 10);
/// A pcapng section header block's type: the same in either byte order.
const SECTION_HEADER: u32 = 0x0A0D_0D0A;
/// pcapng block types a chain takes besides the section header: those the format defines
/// (interface description 1 to decryption secrets 10) and custom blocks.
const BLOCK_TYPES: [u32; 3] = [0x0000_0BAD, 0x4000_0BAD, SECTION_HEADER];

/// How a capture file lays out its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordLayout {
    pub(crate) big_endian: bool,
    pub(crate) kind: RecordKind,
}

/// A legacy pcap file's record headers, or a pcapng file's blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordKind {
    Pcap {
        nanosecond: bool,
        /// 16, or 24 for the "modified" (Kuznetzov) format.
        header_len: usize,
    },
    /// Blocks of a section of one byte order: a section of the other one is not sane.
    PcapNg,
}

impl RecordLayout {
    fn u32_at(&self, b: &[u8], at: usize) -> Option<u32> {
        let w: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(if self.big_endian {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        })
    }

    /// The record at `at` if its header looks sane and the record lies within `bytes`: its
    /// seconds (0 for a pcapng block) and its length.
    fn sane(&self, bytes: &[u8], at: usize) -> Option<(u32, usize)> {
        let (nanosecond, header_len) = match self.kind {
            RecordKind::Pcap {
                nanosecond,
                header_len,
            } => (nanosecond, header_len),
            RecordKind::PcapNg => return self.sane_block(bytes, at).map(|len| (0, len)),
        };
        let secs = self.u32_at(bytes, at)?;
        let frac = self.u32_at(bytes, at + 4)?;
        let captured = self.u32_at(bytes, at + 8)?;
        let original = self.u32_at(bytes, at + 12)?;
        let frac_max = if nanosecond { 1_000_000_000 } else { 1_000_000 };
        let ok = frac < frac_max
            && captured > 0
            && captured <= MAX_CAPTURED
            && captured <= original
            && original <= MAX_ORIGINAL;
        let len = header_len + captured as usize;
        (ok && at.checked_add(len)? <= bytes.len()).then_some((secs, len))
    }

    /// The pcapng block at `at` if its type is one the format knows, its length a multiple
    /// of four within [`MAX_BLOCK`], and it lies within `bytes`: its length. Its trailing copy
    /// of the length is not read (a line more for each block): a walk from a known block start
    /// needs none, and a guess checks it ([`RecordLayout::chains`]).
    fn sane_block(&self, bytes: &[u8], at: usize) -> Option<usize> {
        let kind = self.u32_at(bytes, at)?;
        let len = self.u32_at(bytes, at + 4)?;
        let known = (1..=10).contains(&kind) || BLOCK_TYPES.contains(&kind);
        let ok = known && len >= 12 && len % 4 == 0 && len <= MAX_BLOCK;
        (ok && at.checked_add(len as usize)? <= bytes.len()).then_some(len as usize)
    }

    /// Whether the record at `at`, of `len` bytes, ends as its kind says: a pcapng block
    /// with the trailing copy of its length (a legacy pcap record has no trailer).
    fn ends_right(&self, bytes: &[u8], at: usize, len: usize) -> bool {
        match self.kind {
            RecordKind::Pcap { .. } => true,
            RecordKind::PcapNg => {
                let trailer = at.checked_add(len).and_then(|end| end.checked_sub(4));
                trailer.and_then(|t| self.u32_at(bytes, t)) == Some(len as u32)
            }
        }
    }

    /// The length of the record at `at` of `bytes` where its header looks sane and it lies
    /// within `bytes`.
    pub(crate) fn record_len(&self, bytes: &[u8], at: usize) -> Option<usize> {
        self.sane(bytes, at).map(|(_, len)| len)
    }

    /// Whether [`CHAIN`] sane records follow each other from `at`, or sane records reach the
    /// end of `bytes` exactly.
    fn chains(&self, bytes: &[u8], at: usize) -> bool {
        let Some((first, mut len)) = self.sane(bytes, at) else {
            return false;
        };
        let mut pos = at;
        for _ in 1..CHAIN {
            if !self.ends_right(bytes, pos, len) {
                return false;
            }
            pos += len;
            if pos == bytes.len() {
                return true;
            }
            match self.sane(bytes, pos) {
                Some((secs, l)) if secs.abs_diff(first) <= SPREAD_SECS => len = l,
                _ => return false,
            }
        }
        self.ends_right(bytes, pos, len)
    }
}

/// The first offset in `bytes` (a whole capture file), at `from` or after, where a chain
/// of sane records starts: a guess at the next record start, to be checked (module doc).
/// `None`: none within [`SEARCH`] bytes, or none before the end.
pub(crate) fn record_start(bytes: &[u8], from: usize, layout: RecordLayout) -> Option<usize> {
    let end = from.saturating_add(SEARCH).min(bytes.len());
    (from..end).find(|&at| layout.chains(bytes, at))
}

/// Up to `n` parts of about equal size of the records in `bytes[first..]` (`first`: where the
/// first record starts), cut at guessed record starts (at least one part; cuts not found are
/// left out).
pub(crate) fn cut(bytes: &[u8], first: usize, n: usize, layout: RecordLayout) -> Vec<Range<usize>> {
    let len = bytes.len();
    let mut starts = vec![first];
    let step = (len.saturating_sub(first) / n.max(1)).max(1);
    for k in 1..n.max(1) {
        let from = first.saturating_add(step.saturating_mul(k));
        let last = starts.last().copied().unwrap_or(first);
        if let Some(at) = record_start(bytes, from, layout).filter(|&at| at > last && at < len) {
            starts.push(at);
        }
    }
    let ends = starts.iter().skip(1).copied().chain([len]);
    starts.iter().zip(ends).map(|(&s, e)| s..e).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::capture::{PcapWriter, Timestamp};

    pub(crate) const LAYOUT: RecordLayout = RecordLayout {
        big_endian: false,
        kind: RecordKind::Pcap {
            nanosecond: false,
            header_len: 16,
        },
    };

    /// A legacy pcap file of `frames` records of varied lengths, and where each starts.
    pub(crate) fn capture(frames: u32) -> (Vec<u8>, Vec<usize>) {
        let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
        let mut starts = Vec::new();
        let mut at = 24;
        for i in 0..frames {
            let len = [60, 1514, 9000, 100, 66][i as usize % 5];
            w.write_packet(Timestamp(i64::from(i) * 1_000_000), &vec![i as u8; len])
                .unwrap();
            starts.push(at);
            at += 16 + len;
        }
        (w.into_inner(), starts)
    }

    /// A pcapng file in `big_endian` byte order: two interfaces, `frames` packets of varied
    /// lengths on both, a custom block every 100; and where each block starts.
    pub(crate) fn capture_ng(frames: u32, big_endian: bool) -> (Vec<u8>, Vec<usize>) {
        use crate::capture::PcapngWriter;
        let mut w = PcapngWriter::with_byte_order(Vec::new(), big_endian).unwrap();
        let a = w.add_interface(1, 0, 6).unwrap();
        let b = w.add_interface(1, 0, 9).unwrap();
        for i in 0..frames {
            let len = [60, 1514, 9000, 100, 66][i as usize % 5];
            let ts = Timestamp(1_700_000_000_000_000_000 + i64::from(i) * 1_000_000);
            let ifc = if i % 3 == 0 { b } else { a };
            w.write_epb(ifc, ts, &vec![i as u8; len], len as u32)
                .unwrap();
            if i % 100 == 99 {
                // A custom block (PEN 32473, the documentation one), padded.
                w.write_block(0x0000_0BAD, b"\0\0\x7e\xd9sqos test")
                    .unwrap();
            }
        }
        let bytes = w.into_inner();
        let word = |at: usize| {
            let b: [u8; 4] = bytes[at..at + 4].try_into().unwrap();
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let mut starts = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            starts.push(at);
            at += word(at + 4) as usize;
        }
        assert_eq!(at, bytes.len());
        (bytes, starts)
    }

    /// A pcapng file's block starts are found from anywhere, in either byte order: packets,
    /// the section and interface headers, custom blocks.
    #[test]
    fn the_next_pcapng_block_start_is_found_from_anywhere() {
        for big_endian in [false, true] {
            let (bytes, starts) = capture_ng(600, big_endian);
            assert!(starts.len() > 600 + 3, "{}", starts.len());
            let layout = RecordLayout {
                big_endian,
                kind: RecordKind::PcapNg,
            };
            for from in (0..bytes.len())
                .step_by(61)
                .chain(starts.iter().map(|s| s + 1))
            {
                let want = starts.iter().copied().find(|&s| s >= from);
                assert_eq!(
                    record_start(&bytes, from, layout),
                    want,
                    "from {from}, big endian {big_endian}"
                );
            }
            // The other byte order finds nothing.
            let other = RecordLayout {
                big_endian: !big_endian,
                ..layout
            };
            assert_eq!(record_start(&bytes, 1, other), None);
        }
    }

    #[test]
    fn the_next_record_start_is_found_from_anywhere() {
        let (bytes, starts) = capture(200);
        for from in (24..bytes.len())
            .step_by(61)
            .chain(starts.iter().map(|s| s + 1))
        {
            let want = starts.iter().copied().find(|&s| s >= from);
            assert_eq!(record_start(&bytes, from, LAYOUT), want, "from {from}");
        }
    }

    #[test]
    fn no_start_where_nothing_looks_like_records() {
        let zeros = vec![0u8; 1 << 16];
        assert_eq!(record_start(&zeros, 0, LAYOUT), None);
        let ff = vec![0xffu8; 1 << 16];
        assert_eq!(record_start(&ff, 0, LAYOUT), None);
    }

    #[test]
    fn a_file_is_cut_at_record_starts() {
        let (bytes, starts) = capture(3000);
        for n in [1, 2, 3, 7, 16] {
            let parts = cut(&bytes, 24, n, LAYOUT);
            assert_eq!(parts.len(), n);
            assert_eq!(parts[0].start, 24);
            assert_eq!(parts[n - 1].end, bytes.len());
            for w in parts.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert!(starts.contains(&w[1].start), "{:?}", w[1]);
            }
        }
    }
}
