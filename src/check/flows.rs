//! The flow table as `sqos flows --format json` writes it (issue 5), read as JSON so `check`
//! depends only on that schema: from the analysis of a capture or from a saved baseline file.

use serde_json::Value;

use super::figure::Figure;
use crate::sqos::Status;

/// One flow object of the table. Built only through [`FlowTable::from_json`], so it always has
/// a string `logical_flow_id`.
#[derive(Clone, Debug, PartialEq)]
pub struct Flow {
    id: String,
    json: Value,
}

/// A finding of a flow as far as `check` needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowFindingView {
    pub code: String,
    pub severity: String,
    pub frame: Option<u64>,
    /// A finding repeated over consecutive intervals is one entry with a count.
    pub occurrences: u64,
}

impl Flow {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn json(&self) -> &Value {
        &self.json
    }

    fn str_at(&self, key: &str) -> Option<&str> {
        self.json.get(key).and_then(Value::as_str)
    }

    pub fn initiator_name(&self) -> Option<&str> {
        self.str_at("initiator_name").filter(|s| !s.is_empty())
    }

    /// A short label for messages: the initiator name and the first group of the flow id.
    pub fn label(&self) -> String {
        let short = self.id.split('-').next().unwrap_or(&self.id);
        match self.initiator_name() {
            Some(n) => format!("{n} [{short}]"),
            None => format!("[{}]", self.id),
        }
    }

    /// The figure's value; `None` when the key is absent or null (e.g. no counters reported).
    pub fn figure(&self, f: Figure) -> Option<f64> {
        self.json.pointer(f.pointer()).and_then(Value::as_f64)
    }

    /// Whether the table has the figure's key at all (null counts): a baseline saved before a
    /// figure existed has none, and is not compared on it.
    pub fn has_figure(&self, f: Figure) -> bool {
        self.json.pointer(f.pointer()).is_some()
    }

    /// The server's last Status, read from a number, a status name, or an object with `code` /
    /// `value` (whichever way the table writes it).
    pub fn last_status(&self) -> Option<Status> {
        status_of(self.json.get("last_status")?)
    }

    /// The raw `last_status` for messages.
    pub fn last_status_text(&self) -> String {
        match self.json.get("last_status") {
            None | Some(Value::Null) => "none".into(),
            Some(v) => match self.last_status() {
                Some(s) => status_label(s),
                None => v.to_string(),
            },
        }
    }

    pub fn findings(&self) -> Vec<FlowFindingView> {
        let Some(list) = self.json.get("findings").and_then(Value::as_array) else {
            return Vec::new();
        };
        list.iter()
            .filter_map(|f| {
                Some(FlowFindingView {
                    code: f.get("code")?.as_str()?.to_string(),
                    severity: f.get("severity")?.as_str()?.to_string(),
                    frame: f.get("frame").and_then(Value::as_u64),
                    occurrences: f
                        .get("occurrences")
                        .and_then(Value::as_u64)
                        .unwrap_or(1)
                        .max(1),
                })
            })
            .collect()
    }
}

/// The short snake_case alias of a status rules files may use ("insufficient_throughput"):
/// its spec name without the prefix, in snake case.
fn alias(s: Status) -> Option<String> {
    s.short_name().map(|n| {
        let mut out = String::with_capacity(n.len() + 4);
        for (i, c) in n.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        }
        out
    })
}

/// A Status from its spec name or short alias (case-insensitive).
pub fn status_from_name(s: &str) -> Option<Status> {
    Status::known().find(|k| {
        k.name().is_some_and(|n| n.eq_ignore_ascii_case(s))
            || alias(*k).is_some_and(|a| a.eq_ignore_ascii_case(s))
    })
}

/// The short name of a status, or its number.
pub fn status_label(s: Status) -> String {
    alias(s).unwrap_or_else(|| s.0.to_string())
}

fn status_of(v: &Value) -> Option<Status> {
    match v {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()).map(Status),
        Value::String(s) => status_from_name(s),
        Value::Object(m) => ["code", "value", "status"]
            .iter()
            .find_map(|k| m.get(*k).and_then(status_of))
            .or_else(|| m.get("name").and_then(status_of)),
        _ => None,
    }
}

/// Why a flow table could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FlowTableError {
    #[error("not a JSON array of flows")]
    NotAnArray,
    #[error("flow {index}: not an object with a string `logical_flow_id`")]
    BadFlow { index: usize },
    #[error("flow {id} appears twice")]
    Duplicate { id: String },
}

/// All flows of one capture, in the table's order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowTable {
    flows: Vec<Flow>,
}

impl FlowTable {
    pub fn from_json(v: Value) -> Result<Self, FlowTableError> {
        let Value::Array(items) = v else {
            return Err(FlowTableError::NotAnArray);
        };
        let mut flows: Vec<Flow> = Vec::with_capacity(items.len());
        for (index, json) in items.into_iter().enumerate() {
            let id = json
                .get("logical_flow_id")
                .and_then(Value::as_str)
                .ok_or(FlowTableError::BadFlow { index })?
                .to_ascii_lowercase();
            if flows.iter().any(|f| f.id == id) {
                return Err(FlowTableError::Duplicate { id });
            }
            flows.push(Flow { id, json });
        }
        Ok(FlowTable { flows })
    }

    pub fn flows(&self) -> &[Flow] {
        &self.flows
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    pub fn get(&self, id: &str) -> Option<&Flow> {
        self.flows.iter().find(|f| f.id.eq_ignore_ascii_case(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_figures_status_and_findings() {
        let t = FlowTable::from_json(json!([{
            "logical_flow_id": "AAAAAAAA-0000-0000-0000-000000000001",
            "initiator_name": "vm01",
            "iops": 12.5,
            "maximum_io_rate": 200,
            "observed": {"iops": 12.0},
            "last_status": "StorageQoSStatusInsufficientThroughput",
            "findings": [{"code": "flow.x", "severity": "warning", "frame": 7, "time": 1.0, "message": "m"}]
        }]))
        .unwrap();
        let f = t.get("aaaaaaaa-0000-0000-0000-000000000001").unwrap();
        assert_eq!(f.figure(Figure::Iops), Some(12.5));
        assert_eq!(f.figure(Figure::MaximumIoRate), Some(200.0));
        assert_eq!(f.figure(Figure::ObservedIops), Some(12.0));
        assert_eq!(f.figure(Figure::Limit), None);
        assert_eq!(f.last_status(), Some(Status(1)));
        assert_eq!(f.label(), "vm01 [aaaaaaaa]");
        assert_eq!(f.findings()[0].frame, Some(7));
    }

    #[test]
    fn status_aliases() {
        let aliases: Vec<String> = Status::known().map(status_label).collect();
        assert_eq!(
            aliases,
            [
                "ok",
                "insufficient_throughput",
                "unknown_policy_id",
                "configuration_mismatch",
                "not_available"
            ]
        );
        assert_eq!(status_label(Status(3)), "3");
        assert_eq!(
            status_from_name("StorageQoSUnknownPolicyId"),
            Some(Status(2))
        );
        assert_eq!(status_from_name("NOT_AVAILABLE"), Some(Status(5)));
        assert_eq!(status_from_name("bogus"), None);
    }

    #[test]
    fn status_in_any_shape() {
        assert_eq!(status_of(&json!(4)), Some(Status(4)));
        assert_eq!(status_of(&json!("ok")), Some(Status(0)));
        assert_eq!(status_of(&json!({"code": 2, "name": "x"})), Some(Status(2)));
        assert_eq!(
            status_of(&json!({"name": "not_available"})),
            Some(Status(5))
        );
        assert_eq!(status_of(&json!(null)), None);
    }

    #[test]
    fn rejects_malformed_tables() {
        assert_eq!(
            FlowTable::from_json(json!({"a": 1})),
            Err(FlowTableError::NotAnArray)
        );
        assert_eq!(
            FlowTable::from_json(json!([{"logical_flow_id": "x"}, {"iops": 1}])),
            Err(FlowTableError::BadFlow { index: 1 })
        );
        assert_eq!(
            FlowTable::from_json(json!([{"logical_flow_id": "x"}, {"logical_flow_id": "X"}])),
            Err(FlowTableError::Duplicate { id: "x".into() })
        );
    }
}
