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

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Map, Value};

use crate::analysis::{Analysis, FlowState, MessageView, UpdateAnswer};
use crate::pipeline::SqosRecord;

use super::flows::{flow_json, flow_state_json, flows_text};
use super::json::RecordJson;

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

/// One SQOS message's line: the record (`RecordJson`, as `dissect --format jsonl` writes it),
/// its dialect, and what the analysis made of it (`flow`: the state of the flow it belongs to,
/// after it). Written straight from them (the record's ~50 keys made into a map and dropped
/// again were a third of the instructions of `annotate`), its keys in the order a serde_json
/// map gave them before: alphabetical.
pub struct MessageLine<'a> {
    pub record: &'a SqosRecord,
    pub dialect: Option<&'a str>,
    pub view: &'a MessageView,
    pub flow: Option<&'a FlowState>,
}

impl Serialize for MessageLine<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(None)?;
        if let Some(d) = self.dialect {
            m.serialize_entry("dialect", d)?;
        }
        if let Some(UpdateAnswer::First) = self.view.update {
            m.serialize_entry("first_update", &true)?;
        }
        if let Some((id, from)) = self.view.flow {
            m.serialize_entry("flow", &id.to_string())?;
            m.serialize_entry("flow_from", &from)?;
        }
        if let Some(f) = self.flow {
            m.serialize_entry("flow_state", &flow_state_json(f))?;
        }
        if let Some(UpdateAnswer::Interval {
            secs,
            rates: Some(rates),
        }) = self.view.update
        {
            // Once a flow an interval: the rates' keys and `seconds`, in one sorted map.
            let mut i = match serde_json::to_value(rates) {
                Ok(Value::Object(r)) => r,
                _ => Map::new(),
            };
            i.insert("seconds".into(), json!(secs));
            m.serialize_entry("interval", &i)?;
        }
        m.serialize_entry("message", &RecordJson(self.record))?;
        m.serialize_entry("type", "message")?;
        m.end()
    }
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
