//! `PipelineConfig::threads` (`--threads N`, N > 2): one capture on N threads, the reading
//! thread, the one reading the file ahead (`CaptureReader::read_ahead`; a mapped file's pager,
//! `SharedMap::pager`) and N - 2 workers.
//!
//! A worker runs everything that belongs to its connections: link, IP and TCP decoding,
//! reassembly, SMB2 framing (each its own share of the memory budget). The reading thread reads
//! the frames, hands them out in batches, and takes the workers' answers back in frame order
//! into the one session-wide stage (matching, sessions over channels, the outbox, statistics),
//! exactly as the single-threaded layer would have at each frame. Connection numbers are given
//! there, in the order connections appear, so they are the single thread's.
//!
//! A worker answers a batch with what its frames did, in order: each frame that did something
//! downstream (opened, framed messages, closed, moved a share; see [`WorkerOp`]) on its own,
//! the others — nearly every frame of a bulk transfer, and its ACKs — as runs ([`FrameRun`]s),
//! which the merge takes at once. Those frames a worker takes in runs through its bulk lane,
//! as one thread does (`Pipeline::push_run`). With one worker (N = 3) it is given every frame as it is read,
//! nothing decoded on the reading thread, and its answers are the merge. With several, the
//! reading thread finds each frame's connection from its addresses and ports (both directions
//! alike; a run of the last connection's frames by 12 bytes at fixed offsets), sends it to
//! worker `hash(connection) % (N - 1)`, and keeps a line of the frames it dispatched: frame n
//! comes from worker w(n), whose frames are answered in order, so no sorting.
//!
//! A frame read from a memory-mapped file reaches its worker where it lies: the batch says
//! where in the map ([`SharedMap`], shared with the workers once), and the reader keeps the
//! map's pages until the frame is merged back. Frames from elsewhere (a buffer the reader
//! reuses) are copied into the batch. Batches and answers go back and forth emptied, so that
//! nothing is allocated on one thread to be freed on the other per batch.
//!
//! Memory stays bounded: a batch holds at most [`BATCH_BYTES`] of copied frames (about
//! [`MAPPED_OUT`] of a map is out over all batches), and at most [`IN_FLIGHT_PER_WORKER`]
//! batches per worker are out before the reading thread stops reading to merge (backpressure,
//! not growth). The workers' shares add up to the budget's: output is the single thread's byte
//! for byte as long as no share fills; when one does, what is dropped is chosen within the
//! worker's share (its connections), not over all connections (with one worker, the share is
//! the whole). The shares' peaks (`sqos stats`) are the single thread's too: each frame's result
//! says how far it moved the worker's shares ([`Swing`]), and the reading thread adds them up in
//! frame order.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

use foldhash::fast::FixedState;

use super::streams::{Framers, WorkerOp};
use super::{LaneBackoff, Limits};
use crate::budget::{Kind, MemoryUse, Share};
use crate::capture::{
    decode_link, is_cut, Frame, FrameRun, L3Packet, LinkError, SharedMap, Timestamp,
};
use crate::net::{
    decode_tcp, CloseKind, ConnId, ConnKey, Dir, NetNote, Reassembler, ReassemblyConfig, StreamSink,
};
use crate::smb2::crypto::{Decryptor, KeyRing};
use crate::smb2::FramerEvent;

/// Frame bytes (and frames) a batch for one worker collects before it is sent. Frames that lie
/// in a shared map are not copied: their batches may span more of the map (what the reader
/// keeps mapped until they are merged back), and fewer batches mean fewer wake-ups.
const BATCH_BYTES: usize = 128 << 10;
const BATCH_FRAMES: usize = 1024;
/// At most this much of a shared map is out in batches (sent or being filled) over all
/// workers: the reader keeps those pages mapped (peak RSS).
const MAPPED_OUT: usize = 2 << 20;
/// Frames ahead of the one it works on whose headers a worker asks the CPU for, and how far
/// into a frame they go (Ethernet, IPv4 and TCP without options).
const PREFETCH_AHEAD: usize = 4;
const HEADERS: usize = 14 + 20 + 20;
/// How far the merge lets a shared map's kept pages lag behind the frames merged back.
const KEEP_STEP: usize = 256 << 10;
/// Batches per worker sent and not yet merged back, at most.
const IN_FLIGHT_PER_WORKER: usize = 3;
/// Lists of framer events merged and emptied that the reading thread keeps to send back to a
/// worker ([`Shards::spent_events`]), at most; and at most this many go with one batch.
const SPENT_EVENTS: usize = 1024;
const EVENTS_PER_BATCH: usize = 256;
/// A list with room for more events than this (a flush or a gap that completed many) is
/// freed, not kept: the lists kept hold at most `SPENT_EVENTS * SPENT_ROOM` events' room (a
/// push mostly completes one or two).
const SPENT_ROOM: usize = 8;

/// Keeps a list of framer events the merge emptied among the `spent` ones to send back, within
/// [`SPENT_EVENTS`] lists of at most [`SPENT_ROOM`] room each; else frees it.
pub(super) fn keep_spent(spent: &mut Vec<Vec<FramerEvent>>, events: Vec<FramerEvent>) {
    if spent.len() < SPENT_EVENTS && events.capacity() <= SPENT_ROOM {
        spent.push(events);
    }
}

struct FrameIn {
    number: u64,
    ts: Timestamp,
    link_type: u32,
    /// Its length on the wire (it was cut by the snaplen if its bytes are fewer).
    orig_len: u32,
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
    /// Room for the answer (its items and ops come back in it, and it back in the next
    /// batch): what crosses between the threads is not allocated on one and freed on the other.
    items: VecDeque<Item>,
    ops: VecDeque<(ConnId, WorkerOp)>,
    /// Lists of framer events the merge emptied, this worker's own, for its next pushes (see
    /// [`Shards::spent_events`]).
    events: Vec<Vec<FramerEvent>>,
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

/// What a worker did with one frame that did something the session stage sees (or was cut).
struct FrameOut {
    /// The frame's place among the frames its worker was given (0, 1, ...).
    seq: u64,
    number: u64,
    ts: Timestamp,
    cut: Option<(u64, usize, u32)>,
    undecoded: bool,
    /// The first frame whose link layer does not decode (a sole worker is given every frame).
    link_error: Option<LinkError>,
    /// How many of the answer's ops are this frame's (the next ones in line).
    ops: usize,
    /// None when it moved no share.
    swings: Option<[Swing; SHARES]>,
}

/// A worker's answer to a batch, in frame order: the frames that did something one by one, the
/// others as runs. Most frames (a bulk transfer's segments, ACKs) do nothing the session stage
/// sees; a run of them costs the merge what one frame does.
struct Answer {
    items: VecDeque<Item>,
    /// The ops of the frames in `items`, in order.
    ops: VecDeque<(ConnId, WorkerOp)>,
    /// Frames of the worker up to (not including) this place are answered.
    through: u64,
    /// The batch, emptied: the next one to fill (no allocation per batch on either side).
    spent: Batch,
}

enum Item {
    Quiet(FrameRun),
    Frame(FrameOut),
}

// `Frames` is nearly every message, `Finished` one a run: boxing the answer would allocate
// on the worker and free on the reading thread per batch.
#[allow(clippy::large_enum_variant)]
enum FromWorker {
    Frames(Answer),
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
    /// Emptied lists to take `events`' place when it goes out with an op: this worker's own,
    /// sent back (so never more than it once allocated).
    spare_events: Vec<Vec<FramerEvent>>,
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
            let spare = self.spare_events.pop().unwrap_or_default();
            let events = std::mem::replace(&mut self.events, spare);
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

    fn skip_room(&mut self, conn: ConnId, dir: Dir) -> u64 {
        self.framers.skip_room(conn, dir)
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
    /// The step's swings; None when it moved no share (most frames: a few compares).
    fn moved(
        &mut self,
        reassembler: &mut Reassembler,
        stage: &mut ConnStage,
    ) -> Option<[Swing; SHARES]> {
        let now = Self::now(reassembler, stage);
        let still = now
            .iter()
            .zip(&self.used)
            .all(|(&(used, peak), &before)| used == before && peak <= before);
        (!still).then(|| self.swings(now))
    }

    fn step(&mut self, reassembler: &mut Reassembler, stage: &mut ConnStage) -> [Swing; SHARES] {
        let now = Self::now(reassembler, stage);
        self.swings(now)
    }

    /// Each share's (used, peak since the last step).
    fn now(reassembler: &mut Reassembler, stage: &mut ConnStage) -> [(usize, usize); SHARES] {
        let [conns, held] = reassembler.take_peaks();
        [
            conns,
            held,
            stage.framers.take_peak(),
            stage.crypto.take_peak(),
        ]
    }

    fn swings(&mut self, now: [(usize, usize); SHARES]) -> [Swing; SHARES] {
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
    let mut seq = 0;
    let mut link_error_seen = false;
    let mut backoff = LaneBackoff::default();
    while let Ok(msg) = rx.recv() {
        match msg {
            ToWorker::Maps(shared) => maps = shared,
            ToWorker::Frames(mut batch) => {
                stage.spare_events.append(&mut batch.events);
                let mut items = std::mem::take(&mut batch.items);
                let mut ops = std::mem::take(&mut batch.ops);
                let mut quiet: Option<FrameRun> = None;
                let frames = &batch.frames;
                let bytes = |f: &FrameIn| {
                    match f.at {
                        Place::Batch { start, end } => batch.data.get(start..end),
                        Place::Map { map, start, end } => maps
                            .get(map)
                            .and_then(|m: &SharedMap| m.bytes().get(start..end)),
                    }
                    .unwrap_or(&[])
                };
                // The reading thread touched the frames' first lines last, on its core: fetch
                // the ones a few frames on before they are needed here.
                let prefetch = |i: usize| {
                    if let Some(&FrameIn {
                        at: Place::Map { map, start, .. },
                        ..
                    }) = frames.get(i + PREFETCH_AHEAD)
                    {
                        if let Some(m) = maps.get(map) {
                            m.prefetch(start);
                            m.prefetch(start + HEADERS);
                        }
                    }
                };
                let mut i = 0;
                loop {
                    // A run of frames the bulk lane takes, as on one thread (`push_run`): each
                    // is a quiet frame, what the full path below would make of it.
                    if backoff.ready() {
                        if let Some(mut lane) = reassembler.bulk_lane() {
                            let mut run = None;
                            while let Some(f) = frames.get(i) {
                                prefetch(i);
                                let data = bytes(f);
                                if !lane.take_frame(f.link_type, data, f.orig_len, &mut stage) {
                                    break;
                                }
                                FrameRun::add(&mut run, f.number, f.ts);
                                i += 1;
                            }
                            backoff.tried(run.as_ref().map_or(0, |r| r.frames));
                            if let Some(run) = run {
                                lane.close(&run, &mut stage);
                                last = run.last;
                                seq += run.frames;
                                FrameRun::append(&mut quiet, run);
                            }
                        }
                    }
                    let Some(f) = frames.get(i) else {
                        break;
                    };
                    i += 1;
                    prefetch(i - 1);
                    let data = bytes(f);
                    let mut undecoded = false;
                    let mut link_error = None;
                    match decode_link(f.link_type, data) {
                        Ok(l3) => match reassembler.push_packet(f.number, f.ts, l3, &mut stage) {
                            Ok(true) => last = (f.number, f.ts),
                            Ok(false) => {}
                            Err(_) => undecoded = true,
                        },
                        // Only a sole worker is given frames before their link layer is
                        // decoded: its first error is the capture's.
                        Err(e) if !link_error_seen => {
                            link_error_seen = true;
                            link_error = Some(e);
                        }
                        Err(_) => undecoded = true,
                    }
                    let swings = accounts.moved(&mut reassembler, &mut stage);
                    let moved = swings.is_some();
                    let cut = is_cut(data.len(), f.orig_len).then_some((
                        f.number,
                        data.len(),
                        f.orig_len,
                    ));
                    let did = undecoded || moved || link_error.is_some() || !stage.ops.is_empty();
                    if did || cut.is_some() {
                        items.extend(quiet.take().map(Item::Quiet));
                        items.push_back(Item::Frame(FrameOut {
                            seq,
                            number: f.number,
                            ts: f.ts,
                            cut,
                            undecoded,
                            link_error,
                            ops: stage.ops.len(),
                            swings,
                        }));
                        ops.extend(stage.ops.drain(..));
                    } else {
                        FrameRun::add(&mut quiet, f.number, f.ts);
                    }
                    seq += 1;
                }
                items.extend(quiet.take().map(Item::Quiet));
                batch.frames.clear();
                batch.data.clear();
                batch.bytes = 0;
                let answer = Answer {
                    items,
                    ops,
                    through: seq,
                    spent: batch,
                };
                if tx.send(FromWorker::Frames(answer)).is_err() {
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
#[derive(Clone, Copy)]
enum Route {
    Worker(usize),
    /// Settled on the reading thread: not TCP over IP, or headers that do not decode.
    Here,
}

/// A dispatched frame, as the merge needs it: most frames are merged from this alone.
#[derive(Clone, Copy)]
struct Dispatched {
    number: u64,
    ts: Timestamp,
    route: Route,
    /// It has a [`Special`] (the next one in line).
    special: bool,
}

/// What little frames have that most do not: kept aside, so that the line of dispatched frames
/// stays small.
struct Special {
    /// Cut by the snaplen: (number, captured, on the wire).
    cut: Option<(u64, usize, u32)>,
    undecoded: bool,
    /// The first frame whose link layer does not decode (later ones are `undecoded`).
    link_error: Option<LinkError>,
}

/// One frame's result, merged back in frame order, connections numbered for the run.
pub(super) struct Merged {
    pub(super) number: u64,
    pub(super) ts: Timestamp,
    pub(super) cut: Option<(u64, usize, u32)>,
    pub(super) undecoded: bool,
    pub(super) link_error: Option<LinkError>,
    pub(super) ops: Vec<(ConnId, WorkerOp)>,
    /// The worker whose ops these are (None: a frame the reading thread kept).
    pub(super) worker: Option<usize>,
}

/// What the merge gives back next, in frame order.
pub(super) enum Step {
    Quiet(FrameRun),
    Frame(Merged),
}

impl Step {
    /// The worker whose ops a frame's step carries (None: quiet frames, or a frame the reading
    /// thread kept).
    pub(super) fn worker(&self) -> Option<usize> {
        match self {
            Step::Quiet(_) => None,
            Step::Frame(m) => m.worker,
        }
    }
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

/// A worker's answers being merged: the frames of it that did something, and how far it has
/// answered.
struct Answered {
    items: VecDeque<Item>,
    ops: VecDeque<(ConnId, WorkerOp)>,
    through: u64,
    /// Its frames merged so far (the place of the next one to merge).
    merged: u64,
}

impl Answered {
    /// The next frame that did something. (With several workers the line of dispatched frames
    /// says which frames were quiet: the runs are not needed.)
    fn peek_frame(&mut self) -> Option<&FrameOut> {
        while let Some(Item::Quiet(_)) = self.items.front() {
            self.items.pop_front();
        }
        match self.items.front() {
            Some(Item::Frame(out)) => Some(out),
            _ => None,
        }
    }

    fn take_frame(&mut self) -> Option<FrameOut> {
        self.peek_frame()?;
        match self.items.pop_front() {
            Some(Item::Frame(out)) => Some(out),
            _ => None,
        }
    }
}

/// The reading thread's side: dispatch, merge back, number connections.
pub(super) struct Shards {
    senders: Vec<SyncSender<ToWorker>>,
    receivers: Vec<Receiver<FromWorker>>,
    handles: Vec<Option<JoinHandle<()>>>,
    /// Per worker: the batch being filled, batches sent and not yet answered, the answers
    /// being merged.
    pending: Vec<Batch>,
    /// Batches answered, emptied, to fill again; lists of ops merged, emptied.
    spare: Vec<Batch>,
    spare_ops: Vec<Vec<(ConnId, WorkerOp)>>,
    /// Lists of framer events merged and emptied, by the worker that filled them, sent back to
    /// it with its next batches: a list goes back to the thread that allocated it (one given to
    /// another worker whose pushes complete fewer events would pile up there, while its own
    /// worker allocated anew).
    spent_events: Vec<Vec<Vec<FramerEvent>>>,
    sent: Vec<usize>,
    answered: Vec<Answered>,
    in_flight: usize,
    max_in_flight: usize,
    /// Bytes of a shared map a batch may span ([`MAPPED_OUT`] shared out).
    batch_mapped_bytes: usize,
    order: VecDeque<Dispatched>,
    specials: VecDeque<Special>,
    /// (worker, its connection number) → the run's. Looked up for every op merged: foldhash,
    /// not SipHash (the keys are our own numbers, not the capture's).
    ids: HashMap<(usize, ConnId), ConnId, FixedState>,
    next_id: u32,
    link_error_seen: bool,
    /// Maps frames may lie in, shared with the workers; the last one a frame was found in.
    maps: Vec<SharedMap>,
    last_map: usize,
    /// Per map, where its last mark was set; the marks: once frame `.0` is merged, the pages
    /// of map `.1` before `.2` are free.
    marked: Vec<usize>,
    marks: VecDeque<(u64, usize, usize)>,
    /// The last connection's ends as they lie in an IPv4 header (addresses, then ports), and its
    /// worker: the frames of a transfer come in runs, and a run needs no hashing.
    last_conn: Option<([u8; 12], usize)>,
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
            spare: Vec::new(),
            spare_ops: Vec::new(),
            spent_events: (0..n).map(|_| Vec::new()).collect(),
            answered: (0..n)
                .map(|_| Answered {
                    items: VecDeque::new(),
                    ops: VecDeque::new(),
                    through: 0,
                    merged: 0,
                })
                .collect(),
            in_flight: 0,
            max_in_flight,
            batch_mapped_bytes: (MAPPED_OUT / (max_in_flight + n).max(1)).max(64 << 10),
            order: VecDeque::new(),
            specials: VecDeque::new(),
            ids: HashMap::with_hasher(FixedState::default()),
            next_id: 0,
            link_error_seen: false,
            maps: Vec::new(),
            last_map: 0,
            marked: Vec::new(),
            marks: VecDeque::new(),
            last_conn: None,
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
                spare_events: Vec::new(),
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
        self.marked = vec![0; maps.len()];
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

    /// The worker of a frame's connection; None if it is settled here. A plain IPv4 segment of
    /// the last frame's connection (either way round) is known by its 12 bytes of addresses and
    /// ports, without building or hashing its ends.
    fn route(&mut self, l3: L3Packet<'_>) -> Result<Option<usize>, ()> {
        let plain = match l3 {
            L3Packet::Ipv4(d) => ipv4_key(d),
            _ => None,
        };
        if let (Some(key), Some((last, w))) = (plain, self.last_conn) {
            if key == last || key == swapped(&last) {
                return Ok(Some(w));
            }
        }
        let w = match connection_ends(l3) {
            Ends::Tcp(a, b) => worker_of(a, b, self.senders.len()),
            Ends::NotTcp => return Ok(None),
            Ends::Undecoded => return Err(()),
        };
        if let Some(key) = plain {
            self.last_conn = Some((key, w));
        }
        Ok(Some(w))
    }

    /// The route of a frame whose link layer is decoded here (several workers).
    fn route_decoded(&mut self, frame: &Frame<'_>, special: &mut Special) -> Route {
        match decode_link(frame.link_type, frame.data) {
            Err(e) => {
                if self.link_error_seen {
                    special.undecoded = true;
                } else {
                    self.link_error_seen = true;
                    special.link_error = Some(e);
                }
                Route::Here
            }
            Ok(l3) => match self.route(l3) {
                Ok(Some(w)) => Route::Worker(w),
                Ok(None) => Route::Here,
                Err(()) => {
                    special.undecoded = true;
                    Route::Here
                }
            },
        }
    }

    /// Take a frame: to the worker of its connection, or settled here.
    pub(super) fn push(&mut self, frame: &Frame<'_>) {
        let mut special = Special {
            cut: frame
                .is_truncated()
                .then_some((frame.number, frame.data.len(), frame.orig_len)),
            undecoded: false,
            link_error: None,
        };
        let route = if self.senders.len() == 1 {
            // A sole worker is given every frame: nothing to decode here.
            Route::Worker(0)
        } else {
            self.route_decoded(frame, &mut special)
        };
        self.pushed = true;
        let in_map = self.locate(frame.data);
        if let Some((map, _, end)) = in_map {
            self.mark(frame.number, map, end);
        }
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
                    orig_len: frame.orig_len,
                    at,
                });
                let full = if in_map.is_some() {
                    batch.bytes >= self.batch_mapped_bytes
                } else {
                    batch.data.len() >= BATCH_BYTES
                };
                if full || batch.frames.len() >= BATCH_FRAMES {
                    self.send(w);
                }
            }
        }
        if self.sole() {
            // Its worker's answers say what every frame did, in order: no line to keep.
            return;
        }
        let is_special = special.cut.is_some() || special.undecoded || special.link_error.is_some();
        if is_special {
            self.specials.push_back(special);
        }
        self.order.push_back(Dispatched {
            number: frame.number,
            ts: frame.ts,
            route,
            special: is_special,
        });
    }

    /// A frame that lies in map `map` up to `end` went out: every [`KEEP_STEP`] of the map, a
    /// mark says that its pages before `end` are free once the frame is merged back.
    fn mark(&mut self, number: u64, map: usize, end: usize) {
        let Some(marked) = self.marked.get_mut(map) else {
            return;
        };
        if end >= marked.saturating_add(KEEP_STEP) {
            *marked = end;
            self.marks.push_back((number, map, end));
        }
    }

    /// True while too much is out: merge before reading on.
    pub(super) fn must_merge(&self) -> bool {
        self.in_flight >= self.max_in_flight || self.order.len() > self.max_in_flight * BATCH_FRAMES
    }

    /// What the oldest frames not yet merged did (waiting for their workers): a run of frames
    /// that did nothing downstream at once, else one frame. None when every frame taken is
    /// merged.
    pub(super) fn next(&mut self) -> Option<Step> {
        if self.sole() {
            return self.next_sole();
        }
        let mut quiet: Option<FrameRun> = None;
        while let Some(&d) = self.order.front() {
            let did = match d.route {
                // With quiet frames to give back, give them back rather than wait.
                Route::Worker(w) => match self.did_something(w, quiet.is_none()) {
                    Some(did) => did,
                    None => break,
                },
                Route::Here => false,
            };
            if did || d.special {
                if quiet.is_some() {
                    // This frame comes after the quiet ones: next time.
                    break;
                }
                self.order.pop_front();
                self.merged_through(d.number);
                return Some(Step::Frame(self.merge_one(d, did)));
            }
            self.order.pop_front();
            if let Route::Worker(w) = d.route {
                if let Some(a) = self.answered.get_mut(w) {
                    a.merged += 1;
                }
            }
            self.merged_through(d.number);
            FrameRun::add(&mut quiet, d.number, d.ts);
        }
        quiet.map(Step::Quiet)
    }

    /// One worker: it was given every frame, and its answers are the merge, in order.
    fn next_sole(&mut self) -> Option<Step> {
        loop {
            match self.answered.first_mut().and_then(|a| a.items.pop_front()) {
                Some(Item::Quiet(q)) => {
                    self.merged_through(q.last.0);
                    return Some(Step::Quiet(q));
                }
                Some(Item::Frame(out)) => {
                    self.merged_through(out.number);
                    let mut m = Merged {
                        number: out.number,
                        ts: out.ts,
                        cut: out.cut,
                        undecoded: false,
                        link_error: None,
                        ops: Vec::new(),
                        worker: Some(0),
                    };
                    self.take_out(0, out, &mut m);
                    return Some(Step::Frame(m));
                }
                None => {
                    if !self.receive(0, true)? {
                        return None;
                    }
                }
            }
        }
    }

    /// Where the merge puts the lists of framer events of `worker`'s ops it emptied (at most
    /// [`SPENT_EVENTS`]): they go back to that worker with its next batches, and its push that
    /// completes events takes one instead of allocating a list another thread then frees.
    /// None for a frame the reading thread kept (it has no lists).
    pub(super) fn spent_events(
        &mut self,
        worker: Option<usize>,
    ) -> Option<&mut Vec<Vec<FramerEvent>>> {
        self.spent_events.get_mut(worker?)
    }

    /// A merged frame's list of ops, applied and emptied: the next frame's.
    pub(super) fn give_back(&mut self, ops: Vec<(ConnId, WorkerOp)>) {
        if ops.capacity() > 0 && self.spare_ops.len() < 4 {
            self.spare_ops.push(ops);
        }
    }

    /// All frames were given to one worker (nothing is decoded on the reading thread).
    fn sole(&self) -> bool {
        self.senders.len() == 1
    }

    /// Frame `number` is merged: the map pages before its marks are free.
    fn merged_through(&mut self, number: u64) {
        while let Some(&(marked, map, end)) = self.marks.front() {
            if marked > number {
                break;
            }
            if let Some(m) = self.maps.get(map) {
                m.keep_from(end);
            }
            self.marks.pop_front();
        }
    }

    /// The frame `d` (taken off the line), which did something or has a [`Special`].
    fn merge_one(&mut self, d: Dispatched, did: bool) -> Merged {
        let special = if d.special {
            self.specials.pop_front()
        } else {
            None
        };
        let mut m = Merged {
            number: d.number,
            ts: d.ts,
            cut: None,
            undecoded: false,
            link_error: None,
            ops: Vec::new(),
            worker: None,
        };
        if let Some(s) = special {
            m.cut = s.cut;
            m.undecoded = s.undecoded;
            m.link_error = s.link_error;
        }
        if let Route::Worker(w) = d.route {
            m.worker = Some(w);
            let out = match self.answered.get_mut(w) {
                Some(a) => {
                    a.merged += 1;
                    if did {
                        a.take_frame()
                    } else {
                        None
                    }
                }
                None => None,
            };
            if let Some(out) = out {
                // (Its cut is the line's, kept aside here.)
                self.take_out(w, out, &mut m);
            }
        }
        m
    }

    /// What worker `w` did with frame `m`, added to it.
    fn take_out(&mut self, w: usize, out: FrameOut, m: &mut Merged) {
        if let Some(swings) = &out.swings {
            self.account(swings);
        }
        m.undecoded |= out.undecoded;
        if m.link_error.is_none() {
            m.link_error = out.link_error;
        }
        let mut ops = self.spare_ops.pop().unwrap_or_default();
        if let Some(a) = self.answered.get_mut(w) {
            let n = out.ops.min(a.ops.len());
            ops.extend(a.ops.drain(..n));
        }
        self.number(w, &mut ops);
        m.ops = ops;
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

    /// Whether worker `w`'s oldest frame not yet merged did something downstream (its answer
    /// has it). When the answer is not in yet: waits for it if `wait`, else None.
    fn did_something(&mut self, w: usize, wait: bool) -> Option<bool> {
        loop {
            let a = self.answered.get_mut(w)?;
            if a.merged < a.through {
                let merged = a.merged;
                return Some(a.peek_frame().is_some_and(|out| out.seq == merged));
            }
            if !self.receive(w, wait)? {
                // Nothing out for this worker: cannot happen (the frame was dispatched).
                return Some(false);
            }
        }
    }

    /// Worker `w`'s next answer, sending its batch being filled first if nothing else is out:
    /// Some(false) if nothing is out at all, None if it is not in and not to be waited for.
    fn receive(&mut self, w: usize, wait: bool) -> Option<bool> {
        if self.sent.get(w) == Some(&0) {
            if self.pending.get(w).is_none_or(|b| b.frames.is_empty()) {
                return Some(false);
            }
            self.send(w);
        }
        let answer = match self.receivers.get(w) {
            Some(rx) if wait => rx.recv().ok(),
            Some(rx) => match rx.try_recv() {
                Ok(answer) => Some(answer),
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => None,
            },
            None => None,
        };
        match answer {
            Some(FromWorker::Frames(answer)) => {
                self.sent[w] -= 1;
                self.in_flight -= 1;
                let a = &mut self.answered[w];
                let mut spent = answer.spent;
                spent.items = std::mem::replace(&mut a.items, answer.items);
                spent.ops = std::mem::replace(&mut a.ops, answer.ops);
                a.through = answer.through;
                self.spare.push(spent);
                Some(true)
            }
            _ => self.worker_died(w),
        }
    }

    fn send(&mut self, w: usize) {
        let next = self.spare.pop().unwrap_or_else(|| Batch {
            // Frames that lie in a shared map are not copied: no room needed for them.
            data: Vec::with_capacity(if self.maps.is_empty() {
                BATCH_BYTES + 2048
            } else {
                0
            }),
            bytes: 0,
            frames: Vec::with_capacity(BATCH_FRAMES),
            items: VecDeque::new(),
            ops: VecDeque::new(),
            events: Vec::new(),
        });
        let mut batch = std::mem::replace(&mut self.pending[w], next);
        if batch.frames.is_empty() {
            return;
        }
        if let Some(spent) = self.spent_events.get_mut(w) {
            let give = spent.len().min(EVENTS_PER_BATCH);
            batch.events.extend(spent.drain(spent.len() - give..));
        }
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

/// A plain IPv4 TCP segment's addresses and ports as they lie in its headers (what
/// [`ipv4_ends`] reads, unbuilt).
#[inline]
fn ipv4_key(d: &[u8]) -> Option<[u8; 12]> {
    let first = *d.first()?;
    let ihl = usize::from(first & 0x0f) * 4;
    let fragment = port_at(d, 6)? & 0x3fff != 0;
    if first >> 4 != 4 || ihl < 20 || *d.get(9)? != 6 || fragment {
        return None;
    }
    let mut key = [0; 12];
    key[..8].copy_from_slice(d.get(12..20)?);
    key[8..].copy_from_slice(d.get(ihl..ihl + 4)?);
    Some(key)
}

/// The same connection's key the other way round.
#[inline]
fn swapped(key: &[u8; 12]) -> [u8; 12] {
    let mut out = [0; 12];
    out[..4].copy_from_slice(&key[4..8]);
    out[4..8].copy_from_slice(&key[..4]);
    out[8..10].copy_from_slice(&key[10..12]);
    out[10..].copy_from_slice(&key[8..10]);
    out
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

    /// A push that completes events sends its list out with the op and takes an emptied one
    /// the merge sent back in its place: no list is allocated on a worker to be freed on the
    /// reading thread.
    #[test]
    fn a_push_that_completes_events_takes_a_list_sent_back() {
        let limits = Limits::default();
        let mut stage = ConnStage {
            framers: Framers::new(limits.framer, limits.max_framer_bytes),
            crypto: Decryptor::new(Arc::default()),
            events: Vec::new(),
            spare_events: vec![Vec::with_capacity(7)],
            ops: Vec::new(),
            shed: 0,
        };
        stage.events.push(FramerEvent::Smb1 { len: 9 });
        stage.record(ConnId(3), Dir::ToClient, false, 0);
        assert_eq!(stage.events.capacity(), 7);
        assert!(stage.spare_events.is_empty());
        match stage.ops.as_slice() {
            [(ConnId(3), WorkerOp::Events { dir, gap, events })] => {
                assert_eq!((*dir, *gap), (Dir::ToClient, false));
                assert_eq!(events, &[FramerEvent::Smb1 { len: 9 }]);
            }
            _ => panic!("one Events op"),
        }
        // With none sent back, a new list (and a push that completed nothing sends nothing).
        stage.record(ConnId(3), Dir::ToClient, false, 0);
        assert_eq!(stage.ops.len(), 1);
        stage.events.push(FramerEvent::Smb1 { len: 1 });
        stage.record(ConnId(3), Dir::ToServer, false, 0);
        assert_eq!((stage.ops.len(), stage.events.capacity()), (2, 0));
    }

    /// A list of framer events goes back to the worker that filled it, not to another: with
    /// one busy connection and one idle, the idle one's worker is sent none (given the busy
    /// one's lists, its pile grew while the busy one allocated anew).
    #[test]
    fn spent_lists_go_back_to_the_worker_that_filled_them() {
        let server: SocketAddr = "10.0.0.2:445".parse().unwrap();
        let client = |port| SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), port);
        // The busy connection on worker 1, the idle one on worker 0 (so that a list sent to
        // the first worker whatever its source shows).
        let port_on = |w| {
            (40_000..41_000u16)
                .find(|&p| worker_of(client(p), server, 2) == w)
                .expect("a port for each worker")
        };
        let (busy, idle) = (port_on(1), port_on(0));
        let segment = |port: u16, seq: u32, syn: bool, payload: &[u8]| {
            let b = PacketBuilder::ethernet2([2; 6], [4; 6])
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
                .tcp(port, 445, seq, 65535);
            let b = if syn { b.syn() } else { b.ack(1) };
            let mut out = Vec::new();
            b.write(&mut out, payload).expect("a frame");
            out
        };
        // An SMB1 message in each segment: one framer event a push.
        let smb1 = [0, 0, 0, 4, 0xFF, b'S', b'M', b'B'];
        let mut frames = vec![
            segment(idle, 1000, true, &[]),
            segment(busy, 1000, true, &[]),
        ];
        for i in 0..8_000u32 {
            frames.push(segment(busy, 1001 + 8 * i, false, &smb1));
        }
        let cfg = super::super::PipelineConfig {
            threads: 4,
            ..Default::default()
        };
        let mut p = super::super::Pipeline::new(cfg);
        let mut sink = crate::analysis::Analyzer::default();
        for (i, data) in frames.iter().enumerate() {
            let frame = Frame::ethernet(i as u64 + 1, Timestamp(i as i64 * 1000), data);
            p.push_frame(&frame, &mut sink);
        }
        let shards = p.shards.as_mut().expect("two workers");
        assert!(shards.spent_events(None).is_none());
        let [to_idle, to_busy] = &shards.spent_events[..] else {
            panic!("two workers")
        };
        assert!(
            to_idle.is_empty(),
            "{} lists for the idle worker",
            to_idle.len()
        );
        assert!(!to_busy.is_empty() && to_busy.len() <= SPENT_EVENTS);
        p.finish(&mut sink);
        assert_eq!(p.stats().smb1_messages, 8_000);
    }

    #[test]
    fn spent_lists_are_kept_within_their_count_and_room() {
        let mut spent = Vec::new();
        keep_spent(&mut spent, Vec::with_capacity(SPENT_ROOM));
        keep_spent(&mut spent, Vec::with_capacity(SPENT_ROOM + 1));
        assert_eq!(spent.len(), 1);
        for _ in 0..2 * SPENT_EVENTS {
            keep_spent(&mut spent, Vec::with_capacity(2));
        }
        assert_eq!(spent.len(), SPENT_EVENTS);
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
        let v4_seg = v4;
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

        // The run key: addresses then ports as they lie, and the same connection the other way.
        let key = ipv4_key(&v4).expect("a plain segment");
        assert_eq!(key, [10, 0, 0, 11, 10, 0, 0, 100, 0xc3, 0xc0, 0x01, 0xbd]);
        let back = v4_seg([10, 0, 0, 100], [10, 0, 0, 11], (445, 50_112), b"");
        assert_eq!(ipv4_key(&back), Some(swapped(&key)));
        assert_eq!(ipv4_key(&v4[..22]), None, "ports cut off");

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
