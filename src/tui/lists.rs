//! The lists the views show, derived from the live state with the user's sort and filter:
//! flow rows, the indices of the messages shown, the findings by severity.

use std::collections::HashMap;

use uuid::Uuid;

use super::live::Live;
use super::model::{rate_cell, short_id, status_label, FindingRow, FlowRow};
use super::store::message_flow;
use crate::analysis::FlowState;
use crate::capture::Timestamp;
use crate::filter::{Context, Filter, Subject};
use crate::net::ConnId;
use crate::output::columns::message_flat;
use crate::output::text::summary_line;
use crate::pipeline::{Direction, SqosRecord};

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
            // The server's answer outlasts the figures derived from the wire.
            FlowCol::Server => 1,
            FlowCol::Policy => 2,
            FlowCol::Latency => 3,
            FlowCol::Kbps => 4,
            FlowCol::Observed => 5,
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

/// What `/` typed: a display filter when it parses as one, else text to look for.
enum Search {
    None,
    Filter(Filter),
    Text(String),
}

fn search(typed: &str, ctx: Context) -> Search {
    let t = typed.trim();
    if t.is_empty() {
        return Search::None;
    }
    match Filter::parse(t, ctx) {
        Ok(f) => Search::Filter(f),
        Err(_) => Search::Text(t.to_lowercase()),
    }
}

/// The flow rows shown: selected by `-Y`, filtered by `/`, then sorted (stable, so ties keep
/// appearance order).
pub fn flow_rows(live: &Live, sort: Sort, filter: &str) -> Vec<FlowRow> {
    let typed = search(filter, Context::Flows);
    let start = live.tap.store.start();
    let mut rows: Vec<FlowRow> = live
        .analysis
        .rows()
        .into_iter()
        .filter(|r| live.flow_selected(&r.id))
        .filter(|r| match &typed {
            Search::None => true,
            Search::Text(_) => flow_matches(r, filter.trim()),
            Search::Filter(f) => live
                .analysis
                .flow_state(&r.id)
                .is_some_and(|fl| f.matches(&Subject::flow(fl, None, start))),
        })
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

/// Does a message match `/` text: its summary line, any of its fields (the JSON values), or its
/// flow's initiator and node names?
fn message_text_matches(
    rec: &SqosRecord,
    flow: Option<&FlowState>,
    start: Timestamp,
    f: &str,
) -> bool {
    if summary_line(rec, start).to_lowercase().contains(f) {
        return true;
    }
    let names = flow.into_iter().flat_map(|fl| {
        [&fl.initiator_name, &fl.initiator_node_name]
            .into_iter()
            .flatten()
    });
    if names.into_iter().any(|n| n.to_lowercase().contains(f)) {
        return true;
    }
    message_flat(rec).values().any(|v| match v {
        serde_json::Value::String(s) => s.to_lowercase().contains(f),
        serde_json::Value::Array(a) => a
            .iter()
            .any(|x| x.as_str().is_some_and(|s| s.to_lowercase().contains(f))),
        serde_json::Value::Number(n) => n.to_string() == f,
        _ => false,
    })
}

/// Store indices of the messages shown: those of the flow in scope (its requests, and the
/// responses to them even without a buffer) that match what `/` typed — a display filter
/// (docs/filter.md), or text found in the summary line, a field or the flow's names.
pub fn message_indices(live: &Live, scope: Option<Uuid>, filter: &str) -> Vec<usize> {
    let store = &live.tap.store;
    let typed = search(filter, Context::Messages);
    if scope.is_none() && matches!(typed, Search::None) {
        return (0..store.len()).collect();
    }
    let start = store.start();
    // The flow of each request, so that responses without a buffer go with their request.
    let mut asked: HashMap<(ConnId, u64), Uuid> = HashMap::new();
    store
        .iter()
        .enumerate()
        .filter(|(_, rec)| {
            let key = (rec.conn, rec.msg_id);
            let flow_id = match rec.direction {
                Direction::Request => {
                    let id = message_flow(rec);
                    if let Some(id) = id {
                        asked.insert(key, id);
                    }
                    id
                }
                Direction::Response => message_flow(rec).or_else(|| asked.get(&key).copied()),
            };
            if scope.is_some() && flow_id != scope {
                return false;
            }
            let flow = flow_id.and_then(|id| live.analysis.flow_state(&id));
            match &typed {
                Search::None => true,
                Search::Text(f) => message_text_matches(rec, flow, start, f),
                Search::Filter(f) => f.matches_message(rec, flow, None, start),
            }
        })
        .map(|(i, _)| i)
        .collect()
}

/// The name a finding's flow goes by in lists.
pub fn flow_label(live: &Live, flow: Option<Uuid>) -> String {
    match flow {
        None => "-".into(),
        Some(id) => live
            .analysis
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
        .analysis
        .findings()
        .into_iter()
        .chain(live.tap.store.findings().cloned())
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
