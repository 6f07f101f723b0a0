//! A record-level flow book: what can be said about each logical flow from the SQOS records
//! alone (names, limits, the server's last answer, reported rates per UPDATE_COUNTERS interval,
//! READ/WRITE seen on associated opens). Used when no richer flow analysis is plugged in.
//!
//! The first UPDATE_COUNTERS of a flow only starts the clock: the interval its increments cover
//! began before it was seen, so they are not turned into a rate.

use std::collections::{HashMap, VecDeque};

use uuid::Uuid;

use super::flows::FlowSource;
use super::model::{
    FindingRow, FlowDetail, FlowRow, OpenRow, PolicyCell, SeriesPoint, TimelineRow,
};
use crate::capture::Timestamp;
use crate::net::ConnId;
use crate::pipeline::{FileId, IoRecord, OpenRecord, RecordSink, SqosBody, SqosRecord};
use crate::sqos::{Options, Request, Response, Status};

/// Bounds: the book never grows without limit, whatever the capture.
#[derive(Clone, Copy, Debug)]
pub struct BookLimits {
    pub max_flows: usize,
    pub max_opens: usize,
    pub series_per_flow: usize,
    pub rows_per_list: usize,
}

impl Default for BookLimits {
    fn default() -> Self {
        BookLimits {
            max_flows: 100_000,
            max_opens: 200_000,
            series_per_flow: 3_600,
            rows_per_list: 200,
        }
    }
}

type OpenKey = (ConnId, u64, FileId);

#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    io: u64,
    latency: u64,
    kilobytes: u64,
    has_kb: bool,
    observed: u64,
    secs: f64,
}

#[derive(Debug, Default)]
struct Server {
    status: Status,
    max: u64,
    min: u64,
    max_bw: Option<u64>,
    base: u32,
    ttl: u32,
}

#[derive(Debug)]
struct BookFlow {
    id: Uuid,
    initiator_name: Option<String>,
    node_name: Option<String>,
    initiator_id: Option<Uuid>,
    policy_id: Option<Uuid>,
    dialect: Option<String>,
    limit: Option<u64>,
    reservation: Option<u64>,
    bandwidth_limit: Option<u64>,
    server: Option<Server>,
    last_update: Option<Timestamp>,
    observed_since: u64,
    observed_bytes_since: u64,
    totals: Totals,
    series: VecDeque<SeriesPoint>,
    opens: VecDeque<OpenRow>,
    timeline: VecDeque<TimelineRow>,
}

impl BookFlow {
    fn new(id: Uuid) -> Self {
        BookFlow {
            id,
            initiator_name: None,
            node_name: None,
            initiator_id: None,
            policy_id: None,
            dialect: None,
            limit: None,
            reservation: None,
            bandwidth_limit: None,
            server: None,
            last_update: None,
            observed_since: 0,
            observed_bytes_since: 0,
            totals: Totals::default(),
            series: VecDeque::new(),
            opens: VecDeque::new(),
            timeline: VecDeque::new(),
        }
    }

    fn policy_cell(&self) -> PolicyCell {
        match (self.limit, self.reservation, self.policy_id) {
            (_, _, Some(p)) if !p.is_nil() => PolicyCell::Policy(p),
            (Some(limit), Some(reservation), _) => PolicyCell::Limits { limit, reservation },
            _ => PolicyCell::None,
        }
    }
}

fn push_capped<T>(q: &mut VecDeque<T>, item: T, cap: usize) {
    if q.len() >= cap {
        q.pop_front();
    }
    q.push_back(item);
}

fn dialect_name(v: crate::sqos::ProtocolVersion) -> String {
    match v.dialect() {
        Some(crate::sqos::Dialect::V1_0) => "1.0".into(),
        Some(crate::sqos::Dialect::V1_1) => "1.1".into(),
        None => format!("0x{:04x}", v.0),
    }
}

#[derive(Debug, Default)]
pub struct FlowBook {
    limits: BookLimits,
    flows: HashMap<Uuid, BookFlow>,
    order: Vec<Uuid>,
    assoc: HashMap<OpenKey, Uuid>,
    names: HashMap<OpenKey, String>,
    start: Option<Timestamp>,
    dropped_flows: u64,
}

impl FlowBook {
    pub fn new(limits: BookLimits) -> Self {
        FlowBook {
            limits,
            ..FlowBook::default()
        }
    }

    fn rel(&self, ts: Timestamp) -> f64 {
        self.start.map_or(0.0, |s| ts.secs_since(s))
    }

    fn flow_mut(&mut self, id: Uuid) -> Option<&mut BookFlow> {
        if !self.flows.contains_key(&id) {
            if self.flows.len() >= self.limits.max_flows {
                self.dropped_flows += 1;
                return None;
            }
            self.flows.insert(id, BookFlow::new(id));
            self.order.push(id);
        }
        self.flows.get_mut(&id)
    }

    fn key(rec: &SqosRecord) -> Option<OpenKey> {
        rec.file_id.map(|f| (rec.conn, rec.session_id, f))
    }

    fn on_request(&mut self, rec: &SqosRecord, r: &Request) {
        let key = Self::key(rec);
        let answered_ok = rec.response_frame.is_some();
        if r.options.contains(Options::SET_LOGICAL_FLOW_ID) {
            if let Some(k) = key {
                if r.logical_flow_id.is_nil() {
                    self.assoc.remove(&k);
                } else if self.assoc.len() < self.limits.max_opens || self.assoc.contains_key(&k) {
                    self.assoc.insert(k, r.logical_flow_id);
                    let t = self.rel(rec.ts);
                    let name = rec
                        .file_name
                        .clone()
                        .or_else(|| self.names.get(&k).cloned())
                        .unwrap_or_else(|| "(name not seen)".into());
                    let cap = self.limits.rows_per_list;
                    if let Some(f) = self.flow_mut(r.logical_flow_id) {
                        push_capped(
                            &mut f.opens,
                            OpenRow {
                                frame: rec.frame,
                                t,
                                file_name: name,
                                host: rec.src.ip().to_string(),
                                ended_frame: None,
                            },
                            cap,
                        );
                    }
                }
            }
        }
        let id = if !r.logical_flow_id.is_nil() {
            Some(r.logical_flow_id)
        } else {
            key.and_then(|k| self.assoc.get(&k).copied())
        };
        let Some(id) = id else { return };
        let t = self.rel(rec.ts);
        let cap = self.limits.series_per_flow;
        let Some(f) = self.flow_mut(id) else { return };
        f.dialect = Some(dialect_name(r.protocol_version));
        if r.options.contains(Options::SET_POLICY) || r.options.contains(Options::PROBE_POLICY) {
            f.limit = Some(r.limit);
            f.reservation = Some(r.reservation);
            f.policy_id = Some(r.policy_id);
            f.initiator_id = Some(r.initiator_id);
            f.bandwidth_limit = r.v1_1.map(|v| v.bandwidth_limit);
            if r.initiator_name.is_some() {
                f.initiator_name.clone_from(&r.initiator_name);
            }
            if r.initiator_node_name.is_some() {
                f.node_name.clone_from(&r.initiator_node_name);
            }
        }
        if r.options.contains(Options::UPDATE_COUNTERS) && answered_ok {
            if let Some(prev) = f.last_update {
                let dt = rec.ts.secs_since(prev);
                if dt > 0.0 {
                    let io = r.io_count_increment;
                    let kb = r.v1_1.map(|v| v.kilobyte_count_increment);
                    let point = SeriesPoint {
                        t,
                        reported_iops: Some(io as f64 / dt),
                        observed_iops: Some(f.observed_since as f64 / dt),
                        latency_ms: (io > 0)
                            .then(|| r.latency_increment as f64 / io as f64 / 10_000.0),
                        // Reported by 1.1 clients; else what was seen, when anything was.
                        kbps: kb.map(|k| k as f64 / dt).or_else(|| {
                            (f.observed_bytes_since > 0)
                                .then(|| f.observed_bytes_since as f64 / 1024.0 / dt)
                        }),
                        max_rate: f.server.as_ref().map(|s| s.max),
                        min_rate: f.server.as_ref().map(|s| s.min),
                        max_bandwidth: f.server.as_ref().and_then(|s| s.max_bw),
                    };
                    push_capped(&mut f.series, point, cap);
                    let tot = &mut f.totals;
                    tot.io = tot.io.saturating_add(io);
                    tot.latency = tot.latency.saturating_add(r.latency_increment);
                    if let Some(k) = kb {
                        tot.kilobytes = tot.kilobytes.saturating_add(k);
                        tot.has_kb = true;
                    }
                    tot.observed = tot.observed.saturating_add(f.observed_since);
                    tot.secs += dt;
                }
            }
            f.last_update = Some(rec.ts);
            f.observed_since = 0;
            f.observed_bytes_since = 0;
        }
    }

    fn on_response(&mut self, rec: &SqosRecord, r: &Response) {
        let id = if !r.logical_flow_id.is_nil() {
            Some(r.logical_flow_id)
        } else {
            Self::key(rec).and_then(|k| self.assoc.get(&k).copied())
        };
        let Some(id) = id else { return };
        if rec.nt_status.is_some_and(|s| s != 0) {
            return;
        }
        let t = self.rel(rec.ts);
        let cap = self.limits.rows_per_list;
        let Some(f) = self.flow_mut(id) else { return };
        let changed = f.server.as_ref().is_none_or(|s| {
            s.status != r.status
                || s.max != r.maximum_io_rate
                || s.min != r.minimum_io_rate
                || s.max_bw != r.maximum_bandwidth
        });
        if changed {
            let mut text = format!(
                "{} max={} min={}",
                super::model::status_label(Some(r.status)),
                r.maximum_io_rate,
                r.minimum_io_rate
            );
            if let Some(bw) = r.maximum_bandwidth {
                text.push_str(&format!(" maxbw={bw}KB/s"));
            }
            push_capped(
                &mut f.timeline,
                TimelineRow {
                    frame: rec.frame,
                    t,
                    text,
                    status: Some(r.status),
                },
                cap,
            );
        }
        f.server = Some(Server {
            status: r.status,
            max: r.maximum_io_rate,
            min: r.minimum_io_rate,
            max_bw: r.maximum_bandwidth,
            base: r.base_io_size,
            ttl: r.time_to_live,
        });
    }

    fn row(&self, f: &BookFlow) -> FlowRow {
        let last = f.series.back();
        FlowRow {
            id: f.id,
            initiator: f
                .initiator_name
                .clone()
                .unwrap_or_else(|| super::model::short_id(&f.id)),
            node: f.node_name.clone().unwrap_or_else(|| "-".into()),
            policy: f.policy_cell(),
            reported_iops: last.and_then(|p| p.reported_iops),
            observed_iops: last.and_then(|p| p.observed_iops),
            latency_ms: last.and_then(|p| p.latency_ms),
            kbps: last.and_then(|p| p.kbps),
            status: f.server.as_ref().map(|s| s.status),
            findings: 0,
            worst: None,
        }
    }
}

impl RecordSink for FlowBook {
    fn on_sqos(&mut self, rec: SqosRecord) {
        match &rec.body {
            SqosBody::Request(d) => {
                if let Some(r) = &d.message {
                    self.on_request(&rec, r);
                }
            }
            SqosBody::Response(d) => {
                if let Some(r) = &d.message {
                    self.on_response(&rec, r);
                }
            }
            SqosBody::NoBuffer => {}
        }
    }

    fn on_open(&mut self, rec: &OpenRecord) {
        let key = (rec.conn, rec.session_id, rec.file_id);
        if self.names.len() < self.limits.max_opens || self.names.contains_key(&key) {
            self.names.insert(key, rec.file_name.clone());
        }
    }

    fn on_close(&mut self, rec: &crate::pipeline::CloseRecord) {
        let key = (rec.conn, rec.session_id, rec.file_id);
        self.names.remove(&key);
        if let Some(id) = self.assoc.remove(&key) {
            if let Some(f) = self.flows.get_mut(&id) {
                if let Some(o) = f.opens.iter_mut().rev().find(|o| o.ended_frame.is_none()) {
                    o.ended_frame = Some(rec.frame);
                }
            }
        }
    }

    fn on_io(&mut self, rec: &IoRecord) {
        let key = (rec.conn, rec.session_id, rec.file_id);
        if let Some(f) = self
            .assoc
            .get(&key)
            .copied()
            .and_then(|id| self.flows.get_mut(&id))
        {
            f.observed_since = f.observed_since.saturating_add(1);
            f.observed_bytes_since = f
                .observed_bytes_since
                .saturating_add(u64::from(rec.transferred));
        }
    }
}

impl FlowSource for FlowBook {
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.start = Some(ts);
    }

    fn finish(&mut self) {}

    fn rows(&self) -> Vec<FlowRow> {
        self.order
            .iter()
            .filter_map(|id| self.flows.get(id))
            .map(|f| self.row(f))
            .collect()
    }

    fn detail(&self, id: Uuid) -> Option<FlowDetail> {
        let f = self.flows.get(&id)?;
        let tot = &f.totals;
        let per_sec = |n: u64| (tot.secs > 0.0).then(|| n as f64 / tot.secs);
        Some(FlowDetail {
            id,
            initiator_name: f.initiator_name.clone(),
            node_name: f.node_name.clone(),
            initiator_id: f.initiator_id,
            policy_id: f.policy_id,
            dialect: f.dialect.clone(),
            limit: f.limit,
            reservation: f.reservation,
            bandwidth_limit: f.bandwidth_limit,
            max_rate: f.server.as_ref().map(|s| s.max),
            min_rate: f.server.as_ref().map(|s| s.min),
            max_bandwidth: f.server.as_ref().and_then(|s| s.max_bw),
            base_io_size: f.server.as_ref().map(|s| s.base),
            ttl_ms: f.server.as_ref().map(|s| s.ttl),
            status: f.server.as_ref().map(|s| s.status),
            avg_reported_iops: per_sec(tot.io),
            avg_observed_iops: per_sec(tot.observed),
            avg_latency_ms: (tot.io > 0).then(|| tot.latency as f64 / tot.io as f64 / 10_000.0),
            avg_kbps: if tot.has_kb {
                per_sec(tot.kilobytes)
            } else {
                None
            },
            series: f.series.iter().copied().collect(),
            opens: f.opens.iter().cloned().collect(),
            timeline: f.timeline.iter().cloned().collect(),
            findings: Vec::new(),
        })
    }

    fn findings(&self) -> Vec<FindingRow> {
        Vec::new()
    }

    fn notes(&self) -> Vec<String> {
        if self.dropped_flows > 0 {
            vec![format!(
                "more than {} flows: later ones not followed",
                self.limits.max_flows
            )]
        } else {
            Vec::new()
        }
    }
}
