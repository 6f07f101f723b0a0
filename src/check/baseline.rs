//! Comparing a capture's flow table with a saved one (`sqos flows --format json`): every figure
//! within its tolerance, the identifying fields equal, and no flow appearing or vanishing.

use serde_json::{Map, Value};

use super::figure::Figure;
use super::flows::{Flow, FlowTable, FlowTableError};
use super::outcome::{summarize, Outcome};
use super::rules::values::fmt_num;
use super::rules::BaselineTolerances;
use crate::capture::Timestamp;
use crate::filter::{Filter, Subject};
use crate::output::columns::flow_flat;

/// A flow table saved with `sqos flows --format json`, read into typed flows. Each flow's saved
/// fields are kept flat beside it for `-Y`, which reads a saved flow by its column names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Baseline {
    pub flows: FlowTable,
    /// `flow_flat` of each saved flow, in the table's order.
    rows: Vec<Map<String, Value>>,
}

impl Baseline {
    pub fn from_json(v: Value) -> Result<Self, FlowTableError> {
        let rows = match &v {
            Value::Array(items) => items.iter().map(flow_flat).collect(),
            _ => Vec::new(),
        };
        Ok(Baseline {
            flows: FlowTable::from_json(v)?,
            rows,
        })
    }

    /// The saved flows a filter keeps: judged on their saved fields, or — for a filter that
    /// reads messages, which a saved table has not — those the capture's selection kept.
    pub fn select(&self, now: &FlowTable, f: &Filter) -> FlowTable {
        let mut kept = self.flows.clone();
        kept.retain(|i, fl| {
            if f.needs_messages() {
                now.get(fl.id()).is_some()
            } else {
                let row = self.rows.get(i).cloned().unwrap_or_default();
                f.matches(&Subject::flow_map(row, Timestamp::default()))
            }
        });
        kept
    }
}

fn value_text(v: Option<f64>) -> String {
    v.map_or_else(|| "none".into(), fmt_num)
}

/// The differences between one flow now and in the baseline.
fn differences(now: &Flow, then: &Flow, tol: &BaselineTolerances) -> Vec<String> {
    let mut out = Vec::new();
    for ((key, a), (_, b)) in now.texts().zip(then.texts()) {
        if a != b {
            out.push(format!("{key} {b} → {a}"));
        }
    }
    let (a, b) = (now.last_status_text(), then.last_status_text());
    if a != b {
        out.push(format!("last_status {b} → {a}"));
    }
    for fig in Figure::ALL.into_iter().filter(|&f| then.has_figure(f)) {
        let t = tol.for_figure(fig);
        let same = match (now.figure(fig), then.figure(fig)) {
            (None, None) => true,
            (Some(a), Some(b)) => t.accepts(a, b),
            _ => false,
        };
        if !same {
            out.push(format!(
                "{fig} {} → {} (tolerance {t})",
                value_text(then.figure(fig)),
                value_text(now.figure(fig))
            ));
        }
    }
    out
}

/// One outcome per flow of either table, in the baseline's order then the new flows'.
pub fn compare(now: &FlowTable, then: &FlowTable, tol: &BaselineTolerances) -> Vec<Outcome> {
    let mut out = Vec::new();
    for old in then.flows() {
        let name = format!("baseline: flow {}", old.label());
        let o = match now.get(old.id()) {
            None => Outcome {
                name,
                kind: "baseline",
                line: None,
                passed: false,
                measured: "vanished".into(),
                expected: "present, as in the baseline".into(),
                details: Vec::new(),
            },
            Some(cur) => {
                let diffs = differences(cur, old, tol);
                Outcome {
                    name,
                    kind: "baseline",
                    line: None,
                    passed: diffs.is_empty(),
                    measured: if diffs.is_empty() {
                        "as in the baseline".into()
                    } else {
                        summarize(&diffs)
                    },
                    expected: "figures within tolerance of the baseline".into(),
                    details: diffs,
                }
            }
        };
        out.push(o);
    }
    for new in now.flows().iter().filter(|f| then.get(f.id()).is_none()) {
        out.push(Outcome {
            name: format!("baseline: flow {}", new.label()),
            kind: "baseline",
            line: None,
            passed: false,
            measured: "appeared".into(),
            expected: "absent, as in the baseline".into(),
            details: Vec::new(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::rules::Tolerance;
    use serde_json::json;

    fn table(v: Value) -> FlowTable {
        FlowTable::from_json(v).unwrap()
    }

    #[test]
    fn identical_tables_pass() {
        let t = table(json!([{"logical_flow_id": "a", "initiator_name": "vm01", "iops": 10.5}]));
        let o = compare(&t, &t, &BaselineTolerances::default());
        assert_eq!(o.len(), 1);
        assert!(o[0].passed, "{o:?}");
        assert_eq!(o[0].name, "baseline: flow vm01 [a]");
    }

    #[test]
    fn tolerance_per_figure_applies() {
        let then = table(json!([{"logical_flow_id": "a", "iops": 100.0, "limit": 50}]));
        let now = table(json!([{"logical_flow_id": "a", "iops": 104.0, "limit": 50}]));
        let exact = compare(&now, &then, &BaselineTolerances::default());
        assert!(!exact[0].passed);
        assert_eq!(exact[0].details, vec!["iops 100 → 104 (tolerance exact)"]);
        let mut tol = BaselineTolerances::default();
        tol.per_figure
            .insert(Figure::Iops, Tolerance::new(0.05, 0.0).unwrap());
        assert!(compare(&now, &then, &tol)[0].passed);
    }
}
