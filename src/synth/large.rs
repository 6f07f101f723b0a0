//! `--scenario large`: the benchmark stream. One Hyper-V host, one VM disk, SMB 3.1.1 and SQOS
//! 1.1; after the setup, 64 KiB WRITEs and READs alternate (one outstanding) until `size` bytes
//! of data have been moved, in full 1448-byte segments, and every 500 I/Os (1,000 SMB2 messages)
//! the client sends GET_STATUS|UPDATE_COUNTERS with the exact counters of those I/Os. Built for
//! speed: data comes from the wire's shared filler, frames are built in reused buffers.

use std::io::{self, Write};

use uuid::Uuid;

use crate::sqos::{Dialect, Options, Request, Response, FSCTL_STORAGE_QOS_CONTROL};

use super::rng::Rng;
use super::scenario::EPOCH_US;
use super::session::{Pace, Session, Setup, FILE_ID};
use super::smb2::{self, FileId};
use super::squeeze::Squeezer;
use super::truth::{self, FlowTotals, FlowTruth, MessageTruth, ResponseTruth, Truth, UpdateTruth};
use super::wire::{NetConfig, Time, Wire};
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
    let wire = Wire::new(writer, net.clone(), Rng::new(0x1a76e));
    let setup = Setup {
        ipv6,
        client_port: 50_112,
        smb_dialect: smb2::DIALECT_311,
        salt: [0x42; 32],
        encrypt: encrypt.map(|c| (c, *b"sqos-large-bench")),
        squeeze,
        file: "vm01\\disk0.vhdx",
        file_size: 127 << 30,
        pace: Pace {
            server_us: 90,
            next_us: 40,
        },
    };
    let (mut st, mut t) = Session::open(wire, &setup)?;
    let fid = FILE_ID;
    let flow_id = Uuid::from_u128(0x1a76_e000_0000_4000_8000_0000_0000_0001);
    let initiator = Uuid::from_u128(0x1a76_e000_0000_4000_8000_0000_0000_0002);
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
        let x = st.exchange(issue, h, req, 0, resp)?;
        let (req_done, done) = (x.request_done, x.done);
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
    let keys = st.keys();
    let channel = st.channel_label();
    let (w, traces, frames, bytes) = st.wire.finish()?;
    let tr = |tag: Option<u32>| tag.and_then(|t| traces.get(t as usize)).copied();
    let mut truth = Truth::of_session_capture(frames, bytes);
    truth.capture.duration_s = (t - EPOCH_US) as f64 / 1e6;
    let mut flow = FlowTruth {
        logical_flow_id: flow_id,
        initiator_id: initiator,
        initiator_name: "vm01".into(),
        initiator_node_name: "HV01.contoso.local".into(),
        host: "HV01.contoso.local".into(),
        dialect: Dialect::V1_1,
        file_names: vec!["\\\\sofs\\vms\\vm01\\disk0.vhdx".into()],
        channels: vec![channel],
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

/// One status request (with the counters `inc`: count, normalized, latency, lower latency,
/// bytes) and the server's answer.
fn status_exchange<W: Write>(
    st: &mut Session<W>,
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
    let x = st.exchange(
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
        tag: Some(x.request),
        resp_tag: Some(x.response),
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
    Ok((x.done + 30, p))
}
