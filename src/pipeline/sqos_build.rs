//! SQOS records out of FSCTL_STORAGE_QOS_CONTROL IOCTL parts: locate the buffer by the IOCTL's
//! offsets, run the codec, attach its findings.

use super::{Direction, SqosBody, SqosRecord};
use crate::capture::Timestamp;
use crate::net::ConnId;
use crate::smb2::body::{IoctlRequest, IoctlResponse, Located};
use crate::smb2::{FileId, Header, NtStatus, Part};
use crate::sqos;
use std::sync::Arc;

/// Where and when a message was seen.
#[derive(Clone, Copy, Debug)]
pub struct MsgCtx {
    pub conn: ConnId,
    pub frame: u64,
    /// The frame the message began in, when message starts are tracked.
    pub first_frame: Option<u64>,
    pub ts: Timestamp,
    pub src: std::net::SocketAddr,
    pub dst: std::net::SocketAddr,
}

fn base(
    ctx: &MsgCtx,
    h: &Header,
    direction: Direction,
    file: (Option<FileId>, Option<Arc<str>>),
) -> SqosRecord {
    SqosRecord {
        frame: ctx.frame,
        ts: ctx.ts,
        conn: ctx.conn,
        src: ctx.src,
        dst: ctx.dst,
        direction,
        msg_id: h.message_id,
        session_id: h.session_id,
        replay: h.flags.is_replay(),
        channel_sequence: (direction == Direction::Request).then(|| h.channel_sequence()),
        tree_id: h.tree_id(),
        async_id: h.async_id(),
        file_id: file.0,
        file_name: file.1.map(|n| n.to_string()),
        nt_status: None,
        interim: false,
        request_frame: None,
        response_frame: None,
        response_time: None,
        max_output_response: None,
        buffer: Vec::new(),
        buffer_truncated: false,
        body: SqosBody::NoBuffer,
        first_frame: ctx.first_frame,
        frame_copy: None,
    }
}

fn take_buffer(rec: &mut SqosRecord, loc: Located<'_>, part: &Part) {
    rec.buffer = loc.bytes.to_vec();
    rec.buffer_truncated =
        loc.is_truncated() || (part.cut && loc.bytes.is_empty() && loc.missing > 0);
}

/// The record of an SQOS IOCTL request: its input buffer decoded as STORAGE_QOS_CONTROL_REQUEST.
pub fn request_record(
    ctx: &MsgCtx,
    part: &Part,
    req: &IoctlRequest,
    file: (Option<FileId>, Option<Arc<str>>),
) -> SqosRecord {
    let mut rec = base(ctx, &part.header, Direction::Request, file);
    take_buffer(&mut rec, req.input(&part.bytes), part);
    rec.max_output_response = Some(req.max_output_response);
    rec.body = SqosBody::Request(decode_request(&rec.buffer, req.max_output_response));
    rec
}

/// An IOCTL's input buffer decoded as STORAGE_QOS_CONTROL_REQUEST, with the check of the
/// IOCTL's MaxOutputResponse against what the request asks for.
pub fn decode_request(buffer: &[u8], max_output_response: u32) -> sqos::Dissection<sqos::Request> {
    let mut d = sqos::parse_request(buffer);
    if let Some(m) = &d.message {
        let extra = sqos::check_max_output(m, max_output_response);
        d.findings.extend(extra);
    }
    d
}

/// An IOCTL's output buffer decoded as STORAGE_QOS_CONTROL_RESPONSE, cross-checked against the
/// matched request's decoded message when there is one.
pub fn decode_response(
    buffer: &[u8],
    request: Option<&sqos::Request>,
) -> sqos::Dissection<sqos::Response> {
    let mut d = sqos::parse_response(buffer);
    if let (Some(q), Some(m)) = (request, &d.message) {
        let extra = sqos::check_response_against_request(q, m);
        d.findings.extend(extra);
    }
    d
}

/// Which decoded body a record has: what [`decode_alone`] makes again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BodyKind {
    Request,
    Response,
    NoBuffer,
}

impl SqosBody {
    pub(super) fn kind(&self) -> BodyKind {
        match self {
            SqosBody::Request(_) => BodyKind::Request,
            SqosBody::Response(_) => BodyKind::Response,
            SqosBody::NoBuffer => BodyKind::NoBuffer,
        }
    }
}

/// The body of `kind` that decoding `buffer` alone gives: a record's body as it was decoded
/// but for the findings the checks against the IOCTL and the matched request appended (the
/// message, the field list and the decoder's findings are the buffer's alone). What a record
/// kept without its decoded body gets back.
pub(super) fn decode_alone(kind: BodyKind, buffer: &[u8]) -> SqosBody {
    match kind {
        BodyKind::Request => SqosBody::Request(sqos::parse_request(buffer)),
        BodyKind::Response => SqosBody::Response(sqos::parse_response(buffer)),
        BodyKind::NoBuffer => SqosBody::NoBuffer,
    }
}

/// Statuses with which an IOCTL response still carries its output buffer.
fn has_output(status: NtStatus) -> bool {
    status == NtStatus::SUCCESS || status == NtStatus::BUFFER_OVERFLOW
}

/// The record of an SQOS IOCTL response (final or interim). `resp` is `None` for an ERROR
/// response body. `request` is the matched request's decoded message, for the cross-checks.
pub fn response_record(
    ctx: &MsgCtx,
    part: &Part,
    resp: Option<&IoctlResponse>,
    file: (Option<FileId>, Option<Arc<str>>),
    request: Option<&sqos::Request>,
) -> SqosRecord {
    let h = &part.header;
    let mut rec = base(ctx, h, Direction::Response, file);
    rec.nt_status = Some(h.status.0);
    rec.interim = h.is_interim();
    if let Some(resp) = resp.filter(|r| r.output_count > 0 && has_output(h.status)) {
        take_buffer(&mut rec, resp.output(&part.bytes), part);
        rec.body = SqosBody::Response(decode_response(&rec.buffer, request));
    }
    rec
}
