//! One held record in bytes: its fields one after another, those it lacks left out, its
//! decoded body left to the buffer.

use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::Arc;

use uuid::Uuid;

use super::bytes::{narrow, put, put_bytes, Reader, MAX_NUMBER};
use crate::capture::{FrameCopy, Timestamp};
use crate::net::ConnId;
use crate::pipeline::sqos_build::{decode_alone, BodyKind};
use crate::pipeline::{Direction, SqosBody, SqosRecord};
use crate::smb2::FileId;
use crate::sqos::{Dissection, Finding};

/// What the records keep out of their bytes, in the order they came: frame copies (shared by
/// the messages of a frame), the findings the checks after decoding appended, and the bodies
/// their buffer does not give again.
#[derive(Default)]
pub(super) struct Aside {
    pub frames: Vec<Arc<FrameCopy>>,
    pub findings: Vec<Finding>,
    pub bodies: Vec<SqosBody>,
}

/// [`Aside`] being taken back, record after record.
pub(super) struct Taken {
    frames: std::vec::IntoIter<Arc<FrameCopy>>,
    findings: std::vec::IntoIter<Finding>,
    bodies: std::vec::IntoIter<SqosBody>,
}

impl From<Aside> for Taken {
    fn from(a: Aside) -> Taken {
        Taken {
            frames: a.frames.into_iter(),
            findings: a.findings.into_iter(),
            bodies: a.bodies.into_iter(),
        }
    }
}

// The record's flags, and which of its optional parts it has: a bit each.
const REQUEST: u64 = 1;
const REPLAY: u64 = 1 << 1;
const INTERIM: u64 = 1 << 2;
const TRUNCATED: u64 = 1 << 3;
const SRC_V6: u64 = 1 << 4;
const DST_V6: u64 = 1 << 5;
const BODY_REQUEST: u64 = 1 << 6;
const BODY_RESPONSE: u64 = 1 << 7;
/// The body is aside (the buffer does not give it again).
const WHOLE: u64 = 1 << 8;
const CHANNEL_SEQUENCE: u64 = 1 << 9;
const TREE_ID: u64 = 1 << 10;
const ASYNC_ID: u64 = 1 << 11;
const NT_STATUS: u64 = 1 << 12;
const REQUEST_FRAME: u64 = 1 << 13;
const RESPONSE_FRAME: u64 = 1 << 14;
const RESPONSE_TIME: u64 = 1 << 15;
const MAX_OUTPUT: u64 = 1 << 16;
const FIRST_FRAME: u64 = 1 << 17;
const FILE_ID: u64 = 1 << 18;
const FILE_NAME: u64 = 1 << 19;
const FLOW: u64 = 1 << 20;
const FRAME_COPY: u64 = 1 << 21;

/// The most bytes [`put_record`] writes besides the buffer and the name: 20 numbers (the
/// flags, 16 fields, two lengths and the count of appended findings), two IPv6 addresses
/// and the flow.
pub(super) const MAX_FIXED: usize = 20 * MAX_NUMBER + 2 * (16 + 3 * MAX_NUMBER) + 16;

/// The optional numbers, each with its bit, in the order they are written ([`take_record`]
/// reads them in this order).
fn optional_numbers(rec: &SqosRecord) -> [(u64, Option<u64>); 9] {
    [
        (CHANNEL_SEQUENCE, rec.channel_sequence.map(u64::from)),
        (TREE_ID, rec.tree_id.map(u64::from)),
        (ASYNC_ID, rec.async_id),
        (NT_STATUS, rec.nt_status.map(u64::from)),
        (REQUEST_FRAME, rec.request_frame),
        (RESPONSE_FRAME, rec.response_frame),
        (RESPONSE_TIME, rec.response_time.map(f64::to_bits)),
        (MAX_OUTPUT, rec.max_output_response.map(u64::from)),
        (FIRST_FRAME, rec.first_frame),
    ]
}

/// The findings `body` has past those decoding `buffer` alone gives, taken from it, where it is
/// what decoding alone gives but for them (the checks' findings, appended); else None (a body
/// the decoder did not make of that buffer alone, to be held whole).
fn appended(body: &mut SqosBody, buffer: &[u8]) -> Option<Vec<Finding>> {
    let again = decode_alone(body.kind(), buffer);
    match (body, again) {
        (SqosBody::Request(d), SqosBody::Request(alone)) => past(d, &alone),
        (SqosBody::Response(d), SqosBody::Response(alone)) => past(d, &alone),
        (SqosBody::NoBuffer, SqosBody::NoBuffer) => Some(Vec::new()),
        _ => None,
    }
}

fn past<T: PartialEq>(d: &mut Dissection<T>, alone: &Dissection<T>) -> Option<Vec<Finding>> {
    let same = d.message == alone.message
        && d.fields == alone.fields
        && d.error == alone.error
        && d.findings.starts_with(&alone.findings);
    same.then(|| d.findings.split_off(alone.findings.len()))
}

/// Writes `rec`, filed under `flow`, to `out` (at most [`MAX_FIXED`] bytes beyond its buffer
/// and name) and what bytes do not hold to `aside`; returns what the part aside costs.
pub(super) fn put_record(
    rec: SqosRecord,
    flow: Option<Uuid>,
    out: &mut Vec<u8>,
    aside: &mut Aside,
) -> usize {
    let numbers = optional_numbers(&rec);
    let kind = rec.body.kind();
    let mut body = rec.body;
    let appended = appended(&mut body, &rec.buffer);
    let mut bits = 0;
    let mut flag = |bit: u64, on: bool| {
        if on {
            bits |= bit;
        }
    };
    flag(REQUEST, rec.direction == Direction::Request);
    flag(REPLAY, rec.replay);
    flag(INTERIM, rec.interim);
    flag(TRUNCATED, rec.buffer_truncated);
    flag(SRC_V6, rec.src.is_ipv6());
    flag(DST_V6, rec.dst.is_ipv6());
    flag(BODY_REQUEST, kind == BodyKind::Request);
    flag(BODY_RESPONSE, kind == BodyKind::Response);
    flag(WHOLE, appended.is_none());
    for (bit, v) in numbers {
        flag(bit, v.is_some());
    }
    flag(FILE_ID, rec.file_id.is_some());
    flag(FILE_NAME, rec.file_name.is_some());
    flag(FLOW, flow.is_some());
    flag(FRAME_COPY, rec.frame_copy.is_some());

    put(out, bits);
    put(out, rec.frame);
    put(out, rec.ts.0 as u64);
    put(out, u64::from(rec.conn.0));
    put(out, rec.msg_id);
    put(out, rec.session_id);
    put_addr(out, rec.src);
    put_addr(out, rec.dst);
    for v in numbers.into_iter().filter_map(|(_, v)| v) {
        put(out, v);
    }
    if let Some(id) = rec.file_id {
        put(out, id.persistent);
        put(out, id.volatile);
    }
    if let Some(name) = &rec.file_name {
        put_bytes(out, name.as_bytes());
    }
    put_bytes(out, &rec.buffer);
    if let Some(flow) = flow {
        out.extend_from_slice(flow.as_bytes());
    }

    let mut cost = 0;
    match appended {
        Some(appended) => {
            put(out, appended.len() as u64);
            cost += appended
                .iter()
                .map(|f| size_of::<Finding>() + f.message.len())
                .sum::<usize>();
            aside.findings.extend(appended);
        }
        None => {
            cost += size_of::<SqosBody>() + body.heap_bytes();
            aside.bodies.push(body);
        }
    }
    if let Some(frame) = rec.frame_copy {
        // Counted for each message it completes, on the safe side, as `held_bytes` does.
        cost += size_of::<Arc<FrameCopy>>() + frame.data.len();
        aside.frames.push(frame);
    }
    cost
}

fn put_addr(out: &mut Vec<u8>, addr: SocketAddr) {
    match addr {
        SocketAddr::V4(a) => {
            out.extend_from_slice(&a.ip().octets());
            put(out, u64::from(a.port()));
        }
        SocketAddr::V6(a) => {
            out.extend_from_slice(&a.ip().octets());
            put(out, u64::from(a.port()));
            put(out, u64::from(a.flowinfo()));
            put(out, u64::from(a.scope_id()));
        }
    }
}

fn take_addr(r: &mut Reader<'_>, v6: bool) -> SocketAddr {
    if v6 {
        let ip = Ipv6Addr::from(r.array::<16>());
        let port = r.narrow();
        let flowinfo = r.narrow();
        let scope_id = r.narrow();
        SocketAddr::V6(SocketAddrV6::new(ip, port, flowinfo, scope_id))
    } else {
        let ip = Ipv4Addr::from(r.array::<4>());
        SocketAddr::V4(SocketAddrV4::new(ip, r.narrow()))
    }
}

/// The record [`put_record`] wrote where `r` reads, with its flow, its body decoded again.
pub(super) fn take_record(r: &mut Reader<'_>, aside: &mut Taken) -> (SqosRecord, Option<Uuid>) {
    let bits = r.number();
    let has = |bit: u64| bits & bit != 0;
    let frame = r.number();
    let ts = Timestamp(r.number() as i64);
    let conn = ConnId(r.narrow());
    let msg_id = r.number();
    let session_id = r.number();
    let src = take_addr(r, has(SRC_V6));
    let dst = take_addr(r, has(DST_V6));
    // In the order of `optional_numbers`.
    let mut optional = |bit: u64| has(bit).then(|| r.number());
    let channel_sequence = optional(CHANNEL_SEQUENCE).map(narrow);
    let tree_id = optional(TREE_ID).map(narrow);
    let async_id = optional(ASYNC_ID);
    let nt_status = optional(NT_STATUS).map(narrow);
    let request_frame = optional(REQUEST_FRAME);
    let response_frame = optional(RESPONSE_FRAME);
    let response_time = optional(RESPONSE_TIME).map(f64::from_bits);
    let max_output_response = optional(MAX_OUTPUT).map(narrow);
    let first_frame = optional(FIRST_FRAME);
    let file_id = has(FILE_ID).then(|| FileId {
        persistent: r.number(),
        volatile: r.number(),
    });
    let file_name = has(FILE_NAME).then(|| String::from_utf8_lossy(r.bytes()).into_owned());
    let buffer = r.bytes().to_vec();
    let flow = has(FLOW).then(|| Uuid::from_bytes(r.array()));

    let body = if has(WHOLE) {
        aside.bodies.next().unwrap_or(SqosBody::NoBuffer)
    } else {
        let kind = match (has(BODY_REQUEST), has(BODY_RESPONSE)) {
            (true, _) => BodyKind::Request,
            (false, true) => BodyKind::Response,
            (false, false) => BodyKind::NoBuffer,
        };
        let appended = aside.findings.by_ref().take(r.narrow());
        let mut body = decode_alone(kind, &buffer);
        match &mut body {
            SqosBody::Request(d) => d.findings.extend(appended),
            SqosBody::Response(d) => d.findings.extend(appended),
            SqosBody::NoBuffer => {}
        }
        body
    };
    let frame_copy = if has(FRAME_COPY) {
        aside.frames.next()
    } else {
        None
    };
    let rec = SqosRecord {
        frame,
        ts,
        conn,
        src,
        dst,
        direction: match has(REQUEST) {
            true => Direction::Request,
            false => Direction::Response,
        },
        msg_id,
        session_id,
        replay: has(REPLAY),
        channel_sequence,
        tree_id,
        async_id,
        file_id,
        file_name,
        nt_status,
        interim: has(INTERIM),
        request_frame,
        response_frame,
        response_time,
        max_output_response,
        buffer,
        buffer_truncated: has(TRUNCATED),
        body,
        first_frame,
        frame_copy,
    };
    (rec, flow)
}
