//! The analyzer: a `RecordSink` fed in frame order that follows opens and flows, applies each
//! request when its final response arrives, and collects the findings.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use uuid::Uuid;

use super::config::AnalyzerConfig;
use super::finding::{FlowFinding, FlowFindingCode};
use super::flow::FlowState;
use super::interval::{Counters, IntervalRow};
use super::nt::{
    status_name, STATUS_INVALID_DEVICE_REQUEST, STATUS_INVALID_PARAMETER, STATUS_NOT_FOUND,
    STATUS_NOT_SUPPORTED, STATUS_REVISION_MISMATCH, STATUS_SUCCESS,
};
use super::open::{AssociatedBy, Association, OpenKey, OpenState};
use super::rules::{evaluate, AssociationChange, Outcome, RequestFacts};
use crate::capture::Timestamp;
use crate::net::ConnId;
use crate::pipeline::{
    CaptureNote, CloseRecord, Direction, IoRecord, OpenRecord, RecordSink, SqosBody, SqosRecord,
};
use crate::run::CaptureSink;
use crate::sqos::{Options, Request, Response, Severity};

/// Notes the analyzer keeps about itself (bounds hit); the rest are counted.
const MAX_NOTES: usize = 32;

/// A request waiting for its final response.
#[derive(Clone, Debug)]
struct Pending {
    frame: u64,
    ts: Timestamp,
    key: Option<OpenKey>,
    request: Option<Box<Request>>,
    request_size: Option<usize>,
    max_output: Option<u32>,
    /// The flow the request concerns, as judged when it was sent.
    flow: Option<Uuid>,
}

/// What the analysis found: one entry per logical flow, in order of first appearance.
#[derive(Debug)]
pub struct Analysis {
    pub flows: Vec<FlowState>,
    /// Time of the first frame (or first record) and of the last record.
    pub start: Option<Timestamp>,
    pub end: Option<Timestamp>,
    /// Capture notes the pipeline gave (gaps, bounds): observed figures may be incomplete.
    pub capture_notes: u64,
    /// What the analyzer itself had to leave out (its bounds).
    pub notes: Vec<String>,
    /// Rows not yet drained when streaming rows (`AnalyzerConfig::stream_rows`).
    pub rows: Vec<(Uuid, IntervalRow)>,
}

pub struct Analyzer {
    cfg: AnalyzerConfig,
    opens: HashMap<OpenKey, OpenState>,
    /// Boxed: the table's empty buckets then cost a pointer, not a whole flow.
    flows: HashMap<Uuid, Box<FlowState>>,
    pending: HashMap<(ConnId, u64), Pending>,
    /// Insertion order of `pending` (with stale keys, compacted when it grows), for eviction.
    pending_order: VecDeque<((ConnId, u64), u64)>,
    /// SET_POLICY → GET_STATUS deadlines (section 3.1.6).
    timers: BinaryHeap<Reverse<(Timestamp, Uuid)>>,
    start: Option<Timestamp>,
    clock: Option<Timestamp>,
    capture_notes: u64,
    notes: Vec<String>,
    dropped_flows: u64,
    dropped_opens: u64,
    evicted_pending: u64,
    rows_out: Vec<(Uuid, IntervalRow)>,
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer::new(AnalyzerConfig::default())
    }
}

/// The flow a request concerns: the one it associates, else the open's, else (state unknown)
/// the one it names.
fn request_flow(r: &Request, assoc: Association) -> Option<Uuid> {
    let id = r.logical_flow_id;
    let named = (!id.is_nil()).then_some(id);
    if r.options.contains(Options::SET_LOGICAL_FLOW_ID) {
        return named;
    }
    match assoc {
        Association::Flow(f) => Some(f),
        Association::NotAssociated => named.filter(|_| r.options.contains(Options::PROBE_POLICY)),
        Association::Unknown => named,
    }
}

fn open_key(
    conn: ConnId,
    session_id: u64,
    file_id: Option<crate::pipeline::FileId>,
) -> Option<OpenKey> {
    file_id.map(|file_id| OpenKey {
        conn,
        session_id,
        file_id,
    })
}

impl Analyzer {
    pub fn new(cfg: AnalyzerConfig) -> Self {
        Analyzer {
            cfg,
            opens: HashMap::new(),
            flows: HashMap::new(),
            pending: HashMap::new(),
            pending_order: VecDeque::new(),
            timers: BinaryHeap::new(),
            start: None,
            clock: None,
            capture_notes: 0,
            notes: Vec::new(),
            dropped_flows: 0,
            dropped_opens: 0,
            evicted_pending: 0,
            rows_out: Vec::new(),
        }
    }

    pub fn config(&self) -> &AnalyzerConfig {
        &self.cfg
    }

    /// Flows followed so far.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// A flow followed so far.
    pub fn flow(&self, id: &Uuid) -> Option<&FlowState> {
        self.flows.get(id).map(|f| &**f)
    }

    /// Opens followed now.
    pub fn open_count(&self) -> usize {
        self.opens.len()
    }

    /// Interval rows finished since the last call (only with `stream_rows`).
    pub fn drain_rows(&mut self) -> Vec<(Uuid, IntervalRow)> {
        std::mem::take(&mut self.rows_out)
    }

    fn note(&mut self, msg: String) {
        if self.notes.len() < MAX_NOTES {
            self.notes.push(msg);
        }
    }

    fn series_cap(&self) -> usize {
        (self.cfg.series_budget_rows / self.flows.len().max(1))
            .clamp(self.cfg.series_min_rows, self.cfg.series_max_rows)
    }

    /// The flow's state, created on first sight; `None` once `max_flows` are followed.
    fn flow_mut(&mut self, id: Uuid, frame: u64, ts: Timestamp) -> Option<&mut FlowState> {
        if !self.flows.contains_key(&id) {
            if self.flows.len() >= self.cfg.max_flows {
                if self.dropped_flows == 0 {
                    self.note(format!(
                        "more than {} logical flows: the others are not followed (from frame {frame})",
                        self.cfg.max_flows
                    ));
                }
                self.dropped_flows += 1;
                return None;
            }
            self.flows
                .insert(id, Box::new(FlowState::new(id, frame, ts, &self.cfg)));
        }
        self.flows.get_mut(&id).map(|f| &mut **f)
    }

    fn finding(
        &mut self,
        flow: Uuid,
        code: FlowFindingCode,
        severity: Severity,
        message: String,
        frame: u64,
        ts: Timestamp,
    ) {
        if let Some(f) = self.flow_mut(flow, frame, ts) {
            f.add_finding(FlowFinding::new(code, severity, message, frame, ts));
        }
    }

    fn finalize_flow(&mut self, id: Uuid) {
        let cap = self.series_cap();
        let keep = self.cfg.stream_rows;
        if let Some(f) = self.flows.get_mut(&id) {
            let rows = f.finalize(&self.cfg, cap, false, keep);
            self.rows_out.extend(rows.into_iter().map(|r| (id, r)));
        }
    }

    /// Advance the capture clock and fire the timers that ran out before `ts`.
    fn advance(&mut self, ts: Timestamp) {
        if self.start.is_none() {
            self.start = Some(ts);
        }
        if self.clock.is_none_or(|c| ts > c) {
            self.clock = Some(ts);
        }
        self.fire_timers(ts);
    }

    fn fire_timers(&mut self, now: Timestamp) {
        while let Some(Reverse((due, id))) = self.timers.peek().copied() {
            if due >= now {
                break;
            }
            self.timers.pop();
            if let Some(f) = self.flows.get_mut(&id) {
                f.policy_due_expired(due, &self.cfg.tolerances);
            }
        }
    }

    fn open_mut_or_met(&mut self, key: OpenKey, file_name: Option<&str>) -> Option<&mut OpenState> {
        if !self.opens.contains_key(&key) {
            if self.opens.len() >= self.cfg.max_opens {
                self.drop_open();
                return None;
            }
            self.opens.insert(key, OpenState::met(file_name));
        }
        self.opens.get_mut(&key)
    }

    fn drop_open(&mut self) {
        if self.dropped_opens == 0 {
            let msg = format!(
                "more than {} opens at once: further opens are not followed",
                self.cfg.max_opens
            );
            self.note(msg);
        }
        self.dropped_opens += 1;
    }

    fn associate(&mut self, key: OpenKey, flow: Uuid, by: AssociatedBy, frame: u64, ts: Timestamp) {
        let Some(open) = self.open_mut_or_met(key, None) else {
            return;
        };
        let old = open.association;
        if old == Association::Flow(flow) {
            return;
        }
        open.association = Association::Flow(flow);
        let file_name = open.file_name.clone();
        if let Some(o) = old.flow() {
            if let Some(f) = self.flows.get_mut(&o) {
                f.end_open(&key, frame);
            }
        }
        if let Some(f) = self.flow_mut(flow, frame, ts) {
            f.add_open(super::flow::OpenEntry {
                open: key,
                file_name,
                by,
                frame,
                ts,
                ended_frame: None,
            });
            if by == AssociatedBy::Inferred {
                f.mark_inferred();
            }
        }
    }

    fn dissociate(&mut self, key: OpenKey, frame: u64) {
        let Some(open) = self.opens.get_mut(&key) else {
            return;
        };
        let old = std::mem::replace(&mut open.association, Association::NotAssociated);
        if let Some(f) = old.flow().and_then(|o| self.flows.get_mut(&o)) {
            f.end_open(&key, frame);
        }
    }

    fn remember_pending(&mut self, id: (ConnId, u64), p: Pending) {
        while self.pending.len() >= self.cfg.max_pending {
            let Some((old, frame)) = self.pending_order.pop_front() else {
                break;
            };
            if self.pending.get(&old).is_some_and(|q| q.frame == frame) {
                self.pending.remove(&old);
                if self.evicted_pending == 0 {
                    let msg = format!(
                        "more than {} requests waiting for a response: the oldest are forgotten",
                        self.cfg.max_pending
                    );
                    self.note(msg);
                }
                self.evicted_pending += 1;
            }
        }
        self.pending_order.push_back((id, p.frame));
        self.pending.insert(id, p);
        if self.pending_order.len() > 2 * self.pending.len().max(1024) {
            let pending = &self.pending;
            self.pending_order
                .retain(|(k, f)| pending.get(k).is_some_and(|p| p.frame == *f));
        }
    }

    fn on_request(&mut self, rec: SqosRecord) {
        let key = open_key(rec.conn, rec.session_id, rec.file_id);
        let request = match rec.body {
            SqosBody::Request(d) => d.message.map(Box::new),
            _ => None,
        };
        let assoc = match key {
            Some(k) => self
                .open_mut_or_met(k, rec.file_name.as_deref())
                .map_or(Association::Unknown, |o| o.association),
            None => Association::Unknown,
        };
        let flow = request.as_deref().and_then(|r| request_flow(r, assoc));
        if let (Some(r), Some(id)) = (request.as_deref(), flow) {
            let notes = self.capture_notes;
            if let Some(f) = self.flow_mut(id, rec.frame, rec.ts) {
                f.on_request(r, rec.frame, rec.ts, notes);
            }
            self.finalize_flow(id);
        }
        let p = Pending {
            frame: rec.frame,
            ts: rec.ts,
            key,
            request,
            request_size: (!rec.buffer_truncated).then_some(rec.buffer.len()),
            max_output: rec.max_output_response,
            flow,
        };
        self.remember_pending((rec.conn, rec.msg_id), p);
    }

    fn on_response(&mut self, rec: SqosRecord) {
        if rec.interim {
            return;
        }
        let Some(nt) = rec.nt_status else {
            return;
        };
        let response = match &rec.body {
            SqosBody::Response(d) => d.message.as_ref(),
            _ => None,
        };
        let Some(p) = self.pending.remove(&(rec.conn, rec.msg_id)) else {
            self.response_without_request(&rec, nt, response);
            return;
        };
        let (Some(key), Some(req)) = (p.key, p.request.as_deref()) else {
            return;
        };
        let before = self
            .opens
            .get(&key)
            .map_or(Association::Unknown, |o| o.association);
        let outcome = evaluate(
            &RequestFacts {
                request: req,
                request_size: p.request_size,
                max_output_response: p.max_output,
            },
            before,
        );
        let named = (!req.logical_flow_id.is_nil()).then_some(req.logical_flow_id);
        let home = p.flow.or(named).unwrap_or(Uuid::nil());
        if nt == STATUS_SUCCESS {
            self.on_success(&rec, &p, key, req, &outcome, before, home, response);
        } else {
            self.on_failure(&rec, &p, key, req, &outcome, before, home, nt);
        }
        if let Some(f) = p.flow {
            self.finalize_flow(f);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_success(
        &mut self,
        rec: &SqosRecord,
        p: &Pending,
        key: OpenKey,
        req: &Request,
        outcome: &Outcome,
        before: Association,
        home: Uuid,
        response: Option<&Response>,
    ) {
        let (frame, ts) = (rec.frame, rec.ts);
        if let Some(rule) = outcome.violations.first() {
            self.finding(
                home,
                FlowFindingCode::ServerShouldHaveFailed,
                rule.severity(),
                format!(
                    "STATUS_SUCCESS to the request in frame {}: {}; it must fail with {}",
                    p.frame,
                    rule.describe(),
                    status_name(rule.status())
                ),
                frame,
                ts,
            );
        }
        let opts = req.options;
        let unknown = before == Association::Unknown;
        match outcome.change {
            AssociationChange::Set(id) => {
                let by = if opts.contains(Options::SET_LOGICAL_FLOW_ID) {
                    AssociatedBy::SetLogicalFlowId
                } else if unknown {
                    AssociatedBy::Inferred
                } else {
                    AssociatedBy::ProbePolicy
                };
                self.associate(key, id, by, frame, ts);
            }
            AssociationChange::Clear => self.dissociate(key, frame),
            AssociationChange::Keep => {
                let needs_flow = opts.contains(Options::SET_POLICY)
                    || opts.contains(Options::UPDATE_COUNTERS)
                    || opts.contains(Options::GET_STATUS);
                // Success proves the open is associated: with the flow the answer names, else
                // the one the request names.
                let shown = response
                    .map(|r| r.logical_flow_id)
                    .filter(|id| !id.is_nil())
                    .or(p.flow);
                if let (true, true, Some(id)) = (unknown, needs_flow, shown) {
                    self.associate(key, id, AssociatedBy::Inferred, frame, ts);
                }
            }
        }
        let flow = self
            .opens
            .get(&key)
            .and_then(|o| o.association.flow())
            .or(p.flow);
        let tol = self.cfg.tolerances.clone();
        if let Some(id) = flow {
            if outcome.applies_policy {
                let armed = self.flow_mut(id, frame, ts).and_then(|f| {
                    f.apply_policy(req, frame, ts);
                    let wants_timer =
                        opts.contains(Options::SET_POLICY) && !opts.contains(Options::GET_STATUS);
                    wants_timer
                        .then(|| f.arm_policy_due(p.ts, p.frame, &tol))
                        .flatten()
                });
                if let Some(due) = armed {
                    self.timers.push(Reverse((due.due, id)));
                }
            }
        }
        if opts.contains(Options::UPDATE_COUNTERS) {
            if let Some(f) = p.flow.and_then(|id| self.flows.get_mut(&id)) {
                f.update_answered(p.frame, Some(Counters::from_request(req)));
            }
        }
        if opts.contains(Options::GET_STATUS) {
            self.status_answer(rec, p, flow, unknown, response, &tol);
        }
    }

    fn status_answer(
        &mut self,
        rec: &SqosRecord,
        p: &Pending,
        flow: Option<Uuid>,
        inferred: bool,
        response: Option<&Response>,
        tol: &super::config::Tolerances,
    ) {
        let (frame, ts) = (rec.frame, rec.ts);
        let home = flow.unwrap_or(Uuid::nil());
        let Some(r) = response else {
            self.finding(
                home,
                FlowFindingCode::ServerStateMismatch,
                Severity::Error,
                format!(
                    "GET_STATUS of frame {} succeeded without a STORAGE_QOS_CONTROL_RESPONSE (section 3.2.5.1.4)",
                    p.frame
                ),
                frame,
                ts,
            );
            return;
        };
        let mut problems = Vec::new();
        if let Some(id) = flow.filter(|id| !inferred && r.logical_flow_id != *id) {
            problems.push(format!(
                "LogicalFlowID {} but the open is associated with {id}",
                r.logical_flow_id
            ));
        }
        let policy = flow
            .and_then(|id| self.flows.get(&id))
            .and_then(|f| f.policy);
        if let Some(pv) = policy {
            if r.policy_id != pv.policy_id {
                problems.push(format!(
                    "PolicyID {} but the flow's policy is {}",
                    r.policy_id, pv.policy_id
                ));
            }
            if r.initiator_id != pv.initiator_id {
                problems.push(format!(
                    "InitiatorID {} but the flow's initiator is {}",
                    r.initiator_id, pv.initiator_id
                ));
            }
        }
        if !problems.is_empty() {
            self.finding(
                home,
                FlowFindingCode::ServerStateMismatch,
                Severity::Error,
                format!(
                    "GET_STATUS answer does not match the state (section 3.2.5.1.4): {}",
                    problems.join("; ")
                ),
                frame,
                ts,
            );
        }
        if let Some(f) = flow.and_then(|id| self.flow_mut(id, frame, ts)) {
            f.apply_server(r, frame, ts, tol);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_failure(
        &mut self,
        rec: &SqosRecord,
        p: &Pending,
        key: OpenKey,
        req: &Request,
        outcome: &Outcome,
        before: Association,
        home: Uuid,
        nt: u32,
    ) {
        let (frame, ts) = (rec.frame, rec.ts);
        let got = status_name(nt);
        // Section 3.2.5.1: a server without Storage QoS fails everything this way, before any
        // other rule.
        if nt == STATUS_INVALID_DEVICE_REQUEST || nt == STATUS_NOT_SUPPORTED {
            if let Some(f) = self.flow_mut(home, frame, ts) {
                f.note_unsupported(&got, frame, ts);
            }
        } else if outcome.violations.iter().any(|v| v.status() == nt) {
            // The failure the spec prescribes.
        } else if let Some(rule) = outcome.violations.first() {
            self.finding(
                home,
                FlowFindingCode::ServerWrongError,
                Severity::Warning,
                format!(
                    "the request in frame {} failed with {got}; the spec prescribes {} because {}",
                    p.frame,
                    status_name(rule.status()),
                    rule.describe()
                ),
                frame,
                ts,
            );
        } else if !outcome.uncertain {
            let unfounded = match nt {
                STATUS_NOT_FOUND | STATUS_REVISION_MISMATCH => true,
                // Implementation-defined field checks (<8>) only apply to SET_POLICY / PROBE.
                STATUS_INVALID_PARAMETER => !outcome.applies_policy,
                _ => false,
            };
            if unfounded {
                self.finding(
                    home,
                    FlowFindingCode::ServerWronglyFailed,
                    Severity::Error,
                    format!(
                        "the request in frame {} ({}) failed with {got} though no rule of section 3.2.5.1 applies",
                        p.frame,
                        req.options.names().join("|")
                    ),
                    frame,
                    ts,
                );
            }
        }
        // A NOT_FOUND tells us an open of unknown state is not associated.
        if nt == STATUS_NOT_FOUND
            && before == Association::Unknown
            && outcome.change == AssociationChange::Keep
        {
            if let Some(o) = self.opens.get_mut(&key) {
                o.association = Association::NotAssociated;
            }
        }
        if req.options.contains(Options::UPDATE_COUNTERS) {
            if let Some(f) = p.flow.and_then(|id| self.flows.get_mut(&id)) {
                f.update_answered(p.frame, None);
            }
        }
    }

    /// The request was not seen (capture began after it): learn what the answer shows.
    fn response_without_request(&mut self, rec: &SqosRecord, nt: u32, response: Option<&Response>) {
        let (Some(r), true) = (response, nt == STATUS_SUCCESS) else {
            return;
        };
        if r.logical_flow_id.is_nil() {
            return;
        }
        if let Some(key) = open_key(rec.conn, rec.session_id, rec.file_id) {
            let unknown = self
                .opens
                .get(&key)
                .is_none_or(|o| o.association == Association::Unknown);
            if unknown {
                self.associate(
                    key,
                    r.logical_flow_id,
                    AssociatedBy::Inferred,
                    rec.frame,
                    rec.ts,
                );
            }
        }
        let tol = self.cfg.tolerances.clone();
        if let Some(f) = self.flow_mut(r.logical_flow_id, rec.frame, rec.ts) {
            f.apply_server(r, rec.frame, rec.ts, &tol);
        }
    }

    /// End of input: requests never answered, timers, unfinished intervals.
    pub fn finish(mut self) -> Analysis {
        let end = self.clock;
        let grace = self.cfg.tolerances.unanswered_grace_secs;
        let mut unanswered: Vec<Pending> = self.pending.drain().map(|(_, p)| p).collect();
        unanswered.sort_by_key(|p| p.frame);
        for p in unanswered {
            let waited = end.map_or(0.0, |e| e.secs_since(p.ts));
            if waited < grace {
                continue;
            }
            let named = p
                .request
                .as_deref()
                .map(|r| r.logical_flow_id)
                .filter(|id| !id.is_nil());
            let home = p.flow.or(named).unwrap_or(Uuid::nil());
            let what = p
                .request
                .as_deref()
                .map(|r| r.options.names().join("|"))
                .unwrap_or_else(|| "undecoded".into());
            self.finding(
                home,
                FlowFindingCode::RequestUnanswered,
                Severity::Warning,
                format!(
                    "the request in frame {} ({what}) got no response in the {waited:.1} s the capture went on",
                    p.frame
                ),
                p.frame,
                p.ts,
            );
        }
        if let Some(e) = end {
            // Deadlines that passed within the capture.
            self.fire_timers(Timestamp(e.0.saturating_add(1)));
        }
        let cap = self.series_cap();
        let keep = self.cfg.stream_rows;
        let mut rows = std::mem::take(&mut self.rows_out);
        let mut flows: Vec<FlowState> = self.flows.into_values().map(|f| *f).collect();
        // In order of appearance (flows first seen in the same frame by id, so the order does
        // not depend on the hash table's); the catch-all null flow (findings of no flow) last.
        flows.sort_by_key(|f| (f.id.is_nil(), f.first_frame, f.id));
        for f in &mut flows {
            let id = f.id;
            rows.extend(
                f.finalize(&self.cfg, cap, true, keep)
                    .into_iter()
                    .map(|r| (id, r)),
            );
        }
        let mut notes = self.notes;
        if self.dropped_flows > 0 {
            notes.push(format!("{} flows were not followed", self.dropped_flows));
        }
        if self.evicted_pending > 0 {
            notes.push(format!(
                "{} requests were forgotten before their response",
                self.evicted_pending
            ));
        }
        Analysis {
            flows,
            start: self.start,
            end,
            capture_notes: self.capture_notes,
            notes,
            rows,
        }
    }
}

impl RecordSink for Analyzer {
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.advance(rec.ts);
        match rec.direction {
            Direction::Request => self.on_request(rec),
            Direction::Response => self.on_response(rec),
        }
    }

    fn on_open(&mut self, rec: &OpenRecord) {
        self.advance(rec.ts);
        let key = OpenKey {
            conn: rec.conn,
            session_id: rec.session_id,
            file_id: rec.file_id,
        };
        if let Some(old) = self.opens.get(&key).and_then(|o| o.association.flow()) {
            if let Some(f) = self.flows.get_mut(&old) {
                f.end_open(&key, rec.frame);
            }
        } else if !self.opens.contains_key(&key) && self.opens.len() >= self.cfg.max_opens {
            self.drop_open();
            return;
        }
        self.opens.insert(key, OpenState::created(&rec.file_name));
    }

    fn on_close(&mut self, rec: &CloseRecord) {
        self.advance(rec.ts);
        let key = OpenKey {
            conn: rec.conn,
            session_id: rec.session_id,
            file_id: rec.file_id,
        };
        if let Some(old) = self.opens.remove(&key).and_then(|o| o.association.flow()) {
            if let Some(f) = self.flows.get_mut(&old) {
                f.end_open(&key, rec.frame);
            }
        }
    }

    fn on_io(&mut self, rec: &IoRecord) {
        self.advance(rec.response_ts);
        let key = OpenKey {
            conn: rec.conn,
            session_id: rec.session_id,
            file_id: rec.file_id,
        };
        let Some(id) = self.opens.get(&key).and_then(|o| o.association.flow()) else {
            return;
        };
        if let Some(f) = self.flows.get_mut(&id) {
            f.add_io(
                rec.request_ts,
                rec.response_ts,
                rec.response_frame,
                rec.requested,
            );
        }
    }

    fn on_note(&mut self, _note: &CaptureNote) {
        self.capture_notes += 1;
    }
}

impl CaptureSink for Analyzer {
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.start = Some(ts);
    }
}
