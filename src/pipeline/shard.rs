//! `PipelineConfig::threads` (`--threads N`): one capture over N worker threads.
//!
//! The thread that reads the capture finds each frame's connection from its addresses and
//! ports (both directions alike) and hands the frame to worker `hash(connection) % N`, in
//! batches. A worker runs everything that belongs to one connection: link, IP and TCP decoding,
//! reassembly, SMB2 framing (each its own share of the memory budget). For every frame it
//! returns what that frame did to its connections — opened, framed messages, closed — as
//! [`WorkerOp`]s. The reading thread takes those results back in the order it dispatched the
//! frames (frame n from worker w(n): a worker answers its frames in order, so no sorting) and
//! applies them to the one session-wide stage (matching, sessions over channels, the outbox,
//! statistics), exactly as the single-threaded layer would have at that frame. Connection
//! numbers are given there, in the order connections appear, so they are the single thread's.
//!
//! A frame read from a memory-mapped file reaches its worker where it lies: the batch says
//! where in the map ([`SharedMap`], shared with the workers once), and the reader keeps the
//! map's pages until the frame is merged back. Frames from elsewhere (a buffer the reader
//! reuses) are copied into the batch.
//!
//! Memory stays bounded: a batch holds at most [`BATCH_BYTES`] of frames, and at most
//! [`IN_FLIGHT_PER_WORKER`] batches per worker are out before the reading thread stops reading
//! to merge (backpressure, not growth). The workers' shares add up to the budget's: output is
//! the single thread's byte for byte as long as no share fills; when one does, what is dropped
//! is chosen within the worker's share (its connections), not over all connections. The
//! shares' peaks (`sqos stats`) are the single thread's too: each frame's result says how far
//! it moved the worker's shares ([`Swing`]), and the reading thread adds them up in frame order.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::streams::{Framers, WorkerOp};
use super::Limits;
use crate::budget::{Kind, MemoryUse, Share};
use crate::capture::{decode_link, Frame, L3Packet, LinkError, SharedMap, Timestamp};
use crate::net::{
    decode_tcp, CloseKind, ConnId, ConnKey, Dir, NetNote, Reassembler, ReassemblyConfig, StreamSink,
};
use crate::smb2::crypto::{Decryptor, KeyRing};
use crate::smb2::FramerEvent;

/// Frame bytes (and frames) a batch for one worker collects before it is sent.
const BATCH_BYTES: usize = 128 << 10;
const BATCH_FRAMES: usize = 512;
/// Batches per worker sent and not yet merged back, at most.
const IN_FLIGHT_PER_WORKER: usize = 3;

struct FrameIn {
    number: u64,
    ts: Timestamp,
    link_type: u32,
    /// Its bytes: in the batch's `data` or in one of the shared maps.
    at: Place,
}

/// Where a frame's bytes are, for its worker.
#[derive(Clone, Copy)]
enum Place {
    /// Copied into the batch's `data`, at `start..end`.
    Batch { start: usize, end: usize },
    /// At `start..end` of shared map `map`.
    Map {
        map: usize,
        start: usize,
        end: usize,
    },
}

#[derive(Default)]
struct Batch {
    /// The frames' bytes that are not in a shared map.
    data: Vec<u8>,
    /// Bytes of its frames, wherever they are.
    bytes: usize,
    frames: Vec<FrameIn>,
}

enum ToWorker {
    /// The maps frames may lie in (`Place::Map` numbers them in this order).
    Maps(Vec<SharedMap>),
    Frames(Batch),
    /// End of the capture: flush everything.
    Finish,
}

/// The worker-held shares, in this order: connections, reassembly, framers, and decryption's
/// part of the sessions share.
const SHARES: usize = 4;
const SHARE_KINDS: [Kind; SHARES] = [
    Kind::Connections,
    Kind::Reassembly,
    Kind::Framers,
    Kind::Sessions,
];

/// How one step (a frame) moved a share: the change of what it uses, and how far above the
/// step's start it rose on the way.
#[derive(Clone, Copy, Default)]
struct Swing {
    delta: i64,
    rise: usize,
}

/// What a worker's connection stage did in one step, its connections numbered its own way.
type Ops = Vec<(ConnId, WorkerOp)>;

/// What a worker did with one frame.
#[derive(Default)]
struct FrameOut {
    undecoded: bool,
    ops: Vec<(ConnId, WorkerOp)>,
    /// None when it moved no share (most frames): the answer stays small.
    swings: Option<Box<[Swing; SHARES]>>,
}

enum FromWorker {
    Frames(Vec<FrameOut>),
    Finished(Box<WorkerEnd>),
}

/// A worker's end of the capture.
struct WorkerEnd {
    /// The last TCP frame its reassembler saw, and its time (what its end deliveries are at).
    last: (u64, Timestamp),
    /// What the end delivered, one connection at a time in order of first sight.
    conns: Vec<(ConnId, Ops, [Swing; SHARES])>,
    /// Then what its framers still held, by connection and direction.
    framers: Vec<(ConnId, Dir, Vec<FramerEvent>)>,
    /// Bytes its framers gave back to stay within their share.
    shed: u64,
    memory: Vec<MemoryUse>,
}

/// The connection stage of one worker: a stream sink that frames and records.
struct ConnStage {
    framers: Framers,
    crypto: Decryptor,
    events: Vec<FramerEvent>,
    ops: Vec<(ConnId, WorkerOp)>,
    shed: u64,
}

impl ConnStage {
    /// Records what a step of the direction's framer completed. A push that completed nothing
    /// changes nothing downstream (no op, no allocation); a gap is always recorded, since the
    /// session stage learns of the loss from it.
    fn record(&mut self, conn: ConnId, dir: Dir, gap: bool, shed: u64) {
        self.shed += shed;
        if gap || !self.events.is_empty() {
            let events = std::mem::take(&mut self.events);
            self.ops.push((conn, WorkerOp::Events { dir, gap, events }));
        }
    }
}

impl StreamSink for ConnStage {
    fn on_connection(&mut self, conn: ConnId, key: &ConnKey, _frame: u64, _ts: Timestamp) {
        self.ops.push((conn, WorkerOp::Connection(*key)));
    }

    fn skip_data(&mut self, conn: ConnId, dir: Dir, _frame: u64, len: usize) -> bool {
        self.framers.skip(conn, dir, len)
    }

    fn on_data(&mut self, conn: ConnId, dir: Dir, frame: u64, _ts: Timestamp, data: &[u8]) {
        if self.framers.skip(conn, dir, data.len()) {
            return;
        }
        let shed = self
            .framers
            .push(conn, dir, frame, data, &mut self.crypto, &mut self.events);
        self.record(conn, dir, false, shed);
    }

    fn on_gap(&mut self, conn: ConnId, dir: Dir, frame: u64, _ts: Timestamp, missing: u64) {
        let shed = self.framers.gap(
            conn,
            dir,
            frame,
            missing,
            &mut self.crypto,
            &mut self.events,
        );
        self.record(conn, dir, true, shed);
    }

    fn on_close(&mut self, conn: ConnId, how: CloseKind, _frame: u64, _ts: Timestamp) {
        let mut events = [Vec::new(), Vec::new()];
        for (dir, ev) in [Dir::ToServer, Dir::ToClient].into_iter().zip(&mut events) {
            self.framers.finish(conn, dir, &mut self.crypto, ev);
        }
        self.crypto.forget_conn(conn.0);
        self.ops.push((conn, WorkerOp::Close { how, events }));
    }

    fn on_note(&mut self, conn: ConnId, _frame: u64, note: NetNote) {
        self.ops.push((conn, WorkerOp::Note(note)));
    }

    fn on_forget(&mut self, conn: ConnId) {
        self.ops.push((conn, WorkerOp::Forget));
    }
}

/// The worker's shares since the last step.
struct Accounts {
    used: [usize; SHARES],
}

impl Accounts {
    fn step(&mut self, reassembler: &mut Reassembler, stage: &mut ConnStage) -> [Swing; SHARES] {
        let [conns, held] = reassembler.take_peaks();
        let now = [
            conns,
            held,
            stage.framers.take_peak(),
            stage.crypto.take_peak(),
        ];
        let mut swings = [Swing::default(); SHARES];
        for ((swing, (used, peak)), before) in swings.iter_mut().zip(now).zip(&mut self.used) {
            *swing = Swing {
                delta: used as i64 - *before as i64,
                rise: peak.saturating_sub(*before),
            };
            *before = used;
        }
        swings
    }
}

fn work(
    mut reassembler: Reassembler,
    mut stage: ConnStage,
    rx: Receiver<ToWorker>,
    tx: SyncSender<FromWorker>,
) {
    let mut last = (0, Timestamp::default());
    let mut accounts = Accounts { used: [0; SHARES] };
    let mut maps = Vec::new();
    while let Ok(msg) = rx.recv() {
        match msg {
            ToWorker::Maps(shared) => maps = shared,
            ToWorker::Frames(batch) => {
                let mut outs = Vec::with_capacity(batch.frames.len());
                for f in &batch.frames {
                    let data = match f.at {
                        Place::Batch { start, end } => batch.data.get(start..end),
                        Place::Map { map, start, end } => maps
                            .get(map)
                            .and_then(|m: &SharedMap| m.bytes().get(start..end)),
                    }
                    .unwrap_or(&[]);
                    let mut undecoded = false;
                    // The reading thread decoded the link layer already: it cannot fail here.
                    if let Ok(l3) = decode_link(f.link_type, data) {
                        match reassembler.push_packet(f.number, f.ts, l3, &mut stage) {
                            Ok(true) => last = (f.number, f.ts),
                            Ok(false) => {}
                            Err(_) => undecoded = true,
                        }
                    }
                    let ops = std::mem::take(&mut stage.ops);
                    let swings = accounts.step(&mut reassembler, &mut stage);
                    let moved = swings.iter().any(|s| s.delta != 0 || s.rise != 0);
                    let swings = moved.then(|| Box::new(swings));
                    outs.push(FrameOut {
                        undecoded,
                        ops,
                        swings,
                    });
                }
                if tx.send(FromWorker::Frames(outs)).is_err() {
                    return;
                }
            }
            ToWorker::Finish => {
                let mut conns = Vec::new();
                while let Some(conn) = reassembler.finish_next(&mut stage) {
                    let ops = std::mem::take(&mut stage.ops);
                    let swings = accounts.step(&mut reassembler, &mut stage);
                    conns.push((conn, ops, swings));
                }
                let mut framers = Vec::new();
                for (conn, dir) in stage.framers.keys() {
                    let mut events = Vec::new();
                    stage
                        .framers
                        .finish(conn, dir, &mut stage.crypto, &mut events);
                    framers.push((conn, dir, events));
                }
                let memory = reassembler
                    .memory()
                    .into_iter()
                    .chain([stage.framers.usage(), stage.crypto.memory()])
                    .collect();
                let end = WorkerEnd {
                    last,
                    conns,
                    framers,
                    shed: stage.shed,
                    memory,
                };
                let _ = tx.send(FromWorker::Finished(Box::new(end)));
                return;
            }
        }
    }
}

/// Where a dispatched frame's result comes from.
enum Route {
    Worker(usize),
    /// Not TCP over IP: nothing to do.
    Nothing,
    /// IP or TCP headers that do not decode.
    Undecoded,
    /// The first frame whose link layer does not decode (later ones are `Undecoded`).
    LinkError(LinkError),
}

struct Dispatched {
    number: u64,
    ts: Timestamp,
    /// Lies in shared map `.0`, up to `.1`: once merged, the map's pages before are free.
    in_map: Option<(usize, usize)>,
    /// Cut by the snaplen: (number, captured, on the wire).
    cut: Option<(u64, usize, u32)>,
    route: Route,
}

/// One frame's result, merged back in frame order, connections numbered for the run.
pub(super) struct Merged {
    pub(super) number: u64,
    pub(super) ts: Timestamp,
    pub(super) cut: Option<(u64, usize, u32)>,
    pub(super) undecoded: bool,
    pub(super) link_error: Option<LinkError>,
    pub(super) ops: Vec<(ConnId, WorkerOp)>,
}

/// The end of the capture, from every worker, in the single thread's order.
pub(super) struct Ended {
    /// The last TCP frame and its time: where the end's deliveries happen.
    pub(super) last: (u64, Timestamp),
    pub(super) conns: Vec<Vec<(ConnId, WorkerOp)>>,
    pub(super) framers: Vec<(ConnId, Dir, Vec<FramerEvent>)>,
    pub(super) shed: u64,
    pub(super) memory: Vec<MemoryUse>,
}

/// The reading thread's side: dispatch, merge back, number connections.
pub(super) struct Shards {
    senders: Vec<SyncSender<ToWorker>>,
    receivers: Vec<Receiver<FromWorker>>,
    handles: Vec<Option<JoinHandle<()>>>,
    /// Per worker: the batch being filled, batches sent and not yet answered, the answers
    /// being merged.
    pending: Vec<Batch>,
    sent: Vec<usize>,
    current: Vec<std::vec::IntoIter<FrameOut>>,
    in_flight: usize,
    max_in_flight: usize,
    order: VecDeque<Dispatched>,
    /// (worker, its connection number) → the run's.
    ids: HashMap<(usize, ConnId), ConnId>,
    next_id: u32,
    link_error_seen: bool,
    /// Maps frames may lie in, shared with the workers; the last one a frame was found in.
    maps: Vec<SharedMap>,
    last_map: usize,
    /// A frame was pushed: too late to share maps.
    pushed: bool,
    /// The worker-held shares over all workers, added up in frame order: used now, and peak.
    used: [i64; SHARES],
    peak: [usize; SHARES],
}

impl Shards {
    /// `n` workers, each with its part of the bounds. None if the threads cannot be started
    /// (the caller then runs on one thread).
    pub(super) fn start(
        n: usize,
        reassembly: &ReassemblyConfig,
        limits: &Limits,
        keys: &Arc<KeyRing>,
    ) -> Option<Shards> {
        let max_in_flight = n * IN_FLIGHT_PER_WORKER;
        let mut shards = Shards {
            senders: Vec::with_capacity(n),
            receivers: Vec::with_capacity(n),
            handles: Vec::with_capacity(n),
            pending: (0..n).map(|_| Batch::default()).collect(),
            sent: vec![0; n],
            current: (0..n).map(|_| Vec::new().into_iter()).collect(),
            in_flight: 0,
            max_in_flight,
            order: VecDeque::new(),
            ids: HashMap::new(),
            next_id: 0,
            link_error_seen: false,
            maps: Vec::new(),
            last_map: 0,
            pushed: false,
            used: [0; SHARES],
            peak: [0; SHARES],
        };
        for i in 0..n {
            // Worker i's part of a bound: the parts add up to the whole.
            let part = |total: usize| total / n + usize::from(i < total % n);
            let mut cfg = reassembly.clone();
            cfg.max_buffered_total = part(cfg.max_buffered_total);
            cfg.max_connections = part(cfg.max_connections).max(1);
            let stage = ConnStage {
                framers: Framers::new(limits.framer, part(limits.max_framer_bytes)),
                crypto: Decryptor::with_share(
                    keys.clone(),
                    Share::new(Kind::Sessions, part(limits.max_session_bytes)),
                ),
                events: Vec::new(),
                ops: Vec::new(),
                shed: 0,
            };
            // Never full: at most `max_in_flight` batches and answers are out at once.
            let (to_tx, to_rx) = sync_channel(max_in_flight + 1);
            let (from_tx, from_rx) = sync_channel(max_in_flight + 1);
            let reassembler = Reassembler::new(cfg);
            let handle = std::thread::Builder::new()
                .name(format!("sqos-worker-{i}"))
                .spawn(move || work(reassembler, stage, to_rx, from_tx))
                .ok()?;
            shards.senders.push(to_tx);
            shards.receivers.push(from_rx);
            shards.handles.push(Some(handle));
        }
        Some(shards)
    }

    pub(super) fn workers(&self) -> usize {
        self.senders.len()
    }

    /// Frames handed to [`Shards::push`] that lie in one of `maps` reach their workers where
    /// they lie, not copied. Each map keeps its pages until its frames are merged back. Before
    /// the first frame only (the batches and frames out number the maps).
    pub(super) fn share_maps(&mut self, maps: Vec<SharedMap>) {
        if self.pushed || maps.is_empty() {
            return;
        }
        for m in &maps {
            m.keep_from(0);
        }
        for w in 0..self.senders.len() {
            if self.senders[w].send(ToWorker::Maps(maps.clone())).is_err() {
                self.worker_died(w);
            }
        }
        self.maps = maps;
    }

    /// The shared map `data` lies in, and where.
    fn locate(&mut self, data: &[u8]) -> Option<(usize, usize, usize)> {
        let hit = |i: usize, maps: &[SharedMap]| {
            let r = maps.get(i)?.range_of(data)?;
            Some((i, r.start, r.end))
        };
        if let Some(found) = hit(self.last_map, &self.maps) {
            return Some(found);
        }
        let found = (0..self.maps.len()).find_map(|i| hit(i, &self.maps))?;
        self.last_map = found.0;
        Some(found)
    }

    /// Take a frame: to the worker of its connection, or settled here.
    pub(super) fn push(&mut self, frame: &Frame<'_>) {
        let route = match decode_link(frame.link_type, frame.data) {
            Err(e) if !self.link_error_seen => {
                self.link_error_seen = true;
                Route::LinkError(e)
            }
            Err(_) => Route::Undecoded,
            Ok(l3) => match connection_ends(l3) {
                Ends::Tcp(a, b) => Route::Worker(worker_of(a, b, self.senders.len())),
                Ends::NotTcp => Route::Nothing,
                Ends::Undecoded => Route::Undecoded,
            },
        };
        self.pushed = true;
        let in_map = self.locate(frame.data);
        if let Route::Worker(w) = route {
            if let Some(batch) = self.pending.get_mut(w) {
                let at = match in_map {
                    Some((map, start, end)) => Place::Map { map, start, end },
                    None => {
                        let start = batch.data.len();
                        batch.data.extend_from_slice(frame.data);
                        Place::Batch {
                            start,
                            end: batch.data.len(),
                        }
                    }
                };
                batch.bytes += frame.data.len();
                batch.frames.push(FrameIn {
                    number: frame.number,
                    ts: frame.ts,
                    link_type: frame.link_type,
                    at,
                });
                if batch.bytes >= BATCH_BYTES || batch.frames.len() >= BATCH_FRAMES {
                    self.send(w);
                }
            }
        }
        self.order.push_back(Dispatched {
            number: frame.number,
            ts: frame.ts,
            in_map: in_map.map(|(map, _, end)| (map, end)),
            cut: frame
                .is_truncated()
                .then_some((frame.number, frame.data.len(), frame.orig_len)),
            route,
        });
    }

    /// True while too much is out: merge before reading on.
    pub(super) fn must_merge(&self) -> bool {
        self.in_flight >= self.max_in_flight || self.order.len() > self.max_in_flight * BATCH_FRAMES
    }

    /// The oldest frame not yet merged, with its result (waiting for its worker); None when
    /// every frame taken is merged.
    pub(super) fn next(&mut self) -> Option<Merged> {
        let d = self.order.pop_front()?;
        if let Some(map) = d.in_map.and_then(|(i, end)| Some((self.maps.get(i)?, end))) {
            // Merged: the worker is done with the bytes before its end.
            map.0.keep_from(map.1);
        }
        let mut m = Merged {
            number: d.number,
            ts: d.ts,
            cut: d.cut,
            undecoded: false,
            link_error: None,
            ops: Vec::new(),
        };
        match d.route {
            Route::Worker(w) => {
                let out = self.result(w);
                if let Some(swings) = &out.swings {
                    self.account(swings);
                }
                m.undecoded = out.undecoded;
                m.ops = out.ops;
                self.number(w, &mut m.ops);
            }
            Route::Nothing => {}
            Route::Undecoded => m.undecoded = true,
            Route::LinkError(e) => m.link_error = Some(e),
        }
        Some(m)
    }

    /// Every frame is merged: the workers' ends of the capture, in the single thread's order.
    pub(super) fn finish(mut self) -> Ended {
        let mut ends = Vec::new();
        for w in 0..self.senders.len() {
            if self.senders[w].send(ToWorker::Finish).is_err() {
                self.worker_died(w);
            }
        }
        for w in 0..self.receivers.len() {
            match self.receivers[w].recv() {
                Ok(FromWorker::Finished(end)) => ends.push((w, *end)),
                _ => self.worker_died(w),
            }
        }
        let mut last = (0, Timestamp::default());
        let mut conns = Vec::new();
        let mut framers = Vec::new();
        let mut shed = 0;
        let mut memory = Vec::new();
        for (w, end) in ends {
            if end.last.0 > last.0 {
                last = end.last;
            }
            for (conn, mut ops, swings) in end.conns {
                self.number(w, &mut ops);
                if let Some(&id) = self.ids.get(&(w, conn)) {
                    conns.push((id, ops, swings));
                }
            }
            for (conn, dir, events) in end.framers {
                if let Some(&g) = self.ids.get(&(w, conn)) {
                    framers.push((g, dir, events));
                }
            }
            shed += end.shed;
            memory.extend(end.memory);
        }
        // Each worker's lists are in its order; the run's connection numbers interleave them.
        conns.sort_by_key(|(conn, _, _)| *conn);
        framers.sort_by_key(|(conn, dir, _)| (*conn, *dir == Dir::ToClient));
        let mut delivered = Vec::with_capacity(conns.len());
        for (_, ops, swings) in conns {
            self.account(&swings);
            delivered.push(ops);
        }
        // The framers' flush only gives back. The shares' peaks are the ones added up in
        // frame order, not the sum of the workers' own.
        let mut memory = crate::budget::merged(memory);
        for m in &mut memory {
            if let Some(k) = SHARE_KINDS.iter().position(|k| *k == m.kind) {
                m.peak_bytes = self.peak[k] as u64;
            }
        }
        Ended {
            last,
            conns: delivered,
            framers,
            shed,
            memory,
        }
    }

    /// One step's swings of the worker-held shares, in frame order.
    fn account(&mut self, swings: &[Swing; SHARES]) {
        for (k, s) in swings.iter().enumerate() {
            let used = usize::try_from(self.used[k].max(0)).unwrap_or(0);
            self.peak[k] = self.peak[k].max(used.saturating_add(s.rise));
            self.used[k] += s.delta;
        }
    }

    /// Worker `w`'s result for its oldest frame not yet merged.
    fn result(&mut self, w: usize) -> FrameOut {
        loop {
            if let Some(out) = self.current.get_mut(w).and_then(Iterator::next) {
                return out;
            }
            if self.sent.get(w) == Some(&0) {
                if self.pending.get(w).is_none_or(|b| b.frames.is_empty()) {
                    // Nothing out for this worker: cannot happen (the frame was dispatched).
                    return FrameOut::default();
                }
                self.send(w);
            }
            match self.receivers.get(w).map(Receiver::recv) {
                Some(Ok(FromWorker::Frames(outs))) => {
                    self.sent[w] -= 1;
                    self.in_flight -= 1;
                    self.current[w] = outs.into_iter();
                }
                _ => self.worker_died(w),
            }
        }
    }

    fn send(&mut self, w: usize) {
        let batch = std::mem::take(&mut self.pending[w]);
        if batch.frames.is_empty() {
            return;
        }
        self.pending[w] = Batch {
            // Frames that lie in a shared map are not copied: no room needed for them.
            data: Vec::with_capacity(if self.maps.is_empty() {
                BATCH_BYTES + 2048
            } else {
                0
            }),
            bytes: 0,
            frames: Vec::with_capacity(BATCH_FRAMES),
        };
        if self.senders[w].send(ToWorker::Frames(batch)).is_err() {
            self.worker_died(w);
        }
        self.sent[w] += 1;
        self.in_flight += 1;
    }

    /// Worker `w`'s connection numbers in `ops` become the run's; a new connection takes the
    /// next number (the order they appear in is the frame order: the single thread's).
    fn number(&mut self, w: usize, ops: &mut Vec<(ConnId, WorkerOp)>) {
        ops.retain_mut(|(conn, op)| match op {
            WorkerOp::Connection(_) => {
                let id = ConnId(self.next_id);
                self.next_id = self.next_id.wrapping_add(1);
                self.ids.insert((w, *conn), id);
                *conn = id;
                true
            }
            WorkerOp::Forget => {
                self.ids.remove(&(w, *conn));
                false
            }
            _ => match self.ids.get(&(w, *conn)) {
                Some(&id) => {
                    *conn = id;
                    true
                }
                None => false,
            },
        });
    }

    /// A worker stopped answering: it panicked. Carry its panic on here.
    fn worker_died(&mut self, w: usize) -> ! {
        if let Some(handle) = self.handles.get_mut(w).and_then(Option::take) {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
        panic!("sqos worker thread {w} ended before the capture did");
    }
}

impl Drop for Shards {
    /// Stopped early (or done): the workers see their queues close and end.
    fn drop(&mut self) {
        for m in &self.maps {
            m.keep_from(usize::MAX);
        }
        self.senders.clear();
        for handle in self.handles.iter_mut().filter_map(Option::take) {
            let _ = handle.join();
        }
    }
}

enum Ends {
    Tcp(SocketAddr, SocketAddr),
    NotTcp,
    Undecoded,
}

/// A frame's TCP endpoints, read from the fixed header offsets where the headers are plain
/// (IPv4 unfragmented, IPv6 without extension headers), else by the full decoder: the same
/// ends `decode_tcp` finds, so every segment of a connection goes to the same worker.
fn connection_ends(l3: L3Packet<'_>) -> Ends {
    let plain = match l3 {
        L3Packet::Ipv4(d) => ipv4_ends(d),
        L3Packet::Ipv6(d) => ipv6_ends(d),
        L3Packet::Other { .. } => return Ends::NotTcp,
    };
    if let Some((a, b)) = plain {
        return Ends::Tcp(a, b);
    }
    match decode_tcp(l3) {
        Ok(Some(seg)) => Ends::Tcp(seg.src, seg.dst),
        Ok(None) => Ends::NotTcp,
        Err(_) => Ends::Undecoded,
    }
}

/// The worker of the connection between `a` and `b` (either way round), of `n`. Called for
/// every frame: a multiply per end instead of a generic hasher over two `SocketAddr`s.
fn worker_of(a: SocketAddr, b: SocketAddr, n: usize) -> usize {
    fn end(e: SocketAddr) -> u64 {
        let ip = match e.ip() {
            IpAddr::V4(ip) => u64::from(u32::from(ip)),
            IpAddr::V6(ip) => {
                let x = u128::from(ip);
                (x >> 64) as u64 ^ x as u64
            }
        };
        (ip.rotate_left(16) ^ u64::from(e.port())).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
    // A sum is the same both ways round; its high bits are the well mixed ones.
    let h = end(a).wrapping_add(end(b));
    ((u128::from(h ^ (h >> 29)) * n as u128) >> 64) as usize
}

fn port_at(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(d.get(at..at + 2)?.try_into().ok()?))
}

fn ipv4_ends(d: &[u8]) -> Option<(SocketAddr, SocketAddr)> {
    let first = *d.first()?;
    let ihl = usize::from(first & 0x0f) * 4;
    // Not version 4, options too short, not TCP, or a fragment: left to the full decoder.
    let fragment = port_at(d, 6)? & 0x3fff != 0;
    if first >> 4 != 4 || ihl < 20 || *d.get(9)? != 6 || fragment {
        return None;
    }
    let src: [u8; 4] = d.get(12..16)?.try_into().ok()?;
    let dst: [u8; 4] = d.get(16..20)?.try_into().ok()?;
    Some((
        SocketAddr::new(IpAddr::V4(Ipv4Addr::from(src)), port_at(d, ihl)?),
        SocketAddr::new(IpAddr::V4(Ipv4Addr::from(dst)), port_at(d, ihl + 2)?),
    ))
}

fn ipv6_ends(d: &[u8]) -> Option<(SocketAddr, SocketAddr)> {
    if d.first()? >> 4 != 6 || *d.get(6)? != 6 {
        return None;
    }
    let src: [u8; 16] = d.get(8..24)?.try_into().ok()?;
    let dst: [u8; 16] = d.get(24..40)?.try_into().ok()?;
    Some((
        SocketAddr::new(IpAddr::V6(Ipv6Addr::from(src)), port_at(d, 40)?),
        SocketAddr::new(IpAddr::V6(Ipv6Addr::from(dst)), port_at(d, 42)?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn ends_of(l3: L3Packet<'_>) -> Option<(SocketAddr, SocketAddr)> {
        match connection_ends(l3) {
            Ends::Tcp(a, b) => Some((a, b)),
            Ends::NotTcp | Ends::Undecoded => None,
        }
    }

    fn decoded(l3: L3Packet<'_>) -> Option<(SocketAddr, SocketAddr)> {
        decode_tcp(l3).ok().flatten().map(|s| (s.src, s.dst))
    }

    /// An IPv4 TCP segment carrying `payload`.
    fn v4(src: [u8; 4], dst: [u8; 4], ports: (u16, u16), payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        PacketBuilder::ipv4(src, dst, 64)
            .tcp(ports.0, ports.1, 7, 1000)
            .write(&mut out, payload)
            .expect("a segment that fits");
        out
    }

    /// An IPv6 TCP segment carrying `data`.
    fn v6(ports: (u16, u16)) -> Vec<u8> {
        let mut out = Vec::new();
        PacketBuilder::ipv6([0xfd; 16], [0x01; 16], 64)
            .tcp(ports.0, ports.1, 7, 1000)
            .write(&mut out, b"data")
            .expect("a segment that fits");
        out
    }

    #[test]
    fn the_fixed_offsets_give_the_ends_the_decoder_gives() {
        let v4 = v4([10, 0, 0, 11], [10, 0, 0, 100], (50_112, 445), b"data");
        let l3 = L3Packet::Ipv4(&v4);
        assert_eq!(ipv4_ends(&v4), decoded(l3));
        assert_eq!(
            ends_of(l3).map(|(a, b)| (a.to_string(), b.to_string())),
            Some(("10.0.0.11:50112".into(), "10.0.0.100:445".into()))
        );
        // Cut inside the TCP header: the ports are there, the segment is not (any worker
        // counts it as undecoded alike).
        assert!(ipv4_ends(&v4[..24]).is_some() && decoded(L3Packet::Ipv4(&v4[..24])).is_none());

        let v6 = v6((445, 49_999));
        assert_eq!(ipv6_ends(&v6), decoded(L3Packet::Ipv6(&v6)));
        assert!(ipv6_ends(&v6).is_some());
    }

    #[test]
    fn a_connection_has_one_worker_both_ways_and_connections_spread() {
        let server: SocketAddr = "10.0.0.100:445".parse().unwrap();
        for n in [2, 3, 16] {
            let mut per_worker = vec![0; n];
            // synth's hosts: 8 clients with 2 channels each.
            for host in 11..19u8 {
                for port in [50_112, 50_113] {
                    let client = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, host)), port);
                    let w = worker_of(client, server, n);
                    assert_eq!(w, worker_of(server, client, n));
                    per_worker[w] += 1;
                }
            }
            // 16 connections over n workers: each worker gets at least half its even part
            // (with 16 workers: at least 8 of them get one).
            let busy = per_worker.iter().filter(|&&c| c > 0).count();
            match n {
                16 => assert!(busy >= 8, "{per_worker:?}"),
                _ => assert!(per_worker.iter().all(|&c| c >= 8 / n), "{per_worker:?}"),
            }
        }
        let v6 = |p| SocketAddr::new(IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, p)), p);
        assert_eq!(worker_of(v6(1), v6(445), 5), worker_of(v6(445), v6(1), 5));
    }

    #[test]
    fn fragments_options_and_extension_headers_go_to_the_decoder() {
        let mut frag = v4([10, 0, 0, 1], [10, 0, 0, 2], (1, 445), b"x");
        frag[6] |= 0x20; // more fragments
        assert_eq!(ipv4_ends(&frag), None);
        assert!(matches!(
            connection_ends(L3Packet::Ipv4(&frag)),
            Ends::Undecoded
        ));

        // IPv6 with a hop-by-hop header before TCP: the full decoder finds the ports.
        let v6 = v6((50_000, 445));
        let mut ext = v6[..40].to_vec();
        ext[6] = 0; // next header: hop-by-hop options
        ext.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]); // then TCP, 8 bytes of padding
        ext.extend_from_slice(&v6[40..]);
        let len = u16::from_be_bytes([ext[4], ext[5]]) + 8;
        ext[4..6].copy_from_slice(&len.to_be_bytes());
        assert_eq!(ipv6_ends(&ext), None);
        let found = ends_of(L3Packet::Ipv6(&ext));
        assert_eq!(found, decoded(L3Packet::Ipv6(&ext)));
        assert_eq!(found.map(|(_, b)| b.port()), Some(445));

        let udp = [
            0x45u8, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        assert!(matches!(
            connection_ends(L3Packet::Ipv4(&udp)),
            Ends::NotTcp
        ));
    }
}
