//! The analyzer: a `RecordSink` fed in frame order that follows opens and flows, applies each
//! request when its final response arrives, and collects the findings.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use foldhash::fast::RandomState;

use uuid::Uuid;

use super::channel::{ChannelEnding, ChannelInfo, ChannelUse, MAX_FLOWS_PER_CHANNEL};

/// What a channel's reference to one of its flows costs (its id).
const FLOW_REF_BYTES: usize = std::mem::size_of::<Uuid>();
use super::config::AnalyzerConfig;
use super::finding::{FlowFinding, FlowFindingCode};
use super::flow::FlowState;
use super::interval::{Counters, IntervalRow};
use super::open::{AssociatedBy, Association, OpenKey, OpenState};
use super::rules::{evaluate, AssociationChange, Outcome, RequestFacts};
use super::view::{FlowFrom, MessageView};
use crate::budget::{Kind, MemoryUse, Share};
use crate::capture::Timestamp;
use crate::net::ConnId;
use crate::pipeline::{
    CaptureNote, ChannelEvent, ChannelRecord, CloseRecord, Direction, IoRecord, OpenRecord,
    RecordSink, SqosBody, SqosRecord,
};
use crate::run::CaptureSink;
use crate::smb2::NtStatus;
use crate::sqos::{Options, Request, Response, Severity};

/// A request waiting for its final response.
#[derive(Clone, Debug)]
struct Pending {
    frame: u64,
    ts: Timestamp,
    session_id: u64,
    conn: ConnId,
    /// The UPDATE_COUNTERS request whose interval this request's answer completes: its own
    /// frame, or for a replay the frame of the request it replays.
    update_frame: u64,
    /// Its channel ended (or went silent) before an answer: not "unanswered" by the server.
    lost: bool,
    key: Option<OpenKey>,
    request: Option<Box<Request>>,
    request_size: Option<usize>,
    max_output: Option<u32>,
    /// The flow the request concerns, as judged when it was sent.
    flow: Option<Uuid>,
}

impl Pending {
    /// The request's names (the rest is in `Kind::FlowRequests`' entry cost).
    fn heap_bytes(&self) -> usize {
        self.request.as_deref().map_or(0, |r| {
            r.initiator_name.as_ref().map_or(0, String::len)
                + r.initiator_node_name.as_ref().map_or(0, String::len)
        })
    }
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
    /// What the analyzer itself had to leave out (its bounds): one note per memory share
    /// that dropped something.
    pub notes: Vec<String>,
    /// The analyzer's memory shares: limit, peak and what each dropped.
    pub memory: Vec<MemoryUse>,
    /// Rows not yet drained when streaming rows (`AnalyzerConfig::stream_rows`).
    pub rows: Vec<(Uuid, IntervalRow)>,
}

/// Clone: the TUI finishes a copy to show a followed file's last interval while it waits.
#[derive(Clone)]
pub struct Analyzer {
    cfg: AnalyzerConfig,
    /// Looked up for every I/O, as `flows` and `channels` are: foldhash, seeded per run (the
    /// keys are the wire's), not SipHash.
    opens: HashMap<OpenKey, OpenState, RandomState>,
    /// Boxed: the table's empty buckets then cost a pointer, not a whole flow.
    flows: HashMap<Uuid, Box<FlowState>, RandomState>,
    /// By (connection, MessageId): ordered, so a connection's requests are a range.
    pending: BTreeMap<(ConnId, u64), Pending>,
    /// Channels (session × connection) open now.
    channels: HashMap<(u64, ConnId), ChannelInfo, RandomState>,
    /// Insertion order of `pending` (with stale keys, compacted when it grows), for eviction.
    pending_order: VecDeque<((ConnId, u64), u64)>,
    /// SET_POLICY → GET_STATUS deadlines (section 3.1.6).
    timers: BinaryHeap<Reverse<(Timestamp, Uuid)>>,
    start: Option<Timestamp>,
    clock: Option<Timestamp>,
    capture_notes: u64,
    /// Memory shares: flows (counted in flows), opens (with their names), pending requests.
    flows_mem: Share,
    opens_mem: Share,
    pending_mem: Share,
    /// The channel table: an entry per channel, 16 bytes per flow it lists.
    channels_mem: Share,
    /// Requests of each flow forgotten before their answer (for the flow's finding).
    forgotten_by_flow: HashMap<Uuid, u64, RandomState>,
    rows_out: Vec<(Uuid, IntervalRow)>,
    last: MessageView,
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer::new(AnalyzerConfig::default())
    }
}

/// The flow a request concerns: the one it associates, else the open's, else (state unknown)
/// the one it names.
fn request_flow(r: &Request, assoc: Association) -> Option<(Uuid, FlowFrom)> {
    let id = r.logical_flow_id;
    let named = (!id.is_nil()).then_some((id, FlowFrom::Message));
    if r.options.contains(Options::SET_LOGICAL_FLOW_ID) {
        return named;
    }
    match assoc {
        Association::Flow(f) => Some((f, FlowFrom::Open)),
        Association::NotAssociated => named.filter(|_| r.options.contains(Options::PROBE_POLICY)),
        Association::Unknown => named,
    }
}

fn open_key(session_id: u64, file_id: Option<crate::pipeline::FileId>) -> Option<OpenKey> {
    file_id.map(|file_id| OpenKey {
        session_id,
        file_id,
    })
}

/// The channel table and its memory share, borrowed apart from the flows: a flow looked up
/// once is told of its channel without a second lookup.
struct FlowChannels<'a> {
    table: &'a mut HashMap<(u64, ConnId), ChannelInfo, RandomState>,
    mem: &'a mut Share,
}

impl FlowChannels<'_> {
    /// `f` (the flow `flow`) used `conn` of `session` at `frame`: the flow lists the channel,
    /// and the channel the flow (within its cap).
    fn saw(
        &mut self,
        f: &mut FlowState,
        flow: Uuid,
        session: u64,
        conn: ConnId,
        frame: u64,
        used: ChannelUse,
    ) {
        if f.touch_channel(conn, session, frame, used) {
            return;
        }
        let info = self.table.get_mut(&(session, conn));
        f.saw_channel(conn, session, info.as_deref(), frame, used);
        if let Some(i) = info {
            if i.flows.len() < MAX_FLOWS_PER_CHANNEL && !i.flows.contains(&flow) {
                if self.mem.fits(0, FLOW_REF_BYTES) {
                    self.mem.charge(0, FLOW_REF_BYTES);
                    i.flows.push(flow);
                } else {
                    // The flow still lists the channel; it is not told when the channel ends.
                    self.mem.dropped(0, FLOW_REF_BYTES as u64, frame);
                }
            }
        }
    }
}

impl Analyzer {
    pub fn new(cfg: AnalyzerConfig) -> Self {
        Analyzer {
            opens: HashMap::default(),
            flows: HashMap::default(),
            pending: BTreeMap::new(),
            channels: HashMap::default(),
            pending_order: VecDeque::new(),
            timers: BinaryHeap::new(),
            start: None,
            clock: None,
            capture_notes: 0,
            flows_mem: Share::new(
                Kind::Flows,
                cfg.max_flows.saturating_mul(Kind::Flows.entry_cost()),
            ),
            opens_mem: Share::new(
                Kind::FlowOpens,
                cfg.max_opens.saturating_mul(Kind::FlowOpens.entry_cost()),
            ),
            pending_mem: Share::new(
                Kind::FlowRequests,
                cfg.max_pending
                    .saturating_mul(Kind::FlowRequests.entry_cost()),
            ),
            channels_mem: Share::new(
                Kind::FlowChannels,
                cfg.max_channels
                    .saturating_mul(Kind::FlowChannels.entry_cost()),
            ),
            forgotten_by_flow: HashMap::default(),
            cfg,
            rows_out: Vec::new(),
            last: MessageView::default(),
        }
    }

    /// What the analysis made of the SQOS message it was given last.
    pub fn last_message(&self) -> MessageView {
        self.last
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

    /// The flow a message concerns, judged before it is fed: a response's is its request's; a
    /// request's the one it associates, else its open's, else the one it names.
    pub fn flow_of(&self, rec: &SqosRecord) -> Option<Uuid> {
        let key = open_key(rec.session_id, rec.file_id);
        let assoc = key
            .and_then(|k| self.opens.get(&k))
            .map_or(Association::Unknown, |o| o.association);
        let named = |id: Uuid| (!id.is_nil()).then_some(id);
        if let SqosBody::Request(d) = &rec.body {
            return match &d.message {
                Some(r) => request_flow(r, assoc).map(|(id, _)| id),
                None => assoc.flow(),
            };
        }
        // An answer: as `on_response` places it (the open's flow after the request, else the
        // one the request concerned, else the one the answer names).
        let pending = self.pending.get(&(rec.conn, rec.msg_id));
        let open = pending
            .and_then(|p| p.key)
            .or(key)
            .and_then(|k| self.opens.get(&k))
            .and_then(|o| o.association.flow());
        let answer_names = match &rec.body {
            SqosBody::Response(d) => d.message.as_ref().and_then(|m| named(m.logical_flow_id)),
            _ => None,
        };
        open.or(pending.and_then(|p| p.flow)).or(answer_names)
    }

    /// Opens followed now.
    pub fn open_count(&self) -> usize {
        self.opens.len()
    }

    /// Interval rows finished since the last call (only with `stream_rows`).
    pub fn drain_rows(&mut self) -> Vec<(Uuid, IntervalRow)> {
        std::mem::take(&mut self.rows_out)
    }

    fn series_cap(&self) -> usize {
        (self.cfg.series_budget_rows / self.flows.len().max(1))
            .clamp(self.cfg.series_min_rows, self.cfg.series_max_rows)
    }

    /// The flow's state, created on first sight; `None` once `max_flows` are followed (a
    /// flow not followed is counted each time it is met, in the flows share).
    fn flow_mut(&mut self, id: Uuid, frame: u64, ts: Timestamp) -> Option<&mut FlowState> {
        if !self.flows.contains_key(&id) {
            if self.flows.len() >= self.cfg.max_flows {
                self.flows_mem.dropped(1, 0, frame);
                return None;
            }
            self.flows_mem.charge(1, 0);
            let mut f = FlowState::new(id, frame, ts, &self.cfg);
            f.created = self.flows.len() as u64;
            self.flows.insert(id, Box::new(f));
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

    fn open_mut_or_met(
        &mut self,
        key: OpenKey,
        file_name: Option<&str>,
        frame: u64,
    ) -> Option<&mut OpenState> {
        if !self.opens.contains_key(&key) {
            let bytes = file_name.map_or(0, str::len);
            if !self.room_for_open(bytes, frame) {
                return None;
            }
            self.opens_mem.charge(1, bytes);
            self.opens.insert(key, OpenState::met(file_name));
        }
        self.opens.get_mut(&key)
    }

    /// Whether a new open with a name of `bytes` fits; if not, it is counted as dropped.
    fn room_for_open(&mut self, bytes: usize, frame: u64) -> bool {
        if self.opens.len() < self.cfg.max_opens && self.opens_mem.fits(1, bytes) {
            return true;
        }
        self.opens_mem.dropped(1, 0, frame);
        false
    }

    fn forget_open(&mut self, key: &OpenKey) -> Option<OpenState> {
        let o = self.opens.remove(key)?;
        self.opens_mem
            .release(1, o.file_name.as_deref().map_or(0, str::len));
        Some(o)
    }

    /// The flow used a channel: count it there (and let the channel know the flow).
    fn saw_channel(
        &mut self,
        flow: Uuid,
        session: u64,
        conn: ConnId,
        frame: u64,
        used: ChannelUse,
    ) {
        let Some(f) = self.flows.get_mut(&flow) else {
            return;
        };
        let mut channels = FlowChannels {
            table: &mut self.channels,
            mem: &mut self.channels_mem,
        };
        channels.saw(f, flow, session, conn, frame, used);
    }

    fn on_channel_joined(&mut self, rec: &ChannelRecord, joined: crate::pipeline::ChannelJoin) {
        let key = (rec.session_id, rec.conn);
        if !self.channels.contains_key(&key) {
            if !self.channels_mem.fits(1, 0) {
                // Said once, at the end (`Analysis::notes`).
                self.channels_mem.dropped(1, 0, rec.frame);
                return;
            }
            self.channels_mem.charge(1, 0);
        }
        self.channels.insert(
            key,
            ChannelInfo {
                client: rec.client,
                server: rec.server,
                joined,
                frame: rec.frame,
                ts: rec.ts,
                flows: Vec::new(),
            },
        );
    }

    /// A channel ended. Its SQOS requests still waiting will not be answered there: they are
    /// lost with the channel, not unanswered by the server (a replay on another channel may
    /// still take their place). At the end of the capture a channel the server had gone
    /// silent on for `unanswered_grace_secs` while requests waited counts as ended by silence.
    fn on_channel_ended(
        &mut self,
        rec: &ChannelRecord,
        by: crate::pipeline::ChannelEnd,
        last_server: (Option<u64>, Option<Timestamp>),
        unanswered: u64,
    ) {
        let info = self.channels.remove(&(rec.session_id, rec.conn));
        if let Some(i) = &info {
            self.channels_mem.release(1, i.flows.len() * FLOW_REF_BYTES);
        }
        let grace = self.cfg.tolerances.unanswered_grace_secs;
        let (last_frame, last_ts) = last_server;
        let ending = ChannelEnding::from_pipeline(by).or_else(|| {
            let quiet = last_ts.is_none_or(|t| rec.ts.secs_since(t) >= grace);
            (unanswered > 0 && quiet).then_some(ChannelEnding::Silence)
        });
        let Some(ending) = ending else {
            return;
        };
        let range = (rec.conn, 0)..=(rec.conn, u64::MAX);
        let mut lost = Vec::new();
        for p in self.pending.range_mut(range).map(|(_, p)| p) {
            let after_last = last_ts.is_none_or(|t| p.ts >= t);
            if p.session_id == rec.session_id
                && !p.lost
                && (ending != ChannelEnding::Silence || after_last)
            {
                p.lost = true;
                lost.extend(p.flow);
            }
        }
        let at = match (ending, last_frame, last_ts) {
            (ChannelEnding::Silence, Some(f), Some(t)) => (f, t),
            _ => (rec.frame, rec.ts),
        };
        let mut told: Vec<Uuid> = info.map(|i| i.flows).unwrap_or_default();
        told.extend(lost.iter().copied());
        // A reset, or requests lost: a failure, not the end of a session's use of a channel.
        let failed = matches!(ending, ChannelEnding::Rst | ChannelEnding::Dropped)
            || unanswered > 0
            || !lost.is_empty();
        for id in told {
            if let Some(f) = self.flows.get_mut(&id) {
                f.channel_ended(rec.conn, rec.session_id, ending, at);
                if failed {
                    f.channel_failure();
                }
            }
        }
        for id in lost {
            if let Some(c) = self
                .flows
                .get_mut(&id)
                .and_then(|f| f.channel_mut(rec.conn, rec.session_id))
            {
                c.lost_requests += 1;
            }
        }
    }

    /// A replayed request (SMB2_FLAGS_REPLAY_OPERATION) that repeats one still waiting on
    /// another channel of its session takes its place: the oldest such request is returned,
    /// removed from the pending table.
    fn take_replayed(
        &mut self,
        conn: ConnId,
        key: Option<OpenKey>,
        req: &Request,
    ) -> Option<Pending> {
        let found = self
            .pending
            .iter()
            .filter(|((c, _), p)| *c != conn && p.key == key && p.request.as_deref() == Some(req))
            .min_by_key(|(_, p)| p.frame)
            .map(|(k, _)| *k)?;
        self.take_pending(&found)
    }

    fn associate(
        &mut self,
        key: OpenKey,
        conn: ConnId,
        flow: Uuid,
        by: AssociatedBy,
        frame: u64,
        ts: Timestamp,
    ) {
        let Some(open) = self.open_mut_or_met(key, None, frame) else {
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
                conn,
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
        let bytes = p.heap_bytes();
        if let Some(old) = self.take_pending(&id) {
            // The same MessageId again: the earlier request is superseded.
            self.pending_mem.dropped(1, 0, p.frame);
            self.count_forgotten(&old);
        }
        while self.pending.len() >= self.cfg.max_pending || !self.pending_mem.fits(1, bytes) {
            let Some((old, frame)) = self.pending_order.pop_front() else {
                break;
            };
            if self.pending.get(&old).is_some_and(|q| q.frame == frame) {
                if let Some(q) = self.take_pending(&old) {
                    self.count_forgotten(&q);
                }
                self.pending_mem.dropped(1, 0, p.frame);
            }
        }
        self.pending_order.push_back((id, p.frame));
        self.pending_mem.charge(1, bytes);
        self.pending.insert(id, p);
        if self.pending_order.len() > 2 * self.pending.len().max(1024) {
            let pending = &self.pending;
            self.pending_order
                .retain(|(k, f)| pending.get(k).is_some_and(|p| p.frame == *f));
        }
    }

    fn take_pending(&mut self, id: &(ConnId, u64)) -> Option<Pending> {
        let p = self.pending.remove(id)?;
        self.pending_mem.release(1, p.heap_bytes());
        Some(p)
    }

    /// A request of a flow forgotten before its answer: the flow gets one finding for all.
    fn count_forgotten(&mut self, p: &Pending) {
        if let Some(f) = p.flow.filter(|f| self.flows.contains_key(f)) {
            *self.forgotten_by_flow.entry(f).or_insert(0) += 1;
        }
    }

    fn on_request(&mut self, rec: SqosRecord) {
        let key = open_key(rec.session_id, rec.file_id);
        let request = match rec.body {
            SqosBody::Request(d) => d.message.map(Box::new),
            _ => None,
        };
        let (assoc, raised) = match key {
            Some(k) => self
                .open_mut_or_met(k, rec.file_name.as_deref(), rec.frame)
                .map_or((Association::Unknown, false), |o| {
                    let raised = rec
                        .channel_sequence
                        .is_some_and(|seq| o.raise_channel_sequence(seq));
                    (o.association, raised)
                }),
            None => (Association::Unknown, false),
        };
        let replayed = match (&request, rec.replay) {
            (Some(r), true) => self.take_replayed(rec.conn, key, r),
            _ => None,
        };
        // A replay belongs to its original's flow.
        let found = match &replayed {
            Some(orig) => orig.flow.map(|id| {
                let from = if matches!(assoc, Association::Flow(f) if f == id) {
                    FlowFrom::Open
                } else {
                    FlowFrom::Message
                };
                (id, from)
            }),
            None => request.as_deref().and_then(|r| request_flow(r, assoc)),
        };
        self.last.flow = found;
        let flow = found.map(|(id, _)| id);
        if let (Some(id), true) = (flow, raised || rec.replay) {
            if let Some(f) = self.flows.get_mut(&id) {
                f.channel_failure();
            }
        }
        if let Some(orig) = replayed {
            // The interval was bounded by the request replayed: only the channel changes.
            if let Some(id) = orig.flow {
                if let Some(c) = self
                    .flows
                    .get_mut(&id)
                    .and_then(|f| f.channel_mut(orig.conn, orig.session_id))
                {
                    c.replayed_requests += 1;
                    if !orig.lost {
                        c.lost_requests += 1;
                    }
                }
                self.saw_channel(
                    id,
                    rec.session_id,
                    rec.conn,
                    rec.frame,
                    ChannelUse::SqosRequest,
                );
            }
            let p = Pending {
                frame: rec.frame,
                ts: rec.ts,
                conn: rec.conn,
                lost: false,
                key,
                request,
                request_size: (!rec.buffer_truncated).then_some(rec.buffer.len()),
                max_output: rec.max_output_response,
                ..orig
            };
            self.remember_pending((rec.conn, rec.msg_id), p);
            return;
        }
        if let (Some(r), Some(id)) = (request.as_deref(), flow) {
            let notes = self.capture_notes;
            if let Some(f) = self.flow_mut(id, rec.frame, rec.ts) {
                f.on_request(r, rec.frame, rec.ts, notes, rec.replay);
            }
            self.saw_channel(
                id,
                rec.session_id,
                rec.conn,
                rec.frame,
                ChannelUse::SqosRequest,
            );
            self.finalize_flow(id);
        }
        let p = Pending {
            frame: rec.frame,
            ts: rec.ts,
            session_id: rec.session_id,
            conn: rec.conn,
            update_frame: rec.frame,
            lost: false,
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
        let Some(nt) = rec.nt_status.map(NtStatus) else {
            return;
        };
        let response = match &rec.body {
            SqosBody::Response(d) => d.message.as_ref(),
            _ => None,
        };
        let pending = self.take_pending(&(rec.conn, rec.msg_id));
        match &pending {
            Some(p) => self.answer(&rec, p, nt, response),
            None => self.response_without_request(&rec, nt, response),
        }
        // The flow the answer belongs to: the open's after it, else the one the request
        // concerned, else the one the answer names.
        let key = pending
            .as_ref()
            .and_then(|p| p.key)
            .or(open_key(rec.session_id, rec.file_id));
        let open = key
            .and_then(|k| self.opens.get(&k))
            .and_then(|o| o.association.flow());
        self.last.flow = open
            .map(|id| (id, FlowFrom::Open))
            .or(pending
                .and_then(|p| p.flow)
                .map(|id| (id, FlowFrom::Message)))
            .or(response
                .map(|r| r.logical_flow_id)
                .filter(|id| !id.is_nil())
                .map(|id| (id, FlowFrom::Message)));
    }

    /// The final response to a pending request.
    fn answer(&mut self, rec: &SqosRecord, p: &Pending, nt: NtStatus, response: Option<&Response>) {
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
        if nt == NtStatus::SUCCESS {
            self.on_success(rec, p, key, req, &outcome, before, home, response);
        } else {
            self.on_failure(rec, p, key, req, &outcome, before, home, nt);
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
                    rule.status().label()
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
                self.associate(key, rec.conn, id, by, frame, ts);
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
                    self.associate(key, rec.conn, id, AssociatedBy::Inferred, frame, ts);
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
                self.last.update =
                    f.update_answered(p.update_frame, Some(Counters::from_request(req)));
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
        nt: NtStatus,
    ) {
        let (frame, ts) = (rec.frame, rec.ts);
        let got = nt.label();
        // Section 3.2.5.1: a server without Storage QoS fails everything this way, before any
        // other rule.
        if nt == NtStatus::INVALID_DEVICE_REQUEST || nt == NtStatus::NOT_SUPPORTED {
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
                    rule.status().label(),
                    rule.describe()
                ),
                frame,
                ts,
            );
        } else if !outcome.uncertain {
            let unfounded = match nt {
                NtStatus::NOT_FOUND | NtStatus::REVISION_MISMATCH => true,
                // Implementation-defined field checks (<8>) only apply to SET_POLICY / PROBE.
                NtStatus::INVALID_PARAMETER => !outcome.applies_policy,
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
        if nt == NtStatus::NOT_FOUND
            && before == Association::Unknown
            && outcome.change == AssociationChange::Keep
        {
            if let Some(o) = self.opens.get_mut(&key) {
                o.association = Association::NotAssociated;
            }
        }
        if req.options.contains(Options::UPDATE_COUNTERS) {
            if let Some(f) = p.flow.and_then(|id| self.flows.get_mut(&id)) {
                self.last.update = f.update_answered(p.update_frame, None);
            }
        }
    }

    /// The request was not seen (capture began after it): learn what the answer shows.
    fn response_without_request(
        &mut self,
        rec: &SqosRecord,
        nt: NtStatus,
        response: Option<&Response>,
    ) {
        let (Some(r), true) = (response, nt == NtStatus::SUCCESS) else {
            return;
        };
        if r.logical_flow_id.is_nil() {
            return;
        }
        if let Some(key) = open_key(rec.session_id, rec.file_id) {
            let unknown = self
                .opens
                .get(&key)
                .is_none_or(|o| o.association == Association::Unknown);
            if unknown {
                self.associate(
                    key,
                    rec.conn,
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
        self.pending_mem.clear();
        let mut unanswered: Vec<Pending> = std::mem::take(&mut self.pending)
            .into_values()
            .filter(|p| !p.lost)
            .collect();
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
        let mut forgotten: Vec<(Uuid, u64)> = self.forgotten_by_flow.drain().collect();
        forgotten.sort_unstable();
        for (id, n) in forgotten {
            let first = self.pending_mem.usage().first_drop_frame.unwrap_or(0);
            self.finding(
                id,
                FlowFindingCode::MemoryBound,
                Severity::Warning,
                format!(
                    "{n} of its SQOS requests were forgotten before their answer (the memory budget's flow_requests share was full from frame {first}): what those answers set or reported is missing"
                ),
                first,
                self.start.unwrap_or_default(),
            );
        }
        let cap = self.series_cap();
        let keep = self.cfg.stream_rows;
        let mut rows = std::mem::take(&mut self.rows_out);
        let mut flows: Vec<FlowState> = self.flows.into_values().map(|f| *f).collect();
        // In order of appearance; the catch-all null flow (findings of no flow) last. Sorted
        // before the last rows are taken so that they too come out in that order, not the
        // hash map's (which changes from run to run).
        flows.sort_by_key(|f| (f.id.is_nil(), f.first_frame, f.created));
        for f in &mut flows {
            let id = f.id;
            rows.extend(
                f.finalize(&self.cfg, cap, true, keep)
                    .into_iter()
                    .map(|r| (id, r)),
            );
        }
        let memory = vec![
            self.pending_mem.usage(),
            self.opens_mem.usage(),
            self.channels_mem.usage(),
            self.flows_mem.usage(),
        ];
        let notes: Vec<String> = memory.iter().filter_map(MemoryUse::summary).collect();
        Analysis {
            flows,
            start: self.start,
            end,
            capture_notes: self.capture_notes,
            notes,
            memory,
            rows,
        }
    }
}

impl RecordSink for Analyzer {
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.last = MessageView::default();
        self.advance(rec.ts);
        match rec.direction {
            Direction::Request => self.on_request(rec),
            Direction::Response => self.on_response(rec),
        }
    }

    fn on_open(&mut self, rec: &OpenRecord) {
        self.advance(rec.ts);
        let key = OpenKey {
            session_id: rec.session_id,
            file_id: rec.file_id,
        };
        if let Some(old) = self.opens.get(&key).and_then(|o| o.association.flow()) {
            if let Some(f) = self.flows.get_mut(&old) {
                f.end_open(&key, rec.frame);
            }
        }
        // A CREATE of an open already followed replaces it.
        self.forget_open(&key);
        if !self.room_for_open(rec.file_name.len(), rec.frame) {
            return;
        }
        self.opens_mem.charge(1, rec.file_name.len());
        self.opens.insert(key, OpenState::created(&rec.file_name));
    }

    fn on_close(&mut self, rec: &CloseRecord) {
        self.advance(rec.ts);
        let key = OpenKey {
            session_id: rec.session_id,
            file_id: rec.file_id,
        };
        if let Some(old) = self.forget_open(&key).and_then(|o| o.association.flow()) {
            if let Some(f) = self.flows.get_mut(&old) {
                f.end_open(&key, rec.frame);
            }
        }
    }

    fn on_io(&mut self, rec: &IoRecord) {
        self.advance(rec.response_ts);
        let key = OpenKey {
            session_id: rec.session_id,
            file_id: rec.file_id,
        };
        let Some(open) = self.opens.get_mut(&key) else {
            return;
        };
        let raised = open.raise_channel_sequence(rec.channel_sequence);
        let Some(id) = open.association.flow() else {
            return;
        };
        // One lookup of the flow per I/O, for its figures and its channel.
        let Some(f) = self.flows.get_mut(&id) else {
            return;
        };
        if raised {
            f.channel_failure();
        }
        f.add_io(
            rec.request_ts,
            rec.response_ts,
            rec.response_frame,
            rec.requested,
        );
        let mut channels = FlowChannels {
            table: &mut self.channels,
            mem: &mut self.channels_mem,
        };
        channels.saw(
            f,
            id,
            rec.session_id,
            rec.conn,
            rec.response_frame,
            ChannelUse::Io,
        );
    }

    fn on_channel(&mut self, rec: &ChannelRecord) {
        self.advance(rec.ts);
        match rec.event {
            ChannelEvent::Joined(j) => self.on_channel_joined(rec, j),
            ChannelEvent::Ended {
                by,
                last_server_frame,
                last_server_ts,
                unanswered,
            } => self.on_channel_ended(rec, by, (last_server_frame, last_server_ts), unanswered),
        }
    }

    fn on_note(&mut self, _note: &CaptureNote) {
        self.capture_notes += 1;
    }

    /// Nothing was lost: intervals stay comparable.
    fn on_info(&mut self, _note: &CaptureNote) {}
}

impl CaptureSink for Analyzer {
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.start = Some(ts);
    }
}
