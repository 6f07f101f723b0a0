//! The Flow detail view: what was asked and answered, rates over time as charts (with the
//! server's MaximumIoRate / MinimumIoRate lines), the opens, the status timeline, the findings.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Cell, Chart, Dataset, GraphType, Paragraph};
use ratatui::Frame;

use super::{fit, right, secs, span, ListTable};
use crate::tui::app::{App, DetailTab, Hit};
use crate::tui::live::Live;
use crate::tui::model::{rate_cell, short_id, status_label, FlowDetail, SeriesPoint};

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |x| x.to_string())
}

fn header_lines(d: &FlowDetail, app: &App) -> Vec<Line<'static>> {
    let t = app.theme;
    let name = d
        .initiator_name
        .clone()
        .unwrap_or_else(|| "(no initiator name)".into());
    let node = d.node_name.clone().unwrap_or_else(|| "-".into());
    let mut asked = format!(
        "asked   limit {}  resv {}",
        opt(d.limit),
        opt(d.reservation)
    );
    if let Some(bw) = d.bandwidth_limit.filter(|b| *b > 0) {
        asked.push_str(&format!("  bw {bw} KB/s"));
    }
    if let Some(p) = d.policy_id.filter(|p| !p.is_nil()) {
        asked.push_str(&format!("  policy {}", short_id(&p)));
    }
    if let Some(v) = &d.dialect {
        asked.push_str(&format!("  v{v}"));
    }
    let mut server = vec![
        span("server  ", Style::default()),
        span(status_label(d.status), t.status(d.status)),
        Span::raw(format!(
            "  max {}  min {}",
            opt(d.max_rate),
            opt(d.min_rate)
        )),
    ];
    if let Some(bw) = d.max_bandwidth.filter(|b| *b > 0) {
        server.push(Span::raw(format!("  maxbw {bw}")));
    }
    server.push(Span::raw(format!(
        "  base {}  ttl {}",
        opt(d.base_io_size),
        d.ttl_ms.map_or_else(|| "-".into(), |t| format!("{t}ms"))
    )));
    let mut avg = format!(
        "average {} NIOPS  seen {}  lat {}",
        rate_cell(d.avg_reported_iops),
        rate_cell(d.avg_observed_iops),
        d.avg_latency_ms
            .map_or_else(|| "-".into(), |l| format!("{l:.2} ms"))
    );
    if let Some(k) = d.avg_kbps {
        avg.push_str(&format!("  {} KB/s", rate_cell(Some(k))));
    }
    vec![
        Line::from(vec![
            span(name, t.title()),
            Span::raw(" @ "),
            span(node, t.title()),
            span(format!("  flow {}", d.id), t.dim()),
            span(
                match d.channels.len() {
                    0 | 1 => String::new(),
                    n => format!("  {n} channels"),
                },
                t.dim(),
            ),
        ]),
        Line::raw(asked),
        Line::from(server),
        Line::raw(avg),
    ]
}

fn tabs_line(app: &mut App, area: Rect, chart: DetailTab, list: DetailTab) -> Line<'static> {
    let t = app.theme;
    let mut spans = Vec::new();
    let mut x = area.x;
    for tab in DetailTab::ALL {
        let label = format!(" {} ", tab.title());
        let w = label.chars().count() as u16;
        let style = if tab == app.detail_tab {
            t.selected()
        } else if tab == chart || tab == list {
            t.selected_unfocused()
        } else {
            Style::default()
        };
        app.hits.push((
            Rect::new(x, area.y, w.min(area.right().saturating_sub(x)), 1),
            Hit::DetailTab(tab),
        ));
        spans.push(span(label, style));
        spans.push(Span::raw("│"));
        x = x.saturating_add(w + 1);
    }
    Line::from(spans)
}

pub fn draw(f: &mut Frame<'_>, area: Rect, app: &mut App, live: &Live) {
    let t = app.theme;
    let Some(d) = app.detail_flow.and_then(|id| live.analysis.detail(id)) else {
        f.render_widget(
            Paragraph::new("No flow selected (Esc goes back to the flows).").style(t.dim()),
            area,
        );
        return;
    };
    let [head, tabs, body] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Length(1),
        Constraint::Min(3),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(header_lines(&d, app)), head);
    // Tall screens show a chart and a list together; small ones the selected tab only.
    let big = body.height >= 30;
    let chart_tab = match app.detail_tab {
        DetailTab::Bandwidth | DetailTab::Latency => app.detail_tab,
        _ => DetailTab::Iops,
    };
    let list_tab = match app.detail_tab {
        DetailTab::Channels | DetailTab::Timeline | DetailTab::Findings => app.detail_tab,
        _ => DetailTab::Opens,
    };
    let (chart_shown, list_shown) = if big {
        (chart_tab, list_tab)
    } else {
        (app.detail_tab, app.detail_tab)
    };
    let line = tabs_line(app, tabs, chart_shown, list_shown);
    f.render_widget(Paragraph::new(line), tabs);
    if big {
        let [c, l] =
            Layout::vertical([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(body);
        draw_chart(f, c, app, &d, chart_tab);
        draw_list(f, l, app, &d, list_tab);
    } else if matches!(
        app.detail_tab,
        DetailTab::Iops | DetailTab::Bandwidth | DetailTab::Latency
    ) {
        draw_chart(f, body, app, &d, app.detail_tab);
    } else {
        draw_list(f, body, app, &d, app.detail_tab);
    }
}

/// One series as steps: each interval's value held from its start to its end, as `sqos plot`
/// draws them (a rate is an interval's average, not a value at an instant); unknown values
/// are skipped.
fn points(series: &[SeriesPoint], pick: impl Fn(&SeriesPoint) -> Option<f64>) -> Vec<(f64, f64)> {
    series
        .iter()
        .filter_map(|p| pick(p).filter(|v| v.is_finite()).map(|v| (p, v)))
        .flat_map(|(p, v)| [(p.t0, v), (p.t, v)])
        .collect()
}

/// A server value in effect as a step line (0 = none set: not drawn).
fn level(series: &[SeriesPoint], pick: impl Fn(&SeriesPoint) -> Option<u64>) -> Vec<(f64, f64)> {
    points(series, |p| pick(p).filter(|v| *v > 0).map(|v| v as f64))
}

/// A line of a chart: a measured series, or a server value in effect (a step line).
struct Series {
    name: &'static str,
    points: Vec<(f64, f64)>,
    level: bool,
}

impl Series {
    fn measured(name: &'static str, points: Vec<(f64, f64)>) -> Self {
        Series {
            name,
            points,
            level: false,
        }
    }
    fn level(name: &'static str, points: Vec<(f64, f64)>) -> Self {
        Series {
            name,
            points,
            level: true,
        }
    }
}

/// A list row: its index, its cells, its style.
type TableRow = (usize, Vec<Cell<'static>>, Style);

fn axis_value(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// How each line is drawn, so they differ also without colour: the first measured series as
/// a braille line, the second as dots, the server's levels as half blocks.
fn marker(s: &Series, i: usize) -> (Marker, &'static str) {
    if s.level {
        (Marker::HalfBlock, "━━")
    } else if i == 0 {
        (Marker::Braille, "⠒⠒")
    } else {
        (Marker::Dot, "••")
    }
}

/// The legend, on its own line above the plot so it never covers a line. A level's last
/// value is given too: it tells the MaximumIoRate and MinimumIoRate lines apart without colour.
fn legend(lines: &[Series], app: &App) -> Line<'static> {
    let t = app.theme;
    let mut spans = vec![Span::raw(" ")];
    for (i, s) in lines.iter().enumerate() {
        if s.points.is_empty() {
            continue;
        }
        let (_, glyph) = marker(s, i);
        spans.push(span(glyph, t.series(i)));
        let mut label = format!(" {}", s.name);
        if s.level {
            if let Some((_, v)) = s.points.last() {
                label.push_str(&format!(" {}", axis_value(*v)));
            }
        }
        label.push_str("   ");
        spans.push(Span::raw(label));
    }
    Line::from(spans)
}

fn draw_chart(f: &mut Frame<'_>, area: Rect, app: &App, d: &FlowDetail, tab: DetailTab) {
    let t = app.theme;
    let s = &d.series;
    let (title, unit, lines): (&str, &str, Vec<Series>) = match tab {
        DetailTab::Bandwidth => (
            "Bandwidth",
            "KB/s",
            vec![
                Series::measured("KB/s", points(s, |p| p.kbps)),
                Series::level("MaximumBandwidth", level(s, |p| p.max_bandwidth)),
            ],
        ),
        DetailTab::Latency => (
            "Latency",
            "ms",
            vec![Series::measured("latency ms", points(s, |p| p.latency_ms))],
        ),
        _ => (
            "Normalized IOPS",
            "NIOPS",
            vec![
                Series::measured("reported", points(s, |p| p.reported_iops)),
                Series::measured("seen", points(s, |p| p.observed_iops)),
                Series::level("MaximumIoRate", level(s, |p| p.max_rate)),
                Series::level("MinimumIoRate", level(s, |p| p.min_rate)),
            ],
        ),
    };
    let block = Block::default().borders(Borders::TOP).title(Line::styled(
        format!(
            " {title} over time ({} interval{}) ",
            s.len(),
            if s.len() == 1 { "" } else { "s" }
        ),
        t.title(),
    ));
    if lines.iter().all(|l| l.points.is_empty()) {
        let msg = if tab == DetailTab::Bandwidth && d.dialect.as_deref() == Some("1.0") {
            "No bandwidth figures: dialect 1.0 clients do not report kilobytes."
        } else {
            "No update intervals yet (a flow needs two UPDATE_COUNTERS to give a rate)."
        };
        f.render_widget(Paragraph::new(msg).style(t.dim()).block(block), area);
        return;
    }
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [key, plot] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
    f.render_widget(Paragraph::new(legend(&lines, app)), key);
    // Time from the capture's start, as `sqos plot` draws it.
    let (x0, mut x1, mut y1) = (0.0f64, 0.0f64, 0.0f64);
    for l in &lines {
        for &(x, y) in &l.points {
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.15 };
    // The server's levels first, so the measured lines are drawn over them.
    let order = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.level)
        .chain(lines.iter().enumerate().filter(|(_, l)| !l.level));
    let datasets: Vec<Dataset<'_>> = order
        .filter(|(_, l)| !l.points.is_empty())
        .map(|(i, l)| {
            Dataset::default()
                .name(l.name)
                .marker(marker(l, i).0)
                .graph_type(GraphType::Line)
                .style(t.series(i))
                .data(&l.points)
        })
        .collect();
    let chart = Chart::new(datasets)
        .x_axis(
            Axis::default()
                .bounds([x0, x1])
                .labels([secs(x0), secs((x0 + x1) / 2.0), secs(x1)])
                .style(t.dim()),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, y1])
                .labels([
                    "0".to_string(),
                    axis_value(y1 / 2.0),
                    format!("{} {unit}", axis_value(y1)),
                ])
                .style(t.dim()),
        )
        .legend_position(None);
    f.render_widget(chart, plot);
}

fn draw_list(f: &mut Frame<'_>, area: Rect, app: &mut App, d: &FlowDetail, tab: DetailTab) {
    let t = app.theme;
    let (title, n) = match tab {
        DetailTab::Channels => ("Channels", d.channels.len()),
        DetailTab::Timeline => ("Status timeline", d.timeline.len()),
        DetailTab::Findings => ("Findings", d.findings.len()),
        _ => ("Opens", d.opens.len()),
    };
    let block = Block::default()
        .borders(Borders::TOP)
        .title(Line::styled(format!(" {title} ({n}) "), t.title()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    if n == 0 {
        f.render_widget(Paragraph::new("none").style(t.dim()), inner);
        return;
    }
    let height = inner.height.saturating_sub(1) as usize;
    app.page = height;
    let focused = app.detail_tab == tab;
    let range = app.detail_list.visible(n, height);
    let w = inner.width as usize;
    let (widths, header, rows): (Vec<Constraint>, Vec<&str>, Vec<TableRow>) = match tab {
        DetailTab::Timeline => (
            vec![
                Constraint::Length(7),
                Constraint::Length(8),
                Constraint::Fill(1),
            ],
            vec!["Frame", "Time", "Server said"],
            range
                .clone()
                .filter_map(|i| d.timeline.get(i).map(|r| (i, r)))
                .map(|(i, r)| {
                    (
                        i,
                        vec![
                            right(r.frame.to_string()),
                            right(secs(r.t)),
                            Cell::from(r.text.clone()),
                        ],
                        t.status(r.status),
                    )
                })
                .collect(),
        ),
        DetailTab::Channels => (
            vec![
                Constraint::Length(7),
                Constraint::Fill(2),
                Constraint::Length(8),
                Constraint::Length(7),
                Constraint::Length(5),
                Constraint::Fill(1),
            ],
            vec!["Frame", "Client → server", "Joined", "I/O", "SQOS", "Ended"],
            range
                .clone()
                .filter_map(|i| d.channels.get(i).map(|r| (i, r)))
                .map(|(i, r)| {
                    (
                        i,
                        vec![
                            right(r.first_frame.to_string()),
                            Cell::from(r.ends.clone()),
                            Cell::from(r.joined.clone()),
                            right(r.io_count.to_string()),
                            right(r.sqos_requests.to_string()),
                            Cell::from(r.ended.clone()),
                        ],
                        Style::default(),
                    )
                })
                .collect(),
        ),
        DetailTab::Findings => (
            vec![
                Constraint::Length(7),
                Constraint::Length(7),
                Constraint::Length(8),
                Constraint::Fill(1),
            ],
            vec!["Sev", "Frame", "Time", "Finding"],
            range
                .clone()
                .filter_map(|i| d.findings.get(i).map(|r| (i, r)))
                .map(|(i, r)| {
                    let mut msg = format!("{}: {}", r.code, r.message);
                    if r.occurrences > 1 {
                        msg.push_str(&format!(" (×{})", r.occurrences));
                    }
                    (
                        i,
                        vec![
                            Cell::from(r.severity.as_str()).style(t.severity(r.severity)),
                            right(r.frame.to_string()),
                            right(secs(r.t)),
                            Cell::from(fit(&msg, w.saturating_sub(25))),
                        ],
                        Style::default(),
                    )
                })
                .collect(),
        ),
        _ => (
            vec![
                Constraint::Length(7),
                Constraint::Length(8),
                Constraint::Fill(2),
                Constraint::Fill(1),
                Constraint::Length(8),
            ],
            vec!["Frame", "Time", "File", "Host", "Closed"],
            range
                .clone()
                .filter_map(|i| d.opens.get(i).map(|r| (i, r)))
                .map(|(i, r)| {
                    (
                        i,
                        vec![
                            right(r.frame.to_string()),
                            right(secs(r.t)),
                            Cell::from(r.file_name.clone()),
                            Cell::from(r.host.clone()),
                            right(opt(r.ended_frame)),
                        ],
                        Style::default(),
                    )
                })
                .collect(),
        ),
    };
    let table = ListTable {
        widths,
        header: header
            .into_iter()
            .map(|h| Cell::from(h).style(t.header()))
            .collect(),
        rows,
    };
    let sel = focused.then_some((app.detail_list.sel, t.selected()));
    table.draw(f, inner, sel, &mut app.hits, Hit::DetailRow);
}
