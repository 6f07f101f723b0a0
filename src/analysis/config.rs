//! Bounds and tolerances of the analysis (documented in docs/analysis.md).

use crate::budget::{Budget, Kind};

/// How far a figure may stray before a finding fires.
#[derive(Clone, Debug, PartialEq)]
pub struct Tolerances {
    /// A rate over T seconds exceeds a maximum when
    /// rate > maximum × (1 + burst_secs / T) × (1 + rate_rel) + rate_abs
    /// (a pacing client may start `burst_secs` worth of I/O at once, section 3.1.7.1 averages).
    /// A rate misses a minimum when rate < minimum × (1 − rate_rel) − rate_abs.
    pub rate_rel: f64,
    pub rate_abs: f64,
    pub burst_secs: f64,
    /// Below-reservation needs demand: the client queued its I/O at least this long on average
    /// ((LatencyIncrement − LowerLatencyIncrement) / IoCountIncrement), else the flow simply
    /// asked for less than its reservation.
    pub backlog_ms: f64,
    /// Rate checks skip intervals shorter than this (averages over tiny windows are noise).
    pub min_window_secs: f64,
    /// Reported and observed counts disagree when |a − b| > max(counters_abs, counters_rel × max(a, b)).
    pub counters_rel: f64,
    pub counters_abs: f64,
    /// A status request is late when it comes after TimeToLive + max(poll_grace_min_secs,
    /// poll_grace_rel × TimeToLive) while the flow kept doing I/O.
    pub poll_grace_rel: f64,
    pub poll_grace_min_secs: f64,
    /// Section 3.1.6: a GET_STATUS within this many seconds of a SET_POLICY (+ grace).
    pub set_policy_status_secs: f64,
    pub set_policy_grace_secs: f64,
    /// A request is "never answered" only if the capture went on this long after it.
    pub unanswered_grace_secs: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances {
            rate_rel: 0.10,
            rate_abs: 1.0,
            burst_secs: 0.25,
            backlog_ms: 1.0,
            min_window_secs: 0.5,
            counters_rel: 0.05,
            counters_abs: 2.0,
            poll_grace_rel: 0.25,
            poll_grace_min_secs: 0.5,
            set_policy_status_secs: 1.0,
            set_policy_grace_secs: 0.25,
            unanswered_grace_secs: 5.0,
        }
    }
}

/// Memory bounds: whatever the capture holds, the analyzer's state stays under these. The
/// defaults are the shares of the default memory budget ([`AnalyzerConfig::with_memory`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AnalyzerConfig {
    pub tolerances: Tolerances,
    /// Logical flows followed; further flows are counted (the flows share), not followed.
    pub max_flows: usize,
    /// Opens followed at once (closed opens are forgotten); their names count too.
    pub max_opens: usize,
    /// Requests waiting for their response; the oldest is dropped beyond this.
    pub max_pending: usize,
    /// Channels (session × connection) followed at once (the flow-channels share in entries;
    /// the flows each lists are charged on top); beyond, a channel's addresses and how it
    /// joined are not known to the flows that use it.
    pub max_channels: usize,
    /// Series rows kept over all flows; each flow keeps between `series_min_rows` and
    /// `series_max_rows`, halving its resolution (merging neighbours) when over its share.
    pub series_budget_rows: usize,
    pub series_min_rows: usize,
    pub series_max_rows: usize,
    /// Per flow: timeline entries, opens and findings kept (first and latest halves).
    pub timeline_cap: usize,
    pub opens_cap: usize,
    pub findings_cap: usize,
    /// Hand every finished interval row to `Analyzer::drain_rows` (for streaming exports).
    pub stream_rows: bool,
}

impl Default for AnalyzerConfig {
    fn default() -> Self {
        AnalyzerConfig {
            tolerances: Tolerances::default(),
            max_flows: 0,
            max_opens: 0,
            max_pending: 0,
            max_channels: 200_000,
            series_budget_rows: 0,
            series_min_rows: 4,
            series_max_rows: 1024,
            timeline_cap: 32,
            opens_cap: 32,
            findings_cap: 64,
            stream_rows: false,
        }
        .with_memory(&Budget::default())
    }
}

/// What one series row costs (rows are pushed with exact growth).
pub const SERIES_ROW_COST: usize = std::mem::size_of::<super::IntervalRow>();

impl AnalyzerConfig {
    /// Bounds from the run's memory budget: half the flows share for the flows' own state
    /// (`Kind::Flows.entry_cost` each), half for their series rows; the flow-opens and
    /// flow-requests shares in entries (names and requests are charged on top).
    pub fn with_memory(mut self, budget: &Budget) -> Self {
        let flows = budget.limit(Kind::Flows) / 2;
        self.max_flows = (flows / Kind::Flows.entry_cost()).max(1);
        self.series_budget_rows = (flows / SERIES_ROW_COST).max(1);
        self.max_opens = budget.share(Kind::FlowOpens).max_entries();
        self.max_pending = budget.share(Kind::FlowRequests).max_entries();
        self.max_channels = budget.share(Kind::FlowChannels).max_entries();
        self
    }
}
