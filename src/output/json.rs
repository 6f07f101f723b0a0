//! The JSON / JSONL schema of `sqos dissect` (documented in README, "JSON schema").
//!
//! Keys are the snake_case of the spec's field names. A key is absent when the message does not
//! carry that field (e.g. `bandwidth_limit` in a dialect 1.0 request, `nt_status` in a request);
//! an error response has no `sqos` object.

use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::time::iso_utc;
use crate::pipeline::{FileId, SqosBody, SqosRecord};
use crate::sqos::layout::{request, FieldDef};
use crate::sqos::{FieldValue, Finding, Request, Response};

/// FileId as tshark shows `smb2.fid`: its 16 bytes read as a little-endian GUID.
pub fn file_id_guid(id: FileId) -> Uuid {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.persistent.to_le_bytes());
    b[8..].copy_from_slice(&id.volatile.to_le_bytes());
    Uuid::from_bytes_le(b)
}

pub fn findings_json(findings: &[Finding]) -> Value {
    Value::Array(
        findings
            .iter()
            .map(|f| json!({"code": f.code.as_str(), "severity": f.severity.as_str(), "message": f.message}))
            .collect(),
    )
}

/// The key of the Options flag names beside `options`.
pub const OPTION_NAMES: &str = "option_names";
/// The key of the Status's spec name beside `status`.
pub const STATUS_NAME: &str = "status_name";

/// The `sqos` object: each field of the layout table under its key (reserved fields left out),
/// Options with its flag names and Status with its spec name beside them.
fn fields_json(fields: Vec<(FieldDef, FieldValue)>) -> Map<String, Value> {
    let mut m = Map::new();
    for (def, value) in fields.into_iter().filter(|(def, _)| !def.reserved) {
        let v = match value {
            FieldValue::U16(x) => json!(x),
            FieldValue::U32(x) => json!(x),
            FieldValue::U64(x) => json!(x),
            FieldValue::Guid(g) => json!(g.to_string()),
            FieldValue::Version(v) => json!(v.0),
            FieldValue::Options(o) => {
                m.insert(OPTION_NAMES.into(), json!(o.names()));
                json!(o.bits())
            }
            FieldValue::Status(s) => {
                if let Some(name) = s.name() {
                    m.insert(STATUS_NAME.into(), json!(name));
                }
                json!(s.0)
            }
            FieldValue::Text(t) => json!(t),
            FieldValue::Bytes => continue,
        };
        m.insert(def.key.into(), v);
    }
    m
}

fn request_json(r: &Request) -> Map<String, Value> {
    let mut m = fields_json(r.wire_fields());
    for (name, text) in [
        (request::INITIATOR_NAME, &r.initiator_name),
        (request::INITIATOR_NODE_NAME, &r.initiator_node_name),
    ] {
        if let Some(t) = text {
            m.insert(name.key.into(), json!(t));
        }
    }
    m
}

fn response_json(r: &Response) -> Map<String, Value> {
    fields_json(r.wire_fields())
}

/// One SQOS message as a JSON object (one line of `--format jsonl`).
pub fn record_json(rec: &SqosRecord) -> Value {
    let mut m = Map::new();
    m.insert("frame".into(), json!(rec.frame));
    m.insert("time".into(), json!(rec.ts.as_secs_f64()));
    m.insert("datetime".into(), json!(iso_utc(rec.ts)));
    m.insert("src".into(), json!(rec.src.to_string()));
    m.insert("dst".into(), json!(rec.dst.to_string()));
    m.insert("direction".into(), json!(rec.direction));
    m.insert("msg_id".into(), json!(rec.msg_id));
    m.insert("session_id".into(), json!(rec.session_id));
    if let Some(t) = rec.tree_id {
        m.insert("tree_id".into(), json!(t));
    }
    if let Some(a) = rec.async_id {
        m.insert("async_id".into(), json!(a));
    }
    if let Some(f) = rec.file_id {
        m.insert("file_id".into(), json!(file_id_guid(f).to_string()));
    }
    if let Some(n) = &rec.file_name {
        m.insert("file_name".into(), json!(n));
    }
    if let Some(s) = rec.nt_status {
        m.insert("nt_status".into(), json!(s));
        m.insert("interim".into(), json!(rec.interim));
    }
    if let Some(f) = rec.request_frame {
        m.insert("request_frame".into(), json!(f));
    }
    if let Some(f) = rec.response_frame {
        m.insert("response_frame".into(), json!(f));
    }
    if let Some(t) = rec.response_time {
        m.insert("response_time".into(), json!(t));
    }
    if let Some(x) = rec.max_output_response {
        m.insert("max_output_response".into(), json!(x));
    }
    m.insert("buffer_length".into(), json!(rec.buffer.len()));
    if rec.buffer_truncated {
        m.insert("buffer_truncated".into(), json!(true));
    }
    let findings = match &rec.body {
        SqosBody::Request(d) => {
            if let Some(r) = &d.message {
                m.insert("sqos".into(), Value::Object(request_json(r)));
            }
            &d.findings[..]
        }
        SqosBody::Response(d) => {
            if let Some(r) = &d.message {
                m.insert("sqos".into(), Value::Object(response_json(r)));
            }
            &d.findings[..]
        }
        SqosBody::NoBuffer => &[],
    };
    m.insert("findings".into(), findings_json(findings));
    Value::Object(m)
}
