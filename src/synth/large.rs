//! `--scenario large`: the benchmark stream. One Hyper-V host, one VM disk, SMB 3.1.1 and SQOS
//! 1.1; after the setup, 64 KiB WRITEs and READs alternate (one outstanding) until `size` bytes
//! of data have been moved, in full 1448-byte segments, and every 500 I/Os (1,000 SMB2 messages)
//! the client sends GET_STATUS|UPDATE_COUNTERS with the exact counters of those I/Os. Built for
//! speed: data comes from the wire's shared filler, frames are built in reused buffers.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use uuid::Uuid;

use crate::sqos::{Dialect, Options, Request, Response, FSCTL_STORAGE_QOS_CONTROL};

use super::packet::Endpoint;
use super::rng::Rng;
use super::scenario::EPOCH_US;
use super::seal::Sealer;
use super::smb2::{self, FileId, Header};
use super::squeeze::Squeezer;
use super::truth::{self, FlowTotals, FlowTruth, MessageTruth, ResponseTruth, Truth, UpdateTruth};
use super::wire::{ConnSpec, NetConfig, Part, Side, Time, Wire};
use super::SynthSummary;
use crate::capture::writer::FileWriter;
use crate::smb2::crypto::Cipher;
use crate::sqos::{encode_request_with, encode_response, NamePlacement};

pub const IO_SIZE: u32 = 65_536;
/// I/Os between two status requests: 1,000 SMB2 messages.
pub const IOS_PER_UPDATE: u64 = 500;
const TTL_MS: u32 = 4000;
const LIMIT: u64 = 1_000_000;

struct Pending {
    tag: Option<u32>,
    resp_tag: Option<u32>,
    req: Request,
    sent: Time,
    resp: ResponseTruth,
    prev: Option<Time>,
    inc: [u64; 5],
}

pub fn generate<W: Write>(
    writer: FileWriter<W>,
    net: &NetConfig,
    size: u64,
    ipv6: bool,
    encrypt: Option<Cipher>,
    squeeze: Option<Squeezer>,
) -> io::Result<(W, SynthSummary, Truth)> {
    let mut wire = Wire::new(writer, net.clone(), Rng::new(0x1a76e));
    let (cip, sip) = if ipv6 {
        (
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0x5105, 0, 0, 0, 0, 0, 0x11)),
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0x5105, 0, 0, 0, 0, 0, 0x100)),
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 11)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 100)),
        )
    };
    let spec = ConnSpec {
        client: Endpoint {
            mac: [0x00, 0x15, 0x5d, 0x0a, 0x00, 0x11],
            ip: cip,
            port: 50_112,
        },
        server: Endpoint {
            mac: [0x00, 0x15, 0x5d, 0x0a, 0x00, 0x64],
            ip: sip,
            port: 445,
        },
        vlan: None,
        interface: 0,
    };
    let owd = net.one_way_us;
    let (conn, mut t) = wire.connect(spec, EPOCH_US);
    let session = 0x0000_4400_0000_0011u64;
    let fid = FileId {
        persistent: 0x0000_0800_0000_0001,
        volatile: 0x0000_0c00_0000_0041,
    };
    let flow_id = Uuid::from_u128(0x1a76_e000_0000_4000_8000_0000_0000_0001);
    let initiator = Uuid::from_u128(0x1a76_e000_0000_4000_8000_0000_0000_0002);
    let mut st = Stream {
        wire,
        conn,
        owd,
        mid: 0,
        session,
        sealer: encrypt.map(|c| Sealer::new(c, smb2::DIALECT_311, *b"sqos-large-bench")),
        squeeze,
    };
    let guid = *Uuid::from_u128(0x3d6a_2b11_7c44_4a0e_9e2f_0c1d_2e3f_4a5b).as_bytes();
    let salt = [0x42; 32];
    let d311 = smb2::DIALECT_311;
    let steps: Vec<(u16, Vec<u8>, u32, Vec<u8>)> = vec![
        (
            smb2::NEGOTIATE,
            smb2::negotiate_request(
                d311,
                &guid,
                &salt,
                if encrypt.is_some() {
                    smb2::CIPHERS_ALL
                } else {
                    smb2::CIPHERS_128
                },
            ),
            0,
            smb2::negotiate_response(
                d311,
                &guid,
                t,
                EPOCH_US - 86_400_000_000,
                &salt,
                encrypt.map_or(smb2::CIPHER_DEFAULT, Cipher::id),
            ),
        ),
        (
            smb2::SESSION_SETUP,
            smb2::session_setup_request(0),
            smb2::STATUS_MORE_PROCESSING_REQUIRED,
            smb2::session_setup_response(),
        ),
        (
            smb2::SESSION_SETUP,
            smb2::session_setup_request(0),
            0,
            smb2::session_setup_response(),
        ),
        (
            smb2::TREE_CONNECT,
            smb2::tree_connect_request("\\\\sofs\\vms"),
            0,
            smb2::tree_connect_response(),
        ),
        (
            smb2::CREATE,
            smb2::create_request("vm01\\disk0.vhdx"),
            0,
            smb2::create_response(&fid, t, 127 << 30),
        ),
    ];
    let mut steps = steps;
    if let (Some(z), Some(first)) = (squeeze, steps.first_mut()) {
        for (body, at) in [
            (&mut first.1, smb2::NEGOTIATE_REQUEST_CONTEXT_COUNT_AT),
            (&mut first.3, smb2::NEGOTIATE_RESPONSE_CONTEXT_COUNT_AT),
        ] {
            smb2::add_compression_context(body, at, &z.algorithm_ids(), z.chained);
        }
    }
    for (cmd, req, status, resp) in steps {
        let h = st.header(cmd, u16::from(cmd != smb2::NEGOTIATE));
        let (_, _, _, done) = st.exchange(t, h, (req, 0), status, (resp, 0))?;
        t = done + 40;
    }
    let mut updates: Vec<Pending> = Vec::new();
    let ids = (flow_id, initiator, fid);
    let (next, p) = status_exchange(
        &mut st,
        ids,
        t,
        Options::SET_LOGICAL_FLOW_ID | Options::SET_POLICY | Options::GET_STATUS,
        [0; 5],
        None,
    )?;
    updates.push(p);
    t = next;
    let mut moved = 0u64;
    let mut n = 0u64;
    let mut inc = [0u64; 5];
    let mut totals = FlowTotals::default();
    let mut last_update: Option<Time> = None;
    let norm = u64::from(IO_SIZE).div_ceil(8192);
    while moved < size {
        let write = n % 2 == 0;
        let offset = (n * u64::from(IO_SIZE)) % (100 << 30);
        let issue = t;
        let (cmd, req, resp) = if write {
            (
                smb2::WRITE,
                (smb2::write_request(&fid, offset, IO_SIZE), IO_SIZE as usize),
                (smb2::write_response(IO_SIZE), 0),
            )
        } else {
            (
                smb2::READ,
                (smb2::read_request(&fid, offset, IO_SIZE), 0),
                (smb2::read_response(IO_SIZE), IO_SIZE as usize),
            )
        };
        let h = st.header(cmd, 1);
        let (_, req_done, _, done) = st.exchange(issue, h, req, 0, resp)?;
        let lower = (done - req_done) * 10;
        let latency = (done - issue) * 10;
        inc[0] += 1;
        inc[1] += norm;
        inc[2] += latency;
        inc[3] += lower;
        inc[4] += u64::from(IO_SIZE);
        totals.io_count += 1;
        totals.normalized_io_count += norm;
        totals.latency_100ns += latency;
        totals.lower_latency_100ns += lower;
        if write {
            totals.bytes_written += u64::from(IO_SIZE);
        } else {
            totals.bytes_read += u64::from(IO_SIZE);
        }
        moved += u64::from(IO_SIZE);
        n += 1;
        t = done + 15;
        if n % IOS_PER_UPDATE == 0 || moved >= size {
            let prev = last_update.replace(t);
            let (next, p) = status_exchange(
                &mut st,
                ids,
                t,
                Options::GET_STATUS | Options::UPDATE_COUNTERS,
                inc,
                prev,
            )?;
            updates.push(p);
            inc = [0; 5];
            t = next;
        }
    }
    let keys = st.sealer.as_ref().and_then(Sealer::session_keys);
    let (w, traces, frames, bytes) = st.wire.finish()?;
    let tr = |tag: Option<u32>| tag.and_then(|t| traces.get(t as usize)).copied();
    let mut truth = Truth {
        interval_rule: truth::INTERVAL_RULE,
        latency_rule: truth::LATENCY_RULE,
        ..Truth::default()
    };
    truth.capture.frames = frames;
    truth.capture.file_bytes = bytes;
    truth.capture.start_time = truth::secs(EPOCH_US);
    truth.capture.duration_s = (t - EPOCH_US) as f64 / 1e6;
    let mut flow = FlowTruth {
        logical_flow_id: flow_id,
        initiator_id: initiator,
        initiator_name: "vm01".into(),
        initiator_node_name: "HV01.contoso.local".into(),
        host: "HV01.contoso.local".into(),
        dialect: Dialect::V1_1,
        file_names: vec!["\\\\sofs\\vms\\vm01\\disk0.vhdx".into()],
        channels: vec![format!(
            "{} → {}",
            std::net::SocketAddr::new(spec.client.ip, spec.client.port),
            std::net::SocketAddr::new(spec.server.ip, spec.server.port)
        )],
        obeys_limits: true,
        policies: Vec::new(),
        updates: Vec::new(),
        unreported_ios: 0,
        totals,
    };
    for p in &updates {
        let (q, r) = (tr(p.tag), tr(p.resp_tag));
        truth.totals.sqos_requests += 1;
        truth.messages.push(MessageTruth {
            host: "HV01.contoso.local".into(),
            logical_flow_id: Some(flow_id),
            file_name: Some("\\\\sofs\\vms\\vm01\\disk0.vhdx".into()),
            request_frame: q.and_then(|x| x.frame),
            request_time: truth::secs(q.map_or(p.sent, |x| x.ts)),
            replay_request_frames: Vec::new(),
            response_frame: r.and_then(|x| x.frame),
            response_time: r.map(|x| truth::secs(x.ts)),
            protocol_version: p.req.protocol_version.0,
            options: p.req.options.0,
            option_names: p.req.options.names(),
            max_output_response: 4096,
            nt_status: Some(0),
            nt_status_name: Some("STATUS_SUCCESS"),
            response: Some(p.resp.clone()),
            purpose: "benchmark status request".into(),
        });
        if p.req.options.contains(Options::UPDATE_COUNTERS) {
            truth.totals.updates += 1;
            flow.updates.push(UpdateTruth {
                request_frame: q.and_then(|x| x.frame),
                request_time: truth::secs(q.map_or(p.sent, |x| x.ts)),
                response_frame: r.and_then(|x| x.frame),
                nt_status: 0,
                previous_request_time: p.prev.map(truth::secs),
                maximum_io_rate_in_effect: LIMIT,
                io_count_increment: p.inc[0],
                normalized_io_count_increment: p.inc[1],
                latency_increment: p.inc[2],
                lower_latency_increment: p.inc[3],
                kilobyte_count_increment: Some(p.inc[4] / 1024),
                actual: truth::Increments {
                    io_count: p.inc[0],
                    normalized_io_count: p.inc[1],
                    latency: p.inc[2],
                    lower_latency: p.inc[3],
                    kilobyte_count: Some(p.inc[4] / 1024),
                },
                // Per-I/O records are left out so memory stays flat whatever the size.
                ios: Vec::new(),
            });
        }
    }
    truth.totals.ios = flow.totals.io_count;
    truth.totals.writes = flow.totals.bytes_written / u64::from(IO_SIZE);
    truth.totals.reads = flow.totals.bytes_read / u64::from(IO_SIZE);
    truth.totals.bytes_read = flow.totals.bytes_read;
    truth.totals.bytes_written = flow.totals.bytes_written;
    truth.flows.push(flow);
    let summary = SynthSummary {
        frames,
        capture_bytes: bytes,
        duration_s: truth.capture.duration_s,
        flows: 1,
        sqos_requests: truth.totals.sqos_requests,
        ios: truth.totals.ios,
        io_bytes: moved,
        keys: keys.into_iter().collect(),
        ..SynthSummary::default()
    };
    Ok((w, summary, truth))
}

/// The one connection of the benchmark and its SMB2 state.
struct Stream<W: Write> {
    wire: Wire<W>,
    conn: u32,
    owd: u64,
    mid: u64,
    session: u64,
    sealer: Option<Sealer>,
    /// `--compress`: messages after SESSION_SETUP compressed (before sealing).
    squeeze: Option<Squeezer>,
}

impl<W: Write> Stream<W> {
    fn header(&mut self, cmd: u16, charge: u16) -> Header {
        let h = Header {
            command: cmd,
            message_id: self.mid,
            credit_charge: charge,
            credits: charge.max(1),
            tree_id: if matches!(
                cmd,
                smb2::NEGOTIATE | smb2::SESSION_SETUP | smb2::TREE_CONNECT
            ) {
                0
            } else {
                1
            },
            session_id: if cmd == smb2::NEGOTIATE {
                0
            } else {
                self.session
            },
            ..Header::default()
        };
        self.mid += u64::from(charge.max(1));
        h
    }

    /// A message as it goes on the wire: compressed when compression is on, then sealed once
    /// the session is encrypted.
    fn sealed(&mut self, from_client: bool, parts: Vec<Part>) -> Vec<Part> {
        let parts = match &self.squeeze {
            Some(z) => z.outgoing(parts, self.wire.filler()),
            None => parts,
        };
        match self.sealer.as_mut() {
            Some(s) => s.outgoing(from_client, parts, self.wire.filler()),
            None => parts,
        }
    }

    /// Request → response with one outstanding: (request tag, request's last frame time,
    /// response tag, time the client has the response). Bodies come with their filler length.
    fn exchange(
        &mut self,
        t: Time,
        h: Header,
        req: (Vec<u8>, usize),
        status: u32,
        resp: (Vec<u8>, usize),
    ) -> io::Result<(u32, Time, u32, Time)> {
        self.wire.flush_before(t)?;
        let msg = self.sealed(true, smb2::message(&h, &req.0, req.1));
        let d = self.wire.send(self.conn, Side::Client, t, vec![msg]);
        let (qtag, qat) = d.first().map_or((0, t), |d| (d.tag, d.at));
        // The server names the new tree in the TREE_CONNECT response's header.
        let rh = Header {
            status,
            response: true,
            tree_id: if h.command == smb2::TREE_CONNECT {
                1
            } else {
                h.tree_id
            },
            ..h
        };
        let server_t = qat + 90 + (resp.1 + req.1) as u64 / 2500;
        self.wire.flush_before(qat)?;
        let msg = self.sealed(false, smb2::message(&rh, &resp.0, resp.1));
        let r = self.wire.send(self.conn, Side::Server, server_t, vec![msg]);
        let (rtag, rat) = r.first().map_or((0, server_t), |d| (d.tag, d.at));
        Ok((qtag, qat.saturating_sub(self.owd), rtag, rat))
    }
}

/// One status request (with the counters `inc`: count, normalized, latency, lower latency,
/// bytes) and the server's answer.
fn status_exchange<W: Write>(
    st: &mut Stream<W>,
    ids: (Uuid, Uuid, FileId),
    t: Time,
    opts: Options,
    inc: [u64; 5],
    prev: Option<Time>,
) -> io::Result<(Time, Pending)> {
    let (flow_id, initiator, fid) = ids;
    let mut r = Request::new(Dialect::V1_1);
    if opts.contains(Options::SET_POLICY) {
        r = r.with_names("vm01", "HV01.contoso.local");
        r.limit = LIMIT;
    }
    r.options = opts;
    r.logical_flow_id = flow_id;
    r.initiator_id = initiator;
    r.io_count_increment = inc[0];
    r.normalized_io_count_increment = inc[1];
    r.latency_increment = inc[2];
    r.lower_latency_increment = inc[3];
    if let Some(v) = r.v1_1.as_mut() {
        v.kilobyte_count_increment = inc[4] / 1024;
    }
    let mut resp = Response::new(Dialect::V1_1);
    resp.logical_flow_id = flow_id;
    resp.initiator_id = initiator;
    resp.time_to_live = TTL_MS;
    resp.maximum_io_rate = LIMIT;
    let out = encode_response(&resp);
    let h = st.header(smb2::IOCTL, 1);
    let (qtag, _, rtag, done) = st.exchange(
        t,
        h,
        (
            smb2::ioctl_request(
                FSCTL_STORAGE_QOS_CONTROL,
                &fid,
                &encode_request_with(&r, NamePlacement::AfterFixedPart),
                4096,
            ),
            0,
        ),
        0,
        (
            smb2::ioctl_response(FSCTL_STORAGE_QOS_CONTROL, &fid, &out),
            0,
        ),
    )?;
    let p = Pending {
        tag: Some(qtag),
        resp_tag: Some(rtag),
        req: r,
        sent: t,
        resp: ResponseTruth {
            status: 0,
            time_to_live: TTL_MS,
            maximum_io_rate: LIMIT,
            minimum_io_rate: 0,
            maximum_bandwidth: Some(0),
            base_io_size: 8192,
        },
        prev,
        inc,
    };
    Ok((done + 30, p))
}
