//! `sqos plot`: per-flow normalized IOPS over time — reported by the client and observed on the
//! wire, per update interval — with the server's MaximumIoRate and MinimumIoRate as step lines
//! and the findings as marks. Hand-written SVG: one panel per flow, a shared time axis.

use std::fmt::Write as _;

use crate::analysis::{Analysis, FlowState, IntervalRow, TimelineEvent};
use crate::capture::Timestamp;

const PANEL_W: f64 = 760.0;
const PANEL_H: f64 = 200.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 34.0;
const LEGEND_H: f64 = 56.0;

const REPORTED: &str = "#1f77b4";
const OBSERVED: &str = "#ff7f0e";
const MAXIMUM: &str = "#d62728";
const MINIMUM: &str = "#2ca02c";

#[derive(Clone, Debug)]
pub struct PlotOptions {
    /// Only flows whose id starts with, or whose initiator name equals, one of these.
    pub select: Vec<String>,
    /// At most this many panels (flows with findings first, then the busiest).
    pub max_flows: usize,
    pub title: String,
    /// The capture's name, said under the title.
    pub capture: Option<String>,
    /// One IOPS scale for every panel (compare flows at a glance), instead of one per panel.
    pub shared_scale: bool,
}

impl Default for PlotOptions {
    fn default() -> Self {
        PlotOptions {
            select: Vec::new(),
            max_flows: 12,
            title: "Normalized IOPS per logical flow".into(),
            capture: None,
            shared_scale: false,
        }
    }
}

/// Wire text made safe for an SVG text node or attribute: escaped as for a terminal (no control
/// character or bidi override reaches the XML), then markup escaped.
fn esc(s: &str) -> String {
    super::escape::text(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// About how wide `s` is in DejaVu Sans at 12 px (capitals are wider), for laying out the legend.
fn text_width(s: &str) -> f64 {
    s.chars()
        .map(|c| if c.is_ascii_uppercase() { 8.2 } else { 6.6 })
        .sum()
}

/// A round step giving about `n` ticks over `0..max`.
fn tick_step(max: f64, n: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / n;
    let mag = 10f64.powf(raw.log10().floor());
    let r = raw / mag;
    let k = if r <= 1.0 {
        1.0
    } else if r <= 2.0 {
        2.0
    } else if r <= 5.0 {
        5.0
    } else {
        10.0
    };
    k * mag
}

fn selected<'a>(a: &'a Analysis, o: &PlotOptions) -> Vec<&'a FlowState> {
    let mut flows: Vec<&FlowState> = a
        .flows
        .iter()
        .filter(|f| !f.id.is_nil())
        .filter(|f| {
            o.select.is_empty()
                || o.select.iter().any(|s| {
                    f.id.to_string().starts_with(&s.to_ascii_lowercase())
                        || f.initiator_name.as_deref() == Some(s.as_str())
                })
        })
        .collect();
    let busy = |f: &FlowState| f.observed_rates().map_or(0.0, |r| r.normalized_iops);
    flows.sort_by(|a, b| {
        (b.findings_total() > 0)
            .cmp(&(a.findings_total() > 0))
            .then(busy(b).total_cmp(&busy(a)))
            .then(a.first_frame.cmp(&b.first_frame))
    });
    flows.truncate(o.max_flows.max(1));
    flows
}

/// Steps (t0, t1, value) of one server value over the capture, from the flow's timeline.
fn server_steps(f: &FlowState, end: f64, start: Timestamp, min: bool) -> Vec<(f64, f64, f64)> {
    let points: Vec<(f64, u64)> = f
        .timeline
        .iter()
        .filter_map(|e| match e.event {
            TimelineEvent::Server(s) => Some((
                e.ts.secs_since(start),
                if min {
                    s.minimum_io_rate
                } else {
                    s.maximum_io_rate
                },
            )),
            TimelineEvent::Policy(_) => None,
        })
        .collect();
    let mut out = Vec::new();
    for (i, &(t, v)) in points.iter().enumerate() {
        let t1 = points.get(i + 1).map_or(end, |p| p.0);
        if v > 0 && t1 > t {
            out.push((t, t1, v as f64));
        }
    }
    out
}

struct Panel {
    x0: f64,
    y0: f64,
    t_max: f64,
    v_max: f64,
    /// Between the IOPS grid lines.
    v_step: f64,
}

impl Panel {
    fn x(&self, t: f64) -> f64 {
        self.x0 + LEFT + (t / self.t_max).clamp(0.0, 1.0) * (PANEL_W - LEFT - RIGHT)
    }
    fn y(&self, v: f64) -> f64 {
        let h = PANEL_H - TOP - BOTTOM;
        self.y0 + TOP + h - (v / self.v_max).clamp(0.0, 1.05) * h
    }
}

/// Step path through (t0, t1, value) segments; a gap between segments lifts the pen.
fn step_path(p: &Panel, segs: &[(f64, f64, f64)]) -> String {
    let mut d = String::new();
    let mut last_t: Option<f64> = None;
    for &(t0, t1, v) in segs {
        let cmd = if last_t.is_some_and(|l| (l - t0).abs() < 1e-9) {
            'L'
        } else {
            'M'
        };
        let _ = write!(
            d,
            "{cmd}{:.1},{:.1} L{:.1},{:.1} ",
            p.x(t0),
            p.y(v),
            p.x(t1),
            p.y(v)
        );
        last_t = Some(t1);
    }
    d
}

fn flow_title(f: &FlowState) -> String {
    let mut s = f.initiator_name.clone().unwrap_or_else(|| "?".into());
    if let Some(n) = &f.initiator_node_name {
        let _ = write!(s, " on {n}");
    }
    let id = f.id.to_string();
    let _ = write!(s, " · flow {}", id.get(..8).unwrap_or(&id));
    if let Some(p) = f.policy {
        if p.policy_id.is_nil() {
            let _ = write!(s, " · limit {} reservation {}", p.limit, p.reservation);
        } else {
            let pid = p.policy_id.to_string();
            let _ = write!(s, " · policy {}", pid.get(..8).unwrap_or(&pid));
        }
    }
    s
}

/// The whole picture as an SVG document.
pub fn iops_svg(a: &Analysis, o: &PlotOptions) -> String {
    let flows = selected(a, o);
    let start = a.start.unwrap_or_default();
    let end = a.end.map_or(1.0, |e| e.secs_since(start)).max(1e-3);
    let cols = if flows.len() > 4 { 2 } else { 1 };
    let rows = flows.len().div_ceil(cols).max(1);
    let width = PANEL_W * cols as f64;
    let height = LEGEND_H + PANEL_H * rows as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r##"<rect width="100%" height="100%" fill="#ffffff"/><text x="12" y="22" font-size="16" font-weight="bold">{}</text>"##,
        esc(&o.title)
    );
    if let Some(name) = &o.capture {
        let _ = writeln!(
            s,
            r##"<text x="{:.0}" y="22" fill="#555">{}</text>"##,
            24.0 + o.title.chars().count() as f64 * 9.6,
            esc(name)
        );
    }
    // Legend.
    let legend = [
        (REPORTED, "", "reported by the client"),
        (OBSERVED, "", "observed on the wire (wide)"),
        (MAXIMUM, "6,4", "MaximumIoRate"),
        (MINIMUM, "6,4", "MinimumIoRate"),
    ];
    let mut lx = 12.0;
    for (color, dash, label) in legend {
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="42" x2="{:.0}" y2="42" stroke="{color}" stroke-width="2.5" stroke-dasharray="{dash}"/><text x="{:.0}" y="46">{label}</text>"#,
            lx + 24.0,
            lx + 30.0
        );
        lx += 40.0 + text_width(label);
    }
    let _ = writeln!(
        s,
        r##"<path d="M{lx:.0},47 l5,-9 l5,9 z" fill="#d62728"/><text x="{:.0}" y="46">finding</text>"##,
        lx + 14.0
    );
    if flows.is_empty() {
        let _ = writeln!(
            s,
            r#"<text x="12" y="{:.0}">No logical flow with data in this capture.</text>"#,
            LEGEND_H + 30.0
        );
    }
    let t_step = tick_step(end, 8.0);
    let lines: Vec<FlowLines> = flows.iter().map(|f| flow_lines(f, start, end)).collect();
    let shared_top = lines.iter().map(FlowLines::top).fold(1.0f64, f64::max);
    for (i, (f, l)) in flows.iter().zip(&lines).enumerate() {
        let (c, r) = (i % cols, i / cols);
        let FlowLines {
            rep,
            obs,
            maxs,
            mins,
        } = l;
        let v_top = if o.shared_scale { shared_top } else { l.top() };
        let v_step = tick_step(v_top * 1.1, 4.0);
        let v_max = (v_top * 1.1 / v_step).ceil() * v_step;
        let p = Panel {
            x0: PANEL_W * c as f64,
            y0: LEGEND_H + PANEL_H * r as f64,
            t_max: end,
            v_max,
            v_step,
        };
        panel(&mut s, f, &p, (rep, obs, maxs, mins), start, end, t_step);
    }
    let _ = writeln!(s, "</svg>");
    s
}

/// What one panel draws: (start, end, value) steps in seconds since the capture start.
struct FlowLines {
    rep: Vec<(f64, f64, f64)>,
    obs: Vec<(f64, f64, f64)>,
    maxs: Vec<(f64, f64, f64)>,
    mins: Vec<(f64, f64, f64)>,
}

impl FlowLines {
    fn top(&self) -> f64 {
        self.rep
            .iter()
            .chain(&self.obs)
            .chain(&self.maxs)
            .chain(&self.mins)
            .map(|x| x.2)
            .fold(1.0f64, f64::max)
    }
}

type Segs = Vec<(f64, f64, f64)>;

fn flow_lines(f: &FlowState, start: Timestamp, end: f64) -> FlowLines {
    // One step per interval that has the figure: (from, to, normalized IOPS) in seconds.
    let steps = |niops: &dyn Fn(&IntervalRow) -> Option<f64>| -> Segs {
        f.series
            .rows
            .iter()
            .filter_map(|row| {
                niops(row).map(|v| (row.start.secs_since(start), row.end.secs_since(start), v))
            })
            .collect()
    };
    let rep = steps(&|row| row.reported_rates().map(|x| x.normalized_iops));
    let obs = steps(&|row| row.observed_rates().map(|x| x.normalized_iops));
    FlowLines {
        rep,
        obs,
        maxs: server_steps(f, end, start, false),
        mins: server_steps(f, end, start, true),
    }
}

/// One flow's panel: frame, title, axes, the four lines and the findings with their names.
fn panel(
    s: &mut String,
    f: &FlowState,
    p: &Panel,
    (rep, obs, maxs, mins): (&Segs, &Segs, &Segs, &Segs),
    start: Timestamp,
    end: f64,
    t_step: f64,
) {
    let (v_max, v_step) = (p.v_max, p.v_step);
    let (px, py) = (p.x(0.0), p.y(v_max));
    let (pw, ph) = (p.x(end) - px, p.y(0.0) - py);
    let _ = writeln!(
        s,
        r##"<g><rect x="{px:.1}" y="{py:.1}" width="{pw:.1}" height="{ph:.1}" fill="#fafafa" stroke="#999"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-weight="bold">{}</text>"#,
        px,
        py - 8.0,
        esc(&flow_title(f))
    );
    let status = f
        .server
        .map(|sv| super::flows::status_label(sv.status))
        .unwrap_or_else(|| "no status".into());
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#555">{}{} · {} finding{}</text>"##,
        px + pw,
        py - 8.0,
        esc(&status),
        match f.channels_total {
            0 | 1 => String::new(),
            n => format!(" · {n} channels"),
        },
        f.findings_total(),
        if f.findings_total() == 1 { "" } else { "s" }
    );
    // Grid and axes.
    let mut v = 0.0;
    while v <= v_max + 1e-9 {
        let y = p.y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{px:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e3e3e3"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{}</text>"##,
            px + pw,
            px - 6.0,
            y + 4.0,
            v
        );
        v += v_step;
    }
    let mut t = 0.0;
    while t <= end + 1e-9 {
        let x = p.x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#999"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#333">{}</text>"##,
            py + ph,
            py + ph + 4.0,
            py + ph + 17.0,
            t
        );
        t += t_step;
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#555">seconds since capture start</text>"##,
        px + pw,
        py + ph + 30.0
    );
    let _ = writeln!(
        s,
        r##"<text transform="translate({:.1},{:.1}) rotate(-90)" text-anchor="middle" fill="#555">normalized IOPS</text>"##,
        p.x0 + 14.0,
        py + ph / 2.0
    );
    // Observed wide and pale under reported, so both show where they agree.
    for (segs, color, dash, width, opacity) in [
        (maxs, MAXIMUM, "6,4", 2.0, 1.0),
        (mins, MINIMUM, "6,4", 2.0, 1.0),
        (obs, OBSERVED, "", 6.0, 0.55),
        (rep, REPORTED, "", 2.0, 1.0),
    ] {
        if !segs.is_empty() {
            let _ = writeln!(
                s,
                r#"<path d="{}" fill="none" stroke="{color}" stroke-width="{width}" stroke-opacity="{opacity}" stroke-dasharray="{dash}"/>"#,
                step_path(p, segs)
            );
        }
    }
    // A channel that ended under the flow: a grey line where its I/O had to move.
    for c in f.channels.iter().filter(|_| f.channels_total > 1) {
        let (Some(e), Some(ts), Some(fr)) = (c.ended, c.ended_ts, c.ended_frame) else {
            continue;
        };
        let cx = p.x(ts.secs_since(start).clamp(0.0, end));
        let _ = writeln!(
            s,
            r##"<line x1="{cx:.1}" y1="{py:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#7f7f7f" stroke-width="1.5" stroke-dasharray="2,3"><title>channel {} ended ({}) at frame {fr}</title></line>"##,
            py + ph,
            esc(&c.label()),
            e.as_str()
        );
    }
    // Each marker says its finding (PNGs have no tooltips); a name that would overlap the
    // one before it on its row goes one row down, and past three rows it is left out (the
    // tooltip still has it).
    let mut row_ends = [f64::MIN; 3];
    for x in f.findings.iter() {
        let fx = p.x(x.time.secs_since(start));
        let _ = writeln!(
            s,
            r##"<path d="M{:.1},{:.1} l5,-9 l5,9 z" fill="#d62728"><title>{} frame {}: {}</title></path>"##,
            fx - 5.0,
            py + 11.0,
            esc(x.code.as_str()),
            x.frame,
            esc(&x.message)
        );
        let name = marker_name(x.code.as_str());
        let w = text_width(name) * 0.85;
        if let Some(row) = row_ends.iter().position(|&e| e < fx + 6.0) {
            row_ends[row] = fx + 6.0 + w + 8.0;
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#d62728">{}</text>"##,
                fx + 6.0,
                py + 11.0 + 11.0 * row as f64,
                esc(name)
            );
        }
    }
    let _ = writeln!(s, "</g>");
}

/// A finding code as a marker says it: without its `flow.` / `sqos.` family prefix.
fn marker_name(code: &str) -> &str {
    code.split_once('.').map_or(code, |(_, rest)| rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(100.0, 4.0), 50.0);
        assert_eq!(tick_step(10.0, 8.0), 2.0);
        assert_eq!(tick_step(0.0, 4.0), 1.0);
        assert_eq!(tick_step(660.0, 4.0), 200.0);
    }

    #[test]
    fn escapes_text() {
        assert_eq!(esc("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
