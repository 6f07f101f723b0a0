//! What the Wireshark plugin prints as its flow summary (tshark's `-X lua_script1:flows` and the
//! Statistics → SQOS Flows window show the same `flow` / `finding` lines), read back and compared
//! with `sqos flows --format json`.

use std::collections::BTreeMap;

use serde_json::Value;

/// `key=value` pairs of `flow` / `finding` lines of the plugin's summary.
pub fn summary_kv(rest: &str) -> BTreeMap<String, String> {
    let mut kv = BTreeMap::new();
    let mut rest = rest;
    while let Some((k, r)) = rest.trim_start().split_once('=') {
        let (v, r) = if let Some(q) = r.strip_prefix('"') {
            let mut v = String::new();
            let mut end = q.len();
            let mut chars = q.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            v.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => v.push(c),
                }
            }
            (v, &q[end..])
        } else {
            let (v, r) = r.split_once(' ').unwrap_or((r, ""));
            (v.to_string(), r)
        };
        kv.insert(k.to_string(), v);
        rest = r;
    }
    kv
}

/// Plugin summary key → the `sqos flows --format json` value it must equal.
pub const FLOW_KEYS: &[(&str, &[&str])] = &[
    ("initiator_id", &["initiator_id"]),
    ("initiator_name", &["initiator_name"]),
    ("initiator_node_name", &["initiator_node_name"]),
    ("policy_id", &["policy_id"]),
    ("protocol_version", &["protocol_version"]),
    ("dialect", &["dialect"]),
    ("first_frame", &["first_frame"]),
    ("opens_total", &["opens_total"]),
    ("channels_total", &["channels_total"]),
    ("limit", &["limit"]),
    ("reservation", &["reservation"]),
    ("bandwidth_limit", &["bandwidth_limit"]),
    ("maximum_io_rate", &["maximum_io_rate"]),
    ("minimum_io_rate", &["minimum_io_rate"]),
    ("maximum_bandwidth", &["maximum_bandwidth"]),
    ("base_io_size", &["base_io_size"]),
    ("time_to_live", &["time_to_live"]),
    ("last_status", &["last_status"]),
    ("last_status_name", &["last_status_name"]),
    ("updates_sent", &["updates_sent"]),
    ("updates_applied", &["updates_applied"]),
    ("intervals", &["intervals"]),
    ("iops", &["iops"]),
    ("normalized_iops", &["normalized_iops"]),
    ("avg_latency_ms", &["avg_latency_ms"]),
    ("avg_lower_latency_ms", &["avg_lower_latency_ms"]),
    ("kilobytes_per_second", &["kilobytes_per_second"]),
    ("observed_io_count", &["observed", "io_count"]),
    ("observed_bytes", &["observed", "bytes"]),
    ("observed_iops", &["observed", "iops"]),
    ("observed_normalized_iops", &["observed", "normalized_iops"]),
    (
        "observed_kilobytes_per_second",
        &["observed", "kilobytes_per_second"],
    ),
    ("observed_avg_response_ms", &["observed", "avg_response_ms"]),
    ("findings_total", &["findings_total"]),
];

/// One figure: strings exactly, numbers to 1e-6 (the plugin prints 6 decimals).
pub fn same_value(ours: &Value, plugin: Option<&String>) -> bool {
    match (ours, plugin) {
        (Value::Null, None) => true,
        (Value::String(s), Some(p)) => s == p,
        (Value::Number(n), Some(p)) => match (n.as_f64(), p.parse::<f64>()) {
            (Some(a), Ok(b)) => (a - b).abs() <= 1e-6 * a.abs().max(1.0),
            _ => false,
        },
        _ => false,
    }
}
