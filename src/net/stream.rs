//! One direction of a TCP connection: sequence numbers mapped to 64-bit stream offsets, bytes
//! delivered in order, out-of-order bytes held until the hole before them is filled or given up.
//!
//! Offsets are relative to the first byte of the stream (ISN + 1, or the first sequence number
//! seen when the SYN was not captured). A sequence number is placed relative to the next
//! expected one with serial-number arithmetic (RFC 1982), so wraparound needs no special case.
//!
//! Overlaps: the first copy of a byte that was seen wins. Delivered bytes cannot be recalled,
//! so keeping the first copy for buffered bytes too makes the result independent of whether
//! that first copy happened to arrive in order or not.

use std::collections::BTreeMap;

use super::stats::ReassemblyStats;
use crate::budget::Kind;

/// What one held chunk costs besides its bytes (B-tree entry, allocation): a one-byte segment
/// or a snaplen-cut chunk is not free.
pub(crate) const CHUNK_COST: usize = Kind::Reassembly.entry_cost();

/// Receives what one direction delivers.
pub(crate) trait Emit {
    fn data(&mut self, bytes: &[u8]);
    fn gap(&mut self, missing: u64);
}

/// Out-of-order content: captured bytes, or bytes known to be on the wire but cut by snaplen.
enum Chunk {
    Data(Vec<u8>),
    Missing(u64),
}

impl Chunk {
    fn len(&self) -> u64 {
        match self {
            Chunk::Data(d) => d.len() as u64,
            Chunk::Missing(n) => *n,
        }
    }
}

/// Segments further ahead than this are not from this stream's window (TCP windows are at
/// most 1 GiB); they are dropped rather than buffered behind a hole that large.
const MAX_AHEAD: u64 = 1 << 30;

#[derive(Default)]
pub(crate) struct HalfStream {
    /// Sequence number of stream offset 0; meaningful once `started`.
    base: u32,
    started: bool,
    /// Offset of the next byte to deliver.
    next: u64,
    ooo: BTreeMap<u64, Chunk>,
    /// Captured bytes held in `ooo`.
    buffered: usize,
    /// Chunks in `ooo` (captured or missing).
    chunks: usize,
    /// Offset of the FIN (one past the last data byte).
    fin: Option<u64>,
    /// Highest offset acknowledged by the peer.
    acked: u64,
    /// The connection's segment count when the peer's ACK was first seen passing bytes we
    /// do not have; the hole is given up once the ACK has aged (capture reordering).
    acked_hole_since: Option<u64>,
}

impl HalfStream {
    pub(crate) fn is_started(&self) -> bool {
        self.started
    }

    /// Anchors offset 0 at `seq`.
    pub(crate) fn start(&mut self, seq: u32) {
        *self = HalfStream {
            base: seq,
            started: true,
            ..HalfStream::default()
        };
    }

    pub(crate) fn base(&self) -> u32 {
        self.base
    }

    pub(crate) fn next_offset(&self) -> u64 {
        self.next
    }

    pub(crate) fn buffered(&self) -> usize {
        self.buffered
    }

    /// Chunks held.
    pub(crate) fn chunks(&self) -> usize {
        self.chunks
    }

    /// What the held chunks cost: their bytes plus `CHUNK_COST` each.
    pub(crate) fn cost(&self) -> usize {
        self.buffered + self.chunks * CHUNK_COST
    }

    pub(crate) fn has_pending(&self) -> bool {
        !self.ooo.is_empty()
    }

    /// Stream offset of `seq`, placed within ±2 GiB of the next expected byte.
    fn offset_of(&self, seq: u32) -> i128 {
        let next_seq = self.base.wrapping_add(self.next as u32);
        i128::from(self.next) + i128::from(seq.wrapping_sub(next_seq) as i32)
    }

    /// Records the FIN at sequence number `seq` (the first one seen counts).
    pub(crate) fn set_fin(&mut self, seq: u32) {
        if self.fin.is_none() {
            if let Ok(off) = u64::try_from(self.offset_of(seq)) {
                self.fin = Some(off);
            }
        }
    }

    pub(crate) fn fin_reached(&self) -> bool {
        self.fin.is_some_and(|f| self.next >= f)
    }

    /// Bytes at `seq` are the next ones, with nothing held after them and no FIN: `push` hands
    /// them on as they are.
    #[inline]
    fn continues_at(&self, seq: u32) -> bool {
        self.ooo.is_empty() && self.fin.is_none() && self.is_next_seq(seq)
    }

    /// `seq` is the sequence number of the next byte.
    #[inline]
    fn is_next_seq(&self, seq: u32) -> bool {
        seq == self.base.wrapping_add(self.next as u32)
    }

    /// `push` of `len` captured bytes at `seq` would change nothing but the next offset, after
    /// handing them on as they are (or nothing at all: `len` 0) — the bulk path's segment.
    #[inline]
    pub(crate) fn takes_next(&self, seq: u32, len: usize) -> bool {
        self.started && (len == 0 || self.continues_at(seq))
    }

    /// `len` bytes that `takes_next` accepted were handed on (by the bulk path).
    #[inline]
    pub(crate) fn advance(&mut self, len: usize) {
        self.next += len as u64;
    }

    /// Takes in a segment's data: `payload` captured bytes at `seq`, followed by `missing`
    /// bytes the capture did not keep.
    pub(crate) fn push<E: Emit>(
        &mut self,
        seq: u32,
        payload: &[u8],
        missing: u64,
        stats: &mut ReassemblyStats,
        emit: &mut E,
    ) {
        let len = payload.len() as u64 + missing;
        if len == 0 {
            return;
        }
        if missing == 0 && self.continues_at(seq) {
            // The usual segment: the next bytes, all captured, nothing held or closed: what
            // the general case below does with it, without its offset arithmetic.
            emit.data(payload);
            self.next += len;
            return;
        }
        let start = self.offset_of(seq);
        let end = start + i128::from(len);
        let next = i128::from(self.next);
        if end <= next {
            stats.retransmissions += 1;
            return;
        }
        if self.fin.is_some_and(|f| start >= i128::from(f)) {
            // Nothing follows a FIN in its direction.
            stats.dropped_bytes += len;
            return;
        }
        if start > next {
            if (start - next) as u64 > MAX_AHEAD {
                stats.dropped_bytes += len;
                return;
            }
            stats.out_of_order += 1;
            if self.insert(start as u64, end as u64, payload) {
                stats.overlaps += 1;
            }
            return;
        }
        if start < next || self.first_pending().is_some_and(|p| i128::from(p) < end) {
            stats.overlaps += 1;
        }
        // In order (possibly after trimming bytes already delivered): hand the frame's bytes
        // over as they are, except where an earlier buffered copy exists (first copy wins).
        let seg = Segment { start, payload };
        let end = end as u64;
        if self.ooo.is_empty() {
            // The usual case, nothing buffered: no lookups in the out-of-order map.
            seg.emit_range(self.next, end, stats, emit);
            self.next = end;
            return;
        }
        while self.next < end {
            self.drain(stats, emit);
            if self.next >= end {
                break;
            }
            let upto = self.first_pending().map_or(end, |p| p.min(end));
            seg.emit_range(self.next, upto, stats, emit);
            self.next = upto;
        }
        self.drain(stats, emit);
    }

    fn first_pending(&self) -> Option<u64> {
        if self.ooo.is_empty() {
            return None;
        }
        self.ooo.keys().next().copied()
    }

    /// Delivers buffered chunks that now continue the stream.
    fn drain<E: Emit>(&mut self, stats: &mut ReassemblyStats, emit: &mut E) {
        while let Some(entry) = self.ooo.first_entry() {
            let at = *entry.key();
            if at > self.next {
                break;
            }
            let chunk = entry.remove();
            self.chunks -= 1;
            let end = at + chunk.len();
            let skip = self.next - at;
            match &chunk {
                Chunk::Data(d) => {
                    self.buffered -= d.len();
                    if end > self.next {
                        emit.data(d.get(skip as usize..).unwrap_or_default());
                    }
                }
                Chunk::Missing(n) => {
                    if end > self.next {
                        gap(n - skip, stats, emit);
                    }
                }
            }
            self.next = self.next.max(end);
        }
    }

    /// Buffers the parts of [start, end) not held yet. True if some part was held already.
    fn insert(&mut self, start: u64, end: u64, payload: &[u8]) -> bool {
        let from = self
            .ooo
            .range(..=start)
            .next_back()
            .map_or(start, |(k, _)| *k);
        let held: Vec<(u64, u64)> = self
            .ooo
            .range(from..end)
            .map(|(k, c)| (*k, *k + c.len()))
            .filter(|&(_, e)| e > start)
            .collect();
        let seg = Segment {
            start: i128::from(start),
            payload,
        };
        let mut pos = start;
        for &(a, b) in &held {
            if a > pos {
                self.store(&seg, pos, a.min(end));
            }
            pos = pos.max(b);
            if pos >= end {
                break;
            }
        }
        if pos < end {
            self.store(&seg, pos, end);
        }
        !held.is_empty()
    }

    fn store(&mut self, seg: &Segment<'_>, from: u64, to: u64) {
        let (bytes, miss_from) = seg.split(from, to);
        if !bytes.is_empty() {
            self.put(from, Chunk::Data(bytes.to_vec()));
        }
        if miss_from < to {
            self.put(miss_from, Chunk::Missing(to - miss_from));
        }
    }

    fn put(&mut self, at: u64, chunk: Chunk) {
        if let Chunk::Data(d) = &chunk {
            self.buffered += d.len();
        }
        self.chunks += 1;
        // Keys are the starts of disjoint ranges, so none is replaced; account for it anyway.
        if let Some(old) = self.ooo.insert(at, chunk) {
            self.chunks -= 1;
            if let Chunk::Data(d) = old {
                self.buffered -= d.len();
            }
        }
    }

    /// Gives up everything before offset `to` that did not arrive, delivering what did.
    pub(crate) fn skip_to<E: Emit>(
        &mut self,
        to: u64,
        stats: &mut ReassemblyStats,
        emit: &mut E,
    ) -> u64 {
        let mut skipped = 0;
        self.drain(stats, emit);
        while self.next < to {
            let upto = self.first_pending().map_or(to, |p| p.min(to));
            gap(upto - self.next, stats, emit);
            skipped += upto - self.next;
            self.next = upto;
            self.drain(stats, emit);
        }
        skipped
    }

    /// Gives up the hole in front of the first buffered chunk. Returns the bytes given up.
    pub(crate) fn skip_first_hole<E: Emit>(
        &mut self,
        stats: &mut ReassemblyStats,
        emit: &mut E,
    ) -> u64 {
        match self.first_pending() {
            Some(p) => self.skip_to(p, stats, emit),
            None => 0,
        }
    }

    /// Delivers everything buffered, giving up every hole.
    pub(crate) fn flush<E: Emit>(&mut self, stats: &mut ReassemblyStats, emit: &mut E) {
        while self.has_pending() {
            self.skip_first_hole(stats, emit);
        }
    }

    /// Where the peer's acknowledgements show the receiver got data up to, if that is beyond
    /// what we have. A 1-byte excess with nothing buffered is the ACK of a FIN we did not see.
    pub(crate) fn acked_hole_end(&self) -> Option<u64> {
        self.hole_end(self.acked)
    }

    /// [`HalfStream::acked_hole_end`] were the peer's acknowledgements up to `acked`.
    fn hole_end(&self, acked: u64) -> Option<u64> {
        let acked = match self.fin {
            Some(f) => acked.min(f),
            None => acked,
        };
        if acked <= self.next || (acked == self.next + 1 && self.ooo.is_empty()) {
            None
        } else {
            Some(acked)
        }
    }

    /// What `acked` becomes when the peer acknowledges everything before `ack`.
    fn acked_after(&self, ack: u32) -> u64 {
        match u64::try_from(self.offset_of(ack)) {
            Ok(off) => self.acked.max(off),
            Err(_) => self.acked,
        }
    }

    /// [`HalfStream::takes_next`] of a plain half ([`HalfStream::is_plain`]: started, nothing
    /// held, no FIN), which a bulk lane's halves stay for its run: the sequence number alone
    /// decides. Checked against `takes_next` in debug builds.
    #[inline]
    pub(crate) fn plain_takes_next(&self, seq: u32, len: usize) -> bool {
        debug_assert!(self.is_plain());
        let takes = len == 0 || self.is_next_seq(seq);
        debug_assert_eq!(takes, self.takes_next(seq, len));
        takes
    }

    /// [`HalfStream::on_peer_ack`] of `ack` on a plain half ([`HalfStream::is_plain`]), which
    /// a bulk lane's halves stay for its run, when it finds no acknowledged hole (true); false,
    /// nothing changed, when it would (the lane leaves such a segment to the full path). With
    /// nothing held and no FIN, a hole is acknowledged only past the byte after the next one;
    /// checked against `hole_end` in debug builds.
    #[inline]
    pub(crate) fn plain_peer_ack(&mut self, ack: u32) -> bool {
        debug_assert!(self.is_plain());
        let acked = self.acked_after(ack);
        let in_order = acked <= self.next + 1;
        debug_assert_eq!(in_order, self.hole_end(acked).is_none());
        if in_order {
            self.acked = acked;
        }
        in_order
    }

    /// The peer acknowledged everything before `ack` (a sequence number of this direction).
    /// `now` is the connection's segment count.
    pub(crate) fn on_peer_ack(&mut self, ack: u32, now: u64) {
        if !self.started {
            return;
        }
        self.acked = self.acked_after(ack);
        match (self.acked_hole_end(), self.acked_hole_since) {
            (None, _) => self.acked_hole_since = None,
            (Some(_), None) => self.acked_hole_since = Some(now),
            (Some(_), Some(_)) => {}
        }
    }

    /// Nothing held, no FIN, no acknowledged hole waiting, started: a segment of this
    /// direction changes nothing but the next offset and the peer's acknowledgement (the
    /// bulk lane's precondition, [`crate::net::Reassembler::bulk_lane`]).
    pub(crate) fn is_plain(&self) -> bool {
        self.started && self.ooo.is_empty() && self.fin.is_none() && self.acked_hole_since.is_none()
    }

    /// The peer acknowledged bytes that did not arrive: `resolve_acked_hole` has work.
    pub(crate) fn acked_hole_waiting(&self) -> bool {
        self.acked_hole_since.is_some()
    }

    /// Gives up the acknowledged hole once its evidence is `window` segments old.
    pub(crate) fn resolve_acked_hole<E: Emit>(
        &mut self,
        now: u64,
        window: u64,
        stats: &mut ReassemblyStats,
        emit: &mut E,
    ) {
        let Some(since) = self.acked_hole_since else {
            return;
        };
        let Some(to) = self.acked_hole_end() else {
            // The bytes arrived after their ACK after all.
            self.acked_hole_since = None;
            return;
        };
        if now.saturating_sub(since) >= window {
            self.acked_hole_since = None;
            self.skip_to(to, stats, emit);
        }
    }

    /// End of input: deliver what is buffered and report holes the peer's ACKs prove.
    pub(crate) fn finish<E: Emit>(&mut self, stats: &mut ReassemblyStats, emit: &mut E) {
        if let Some(to) = self.acked_hole_end() {
            self.skip_to(to, stats, emit);
        }
        self.flush(stats, emit);
        self.acked_hole_since = None;
    }
}

fn gap<E: Emit>(n: u64, stats: &mut ReassemblyStats, emit: &mut E) {
    if n > 0 {
        stats.gaps += 1;
        stats.gap_bytes += n;
        emit.gap(n);
    }
}

/// A segment's content in stream offsets: captured bytes from `start`, then (up to the
/// segment's end) bytes cut by snaplen. `start` may lie before offset 0 (mid-stream starts).
struct Segment<'a> {
    start: i128,
    payload: &'a [u8],
}

impl<'a> Segment<'a> {
    /// The captured bytes within [from, to), and where the uncaptured part of it begins.
    fn split(&self, from: u64, to: u64) -> (&'a [u8], u64) {
        let data_end = self.start + self.payload.len() as i128;
        let (from_i, to_i) = (i128::from(from), i128::from(to));
        if from_i >= data_end {
            return (&[], from);
        }
        let upto = to_i.min(data_end);
        let lo = usize::try_from(from_i - self.start).unwrap_or(usize::MAX);
        let hi = usize::try_from(upto - self.start).unwrap_or(0);
        let bytes = self.payload.get(lo..hi).unwrap_or_default();
        (bytes, u64::try_from(upto).unwrap_or(to))
    }

    /// Emits the segment's content in [from, to) straight from the frame.
    fn emit_range<E: Emit>(&self, from: u64, to: u64, stats: &mut ReassemblyStats, emit: &mut E) {
        let (bytes, miss_from) = self.split(from, to);
        if !bytes.is_empty() {
            emit.data(bytes);
        }
        if miss_from < to {
            gap(to - miss_from, stats, emit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain half whose data began at `base` and of which `next` bytes came.
    fn plain(base: u32, next: usize) -> HalfStream {
        let mut half = HalfStream::default();
        half.start(base);
        half.advance(next);
        half
    }

    #[test]
    fn a_plain_half_takes_the_next_bytes_or_none() {
        let half = plain(u32::MAX - 4, 10);
        let next = (u32::MAX - 4).wrapping_add(10);
        assert!(half.plain_takes_next(next, 1448));
        assert!(half.plain_takes_next(next, 1));
        assert!(half.plain_takes_next(7, 0), "no bytes: any number");
        assert!(!half.plain_takes_next(next + 1, 1));
        assert!(
            !half.plain_takes_next(next - 1, 1),
            "a byte delivered already"
        );
    }

    #[test]
    fn a_plain_half_acknowledged_past_the_byte_after_the_next_has_a_hole() {
        let mut half = plain(1000, 100);
        assert!(half.plain_peer_ack(1050));
        assert_eq!(half.acked, 50);
        assert!(
            half.plain_peer_ack(1101),
            "the byte after the next: no hole"
        );
        assert_eq!(half.acked, 101);
        assert!(
            half.plain_peer_ack(1020),
            "an older acknowledgement changes nothing"
        );
        assert_eq!(half.acked, 101);
        let mut half = plain(1000, 100);
        assert!(!half.plain_peer_ack(1102), "one byte not seen acknowledged");
        assert_eq!(half.acked, 0, "nothing changed");
    }

    proptest::proptest! {
        /// On a plain half the lane's shortcuts decide as the general rules do (each also
        /// asserts it in debug builds, as these tests run).
        #[test]
        fn plain_shortcuts_are_the_general_rules(
            base in proptest::num::u32::ANY,
            next in 0usize..100_000,
            acked in 0usize..100_002,
            seq_delta in -3i64..3,
            len in 0usize..3,
            ack_delta in -100_003i64..100_003,
        ) {
            let mut half = plain(base, next);
            half.acked = acked.min(next + 1) as u64;
            let next_seq = base.wrapping_add(next as u32);
            let seq = next_seq.wrapping_add(seq_delta as u32);
            proptest::prop_assert_eq!(half.plain_takes_next(seq, len), half.takes_next(seq, len));
            let ack = next_seq.wrapping_add(ack_delta as u32);
            let (before, after) = (half.acked, half.acked_after(ack));
            let no_hole = half.hole_end(after).is_none();
            proptest::prop_assert_eq!(half.plain_peer_ack(ack), no_hole);
            proptest::prop_assert_eq!(half.acked, if no_hole { after } else { before });
        }
    }
}
