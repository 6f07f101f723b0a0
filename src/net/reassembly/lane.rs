//! The bulk lane: a run of the last connection's plain segments taken in one go, for a reader
//! that walks the capture's records where they lie ([`crate::capture::CaptureReader::take_run`]).
//! Each segment is one the bulk path ([`Reassembler::push_packet`]) would take, on a connection
//! whose two directions hold nothing, have no FIN and wait for no acknowledged hole: then a
//! segment changes nothing but its direction's next offset, the peer's acknowledgement and the
//! counts, and its bytes are counted off by the sink ([`StreamSink::skip_room`]) — what
//! `push_packet` does, without a frame, a connection lookup or the shared tail each. On one
//! thread the lane also takes the segments whose bytes the sink must see (a message's first
//! and last), handing them back for its `on_data` ([`BulkLane::take_or_hand`]): small I/Os
//! have a few such segments in every few frames, and each ended a run before.

use super::{ConnState, Dir, PlainSegment, Reassembler, ReassemblyStats, StreamSink, WireEnds};
use crate::capture::{FrameRun, L3Packet, Timestamp};

/// The last segment's connection, lent for a run (see the module).
pub struct BulkLane<'r> {
    conn: &'r mut super::Conn,
    /// The header bytes of its plain segments to the server and to the client.
    ends: [WireEnds; 2],
    /// Bytes of each direction the sink would still count off unseen: none until asked, when
    /// the first segment with data in that direction comes (`asked`; few runs carry data
    /// both ways).
    room: [u64; 2],
    /// The room each direction was given when asked (what was taken is what is gone of it).
    asked: [Option<u64>; 2],
    stats: &'r mut ReassemblyStats,
    last_frame: &'r mut u64,
    last_ts: &'r mut Timestamp,
    /// The ends of the plain segment of another connection the lane refused, if that is what
    /// it refused: where a run can go on (see [`Reassembler::lane_to`]).
    other: Option<WireEnds>,
}

/// Another connection's plain segment, which a run of the bulk lane stopped at
/// ([`BulkLane::other`]).
#[derive(Clone, Copy)]
pub struct OtherConn(WireEnds);

impl Reassembler {
    /// The lane for the last segment's connection, when the bulk path is on and that
    /// connection is open with both directions plain and the reassembly share within bounds.
    pub fn bulk_lane(&mut self) -> Option<BulkLane<'_>> {
        if !self.cfg.bulk_path || self.held.over() {
            return None;
        }
        let super::Last {
            slot,
            wire: Some(ends),
            ..
        } = self.last?
        else {
            return None;
        };
        let conn = self.slots.get_mut(slot)?.as_mut()?;
        // `Conn::is_plain` spelled out: with the call, this function was inlined into the
        // walk's loop and cost it 0.4 M instructions on the plain bench prefix.
        if conn.state != ConnState::Open || !conn.to_server.is_plain() || !conn.to_client.is_plain()
        {
            return None;
        }
        Some(BulkLane {
            conn,
            ends,
            room: [0; 2],
            asked: [None; 2],
            stats: &mut self.stats,
            last_frame: &mut self.last_frame,
            last_ts: &mut self.last_ts,
            other: None,
        })
    }

    /// Makes `other`'s connection the last, when it is a recent one, as `push_packet` would
    /// with that segment before taking it: the next lane is lent for it. False: not recent.
    pub fn lane_to(&mut self, other: OtherConn) -> bool {
        match self.recent.find(&other.0) {
            Some((recent, _)) => {
                self.last = Some(recent);
                true
            }
            None => false,
        }
    }
}

/// A segment [`BulkLane::take_or_hand`] took.
pub enum Taken<'d> {
    /// Its bytes, if any, counted off (at `close`).
    Quiet,
    /// Its bytes, which the sink could not count off: for its `on_data`, the bytes counted off
    /// before them given to it already.
    Data(Dir, &'d [u8]),
}

impl BulkLane<'_> {
    /// Takes a frame of `link_type` whose captured bytes are `data` (`orig_len` on the wire)
    /// when its packet is such a segment: a frame cut by the snaplen is not quiet (the full
    /// path counts and marks it). One thread's runs and a worker's ask this alike.
    #[inline]
    pub fn take_frame<S: StreamSink>(
        &mut self,
        link_type: u32,
        data: &[u8],
        orig_len: u32,
        sink: &mut S,
    ) -> bool {
        // (The frame number is for a hand-over, which this take never makes.)
        let taken = self.take_or_hand::<false, S>(link_type, data, orig_len, 0, sink);
        matches!(taken, Some(Taken::Quiet))
    }

    /// [`BulkLane::take_frame`], and (with `HAND`, one thread's runs) a plain segment of the
    /// lane's connection whose bytes the sink cannot count off (a message's first or last
    /// segment) taken too, its bytes handed back for the sink's `on_data` (the bulk path's
    /// in-order case, which is then all of it): the run need not end there. Frame `frame`'s;
    /// a frame cut by the snaplen is not taken.
    #[inline]
    pub fn take_or_hand<'d, const HAND: bool, S: StreamSink>(
        &mut self,
        link_type: u32,
        data: &'d [u8],
        orig_len: u32,
        frame: u64,
        sink: &mut S,
    ) -> Option<Taken<'d>> {
        if crate::capture::is_cut(data.len(), orig_len) {
            return None;
        }
        let packet = crate::capture::decode_link(link_type, data).ok()?;
        self.take::<HAND, S>(packet, frame, sink)
    }

    /// Takes `packet` when it is such a segment, else (`None`) changes nothing. `sink` is the
    /// one `close` will give the bytes to. With `HAND`, a segment whose bytes do not fit the
    /// room is taken too (see [`BulkLane::take_or_hand`]).
    #[inline]
    fn take<'d, const HAND: bool, S: StreamSink>(
        &mut self,
        packet: L3Packet<'d>,
        frame: u64,
        sink: &mut S,
    ) -> Option<Taken<'d>> {
        let L3Packet::Ipv4(bytes) = packet else {
            return None;
        };
        let seg = PlainSegment::of(bytes)?;
        let Some(dir) = seg.dir_in(&self.ends) else {
            self.other = Some(seg.ends);
            return None;
        };
        let len = seg.payload.len();
        let i = dir.index();
        let fits = len as u64 <= self.room[i] || self.ask_room(dir, len, sink);
        if !fits && !HAND {
            return None;
        }
        // What `push_plain` and `after_data` do with it (the count-off left to `close`),
        // changing nothing unless all of it applies: the acknowledgement last. The halves
        // were plain when the lane was lent (`bulk_lane`) and stay so: it only moves their
        // next offsets and acknowledgements in order.
        let conn = &mut *self.conn;
        if !conn.half(dir).plain_takes_next(seg.seq, len)
            || !conn.half(dir.reverse()).plain_peer_ack(seg.ack)
        {
            return None;
        }
        conn.half(dir).advance(len);
        if fits {
            self.room[i] -= len as u64;
            return Some(Taken::Quiet);
        }
        // Bytes the sink takes in `on_data` come after those counted off before them, in both
        // directions (its memory share, which a count-off needs within bounds, may change), and
        // change what it would count off next: asked again.
        self.count_off(frame, sink);
        Some(Taken::Data(dir, seg.payload))
    }

    /// The other connection's segment the lane refused last, if it refused one.
    pub fn other(&self) -> Option<OtherConn> {
        self.other.map(OtherConn)
    }

    /// The lane's connection.
    pub fn conn_id(&self) -> crate::net::ConnId {
        self.conn.id
    }

    /// Gives the sink the bytes counted off so far, each direction in one call, and forgets
    /// what it was asked.
    fn count_off<S: StreamSink>(&mut self, frame: u64, sink: &mut S) {
        for dir in [Dir::ToServer, Dir::ToClient] {
            let i = dir.index();
            let len = self.asked[i].map_or(0, |given| given - self.room[i]);
            if len > 0 {
                let counted = sink.skip_data(self.conn.id, dir, frame, len as usize);
                debug_assert!(counted, "the sink counts off the room it gave");
            }
            self.asked[i] = None;
            self.room[i] = 0;
        }
    }

    /// Asks the sink for a direction's room, once a run (a second time would find what the
    /// lane already counts); true when `len` bytes fit.
    #[inline(never)]
    fn ask_room<S: StreamSink>(&mut self, dir: Dir, len: usize, sink: &mut S) -> bool {
        let i = dir.index();
        if self.asked[i].is_some() {
            return false;
        }
        let room = sink.skip_room(self.conn.id, dir);
        self.asked[i] = Some(room);
        self.room[i] = room;
        len as u64 <= room
    }

    /// The run's segments were `run`'s frames: the counts and the last frame, and the bytes
    /// counted off by the sink in one call a direction (counting off adds up).
    pub fn close<S: StreamSink>(mut self, run: &FrameRun, sink: &mut S) {
        let (frame, ts) = run.last;
        self.stats.segments += run.frames;
        self.stats.bulk_segments += run.frames;
        self.stats.lane_segments += run.frames;
        self.conn.segments += run.frames;
        self.conn.last_frame = frame;
        *self.last_frame = frame;
        *self.last_ts = ts;
        self.count_off(frame, sink);
    }
}
