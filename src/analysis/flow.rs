//! Per-logical-flow state (sections 3.1.1.2 and 3.2.1.3 as seen from the wire): identity,
//! policy, the server's last answer and its changes, the opens, the counter series and the
//! observed I/O, the findings. Every collection in it is bounded.

use std::collections::VecDeque;
use std::sync::Arc;

use uuid::Uuid;

use super::capped::Capped;
use super::channel::{ChannelEnding, ChannelInfo, ChannelUse, FlowChannel, MAX_CHANNELS_PER_FLOW};
use super::checks::check_row;
use super::config::{AnalyzerConfig, Tolerances};
use super::finding::{FlowFinding, FlowFindingCode};
use super::interval::{Counters, InEffect, IntervalRow, Observed, ObservedRates, Rates, Series};
use super::open::{AssociatedBy, OpenKey};
use super::view::UpdateAnswer;
use crate::capture::Timestamp;
use crate::net::ConnId;
use crate::sqos::{
    Options, ProtocolVersion, Request, Response, Severity, Status, DEFAULT_BASE_IO_SIZE,
};

/// Unfinished interval rows kept waiting for late I/O or their update's answer.
const MAX_UNFINISHED: usize = 4;
/// Distinct initiator ids / node names remembered per flow (enough to tell "more than one").
const MAX_INITIATORS: usize = 4;
/// Section 3.1.5.1 with note <5>: TimeToLive ≤ 1000 ms means the client's default, 1 s.
const DEFAULT_STATUS_INTERVAL_MS: u32 = 1000;

/// The policy parameters a successful SET_POLICY / PROBE_POLICY set (section 3.2.5.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyView {
    pub policy_id: Uuid,
    pub initiator_id: Uuid,
    pub limit: u64,
    pub reservation: u64,
    /// Dialect 1.1 requests only.
    pub bandwidth_limit: Option<u64>,
}

/// The server's answer to a GET_STATUS (section 2.2.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerView {
    pub protocol_version: ProtocolVersion,
    pub policy_id: Uuid,
    pub initiator_id: Uuid,
    pub time_to_live: u32,
    pub status: Status,
    pub maximum_io_rate: u64,
    pub minimum_io_rate: u64,
    pub base_io_size: u32,
    pub maximum_bandwidth: Option<u64>,
}

impl ServerView {
    pub fn from_response(r: &Response) -> Self {
        ServerView {
            protocol_version: r.protocol_version,
            policy_id: r.policy_id,
            initiator_id: r.initiator_id,
            time_to_live: r.time_to_live,
            status: r.status,
            maximum_io_rate: r.maximum_io_rate,
            minimum_io_rate: r.minimum_io_rate,
            base_io_size: r.base_io_size,
            maximum_bandwidth: r.maximum_bandwidth,
        }
    }
    /// Equal apart from TimeToLive, which servers vary on every answer.
    fn same_values(&self, o: &ServerView) -> bool {
        ServerView {
            time_to_live: 0,
            ..*self
        } == ServerView {
            time_to_live: 0,
            ..*o
        }
    }
    fn in_effect(&self) -> InEffect {
        InEffect {
            maximum_io_rate: Some(self.maximum_io_rate),
            minimum_io_rate: Some(self.minimum_io_rate),
            maximum_bandwidth: self.maximum_bandwidth,
            status_known: true,
            all_ok: self.status == Status::OK,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimelineEvent {
    Policy(PolicyView),
    Server(ServerView),
}

/// A change of the flow's policy or of the server's values (TimeToLive alone is no change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimelineEntry {
    pub frame: u64,
    pub ts: Timestamp,
    pub event: TimelineEvent,
}

/// One association of an open with this flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenEntry {
    pub open: OpenKey,
    /// The connection the association was seen on (the open serves every channel of its
    /// session).
    pub conn: ConnId,
    pub file_name: Option<Arc<str>>,
    pub by: AssociatedBy,
    pub frame: u64,
    pub ts: Timestamp,
    /// Frame of the CLOSE, dissociation or re-association that ended it.
    pub ended_frame: Option<u64>,
}

#[derive(Clone, Copy, Debug)]
struct Boundary {
    ts: Timestamp,
    frame: u64,
}

#[derive(Clone, Debug)]
struct PendingRow {
    row: IntervalRow,
    /// The update that closes the row has not been answered yet.
    awaiting: bool,
}

/// The update that opened the series: what it counted began before it was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstUpdate {
    pub frame: u64,
    pub ts: Timestamp,
    /// Its increments when the server applied it (not used for any rate).
    pub counters: Option<Counters>,
}

#[derive(Clone, Copy, Debug)]
struct StatusDue {
    due: Timestamp,
    late_after: Timestamp,
    ttl_ms: u32,
    response_frame: u64,
    /// The flow did I/O around the time the status became due (so it was not idle, 3.1.6).
    busy: bool,
}

/// A SET_POLICY without GET_STATUS: a GET_STATUS is due (section 3.1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyDue {
    pub set_at: Timestamp,
    pub due: Timestamp,
    pub frame: u64,
}

#[derive(Clone, Debug)]
pub struct FlowState {
    pub id: Uuid,
    pub first_frame: u64,
    pub first_ts: Timestamp,
    /// How many flows were met before this one: orders flows that appeared in the same frame.
    pub created: u64,
    pub initiator_id: Option<Uuid>,
    pub initiator_name: Option<String>,
    pub initiator_node_name: Option<String>,
    pub policy: Option<PolicyView>,
    /// ProtocolVersion of the latest request with a known one.
    pub protocol_version: Option<ProtocolVersion>,
    pub server: Option<ServerView>,
    pub timeline: Capped<TimelineEntry>,
    pub opens: Capped<OpenEntry>,
    /// The channels (session × connection) its SQOS messages and I/O went over, in order of
    /// first use; at most `MAX_CHANNELS_PER_FLOW`, `channels_total` counts them all.
    pub channels: Vec<FlowChannel>,
    pub channels_total: u64,
    pub series: Series,
    pub findings: Capped<FlowFinding>,
    /// Findings per code (`FlowFindingCode::index`), never capped.
    pub finding_counts: [u32; FlowFindingCode::ALL.len()],
    pub first_update: Option<FirstUpdate>,
    /// UPDATE_COUNTERS requests sent / applied by the server.
    pub updates_sent: u64,
    pub updates_applied: u64,
    /// Whole capture: applied increments after the first update, and the seconds they cover.
    pub whole_reported: Counters,
    pub whole_reported_secs: f64,
    /// Whole capture: I/O seen inside the finished intervals, and their seconds.
    pub whole_observed: Observed,
    pub whole_observed_secs: f64,
    /// Every I/O seen on the flow's opens, with the first and last request times.
    pub all_io: Observed,
    pub io_span: Option<(Timestamp, Timestamp)>,
    /// I/O that completed too late for its interval (the interval was already finished).
    pub late_io: u64,
    pub policy_due: Option<PolicyDue>,

    boundary: Option<Boundary>,
    current: Observed,
    current_effect: InEffect,
    current_notes: u64,
    current_incomplete: bool,
    unfinished: VecDeque<PendingRow>,
    next_index: u64,
    initiator_ids: Vec<Uuid>,
    node_names: Vec<Box<str>>,
    episodes: Vec<FlowFinding>,
    status_due: Option<StatusDue>,
    /// A late status poll, confirmed by the next GET_STATUS unless it is a replay.
    late_poll: Option<FlowFinding>,
    last_status_request: Option<Timestamp>,
    insufficient: bool,
    reported_once: u8,
}

/// `reported_once` bits: findings given once per flow.
const ONCE_MULTI_ID: u8 = 1;
const ONCE_MULTI_NODE: u8 = 2;
const ONCE_UNSUPPORTED: u8 = 4;

impl FlowState {
    pub fn new(id: Uuid, frame: u64, ts: Timestamp, cfg: &AnalyzerConfig) -> Self {
        FlowState {
            id,
            first_frame: frame,
            first_ts: ts,
            created: 0,
            initiator_id: None,
            initiator_name: None,
            initiator_node_name: None,
            policy: None,
            protocol_version: None,
            server: None,
            timeline: Capped::new(cfg.timeline_cap),
            opens: Capped::new(cfg.opens_cap),
            channels: Vec::new(),
            channels_total: 0,
            series: Series::default(),
            findings: Capped::new(cfg.findings_cap),
            finding_counts: [0; FlowFindingCode::ALL.len()],
            first_update: None,
            updates_sent: 0,
            updates_applied: 0,
            whole_reported: Counters::default(),
            whole_reported_secs: 0.0,
            whole_observed: Observed::default(),
            whole_observed_secs: 0.0,
            all_io: Observed::default(),
            io_span: None,
            late_io: 0,
            policy_due: None,
            boundary: None,
            current: Observed::default(),
            current_effect: InEffect::default(),
            current_notes: 0,
            current_incomplete: false,
            unfinished: VecDeque::new(),
            next_index: 0,
            initiator_ids: Vec::new(),
            node_names: Vec::new(),
            episodes: Vec::new(),
            status_due: None,
            late_poll: None,
            last_status_request: None,
            insufficient: false,
            reported_once: 0,
        }
    }

    /// The BaseIoSize observed I/O is normalized with: the server's, else the default.
    pub fn base_io_size(&self) -> u32 {
        self.server
            .map(|s| s.base_io_size)
            .filter(|&b| b > 0)
            .unwrap_or(DEFAULT_BASE_IO_SIZE)
    }

    /// Whole-capture figures from the reported counters (`None` before a second update).
    pub fn reported_rates(&self) -> Option<Rates> {
        self.whole_reported.rates(self.whole_reported_secs)
    }

    /// Whole-capture observed figures: over every finished interval when there are any (failed
    /// or unanswered updates included: the wire lost nothing, unlike the reported counts), else
    /// from the first to the last I/O request.
    pub fn observed_rates(&self) -> Option<ObservedRates> {
        if self.whole_observed_secs > 0.0 {
            return self.whole_observed.rates(self.whole_observed_secs);
        }
        let (first, last) = self.io_span?;
        self.all_io.rates(last.secs_since(first))
    }

    pub fn findings_total(&self) -> u64 {
        self.finding_counts.iter().map(|&n| u64::from(n)).sum()
    }

    pub fn add_finding(&mut self, f: FlowFinding) {
        if let Some(n) = self.finding_counts.get_mut(f.code.index()) {
            *n = n.saturating_add(1);
        }
        self.findings.push(f);
    }

    pub fn add_open(&mut self, entry: OpenEntry) {
        self.opens.push(entry);
    }

    /// The association of `open` with this flow ended at `frame`.
    pub fn end_open(&mut self, open: &OpenKey, frame: u64) {
        if let Some(e) = self
            .opens
            .iter_mut()
            .rev()
            .find(|e| e.open == *open && e.ended_frame.is_none())
        {
            e.ended_frame = Some(frame);
        }
    }

    /// Count a use of a channel the flow already lists; false if it does not list it.
    pub fn touch_channel(
        &mut self,
        conn: ConnId,
        session_id: u64,
        frame: u64,
        used: ChannelUse,
    ) -> bool {
        let Some(c) = self
            .channels
            .iter_mut()
            .find(|c| c.conn == conn && c.session_id == session_id)
        else {
            return false;
        };
        c.used(frame, used);
        true
    }

    /// The flow used `conn` of `session` at `frame` (an I/O completed there, or an SQOS request
    /// was sent there). Returns true the first time the flow uses that channel.
    pub fn saw_channel(
        &mut self,
        conn: ConnId,
        session_id: u64,
        info: Option<&ChannelInfo>,
        frame: u64,
        used: ChannelUse,
    ) -> bool {
        let at = self
            .channels
            .iter()
            .position(|c| c.conn == conn && c.session_id == session_id);
        let (idx, new) = match at {
            Some(i) => (i, false),
            None => {
                self.channels_total += 1;
                if self.channels.len() >= MAX_CHANNELS_PER_FLOW {
                    return true;
                }
                self.channels.reserve_exact(1);
                self.channels
                    .push(FlowChannel::new(conn, session_id, info, frame));
                (self.channels.len() - 1, true)
            }
        };
        if let Some(c) = self.channels.get_mut(idx) {
            c.used(frame, used);
        }
        new
    }

    /// The flow's entry for a channel, if listed.
    pub fn channel_mut(&mut self, conn: ConnId, session_id: u64) -> Option<&mut FlowChannel> {
        self.channels
            .iter_mut()
            .find(|c| c.conn == conn && c.session_id == session_id)
    }

    /// A channel the flow used ended.
    pub fn channel_ended(
        &mut self,
        conn: ConnId,
        session_id: u64,
        ending: ChannelEnding,
        (frame, ts): (u64, Timestamp),
    ) {
        if let Some(c) = self.channel_mut(conn, session_id) {
            if c.ended.is_none() {
                c.ended = Some(ending);
                c.ended_frame = Some(frame);
                c.ended_ts = Some(ts);
            }
        }
    }

    /// Channels listed that were still open at the end (or whose end is unknown).
    pub fn channels_open(&self) -> usize {
        self.channels.iter().filter(|c| c.ended.is_none()).count()
    }

    /// A channel the flow used failed, or the client shows it noticed one (a replay, a raised
    /// ChannelSequence): I/O stalled and moved to other channels, some was sent twice. The
    /// interval in progress and those not yet finished are not compared with the reported
    /// counters nor held against the reservation.
    pub fn channel_failure(&mut self) {
        self.current_incomplete = true;
        for p in self.unfinished.iter_mut() {
            p.row.observed_complete = false;
        }
    }

    /// An association was inferred: the interval in progress may lack that open's I/O.
    pub fn mark_inferred(&mut self) {
        self.current_incomplete = true;
    }

    /// A request on one of the flow's opens (or naming it), when it is sent. `replay`: the
    /// request is a replay (SMB2_FLAGS_REPLAY_OPERATION) whose original was not seen — sent
    /// earlier, at a time unknown, on a channel that failed.
    pub fn on_request(&mut self, r: &Request, frame: u64, ts: Timestamp, notes: u64, replay: bool) {
        if r.protocol_version.dialect().is_some() {
            self.protocol_version = Some(r.protocol_version);
        }
        if r.options.contains(Options::GET_STATUS) {
            self.last_status_request = Some(ts);
            self.status_due = None;
            if self.policy_due.is_some_and(|p| ts >= p.set_at) {
                self.policy_due = None;
            }
            // A late poll is judged when the next status request is seen: a replay's original
            // may have been on time.
            if let Some(late) = self.late_poll.take() {
                if !replay {
                    self.add_finding(late);
                }
            }
        }
        if r.options.contains(Options::UPDATE_COUNTERS) {
            if replay {
                // The client zeroed its counters when it sent the original, at a time not
                // seen: neither the interval this ends nor the next can be compared.
                self.current_incomplete = true;
            }
            self.boundary(ts, frame, notes);
            if replay {
                self.current_incomplete = true;
            }
        }
    }

    /// The client zeroed its counters when it sent this update: an interval ends here.
    fn boundary(&mut self, ts: Timestamp, frame: u64, notes: u64) {
        self.updates_sent += 1;
        match self.boundary {
            None => {
                self.first_update = Some(FirstUpdate {
                    frame,
                    ts,
                    counters: None,
                });
            }
            Some(prev) => {
                let row = IntervalRow {
                    index: self.next_index,
                    intervals: 1,
                    start: prev.ts,
                    end: ts,
                    start_frame: prev.frame,
                    end_frame: frame,
                    updates_applied: 0,
                    reported: Counters::default(),
                    reported_secs: 0.0,
                    observed: std::mem::take(&mut self.current),
                    observed_complete: self.current_notes == notes && !self.current_incomplete,
                    in_effect: self.current_effect,
                };
                self.next_index += 1;
                self.unfinished.reserve_exact(1);
                self.unfinished.push_back(PendingRow {
                    row,
                    awaiting: true,
                });
            }
        }
        self.boundary = Some(Boundary { ts, frame });
        self.current = Observed::default();
        self.current_effect = self.server.map(|s| s.in_effect()).unwrap_or_default();
        self.current_notes = notes;
        self.current_incomplete = false;
    }

    /// The answer to the UPDATE_COUNTERS sent in `request_frame`: its increments if applied.
    /// Gives what the answer means for the series (`None` when its interval is no longer kept).
    pub fn update_answered(
        &mut self,
        request_frame: u64,
        applied: Option<Counters>,
    ) -> Option<UpdateAnswer> {
        if applied.is_some() {
            self.updates_applied += 1;
        }
        if let Some(first) = self
            .first_update
            .as_mut()
            .filter(|f| f.frame == request_frame)
        {
            first.counters = applied;
            return Some(UpdateAnswer::First);
        }
        let p = self
            .unfinished
            .iter_mut()
            .find(|p| p.row.end_frame == request_frame)?;
        p.awaiting = false;
        let secs = p.row.secs();
        if let Some(c) = applied {
            p.row.reported = c;
            p.row.reported_secs = secs;
            p.row.updates_applied = 1;
        }
        Some(UpdateAnswer::Interval {
            secs,
            rates: applied.and_then(|c| c.rates(secs)),
        })
    }

    /// A successful SET_POLICY / PROBE_POLICY (section 3.2.5.1.2).
    pub fn apply_policy(&mut self, r: &Request, frame: u64, ts: Timestamp) {
        let view = PolicyView {
            policy_id: r.policy_id,
            initiator_id: r.initiator_id,
            limit: r.limit,
            reservation: r.reservation,
            bandwidth_limit: r.v1_1.map(|v| v.bandwidth_limit),
        };
        if self.policy != Some(view) {
            self.timeline.push(TimelineEntry {
                frame,
                ts,
                event: TimelineEvent::Policy(view),
            });
        }
        self.policy = Some(view);
        if r.initiator_name_length > 0 {
            if let Some(n) = &r.initiator_name {
                self.initiator_name = Some(n.clone());
            }
        }
        if r.initiator_node_name_length > 0 {
            if let Some(n) = &r.initiator_node_name {
                self.initiator_node_name = Some(n.clone());
                self.note_node(n, frame, ts);
            }
        }
        if !r.initiator_id.is_nil() {
            self.initiator_id = Some(r.initiator_id);
            self.note_initiator_id(r.initiator_id, frame, ts);
        }
    }

    fn note_initiator_id(&mut self, id: Uuid, frame: u64, ts: Timestamp) {
        if self.initiator_ids.contains(&id) || self.initiator_ids.len() >= MAX_INITIATORS {
            return;
        }
        self.initiator_ids.push(id);
        if self.initiator_ids.len() > 1 && self.reported_once & ONCE_MULTI_ID == 0 {
            self.reported_once |= ONCE_MULTI_ID;
            let ids: Vec<String> = self.initiator_ids.iter().map(Uuid::to_string).collect();
            self.add_finding(FlowFinding::new(
                FlowFindingCode::MultipleInitiators,
                Severity::Warning,
                format!(
                    "the flow was set up by several initiators: {}",
                    ids.join(", ")
                ),
                frame,
                ts,
            ));
        }
    }

    fn note_node(&mut self, node: &str, frame: u64, ts: Timestamp) {
        if self.node_names.iter().any(|n| &**n == node) || self.node_names.len() >= MAX_INITIATORS {
            return;
        }
        self.node_names.push(node.into());
        if self.node_names.len() > 1 && self.reported_once & ONCE_MULTI_NODE == 0 {
            self.reported_once |= ONCE_MULTI_NODE;
            let names: Vec<&str> = self.node_names.iter().map(|n| &**n).collect();
            self.add_finding(FlowFinding::new(
                FlowFindingCode::MultipleInitiators,
                Severity::Note,
                format!(
                    "the flow was seen on several nodes (e.g. a migration): {}",
                    names.join(", ")
                ),
                frame,
                ts,
            ));
        }
    }

    /// A successful GET_STATUS answer (section 3.1.5.1: the client takes these values).
    pub fn apply_server(&mut self, r: &Response, frame: u64, ts: Timestamp, t: &Tolerances) {
        let view = ServerView::from_response(r);
        if self.server.is_none_or(|s| !s.same_values(&view)) {
            self.timeline.push(TimelineEntry {
                frame,
                ts,
                event: TimelineEvent::Server(view),
            });
        }
        self.current_effect.merge(&view.in_effect());
        if view.status == Status::INSUFFICIENT_THROUGHPUT && !self.insufficient {
            self.add_finding(FlowFinding::new(
                FlowFindingCode::ReservationNotMet,
                Severity::Warning,
                format!(
                    "the server reports StorageQoSStatusInsufficientThroughput: it cannot give MinimumIoRate {}",
                    view.minimum_io_rate
                ),
                frame,
                ts,
            ));
        }
        self.insufficient = view.status == Status::INSUFFICIENT_THROUGHPUT;
        self.server = Some(view);
        let ttl_ms = if view.time_to_live > DEFAULT_STATUS_INTERVAL_MS {
            view.time_to_live
        } else {
            DEFAULT_STATUS_INTERVAL_MS
        };
        let ttl = f64::from(ttl_ms) / 1000.0;
        let grace = t.poll_grace_min_secs.max(t.poll_grace_rel * ttl);
        self.status_due = Some(StatusDue {
            due: add_secs(ts, ttl),
            late_after: add_secs(ts, ttl + grace),
            ttl_ms,
            response_frame: frame,
            busy: false,
        });
    }

    /// The server does not implement SQOS (STATUS_INVALID_DEVICE_REQUEST / NOT_SUPPORTED).
    pub fn note_unsupported(&mut self, status: &str, frame: u64, ts: Timestamp) {
        if self.reported_once & ONCE_UNSUPPORTED == 0 {
            self.reported_once |= ONCE_UNSUPPORTED;
            self.add_finding(FlowFinding::new(
                FlowFindingCode::ServerQosUnsupported,
                Severity::Note,
                format!("the server does not support Storage QoS: it answered {status}"),
                frame,
                ts,
            ));
        }
    }

    /// A READ/WRITE completed on one of the flow's opens. It belongs to the first update sent
    /// after the frame that completed its response (the client counts completed I/O), so it
    /// is bucketed by `response_frame`; rates use request times only for the status timer.
    pub fn add_io(
        &mut self,
        request_ts: Timestamp,
        response_ts: Timestamp,
        response_frame: u64,
        bytes: u32,
    ) {
        let base = self.base_io_size();
        let rt = response_ts.0.saturating_sub(request_ts.0);
        self.all_io.add_io(bytes, base, rt);
        self.io_span = Some(match self.io_span {
            None => (request_ts, request_ts),
            Some((a, b)) => (a.min(request_ts), b.max(request_ts)),
        });
        match self.boundary {
            None => {}
            Some(b) if response_frame > b.frame => self.current.add_io(bytes, base, rt),
            // Handed over after the update that follows it (records held back upstream).
            Some(_) => {
                match self.unfinished.iter_mut().find(|p| {
                    p.row.start_frame < response_frame && response_frame <= p.row.end_frame
                }) {
                    Some(p) => p.row.observed.add_io(bytes, base, rt),
                    None => self.late_io += 1,
                }
            }
        }
        self.check_status_due(request_ts, response_frame);
    }

    fn check_status_due(&mut self, request_ts: Timestamp, frame: u64) {
        let Some(due) = self.status_due.as_mut() else {
            return;
        };
        if request_ts <= due.late_after {
            if request_ts.0 >= due.due.0.saturating_sub(1_000_000_000) {
                due.busy = true;
            }
            return;
        }
        let due = *due;
        self.status_due = None;
        if due.busy {
            self.late_poll = Some(FlowFinding::new(
                FlowFindingCode::StatusPollLate,
                Severity::Warning,
                format!(
                    "no GET_STATUS within TimeToLive {} ms of the answer in frame {} while I/O went on (section 3.1.5.1)",
                    due.ttl_ms, due.response_frame
                ),
                frame,
                request_ts,
            ));
        }
    }

    /// A SET_POLICY without GET_STATUS was applied: arm the 1-second rule unless a GET_STATUS
    /// was already sent since.
    pub fn arm_policy_due(
        &mut self,
        set_at: Timestamp,
        frame: u64,
        t: &Tolerances,
    ) -> Option<PolicyDue> {
        if self.last_status_request.is_some_and(|s| s >= set_at) {
            return None;
        }
        let due = PolicyDue {
            set_at,
            due: add_secs(set_at, t.set_policy_status_secs + t.set_policy_grace_secs),
            frame,
        };
        self.policy_due = Some(due);
        Some(due)
    }

    /// The timer of `due` ran out: fire if it is still the armed one.
    pub fn policy_due_expired(&mut self, due: Timestamp, t: &Tolerances) {
        let Some(p) = self.policy_due.filter(|p| p.due == due) else {
            return;
        };
        self.policy_due = None;
        self.add_finding(FlowFinding::new(
            FlowFindingCode::NoStatusAfterSetPolicy,
            Severity::Warning,
            format!(
                "no GET_STATUS within {} s of the SET_POLICY in frame {} (section 3.1.6)",
                t.set_policy_status_secs, p.frame
            ),
            p.frame,
            p.set_at,
        ));
    }

    /// Finish the rows that are ready (or all of them with `force`); returns them when asked.
    pub fn finalize(
        &mut self,
        cfg: &AnalyzerConfig,
        series_cap: usize,
        force: bool,
        keep: bool,
    ) -> Vec<IntervalRow> {
        let latest = self.boundary.map(|b| b.ts);
        let mut out = Vec::new();
        while let Some(front) = self.unfinished.front() {
            let ready = force
                || self.unfinished.len() > MAX_UNFINISHED
                || (!front.awaiting && latest.is_some_and(|l| front.row.end < l));
            if !ready {
                break;
            }
            let Some(p) = self.unfinished.pop_front() else {
                break;
            };
            self.finish_row(&p.row, &cfg.tolerances);
            if keep {
                out.push(p.row.clone());
            }
            self.series.push(p.row, series_cap);
        }
        if force {
            for f in std::mem::take(&mut self.episodes) {
                self.add_finding(f);
            }
            if let Some(late) = self.late_poll.take() {
                self.add_finding(late);
            }
        }
        out
    }

    fn finish_row(&mut self, row: &IntervalRow, t: &Tolerances) {
        self.whole_reported.add(&row.reported);
        self.whole_reported_secs += row.reported_secs;
        self.whole_observed.add(&row.observed);
        self.whole_observed_secs += row.secs();
        let issues = check_row(row, t);
        // Consecutive intervals with the same problem are one finding (an episode).
        let open = std::mem::take(&mut self.episodes);
        for mut ep in open {
            if issues.iter().any(|i| i.code == ep.code) {
                ep.occurrences = ep.occurrences.saturating_add(1);
                ep.last_frame = row.end_frame;
                self.episodes.push(ep);
            } else {
                self.add_finding(ep);
            }
        }
        for i in issues {
            if !self.episodes.iter().any(|e| e.code == i.code) {
                self.episodes.push(FlowFinding::new(
                    i.code,
                    i.severity,
                    i.message,
                    row.end_frame,
                    row.end,
                ));
            }
        }
    }
}

fn add_secs(ts: Timestamp, secs: f64) -> Timestamp {
    Timestamp(ts.0.saturating_add((secs * 1e9) as i64))
}
