//! TCP stream reassembly: the connection table (orientation by server port, ids in order of
//! first sight, SYN / FIN / RST, port reuse, eviction) and the bounds on buffering. Each
//! direction's byte stream is a `HalfStream` (module `stream`).
//!
//! When a hole is given up (reported with `on_gap`, delivery carries on after it):
//! - the peer's ACK passed the hole, so the receiver got bytes the capture lacks, and that ACK
//!   has been seen for `reorder_window` segments of the connection (captures may show an ACK
//!   before the data it acknowledges);
//! - a buffering bound is hit (per direction, or the memory budget's reassembly share over all
//!   connections): counted in the share and reported once (`Reassembler::memory`);
//! - the connection is reset, evicted, or the capture ends (`finish`).
//!
//! A snaplen-truncated segment in order delivers its captured bytes and then a gap of the
//! bytes it lacks at once: a copy of them cannot come later.

use std::collections::HashMap;

use foldhash::fast::{FixedState, RandomState};

use crate::budget::{Budget, Kind, MemoryUse, Share};
use crate::capture::{L3Packet, Timestamp};

use super::segment::{PlainSegment, WireEnds};
use super::stats::ReassemblyStats;
use super::stream::{Emit, HalfStream};
use super::{decode_tcp, ConnId, ConnKey, Dir, NetError, TcpFlags, TcpSegment};

mod lane;
pub use lane::{BulkLane, OtherConn, Taken};

#[derive(Clone, Debug)]
pub struct ReassemblyConfig {
    /// Server ports (445, and 139 where SMB2 runs over NetBIOS sessions as Wireshark also
    /// assumes). Segments with neither port on this list are ignored.
    pub ports: Vec<u16>,
    /// Most out-of-order data held per direction before a hole is given up, counted as bytes
    /// plus a chunk's cost per chunk held (`Kind::Reassembly.entry_cost`).
    pub max_buffered_per_dir: usize,
    /// The same over all connections: the memory budget's reassembly share.
    pub max_buffered_total: usize,
    /// Most connections tracked at once (the budget's connections share); beyond it closed,
    /// then least recently active, ones are forgotten.
    pub max_connections: usize,
    /// Segments of a connection to wait, after the peer acknowledged bytes that were not
    /// captured, before giving them up.
    pub reorder_window: u64,
    /// Plain segments of the last segment's connection take the bulk path
    /// ([`Reassembler::push_packet`]); off, every segment is decoded in full. The result is the
    /// same either way (the tests compare them).
    pub bulk_path: bool,
}

impl Default for ReassemblyConfig {
    fn default() -> Self {
        let mut cfg = ReassemblyConfig {
            ports: vec![445, 139],
            max_buffered_per_dir: 0,
            max_buffered_total: 0,
            max_connections: 0,
            reorder_window: 16,
            bulk_path: true,
        };
        cfg.set_budget(&Budget::default());
        cfg
    }
}

impl ReassemblyConfig {
    /// Bounds from the run's memory budget: its reassembly and connections shares; one
    /// direction may hold up to a quarter of the reassembly share (at most 4 MiB of data).
    pub fn set_budget(&mut self, budget: &Budget) {
        self.max_buffered_total = budget.limit(Kind::Reassembly);
        self.max_buffered_per_dir = (self.max_buffered_total / 4).min(4 << 20);
        self.max_connections = budget.share(Kind::Connections).max_entries();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseKind {
    Fin,
    Rst,
    /// Forgotten to make room in the connection table (or replaced on port reuse): nothing
    /// more will be delivered for it.
    Forgotten,
}

/// Something the reassembler wants the user to know about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetNote {
    /// The connection's start (SYN) was not captured.
    MidStream,
}

/// Receives reassembled, in-order stream data.
pub trait StreamSink {
    fn on_connection(&mut self, _conn: ConnId, _key: &ConnKey, _frame: u64, _ts: Timestamp) {}
    /// In-order bytes of one direction. `frame` is the frame whose arrival made them deliverable.
    fn on_data(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, data: &[u8]);
    /// The next `len` in-order bytes of one direction, offered without their content: a sink
    /// that would take them in `on_data` without looking at them and with nothing to report
    /// (the middle of a payload it only counts off) counts them off and says true. False, with
    /// nothing changed (the bulk lane counts off a run's bytes this way, within `skip_room`).
    fn skip_data(&mut self, _conn: ConnId, _dir: Dir, _frame: u64, _len: usize) -> bool {
        false
    }
    /// The most bytes of one direction `skip_data` would count off now, in one call or in
    /// several adding up to it (the bulk lane takes a run of segments within it).
    fn skip_room(&mut self, _conn: ConnId, _dir: Dir) -> u64 {
        0
    }
    /// `missing` bytes of one direction will never arrive; data resumes after them.
    fn on_gap(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, missing: u64);
    fn on_close(&mut self, _conn: ConnId, _how: CloseKind, _frame: u64, _ts: Timestamp) {}
    fn on_note(&mut self, _conn: ConnId, _frame: u64, _note: NetNote) {}
    /// The connection left the table (after its close, if it was open): its number is done.
    fn on_forget(&mut self, _conn: ConnId) {}
}

/// Routes one direction's deliveries to the sink with the connection's coordinates.
struct ToSink<'s, S> {
    sink: &'s mut S,
    conn: ConnId,
    dir: Dir,
    frame: u64,
    ts: Timestamp,
}

impl<S: StreamSink> Emit for ToSink<'_, S> {
    #[inline]
    fn data(&mut self, bytes: &[u8]) {
        self.sink
            .on_data(self.conn, self.dir, self.frame, self.ts, bytes);
    }
    fn gap(&mut self, missing: u64) {
        self.sink
            .on_gap(self.conn, self.dir, self.frame, self.ts, missing);
    }
}

/// Where deliveries come from: connection, and the frame that caused them.
#[derive(Clone, Copy)]
struct At {
    conn: ConnId,
    frame: u64,
    ts: Timestamp,
}

impl At {
    fn sink<S>(self, dir: Dir, sink: &mut S) -> ToSink<'_, S> {
        ToSink {
            sink,
            conn: self.conn,
            dir,
            frame: self.frame,
            ts: self.ts,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnState {
    Open,
    Closed(CloseKind),
}

/// A connection's reassembly state, part of its entry cost (`Kind::Connections`; checked by a
/// test in `pipeline`).
#[cfg(test)]
pub(crate) const CONN_BYTES: usize = std::mem::size_of::<Conn>();

struct Conn {
    id: ConnId,
    key: ConnKey,
    to_server: HalfStream,
    to_client: HalfStream,
    state: ConnState,
    /// The client's initial sequence number, when its SYN was seen (to tell a retransmitted
    /// SYN from a new connection on the same ports).
    client_isn: Option<u32>,
    /// Segments seen on this connection (the clock for the reorder window).
    segments: u64,
    /// Frame number of the last segment (for eviction order).
    last_frame: u64,
}

impl Conn {
    fn half(&mut self, dir: Dir) -> &mut HalfStream {
        match dir {
            Dir::ToServer => &mut self.to_server,
            Dir::ToClient => &mut self.to_client,
        }
    }
    /// Both halves plain ([`HalfStream::is_plain`]): what the bulk lane needs of a connection.
    #[inline]
    fn is_plain(&self) -> bool {
        self.to_server.is_plain() && self.to_client.is_plain()
    }
    fn chunks(&self) -> usize {
        self.to_server.chunks() + self.to_client.chunks()
    }
    fn bytes(&self) -> usize {
        self.to_server.buffered() + self.to_client.buffered()
    }
}

/// The connection of the last segment: bulk transfers send many in a row on one connection.
#[derive(Clone, Copy)]
struct Last {
    key: ConnKey,
    slot: usize,
    /// The header bytes of its plain segments to the server and to the client (IPv4), which
    /// the bulk path compares.
    wire: Option<[WireEnds; 2]>,
}

impl Last {
    fn new(key: ConnKey, slot: usize) -> Last {
        let to_server = WireEnds::of(key.client, key.server);
        let to_client = WireEnds::of(key.server, key.client);
        Last {
            key,
            slot,
            wire: to_server.zip(to_client).map(|(s, c)| [s, c]),
        }
    }
}

/// Entries of [`Recent`] (a power of two), in sets of two.
const RECENT: usize = 256;

/// Recently seen IPv4 connections by the 12 bytes that name their plain segments, in a table
/// of two-way sets, the last remembered of a set first: a plain segment of one of them takes
/// the bulk path without a full decode and a hash of its key (a host's channels interleave
/// their segments, so the last connection alone misses often, and two channels sharing one
/// entry each push the other out at every turn). An entry is the connection `by_key` gives
/// for its key; a clash only costs a miss, whatever the addresses.
struct Recent([Option<Last>; RECENT]);

impl Recent {
    /// The first entry of the set of `ends`: the hash's top bits, which all of its bytes move
    /// (its low bits leave out most of the ports, and a host's channels differ in little else).
    fn set(ends: &WireEnds) -> usize {
        const SET_BITS: u32 = (RECENT / 2).trailing_zeros();
        ((ends.symmetric_hash() >> (32 - SET_BITS)) as usize) * 2
    }

    /// The connection whose plain segments bear `ends`, and their direction.
    #[inline]
    fn find(&self, ends: &WireEnds) -> Option<(Last, Dir)> {
        let at = Self::set(ends);
        let set = self.0.get(at..at + 2)?;
        set.iter().flatten().find_map(|last| {
            let dir = ends.dir_in(&last.wire?)?;
            Some((*last, dir))
        })
    }

    /// `last` first in its set; the other one it held stays, the older one goes.
    fn insert(&mut self, last: Last) {
        let Some([to_server, _]) = last.wire else {
            return;
        };
        let at = Self::set(&to_server);
        let Some([first, second]) = self.0.get_mut(at..at + 2) else {
            return;
        };
        if !first.is_some_and(|f| f.slot == last.slot) {
            *second = *first;
        }
        *first = Some(last);
    }

    /// Forgets `slot`, the connection of `key` (its entry is in the set of its key: a slot is
    /// reused only after this).
    fn remove(&mut self, key: ConnKey, slot: usize) {
        let Some(to_server) = WireEnds::of(key.client, key.server) else {
            return;
        };
        let at = Self::set(&to_server);
        for e in self.0.iter_mut().skip(at).take(2) {
            if e.is_some_and(|l| l.slot == slot) {
                *e = None;
            }
        }
    }
}

pub struct Reassembler {
    cfg: ReassemblyConfig,
    stats: ReassemblyStats,
    /// Connections by slot; freed slots are reused.
    slots: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// By the peers' addresses: foldhash seeded per run, not SipHash (looked up for every
    /// segment the bulk path does not take).
    by_key: HashMap<ConnKey, usize, RandomState>,
    /// By our own numbers.
    by_id: HashMap<ConnId, usize, FixedState>,
    /// The last lookup.
    last: Option<Last>,
    /// Connections the bulk path finds by their segments' header bytes (see [`Recent`]).
    recent: Box<Recent>,
    next_id: u32,
    /// Out-of-order chunks held over all connections (the reassembly share).
    held: Share,
    /// Connections tracked (the connections share); drops are open connections forgotten.
    tracked: Share,
    /// Connections still to flush at the end (`finish_one`), last first.
    finishing: Option<Vec<(ConnId, usize)>>,
    last_frame: u64,
    last_ts: Timestamp,
}

impl Reassembler {
    pub fn new(cfg: ReassemblyConfig) -> Self {
        let held = Share::new(Kind::Reassembly, cfg.max_buffered_total);
        let tracked = Share::new(
            Kind::Connections,
            cfg.max_connections
                .saturating_mul(Kind::Connections.entry_cost()),
        );
        Reassembler {
            cfg,
            stats: ReassemblyStats::default(),
            slots: Vec::new(),
            free: Vec::new(),
            by_key: HashMap::default(),
            by_id: HashMap::default(),
            last: None,
            recent: Box::new(Recent([None; RECENT])),
            next_id: 0,
            held,
            tracked,
            finishing: None,
            last_frame: 0,
            last_ts: Timestamp::default(),
        }
    }

    /// Decodes the TCP segment in `packet` and pushes it; `Ok(false)`: not TCP.
    ///
    /// The bulk path: a plain segment ([`PlainSegment`]) of the last segment's connection that
    /// carries the next bytes of its direction, or none, with nothing held or closed there —
    /// nearly every frame of a bulk transfer, and its ACKs — is taken straight from the
    /// packet's bytes and handed over as they are (which the sink counts off unseen when it
    /// can, in the middle of a payload). It changes what
    /// [`Reassembler::push`] would; anything else is decoded in full and pushed.
    #[inline]
    pub fn push_packet<S: StreamSink>(
        &mut self,
        frame: u64,
        ts: Timestamp,
        packet: L3Packet<'_>,
        sink: &mut S,
    ) -> Result<bool, NetError> {
        if let L3Packet::Ipv4(bytes) = packet {
            if self.cfg.bulk_path && self.push_plain(frame, ts, bytes, sink) {
                return Ok(true);
            }
        }
        let Some(seg) = decode_tcp(packet)? else {
            return Ok(false);
        };
        self.push(frame, ts, &seg, sink);
        Ok(true)
    }

    /// The bulk path of [`Reassembler::push_packet`]: true when it took the segment, false
    /// (nothing changed) when the segment needs `push`.
    #[inline]
    fn push_plain<S: StreamSink>(
        &mut self,
        frame: u64,
        ts: Timestamp,
        packet: &[u8],
        sink: &mut S,
    ) -> bool {
        let Some(seg) = PlainSegment::of(packet) else {
            return false;
        };
        let last = match self.last {
            Some(Last {
                slot,
                wire: Some(ends),
                ..
            }) => seg.dir_in(&ends).map(|dir| (slot, dir)),
            _ => None,
        };
        let (slot, dir) = match last {
            Some(hit) => hit,
            // Another recent connection's: `push` would find the same one by its key (see
            // `remember`), and make it the last.
            None => {
                let Some((recent, dir)) = self.recent.find(&seg.ends) else {
                    return false;
                };
                self.last = Some(recent);
                (recent.slot, dir)
            }
        };
        let Some(conn) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return false;
        };
        let len = seg.payload.len();
        if conn.state != ConnState::Open || !conn.half(dir).takes_next(seg.seq, len) {
            return false;
        }
        // Taken: what `push` does with such a segment, the data step done by the half's `push`
        // (its in-order case, whose `on_data` the sink counts off when it can) — the full
        // decode and the connection lookup were all `push` would add.
        self.last_frame = frame;
        self.last_ts = ts;
        self.stats.segments += 1;
        self.stats.bulk_segments += 1;
        let before = (conn.chunks(), conn.bytes());
        conn.segments += 1;
        conn.last_frame = frame;
        if len > 0 {
            let to = At {
                conn: conn.id,
                frame,
                ts,
            };
            let half = conn.half(dir);
            half.push(
                seg.seq,
                seg.payload,
                0,
                &mut self.stats,
                &mut to.sink(dir, sink),
            );
        }
        // Nothing held before or after, no FIN, no acknowledged hole, the share within
        // bounds, and the acknowledgement in order (as the bulk lane finds its segments):
        // `after_data` would only record the acknowledgement.
        if before == (0, 0)
            && !self.held.over()
            && conn.is_plain()
            && conn.half(dir.reverse()).plain_peer_ack(seg.ack)
        {
            return true;
        }
        let flags = TcpFlags {
            ack: true,
            ..TcpFlags::default()
        };
        self.after_data(slot, dir, flags, seg.ack, before, frame, ts, sink);
        true
    }

    pub fn push<S: StreamSink>(
        &mut self,
        frame: u64,
        ts: Timestamp,
        seg: &TcpSegment<'_>,
        sink: &mut S,
    ) {
        self.last_frame = frame;
        self.last_ts = ts;
        let (slot, dir) = match self.last_hit(seg) {
            Some(hit) => {
                self.stats.segments += 1;
                hit
            }
            None => {
                let Some((key, dir)) = self.orient(seg) else {
                    return;
                };
                self.stats.segments += 1;
                let Some(slot) = self.slot_for(&key, dir, seg, frame, ts, sink) else {
                    return;
                };
                (slot, dir)
            }
        };
        let Some(conn) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let before = (conn.chunks(), conn.bytes());
        conn.segments += 1;
        conn.last_frame = frame;

        if let ConnState::Closed(_) = conn.state {
            // Late segments after FIN/RST: nothing more is delivered.
            if !seg.payload.is_empty() {
                self.stats.retransmissions += 1;
            }
            return;
        }

        let id = conn.id;
        let half = conn.half(dir);
        if seg.flags.syn {
            // Data, if any, starts after the SYN's own sequence number.
            // A retransmitted SYN changes nothing; a SYN before any data (re)anchors.
            let fresh = !half.is_started() || half.base() != seg.seq.wrapping_add(1);
            if fresh && half.next_offset() == 0 && !half.has_pending() {
                half.start(seg.seq.wrapping_add(1));
            }
        } else if !half.is_started() {
            half.start(seg.seq);
        }
        let data_seq = seg.seq.wrapping_add(u32::from(seg.flags.syn));
        let stats = &mut self.stats;
        let to = At {
            conn: id,
            frame,
            ts,
        };
        if !seg.flags.rst {
            let missing = u64::from(seg.missing);
            half.push(
                data_seq,
                seg.payload,
                missing,
                stats,
                &mut to.sink(dir, sink),
            );
            if seg.flags.fin {
                let data_len = seg.payload.len() as u64 + missing;
                half.set_fin(data_seq.wrapping_add(data_len as u32));
            }
        }
        self.after_data(slot, dir, seg.flags, seg.ack, before, frame, ts, sink);
    }

    /// The rest of a segment's push once its data is taken in: the peer's acknowledgement,
    /// holes it gives up, the end of the connection, the buffering bounds. `before`: what the
    /// connection held before the segment.
    #[allow(clippy::too_many_arguments)] // the segment's parts and where it came from
    fn after_data<S: StreamSink>(
        &mut self,
        slot: usize,
        dir: Dir,
        flags: TcpFlags,
        ack: u32,
        before: (usize, usize),
        frame: u64,
        ts: Timestamp,
        sink: &mut S,
    ) {
        let Some(conn) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let (id, now) = (conn.id, conn.segments);
        let stats = &mut self.stats;
        let to = At {
            conn: id,
            frame,
            ts,
        };
        if flags.ack {
            conn.half(dir.reverse()).on_peer_ack(ack, now);
        }
        let window = self.cfg.reorder_window;
        for d in [Dir::ToServer, Dir::ToClient] {
            let half = conn.half(d);
            if half.acked_hole_waiting() {
                half.resolve_acked_hole(now, window, stats, &mut to.sink(d, sink));
            }
        }
        if flags.rst {
            // Nothing buffered can be completed any more.
            for d in [Dir::ToServer, Dir::ToClient] {
                conn.half(d).flush(stats, &mut to.sink(d, sink));
            }
            conn.state = ConnState::Closed(CloseKind::Rst);
            sink.on_close(id, CloseKind::Rst, frame, ts);
        } else if conn.to_server.fin_reached() && conn.to_client.fin_reached() {
            conn.state = ConnState::Closed(CloseKind::Fin);
            sink.on_close(id, CloseKind::Fin, frame, ts);
        }

        let after = (conn.chunks(), conn.bytes());
        if after != before {
            self.held.release(before.0, before.1);
            self.held.charge(after.0, after.1);
        }
        // A connection that holds nothing is within its bound (the usual case: in order).
        if after != (0, 0) || self.held.over() {
            self.enforce_bounds(slot, dir, frame, ts, sink);
        }
    }

    /// End of capture: deliver what can be delivered, report what is missing.
    pub fn finish<S: StreamSink>(&mut self, sink: &mut S) {
        while self.finish_one(sink) {}
    }

    /// [`Reassembler::finish`] one connection at a time, in order of first sight, so a caller
    /// can pass on what each delivers before the next. False once all are done.
    pub fn finish_one<S: StreamSink>(&mut self, sink: &mut S) -> bool {
        self.finish_next(sink).is_some()
    }

    /// [`Reassembler::finish_one`], saying which connection it finished.
    pub fn finish_next<S: StreamSink>(&mut self, sink: &mut S) -> Option<ConnId> {
        let (frame, ts) = (self.last_frame, self.last_ts);
        let by_id = &self.by_id;
        let order = self.finishing.get_or_insert_with(|| {
            let mut order: Vec<(ConnId, usize)> = by_id.iter().map(|(id, s)| (*id, *s)).collect();
            order.sort_unstable_by(|a, b| b.cmp(a));
            order
        });
        let Some((id, slot)) = order.pop() else {
            self.held.clear();
            return None;
        };
        if let Some(conn) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            let held = (conn.chunks(), conn.bytes());
            for d in [Dir::ToServer, Dir::ToClient] {
                let mut o = ToSink {
                    sink: &mut *sink,
                    conn: id,
                    dir: d,
                    frame,
                    ts,
                };
                conn.half(d).finish(&mut self.stats, &mut o);
            }
            self.held.release(held.0, held.1);
        }
        Some(id)
    }

    pub fn stats(&self) -> &ReassemblyStats {
        &self.stats
    }

    /// Connection endpoints by id (`None` once the connection was forgotten).
    pub fn conn_key(&self, conn: ConnId) -> Option<&ConnKey> {
        let slot = *self.by_id.get(&conn)?;
        self.slots.get(slot)?.as_ref().map(|c| &c.key)
    }

    /// What the out-of-order data held over all connections costs (bytes plus chunks at
    /// their cost): what the reassembly share bounds.
    pub fn buffered_bytes(&self) -> usize {
        self.held.used()
    }

    /// The reassembly and connections shares: what they used and dropped.
    pub fn memory(&self) -> [MemoryUse; 2] {
        [self.tracked.usage(), self.held.usage()]
    }

    /// The connections and reassembly shares (in `memory`'s order): what each uses now and
    /// its peak since the last call (see [`Share::take_peak`]).
    pub fn take_peaks(&mut self) -> [(usize, usize); 2] {
        [
            (self.tracked.used(), self.tracked.take_peak()),
            (self.held.used(), self.held.take_peak()),
        ]
    }

    /// Connections currently tracked.
    pub fn tracked_connections(&self) -> usize {
        self.by_id.len()
    }

    /// The slot and direction of `seg` when it belongs to the connection of the last segment:
    /// bulk transfers send many in a row on one connection, whose orientation was settled when
    /// it was first seen. Not for a client SYN, which `orient` may orient afresh (a new
    /// connection on the reversed ports when both are server ports) and `slot_for` may take
    /// for a new connection on the same ports.
    fn last_hit(&self, seg: &TcpSegment<'_>) -> Option<(usize, Dir)> {
        let Last { key: k, slot, .. } = self.last.as_ref()?;
        if seg.flags.syn && !seg.flags.ack {
            return None;
        }
        if k.client == seg.src && k.server == seg.dst {
            Some((*slot, Dir::ToServer))
        } else if k.client == seg.dst && k.server == seg.src {
            Some((*slot, Dir::ToClient))
        } else {
            None
        }
    }

    /// Which side is the server, by port. When both ports are server ports, a SYN tells, or an
    /// existing connection, or else the destination is taken as the server.
    fn orient(&self, seg: &TcpSegment<'_>) -> Option<(ConnKey, Dir)> {
        let src_srv = self.cfg.ports.contains(&seg.src.port());
        let dst_srv = self.cfg.ports.contains(&seg.dst.port());
        let to_server = (
            ConnKey {
                client: seg.src,
                server: seg.dst,
            },
            Dir::ToServer,
        );
        let to_client = (
            ConnKey {
                client: seg.dst,
                server: seg.src,
            },
            Dir::ToClient,
        );
        match (src_srv, dst_srv) {
            (false, false) => None,
            (false, true) => Some(to_server),
            (true, false) => Some(to_client),
            (true, true) => {
                if (seg.flags.syn && !seg.flags.ack) || !self.by_key.contains_key(&to_client.0) {
                    Some(to_server)
                } else {
                    Some(to_client)
                }
            }
        }
    }

    /// The connection a segment belongs to, creating it (or replacing a finished one on port
    /// reuse) as needed.
    fn slot_for<S: StreamSink>(
        &mut self,
        key: &ConnKey,
        dir: Dir,
        seg: &TcpSegment<'_>,
        frame: u64,
        ts: Timestamp,
        sink: &mut S,
    ) -> Option<usize> {
        let existing = match self.last {
            Some(last) if last.key == *key => Some(last.slot),
            _ => self.by_key.get(key).copied(),
        };
        let is_client_syn = seg.flags.syn && !seg.flags.ack && dir == Dir::ToServer;
        if let Some(slot) = existing {
            let conn = self.slots.get(slot).and_then(Option::as_ref)?;
            let reused = is_client_syn
                && match conn.state {
                    ConnState::Closed(_) => true,
                    // A SYN with a new ISN on a connection that already carried data: the
                    // close was not captured.
                    ConnState::Open => {
                        conn.client_isn != Some(seg.seq)
                            && (conn.to_server.next_offset() > 0
                                || conn.to_client.next_offset() > 0)
                    }
                };
            if !reused {
                self.remember(*key, slot);
                return Some(slot);
            }
            self.forget(slot, frame, ts, sink);
        } else if seg.flags.rst {
            // A reset of a connection never seen: nothing to track.
            return None;
        }
        if self.by_id.len() >= self.cfg.max_connections.max(1) {
            self.evict(frame, ts, sink);
        }
        self.tracked.charge(1, 0);
        let id = ConnId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        self.stats.connections += 1;
        let conn = Conn {
            id,
            key: *key,
            to_server: HalfStream::default(),
            to_client: HalfStream::default(),
            state: ConnState::Open,
            client_isn: is_client_syn.then_some(seg.seq),
            segments: 0,
            last_frame: frame,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                if let Some(place) = self.slots.get_mut(s) {
                    *place = Some(conn);
                }
                s
            }
            None => {
                self.slots.push(Some(conn));
                self.slots.len() - 1
            }
        };
        self.by_key.insert(*key, slot);
        self.by_id.insert(id, slot);
        self.remember(*key, slot);
        sink.on_connection(id, key, frame, ts);
        if !seg.flags.syn {
            sink.on_note(id, frame, NetNote::MidStream);
        }
        Some(slot)
    }

    /// `slot` (the connection of `key`) is the last one looked up, and one of the recent ones
    /// when its segments name it alone: not when both its ports are server ports, where
    /// `orient` may take a segment for the connection of the reversed key instead.
    fn remember(&mut self, key: ConnKey, slot: usize) {
        let last = Last::new(key, slot);
        self.last = Some(last);
        let ports = &self.cfg.ports;
        if !(ports.contains(&key.client.port()) && ports.contains(&key.server.port())) {
            self.recent.insert(last);
        }
    }

    /// Drops a connection from the table, delivering what it still holds.
    fn forget<S: StreamSink>(&mut self, slot: usize, frame: u64, ts: Timestamp, sink: &mut S) {
        let Some(mut conn) = self.slots.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let held = (conn.chunks(), conn.bytes());
        for d in [Dir::ToServer, Dir::ToClient] {
            let mut o = ToSink {
                sink: &mut *sink,
                conn: conn.id,
                dir: d,
                frame,
                ts,
            };
            conn.half(d).flush(&mut self.stats, &mut o);
        }
        self.held.release(held.0, held.1);
        self.tracked.release(1, 0);
        if conn.state == ConnState::Open {
            sink.on_close(conn.id, CloseKind::Forgotten, frame, ts);
        }
        sink.on_forget(conn.id);
        if self.by_key.get(&conn.key) == Some(&slot) {
            self.by_key.remove(&conn.key);
        }
        self.by_id.remove(&conn.id);
        self.free.push(slot);
        if self.last.is_some_and(|l| l.slot == slot) {
            self.last = None;
        }
        self.recent.remove(conn.key, slot);
    }

    /// Makes room in a full table: forgets closed connections, then the least recently active
    /// ones, an eighth of the table at a time so the scan cost is shared by many new ones.
    fn evict<S: StreamSink>(&mut self, frame: u64, ts: Timestamp, sink: &mut S) {
        let mut candidates: Vec<(bool, u64, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                c.as_ref()
                    .map(|c| (c.state == ConnState::Open, c.last_frame, i))
            })
            .collect();
        candidates.sort_unstable();
        let count = (candidates.len() / 8).max(1);
        for &(open, _, slot) in candidates.iter().take(count) {
            if open {
                self.tracked.dropped(1, 0, frame);
            }
            self.forget(slot, frame, ts, sink);
        }
    }

    /// Applies the per-direction and total buffering bounds after a push to `slot`.
    fn enforce_bounds<S: StreamSink>(
        &mut self,
        slot: usize,
        dir: Dir,
        frame: u64,
        ts: Timestamp,
        sink: &mut S,
    ) {
        let per_dir = self.cfg.max_buffered_per_dir;
        while self
            .slots
            .get(slot)
            .and_then(Option::as_ref)
            .is_some_and(|c| match dir {
                Dir::ToServer => c.to_server.cost() > per_dir,
                Dir::ToClient => c.to_client.cost() > per_dir,
            })
        {
            if !self.give_up_hole(slot, dir, frame, ts, sink) {
                break;
            }
        }
        if !self.held.over() {
            return;
        }
        // Over the share: the fullest directions give up holes until the total is back under
        // seven eighths of it, so this scan of every connection comes at most once per eighth
        // of the share newly buffered (linear time whatever the capture).
        let mut fullest: Vec<(usize, usize, Dir)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (i, c)))
            .flat_map(|(i, c)| {
                [
                    (c.to_server.cost(), i, Dir::ToServer),
                    (c.to_client.cost(), i, Dir::ToClient),
                ]
            })
            .filter(|&(cost, _, _)| cost > 0)
            .collect();
        fullest.sort_unstable_by_key(|&(cost, i, _)| (std::cmp::Reverse(cost), i));
        let target = self.held.limit() / 8 * 7;
        for (_, vslot, vdir) in fullest {
            while self.held.used() > target {
                if !self.give_up_hole(vslot, vdir, frame, ts, sink) {
                    break;
                }
            }
            if self.held.used() <= target {
                break;
            }
        }
    }

    /// One direction gives up the hole before its first held chunk, delivering what follows.
    /// False when it held nothing.
    fn give_up_hole<S: StreamSink>(
        &mut self,
        slot: usize,
        dir: Dir,
        frame: u64,
        ts: Timestamp,
        sink: &mut S,
    ) -> bool {
        let Some(conn) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return false;
        };
        let id = conn.id;
        let half = conn.half(dir);
        if !half.has_pending() {
            return false;
        }
        let before = (half.chunks(), half.buffered());
        let mut o = ToSink {
            sink: &mut *sink,
            conn: id,
            dir,
            frame,
            ts,
        };
        let given_up = half.skip_first_hole(&mut self.stats, &mut o);
        let after = (half.chunks(), half.buffered());
        self.held.release(
            before.0.saturating_sub(after.0),
            before.1.saturating_sub(after.1),
        );
        self.held.dropped(1, given_up, frame);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

    fn key(host: u8, subnet: u8, port: u16) -> ConnKey {
        let at = |last: u8, port: u16| {
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, subnet, last), port))
        };
        ConnKey {
            client: at(host, port),
            server: at(100, 445),
        }
    }

    /// 8 hosts' 2 channels each, as a Scale-Out File Server sees them: each host's address
    /// pairs differ from the others' in one byte and its ports in their high bits only. They
    /// must not push each other out of the table (the old index, the hash's bits 16-21, gave 16
    /// such connections 8 entries).
    #[test]
    fn a_hosts_channels_stay_recent_together() {
        let mut recent = Recent([None; RECENT]);
        let keys: Vec<ConnKey> = (0..8u8)
            .flat_map(|h| {
                [
                    key(11 + h, 0, 50_000 + 64 * u16::from(h)),
                    key(11 + h, 1, 51_024 + 64 * u16::from(h)),
                ]
            })
            .collect();
        for (slot, k) in keys.iter().enumerate() {
            recent.insert(Last::new(*k, slot));
        }
        for (slot, k) in keys.iter().enumerate() {
            let to_client = WireEnds::of(k.server, k.client).expect("IPv4");
            let (found, dir) = recent.find(&to_client).expect("still recent");
            assert_eq!((found.slot, dir), (slot, Dir::ToClient));
        }
        // Forgotten: no longer found, and the others stay.
        recent.remove(keys[3], 3);
        let ends = |k: &ConnKey| WireEnds::of(k.client, k.server).expect("IPv4");
        assert!(recent.find(&ends(&keys[3])).is_none());
        assert_eq!(recent.find(&ends(&keys[4])).map(|(l, _)| l.slot), Some(4));
    }

    /// A set holds the last two connections remembered in it, the last first: a third pushes
    /// out the older, and remembering one again does not hold it twice.
    #[test]
    fn a_set_keeps_the_last_two() {
        let mut recent = Recent([None; RECENT]);
        let ends = |k: &ConnKey| WireEnds::of(k.client, k.server).expect("IPv4");
        // Three connections of one set, found by trying ports.
        let first = key(11, 0, 50_000);
        let set = Recent::set(&ends(&first));
        let same: Vec<ConnKey> = (50_001..u16::MAX)
            .map(|p| key(11, 0, p))
            .filter(|k| Recent::set(&ends(k)) == set)
            .take(2)
            .collect();
        let (second, third) = (same[0], same[1]);
        recent.insert(Last::new(first, 1));
        recent.insert(Last::new(second, 2));
        recent.insert(Last::new(second, 2));
        let slot_of = |r: &Recent, k: &ConnKey| r.find(&ends(k)).map(|(l, _)| l.slot);
        assert_eq!(
            (slot_of(&recent, &first), slot_of(&recent, &second)),
            (Some(1), Some(2))
        );
        recent.insert(Last::new(third, 3));
        assert_eq!(slot_of(&recent, &first), None);
        assert_eq!(
            (slot_of(&recent, &second), slot_of(&recent, &third)),
            (Some(2), Some(3))
        );
    }
}
