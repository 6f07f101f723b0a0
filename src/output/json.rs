//! The JSON / JSONL schema of `sqos dissect` (documented in README, "JSON schema").
//!
//! Keys are the snake_case of the spec's field names. A key is absent when the message does not
//! carry that field (e.g. `bandwidth_limit` in a dialect 1.0 request, `nt_status` in a request);
//! an error response has no `sqos` object.

use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::time::iso_utc;
use crate::pipeline::{FileId, SqosBody, SqosRecord};
use crate::sqos::{Finding, Request, Response};

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

fn request_json(r: &Request) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("protocol_version".into(), json!(r.protocol_version.0));
    m.insert("options".into(), json!(r.options.bits()));
    m.insert("option_names".into(), json!(r.options.names()));
    m.insert(
        "logical_flow_id".into(),
        json!(r.logical_flow_id.to_string()),
    );
    m.insert("policy_id".into(), json!(r.policy_id.to_string()));
    m.insert("initiator_id".into(), json!(r.initiator_id.to_string()));
    m.insert("limit".into(), json!(r.limit));
    m.insert("reservation".into(), json!(r.reservation));
    m.insert(
        "initiator_name_offset".into(),
        json!(r.initiator_name_offset),
    );
    m.insert(
        "initiator_name_length".into(),
        json!(r.initiator_name_length),
    );
    m.insert(
        "initiator_node_name_offset".into(),
        json!(r.initiator_node_name_offset),
    );
    m.insert(
        "initiator_node_name_length".into(),
        json!(r.initiator_node_name_length),
    );
    if let Some(n) = &r.initiator_name {
        m.insert("initiator_name".into(), json!(n));
    }
    if let Some(n) = &r.initiator_node_name {
        m.insert("initiator_node_name".into(), json!(n));
    }
    m.insert("io_count_increment".into(), json!(r.io_count_increment));
    m.insert(
        "normalized_io_count_increment".into(),
        json!(r.normalized_io_count_increment),
    );
    m.insert("latency_increment".into(), json!(r.latency_increment));
    m.insert(
        "lower_latency_increment".into(),
        json!(r.lower_latency_increment),
    );
    if let Some(v) = r.v1_1 {
        m.insert("bandwidth_limit".into(), json!(v.bandwidth_limit));
        m.insert(
            "kilobyte_count_increment".into(),
            json!(v.kilobyte_count_increment),
        );
    }
    m
}

fn response_json(r: &Response) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("protocol_version".into(), json!(r.protocol_version.0));
    m.insert("options".into(), json!(r.options));
    m.insert(
        "logical_flow_id".into(),
        json!(r.logical_flow_id.to_string()),
    );
    m.insert("policy_id".into(), json!(r.policy_id.to_string()));
    m.insert("initiator_id".into(), json!(r.initiator_id.to_string()));
    m.insert("time_to_live".into(), json!(r.time_to_live));
    m.insert("status".into(), json!(r.status.0));
    if let Some(name) = r.status.name() {
        m.insert("status_name".into(), json!(name));
    }
    m.insert("maximum_io_rate".into(), json!(r.maximum_io_rate));
    m.insert("minimum_io_rate".into(), json!(r.minimum_io_rate));
    m.insert("base_io_size".into(), json!(r.base_io_size));
    if let Some(bw) = r.maximum_bandwidth {
        m.insert("maximum_bandwidth".into(), json!(bw));
    }
    m
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
