//! The SMB2 layer as a TCP stream sink: one framer per connection and direction, framer events
//! turned into statistics, notes and (through `Exchange`) records.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use foldhash::fast::FixedState;

use super::by_label::LabelSlot;
use super::events::{Conns, Direct, EventStage};
use super::exchange::Exchange;
use super::outbox::{NoteKind, Outbox};
use super::{ChannelEnd, Limits, Stats};
use crate::budget::{Kind, MemoryUse, Share};
use crate::capture::Timestamp;
use crate::net::{CloseKind, ConnId, ConnKey, ConnSlots, Dir, NetNote, StreamSink};
use crate::smb2::crypto::{Decryptor, KeyRing};
use crate::smb2::framer::{SealCtx, SealSpares};
use crate::smb2::{Framer, FramerConfig, FramerEvent, FramerOut};

/// Most connections listed one by one in per-connection statistics.
pub const MAX_LISTED_CONNECTIONS: usize = 1000;
/// The key under which connections past [`MAX_LISTED_CONNECTIONS`] are counted.
pub const OTHER_CONNECTIONS: &str = "(other connections)";
/// The key under which sessions past [`MAX_LISTED_CONNECTIONS`] are counted.
pub const OTHER_SESSIONS: &str = "(other sessions)";

/// The SMB2 framers of every connection and direction, within one share of framer bytes. The
/// layer owns one; with `PipelineConfig::threads`, each worker owns one for its connections.
pub(super) struct Framers {
    cfg: FramerConfig,
    /// The framers, in slots reused once their connection ends.
    slots: Vec<Option<Framer>>,
    free: Vec<usize>,
    /// Slot by (connection, direction): hashed with foldhash, not SipHash (the keys are our own
    /// connection numbers, nothing an attacker chooses to collide).
    index: HashMap<(ConnId, Dir), usize, FixedState>,
    /// Recent lookups per direction, in slots by connection number: busy connections (many
    /// channels' small I/Os interleaved, or one bulk transfer) are found without hashing.
    recent: [ConnSlots<usize>; 2],
    /// Bytes held by all framers (`Framer::buffered`), within `Limits::max_framer_bytes`.
    bytes: Share,
    /// Encrypted messages' boxes and buffers, kept for the next ones (a few, for all framers).
    spares: SealSpares,
}

impl Framers {
    pub(super) fn new(cfg: FramerConfig, max_bytes: usize) -> Self {
        Framers {
            cfg,
            slots: Vec::new(),
            free: Vec::new(),
            index: HashMap::with_hasher(FixedState::default()),
            recent: Default::default(),
            bytes: Share::new(Kind::Framers, max_bytes),
            spares: SealSpares::default(),
        }
    }

    pub(super) fn usage(&self) -> MemoryUse {
        self.bytes.usage()
    }

    /// Bytes held now and the peak since the last call (see `Share::take_peak`).
    pub(super) fn take_peak(&mut self) -> (usize, usize) {
        (self.bytes.used(), self.bytes.take_peak())
    }

    /// The slot of (conn, dir)'s framer, if it has one.
    #[inline]
    fn slot(&mut self, conn: ConnId, dir: Dir) -> Option<usize> {
        let recent = &mut self.recent[dir.index()];
        if let Some(&slot) = recent.get(conn) {
            return Some(slot);
        }
        let slot = *self.index.get(&(conn, dir))?;
        recent.set(conn, slot);
        Some(slot)
    }

    fn get_mut(&mut self, conn: ConnId, dir: Dir) -> Option<&mut Framer> {
        let slot = self.slot(conn, dir)?;
        self.slots.get_mut(slot)?.as_mut()
    }

    fn in_message(&self, conn: ConnId, dir: Dir) -> bool {
        self.index
            .get(&(conn, dir))
            .and_then(|&s| self.slots.get(s)?.as_ref())
            .is_some_and(Framer::in_message)
    }

    /// The slot of (conn, dir)'s framer, taken on first use (a slot, not the framer: the caller
    /// borrows the spares beside it, and makes the framer in an empty slot).
    fn framer_slot(&mut self, conn: ConnId, dir: Dir) -> usize {
        if let Some(slot) = self.slot(conn, dir) {
            return slot;
        }
        // A freed slot is empty (`finish` took its framer).
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        self.index.insert((conn, dir), slot);
        self.recent[dir.index()].set(conn, slot);
        slot
    }

    /// Counts `len` in-order bytes of (conn, dir) off when they lie inside data its framer
    /// skips anyway (the middle of a READ or WRITE payload: most of a bulk transfer): they
    /// change no held bytes and complete nothing, so there is nothing else to do. False: they
    /// need [`Framers::push`].
    pub(super) fn skip(&mut self, conn: ConnId, dir: Dir, len: usize) -> bool {
        // (Over the bound, `with` has framers give back: not skipped, whatever the bytes.)
        !self.bytes.over() && self.get_mut(conn, dir).is_some_and(|f| f.skip_within(len))
    }

    /// The most bytes [`Framers::skip`] would count off for (conn, dir) now.
    pub(super) fn skip_room(&mut self, conn: ConnId, dir: Dir) -> u64 {
        if self.bytes.over() {
            return 0;
        }
        self.get_mut(conn, dir).map_or(0, |f| f.skip_room())
    }

    /// Feed in-order stream bytes to the framer of (conn, dir) (see [`Framers::with`]).
    pub(super) fn push(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        data: &[u8],
        crypto: &mut Decryptor,
        events: &mut dyn FramerOut,
    ) -> u64 {
        self.with(conn, dir, frame, crypto, events, |f, ctx, ev| {
            f.push_sealed(data, ctx, ev)
        })
    }

    /// `missing` bytes of (conn, dir) will never arrive (see [`Framers::with`]).
    pub(super) fn gap(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        missing: u64,
        crypto: &mut Decryptor,
        events: &mut dyn FramerOut,
    ) -> u64 {
        self.with(conn, dir, frame, crypto, events, |f, ctx, ev| {
            f.gap_sealed(missing, ctx, ev)
        })
    }

    /// Run `f` on the framer of (conn, dir), keeping the total of held bytes up to date and
    /// within its bound. Returns the bytes of messages in progress given back to stay within.
    pub(super) fn with(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        crypto: &mut Decryptor,
        events: &mut dyn FramerOut,
        f: impl FnOnce(&mut Framer, &mut SealCtx<'_>, &mut dyn FramerOut),
    ) -> u64 {
        let slot = self.framer_slot(conn, dir);
        let cfg = self.cfg;
        let framer = self.slots[slot].get_or_insert_with(|| Framer::new(cfg));
        let before = framer.buffered();
        crypto.at_frame(frame);
        let mut ctx = SealCtx {
            crypto: Some(crypto),
            conn: conn.0,
            to_server: dir == Dir::ToServer,
            spares: Some(&mut self.spares),
        };
        f(framer, &mut ctx, events);
        let after = framer.buffered();
        self.bytes.release(0, before);
        self.bytes.charge(0, after);
        if !self.bytes.over() {
            return 0;
        }
        // The fullest framers give back until the total is under seven eighths of the bound,
        // so this scan of every framer comes at most once per eighth of the bound newly held
        // (linear time whatever the capture).
        let slots = &self.slots;
        let mut fullest: Vec<(usize, (ConnId, Dir), usize)> = self
            .index
            .iter()
            .filter_map(|(k, &s)| Some((slots.get(s)?.as_ref()?.buffered(), *k, s)))
            .filter(|&(b, _, _)| b > 0)
            .collect();
        fullest
            .sort_unstable_by_key(|&(b, (c, d), _)| (std::cmp::Reverse(b), c, d == Dir::ToClient));
        let target = self.bytes.limit() / 8 * 7;
        let mut shed = 0;
        for (_, _, slot) in fullest {
            if self.bytes.used() <= target {
                break;
            }
            if let Some(framer) = self.slots.get_mut(slot).and_then(Option::as_mut) {
                let freed = framer.shed();
                if freed > 0 {
                    self.bytes.release(0, freed);
                    self.bytes.dropped(1, freed as u64, frame);
                    shed += freed as u64;
                }
            }
        }
        shed
    }

    /// Flush and forget the framer of (conn, dir) into `events`; false when it had none.
    pub(super) fn finish(
        &mut self,
        conn: ConnId,
        dir: Dir,
        crypto: &mut Decryptor,
        events: &mut dyn FramerOut,
    ) -> bool {
        let Some(slot) = self.index.remove(&(conn, dir)) else {
            return false;
        };
        self.recent[dir.index()].remove(conn);
        let Some(mut f) = self.slots.get_mut(slot).and_then(Option::take) else {
            return false;
        };
        self.free.push(slot);
        self.bytes.release(0, f.buffered());
        let mut ctx = SealCtx {
            crypto: Some(crypto),
            conn: conn.0,
            to_server: dir == Dir::ToServer,
            spares: Some(&mut self.spares),
        };
        f.finish_sealed(&mut ctx, events);
        true
    }

    /// The framers there are, by connection, to-server first: the order the end flushes them.
    pub(super) fn keys(&self) -> Vec<(ConnId, Dir)> {
        let mut keys: Vec<(ConnId, Dir)> = self.index.keys().copied().collect();
        keys.sort_by_key(|(c, d)| (c.0, *d == Dir::ToClient));
        keys
    }
}

pub struct Smb2Layer {
    framers: Framers,
    /// Connections whose framers may hold state, oldest (lowest id) first. Reassembly tells
    /// when it forgets one; `Limits::max_connections` bounds them when fed directly.
    conns: BTreeMap<ConnId, ConnKey>,
    /// The recent ones of `conns`, found by index: every message looks up its endpoints.
    recent: ConnSlots<ConnKey>,
    max_connections: usize,
    conns_dropped: Share,
    /// Keys and per-session state for encrypted messages.
    crypto: Decryptor,
    /// Sessions already given a note about why their messages were not decrypted (bounded).
    sessions_noted: HashSet<u64>,
    /// The slot of each connection listed in `Stats::encrypted_by_connection`.
    encrypted_labels: BTreeMap<ConnId, LabelSlot>,
    pub exchange: Exchange,
    pub outbox: Outbox,
    pub stats: Stats,
    pub last_frame: u64,
    /// The frames messages begin in, followed for `PipelineConfig::keep_frames` only (see
    /// [`Smb2Layer::track_message_starts`]); `None`: not followed.
    starts: Option<MessageStarts>,
    /// The frame being pushed when the capture's snaplen cut it: (number, captured, on the wire).
    pub cut_frame: Option<(u64, usize, u32)>,
}

/// Where messages began (`Smb2Layer::starts`): one entry a stream with a message in
/// progress, so no more than the connections kept.
#[derive(Debug, Default)]
pub(super) struct MessageStarts {
    /// The frame the message in progress on (conn, dir) began in.
    in_progress: HashMap<(ConnId, Dir), u64>,
    /// While one push is handled: the frame its next completed message began in.
    pub(super) next: Option<u64>,
}

impl Smb2Layer {
    pub fn new(limits: Limits, keys: Arc<KeyRing>) -> Self {
        Smb2Layer {
            framers: Framers::new(limits.framer, limits.max_framer_bytes),
            conns: BTreeMap::new(),
            recent: ConnSlots::default(),
            max_connections: limits.max_connections.max(1),
            // Counts only what this layer drops itself (its entries are reassembly's).
            conns_dropped: Share::new(Kind::Connections, 0),
            crypto: Decryptor::with_share(
                keys,
                Share::new(Kind::Sessions, limits.max_session_bytes),
            ),
            sessions_noted: HashSet::new(),
            encrypted_labels: BTreeMap::new(),
            exchange: Exchange::new(&limits),
            outbox: Outbox::new(&limits),
            stats: Stats::default(),
            last_frame: 0,
            starts: None,
            cut_frame: None,
        }
    }

    /// Follow the frame each message begins in (`SqosRecord::first_frame`, for `dissect
    /// -x`/`-w`). Untracked, nothing is looked up for it per message.
    pub fn track_message_starts(&mut self) {
        self.starts = Some(MessageStarts::default());
    }

    /// Before a push on (conn, dir) in `frame`: where its first completed message began.
    fn start_push(&mut self, conn: ConnId, dir: Dir, frame: u64) {
        if let Some(s) = &mut self.starts {
            s.next = Some(s.in_progress.get(&(conn, dir)).copied().unwrap_or(frame));
        }
    }

    /// After the push: remember where the message still in progress began.
    #[inline]
    fn end_push(&mut self, conn: ConnId, dir: Dir) {
        if self.starts.is_some() {
            self.end_push_tracked(conn, dir);
        }
    }

    /// [`Smb2Layer::end_push`] when message starts are tracked (`dissect -w`, `-x`).
    #[inline(never)]
    fn end_push_tracked(&mut self, conn: ConnId, dir: Dir) {
        let Some(s) = &mut self.starts else {
            return;
        };
        if let Some(start) = s.next.take() {
            if self.framers.in_message(conn, dir) {
                s.in_progress.insert((conn, dir), start);
            } else {
                s.in_progress.remove(&(conn, dir));
            }
        }
    }

    /// Bytes held by all framers (for tests of the memory bound).
    pub fn framer_bytes(&self) -> usize {
        self.framers.bytes.used()
    }

    /// This layer's memory shares: framers, opens, pending requests, queued records.
    pub fn memory(&self) -> Vec<MemoryUse> {
        let mut m = vec![self.framers.usage(), self.crypto.memory()];
        m.extend(self.session_memory());
        m
    }

    /// The shares of the session-wide stage (all but the framers' and decryption's, which
    /// `--threads` workers hold for their connections).
    pub(super) fn session_memory(&self) -> Vec<MemoryUse> {
        let mut m = vec![self.outbox.memory()];
        m.extend(self.exchange.memory());
        if self.conns_dropped.dropped_count() > 0 {
            m.push(self.conns_dropped.usage());
        }
        m
    }

    /// The layer as its framers' events go to it (see [`EventStage`]).
    fn stage(&mut self) -> EventStage<'_> {
        self.split().0
    }

    /// The layer in the parts a push borrows apart: the stage its events go to, the framers,
    /// the decryptor they frame with.
    fn split(&mut self) -> (EventStage<'_>, &mut Framers, &mut Decryptor) {
        let stage = EventStage {
            conns: Conns {
                map: &self.conns,
                recent: &self.recent,
            },
            starts: &mut self.starts,
            exchange: &mut self.exchange,
            outbox: &mut self.outbox,
            stats: &mut self.stats,
            encrypted_labels: &mut self.encrypted_labels,
            sessions_noted: &mut self.sessions_noted,
            cut_frame: self.cut_frame,
            key_sessions: self.crypto.key_sessions() as u64,
        };
        (stage, &mut self.framers, &mut self.crypto)
    }

    /// The layer as the receiver of a push on (conn, dir) in `frame` at `ts`, the framers and
    /// decryptor apart.
    fn receiver(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        ts: Timestamp,
    ) -> (Direct<'_>, &mut Framers, &mut Decryptor) {
        let (stage, framers, crypto) = self.split();
        let out = Direct {
            stage,
            at: (conn, dir, frame, ts),
        };
        (out, framers, crypto)
    }

    /// Events a `--threads` worker's framer gave for (conn, dir).
    fn handle_events(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        ts: Timestamp,
        events: &[FramerEvent],
    ) {
        let mut stage = self.stage();
        for ev in events {
            stage.event(conn, dir, frame, ts, ev);
        }
    }

    /// [`StreamSink::on_data`] of bytes the framer cannot count off unseen (or whose count-off
    /// is pushing them, which gives the same): the bulk lane, which knows they do not fit
    /// what the framer would count off, hands them here without asking again.
    pub(super) fn push_data(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        ts: Timestamp,
        data: &[u8],
    ) {
        self.last_frame = self.last_frame.max(frame);
        self.start_push(conn, dir, frame);
        let (mut out, framers, crypto) = self.receiver(conn, dir, frame, ts);
        let shed = framers.push(conn, dir, frame, data, crypto, &mut out);
        self.stats.framer_bytes_shed += shed;
        self.end_push(conn, dir);
    }

    /// Flush both framers of a connection (it ended, `how`) and forget it.
    fn end_conn(&mut self, conn: ConnId, how: ChannelEnd, frame: u64, ts: Timestamp) {
        for dir in [Dir::ToServer, Dir::ToClient] {
            self.flush_framer(conn, dir, frame, ts, None);
        }
        self.forget_conn(conn, how, frame, ts);
    }

    /// The connection's framers are flushed: forget its state.
    fn forget_conn(&mut self, conn: ConnId, how: ChannelEnd, frame: u64, ts: Timestamp) {
        self.crypto.forget_conn(conn.0);
        self.exchange
            .close_conn(conn, how, frame, ts, &mut self.outbox, &mut self.stats);
        self.outbox.release_conn(conn);
        self.conns.remove(&conn);
        self.recent.remove(conn);
    }

    /// Flush the framer of (conn, dir) and handle what it gives: its own (`given` None), or the
    /// events a `--threads` worker's framer gave.
    pub(super) fn flush_framer(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        ts: Timestamp,
        given: Option<Vec<FramerEvent>>,
    ) {
        self.start_push(conn, dir, frame);
        if let Some(s) = &mut self.starts {
            s.in_progress.remove(&(conn, dir));
        }
        match given {
            Some(events) => self.handle_events(conn, dir, frame, ts, &events),
            None => {
                let (mut out, framers, crypto) = self.receiver(conn, dir, frame, ts);
                framers.finish(conn, dir, crypto, &mut out);
            }
        }
        if let Some(s) = &mut self.starts {
            s.next = None;
        }
    }

    /// End of capture: flush every framer.
    pub fn finish(&mut self, ts: Timestamp) {
        for (conn, dir) in self.framers.keys() {
            self.flush_framer(conn, dir, self.last_frame, ts, None);
        }
        self.finish_exchange(ts);
    }

    /// End of capture, once the framers are flushed: what is still outstanding.
    pub(super) fn finish_exchange(&mut self, ts: Timestamp) {
        self.exchange
            .finish(self.last_frame, ts, &mut self.outbox, &mut self.stats);
    }

    /// Apply what a `--threads` worker's connection stage did in one frame (`conn` already the
    /// run's connection number): the same steps as the [`StreamSink`] calls below. Gives a
    /// push's list of events back emptied, for its worker to fill again: a list allocated on
    /// one thread and freed on the other cost both a lock of the allocator per message.
    pub(super) fn apply(
        &mut self,
        conn: ConnId,
        op: WorkerOp,
        frame: u64,
        ts: Timestamp,
    ) -> Option<Vec<FramerEvent>> {
        match op {
            WorkerOp::Connection(key) => self.on_connection(conn, &key, frame, ts),
            WorkerOp::Events {
                dir,
                gap,
                mut events,
            } => {
                self.last_frame = self.last_frame.max(frame);
                if gap {
                    self.stats.gaps += 1;
                }
                self.start_push(conn, dir, frame);
                self.handle_events(conn, dir, frame, ts, &events);
                self.end_push(conn, dir);
                events.clear();
                return Some(events);
            }
            WorkerOp::Close { how, events } => {
                let [to_server, to_client] = events;
                self.flush_framer(conn, Dir::ToServer, frame, ts, Some(to_server));
                self.flush_framer(conn, Dir::ToClient, frame, ts, Some(to_client));
                self.forget_conn(conn, channel_end(how), frame, ts);
            }
            WorkerOp::Note(note) => self.on_note(conn, frame, note),
            WorkerOp::Forget => {}
        }
        None
    }
}

/// What a `--threads` worker's connection stage hands the session-wide stage, per connection.
#[derive(Debug)]
pub(super) enum WorkerOp {
    Connection(ConnKey),
    /// A push (or a gap, `gap`) on (conn, `dir`) completed these framer events.
    Events {
        dir: Dir,
        gap: bool,
        events: Vec<FramerEvent>,
    },
    /// The connection ended; its framers (to server, to client) flushed these.
    Close {
        how: CloseKind,
        events: [Vec<FramerEvent>; 2],
    },
    Note(NetNote),
    /// The connection left the worker's table: its number may not be looked up again (the
    /// workers' numbers are mapped to the run's by `shard`, which drops this op).
    Forget,
}

fn channel_end(how: CloseKind) -> ChannelEnd {
    match how {
        CloseKind::Fin => ChannelEnd::Fin,
        CloseKind::Rst => ChannelEnd::Rst,
        // Forgotten by the reassembler to make room: the channel's state is dropped.
        CloseKind::Forgotten => ChannelEnd::Dropped,
    }
}

impl StreamSink for Smb2Layer {
    fn on_connection(&mut self, conn: ConnId, key: &ConnKey, frame: u64, ts: Timestamp) {
        self.stats.connections += 1;
        self.conns.insert(conn, *key);
        self.recent.set(conn, *key);
        if self.conns.len() > self.max_connections {
            if let Some((&oldest, _)) = self.conns.iter().next() {
                self.conns_dropped.dropped(1, 0, frame);
                self.end_conn(oldest, ChannelEnd::Dropped, frame, ts);
            }
        }
    }

    fn skip_data(&mut self, conn: ConnId, dir: Dir, frame: u64, len: usize) -> bool {
        let skipped = self.framers.skip(conn, dir, len);
        if skipped {
            // As `on_data` does with the bytes.
            self.last_frame = self.last_frame.max(frame);
        }
        skipped
    }

    fn skip_room(&mut self, conn: ConnId, dir: Dir) -> u64 {
        self.framers.skip_room(conn, dir)
    }

    fn on_data(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, data: &[u8]) {
        if self.framers.skip(conn, dir, data.len()) {
            // Inside a message, which began where it began: nothing completes or starts.
            self.last_frame = self.last_frame.max(frame);
            return;
        }
        self.push_data(conn, dir, frame, ts, data);
    }

    fn on_gap(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, missing: u64) {
        self.last_frame = self.last_frame.max(frame);
        self.stats.gaps += 1;
        self.start_push(conn, dir, frame);
        let (mut out, framers, crypto) = self.receiver(conn, dir, frame, ts);
        let shed = framers.gap(conn, dir, frame, missing, crypto, &mut out);
        self.stats.framer_bytes_shed += shed;
        self.end_push(conn, dir);
    }

    fn on_close(&mut self, conn: ConnId, how: CloseKind, frame: u64, ts: Timestamp) {
        self.end_conn(conn, channel_end(how), frame, ts);
    }

    fn on_note(&mut self, conn: ConnId, frame: u64, note: NetNote) {
        match note {
            NetNote::MidStream => self.stage().note(NoteKind::MidStream, frame, |s| {
                format!(
                    "{}: picked up mid-stream (start not captured)",
                    s.conn_label(conn)
                )
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The merge applies a worker's push and gives its list of events back emptied, with its
    /// room, to be sent back to the worker ([`super::super::shard`]).
    #[test]
    fn applying_a_workers_events_gives_their_list_back_emptied() {
        let mut layer = Smb2Layer::new(Limits::default(), Arc::default());
        let mut events = Vec::with_capacity(5);
        events.push(FramerEvent::Smb1 { len: 9 });
        events.push(FramerEvent::Smb1 { len: 4 });
        let op = WorkerOp::Events {
            dir: Dir::ToServer,
            gap: false,
            events,
        };
        let back = layer.apply(ConnId(0), op, 7, Timestamp::default());
        assert_eq!(layer.stats.smb1_messages, 2);
        let back = back.expect("the list comes back");
        assert!(back.is_empty() && back.capacity() >= 5);
        // Other ops have no list to give back.
        let op = WorkerOp::Forget;
        assert!(layer
            .apply(ConnId(0), op, 8, Timestamp::default())
            .is_none());
    }
}
