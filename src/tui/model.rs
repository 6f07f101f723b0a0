//! The TUI's view model: what the views show, independent of where it was derived from (the
//! flow analysis, or the TUI's own record-level fallback). Plain data, cheap to build each frame.

use uuid::Uuid;

use crate::sqos::{Severity, Status};

/// One row of the Flows view.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowRow {
    pub id: Uuid,
    /// InitiatorName (the VM), or the short initiator/flow id when no name was seen.
    pub initiator: String,
    /// InitiatorNodeName (the host).
    pub node: String,
    /// What the client asked for: `Limit`/`Reservation` (IOPS), or the policy id.
    pub policy: PolicyCell,
    /// Reported IOPS (UPDATE_COUNTERS) of the latest interval.
    pub reported_iops: Option<f64>,
    /// IOPS seen on the wire (READ/WRITE on the flow's opens) in the latest interval.
    pub observed_iops: Option<f64>,
    /// Average latency of the latest interval, ms.
    pub latency_ms: Option<f64>,
    /// KB/s of the latest interval (reported by 1.1 clients, else observed).
    pub kbps: Option<f64>,
    /// The same over the whole capture so far: the figures `sqos flows` prints.
    pub avg_iops: Option<f64>,
    pub avg_latency_ms: Option<f64>,
    pub avg_kbps: Option<f64>,
    /// The server's MaximumIoRate / MinimumIoRate last answered.
    pub max_rate: Option<u64>,
    pub min_rate: Option<u64>,
    pub status: Option<Status>,
    pub findings: u64,
    pub worst: Option<Severity>,
}

/// The policy column: limits when given, else the policy id.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum PolicyCell {
    #[default]
    None,
    Limits {
        limit: u64,
        reservation: u64,
    },
    Policy(Uuid),
}

impl PolicyCell {
    pub fn label(&self) -> String {
        match self {
            PolicyCell::None => "-".into(),
            PolicyCell::Limits { limit, reservation } => format!("{limit}/{reservation}"),
            // As `sqos flows` says it.
            PolicyCell::Policy(p) => format!("policy {}", short_id(p)),
        }
    }
    /// Sort key: limit first, policies after limits, nothing last.
    pub fn sort_key(&self) -> (u8, u64, u64) {
        match self {
            PolicyCell::Limits { limit, reservation } => (0, *limit, *reservation),
            PolicyCell::Policy(p) => (1, p.as_u64_pair().0, 0),
            PolicyCell::None => (2, 0, 0),
        }
    }
}

/// One point of a flow's time series (one update interval).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct SeriesPoint {
    /// Seconds since the capture start, at the interval's start.
    pub t0: f64,
    /// Seconds since the capture start, at the interval's end.
    pub t: f64,
    pub reported_iops: Option<f64>,
    pub observed_iops: Option<f64>,
    pub latency_ms: Option<f64>,
    pub kbps: Option<f64>,
    /// The server's MaximumIoRate / MinimumIoRate / MaximumBandwidth in effect.
    pub max_rate: Option<u64>,
    pub min_rate: Option<u64>,
    pub max_bandwidth: Option<u64>,
}

/// An open associated with a flow.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenRow {
    pub frame: u64,
    pub t: f64,
    pub file_name: String,
    /// The client address of the connection.
    pub host: String,
    pub ended_frame: Option<u64>,
}

/// A channel (connection of a session) a flow's I/O and SQOS requests went over.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelRow {
    pub first_frame: u64,
    /// `client → server`.
    pub ends: String,
    /// How the session joined the connection: setup, binding, seen (or `-`).
    pub joined: String,
    pub io_count: u64,
    pub sqos_requests: u64,
    /// How and where it ended (`rst @1234`, `silent @99`), `-` while open.
    pub ended: String,
}

/// A change of what the server said about a flow.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelineRow {
    pub frame: u64,
    pub t: f64,
    pub text: String,
    pub status: Option<Status>,
}

/// A finding, at flow or message level.
#[derive(Clone, Debug, PartialEq)]
pub struct FindingRow {
    pub severity: Severity,
    pub code: String,
    pub message: String,
    pub frame: u64,
    pub t: f64,
    /// The flow it concerns, if any.
    pub flow: Option<Uuid>,
    /// Times it happened (findings that repeat are folded).
    pub occurrences: u32,
}

/// Everything the Flow detail view shows.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct FlowDetail {
    pub id: Uuid,
    pub initiator_name: Option<String>,
    pub node_name: Option<String>,
    pub initiator_id: Option<Uuid>,
    pub policy_id: Option<Uuid>,
    pub dialect: Option<String>,
    pub limit: Option<u64>,
    pub reservation: Option<u64>,
    pub bandwidth_limit: Option<u64>,
    pub max_rate: Option<u64>,
    pub min_rate: Option<u64>,
    pub max_bandwidth: Option<u64>,
    pub base_io_size: Option<u32>,
    pub ttl_ms: Option<u32>,
    pub status: Option<Status>,
    /// Whole-capture averages.
    pub avg_reported_iops: Option<f64>,
    pub avg_observed_iops: Option<f64>,
    pub avg_latency_ms: Option<f64>,
    pub avg_kbps: Option<f64>,
    pub series: Vec<SeriesPoint>,
    pub opens: Vec<OpenRow>,
    pub channels: Vec<ChannelRow>,
    pub timeline: Vec<TimelineRow>,
    pub findings: Vec<FindingRow>,
}

/// Short form of a GUID: its first 8 hex digits, as the text output uses.
pub fn short_id(u: &Uuid) -> String {
    let s = u.to_string();
    s.get(..8).map(str::to_string).unwrap_or(s)
}

/// Short, fixed status names for narrow columns.
pub fn status_label(s: Option<Status>) -> String {
    match s {
        None => "-".into(),
        Some(Status::OK) => "Ok".into(),
        Some(Status::INSUFFICIENT_THROUGHPUT) => "Insufficient".into(),
        Some(Status::UNKNOWN_POLICY_ID) => "UnknownPolicy".into(),
        Some(Status::CONFIGURATION_MISMATCH) => "Mismatch".into(),
        Some(Status::NOT_AVAILABLE) => "NotAvailable".into(),
        Some(Status(v)) => format!("0x{v:x}"),
    }
}

/// A latency for a table cell, in ms with two decimals (sub-millisecond latencies are common).
pub fn latency_cell(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.2}"),
        _ => "-".into(),
    }
}

/// A rate for a table cell: integers when large, one decimal when small, `-` when unknown.
pub fn rate_cell(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if !x.is_finite() => "-".into(),
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
    }
}
