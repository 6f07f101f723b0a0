//! The cluster simulation, in capture time: Hyper-V hosts (SMB2 clients with MS-SQOS logical
//! flows, section 3.1), VMs doing I/O, and the file server (SMB2 server, storage, and the
//! MS-SQOS server of section 3.2). Events run in time order; every message goes through the
//! wire, which tells when its receiver has it.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Write};

use crate::sqos::{Dialect, Options, Request, Response, FSCTL_STORAGE_QOS_CONTROL};

use super::packet::Endpoint;
use super::qos::{encode_request, encode_response};
use super::rng::Rng;
use super::scenario::{
    Action, Cluster, CounterReporting, FaultOn, FlowSpec, PolicySpec, SetupStyle,
};
use super::seal::Sealer;
use super::server::{ServerFault, SqosServer};
use super::smb2::{self, FileId, Header};
use super::truth::{self, secs};
use super::wire::{ConnSpec, Part, Side, Time, Trace, Wire};
use crate::smb2::crypto::{Cipher, SessionKeys};

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
    Create(Target),
    Close(Target, FileId),
    Io(usize),
    Ioctl(usize),
}

enum RespKind {
    Negotiate,
    Session(u8),
    Tree,
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
    flow: Option<usize>,
    target: Target,
    file_name: Option<String>,
    req: Request,
    max_out: u32,
    purpose: Purpose,
    note: String,
    req_tag: Option<u32>,
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
    conn: u32,
    next_mid: u64,
    session: u64,
    tree: u32,
    spare: Option<FileId>,
    /// Server side: next volatile FileId.
    next_volatile: u64,
    /// `--encrypt`: the session's keys and nonces.
    sealer: Option<Sealer>,
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
    flows: Vec<FlowRt>,
    server: SqosServer,
    storage_free: Time,
    ios: Vec<IoRec>,
    msgs: Vec<MsgRec>,
    outbox: Outbox,
    end: Time,
    /// Server bugs armed and waiting for the request they strike, in arming order.
    armed: Vec<usize>,
    /// `--encrypt`: every session is encrypted with this cipher.
    encrypt: Option<Cipher>,
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
        Sim {
            c,
            wire,
            rng: rng.fork(2),
            events: BinaryHeap::new(),
            order: 0,
            hosts: Vec::new(),
            flows,
            server,
            storage_free: 0,
            ios: Vec::new(),
            msgs: Vec::new(),
            outbox: Vec::new(),
            end: c.start + c.duration_us,
            armed: Vec::new(),
            encrypt: None,
        }
    }

    /// Encrypt every session (after its SESSION_SETUP) with `cipher`.
    pub fn encrypted(mut self, cipher: Option<Cipher>) -> Self {
        self.encrypt = cipher;
        self
    }

    /// `parts` of a message from `h`'s client (or server), sealed if the session is encrypted;
    /// NEGOTIATE and SESSION_SETUP go in clear and feed the preauth hash.
    fn sealed(&mut self, h: usize, from_client: bool, parts: Vec<Part>) -> Vec<Part> {
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
        let result = SimResult {
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
            Ev::ToServer(h, items) => {
                for it in items {
                    self.server_request(h, t, it);
                }
            }
            Ev::ToClient(h, items) => {
                for it in items {
                    self.client_response(h, t, it);
                }
            }
            Ev::IoDone(h, io) => self.server_io_done(h, t, io),
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
        }
    }

    // ---- plumbing -------------------------------------------------------------------------

    fn queue_msg(&mut self, h: usize, side: Side, t: Time, parts: Vec<Part>, item: Item) {
        if let Some(last) = self.outbox.last_mut() {
            if last.0 == h && last.1 == side && last.2 == t {
                last.3.push((parts, item));
                return;
            }
        }
        self.outbox.push((h, side, t, vec![(parts, item)]));
    }

    fn flush_outbox(&mut self) {
        let owd = self.wire.config().one_way_us;
        for (h, side, t, batch) in std::mem::take(&mut self.outbox) {
            let Some(conn) = self.hosts.get(h).map(|x| x.conn) else {
                continue;
            };
            let (parts, items): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
            let deliveries = self.wire.send(conn, side, t, parts);
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
                            self.deliver(h, gt, items);
                        }
                        group = Some((d.at, vec![item]));
                    }
                }
            }
            if let Some((gt, items)) = group {
                self.deliver(h, gt, items);
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

    fn client_header(&mut self, h: usize, command: u16, charge: u16) -> Header {
        let host = &mut self.hosts[h];
        let mid = host.next_mid;
        host.next_mid += u64::from(charge.max(1));
        Header {
            command,
            status: 0,
            response: false,
            message_id: mid,
            credit_charge: charge,
            credits: charge.max(1) + u16::from(command == smb2::NEGOTIATE) * 30,
            tree_id: if matches!(
                command,
                smb2::NEGOTIATE | smb2::SESSION_SETUP | smb2::TREE_CONNECT
            ) {
                0
            } else {
                host.tree
            },
            session_id: if command == smb2::NEGOTIATE {
                0
            } else {
                host.session
            },
        }
    }

    fn client_send(
        &mut self,
        h: usize,
        t: Time,
        hdr: Header,
        body: &[u8],
        fill: usize,
        kind: ReqKind,
    ) {
        let parts = smb2::message(&hdr, body, fill);
        let parts = self.sealed(h, true, parts);
        self.queue_msg(h, Side::Client, t, parts, Item::Req(ReqItem { hdr, kind }));
    }

    // ---- client ---------------------------------------------------------------------------

    fn start_host(&mut self, h: usize, t: Time) {
        let Some(spec) = self.c.hosts.get(h) else {
            return;
        };
        let conn = ConnSpec {
            client: Endpoint {
                mac: spec.mac,
                ip: spec.ip,
                port: 49_700 + self.rng.below(12_000) as u16,
            },
            server: Endpoint {
                mac: self.c.server_mac,
                ip: self.c.server_ip,
                port: 445,
            },
            vlan: None,
            interface: spec.interface,
        };
        let (conn, ready) = self.wire.connect(conn, t);
        while self.hosts.len() <= h {
            self.hosts.push(HostRt {
                conn: u32::MAX,
                next_mid: 0,
                session: 0,
                tree: 0,
                spare: None,
                next_volatile: 1,
                sealer: None,
            });
        }
        if let Some(c) = self.encrypt {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&self.rng.next_u64().to_le_bytes());
            key[8..].copy_from_slice(&self.rng.next_u64().to_le_bytes());
            self.hosts[h].sealer = Some(Sealer::new(c, spec.smb_dialect, key));
        }
        self.hosts[h].conn = conn;
        let mut guid = [0u8; 16];
        guid.copy_from_slice(&self.rng.uuid().to_bytes_le());
        let salt = self.salt();
        let ciphers = if self.encrypt.is_some() {
            smb2::CIPHERS_ALL
        } else {
            smb2::CIPHERS_128
        };
        let body = smb2::negotiate_request(spec.smb_dialect, &guid, &salt, ciphers);
        let hdr = self.client_header(h, smb2::NEGOTIATE, 0);
        self.client_send(h, ready, hdr, &body, 0, ReqKind::Negotiate);
    }

    fn salt(&mut self) -> [u8; 32] {
        let mut s = [0u8; 32];
        for c in s.chunks_mut(8) {
            c.copy_from_slice(&self.rng.next_u64().to_le_bytes());
        }
        s
    }

    fn client_response(&mut self, h: usize, t: Time, it: RespItem) {
        match it.kind {
            RespKind::Negotiate => {
                let hdr = self.client_header(h, smb2::SESSION_SETUP, 1);
                self.client_send(
                    h,
                    t,
                    hdr,
                    &smb2::session_setup_request(),
                    0,
                    ReqKind::Session(1),
                );
            }
            RespKind::Session(1) => {
                let hdr = self.client_header(h, smb2::SESSION_SETUP, 1);
                self.client_send(
                    h,
                    t,
                    hdr,
                    &smb2::session_setup_request(),
                    0,
                    ReqKind::Session(2),
                );
            }
            RespKind::Session(_) => {
                let path = format!("\\\\{}\\{}", self.c.server_name, self.c.share);
                let hdr = self.client_header(h, smb2::TREE_CONNECT, 1);
                self.client_send(
                    h,
                    t,
                    hdr,
                    &smb2::tree_connect_request(&path),
                    0,
                    ReqKind::Tree,
                );
            }
            RespKind::Tree => {
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
            RespKind::Ioctl(m) => self.ioctl_answered(m, t, it.status),
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
        let input = encode_request(&req);
        let m = self.msgs.len();
        let hdr = self.client_header(h, smb2::IOCTL, 1);
        self.msgs.push(MsgRec {
            host: h,
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
            sent: t,
            mid: hdr.message_id,
            fault: None,
            resp_tag: None,
            nt: None,
            resp: None,
        });
        let body = smb2::ioctl_request(FSCTL_STORAGE_QOS_CONTROL, &fid, &input, max_out);
        self.client_send(h, t, hdr, &body, 0, ReqKind::Ioctl(m));
        m
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
        let conn = self.hosts[fl.host].conn;
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
        let fl = &self.flows[f];
        let (h, fid, base) = (fl.host, fl.fid.unwrap_or_default(), fl.base);
        let io = self.ios.len();
        self.ios.push(IoRec {
            flow: f,
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
        let charge = len.div_ceil(65536).max(1) as u16;
        if write {
            let hdr = self.client_header(h, smb2::WRITE, charge);
            let body = smb2::write_request(&fid, offset, len);
            self.client_send(h, t, hdr, &body, len as usize, ReqKind::Io(io));
        } else {
            let hdr = self.client_header(h, smb2::READ, charge);
            let body = smb2::read_request(&fid, offset, len);
            self.client_send(h, t, hdr, &body, 0, ReqKind::Io(io));
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
        h: usize,
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
        let parts = self.sealed(h, false, parts);
        self.queue_msg(
            h,
            Side::Server,
            t,
            parts,
            Item::Resp(RespItem { status, kind }),
        );
    }

    fn server_request(&mut self, h: usize, t: Time, it: ReqItem) {
        let reply = t + SERVER_TURNAROUND_US;
        let Some(spec) = self.c.hosts.get(h) else {
            return;
        };
        let hdr = it.hdr;
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
                );
                self.server_send(h, reply, hdr, &body, 0, RespKind::Negotiate);
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
                    h,
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
                    h,
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
                self.server_send(h, reply, hdr, &body, 0, RespKind::Create(target, fid));
            }
            ReqKind::Close(target, fid) => {
                self.server.close((h as u32, fid.volatile));
                self.server_send(
                    h,
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
                self.at(self.storage_free + service, Ev::IoDone(h, io));
            }
            ReqKind::Ioctl(m) => self.server_ioctl(h, reply, hdr, m),
        }
    }

    fn server_io_done(&mut self, h: usize, t: Time, io: usize) {
        let Some(rec) = self.ios.get(io) else {
            return;
        };
        let (len, hdr) = (rec.len, rec.hdr);
        if rec.write {
            self.server_send(h, t, hdr, &smb2::write_response(len), 0, RespKind::Io(io));
        } else {
            self.server_send(
                h,
                t,
                hdr,
                &smb2::read_response(len),
                len as usize,
                RespKind::Io(io),
            );
        }
    }

    fn server_ioctl(&mut self, h: usize, t: Time, hdr: Header, m: usize) {
        let Some(rec) = self.msgs.get(m) else {
            return;
        };
        let fid = match rec.target {
            Target::Flow(f) => self.flows.get(f).and_then(|f| f.fid),
            Target::Spare => self.hosts.get(h).and_then(|x| x.spare),
        }
        .unwrap_or_default();
        let size = encode_request(&rec.req).len();
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
                self.server_send(h, t, hdr, &body, 0, RespKind::Ioctl(m));
            }
            Err(status) => {
                rec.nt = Some(status);
                self.server_send(
                    h,
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

/// Everything the simulation recorded, with the wire's traces to turn tags into frames.
pub struct SimResult {
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
            });
        }
        for m in &self.msgs {
            let resp_trace = self.trace(m.resp_tag);
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
                    file_name: m.file_name.clone(),
                    message_id: m.mid,
                    option_names: m.req.options.names(),
                    request_frame: self.frame(m.req_tag),
                    request_time: secs(self.trace(m.req_tag).map_or(m.sent, |x| x.ts)),
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
                file_name: m.file_name.clone(),
                request_frame: self.frame(m.req_tag),
                request_time: secs(self.trace(m.req_tag).map_or(m.sent, |x| x.ts)),
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
        for fl in &self.flows {
            let host = &c.hosts[fl.host];
            let mut ft = truth::FlowTruth {
                logical_flow_id: fl.spec.flow_id,
                initiator_id: fl.spec.initiator_id,
                initiator_name: fl.spec.vm.clone(),
                initiator_node_name: host.name.clone(),
                host: host.name.clone(),
                dialect: host.sqos,
                file_names: fl.file_names.clone(),
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
                ft.updates.push(truth::UpdateTruth {
                    request_frame: self.frame(m.req_tag),
                    request_time: secs(self.trace(m.req_tag).map_or(m.sent, |x| x.ts)),
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
