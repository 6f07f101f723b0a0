//! The lists the views show, derived from the live state with the user's sort and filter:
//! flow rows, the indices of the messages shown, the findings by severity.

use std::collections::HashSet;

use uuid::Uuid;

use super::live::Live;
use super::model::{rate_cell, short_id, status_label, FindingRow, FlowRow};
use super::store::message_flow;
use crate::output::text::summary_line;
use crate::pipeline::Direction;

/// A column of the Flows table (each one sortable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowCol {
    Initiator,
    Node,
    Policy,
    /// The server's MaximumIoRate / MinimumIoRate.
    Server,
    Iops,
    Observed,
    Latency,
    Kbps,
    /// Whole-capture figures, as `sqos flows` prints them.
    AvgIops,
    AvgLatency,
    AvgKbps,
    Status,
    Findings,
}

impl FlowCol {
    /// In the order they are shown.
    pub const ALL: [FlowCol; 13] = [
        FlowCol::Initiator,
        FlowCol::Node,
        FlowCol::Policy,
        FlowCol::Server,
        FlowCol::Iops,
        FlowCol::Observed,
        FlowCol::Latency,
        FlowCol::Kbps,
        FlowCol::AvgIops,
        FlowCol::AvgLatency,
        FlowCol::AvgKbps,
        FlowCol::Status,
        FlowCol::Findings,
    ];

    pub fn title(self) -> &'static str {
        match self {
            FlowCol::Initiator => "Initiator",
            FlowCol::Node => "Node",
            FlowCol::Policy => "Limit/Resv",
            FlowCol::Server => "Max/Min",
            FlowCol::Iops => "NIOPS",
            FlowCol::Observed => "Seen",
            FlowCol::Latency => "Lat ms",
            FlowCol::Kbps => "KB/s",
            FlowCol::AvgIops => "avg NIOPS",
            FlowCol::AvgLatency => "avg lat",
            FlowCol::AvgKbps => "avg KB/s",
            FlowCol::Status => "Status",
            FlowCol::Findings => "Find",
        }
    }

    /// Which columns give way first when the screen is narrow: the higher, the sooner (columns
    /// of one rank go together). Names, the current rate, status and findings always stay (0).
    pub fn drop_rank(self) -> u8 {
        match self {
            FlowCol::Initiator
            | FlowCol::Node
            | FlowCol::Iops
            | FlowCol::Status
            | FlowCol::Findings => 0,
            FlowCol::Policy => 1,
            FlowCol::Latency => 2,
            FlowCol::Kbps => 3,
            FlowCol::Observed => 4,
            FlowCol::Server => 5,
            FlowCol::AvgIops | FlowCol::AvgLatency | FlowCol::AvgKbps => 6,
        }
    }

    /// The column after `self` among `shown` (the columns on screen), or none after the last.
    pub fn next_in(self, shown: &[FlowCol]) -> Option<FlowCol> {
        let i = shown.iter().position(|c| *c == self)?;
        shown.get(i + 1).copied()
    }

    /// Numbers sort largest first on the first press; text sorts A→Z.
    pub fn numeric(self) -> bool {
        !matches!(self, FlowCol::Initiator | FlowCol::Node | FlowCol::Status)
    }
}

/// How the Flows table is sorted: by a column, or (None) in order of first appearance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sort {
    pub col: Option<FlowCol>,
    pub reverse: bool,
}

fn cmp_opt_f64(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    // Unknown values sort below every known one.
    match (a, b) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Greater,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (None, None) => std::cmp::Ordering::Equal,
    }
}

fn cmp_rows(col: FlowCol, a: &FlowRow, b: &FlowRow) -> std::cmp::Ordering {
    match col {
        FlowCol::Initiator => a.initiator.to_lowercase().cmp(&b.initiator.to_lowercase()),
        FlowCol::Node => a.node.to_lowercase().cmp(&b.node.to_lowercase()),
        FlowCol::Policy => a.policy.sort_key().cmp(&b.policy.sort_key()),
        FlowCol::Server => (a.max_rate, a.min_rate).cmp(&(b.max_rate, b.min_rate)),
        FlowCol::Iops => cmp_opt_f64(a.reported_iops, b.reported_iops),
        FlowCol::Observed => cmp_opt_f64(a.observed_iops, b.observed_iops),
        FlowCol::Latency => cmp_opt_f64(a.latency_ms, b.latency_ms),
        FlowCol::Kbps => cmp_opt_f64(a.kbps, b.kbps),
        FlowCol::AvgIops => cmp_opt_f64(a.avg_iops, b.avg_iops),
        FlowCol::AvgLatency => cmp_opt_f64(a.avg_latency_ms, b.avg_latency_ms),
        FlowCol::AvgKbps => cmp_opt_f64(a.avg_kbps, b.avg_kbps),
        FlowCol::Status => status_label(a.status).cmp(&status_label(b.status)),
        FlowCol::Findings => a.findings.cmp(&b.findings),
    }
}

/// Does a flow row match the filter text (case-insensitive, any visible cell or the flow id)?
pub fn flow_matches(row: &FlowRow, filter: &str) -> bool {
    if filter.is_empty() {
        return true;
    }
    let f = filter.to_lowercase();
    [
        row.initiator.to_lowercase(),
        row.node.to_lowercase(),
        row.id.to_string(),
        row.policy.label().to_lowercase(),
        status_label(row.status).to_lowercase(),
        rate_cell(row.reported_iops),
    ]
    .iter()
    .any(|s| s.contains(&f))
}

/// The flow rows shown: filtered, then sorted (stable, so ties keep appearance order).
pub fn flow_rows(live: &Live, sort: Sort, filter: &str) -> Vec<FlowRow> {
    let mut rows: Vec<FlowRow> = live
        .flows
        .rows()
        .into_iter()
        .filter(|r| flow_matches(r, filter))
        .collect();
    if let Some(col) = sort.col {
        let desc = col.numeric() != sort.reverse;
        rows.sort_by(|a, b| {
            let o = cmp_rows(col, a, b);
            if desc {
                o.reverse()
            } else {
                o
            }
        });
    } else if sort.reverse {
        rows.reverse();
    }
    rows
}

/// Store indices of the messages shown: those of the flow in scope (its requests, and the
/// responses to them even without a buffer), whose summary line contains the filter text.
pub fn message_indices(live: &Live, scope: Option<Uuid>, filter: &str) -> Vec<usize> {
    let store = &live.store;
    if scope.is_none() && filter.is_empty() {
        return (0..store.len()).collect();
    }
    let start = store.start();
    let f = filter.to_lowercase();
    let mut asked = HashSet::new();
    store
        .iter()
        .enumerate()
        .filter(|(_, rec)| {
            if let Some(id) = scope {
                let named = message_flow(rec) == Some(id);
                let key = (rec.conn, rec.msg_id);
                let in_scope = match rec.direction {
                    Direction::Request => {
                        if named {
                            asked.insert(key);
                        }
                        named
                    }
                    Direction::Response => named || asked.contains(&key),
                };
                if !in_scope {
                    return false;
                }
            }
            f.is_empty() || summary_line(rec, start).to_lowercase().contains(&f)
        })
        .map(|(i, _)| i)
        .collect()
}

/// The name a finding's flow goes by in lists.
pub fn flow_label(live: &Live, flow: Option<Uuid>) -> String {
    match flow {
        None => "-".into(),
        Some(id) => live
            .flows
            .rows()
            .into_iter()
            .find(|r| r.id == id)
            .map(|r| r.initiator)
            .unwrap_or_else(|| short_id(&id)),
    }
}

/// Every finding (flow-level and message-level), worst first, then by frame.
pub fn finding_rows(live: &Live, filter: &str) -> Vec<FindingRow> {
    let f = filter.to_lowercase();
    let mut all: Vec<FindingRow> = live
        .flows
        .findings()
        .into_iter()
        .chain(live.store.findings().cloned())
        .filter(|r| {
            f.is_empty()
                || r.code.to_lowercase().contains(&f)
                || r.message.to_lowercase().contains(&f)
                || r.severity.as_str().contains(&f)
                || r.flow.is_some_and(|id| id.to_string().contains(&f))
        })
        .collect();
    all.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.frame.cmp(&b.frame)));
    all
}
