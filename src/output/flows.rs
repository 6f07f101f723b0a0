//! `sqos flows`: the flow table (text, human first), the flows as JSON, the series rows.
//! Keys are documented in docs/analysis.md; times are epoch seconds like `sqos dissect`.

use super::escape;
use std::fmt::Write as _;

use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::analysis::{
    Analysis, FlowChannel, FlowFinding, FlowState, IntervalRow, OpenEntry, TimelineEntry,
    TimelineEvent,
};
use crate::capture::Timestamp;
use crate::sqos::{Dialect, ProtocolVersion, Status};

use super::json::file_id_guid;
use super::time::iso_utc;

fn guid(u: Uuid) -> String {
    u.to_string()
}

fn short(u: Uuid) -> String {
    u.to_string().chars().take(8).collect()
}

/// "1.0" / "1.1", or `None` for a ProtocolVersion of neither dialect.
pub fn dialect(v: ProtocolVersion) -> Option<&'static str> {
    match v.dialect() {
        Some(Dialect::V1_0) => Some("1.0"),
        Some(Dialect::V1_1) => Some("1.1"),
        None => None,
    }
}

/// Status without the StorageQoS prefix, for the table.
pub fn status_label(s: Status) -> String {
    match s.short_name() {
        Some(n) => n.to_string(),
        None => format!("0x{:08x}", s.0),
    }
}

fn open_json(o: &OpenEntry) -> Value {
    json!({
        "file_name": o.file_name.as_deref(),
        "file_id": file_id_guid(o.open.file_id).to_string(),
        "connection": o.conn.0,
        "session_id": o.open.session_id,
        "associated_by": o.by,
        "frame": o.frame,
        "time": o.ts.as_secs_f64(),
        "datetime": iso_utc(o.ts),
        "ended_frame": o.ended_frame,
    })
}

fn channel_json(c: &FlowChannel) -> Value {
    json!({
        "connection": c.conn.0,
        "session_id": c.session_id,
        "client": c.client.map(|a| a.to_string()),
        "server": c.server.map(|a| a.to_string()),
        "joined": c.joined,
        "first_frame": c.first_frame,
        "last_frame": c.last_frame,
        "io_count": c.io_count,
        "sqos_requests": c.sqos_requests,
        "ended_by": c.ended.map(|e| e.as_str()),
        "ended_frame": c.ended_frame,
        "lost_requests": c.lost_requests,
        "replayed_requests": c.replayed_requests,
    })
}

fn timeline_json(e: &TimelineEntry) -> Value {
    match e.event {
        TimelineEvent::Policy(p) => json!({
            "frame": e.frame,
            "time": e.ts.as_secs_f64(),
            "datetime": iso_utc(e.ts),
            "kind": "policy",
            "policy_id": guid(p.policy_id),
            "initiator_id": guid(p.initiator_id),
            "limit": p.limit,
            "reservation": p.reservation,
            "bandwidth_limit": p.bandwidth_limit,
        }),
        TimelineEvent::Server(s) => json!({
            "frame": e.frame,
            "time": e.ts.as_secs_f64(),
            "datetime": iso_utc(e.ts),
            "kind": "status",
            "status": s.status.0,
            "status_name": s.status.name(),
            "maximum_io_rate": s.maximum_io_rate,
            "minimum_io_rate": s.minimum_io_rate,
            "maximum_bandwidth": s.maximum_bandwidth,
            "base_io_size": s.base_io_size,
            "time_to_live": s.time_to_live,
        }),
    }
}

pub fn finding_json(f: &FlowFinding) -> Value {
    json!({
        "code": f.code.as_str(),
        "severity": f.severity.as_str(),
        "message": f.message,
        "frame": f.frame,
        "time": f.time.as_secs_f64(),
        "datetime": iso_utc(f.time),
        "occurrences": f.occurrences,
        "last_frame": f.last_frame,
    })
}

/// Findings of a flow in frame order.
pub fn sorted_findings(f: &FlowState) -> Vec<&FlowFinding> {
    let mut v: Vec<&FlowFinding> = f.findings.iter().collect();
    v.sort_by_key(|x| (x.frame, x.code));
    v
}

/// What a flow is now: identity, policy, the server's last answer, the counter updates applied.
/// A part of `flow_json`; `sqos annotate` shows it after each message.
pub fn flow_state_json(f: &FlowState) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("initiator_id".into(), json!(f.initiator_id.map(guid)));
    m.insert("initiator_name".into(), json!(f.initiator_name));
    m.insert("initiator_node_name".into(), json!(f.initiator_node_name));
    m.insert(
        "policy_id".into(),
        json!(f.policy.map(|p| guid(p.policy_id))),
    );
    m.insert("limit".into(), json!(f.policy.map(|p| p.limit)));
    m.insert("reservation".into(), json!(f.policy.map(|p| p.reservation)));
    m.insert(
        "bandwidth_limit".into(),
        json!(f.policy.and_then(|p| p.bandwidth_limit)),
    );
    let s = f.server;
    m.insert(
        "maximum_io_rate".into(),
        json!(s.map(|s| s.maximum_io_rate)),
    );
    m.insert(
        "minimum_io_rate".into(),
        json!(s.map(|s| s.minimum_io_rate)),
    );
    m.insert(
        "maximum_bandwidth".into(),
        json!(s.and_then(|s| s.maximum_bandwidth)),
    );
    m.insert("base_io_size".into(), json!(s.map(|s| s.base_io_size)));
    m.insert("time_to_live".into(), json!(s.map(|s| s.time_to_live)));
    m.insert("last_status".into(), json!(s.map(|s| s.status.0)));
    m.insert(
        "last_status_name".into(),
        json!(s.and_then(|s| s.status.name())),
    );
    m.insert("updates_applied".into(), json!(f.updates_applied));
    m
}

/// One flow as a JSON object (the `sqos flows --format json` array element).
pub fn flow_json(f: &FlowState) -> Value {
    Value::Object(flow_object(f, Timeline::With))
}

/// Whether a flow's object carries its timeline: the longest part, which no table column
/// or filter field reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Timeline {
    With,
    Without,
}

/// The keys of a flow object's timeline ([`Timeline::With`]).
pub const TIMELINE_KEYS: [&str; 2] = ["timeline", "timeline_dropped"];

/// [`flow_json`]'s object, with or without the timeline.
pub fn flow_object(f: &FlowState, timeline: Timeline) -> Map<String, Value> {
    let mut m = flow_state_json(f);
    m.insert("logical_flow_id".into(), json!(guid(f.id)));
    m.insert(
        "protocol_version".into(),
        json!(f.protocol_version.map(|v| v.0)),
    );
    m.insert(
        "dialect".into(),
        json!(f.protocol_version.and_then(dialect)),
    );
    m.insert("first_frame".into(), json!(f.first_frame));
    m.insert(
        "opens".into(),
        Value::Array(f.opens.iter().map(open_json).collect()),
    );
    m.insert("opens_total".into(), json!(f.opens.total()));
    m.insert(
        "channels".into(),
        Value::Array(f.channels.iter().map(channel_json).collect()),
    );
    m.insert("channels_total".into(), json!(f.channels_total));
    m.insert("updates_sent".into(), json!(f.updates_sent));
    m.insert(
        "intervals".into(),
        json!(f
            .series
            .rows
            .iter()
            .map(|r| u64::from(r.intervals))
            .sum::<u64>()),
    );
    let r = f.reported_rates();
    m.insert("iops".into(), json!(r.map(|r| r.iops)));
    m.insert(
        "normalized_iops".into(),
        json!(r.map(|r| r.normalized_iops)),
    );
    m.insert(
        "avg_latency_ms".into(),
        json!(r.and_then(|r| r.avg_latency_ms)),
    );
    m.insert(
        "avg_lower_latency_ms".into(),
        json!(r.and_then(|r| r.avg_lower_latency_ms)),
    );
    m.insert(
        "kilobytes_per_second".into(),
        json!(r.and_then(|r| r.kilobytes_per_second)),
    );
    let o = f.observed_rates();
    m.insert(
        "observed".into(),
        json!({
            "io_count": f.all_io.io_count,
            "bytes": f.all_io.bytes,
            "iops": o.map(|o| o.iops),
            "normalized_iops": o.map(|o| o.normalized_iops),
            "kilobytes_per_second": o.map(|o| o.kilobytes_per_second),
            "avg_response_ms": o.and_then(|o| o.avg_response_ms),
        }),
    );
    if timeline == Timeline::With {
        let [list, dropped] = TIMELINE_KEYS;
        m.insert(
            list.into(),
            Value::Array(f.timeline.iter().map(timeline_json).collect()),
        );
        m.insert(dropped.into(), json!(f.timeline.dropped()));
    }
    m.insert(
        "findings".into(),
        Value::Array(sorted_findings(f).into_iter().map(finding_json).collect()),
    );
    m.insert("findings_total".into(), json!(f.findings_total()));
    m
}

pub fn flows_json(a: &Analysis) -> Value {
    Value::Array(a.flows.iter().map(flow_json).collect())
}

/// One interval row as a flat JSON object (`sqos export --what series`).
pub fn series_row_json(flow: Uuid, initiator_name: Option<&str>, row: &IntervalRow) -> Value {
    let rep = row.reported_rates();
    let obs = row.observed_rates();
    json!({
        "logical_flow_id": guid(flow),
        "initiator_name": initiator_name,
        "index": row.index,
        "intervals": row.intervals,
        "start": row.start.as_secs_f64(),
        "end": row.end.as_secs_f64(),
        "start_datetime": iso_utc(row.start),
        "end_datetime": iso_utc(row.end),
        "seconds": row.secs(),
        "start_frame": row.start_frame,
        "end_frame": row.end_frame,
        "updates_applied": row.updates_applied,
        "io_count_increment": row.reported.io_count,
        "normalized_io_count_increment": row.reported.normalized_io_count,
        "latency_increment": row.reported.latency,
        "lower_latency_increment": row.reported.lower_latency,
        "kilobyte_count_increment": row.reported.kilobytes,
        "iops": rep.map(|r| r.iops),
        "normalized_iops": rep.map(|r| r.normalized_iops),
        "avg_latency_ms": rep.and_then(|r| r.avg_latency_ms),
        "avg_lower_latency_ms": rep.and_then(|r| r.avg_lower_latency_ms),
        "kilobytes_per_second": rep.and_then(|r| r.kilobytes_per_second),
        "observed_io_count": row.observed.io_count,
        "observed_normalized_io_count": row.observed.normalized_io_count,
        "observed_bytes": row.observed.bytes,
        "observed_iops": obs.map(|o| o.iops),
        "observed_normalized_iops": obs.map(|o| o.normalized_iops),
        "observed_kilobytes_per_second": obs.map(|o| o.kilobytes_per_second),
        "observed_avg_response_ms": obs.and_then(|o| o.avg_response_ms),
        "observed_complete": row.observed_complete,
        "maximum_io_rate": row.in_effect.maximum_io_rate,
        "minimum_io_rate": row.in_effect.minimum_io_rate,
        "maximum_bandwidth": row.in_effect.maximum_bandwidth,
        "status_ok": row.in_effect.status_known.then_some(row.in_effect.all_ok),
    })
}

fn fmt_rate(v: Option<f64>) -> String {
    match v {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
        None => "-".into(),
    }
}

fn fmt_u64(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |x| x.to_string())
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// How the flow is limited: its policy id, or Limit / Reservation / BandwidthLimit.
fn policy_label(f: &FlowState) -> String {
    match f.policy {
        None => "-".into(),
        Some(p) if !p.policy_id.is_nil() => format!("policy {}", short(p.policy_id)),
        Some(p) => {
            let mut s = format!("lim {} res {}", p.limit, p.reservation);
            if let Some(bw) = p.bandwidth_limit.filter(|&b| b > 0) {
                let _ = write!(s, " bw {bw}");
            }
            s
        }
    }
}

fn table_row(f: &FlowState) -> Vec<String> {
    let r = f.reported_rates();
    let o = f.observed_rates();
    let name = match (&f.initiator_name, f.id.is_nil()) {
        (_, true) => "(no flow)".to_string(),
        (Some(n), _) => escape::text(n).into_owned(),
        (None, _) => "?".into(),
    };
    vec![
        cut(&name, 24),
        cut(
            &escape::text(f.initiator_node_name.as_deref().unwrap_or("-")),
            24,
        ),
        short(f.id),
        policy_label(f),
        format!(
            "{}/{}",
            fmt_u64(f.server.map(|s| s.maximum_io_rate)),
            fmt_u64(f.server.map(|s| s.minimum_io_rate))
        ),
        format!(
            "{}/{}",
            fmt_rate(r.map(|r| r.normalized_iops)),
            fmt_rate(o.map(|o| o.normalized_iops))
        ),
        fmt_rate(r.and_then(|r| r.avg_latency_ms)),
        format!(
            "{}/{}",
            fmt_rate(r.and_then(|r| r.kilobytes_per_second)),
            fmt_rate(o.map(|o| o.kilobytes_per_second))
        ),
        f.server
            .map_or_else(|| "-".into(), |s| status_label(s.status)),
        f.opens.total().to_string(),
        f.channels_total.to_string(),
        f.findings_total().to_string(),
    ]
}

const HEADERS: [&str; 12] = [
    "VM / INITIATOR",
    "NODE",
    "FLOW",
    "POLICY",
    "MAX/MIN",
    "NIOPS rep/obs",
    "LAT ms",
    "KB/s rep/obs",
    "STATUS",
    "OPENS",
    "CHANNELS",
    "FINDINGS",
];

/// The human table: one row per flow, then the findings in capture order.
pub fn flows_text(a: &Analysis) -> String {
    let rows: Vec<Vec<String>> = a.flows.iter().map(table_row).collect();
    let mut widths: Vec<usize> = HEADERS.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String]| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = w.saturating_sub(c.chars().count());
            // Names left-aligned, figures right-aligned.
            if i <= 3 || i == 8 {
                let _ = write!(s, "{c}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(s, "{}{c}  ", " ".repeat(pad));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    let headers: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
    line(&mut out, &headers);
    for r in &rows {
        line(&mut out, r);
    }
    let _ = writeln!(
        out,
        "\n{} flows; NIOPS = normalized IOPS reported by the client / observed on the wire; MAX/MIN = the server's MaximumIoRate/MinimumIoRate; CHANNELS = connections its I/O and SQOS requests went over.",
        a.flows.iter().filter(|f| !f.id.is_nil()).count()
    );
    channels_text(a, &mut out);
    let start = a.start.unwrap_or_default();
    let mut findings: Vec<(&FlowState, &FlowFinding)> = a
        .flows
        .iter()
        .flat_map(|f| f.findings.iter().map(move |x| (f, x)))
        .collect();
    findings.sort_by_key(|(_, x)| (x.frame, x.code));
    if !findings.is_empty() {
        let _ = writeln!(out, "\nFindings:");
    }
    for (f, x) in findings {
        let who = match (&f.initiator_name, f.id.is_nil()) {
            (_, true) => "(no flow)".to_string(),
            (Some(n), _) => format!("{} {}", escape::text(n), short(f.id)),
            (None, _) => short(f.id),
        };
        let mut s = format!(
            "{:>10.3}  frame {:<7} {:<7}  {:<34} {who}: {}",
            rel(x.time, start),
            x.frame,
            x.severity.as_str(),
            x.code.as_str(),
            x.message
        );
        if x.occurrences > 1 {
            let _ = write!(
                s,
                " (×{} intervals, until frame {})",
                x.occurrences, x.last_frame
            );
        }
        out.push_str(&s);
        out.push('\n');
    }
    let dropped: u64 = a.flows.iter().map(|f| f.findings.dropped()).sum();
    if dropped > 0 {
        let _ = writeln!(
            out,
            "({dropped} findings not listed: per-flow list is capped; counts above are complete)"
        );
    }
    if a.capture_notes > 0 {
        let _ = writeln!(
            out,
            "\nnote: the capture has {} (gaps, undecodable or dropped data: `sqos dissect` lists them): observed figures may be incomplete; intervals with a note are not compared.",
            if a.capture_notes == 1 {
                "1 note".to_string()
            } else {
                format!("{} notes", a.capture_notes)
            }
        );
    }
    for n in &a.notes {
        let _ = writeln!(out, "note: {n}");
    }
    // Whatever a finding or note quotes from the wire.
    escape::lines(&out).into_owned()
}

/// One channel of a flow, for the text table: addresses, how it joined, what went over it,
/// how it ended.
pub fn channel_line(c: &FlowChannel) -> String {
    let joined = c.joined.map_or("-", |j| j.as_str());
    let mut s = format!(
        "{}  session 0x{:016x}  {joined}  frames {}-{}  {} I/O  {} SQOS requests",
        c.label(),
        c.session_id,
        c.first_frame,
        c.last_frame,
        c.io_count,
        c.sqos_requests
    );
    if let (Some(e), Some(f)) = (c.ended, c.ended_frame) {
        let what = match e {
            crate::analysis::ChannelEnding::Fin => format!("closed (FIN) at frame {f}"),
            crate::analysis::ChannelEnding::Rst => format!("reset (RST) at frame {f}"),
            crate::analysis::ChannelEnding::Logoff => format!("logged off at frame {f}"),
            crate::analysis::ChannelEnding::Dropped => format!("state dropped at frame {f}"),
            crate::analysis::ChannelEnding::Silence => {
                format!("silent after frame {f} (server sent nothing more)")
            }
        };
        let _ = write!(s, "  {what}");
    }
    if c.lost_requests > 0 {
        let _ = write!(
            s,
            "; {} SQOS requests lost with it, {} replayed on another channel",
            c.lost_requests, c.replayed_requests
        );
    }
    s
}

/// The channels of the flows that used more than one, or lost requests with one.
fn channels_text(a: &Analysis, out: &mut String) {
    let multi: Vec<&FlowState> = a
        .flows
        .iter()
        .filter(|f| f.channels_total > 1 || f.channels.iter().any(|c| c.lost_requests > 0))
        .collect();
    if multi.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nChannels:");
    for f in multi {
        let who = f.initiator_name.clone().unwrap_or_else(|| "?".into());
        let _ = writeln!(out, "  {who} {}:", short(f.id));
        for c in &f.channels {
            let _ = writeln!(out, "    {}", channel_line(c));
        }
        let more = f.channels_total.saturating_sub(f.channels.len() as u64);
        if more > 0 {
            let _ = writeln!(out, "    ({more} more channels not listed)");
        }
    }
}

fn rel(ts: Timestamp, start: Timestamp) -> f64 {
    ts.secs_since(start)
}
