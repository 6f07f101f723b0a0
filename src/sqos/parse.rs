//! Parsers: bytes → typed request / response, with every field's place in the buffer and the
//! findings about the message. Pure functions; they never panic and never read out of bounds.
//!
//! The dialect comes from ProtocolVersion: 0x0100 → 1.0, 0x0101 → 1.1. An unknown version is
//! decoded with the 1.0 layout (the prefix both dialects share) and reported.

use serde::Serialize;
use thiserror::Error;

use super::field::Field;
use super::findings::{Finding, FindingCode};
use super::layout::{request, response};
use super::names::{self, NameRef};
use super::reader::FieldReader;
use super::rules;
use super::{Dialect, ProtocolVersion, Request, RequestV11, Response};

#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize)]
pub enum DecodeError {
    #[error("buffer of {len} bytes is shorter than the {needed}-byte fixed part")]
    Short { len: usize, needed: usize },
}

/// What the decoder made of one buffer: the message when the fixed part was complete, every
/// field it could read (also for short buffers), the findings and the error that stopped it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Dissection<T> {
    pub message: Option<T>,
    pub fields: Vec<Field>,
    pub findings: Vec<Finding>,
    pub error: Option<DecodeError>,
}

impl<T> Dissection<T> {
    /// Heap bytes of its field list and findings (their sentences included): most of what
    /// holding a decoded message costs beyond its struct. The message's own names are not
    /// counted (a few dozen bytes).
    pub fn heap_bytes(&self) -> usize {
        self.fields.capacity() * std::mem::size_of::<Field>()
            + self.findings.capacity() * std::mem::size_of::<Finding>()
            + self.findings.iter().map(|f| f.message.len()).sum::<usize>()
    }

    /// The first finding with this code.
    pub fn finding(&self, code: FindingCode) -> Option<&Finding> {
        self.findings.iter().find(|f| f.code == code)
    }

    /// The first field with this spec name (e.g. "BaseIoSize").
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

fn dialect_label(d: Option<Dialect>) -> String {
    match d {
        Some(d) => format!("dialect {d}"),
        None => "unknown-version (read as 1.0)".to_string(),
    }
}

/// What a buffer shorter than its fixed part gives: every field read before it ended, the
/// short-buffer finding first, and the error.
fn short<T>(
    r: FieldReader<'_>,
    mut findings: Vec<Finding>,
    (len, needed): (usize, usize),
    what: &str,
    d: Option<Dialect>,
) -> Dissection<T> {
    let finding = Finding::new(
        FindingCode::ShortBuffer,
        format!(
            "buffer of {len} bytes is shorter than the {needed}-byte fixed part of a {} {what}",
            dialect_label(d)
        ),
    );
    findings.insert(0, finding);
    Dissection {
        message: None,
        fields: r.into_fields(),
        findings,
        error: Some(DecodeError::Short { len, needed }),
    }
}

fn trailing(len: usize, end: usize, what: &str) -> Option<Finding> {
    (len > end).then(|| {
        Finding::new(
            FindingCode::TrailingBytes,
            format!(
                "{} bytes after the end of the {what} at offset {end}",
                len - end
            ),
        )
    })
}

/// The fixed part of a request, read field by field; `None` when the buffer ends first.
fn request_fixed(r: &mut FieldReader<'_>, pv: ProtocolVersion) -> Option<Request> {
    let reserved = r.get(request::RESERVED)?;
    let options = r.get(request::OPTIONS)?;
    let logical_flow_id = r.get(request::LOGICAL_FLOW_ID)?;
    let policy_id = r.get(request::POLICY_ID)?;
    let initiator_id = r.get(request::INITIATOR_ID)?;
    let limit = r.get(request::LIMIT)?;
    let reservation = r.get(request::RESERVATION)?;
    let initiator_name_offset = r.get(request::INITIATOR_NAME_OFFSET)?;
    let initiator_name_length = r.get(request::INITIATOR_NAME_LENGTH)?;
    let initiator_node_name_offset = r.get(request::INITIATOR_NODE_NAME_OFFSET)?;
    let initiator_node_name_length = r.get(request::INITIATOR_NODE_NAME_LENGTH)?;
    let io_count_increment = r.get(request::IO_COUNT_INCREMENT)?;
    let normalized_io_count_increment = r.get(request::NORMALIZED_IO_COUNT_INCREMENT)?;
    let latency_increment = r.get(request::LATENCY_INCREMENT)?;
    let lower_latency_increment = r.get(request::LOWER_LATENCY_INCREMENT)?;
    let v1_1 = match pv.dialect() {
        Some(Dialect::V1_1) => Some(RequestV11 {
            bandwidth_limit: r.get(request::BANDWIDTH_LIMIT)?,
            kilobyte_count_increment: r.get(request::KILOBYTE_COUNT_INCREMENT)?,
        }),
        _ => None,
    };
    Some(Request {
        protocol_version: pv,
        reserved,
        options,
        logical_flow_id,
        policy_id,
        initiator_id,
        limit,
        reservation,
        initiator_name_offset,
        initiator_name_length,
        initiator_node_name_offset,
        initiator_node_name_length,
        io_count_increment,
        normalized_io_count_increment,
        latency_increment,
        lower_latency_increment,
        v1_1,
        initiator_name: None,
        initiator_node_name: None,
    })
}

/// Decodes a STORAGE_QOS_CONTROL_REQUEST (the IOCTL's input buffer).
pub fn parse_request(buf: &[u8]) -> Dissection<Request> {
    let mut r = FieldReader::new(buf);
    let mut findings = Vec::new();
    let pv = r.get(request::PROTOCOL_VERSION);
    let dialect = pv.and_then(ProtocolVersion::dialect);
    let fixed_len = dialect.unwrap_or(Dialect::V1_0).request_fixed_len();
    if let Some(v) = pv.filter(|v| v.dialect().is_none()) {
        findings.push(rules::unknown_request_version(v.0));
    }
    let Some(mut req) = pv.and_then(|pv| request_fixed(&mut r, pv)) else {
        return short(r, findings, (buf.len(), fixed_len), "request", dialect);
    };
    findings.extend(rules::check_request(&req));

    let declared = [
        NameRef {
            label: request::INITIATOR_NAME.name,
            offset: req.initiator_name_offset,
            length: req.initiator_name_length,
        },
        NameRef {
            label: request::INITIATOR_NODE_NAME.name,
            offset: req.initiator_node_name_offset,
            length: req.initiator_node_name_length,
        },
    ];
    let mut name_fields = Vec::new();
    let [name, node] =
        declared.map(|n| names::read_name(buf, fixed_len, n, &mut name_fields, &mut findings));
    // The name fields follow the fixed fields, in buffer order.
    name_fields.sort_by_key(|f| f.offset);
    for f in name_fields {
        r.record(f);
    }

    let mut end = fixed_len;
    for range in [&name.range, &node.range].into_iter().flatten() {
        end = end.max(range.end);
    }
    req.initiator_name = name.text;
    req.initiator_node_name = node.text;

    let in_fixed_part = declared
        .iter()
        .any(|n| n.length > 0 && usize::from(n.offset) < fixed_len);
    let packed = if in_fixed_part {
        names::packed_after_fixed_part(buf, fixed_len, &declared)
    } else {
        None
    };
    match packed {
        Some(alt) => {
            let alt_text: Vec<String> = alt
                .iter()
                .map(|(label, at, s)| format!("{label} {s:?} at offset {at}"))
                .collect();
            findings.push(Finding::new(
                FindingCode::NameLayoutSpecExample,
                format!(
                    "the name offsets point inside the {fixed_len}-byte fixed part, like the \
                     spec's section 4.2 example (offsets 104/118); read right after the fixed \
                     part, the bytes give {}",
                    alt_text.join(" and ")
                ),
            ));
        }
        None => findings.extend(trailing(buf.len(), end, "request")),
    }

    Dissection {
        message: Some(req),
        fields: r.into_fields(),
        findings,
        error: None,
    }
}

fn response_fixed(r: &mut FieldReader<'_>, pv: ProtocolVersion) -> Option<Response> {
    let reserved = r.get(response::RESERVED)?;
    let options = r.get(response::OPTIONS)?;
    let logical_flow_id = r.get(response::LOGICAL_FLOW_ID)?;
    let policy_id = r.get(response::POLICY_ID)?;
    let initiator_id = r.get(response::INITIATOR_ID)?;
    let time_to_live = r.get(response::TIME_TO_LIVE)?;
    let status = r.get(response::STATUS)?;
    let maximum_io_rate = r.get(response::MAXIMUM_IO_RATE)?;
    let minimum_io_rate = r.get(response::MINIMUM_IO_RATE)?;
    let base_io_size = r.get(response::BASE_IO_SIZE)?;
    let reserved2 = r.get(response::RESERVED2)?;
    let maximum_bandwidth = match pv.dialect() {
        Some(Dialect::V1_1) => Some(r.get(response::MAXIMUM_BANDWIDTH)?),
        _ => None,
    };
    Some(Response {
        protocol_version: pv,
        reserved,
        options,
        logical_flow_id,
        policy_id,
        initiator_id,
        time_to_live,
        status,
        maximum_io_rate,
        minimum_io_rate,
        base_io_size,
        reserved2,
        maximum_bandwidth,
    })
}

/// Decodes a STORAGE_QOS_CONTROL_RESPONSE (the IOCTL's output buffer).
pub fn parse_response(buf: &[u8]) -> Dissection<Response> {
    let mut r = FieldReader::new(buf);
    let mut findings = Vec::new();
    let pv = r.get(response::PROTOCOL_VERSION);
    let dialect = pv.and_then(ProtocolVersion::dialect);
    let len = dialect.unwrap_or(Dialect::V1_0).response_len();
    if let Some(v) = pv.filter(|v| v.dialect().is_none()) {
        findings.push(rules::unknown_response_version(v.0));
    }
    let Some(resp) = pv.and_then(|pv| response_fixed(&mut r, pv)) else {
        return short(r, findings, (buf.len(), len), "response", dialect);
    };
    findings.extend(rules::check_response(&resp));
    findings.extend(trailing(buf.len(), len, "response"));
    Dissection {
        message: Some(resp),
        fields: r.into_fields(),
        findings,
        error: None,
    }
}
