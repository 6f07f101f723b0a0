//! `sqos annotate`: what the analysis says about each SQOS message, as JSON lines, for faces
//! that show it on the packets of another tool (the Wireshark plugin, plugin/README.md).
//!
//! One object a line, each with a `type`:
//! - `header` first: `format` (`ANNOTATE_FORMAT`) and `version` (`ANNOTATE_VERSION`, raised
//!   when a reader would misread the lines), and the `sqos` version that wrote them;
//! - `message` per SQOS message in decode order: the `sqos dissect --format jsonl` record
//!   (`message`), its `dialect`, the logical `flow` it belongs to and how that is known
//!   (`flow_from`: `message` or `open`), on the final answer to an UPDATE_COUNTERS
//!   `first_update` or the `interval` it closed (its `seconds` and, when the server applied
//!   the counters, the rates), and the flow's state after the message (`flow_state`);
//! - `flow` per logical flow at the end (the `sqos flows --format json` object, findings
//!   included), then `flows_text` (what `sqos flows` prints), then `end` (`frames` read, and
//!   `error` when the capture was damaged).

use serde_json::{json, Map, Value};

use crate::analysis::{Analysis, FlowState, MessageView, UpdateAnswer};

use super::flows::{flow_json, flow_state_json, flows_text};

/// Names the format, so that a reader can tell it was given something else.
pub const ANNOTATE_FORMAT: &str = "sqos-annotate";
/// Raised when a line changes in a way an older reader would misread.
pub const ANNOTATE_VERSION: u32 = 1;

pub fn header_json() -> Value {
    json!({
        "type": "header",
        "format": ANNOTATE_FORMAT,
        "version": ANNOTATE_VERSION,
        "sqos": env!("CARGO_PKG_VERSION"),
    })
}

/// One SQOS message: its `record_json`, and what the analysis made of it (`flow`: the state of
/// the flow it belongs to, after it).
pub fn message_json(
    record: Value,
    dialect: Option<&str>,
    view: &MessageView,
    flow: Option<&FlowState>,
) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), json!("message"));
    m.insert("message".into(), record);
    if let Some(d) = dialect {
        m.insert("dialect".into(), json!(d));
    }
    if let Some((id, from)) = view.flow {
        m.insert("flow".into(), json!(id.to_string()));
        m.insert("flow_from".into(), json!(from));
    }
    match view.update {
        Some(UpdateAnswer::First) => {
            m.insert("first_update".into(), json!(true));
        }
        Some(UpdateAnswer::Interval {
            secs,
            rates: Some(rates),
        }) => {
            let mut i = match serde_json::to_value(rates) {
                Ok(Value::Object(r)) => r,
                _ => Map::new(),
            };
            i.insert("seconds".into(), json!(secs));
            m.insert("interval".into(), Value::Object(i));
        }
        Some(UpdateAnswer::Interval { rates: None, .. }) | None => {}
    }
    if let Some(f) = flow {
        m.insert("flow_state".into(), Value::Object(flow_state_json(f)));
    }
    Value::Object(m)
}

/// The lines after the last message: the flows, the `sqos flows` text, the end.
pub fn closing_json(a: &Analysis, frames: u64, error: Option<String>) -> Vec<Value> {
    let mut out: Vec<Value> = a
        .flows
        .iter()
        .map(|f| json!({"type": "flow", "flow": flow_json(f)}))
        .collect();
    out.push(json!({"type": "flows_text", "text": flows_text(a)}));
    let mut end = json!({"type": "end", "frames": frames});
    if let (Some(e), Value::Object(m)) = (error, &mut end) {
        m.insert("error".into(), json!(e));
    }
    out.push(end);
    out
}
