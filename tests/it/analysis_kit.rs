//! Builds pipeline records in code to drive `sqos::analysis::Analyzer` (shared by tests/analysis_*.rs).
#![allow(dead_code)]

use std::net::SocketAddr;

use sqos::analysis::{Analysis, Analyzer, AnalyzerConfig, FlowFindingCode, FlowState};
use sqos::capture::Timestamp;
use sqos::net::ConnId;
use sqos::pipeline::{
    CaptureNote, ChannelEnd, ChannelEvent, ChannelJoin, ChannelRecord, CloseRecord, Direction,
    FileId, IoKind, IoRecord, OpenRecord, RecordSink, SqosBody, SqosRecord,
};
use sqos::sqos::{Dialect, Dissection, Options, Request, RequestV11, Response, Status};
use uuid::Uuid;

pub const FLOW: Uuid = Uuid::from_u128(0xb13a32e4_e2ad_5db2_a4f8_5cd3be9d696e);
pub const FLOW2: Uuid = Uuid::from_u128(0x2222_0000_0000_4000_8000_0000_0000_0002);
pub const POLICY: Uuid = Uuid::from_u128(0x04b4f24e_b3e9_4594_adaa_e327528de54b);
pub const INITIATOR: Uuid = Uuid::from_u128(0x1b9e4dc6_f8c0_419f_8785_8065bcff7284);
pub const INITIATOR2: Uuid = Uuid::from_u128(0x3333_0000_0000_4000_8000_0000_0000_0003);

pub const POLICY_NONE: Uuid = Uuid::nil();
pub const SUCCESS: u32 = 0;
pub const NOT_FOUND: u32 = 0xC000_0225;
pub const INVALID_PARAMETER: u32 = 0xC000_000D;
pub const REVISION_MISMATCH: u32 = 0xC000_0059;
pub const INVALID_DEVICE_REQUEST: u32 = 0xC000_0010;

pub fn ts(secs: f64) -> Timestamp {
    Timestamp((secs * 1e9).round() as i64)
}

pub fn fid(n: u64) -> FileId {
    FileId {
        persistent: n,
        volatile: 0x1000 + n,
    }
}

pub fn req(options: Options, flow: Uuid) -> Request {
    Request {
        options,
        logical_flow_id: flow,
        ..Request::new(Dialect::V1_1)
    }
}

/// SET_POLICY request with limits, initiator and names (name placed right after the fixed part).
pub fn policy_req(flow: Uuid, limit: u64, reservation: u64, vm: &str, node: &str) -> Request {
    let mut r = req(Options::SET_POLICY, flow);
    r.initiator_id = INITIATOR;
    r.limit = limit;
    r.reservation = reservation;
    r.initiator_name_offset = 128;
    r.initiator_name_length = (vm.len() * 2) as u16;
    r.initiator_node_name_offset = 128 + r.initiator_name_length;
    r.initiator_node_name_length = (node.len() * 2) as u16;
    r.initiator_name = Some(vm.into());
    r.initiator_node_name = Some(node.into());
    r
}

pub fn counters_req(flow: Uuid, io: u64, norm: u64, latency: u64, kb: u64) -> Request {
    let mut r = req(Options::GET_STATUS | Options::UPDATE_COUNTERS, flow);
    r.io_count_increment = io;
    r.normalized_io_count_increment = norm;
    r.latency_increment = latency;
    r.lower_latency_increment = latency / 2;
    r.v1_1 = Some(RequestV11 {
        bandwidth_limit: 0,
        kilobyte_count_increment: kb,
    });
    r
}

pub fn status(flow: Uuid, max: u64, min: u64, ttl: u32, st: Status) -> Response {
    Response {
        logical_flow_id: flow,
        initiator_id: INITIATOR,
        time_to_live: ttl,
        status: st,
        maximum_io_rate: max,
        minimum_io_rate: min,
        ..Response::new(Dialect::V1_1)
    }
}

fn addr(s: &str) -> SocketAddr {
    s.parse()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
}

fn dissection<T>(m: T) -> Dissection<T> {
    Dissection {
        message: Some(m),
        fields: vec![],
        findings: vec![],
        error: None,
    }
}

pub struct Kit {
    pub an: Analyzer,
    pub frame: u64,
    msg: u64,
    pub conn: ConnId,
    pub session: u64,
    /// What the next requests carry: SMB2_FLAGS_REPLAY_OPERATION, ChannelSequence.
    pub replay: bool,
    pub channel_sequence: u16,
}

impl Default for Kit {
    fn default() -> Self {
        Kit::new(AnalyzerConfig::default())
    }
}

impl Kit {
    pub fn new(cfg: AnalyzerConfig) -> Self {
        Kit {
            an: Analyzer::new(cfg),
            frame: 0,
            msg: 0,
            conn: ConnId(0),
            session: 0x4400_0000_0001,
            replay: false,
            channel_sequence: 0,
        }
    }

    fn next_frame(&mut self) -> u64 {
        self.frame += 1;
        self.frame
    }

    pub fn create(&mut self, at: f64, file: u64, name: &str) {
        let frame = self.next_frame();
        self.an.on_open(&OpenRecord {
            frame,
            ts: ts(at),
            conn: self.conn,
            session_id: self.session,
            tree_id: Some(1),
            file_id: fid(file),
            file_name: name.into(),
        });
    }

    pub fn close(&mut self, at: f64, file: u64) {
        let frame = self.next_frame();
        self.an.on_close(&CloseRecord {
            frame,
            ts: ts(at),
            conn: self.conn,
            session_id: self.session,
            file_id: fid(file),
        });
    }

    fn record(&mut self, at: f64, file: u64, direction: Direction, msg_id: u64) -> SqosRecord {
        let frame = self.next_frame();
        SqosRecord {
            frame,
            ts: ts(at),
            conn: self.conn,
            src: addr("10.0.0.2:50000"),
            dst: addr("10.0.0.1:445"),
            direction,
            msg_id,
            session_id: self.session,
            replay: self.replay && direction == Direction::Request,
            channel_sequence: (direction == Direction::Request).then_some(self.channel_sequence),
            tree_id: Some(1),
            async_id: None,
            file_id: Some(fid(file)),
            file_name: None,
            nt_status: None,
            interim: false,
            request_frame: None,
            response_frame: None,
            response_time: None,
            max_output_response: None,
            buffer: vec![0; 256],
            buffer_truncated: false,
            body: SqosBody::NoBuffer,
            first_frame: None,
            frame_copy: None,
        }
    }

    /// Send a request; returns (msg id, frame).
    pub fn request(&mut self, at: f64, file: u64, r: Request) -> (u64, u64) {
        self.msg += 1;
        let msg = self.msg;
        let mut rec = self.record(at, file, Direction::Request, msg);
        rec.max_output_response = Some(4096);
        rec.body = SqosBody::Request(dissection(r));
        let frame = rec.frame;
        self.an.on_sqos(rec);
        (msg, frame)
    }

    pub fn respond(
        &mut self,
        at: f64,
        file: u64,
        msg: (u64, u64),
        nt: u32,
        resp: Option<Response>,
    ) -> u64 {
        let mut rec = self.record(at, file, Direction::Response, msg.0);
        rec.nt_status = Some(nt);
        rec.request_frame = Some(msg.1);
        rec.body = match resp {
            Some(r) => SqosBody::Response(dissection(r)),
            None => SqosBody::NoBuffer,
        };
        let frame = rec.frame;
        self.an.on_sqos(rec);
        frame
    }

    /// Request at `at`, answer 1 ms later; returns the response frame.
    pub fn exchange(
        &mut self,
        at: f64,
        file: u64,
        r: Request,
        nt: u32,
        resp: Option<Response>,
    ) -> u64 {
        let m = self.request(at, file, r);
        self.respond(at + 0.001, file, m, nt, resp)
    }

    /// A READ of `bytes` issued at `at`, answered `rt` seconds later.
    pub fn io(&mut self, at: f64, file: u64, bytes: u32, rt: f64) {
        let request_frame = self.next_frame();
        let response_frame = self.next_frame();
        self.read(at, file, bytes, rt, request_frame, response_frame);
    }

    /// A READ whose response completed in `response_frame` (for records handed over late).
    pub fn io_at_frame(&mut self, at: f64, file: u64, bytes: u32, rt: f64, response_frame: u64) {
        let request_frame = response_frame.saturating_sub(1);
        self.read(at, file, bytes, rt, request_frame, response_frame);
    }

    fn read(&mut self, at: f64, file: u64, bytes: u32, rt: f64, request: u64, response: u64) {
        self.an.on_io(&IoRecord {
            request_frame: request,
            response_frame: response,
            request_ts: ts(at),
            response_ts: ts(at + rt),
            conn: self.conn,
            session_id: self.session,
            file_id: fid(file),
            kind: IoKind::Read,
            channel_sequence: self.channel_sequence,
            requested: bytes,
            transferred: bytes,
            nt_status: 0,
        });
    }

    /// The kit's session joins connection `conn` (client 10.0.<conn>.2, server 10.0.<conn>.1).
    pub fn join(&mut self, at: f64, conn: u32, joined: ChannelJoin) {
        self.channel(at, conn, ChannelEvent::Joined(joined));
    }

    /// The kit's session leaves connection `conn`: the server last spoke at `last_server`,
    /// `unanswered` requests were outstanding. Returns the frame.
    pub fn leave(
        &mut self,
        at: f64,
        conn: u32,
        by: ChannelEnd,
        last_server: Option<(u64, f64)>,
        unanswered: u64,
    ) -> u64 {
        self.channel(
            at,
            conn,
            ChannelEvent::Ended {
                by,
                last_server_frame: last_server.map(|l| l.0),
                last_server_ts: last_server.map(|l| ts(l.1)),
                unanswered,
            },
        )
    }

    /// One channel record of the kit's session on connection `conn`; returns its frame.
    fn channel(&mut self, at: f64, conn: u32, event: ChannelEvent) -> u64 {
        let frame = self.next_frame();
        self.an.on_channel(&ChannelRecord {
            frame,
            ts: ts(at),
            conn: ConnId(conn),
            client: addr(&format!("10.0.{conn}.2:5000{conn}")),
            server: addr(&format!("10.0.{conn}.1:445")),
            session_id: self.session,
            event,
        });
        frame
    }

    pub fn note(&mut self) {
        let frame = self.next_frame();
        self.an.on_note(&CaptureNote {
            frame,
            message: "gap".into(),
        });
    }

    pub fn finish(self) -> Analysis {
        self.an.finish()
    }
}

/// A well-behaved flow on open `file`: associate, set a policy with GET_STATUS, then every
/// `ttl` seconds a GET_STATUS|UPDATE_COUNTERS whose counters are exactly the I/O done since
/// the previous one (`iops` I/O per second of `bytes`, 2 ms each). The server answers
/// MaximumIoRate `max`, MinimumIoRate `min`, Ok. Returns the time of the last update.
pub struct Steady {
    pub file: u64,
    pub flow: Uuid,
    pub iops: u64,
    pub bytes: u32,
    pub max: u64,
    pub min: u64,
    pub ttl_ms: u32,
    pub updates: u32,
    pub status: Status,
    /// MaximumBandwidth the server answers (KB/s, 0 = none).
    pub max_bw: u64,
    /// The client reports this many times the I/O it did.
    pub reported_scale: f64,
    /// Seconds between status requests (default: the TimeToLive).
    pub poll_secs: Option<f64>,
    /// Time each I/O waited in the client before it was sent (100-ns units).
    pub queue_ticks: u64,
}

impl Default for Steady {
    fn default() -> Self {
        Steady {
            file: 1,
            flow: FLOW,
            iops: 100,
            bytes: 8192,
            max: 500,
            min: 50,
            ttl_ms: 2000,
            updates: 5,
            status: Status::OK,
            max_bw: 0,
            reported_scale: 1.0,
            poll_secs: None,
            queue_ticks: 0,
        }
    }
}

impl Steady {
    pub fn run(&self, kit: &mut Kit, start: f64) -> f64 {
        let f = self.file;
        kit.create(start, f, &format!("vms\\vm{f:02}\\disk0.vhdx"));
        kit.exchange(
            start + 0.01,
            f,
            req(Options::SET_LOGICAL_FLOW_ID, self.flow),
            SUCCESS,
            None,
        );
        let mut p = policy_req(self.flow, self.max, self.min, &format!("VM{f:02}"), "HV-01");
        p.options = Options::SET_POLICY | Options::GET_STATUS;
        let mut resp = status(self.flow, self.max, self.min, self.ttl_ms, self.status);
        resp.maximum_bandwidth = Some(self.max_bw);
        resp.policy_id = POLICY_NONE;
        kit.exchange(start + 0.02, f, p, SUCCESS, Some(resp.clone()));
        let ttl = self.poll_secs.unwrap_or(f64::from(self.ttl_ms) / 1000.0);
        let mut t = start + 0.1;
        // The first update opens the series (it carries nothing useful here).
        kit.exchange(
            t,
            f,
            counters_req(self.flow, 0, 0, 0, 0),
            SUCCESS,
            Some(resp.clone()),
        );
        for _ in 0..self.updates {
            let n = (self.iops as f64 * ttl).round() as u64;
            for k in 0..n {
                let at = t + (k as f64 + 0.5) * ttl / n as f64;
                kit.io(at, f, self.bytes, 0.002);
            }
            t += ttl;
            let norm = n * u64::from(self.bytes).div_ceil(8192);
            let kb = n * u64::from(self.bytes) / 1024;
            let scale = |v: u64| (v as f64 * self.reported_scale).round() as u64;
            let (n, norm, kb) = (scale(n), scale(norm), scale(kb));
            // 2 ms on the wire each (100-ns units), plus the client's queueing.
            let mut c = counters_req(self.flow, n, norm, n * (20_000 + self.queue_ticks), kb);
            c.lower_latency_increment = n * 20_000;
            kit.exchange(t, f, c, SUCCESS, Some(resp.clone()));
        }
        t
    }
}

pub fn flow(a: &Analysis, id: Uuid) -> &FlowState {
    match a.flows.iter().find(|f| f.id == id) {
        Some(f) => f,
        None => panic!("flow {id} not in the analysis"),
    }
}

pub fn codes(f: &FlowState) -> Vec<&'static str> {
    f.findings.iter().map(|x| x.code.as_str()).collect()
}

pub fn count(f: &FlowState, code: FlowFindingCode) -> u32 {
    f.finding_counts[code.index()]
}
