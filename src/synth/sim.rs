//! The cluster simulation, in capture time: Hyper-V hosts (SMB2 clients with MS-SQOS logical
//! flows, section 3.1), VMs doing I/O, and the file server (SMB2 server, storage, and the
//! MS-SQOS server of section 3.2). Events run in time order; every message goes through the
//! wire, which tells when its receiver has it.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Write};

use crate::sqos::{Dialect, Options, Request, Response, FSCTL_STORAGE_QOS_CONTROL};

use super::packet::Endpoint;
use super::rng::Rng;
use super::scenario::{
    Action, Cluster, CounterReporting, DropKind, FaultOn, FlowSpec, PolicySpec, SetupStyle,
};
use super::seal::Sealer;
use super::server::{ServerFault, SqosServer};
use super::smb2::{self, FileId, Header};
use super::squeeze::Squeezer;
use super::truth::{self, secs};
use super::wire::{ConnSpec, Part, Side, Time, Trace, Wire};
use crate::smb2::crypto::{Cipher, SessionKeys};
use crate::sqos::{encode_request_with, encode_response, NamePlacement};

/// MaxOutputResponse of the client's IOCTLs (what Windows' test suite sends).
const MAX_OUTPUT: u32 = 4096;
/// Status request interval after a failed request (note <4>) and when TimeToLive ≤ 1000 (note <5>).
const FAILURE_RETRY_MS: u64 = 10_000;
const DEFAULT_TTL_MS: u64 = 1000;
/// Server think time before answering, µs.
const SERVER_TURNAROUND_US: u64 = 25;
/// How far ahead of its average rate a throttled flow may run (burst tolerance), µs: over any
/// window of T seconds a throttled flow starts at most MaximumIoRate × (T + 0.25) normalized
/// I/Os plus one I/O.
pub const BURST_US: u64 = 250_000;
/// Requests the VM queues before it blocks.
const VM_QUEUE_LIMIT: usize = 64;
/// How long a client takes to notice that a channel went silent (its requests unanswered,
/// TCP retransmissions unacknowledged), µs.
const SILENCE_DETECT_US: u64 = 1_000_000;
/// Time between a host's session being ready and its next channel connecting, µs.
const CHANNEL_CONNECT_GAP_US: u64 = 3_000;

#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    io: u64,
    norm: u64,
    latency: u64,
    lower: u64,
    bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Flow(usize),
    Spare,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    SetFlowId(SetupStyle),
    SetPolicy { with_status: bool },
    Status,
    Raw,
}

enum ReqKind {
    Negotiate,
    Session(u8),
    Tree,
    Interfaces,
    Create(Target),
    Close(Target, FileId),
    Io(usize),
    Ioctl(usize),
}

enum RespKind {
    Negotiate,
    Session(u8),
    Tree,
    Interfaces,
    Create(Target, FileId),
    Close(Target),
    Io(usize),
    Ioctl(usize),
}

struct ReqItem {
    hdr: Header,
    kind: ReqKind,
}

struct RespItem {
    status: u32,
    kind: RespKind,
}

enum Ev {
    Start(usize),
    ToServer(usize, Vec<ReqItem>),
    ToClient(usize, Vec<RespItem>),
    IoDone(usize, usize),
    Arrival(usize),
    Dispatch(usize),
    Status(usize, u64),
    Script(usize),
    /// A handed-over flow opens its disk.
    Open(usize),
    /// A further channel of a host connects (index in `Sim::chans`).
    Connect(usize),
    /// The client notices that a silent channel failed.
    Detect(usize),
}

struct Event {
    t: Time,
    class: u8,
    order: u64,
    ev: Ev,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.class, self.order) == (o.t, o.class, o.order)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> Ordering {
        (o.t, o.class, o.order).cmp(&(self.t, self.class, self.order))
    }
}

/// One READ or WRITE.
pub(crate) struct IoRec {
    flow: usize,
    /// The channel its (latest) request went over.
    chan: usize,
    write: bool,
    offset: u64,
    len: u32,
    norm: u64,
    gen: Time,
    req_tag: u32,
    req_done: Time,
    resp_tag: Option<u32>,
    resp_done: Option<Time>,
    hdr: Header,
}

/// One FSCTL_STORAGE_QOS_CONTROL exchange.
pub(crate) struct MsgRec {
    host: usize,
    /// The channel its (latest) request went over.
    chan: usize,
    flow: Option<usize>,
    target: Target,
    fid: FileId,
    file_name: Option<String>,
    req: Request,
    max_out: u32,
    purpose: Purpose,
    note: String,
    req_tag: Option<u32>,
    /// The tag of the first request (a replay's original); `req_tag` is the latest.
    first_req_tag: Option<u32>,
    /// Every time the request was sent: (channel, tag).
    sends: Vec<(usize, u32)>,
    /// The client has its answer.
    answered: bool,
    sent: Time,
    /// SMB2 MessageId of the IOCTL request.
    mid: u64,
    /// The server bug that struck it (index in `Cluster::faults`).
    fault: Option<usize>,
    resp_tag: Option<u32>,
    nt: Option<u32>,
    resp: Option<Response>,
}

/// One UPDATE_COUNTERS request and the I/O it reports.
struct UpdRec {
    msg: usize,
    prev: Option<Time>,
    rate: u64,
    /// What the request reports.
    inc: Counters,
    /// What the I/O listed with it adds up to.
    actual: Counters,
    ios: Vec<usize>,
}

struct PolRec {
    time: Time,
    msg: usize,
    policy: PolicySpec,
}

struct FlowRt {
    host: usize,
    spec: FlowSpec,
    fid: Option<FileId>,
    ready: bool,
    closing: bool,
    policy: PolicySpec,
    max_io_rate: u64,
    max_bw: u64,
    base: u32,
    cnt: Counters,
    ios: Vec<usize>,
    last_update: Option<Time>,
    outstanding: u32,
    queue: VecDeque<(Time, bool, u32, u64)>,
    next_allowed: Time,
    dispatch_at: Option<Time>,
    timer_gen: u64,
    arrivals: bool,
    /// Handed over (`Action::Handoff`): drains, sends `final_msg`, closes, opens `handoff`.
    retired: bool,
    handoff: Option<(usize, u64)>,
    final_msg: Option<usize>,
    rng: Rng,
    updates: Vec<UpdRec>,
    policies: Vec<PolRec>,
    file_names: Vec<String>,
    totals: Counters,
    bytes_read: u64,
    bytes_written: u64,
}

struct HostRt {
    session: u64,
    tree: u32,
    spare: Option<FileId>,
    /// Server side: next volatile FileId.
    next_volatile: u64,
    /// The host's channels (indices in `Sim::chans`), the first one its primary.
    chans: Vec<usize>,
    /// Round robin over the channels.
    rr: usize,
    /// Open.ChannelSequence (MS-SMB2 3.2.4.1.x), raised when a channel fails.
    channel_sequence: u16,
    /// `--encrypt`: the session's keys and nonces.
    sealer: Option<Sealer>,
}

/// One channel: a TCP connection the host's session is used over.
struct ChanRt {
    host: usize,
    /// Index among the host's channels (0 is the primary).
    index: usize,
    conn: u32,
    /// Its two ends, once connected.
    client: Option<std::net::SocketAddr>,
    server: Option<std::net::SocketAddr>,
    next_mid: u64,
    /// The session is bound to it: it may carry the session's I/O.
    ready: bool,
    /// It fails at its next request (a SQOS IOCTL for a reset, any for silence).
    armed: Option<DropKind>,
    /// It failed then (reset or silent); what it carries from then on is lost.
    dead_at: Option<Time>,
    /// The client knows it failed.
    known_dead: bool,
}

impl ChanRt {
    /// Channel `index` of host `h`, not connected yet.
    fn new(host: usize, index: usize) -> ChanRt {
        ChanRt {
            host,
            index,
            conn: u32::MAX,
            client: None,
            server: None,
            next_mid: 0,
            ready: false,
            armed: None,
            dead_at: None,
            known_dead: false,
        }
    }
}

type Outbox = Vec<(usize, Side, Time, Vec<(Vec<Part>, Item)>)>;

enum Item {
    Req(ReqItem),
    Resp(RespItem),
}

pub struct Sim<'c, W: Write> {
    c: &'c Cluster,
    wire: Wire<W>,
    rng: Rng,
    events: BinaryHeap<Event>,
    order: u64,
    hosts: Vec<HostRt>,
    chans: Vec<ChanRt>,
    flows: Vec<FlowRt>,
    server: SqosServer,
    storage_free: Time,
    ios: Vec<IoRec>,
    msgs: Vec<MsgRec>,
    outbox: Outbox,
    end: Time,
    /// Server bugs armed and waiting for the request they strike, in arming order.
    armed: Vec<usize>,
    /// Channels that failed: (channel, how, when).
    drops: Vec<(usize, DropKind, Time)>,
    /// `--encrypt`: every session is encrypted with this cipher.
    encrypt: Option<Cipher>,
    /// `--compress`: every connection negotiates compression and compresses its messages.
    squeeze: Option<Squeezer>,
}

impl<'c, W: Write> Sim<'c, W> {
    pub fn new(c: &'c Cluster, wire: Wire<W>, rng: Rng) -> Sim<'c, W> {
        let mut server = SqosServer::new(c.reservable_iops, c.base_ttl_ms, rng.fork(1));
        for (id, p) in &c.policies {
            server.set_policy(*id, *p);
        }
        let mut flows = Vec::new();
        for (h, f) in c.flows() {
            flows.push(FlowRt {
                host: h,
                spec: f.clone(),
                fid: None,
                ready: false,
                closing: false,
                policy: f.policy,
                max_io_rate: 0,
                max_bw: 0,
                base: 8192,
                cnt: Counters::default(),
                ios: Vec::new(),
                last_update: None,
                outstanding: 0,
                queue: VecDeque::new(),
                next_allowed: 0,
                dispatch_at: None,
                timer_gen: 0,
                arrivals: false,
                retired: false,
                handoff: None,
                final_msg: None,
                rng: rng.fork(100 + flows.len() as u64),
                updates: Vec::new(),
                policies: Vec::new(),
                file_names: Vec::new(),
                totals: Counters::default(),
                bytes_read: 0,
                bytes_written: 0,
            });
        }
        // The primary channel of host h is channel h; further channels follow.
        let mut chans: Vec<ChanRt> = (0..c.hosts.len()).map(|h| ChanRt::new(h, 0)).collect();
        let mut hosts = Vec::new();
        for (h, spec) in c.hosts.iter().enumerate() {
            let mut mine = vec![h];
            for index in 1..=spec.extra_channels.len() {
                mine.push(chans.len());
                chans.push(ChanRt::new(h, index));
            }
            hosts.push(HostRt {
                session: 0,
                tree: 0,
                spare: None,
                next_volatile: 1,
                chans: mine,
                rr: 0,
                channel_sequence: 0,
                sealer: None,
            });
        }
        Sim {
            c,
            wire,
            rng: rng.fork(2),
            events: BinaryHeap::new(),
            order: 0,
            hosts,
            chans,
            flows,
            server,
            storage_free: 0,
            ios: Vec::new(),
            msgs: Vec::new(),
            outbox: Vec::new(),
            end: c.start + c.duration_us,
            armed: Vec::new(),
            drops: Vec::new(),
            encrypt: None,
            squeeze: None,
        }
    }

    /// Compress messages (SMB 3.1.1 hosts) as `squeeze` says.
    pub fn compressed(mut self, squeeze: Option<Squeezer>) -> Self {
        self.squeeze = squeeze;
        self
    }

    /// Encrypt every session (after its SESSION_SETUP) with `cipher`.
    pub fn encrypted(mut self, cipher: Option<Cipher>) -> Self {
        self.encrypt = cipher;
        self
    }

    /// `parts` of a `command` message on channel `ch` from the client (or server), sealed if
    /// the session is encrypted. On the primary channel NEGOTIATE and SESSION_SETUP go in clear
    /// and feed the preauth hash; on a further channel they go in clear (the binding
    /// SESSION_SETUP is signed, not encrypted: MS-SMB2 3.2.5.3.1) and do not touch the session's.
    fn sealed(
        &mut self,
        ch: usize,
        from_client: bool,
        command: u16,
        parts: Vec<Part>,
    ) -> Vec<Part> {
        let Some((h, primary)) = self.chans.get(ch).map(|c| (c.host, c.index == 0)) else {
            return parts;
        };
        // Compressed first when compression is on (MS-SMB2 3.1.4.3: compress, then encrypt).
        let parts = match (&self.squeeze, self.c.hosts.get(h)) {
            (Some(z), Some(spec)) if spec.smb_dialect == smb2::DIALECT_311 => {
                z.outgoing(parts, self.wire.filler())
            }
            _ => parts,
        };
        if !primary && matches!(command, smb2::NEGOTIATE | smb2::SESSION_SETUP) {
            return parts;
        }
        match self.hosts.get_mut(h).and_then(|x| x.sealer.as_mut()) {
            Some(s) => s.outgoing(from_client, parts, self.wire.filler()),
            None => parts,
        }
    }

    fn at(&mut self, t: Time, ev: Ev) {
        self.order += 1;
        let class = u8::from(!matches!(ev, Ev::ToClient(..)));
        self.events.push(Event {
            t,
            class,
            order: self.order,
            ev,
        });
    }

    /// Runs the whole capture; returns the wire's traces and the records.
    pub fn run(mut self) -> io::Result<(W, SimResult)> {
        for h in 0..self.c.hosts.len() {
            let t = self.c.start + 40_000 * h as u64 + self.rng.below(15_000);
            self.at(t, Ev::Start(h));
        }
        for (i, (off, _)) in self.c.script.iter().enumerate() {
            self.at(self.c.start + off, Ev::Script(i));
        }
        while let Some(e) = self.events.pop() {
            if e.t > self.end {
                break;
            }
            self.wire.flush_before(e.t)?;
            self.handle(e.t, e.ev);
            self.flush_outbox();
        }
        let keys = self
            .hosts
            .iter()
            .filter_map(|h| h.sealer.as_ref().and_then(Sealer::session_keys))
            .collect();
        let retrans = self.wire.retransmissions;
        let reordered = self.wire.reordered;
        let missing = self.wire.unseen_segments;
        let (w, traces, frames, bytes) = self.wire.finish()?;
        let channels = self
            .chans
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let drop = self.drops.iter().find(|d| d.0 == i);
                ChanResult {
                    host: c.host,
                    primary: c.index == 0,
                    label: match (c.client, c.server) {
                        (Some(a), Some(b)) => format!("{a} → {b}"),
                        _ => String::new(),
                    },
                    client: c.client.map(|a| a.to_string()).unwrap_or_default(),
                    server: c.server.map(|a| a.to_string()).unwrap_or_default(),
                    dropped: drop.map(|d| (d.1, d.2)),
                }
            })
            .collect();
        let result = SimResult {
            channels,
            traces,
            frames,
            file_bytes: bytes,
            retransmissions: retrans,
            reordered,
            missing,
            ios: self.ios,
            msgs: self.msgs,
            flows: self.flows,
            keys,
        };
        Ok((w, result))
    }

    fn handle(&mut self, t: Time, ev: Ev) {
        match ev {
            Ev::Start(h) => self.start_host(h, t),
            // What a failed channel carries is lost.
            Ev::ToServer(ch, items) if !self.dead(ch, t) => {
                for it in items {
                    self.server_request(ch, t, it);
                }
            }
            Ev::ToClient(ch, items) if !self.dead(ch, t) => {
                for it in items {
                    self.client_response(ch, t, it);
                }
            }
            Ev::ToServer(..) | Ev::ToClient(..) => {}
            Ev::IoDone(ch, io) => self.server_io_done(ch, t, io),
            Ev::Arrival(f) => self.arrival(f, t),
            Ev::Dispatch(f) => {
                if let Some(fl) = self.flows.get_mut(f) {
                    fl.dispatch_at = None;
                }
                self.dispatch(f, t);
            }
            Ev::Status(f, gen) => self.status_timer(f, gen, t),
            Ev::Script(i) => self.script(i, t),
            Ev::Open(f) => {
                if let Some(h) = self.flows.get(f).map(|fl| fl.host) {
                    self.send_create(h, t, Target::Flow(f));
                }
            }
            Ev::Connect(ch) => self.connect_channel(ch, t),
            Ev::Detect(ch) => self.channel_failed(ch, t),
        }
    }

    /// Channel `ch` has failed by time `t`.
    fn dead(&self, ch: usize, t: Time) -> bool {
        self.chans
            .get(ch)
            .is_none_or(|c| c.dead_at.is_some_and(|d| d <= t))
    }

    /// The channel the host sends its next request on: round robin over the channels its
    /// session is bound to and it believes alive (its primary before any other is bound).
    fn next_chan(&self, h: usize) -> usize {
        let Some(host) = self.hosts.get(h) else {
            return h;
        };
        let live: Vec<usize> = host
            .chans
            .iter()
            .copied()
            .filter(|&c| self.chans.get(c).is_some_and(|x| x.ready && !x.known_dead))
            .collect();
        if live.is_empty() {
            return h;
        }
        live[host.rr % live.len()]
    }

    /// `next_chan`, and the round robin moves on.
    fn pick_chan(&mut self, h: usize) -> usize {
        let ch = self.next_chan(h);
        if let Some(host) = self.hosts.get_mut(h) {
            host.rr = host.rr.wrapping_add(1);
        }
        ch
    }

    // ---- plumbing -------------------------------------------------------------------------

    fn queue_msg(&mut self, ch: usize, side: Side, t: Time, parts: Vec<Part>, item: Item) {
        if let Some(last) = self.outbox.last_mut() {
            if last.0 == ch && last.1 == side && last.2 == t {
                last.3.push((parts, item));
                return;
            }
        }
        self.outbox.push((ch, side, t, vec![(parts, item)]));
    }

    fn flush_outbox(&mut self) {
        let owd = self.wire.config().one_way_us;
        for (ch, side, t, batch) in std::mem::take(&mut self.outbox) {
            let Some(conn) = self.chans.get(ch).map(|x| x.conn) else {
                continue;
            };
            let (parts, items): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
            // An armed failure strikes when the server has the request that triggers it.
            let armed = self.chans.get(ch).and_then(|c| c.armed);
            let triggers = |it: &Item| match (armed, it) {
                (Some(DropKind::Rst), Item::Req(r)) => matches!(r.kind, ReqKind::Ioctl(_)),
                (Some(DropKind::Silence), Item::Req(r)) => {
                    matches!(r.kind, ReqKind::Ioctl(_) | ReqKind::Io(_))
                }
                _ => false,
            };
            let hits: Vec<bool> = items.iter().map(triggers).collect();
            let deliveries = self.wire.send(conn, side, t, parts);
            let strike = deliveries
                .iter()
                .zip(&hits)
                .filter(|(_, &h)| h)
                .map(|(d, _)| d.at)
                .max();
            let mut group: Option<(Time, Vec<Item>)> = None;
            for (d, item) in deliveries.into_iter().zip(items) {
                match &item {
                    Item::Req(r) => match r.kind {
                        ReqKind::Io(io) => {
                            if let Some(rec) = self.ios.get_mut(io) {
                                rec.req_tag = d.tag;
                                rec.req_done = d.at.saturating_sub(owd);
                            }
                        }
                        ReqKind::Ioctl(m) => {
                            if let Some(rec) = self.msgs.get_mut(m) {
                                rec.req_tag = Some(d.tag);
                                rec.first_req_tag.get_or_insert(d.tag);
                                rec.sends.push((ch, d.tag));
                            }
                        }
                        _ => {}
                    },
                    Item::Resp(r) => match r.kind {
                        RespKind::Io(io) => {
                            if let Some(rec) = self.ios.get_mut(io) {
                                rec.resp_tag = Some(d.tag);
                            }
                        }
                        RespKind::Ioctl(m) => {
                            if let Some(rec) = self.msgs.get_mut(m) {
                                rec.resp_tag = Some(d.tag);
                            }
                        }
                        _ => {}
                    },
                }
                match &mut group {
                    Some((gt, items)) if *gt == d.at => items.push(item),
                    _ => {
                        if let Some((gt, items)) = group.take() {
                            self.deliver(ch, gt, items);
                        }
                        group = Some((d.at, vec![item]));
                    }
                }
            }
            if let Some((gt, items)) = group {
                self.deliver(ch, gt, items);
            }
            if let (Side::Client, Some(at)) = (side, strike) {
                self.fail_channel(ch, at);
            }
        }
    }

    /// Channel `ch` fails at `at` as armed: the server resets it (the client sees the RST one
    /// way later) or its link goes silent (the client notices `SILENCE_DETECT_US` later).
    fn fail_channel(&mut self, ch: usize, at: Time) {
        let owd = self.wire.config().one_way_us;
        let Some(c) = self.chans.get_mut(ch) else {
            return;
        };
        let Some(how) = c.armed.take() else {
            return;
        };
        c.dead_at = Some(at);
        let conn = c.conn;
        self.drops.push((ch, how, at));
        match how {
            DropKind::Rst => {
                self.wire.kill(conn, at + owd, Some(Side::Server));
                self.at(at + owd, Ev::Detect(ch));
            }
            DropKind::Silence => {
                self.wire.kill(conn, at, None);
                self.at(at + SILENCE_DETECT_US, Ev::Detect(ch));
            }
        }
    }

    fn deliver(&mut self, h: usize, t: Time, items: Vec<Item>) {
        let mut reqs = Vec::new();
        let mut resps = Vec::new();
        for it in items {
            match it {
                Item::Req(r) => reqs.push(r),
                Item::Resp(r) => resps.push(r),
            }
        }
        if !reqs.is_empty() {
            self.at(t, Ev::ToServer(h, reqs));
        }
        if !resps.is_empty() {
            self.at(t, Ev::ToClient(h, resps));
        }
    }

    /// The header of a request the host sends on channel `ch` (MessageIds count per channel).
    fn client_header(&mut self, ch: usize, command: u16, charge: u16) -> Header {
        let chan = &mut self.chans[ch];
        let mid = chan.next_mid;
        chan.next_mid += u64::from(charge.max(1));
        let host = &self.hosts[chan.host];
        let credits = charge.max(1) + u16::from(command == smb2::NEGOTIATE) * 30;
        Header {
            // ChannelSequence (SMB 3.x requests): raised after a channel failed.
            status: u32::from(host.channel_sequence),
            ..Header::request(command, mid, charge, credits, host.tree, host.session)
        }
    }

    fn client_send(
        &mut self,
        ch: usize,
        t: Time,
        hdr: Header,
        body: &[u8],
        fill: usize,
        kind: ReqKind,
    ) {
        let parts = smb2::message(&hdr, body, fill);
        let parts = self.sealed(ch, true, hdr.command, parts);
        self.queue_msg(ch, Side::Client, t, parts, Item::Req(ReqItem { hdr, kind }));
    }

    // ---- client ---------------------------------------------------------------------------

    /// The host's first channel: connect, NEGOTIATE, then its session is set up.
    fn start_host(&mut self, h: usize, t: Time) {
        self.connect_channel(h, t);
    }

    /// Connect channel `ch` and send its NEGOTIATE. The primary then sets the session up, a
    /// further channel binds to it (SESSION_SETUP with SMB2_SESSION_FLAG_BINDING).
    fn connect_channel(&mut self, ch: usize, t: Time) {
        let Some((h, index)) = self.chans.get(ch).map(|c| (c.host, c.index)) else {
            return;
        };
        let Some(spec) = self.c.hosts.get(h) else {
            return;
        };
        let (client, server) = match index.checked_sub(1) {
            None => ((spec.mac, spec.ip), (self.c.server_mac, self.c.server_ip)),
            Some(i) => match spec.extra_channels.get(i) {
                Some(n) => ((n.client_mac, n.client_ip), (n.server_mac, n.server_ip)),
                None => return,
            },
        };
        let conn = ConnSpec {
            client: Endpoint {
                mac: client.0,
                ip: client.1,
                port: 49_700 + self.rng.below(12_000) as u16,
            },
            server: Endpoint {
                mac: server.0,
                ip: server.1,
                port: 445,
            },
            vlan: None,
            interface: spec.interface,
        };
        let ends = (
            std::net::SocketAddr::new(conn.client.ip, conn.client.port),
            std::net::SocketAddr::new(conn.server.ip, conn.server.port),
        );
        let (conn, ready) = self.wire.connect(conn, t);
        let c = &mut self.chans[ch];
        c.conn = conn;
        (c.client, c.server) = (Some(ends.0), Some(ends.1));
        if let (Some(c), 0) = (self.encrypt, index) {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&self.rng.next_u64().to_le_bytes());
            key[8..].copy_from_slice(&self.rng.next_u64().to_le_bytes());
            if let Some(host) = self.hosts.get_mut(h) {
                host.sealer = Some(Sealer::new(c, spec.smb_dialect, key));
            }
        }
        let mut guid = [0u8; 16];
        guid.copy_from_slice(&self.rng.uuid().to_bytes_le());
        let salt = self.salt();
        let ciphers = if self.encrypt.is_some() {
            smb2::CIPHERS_ALL
        } else {
            smb2::CIPHERS_128
        };
        let body = smb2::negotiate_request(spec.smb_dialect, &guid, &salt, ciphers, self.squeeze);
        let hdr = self.client_header(ch, smb2::NEGOTIATE, 0);
        self.client_send(ch, ready, hdr, &body, 0, ReqKind::Negotiate);
    }

    /// The client knows channel `ch` failed: what was outstanding on it is sent again on the
    /// host's other channels (SMB2_FLAGS_REPLAY_OPERATION on WRITE and IOCTL), with the
    /// ChannelSequence raised (MS-SMB2 3.2.4.1.x, 3.2.7.x).
    fn channel_failed(&mut self, ch: usize, t: Time) {
        let Some(c) = self.chans.get_mut(ch) else {
            return;
        };
        if c.known_dead {
            return;
        }
        c.known_dead = true;
        let h = c.host;
        if let Some(host) = self.hosts.get_mut(h) {
            host.channel_sequence = host.channel_sequence.wrapping_add(1);
        }
        // In the order they were first sent.
        let ios: Vec<usize> = (0..self.ios.len())
            .filter(|&i| self.ios[i].chan == ch && self.ios[i].resp_done.is_none())
            .collect();
        let msgs: Vec<usize> = (0..self.msgs.len())
            .filter(|&m| {
                let r = &self.msgs[m];
                r.chan == ch && r.host == h && !r.answered
            })
            .collect();
        for io in ios {
            self.send_io(io, t, true);
        }
        for m in msgs {
            self.send_ioctl_msg(m, t, true);
        }
    }

    fn salt(&mut self) -> [u8; 32] {
        let mut s = [0u8; 32];
        for c in s.chunks_mut(8) {
            c.copy_from_slice(&self.rng.next_u64().to_le_bytes());
        }
        s
    }

    fn client_response(&mut self, ch: usize, t: Time, it: RespItem) {
        let Some((h, primary)) = self.chans.get(ch).map(|c| (c.host, c.index == 0)) else {
            return;
        };
        // A further channel binds the host's session (two legs, like its setup).
        let flags = if primary {
            0
        } else {
            smb2::SESSION_FLAG_BINDING
        };
        match it.kind {
            RespKind::Negotiate => {
                let hdr = self.client_header(ch, smb2::SESSION_SETUP, 1);
                self.client_send(
                    ch,
                    t,
                    hdr,
                    &smb2::session_setup_request(flags),
                    0,
                    ReqKind::Session(1),
                );
            }
            RespKind::Session(1) => {
                let hdr = self.client_header(ch, smb2::SESSION_SETUP, 1);
                self.client_send(
                    ch,
                    t,
                    hdr,
                    &smb2::session_setup_request(flags),
                    0,
                    ReqKind::Session(2),
                );
            }
            RespKind::Session(_) if !primary => {
                if let Some(c) = self.chans.get_mut(ch) {
                    c.ready = true;
                }
            }
            RespKind::Session(_) => {
                let path = self.c.share_path();
                let hdr = self.client_header(ch, smb2::TREE_CONNECT, 1);
                self.client_send(
                    ch,
                    t,
                    hdr,
                    &smb2::tree_connect_request(&path),
                    0,
                    ReqKind::Tree,
                );
            }
            RespKind::Interfaces => {
                // The server's interfaces are known: one more channel per pair of NICs.
                let extra: Vec<usize> = self.hosts[h].chans.iter().skip(1).copied().collect();
                for (i, c) in extra.into_iter().enumerate() {
                    self.at(t + CHANNEL_CONNECT_GAP_US * (i as u64 + 1), Ev::Connect(c));
                }
            }
            RespKind::Tree => {
                if let Some(c) = self.chans.get_mut(ch) {
                    c.ready = true;
                }
                if self.hosts[h].chans.len() > 1 {
                    // Multichannel: ask the server for its interfaces (MS-SMB2 3.2.4.20.10).
                    let hdr = self.client_header(ch, smb2::IOCTL, 1);
                    let body = smb2::ioctl_request(
                        smb2::FSCTL_QUERY_NETWORK_INTERFACE_INFO,
                        &FileId {
                            persistent: u64::MAX,
                            volatile: u64::MAX,
                        },
                        &[],
                        65_536,
                    );
                    self.client_send(ch, t, hdr, &body, 0, ReqKind::Interfaces);
                }
                // Open every disk of the host at once (one write, several messages per segment).
                let mine: Vec<usize> = (0..self.flows.len())
                    .filter(|&f| self.flows[f].host == h && self.flows[f].spec.opened_at_start)
                    .collect();
                for f in mine {
                    self.send_create(h, t, Target::Flow(f));
                }
                if self.c.spare_open {
                    self.send_create(h, t, Target::Spare);
                }
            }
            RespKind::Create(Target::Flow(f), fid) => {
                if let Some(fl) = self.flows.get_mut(f) {
                    fl.fid = Some(fid);
                    fl.closing = false;
                    let name = fl.spec.path.clone();
                    fl.file_names.push(name);
                    let style = if fl.file_names.len() > 1 {
                        SetupStyle::Separate
                    } else {
                        fl.spec.setup
                    };
                    self.setup_flow(f, t, style);
                }
            }
            RespKind::Create(Target::Spare, fid) => {
                if let Some(host) = self.hosts.get_mut(h) {
                    host.spare = Some(fid);
                }
            }
            RespKind::Close(Target::Flow(f)) => match self.flows.get(f) {
                Some(fl) if fl.retired => {
                    if let Some((to, after)) = fl.handoff {
                        self.at(t + after, Ev::Open(to));
                    }
                }
                _ => self.send_create(h, t, Target::Flow(f)),
            },
            RespKind::Close(Target::Spare) => {}
            RespKind::Io(io) => self.io_complete(io, t),
            RespKind::Ioctl(m) => {
                if let Some(rec) = self.msgs.get_mut(m) {
                    rec.answered = true;
                }
                self.ioctl_answered(m, t, it.status)
            }
        }
    }

    fn send_create(&mut self, h: usize, t: Time, target: Target) {
        let name = match target {
            Target::Flow(f) => self
                .flows
                .get(f)
                .map(|f| f.spec.path.clone())
                .unwrap_or_default(),
            Target::Spare => "scratch\\probe.vhdx".to_string(),
        };
        let hdr = self.client_header(h, smb2::CREATE, 1);
        self.client_send(
            h,
            t,
            hdr,
            &smb2::create_request(&name),
            0,
            ReqKind::Create(target),
        );
    }

    fn flow_request(&self, f: usize, opts: Options) -> Request {
        let fl = &self.flows[f];
        let dialect = self.c.hosts[fl.host].sqos;
        let mut r = Request::new(dialect);
        r.options = opts;
        r.logical_flow_id = fl.spec.flow_id;
        r.policy_id = fl.policy.policy_id;
        r.initiator_id = fl.spec.initiator_id;
        r
    }

    fn policy_request(&self, f: usize, opts: Options) -> Request {
        let fl = &self.flows[f];
        let host = &self.c.hosts[fl.host];
        let mut r = self
            .flow_request(f, opts)
            .with_names(&fl.spec.vm, &host.name);
        r.limit = fl.policy.limit;
        r.reservation = fl.policy.reservation;
        if let Some(v) = r.v1_1.as_mut() {
            v.bandwidth_limit = fl.policy.bandwidth_limit;
        }
        r
    }

    fn setup_flow(&mut self, f: usize, t: Time, style: SetupStyle) {
        match style {
            SetupStyle::Combined => {
                let r = self.policy_request(
                    f,
                    Options::SET_LOGICAL_FLOW_ID | Options::SET_POLICY | Options::GET_STATUS,
                );
                self.send_ioctl(
                    f,
                    t,
                    r,
                    Purpose::SetPolicy { with_status: true },
                    "associate and set policy",
                );
            }
            _ => {
                let mut r = self.flow_request(f, Options::SET_LOGICAL_FLOW_ID);
                r.policy_id = uuid::Uuid::nil();
                r.initiator_id = uuid::Uuid::nil();
                self.send_ioctl(
                    f,
                    t,
                    r,
                    Purpose::SetFlowId(style),
                    "associate the open with its logical flow",
                );
            }
        }
    }

    fn send_ioctl(&mut self, f: usize, t: Time, req: Request, purpose: Purpose, note: &str) {
        let Some(fl) = self.flows.get(f) else {
            return;
        };
        let (h, fid) = (fl.host, fl.fid.unwrap_or_default());
        let name = fl.spec.path.clone();
        if matches!(purpose, Purpose::SetPolicy { .. }) {
            let policy = fl.policy;
            let m = self.msgs.len();
            if let Some(fl) = self.flows.get_mut(f) {
                fl.policies.push(PolRec {
                    time: t,
                    msg: m,
                    policy,
                });
            }
        }
        self.ioctl_on(
            h,
            Target::Flow(f),
            fid,
            Some(name),
            t,
            req,
            MAX_OUTPUT,
            purpose,
            note.to_string(),
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn ioctl_on(
        &mut self,
        h: usize,
        target: Target,
        fid: FileId,
        file_name: Option<String>,
        t: Time,
        req: Request,
        max_out: u32,
        purpose: Purpose,
        note: String,
    ) -> usize {
        let m = self.msgs.len();
        self.msgs.push(MsgRec {
            host: h,
            chan: h,
            fid,
            flow: match target {
                Target::Flow(f) => Some(f),
                Target::Spare => None,
            },
            target,
            file_name,
            req,
            max_out,
            purpose,
            note,
            req_tag: None,
            first_req_tag: None,
            sends: Vec::new(),
            answered: false,
            sent: t,
            mid: 0,
            fault: None,
            resp_tag: None,
            nt: None,
            resp: None,
        });
        self.send_ioctl_msg(m, t, false);
        m
    }

    /// Sends the IOCTL of message `m` on the host's next channel; `replay` sends it again after
    /// the channel it was outstanding on failed.
    fn send_ioctl_msg(&mut self, m: usize, t: Time, replay: bool) {
        let Some(rec) = self.msgs.get(m) else {
            return;
        };
        let (h, fid, max_out) = (rec.host, rec.fid, rec.max_out);
        let input = encode_request_with(&rec.req, NamePlacement::AfterFixedPart);
        // A reset armed on one of the host's channels strikes the next SQOS request: it goes
        // out there (scripted, so that a status request is lost with the channel).
        let armed = self.hosts.get(h).and_then(|x| {
            x.chans.iter().copied().find(|&c| {
                self.chans
                    .get(c)
                    .is_some_and(|c| c.ready && !c.known_dead && c.armed == Some(DropKind::Rst))
            })
        });
        let ch = match (armed, replay) {
            (Some(c), false) => c,
            _ => self.pick_chan(h),
        };
        let hdr = Header {
            replay,
            ..self.client_header(ch, smb2::IOCTL, 1)
        };
        if let Some(rec) = self.msgs.get_mut(m) {
            rec.chan = ch;
            if !replay {
                rec.mid = hdr.message_id;
            }
        }
        let body = smb2::ioctl_request(FSCTL_STORAGE_QOS_CONTROL, &fid, &input, max_out);
        self.client_send(ch, t, hdr, &body, 0, ReqKind::Ioctl(m));
    }

    fn ioctl_answered(&mut self, m: usize, t: Time, status: u32) {
        let Some(rec) = self.msgs.get(m) else {
            return;
        };
        let (purpose, flow, resp) = (rec.purpose, rec.flow, rec.resp.clone());
        let Some(f) = flow else {
            return;
        };
        if purpose == Purpose::Raw {
            return;
        }
        if let Some(fl) = self.flows.get(f).filter(|fl| fl.retired) {
            // Answers to a flow leaving its host change nothing; its last update's answer
            // lets it close.
            if fl.final_msg == Some(m) {
                self.send_close(f, t);
            }
            return;
        }
        if status != smb2::STATUS_SUCCESS {
            self.arm_timer(f, t, FAILURE_RETRY_MS * 1000);
            return;
        }
        match purpose {
            Purpose::SetFlowId(SetupStyle::StatusLater) => {
                let r = self.policy_request(f, Options::SET_POLICY);
                self.send_ioctl(
                    f,
                    t,
                    r,
                    Purpose::SetPolicy { with_status: false },
                    "set policy (status follows within 1 s)",
                );
            }
            Purpose::SetFlowId(_) => {
                let r = self.policy_request(f, Options::SET_POLICY | Options::GET_STATUS);
                self.send_ioctl(
                    f,
                    t,
                    r,
                    Purpose::SetPolicy { with_status: true },
                    "set policy and get status",
                );
            }
            Purpose::SetPolicy { with_status: false } => {
                // Section 3.1.6: the status request must follow within 1 second.
                let delay = 200_000 + self.rng.below(600_000);
                self.arm_timer(f, t, delay);
            }
            Purpose::SetPolicy { with_status: true } | Purpose::Status => {
                if let Some(r) = resp {
                    self.apply_status(f, t, &r);
                }
            }
            Purpose::Raw => {}
        }
    }

    /// Section 3.1.5.1.
    fn apply_status(&mut self, f: usize, t: Time, r: &Response) {
        let poll = u64::from(
            self.c
                .hosts
                .get(self.flows[f].host)
                .map_or(1, |h| h.poll_factor),
        );
        let Some(fl) = self.flows.get_mut(f) else {
            return;
        };
        fl.max_io_rate = r.maximum_io_rate;
        if let Some(bw) = r.maximum_bandwidth {
            fl.max_bw = bw;
        }
        if r.base_io_size > 0 {
            fl.base = r.base_io_size;
        }
        let ttl_ms = if r.time_to_live > 1000 {
            u64::from(r.time_to_live)
        } else {
            DEFAULT_TTL_MS
        };
        let start_io = !fl.ready;
        fl.ready = true;
        self.arm_timer(f, t, ttl_ms * 1000 * poll);
        if start_io {
            let fl = &mut self.flows[f];
            if !fl.arrivals {
                fl.arrivals = true;
                self.at(t + 1, Ev::Arrival(f));
            }
        }
        self.dispatch(f, t);
    }

    fn arm_timer(&mut self, f: usize, t: Time, after_us: u64) {
        let Some(fl) = self.flows.get_mut(f) else {
            return;
        };
        fl.timer_gen += 1;
        let gen = fl.timer_gen;
        self.at(t + after_us, Ev::Status(f, gen));
    }

    fn status_timer(&mut self, f: usize, gen: u64, t: Time) {
        let Some(fl) = self.flows.get(f) else {
            return;
        };
        if fl.timer_gen != gen {
            return;
        }
        let drained = fl.retired && fl.outstanding == 0 && fl.final_msg.is_none();
        if fl.fid.is_none() || (fl.closing && !drained) {
            self.at(t + 200_000, Ev::Status(f, gen));
            return;
        }
        // Counters are taken when the request actually leaves: wait for the link so no
        // response lands between "taken" and "sent" (the interval rule is in frame order).
        let ch = self.next_chan(fl.host);
        let conn = self.chans[ch].conn;
        let free = self.wire.busy_until(conn, Side::Client);
        if free > t {
            self.at(free, Ev::Status(f, gen));
            return;
        }
        let mut r = self.flow_request(f, Options::GET_STATUS | Options::UPDATE_COUNTERS);
        let reporting = self.c.hosts[self.flows[f].host].counters;
        let fl = &mut self.flows[f];
        let actual = std::mem::take(&mut fl.cnt);
        let ios = std::mem::take(&mut fl.ios);
        let c = match reporting {
            CounterReporting::Honest => actual,
            CounterReporting::ReadsOnly => sum_counters(
                ios.iter()
                    .filter_map(|&i| self.ios.get(i))
                    .filter(|io| !io.write),
            ),
        };
        let fl = &mut self.flows[f];
        r.io_count_increment = c.io;
        r.normalized_io_count_increment = c.norm;
        r.latency_increment = c.latency;
        r.lower_latency_increment = c.lower;
        if let Some(v) = r.v1_1.as_mut() {
            v.kilobyte_count_increment = c.bytes / 1024;
        }
        let prev = fl.last_update.replace(t);
        let host = &self.c.hosts[fl.host];
        let rate = effective_rate(fl, host.sqos, host.throttles_bandwidth).map_or(0, |r| r as u64);
        let m = self.msgs.len();
        fl.updates.push(UpdRec {
            msg: m,
            prev,
            rate,
            inc: c,
            actual,
            ios,
        });
        // Timer re-armed by the answer.
        fl.timer_gen += 1;
        let note = if fl.retired {
            fl.final_msg = Some(m);
            "last status request with counters before the disk leaves the host"
        } else {
            "status request with counters"
        };
        self.send_ioctl(f, t, r, Purpose::Status, note);
    }

    fn script(&mut self, i: usize, t: Time) {
        let Some((_, action)) = self.c.script.get(i) else {
            return;
        };
        match action.clone() {
            Action::ClientPolicy { flow, policy } => {
                if let Some(fl) = self.flows.get_mut(flow) {
                    fl.policy = policy;
                    if fl.fid.is_some() && !fl.closing {
                        let r =
                            self.policy_request(flow, Options::SET_POLICY | Options::GET_STATUS);
                        self.send_ioctl(
                            flow,
                            t,
                            r,
                            Purpose::SetPolicy { with_status: true },
                            "policy changed on the host",
                        );
                    }
                }
            }
            Action::ServerPolicy { id, policy } => self.server.set_policy(id, policy),
            Action::ArmFault(i) => self.armed.push(i),
            Action::Reopen { flow } => {
                if let Some(fl) = self.flows.get_mut(flow) {
                    fl.closing = true;
                    if fl.outstanding == 0 {
                        self.send_close(flow, t);
                    }
                }
            }
            Action::Handoff { from, to, after_us } => {
                if let Some(fl) = self.flows.get_mut(from) {
                    if fl.retired || fl.fid.is_none() {
                        return;
                    }
                    fl.closing = true;
                    fl.retired = true;
                    fl.handoff = Some((to, after_us));
                    fl.queue.clear();
                    // The regular status timer stops; the last update goes once I/O drained.
                    fl.timer_gen += 1;
                    if fl.outstanding == 0 {
                        self.arm_timer(from, t, 0);
                    }
                }
            }
            Action::DropChannel { host, channel, how } => {
                // It strikes the next request the channel carries (see `flush_outbox`).
                if let Some(c) = self
                    .hosts
                    .get(host)
                    .and_then(|x| x.chans.get(channel))
                    .and_then(|&ch| self.chans.get_mut(ch))
                    .filter(|c| c.dead_at.is_none())
                {
                    c.armed = Some(how);
                }
            }
            Action::Raw { host, raw } => {
                let (target, fid, name) = match raw.on_flow {
                    Some(f) => match self.flows.get(f) {
                        Some(fl) => (Target::Flow(f), fl.fid, Some(fl.spec.path.clone())),
                        None => return,
                    },
                    None => (
                        Target::Spare,
                        self.hosts.get(host).and_then(|h| h.spare),
                        Some("scratch\\probe.vhdx".to_string()),
                    ),
                };
                let Some(fid) = fid else {
                    return;
                };
                self.ioctl_on(
                    host,
                    target,
                    fid,
                    name,
                    t,
                    raw.request,
                    raw.max_output,
                    Purpose::Raw,
                    raw.note.to_string(),
                );
            }
        }
    }

    fn send_close(&mut self, f: usize, t: Time) {
        let Some(fl) = self.flows.get_mut(f) else {
            return;
        };
        let Some(fid) = fl.fid.take() else {
            return;
        };
        fl.ready = false;
        let h = fl.host;
        let hdr = self.client_header(h, smb2::CLOSE, 1);
        self.client_send(
            h,
            t,
            hdr,
            &smb2::close_request(&fid),
            0,
            ReqKind::Close(Target::Flow(f), fid),
        );
    }

    // ---- I/O ------------------------------------------------------------------------------

    fn arrival(&mut self, f: usize, t: Time) {
        let end = self.end;
        let Some(fl) = self.flows.get_mut(f).filter(|fl| !fl.retired) else {
            return;
        };
        if fl.queue.len() < VM_QUEUE_LIMIT {
            let d = &fl.spec.demand;
            let weights: Vec<u32> = d.sizes.iter().map(|s| s.1).collect();
            let size = d.sizes.get(fl.rng.weighted(&weights)).map_or(4096, |s| s.0);
            let write = fl.rng.below(100) >= u64::from(d.read_percent);
            let blocks = (fl.spec.disk_bytes / 4096)
                .saturating_sub(u64::from(size / 4096) + 1)
                .max(1);
            let offset = fl.rng.below(blocks) * 4096;
            fl.queue.push_back((t, write, size, offset));
        }
        let mean = 1e6 / fl.spec.demand.iops.max(0.01);
        let next = t + (fl.rng.exp(mean) as u64).max(1);
        if next < end {
            self.at(next, Ev::Arrival(f));
        }
        self.dispatch(f, t);
    }

    fn dispatch(&mut self, f: usize, t: Time) {
        let Some(fl) = self.flows.get(f) else {
            return;
        };
        let host = &self.c.hosts[fl.host];
        let (obey, dialect) = (host.obeys_limits, host.sqos);
        let bandwidth = host.throttles_bandwidth;
        loop {
            let fl = &mut self.flows[f];
            if !fl.ready
                || fl.closing
                || fl.fid.is_none()
                || fl.outstanding >= fl.spec.demand.queue_depth
            {
                return;
            }
            let Some(&(gen, write, len, offset)) = fl.queue.front() else {
                return;
            };
            let rate = if obey {
                effective_rate(fl, dialect, bandwidth)
            } else {
                None
            };
            if let Some(rate) = rate {
                // GCRA (a token bucket): `next_allowed` is the flow's theoretical time; an I/O
                // may start up to BURST_US ahead of it, then pushes it by its normalized cost.
                let earliest = fl.next_allowed.saturating_sub(BURST_US);
                if t < earliest {
                    if fl.dispatch_at.is_none() {
                        fl.dispatch_at = Some(earliest);
                        self.at(earliest, Ev::Dispatch(f));
                    }
                    return;
                }
                let norm = u64::from(len).div_ceil(u64::from(fl.base.max(1)));
                fl.next_allowed = fl.next_allowed.max(t) + (norm as f64 * 1e6 / rate).ceil() as u64;
            }
            fl.queue.pop_front();
            fl.outstanding += 1;
            self.issue(f, t, gen, write, len, offset);
        }
    }

    fn issue(&mut self, f: usize, t: Time, gen: Time, write: bool, len: u32, offset: u64) {
        let base = self.flows[f].base;
        let io = self.ios.len();
        self.ios.push(IoRec {
            flow: f,
            chan: 0,
            write,
            offset,
            len,
            norm: u64::from(len).div_ceil(u64::from(base.max(1))),
            gen,
            req_tag: 0,
            req_done: 0,
            resp_tag: None,
            resp_done: None,
            hdr: Header::default(),
        });
        self.send_io(io, t, false);
    }

    /// Sends the request of I/O `io` on its host's next channel; `replay` sends it again after
    /// the channel it was outstanding on failed (a WRITE flagged as a replay).
    fn send_io(&mut self, io: usize, t: Time, replay: bool) {
        let Some(rec) = self.ios.get(io) else {
            return;
        };
        let (write, len, offset) = (rec.write, rec.len, rec.offset);
        let Some(fl) = self.flows.get(rec.flow) else {
            return;
        };
        let (h, fid) = (fl.host, fl.fid.unwrap_or_default());
        let ch = self.pick_chan(h);
        if let Some(rec) = self.ios.get_mut(io) {
            rec.chan = ch;
        }
        let charge = len.div_ceil(65536).max(1) as u16;
        if write {
            let hdr = Header {
                replay,
                ..self.client_header(ch, smb2::WRITE, charge)
            };
            let body = smb2::write_request(&fid, offset, len);
            self.client_send(ch, t, hdr, &body, len as usize, ReqKind::Io(io));
        } else {
            let hdr = self.client_header(ch, smb2::READ, charge);
            let body = smb2::read_request(&fid, offset, len);
            self.client_send(ch, t, hdr, &body, 0, ReqKind::Io(io));
        }
    }

    fn io_complete(&mut self, io: usize, t: Time) {
        let Some(rec) = self.ios.get_mut(io) else {
            return;
        };
        rec.resp_done = Some(t);
        let f = rec.flow;
        let lower = (t - rec.req_done) * 10;
        let latency = (t - rec.gen) * 10;
        let (len, write) = (rec.len, rec.write);
        let Some(fl) = self.flows.get_mut(f) else {
            return;
        };
        let norm = u64::from(len).div_ceil(u64::from(fl.base.max(1)));
        rec.norm = norm;
        for c in [&mut fl.cnt, &mut fl.totals] {
            c.io += 1;
            c.norm += norm;
            c.latency += latency;
            c.lower += lower;
            c.bytes += u64::from(len);
        }
        if write {
            fl.bytes_written += u64::from(len);
        } else {
            fl.bytes_read += u64::from(len);
        }
        fl.ios.push(io);
        fl.outstanding = fl.outstanding.saturating_sub(1);
        if fl.closing && fl.outstanding == 0 && fl.fid.is_some() {
            if fl.retired {
                self.arm_timer(f, t, 0);
            } else {
                self.send_close(f, t);
            }
        }
        self.dispatch(f, t);
    }

    // ---- server ---------------------------------------------------------------------------

    /// Sends a response: `hdr` is the request's header with the status to answer.
    fn server_send(
        &mut self,
        ch: usize,
        t: Time,
        hdr: Header,
        body: &[u8],
        fill: usize,
        kind: RespKind,
    ) {
        let status = hdr.status;
        let hdr = Header {
            response: true,
            credits: hdr.credit_charge.max(1),
            ..hdr
        };
        let parts = smb2::message(&hdr, body, fill);
        let parts = self.sealed(ch, false, hdr.command, parts);
        self.queue_msg(
            ch,
            Side::Server,
            t,
            parts,
            Item::Resp(RespItem { status, kind }),
        );
    }

    fn server_request(&mut self, ch: usize, t: Time, it: ReqItem) {
        let reply = t + SERVER_TURNAROUND_US;
        let Some(h) = self.chans.get(ch).map(|c| c.host) else {
            return;
        };
        let Some(spec) = self.c.hosts.get(h) else {
            return;
        };
        // The answer's header: the request's without its ChannelSequence and replay flag.
        let hdr = Header {
            status: 0,
            replay: false,
            ..it.hdr
        };
        match it.kind {
            ReqKind::Negotiate => {
                let guid =
                    *uuid::Uuid::from_u128(0x5f0f_5e77_0000_4000_8000_0000_0000_0100).as_bytes();
                let salt = self.salt();
                let body = smb2::negotiate_response(
                    spec.smb_dialect,
                    &guid,
                    reply,
                    self.c.start - 3_600_000_000 * 30,
                    &salt,
                    self.encrypt.map_or(smb2::CIPHER_DEFAULT, Cipher::id),
                    self.squeeze,
                );
                self.server_send(ch, reply, hdr, &body, 0, RespKind::Negotiate);
            }
            ReqKind::Session(round) => {
                let session = 0x0000_4400_0000_0011 + ((h as u64) << 8);
                if let Some(host) = self.hosts.get_mut(h) {
                    host.session = session;
                }
                let status = if round == 1 {
                    smb2::STATUS_MORE_PROCESSING_REQUIRED
                } else {
                    0
                };
                let hdr = Header {
                    session_id: session,
                    ..hdr
                };
                self.server_send(
                    ch,
                    reply,
                    Header { status, ..hdr },
                    &smb2::session_setup_response(),
                    0,
                    RespKind::Session(round),
                );
            }
            ReqKind::Tree => {
                let tree = 1 + h as u32;
                if let Some(host) = self.hosts.get_mut(h) {
                    host.tree = tree;
                }
                let hdr = Header {
                    tree_id: tree,
                    ..hdr
                };
                self.server_send(
                    ch,
                    reply,
                    hdr,
                    &smb2::tree_connect_response(),
                    0,
                    RespKind::Tree,
                );
            }
            ReqKind::Create(target) => {
                let Some(host) = self.hosts.get_mut(h) else {
                    return;
                };
                let fid = FileId {
                    persistent: 0x0000_0800_0000_0000 | ((h as u64) << 24) | host.next_volatile,
                    volatile: 0x0000_0c00_0000_0000
                        | ((h as u64) << 32)
                        | (host.next_volatile * 0x41),
                };
                host.next_volatile += 1;
                let size = match target {
                    Target::Flow(f) => self.flows.get(f).map_or(1 << 30, |f| f.spec.disk_bytes),
                    Target::Spare => 4 << 20,
                };
                let body = smb2::create_response(&fid, reply, size);
                self.server_send(ch, reply, hdr, &body, 0, RespKind::Create(target, fid));
            }
            ReqKind::Close(target, fid) => {
                self.server.close((h as u32, fid.volatile));
                self.server_send(
                    ch,
                    reply,
                    hdr,
                    &smb2::close_response(),
                    0,
                    RespKind::Close(target),
                );
            }
            ReqKind::Io(io) => {
                let Some(rec) = self.ios.get(io) else {
                    return;
                };
                // Shared storage: a FIFO that serves `storage_iops` normalized I/Os per second,
                // plus a service time growing with the size.
                let norm = u64::from(rec.len).div_ceil(8192);
                let start = self.storage_free.max(t);
                self.storage_free = start + norm * 1_000_000 / self.c.storage_iops.max(1);
                let service = 120 + u64::from(rec.len) / 2500 + self.rng.below(160);
                if let Some(rec) = self.ios.get_mut(io) {
                    rec.hdr = hdr;
                }
                self.at(self.storage_free + service, Ev::IoDone(ch, io));
            }
            ReqKind::Ioctl(m) => self.server_ioctl(ch, reply, hdr, m),
            ReqKind::Interfaces => {
                let nics: Vec<(std::net::IpAddr, u32)> = std::iter::once(self.c.server_ip)
                    .chain(spec.extra_channels.iter().map(|n| n.server_ip))
                    .zip(1u32..)
                    .collect();
                let out = smb2::network_interface_info(&nics);
                let any = FileId {
                    persistent: u64::MAX,
                    volatile: u64::MAX,
                };
                let body =
                    smb2::ioctl_response(smb2::FSCTL_QUERY_NETWORK_INTERFACE_INFO, &any, &out);
                self.server_send(ch, reply, hdr, &body, 0, RespKind::Interfaces);
            }
        }
    }

    fn server_io_done(&mut self, ch: usize, t: Time, io: usize) {
        // The server cannot answer on a connection that failed.
        if self.dead(ch, t) {
            return;
        }
        let Some(rec) = self.ios.get(io) else {
            return;
        };
        let (len, hdr) = (rec.len, rec.hdr);
        if rec.write {
            self.server_send(ch, t, hdr, &smb2::write_response(len), 0, RespKind::Io(io));
        } else {
            self.server_send(
                ch,
                t,
                hdr,
                &smb2::read_response(len),
                len as usize,
                RespKind::Io(io),
            );
        }
    }

    fn server_ioctl(&mut self, ch: usize, t: Time, hdr: Header, m: usize) {
        let Some(rec) = self.msgs.get(m) else {
            return;
        };
        let h = rec.host;
        let fid = match rec.target {
            Target::Flow(f) => self.flows.get(f).and_then(|f| f.fid),
            Target::Spare => self.hosts.get(h).and_then(|x| x.spare),
        }
        .unwrap_or_default();
        let size = encode_request_with(&rec.req, NamePlacement::AfterFixedPart).len();
        // The first armed bug this request matches strikes it.
        let on = match rec.target {
            Target::Flow(f) => FaultOn::Flow(f),
            Target::Spare => FaultOn::Spare(h),
        };
        let opts = rec.req.options;
        let faults = &self.c.faults;
        let hit = self.armed.iter().position(|&i| {
            faults
                .get(i)
                .is_some_and(|f| f.on == on && opts.contains(f.when))
        });
        let fault_index = hit.map(|p| self.armed.remove(p));
        let fault = fault_index.and_then(|i| faults.get(i)).map(|f| f.fault);
        let result =
            self.server
                .handle_with((h as u32, fid.volatile), &rec.req, size, rec.max_out, fault);
        let rec = &mut self.msgs[m];
        rec.fault = fault_index;
        if fault == Some(ServerFault::NoResponse) {
            // Lost in the server: the client's request stays outstanding.
            return;
        }
        match result {
            Ok(resp) => {
                rec.nt = Some(0);
                let out = resp.as_ref().map(encode_response).unwrap_or_default();
                rec.resp = resp;
                let body = smb2::ioctl_response(FSCTL_STORAGE_QOS_CONTROL, &fid, &out);
                self.server_send(ch, t, hdr, &body, 0, RespKind::Ioctl(m));
            }
            Err(status) => {
                rec.nt = Some(status);
                self.server_send(
                    ch,
                    t,
                    Header { status, ..hdr },
                    &smb2::error_response(),
                    0,
                    RespKind::Ioctl(m),
                );
            }
        }
    }
}

/// The increments a set of completed I/Os adds up to (section 3.1.4.1).
fn sum_counters<'a>(ios: impl Iterator<Item = &'a IoRec>) -> Counters {
    let mut c = Counters::default();
    for io in ios {
        let done = io.resp_done.unwrap_or(io.req_done);
        c.io += 1;
        c.norm += io.norm;
        c.latency += done.saturating_sub(io.gen) * 10;
        c.lower += done.saturating_sub(io.req_done) * 10;
        c.bytes += u64::from(io.len);
    }
    c
}

/// Section 3.1.7.1: the rate (normalized IOPS) a flow must not exceed on average, if any
/// (MaximumBandwidth counts only for a 1.1 client that `throttles_bandwidth`).
fn effective_rate(fl: &FlowRt, dialect: Dialect, throttles_bandwidth: bool) -> Option<f64> {
    let mut rate: Option<f64> = None;
    if fl.max_io_rate > 0 {
        rate = Some(fl.max_io_rate as f64);
    }
    if dialect == Dialect::V1_1 && throttles_bandwidth && fl.max_bw > 0 {
        let bw = fl.max_bw as f64 * 1024.0 / f64::from(fl.base.max(1));
        rate = Some(rate.map_or(bw, |r| r.min(bw)));
    }
    rate
}

/// A channel as the truth describes it.
struct ChanResult {
    host: usize,
    primary: bool,
    label: String,
    client: String,
    server: String,
    dropped: Option<(DropKind, Time)>,
}

/// Everything the simulation recorded, with the wire's traces to turn tags into frames.
pub struct SimResult {
    channels: Vec<ChanResult>,
    pub traces: Vec<Trace>,
    pub frames: u64,
    pub file_bytes: u64,
    pub retransmissions: u64,
    pub reordered: u64,
    pub missing: u64,
    ios: Vec<IoRec>,
    msgs: Vec<MsgRec>,
    flows: Vec<FlowRt>,
    /// `--encrypt`: the keys of every session, for the key file.
    pub keys: Vec<SessionKeys>,
}

impl SimResult {
    fn trace(&self, tag: Option<u32>) -> Option<&Trace> {
        tag.and_then(|t| self.traces.get(t as usize))
    }

    fn frame(&self, tag: Option<u32>) -> Option<u64> {
        self.trace(tag).and_then(|t| t.frame)
    }

    /// Frame and time of the first send of a request that is in the capture.
    fn first_seen_send(&self, m: &MsgRec) -> Option<(u64, Time)> {
        m.sends
            .iter()
            .filter_map(|&(_, tag)| self.trace(Some(tag)))
            .find_map(|x| x.frame.map(|f| (f, x.ts)))
    }

    /// The channels a flow's completed I/O and its SQOS requests in the capture went over, in
    /// order of first use (by frame).
    fn flow_channels(&self, f: usize) -> Vec<String> {
        let mut uses: Vec<(u64, usize)> = Vec::new();
        for io in self.ios.iter().filter(|io| io.flow == f) {
            if let Some(fr) = self.frame(io.resp_tag).filter(|_| io.resp_done.is_some()) {
                uses.push((fr, io.chan));
            }
        }
        for m in self.msgs.iter().filter(|m| m.flow == Some(f)) {
            for &(ch, tag) in &m.sends {
                if let Some(fr) = self.frame(Some(tag)) {
                    uses.push((fr, ch));
                }
            }
        }
        uses.sort_unstable();
        let mut out: Vec<String> = Vec::new();
        for (_, ch) in uses {
            if let Some(label) = self.channels.get(ch).map(|c| c.label.clone()) {
                if !out.contains(&label) {
                    out.push(label);
                }
            }
        }
        out
    }

    /// Builds the ground truth (frames resolved).
    pub fn truth(&self, c: &Cluster) -> truth::Truth {
        let mut t = truth::Truth {
            interval_rule: truth::INTERVAL_RULE,
            latency_rule: truth::LATENCY_RULE,
            ..truth::Truth::default()
        };
        for h in &c.hosts {
            t.hosts.push(truth::HostTruth {
                name: h.name.clone(),
                address: h.ip.to_string(),
                smb_dialect: format!(
                    "{}.{}.{}",
                    h.smb_dialect >> 8,
                    (h.smb_dialect >> 4) & 0xf,
                    h.smb_dialect & 0xf
                ),
                sqos_dialect: h.sqos,
                obeys_limits: h.obeys_limits,
                throttles_bandwidth: h.throttles_bandwidth,
                counters: h.counters,
                poll_factor: h.poll_factor,
                channels: Vec::new(),
            });
        }
        for c in &self.channels {
            if let Some(ht) = t.hosts.get_mut(c.host) {
                ht.channels.push(truth::ChannelTruth {
                    client: c.client.clone(),
                    server: c.server.clone(),
                    joined: if c.primary { "setup" } else { "binding" },
                    dropped: c.dropped.map(|d| d.0),
                    dropped_time: c.dropped.map(|d| secs(d.1)),
                    detected_time: c.dropped.map(|(how, at)| match how {
                        DropKind::Rst => secs(at),
                        DropKind::Silence => secs(at + SILENCE_DETECT_US),
                    }),
                });
            }
        }
        for m in &self.msgs {
            let resp_trace = self.trace(m.resp_tag);
            // The sends of the request that are in the capture: the first, then its replays.
            let seen: Vec<(u64, Time)> = m
                .sends
                .iter()
                .filter_map(|&(_, tag)| self.trace(Some(tag)))
                .filter_map(|x| x.frame.map(|f| (f, x.ts)))
                .collect();
            let (request_frame, request_time) = match seen.first() {
                Some(&(f, ts)) => (Some(f), secs(ts)),
                None => (None, secs(m.sent)),
            };
            let replay_request_frames: Vec<u64> = seen.iter().skip(1).map(|x| x.0).collect();
            t.totals.sqos_requests += 1;
            if m.nt.is_some_and(|s| s != 0) {
                t.totals.sqos_errors += 1;
            }
            if let Some(spec) = m.fault.and_then(|i| c.faults.get(i)) {
                let flow = self.flows.get(spec.flow);
                t.faults.push(truth::FaultTruth {
                    fault: spec.fault,
                    finding: spec.finding,
                    what: spec.what,
                    host: c
                        .hosts
                        .get(m.host)
                        .map(|h| h.name.clone())
                        .unwrap_or_default(),
                    logical_flow_id: flow.map(|f| f.spec.flow_id).unwrap_or_default(),
                    initiator_name: flow.map(|f| f.spec.vm.clone()).unwrap_or_default(),
                    file_name: m.file_name.as_deref().map(|n| c.unc(n)),
                    message_id: m.mid,
                    option_names: m.req.options.names(),
                    request_frame,
                    request_time,
                    response_frame: resp_trace.and_then(|x| x.frame),
                    response_time: resp_trace.filter(|x| x.frame.is_some()).map(|x| secs(x.ts)),
                    nt_status: m.nt,
                    nt_status_name: m.nt.map(truth::nt_status_name),
                });
            }
            t.messages.push(truth::MessageTruth {
                host: c
                    .hosts
                    .get(m.host)
                    .map(|h| h.name.clone())
                    .unwrap_or_default(),
                logical_flow_id: m
                    .flow
                    .and_then(|f| self.flows.get(f))
                    .map(|f| f.spec.flow_id),
                file_name: m.file_name.as_deref().map(|n| c.unc(n)),
                request_frame,
                request_time,
                replay_request_frames,
                response_frame: resp_trace.and_then(|x| x.frame),
                response_time: resp_trace.filter(|x| x.frame.is_some()).map(|x| secs(x.ts)),
                protocol_version: m.req.protocol_version.0,
                options: m.req.options.0,
                option_names: m.req.options.names(),
                max_output_response: m.max_out,
                nt_status: m.nt,
                nt_status_name: m.nt.map(truth::nt_status_name),
                response: m.resp.as_ref().map(|r| truth::ResponseTruth {
                    status: r.status.0,
                    time_to_live: r.time_to_live,
                    maximum_io_rate: r.maximum_io_rate,
                    minimum_io_rate: r.minimum_io_rate,
                    maximum_bandwidth: r.maximum_bandwidth,
                    base_io_size: r.base_io_size,
                }),
                purpose: m.note.clone(),
            });
        }
        for (f_idx, fl) in self.flows.iter().enumerate() {
            let host = &c.hosts[fl.host];
            let mut ft = truth::FlowTruth {
                logical_flow_id: fl.spec.flow_id,
                initiator_id: fl.spec.initiator_id,
                initiator_name: fl.spec.vm.clone(),
                initiator_node_name: host.name.clone(),
                host: host.name.clone(),
                dialect: host.sqos,
                file_names: fl.file_names.iter().map(|n| c.unc(n)).collect(),
                channels: self.flow_channels(f_idx),
                obeys_limits: host.obeys_limits,
                policies: Vec::new(),
                updates: Vec::new(),
                unreported_ios: fl.ios.len() as u64,
                totals: truth::FlowTotals {
                    io_count: fl.totals.io,
                    normalized_io_count: fl.totals.norm,
                    bytes_read: fl.bytes_read,
                    bytes_written: fl.bytes_written,
                    latency_100ns: fl.totals.latency,
                    lower_latency_100ns: fl.totals.lower,
                },
            };
            for p in &fl.policies {
                let msg = self.msgs.get(p.msg);
                ft.policies.push(truth::PolicyTruth {
                    time: secs(p.time),
                    request_frame: msg.and_then(|m| self.frame(m.req_tag)),
                    policy: p.policy,
                });
            }
            for u in &fl.updates {
                let Some(m) = self.msgs.get(u.msg) else {
                    continue;
                };
                t.totals.updates += 1;
                let ios = u
                    .ios
                    .iter()
                    .filter_map(|&i| self.ios.get(i))
                    .map(|io| {
                        let req_ts = self.trace(Some(io.req_tag)).map_or(io.req_done, |x| x.ts);
                        let done = io.resp_done.unwrap_or(0);
                        truth::IoTruth {
                            op: if io.write { "write" } else { "read" },
                            offset: io.offset,
                            length: io.len,
                            normalized: io.norm,
                            request_frame: self.frame(Some(io.req_tag)),
                            response_frame: self.frame(io.resp_tag),
                            request_time: secs(req_ts),
                            response_time: secs(done),
                            queue_delay_100ns: (io.req_done - io.gen) * 10,
                            latency_100ns: (done - io.gen) * 10,
                            lower_latency_100ns: (done - io.req_done) * 10,
                        }
                    })
                    .collect();
                let first = self.first_seen_send(m);
                ft.updates.push(truth::UpdateTruth {
                    request_frame: first.map(|x| x.0),
                    request_time: secs(first.map_or(m.sent, |x| x.1)),
                    response_frame: self.frame(m.resp_tag),
                    nt_status: m.nt.unwrap_or(0),
                    previous_request_time: u.prev.map(secs),
                    maximum_io_rate_in_effect: u.rate,
                    io_count_increment: u.inc.io,
                    normalized_io_count_increment: u.inc.norm,
                    latency_increment: u.inc.latency,
                    lower_latency_increment: u.inc.lower,
                    kilobyte_count_increment: m.req.v1_1.map(|v| v.kilobyte_count_increment),
                    actual: truth::Increments {
                        io_count: u.actual.io,
                        normalized_io_count: u.actual.norm,
                        latency: u.actual.latency,
                        lower_latency: u.actual.lower,
                        kilobyte_count: m.req.v1_1.map(|_| u.actual.bytes / 1024),
                    },
                    ios,
                });
            }
            t.flows.push(ft);
        }
        for io in &self.ios {
            if io.resp_done.is_none() {
                continue;
            }
            t.totals.ios += 1;
            if io.write {
                t.totals.writes += 1;
                t.totals.bytes_written += u64::from(io.len);
            } else {
                t.totals.reads += 1;
                t.totals.bytes_read += u64::from(io.len);
            }
        }
        t
    }
}
