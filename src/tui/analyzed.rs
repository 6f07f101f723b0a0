//! The flow views fed by the flow analysis (`crate::analysis`): the analyzer follows the
//! capture while it is read; at the end of input its final analysis (unanswered requests,
//! deadlines, unfinished intervals) replaces it. Rates are normalized IOPS, the unit the
//! server's MaximumIoRate / MinimumIoRate are in (section 4.1), as `sqos flows` shows them.

use crate::output::escape::text as esc;
use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use super::model::{
    short_id, ChannelRow, FindingRow, FlowDetail, FlowRow, OpenRow, PolicyCell, SeriesPoint,
    TimelineRow,
};
use super::store::message_flow;
use crate::analysis::{
    Analysis, Analyzer, AnalyzerConfig, FlowState, IntervalRow, TimelineEntry, TimelineEvent,
};
use crate::capture::Timestamp;
use crate::feed::{Feed, Tap};
use crate::net::ConnId;
use crate::pipeline::{
    CaptureNote, ChannelRecord, CloseRecord, Direction, IoRecord, OpenRecord, SqosRecord,
};
use crate::sqos::Dialect;

/// Client addresses remembered per connection (for the opens' host column).
const MAX_HOSTS: usize = 100_000;

/// What the flow views remember beside the analysis they follow: the flows' order and client
/// hosts, the first frame, and the final or settled analysis.
pub struct FlowViews {
    /// The final analysis, once the input ended.
    done: Option<Analysis>,
    /// Flow ids in order of first appearance (the analyzer is asked by id while it runs).
    order: Vec<Uuid>,
    known: HashSet<Uuid>,
    max_flows: usize,
    hosts: HashMap<ConnId, String>,
    start: Option<Timestamp>,
    /// While the input is idle: the analysis a copy of the running analyzer gives at its end
    /// (see [`Analyzed::settle`]); dropped by the next record.
    settled: Option<Analysis>,
}

/// The flow analysis the views show: the analyzer while the capture is read (`None` once it
/// finished), fed through [`Feed`].
pub type Analyzed = Feed<Option<Analyzer>, FlowViews>;

impl Tap<Option<Analyzer>> for FlowViews {
    fn before(&mut self, _analyzer: &mut Option<Analyzer>, rec: &SqosRecord) {
        self.settled = None;
        self.remember(rec);
    }
    fn on_open(&mut self, _rec: &OpenRecord) {
        self.settled = None;
    }
    fn on_close(&mut self, _rec: &CloseRecord) {
        self.settled = None;
    }
    fn on_io(&mut self, _rec: &IoRecord) {
        self.settled = None;
    }
    fn on_channel(&mut self, _rec: &ChannelRecord) {
        self.settled = None;
    }
    fn on_note(&mut self, _note: &CaptureNote) {
        self.settled = None;
    }
    /// The first frame's time: series and findings are timed relative to it.
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.settled = None;
        self.start = Some(ts);
    }
}

impl FlowViews {
    fn remember(&mut self, rec: &SqosRecord) {
        if let Some(id) = message_flow(rec) {
            if self.known.len() < self.max_flows && self.known.insert(id) {
                self.order.push(id);
            }
        }
        if rec.direction == Direction::Request
            && (self.hosts.len() < MAX_HOSTS || self.hosts.contains_key(&rec.conn))
        {
            self.hosts.insert(rec.conn, rec.src.ip().to_string());
        }
    }
}

impl Analyzed {
    pub fn new(cfg: AnalyzerConfig) -> Self {
        let max_flows = cfg.max_flows;
        Feed {
            analysis: Some(Analyzer::new(cfg)),
            tap: FlowViews {
                done: None,
                order: Vec::new(),
                known: HashSet::new(),
                max_flows,
                hosts: HashMap::new(),
                start: None,
                settled: None,
            },
        }
    }

    fn rel(&self, ts: Timestamp) -> f64 {
        self.tap.start.map_or(0.0, |s| ts.secs_since(s))
    }

    /// The finished analysis shown: the final one, or the settled copy while idle.
    fn finished(&self) -> Option<&Analysis> {
        self.tap.done.as_ref().or(self.tap.settled.as_ref())
    }

    /// The flows, in order of appearance; the catch-all flow (findings of no flow) included.
    fn flows(&self) -> Vec<&FlowState> {
        if let Some(an) = self.finished() {
            // The order the rows had while reading, so nothing jumps at the end.
            let pos: HashMap<Uuid, usize> = self
                .tap
                .order
                .iter()
                .enumerate()
                .map(|(i, id)| (*id, i))
                .collect();
            let mut v: Vec<&FlowState> = an.flows.iter().collect();
            v.sort_by_key(|f| pos.get(&f.id).copied().unwrap_or(usize::MAX));
            return v;
        }
        match &self.analysis {
            Some(a) => self
                .tap
                .order
                .iter()
                .chain(std::iter::once(&Uuid::nil()))
                .filter_map(|id| a.flow(id))
                .collect(),
            None => Vec::new(),
        }
    }

    fn flow(&self, id: &Uuid) -> Option<&FlowState> {
        if let Some(an) = self.finished() {
            return an.flows.iter().find(|f| f.id == *id);
        }
        self.analysis.as_ref().and_then(|a| a.flow(id))
    }

    fn point(&self, row: &IntervalRow) -> SeriesPoint {
        let rep = row.reported_rates();
        let obs = row.observed_rates();
        SeriesPoint {
            t0: self.rel(row.start),
            t: self.rel(row.end),
            reported_iops: rep.map(|r| r.normalized_iops),
            observed_iops: obs.map(|o| o.normalized_iops),
            latency_ms: rep.and_then(|r| r.avg_latency_ms),
            kbps: rep
                .and_then(|r| r.kilobytes_per_second)
                .or(obs.map(|o| o.kilobytes_per_second)),
            max_rate: row.in_effect.maximum_io_rate,
            min_rate: row.in_effect.minimum_io_rate,
            max_bandwidth: row.in_effect.maximum_bandwidth,
        }
    }

    fn row(&self, f: &FlowState) -> FlowRow {
        let last = f.series.rows.last().map(|r| self.point(r));
        let rep = f.reported_rates();
        let obs = f.observed_rates();
        FlowRow {
            id: f.id,
            // Names from the wire, escaped for the terminal (output::escape).
            initiator: f
                .initiator_name
                .as_deref()
                .map_or_else(|| short_id(&f.id), |n| esc(n).into_owned()),
            node: f
                .initiator_node_name
                .as_deref()
                .map_or_else(|| "-".into(), |n| esc(n).into_owned()),
            policy: match f.policy {
                None => PolicyCell::None,
                Some(p) if !p.policy_id.is_nil() => PolicyCell::Policy(p.policy_id),
                Some(p) => PolicyCell::Limits {
                    limit: p.limit,
                    reservation: p.reservation,
                },
            },
            // The latest interval; before a whole interval, what the flow has so far.
            reported_iops: last
                .and_then(|p| p.reported_iops)
                .or(rep.map(|r| r.normalized_iops)),
            observed_iops: last
                .and_then(|p| p.observed_iops)
                .or(obs.map(|o| o.normalized_iops)),
            latency_ms: last
                .and_then(|p| p.latency_ms)
                .or(rep.and_then(|r| r.avg_latency_ms)),
            kbps: last.and_then(|p| p.kbps).or(rep
                .and_then(|r| r.kilobytes_per_second)
                .or(obs.map(|o| o.kilobytes_per_second))),
            avg_iops: rep.map(|r| r.normalized_iops),
            avg_latency_ms: rep.and_then(|r| r.avg_latency_ms),
            avg_kbps: rep
                .and_then(|r| r.kilobytes_per_second)
                .or(obs.map(|o| o.kilobytes_per_second)),
            max_rate: f.server.map(|s| s.maximum_io_rate),
            min_rate: f.server.map(|s| s.minimum_io_rate),
            status: f.server.map(|s| s.status),
            findings: f.findings_total(),
            worst: f.findings.iter().map(|x| x.severity).max(),
        }
    }

    fn timeline_row(&self, e: &TimelineEntry) -> TimelineRow {
        let (text, status) = match e.event {
            TimelineEvent::Policy(p) => {
                let mut s = if p.policy_id.is_nil() {
                    format!("policy set: limit={} resv={}", p.limit, p.reservation)
                } else {
                    format!("policy set: {}", short_id(&p.policy_id))
                };
                if let Some(bw) = p.bandwidth_limit.filter(|b| *b > 0) {
                    s.push_str(&format!(" bw={bw}KB/s"));
                }
                (s, None)
            }
            TimelineEvent::Server(s) => {
                let mut t = format!(
                    "{} max={} min={}",
                    super::model::status_label(Some(s.status)),
                    s.maximum_io_rate,
                    s.minimum_io_rate
                );
                if let Some(bw) = s.maximum_bandwidth {
                    t.push_str(&format!(" maxbw={bw}KB/s"));
                }
                t.push_str(&format!(" ttl={}ms", s.time_to_live));
                (t, Some(s.status))
            }
        };
        TimelineRow {
            frame: e.frame,
            t: self.rel(e.ts),
            text,
            status,
        }
    }

    fn finding_rows(&self, f: &FlowState) -> Vec<FindingRow> {
        let mut v: Vec<FindingRow> = f
            .findings
            .iter()
            .map(|x| FindingRow {
                severity: x.severity,
                code: x.code.as_str().to_string(),
                message: esc(&x.message).into_owned(),
                frame: x.frame,
                t: self.rel(x.time),
                flow: (!f.id.is_nil()).then_some(f.id),
                occurrences: x.occurrences,
            })
            .collect();
        v.sort_by_key(|r| r.frame);
        v
    }
}

/// What the flow views ask, at any moment (also while the capture is still being read).
impl Analyzed {
    /// End of input: close what was left open (e.g. unanswered requests).
    pub fn finish(&mut self) {
        self.tap.settled = None;
        if let Some(a) = self.analysis.take() {
            self.tap.done = Some(a.finish());
        }
    }

    /// The input is idle but not ended (a followed file, a quiet interface): show what the end
    /// of input would (the last, still open interval), until the next record.
    pub fn settle(&mut self) {
        if let (Some(a), None) = (&self.analysis, &self.tap.settled) {
            self.tap.settled = Some(a.clone().finish());
        }
    }

    /// One row per flow, in order of first appearance.
    pub fn rows(&self) -> Vec<FlowRow> {
        self.flows()
            .into_iter()
            .filter(|f| !f.id.is_nil())
            .map(|f| self.row(f))
            .collect()
    }

    pub fn detail(&self, id: Uuid) -> Option<FlowDetail> {
        let f = self.flow(&id)?;
        let rep = f.reported_rates();
        let obs = f.observed_rates();
        Some(FlowDetail {
            id,
            initiator_name: f.initiator_name.as_deref().map(|n| esc(n).into_owned()),
            node_name: f
                .initiator_node_name
                .as_deref()
                .map(|n| esc(n).into_owned()),
            initiator_id: f.initiator_id,
            policy_id: f.policy.map(|p| p.policy_id),
            dialect: f.protocol_version.map(|v| match v.dialect() {
                Some(Dialect::V1_0) => "1.0".to_string(),
                Some(Dialect::V1_1) => "1.1".to_string(),
                None => format!("0x{:04x}", v.0),
            }),
            limit: f.policy.map(|p| p.limit),
            reservation: f.policy.map(|p| p.reservation),
            bandwidth_limit: f.policy.and_then(|p| p.bandwidth_limit),
            max_rate: f.server.map(|s| s.maximum_io_rate),
            min_rate: f.server.map(|s| s.minimum_io_rate),
            max_bandwidth: f.server.and_then(|s| s.maximum_bandwidth),
            base_io_size: f.server.map(|s| s.base_io_size),
            ttl_ms: f.server.map(|s| s.time_to_live),
            status: f.server.map(|s| s.status),
            avg_reported_iops: rep.map(|r| r.normalized_iops),
            avg_observed_iops: obs.map(|o| o.normalized_iops),
            avg_latency_ms: rep.and_then(|r| r.avg_latency_ms),
            avg_kbps: rep
                .and_then(|r| r.kilobytes_per_second)
                .or(obs.map(|o| o.kilobytes_per_second)),
            series: f.series.rows.iter().map(|r| self.point(r)).collect(),
            opens: f
                .opens
                .iter()
                .map(|o| OpenRow {
                    frame: o.frame,
                    t: self.rel(o.ts),
                    file_name: esc(o.file_name.as_deref().unwrap_or("(name not seen)"))
                        .into_owned(),
                    host: self
                        .tap
                        .hosts
                        .get(&o.conn)
                        .cloned()
                        .unwrap_or_else(|| format!("conn {}", o.conn.0)),
                    ended_frame: o.ended_frame,
                })
                .collect(),
            channels: f
                .channels
                .iter()
                .map(|c| ChannelRow {
                    first_frame: c.first_frame,
                    ends: c.label(),
                    joined: c.joined.map_or("-", |j| j.as_str()).to_string(),
                    io_count: c.io_count,
                    sqos_requests: c.sqos_requests,
                    ended: match (c.ended, c.ended_frame) {
                        (Some(e), Some(fr)) => format!("{} @{fr}", e.as_str()),
                        _ => "-".into(),
                    },
                })
                .collect(),
            timeline: f.timeline.iter().map(|e| self.timeline_row(e)).collect(),
            findings: self.finding_rows(f),
        })
    }

    /// Flow-level findings (message-level ones come from the message store).
    pub fn findings(&self) -> Vec<FindingRow> {
        self.flows()
            .into_iter()
            .flat_map(|f| self.finding_rows(f))
            .collect()
    }

    /// Notes about what the analysis had to leave out (its bounds).
    pub fn notes(&self) -> Vec<String> {
        self.finished().map(|a| a.notes.clone()).unwrap_or_default()
    }

    /// The flow a message belongs to, judged before it is fed (filters read its fields).
    pub fn flow_of(&self, rec: &SqosRecord) -> Option<Uuid> {
        match &self.analysis {
            Some(a) => a.flow_of(rec).or_else(|| message_flow(rec)),
            None => message_flow(rec),
        }
    }

    /// A flow's state, for filters on flow fields.
    pub fn flow_state(&self, id: &Uuid) -> Option<&FlowState> {
        self.flow(id)
    }
}
