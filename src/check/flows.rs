//! The flows `check` judges, typed: taken from a capture's analysis, or read from a flow table
//! saved with `sqos flows --format json` (issue 5's schema, a baseline). Both sides are the same
//! view, so a baseline compares like with like.

use std::collections::BTreeMap;

use serde_json::Value;

use super::figure::{Figure, FlowFigures};
use crate::analysis::{Analysis, FlowState};
use crate::output::flows::sorted_findings;
use crate::sqos::Status;

/// The server's last Status as a flow holds it.
#[derive(Clone, Debug, PartialEq)]
pub enum LastStatus {
    /// No answer seen (null or absent in a saved table).
    None,
    Known(Status),
    /// A saved table's value that names no status, as it was written.
    Unreadable(String),
}

/// The fields `check` compares as text (they name the flow's owner, policy and state), by the
/// key the JSON table gives them.
pub const TEXT_FIELDS: [&str; 4] = [
    "initiator_name",
    "initiator_node_name",
    "policy_id",
    "protocol_version",
];

/// One flow as `check` sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Flow {
    /// The LogicalFlowID in lower case.
    id: String,
    /// [`TEXT_FIELDS`], in that order (`None`: null or absent).
    texts: [Option<String>; 4],
    last_status: LastStatus,
    /// The figures the flow has (a table saved before a figure existed lacks it); `None` is a
    /// figure without a value (no counters reported, no limit set).
    figures: BTreeMap<Figure, Option<f64>>,
    findings: Vec<FlowFindingView>,
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

/// A saved value as text: a string as it is, anything else as JSON (`None`: null or absent).
fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        v => Some(v.to_string()),
    }
}

impl Flow {
    /// A flow of the analysis.
    pub fn from_state(f: &FlowState) -> Self {
        let figs = FlowFigures::new(f);
        Flow {
            id: f.id.to_string(),
            texts: [
                f.initiator_name.clone(),
                f.initiator_node_name.clone(),
                f.policy.map(|p| p.policy_id.to_string()),
                f.protocol_version.map(|v| v.0.to_string()),
            ],
            last_status: f
                .server
                .map_or(LastStatus::None, |s| LastStatus::Known(s.status)),
            figures: Figure::ALL
                .into_iter()
                .map(|fig| (fig, figs.get(fig)))
                .collect(),
            findings: sorted_findings(f)
                .into_iter()
                .map(|x| FlowFindingView {
                    code: x.code.as_str().to_string(),
                    severity: x.severity.as_str().to_string(),
                    frame: Some(x.frame),
                    occurrences: u64::from(x.occurrences).max(1),
                })
                .collect(),
        }
    }

    /// A flow object of a saved table whose id is `id` (lower case).
    fn from_json(id: String, json: &Value) -> Self {
        let last_status = match json.get("last_status") {
            None | Some(Value::Null) => LastStatus::None,
            Some(v) => status_of(v)
                .map_or_else(|| LastStatus::Unreadable(v.to_string()), LastStatus::Known),
        };
        let findings = json
            .get("findings")
            .and_then(Value::as_array)
            .map(|list| {
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
            })
            .unwrap_or_default();
        Flow {
            id,
            texts: TEXT_FIELDS.map(|k| text_of(json.get(k))),
            last_status,
            figures: Figure::ALL
                .into_iter()
                .filter_map(|fig| {
                    let v = json.pointer(fig.pointer())?;
                    Some((fig, v.as_f64()))
                })
                .collect(),
            findings,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn initiator_name(&self) -> Option<&str> {
        self.texts[0].as_deref().filter(|s| !s.is_empty())
    }

    /// [`TEXT_FIELDS`] with their values, as text ("none" when null or absent).
    pub fn texts(&self) -> impl Iterator<Item = (&'static str, &str)> + '_ {
        TEXT_FIELDS
            .into_iter()
            .zip(self.texts.iter().map(|t| t.as_deref().unwrap_or("none")))
    }

    /// A short label for messages: the initiator name and the first group of the flow id.
    pub fn label(&self) -> String {
        let short = self.id.split('-').next().unwrap_or(&self.id);
        match self.initiator_name() {
            Some(n) => format!("{n} [{short}]"),
            None => format!("[{}]", self.id),
        }
    }

    /// The figure's value; `None` when the flow lacks it or has no value (e.g. no counters
    /// reported).
    pub fn figure(&self, f: Figure) -> Option<f64> {
        self.figures.get(&f).copied().flatten()
    }

    /// Whether the flow has the figure at all (without a value counts): a baseline saved before
    /// a figure existed has none, and is not compared on it.
    pub fn has_figure(&self, f: Figure) -> bool {
        self.figures.contains_key(&f)
    }

    /// The server's last Status (read, in a saved table, from a number, a status name, or an
    /// object with `code` / `value`).
    pub fn last_status(&self) -> Option<Status> {
        match self.last_status {
            LastStatus::Known(s) => Some(s),
            _ => None,
        }
    }

    /// The last Status for messages.
    pub fn last_status_text(&self) -> String {
        match &self.last_status {
            LastStatus::None => "none".into(),
            LastStatus::Known(s) => status_label(*s),
            LastStatus::Unreadable(v) => v.clone(),
        }
    }

    pub fn findings(&self) -> &[FlowFindingView] {
        &self.findings
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
    /// The flows of an analysis, in its order.
    pub fn from_analysis(a: &Analysis) -> Self {
        FlowTable {
            flows: a.flows.iter().map(Flow::from_state).collect(),
        }
    }

    /// A table saved with `sqos flows --format json`.
    pub fn from_json(v: Value) -> Result<Self, FlowTableError> {
        let Value::Array(items) = v else {
            return Err(FlowTableError::NotAnArray);
        };
        let mut flows: Vec<Flow> = Vec::with_capacity(items.len());
        for (index, json) in items.iter().enumerate() {
            let id = json
                .get("logical_flow_id")
                .and_then(Value::as_str)
                .ok_or(FlowTableError::BadFlow { index })?
                .to_ascii_lowercase();
            if flows.iter().any(|f| f.id == id) {
                return Err(FlowTableError::Duplicate { id });
            }
            flows.push(Flow::from_json(id, json));
        }
        Ok(FlowTable { flows })
    }

    /// The flows `keep` says yes to, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, &Flow) -> bool) {
        let mut i = 0;
        self.flows.retain(|f| {
            let k = keep(i, f);
            i += 1;
            k
        });
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
