//! The Flows view: one row per logical flow, sortable by any column, filtered by typing.

use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph};
use ratatui::Frame;

use super::{fit, right, ListTable};
use crate::tui::app::{App, Hit};
use crate::tui::lists::{flow_rows, FlowCol};
use crate::tui::live::Live;
use crate::tui::model::{latency_cell, rate_cell, status_label, FlowRow};

/// Widest a name column grows; a longer name is cut only when nothing else can give way.
const MAX_NAME: usize = 32;
/// Narrowest a name column is cut to.
const MIN_NAME: usize = 8;

fn cell_text(c: FlowCol, r: &FlowRow) -> String {
    match c {
        FlowCol::Initiator => r.initiator.clone(),
        FlowCol::Node => r.node.clone(),
        FlowCol::Policy => r.policy.label(),
        FlowCol::Server => match (r.max_rate, r.min_rate) {
            (None, None) => "-".into(),
            (max, min) => format!(
                "{}/{}",
                max.map_or_else(|| "-".into(), |v| v.to_string()),
                min.map_or_else(|| "-".into(), |v| v.to_string())
            ),
        },
        FlowCol::Iops => rate_cell(r.reported_iops),
        FlowCol::Observed => rate_cell(r.observed_iops),
        FlowCol::Latency => latency_cell(r.latency_ms),
        FlowCol::Kbps => rate_cell(r.kbps),
        FlowCol::AvgIops => rate_cell(r.avg_iops),
        FlowCol::AvgLatency => latency_cell(r.avg_latency_ms),
        FlowCol::AvgKbps => rate_cell(r.avg_kbps),
        FlowCol::Status => status_label(r.status),
        FlowCol::Findings => {
            if r.findings == 0 {
                "-".into()
            } else {
                r.findings.to_string()
            }
        }
    }
}

fn is_name(c: FlowCol) -> bool {
    matches!(c, FlowCol::Initiator | FlowCol::Node)
}

fn header_label(c: FlowCol, app: &App) -> String {
    let mut label = c.title().to_string();
    if app.sort.col == Some(c) {
        let desc = c.numeric() != app.sort.reverse;
        label.push(if desc { '↓' } else { '↑' });
    }
    label
}

/// The columns shown and their widths for `width` columns of screen: each as wide as its
/// widest cell; when that does not fit, the lowest-ranked columns go (see
/// [`FlowCol::drop_rank`]), and names are cut only when nothing else is left to drop.
fn layout(rows: &[FlowRow], app: &App, width: usize) -> Vec<(FlowCol, usize)> {
    let mut cols: Vec<(FlowCol, usize)> = FlowCol::ALL
        .iter()
        .map(|&c| {
            let content = rows
                .iter()
                .map(|r| cell_text(c, r).chars().count())
                .max()
                .unwrap_or(0);
            let head = header_label(c, app).chars().count();
            let w = if is_name(c) {
                content.max(head).min(MAX_NAME)
            } else {
                content.max(head)
            };
            (c, w)
        })
        .collect();
    let total = |cols: &[(FlowCol, usize)]| -> usize {
        cols.iter().map(|(_, w)| w).sum::<usize>() + cols.len().saturating_sub(1)
    };
    while total(&cols) > width {
        let worst = cols.iter().map(|(c, _)| c.drop_rank()).max().unwrap_or(0);
        if worst == 0 {
            break;
        }
        cols.retain(|(c, _)| c.drop_rank() != worst);
    }
    // Still too wide: cut the longer name, one column at a time.
    while total(&cols) > width {
        let longest = cols
            .iter_mut()
            .filter(|(c, w)| is_name(*c) && *w > MIN_NAME)
            .max_by_key(|(_, w)| *w);
        match longest {
            Some((_, w)) => *w -= 1,
            None => break,
        }
    }
    cols
}

fn cells(r: &FlowRow, app: &App, cols: &[(FlowCol, usize)]) -> Vec<Cell<'static>> {
    let t = app.theme;
    cols.iter()
        .map(|&(c, w)| {
            let text = fit(&cell_text(c, r), w);
            match c {
                FlowCol::Status => Cell::from(text).style(t.status(r.status)),
                FlowCol::Findings => {
                    let cell = right(text);
                    match r.worst {
                        Some(s) => cell.style(t.severity(s)),
                        None => cell,
                    }
                }
                FlowCol::Iops | FlowCol::Observed | FlowCol::AvgIops
                    if breaches(cell_rate(c, r), r.max_rate) =>
                {
                    right(text).style(t.bad())
                }
                c if c.numeric() => right(text),
                _ => Cell::from(text),
            }
        })
        .collect()
}

fn cell_rate(c: FlowCol, r: &FlowRow) -> Option<f64> {
    match c {
        FlowCol::Iops => r.reported_iops,
        FlowCol::Observed => r.observed_iops,
        FlowCol::AvgIops => r.avg_iops,
        _ => None,
    }
}

/// A rate above the server's MaximumIoRate (0: no maximum) is a breach, drawn in the "bad"
/// colour (bold without colours), as `sqos flows` flags it.
fn breaches(rate: Option<f64>, max: Option<u64>) -> bool {
    matches!((rate, max), (Some(v), Some(m)) if m > 0 && v > m as f64)
}

pub fn draw(f: &mut Frame<'_>, area: Rect, app: &mut App, live: &Live) {
    let t = app.theme;
    let rows = flow_rows(live, app.sort, &app.flows_filter);
    let total = live.analysis.rows().len();
    let mut title = format!(" Flows {}", rows.len());
    if rows.len() != total {
        title.push_str(&format!(" of {total}"));
    }
    if let Some(c) = app.sort.col {
        let desc = c.numeric() != app.sort.reverse;
        title.push_str(&format!(
            " · by {} {}",
            c.title(),
            if desc { "↓" } else { "↑" }
        ));
    }
    if !app.flows_filter.is_empty() {
        title.push_str(&format!(" · filter \"{}\"", app.flows_filter));
    }
    // Which figures are which: the rate columns are of the latest update interval, the avg
    // ones (and `sqos flows`) of the whole capture.
    let cols = layout(&rows, app, area.width as usize);
    if !rows.is_empty() {
        let avg = cols
            .iter()
            .any(|(c, _)| matches!(c, FlowCol::AvgIops | FlowCol::AvgLatency | FlowCol::AvgKbps));
        title.push_str(if avg {
            " · last interval; avg: whole capture"
        } else {
            " · figures of the last interval"
        });
    }
    title.push(' ');
    let block = Block::default()
        .borders(Borders::TOP)
        .title(Line::styled(title, t.title()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    if rows.is_empty() {
        let msg = if total == 0 {
            "No SQOS flows yet (FSCTL_STORAGE_QOS_CONTROL naming a logical flow)."
        } else {
            "No flow matches the filter (Esc clears it)."
        };
        f.render_widget(Paragraph::new(msg).style(t.dim()), inner);
        return;
    }
    app.flow_cols = cols.iter().map(|(c, _)| *c).collect();
    let widths: Vec<Constraint> = cols
        .iter()
        .map(|(_, w)| Constraint::Length(*w as u16))
        .collect();
    // Header cells, also clickable to sort.
    let areas = Layout::horizontal(widths.clone())
        .spacing(1)
        .flex(Flex::Start)
        .split(inner);
    let mut header = Vec::new();
    for ((c, _), r) in cols.iter().zip(areas.iter()) {
        app.hits
            .push((Rect::new(r.x, inner.y, r.width, 1), Hit::FlowHeader(*c)));
        let label = fit(&header_label(*c, app), r.width as usize);
        let cell = if c.numeric() {
            right(label)
        } else {
            Cell::from(label)
        };
        header.push(cell.style(t.header()));
    }
    let height = inner.height.saturating_sub(1) as usize;
    app.page = height;
    let range = app.flows.visible(rows.len(), height);
    let table = ListTable {
        widths,
        header,
        rows: rows
            .get(range.clone())
            .unwrap_or_default()
            .iter()
            .zip(range)
            .map(|(r, i)| (i, cells(r, app, &cols), Style::default()))
            .collect(),
    };
    let sel = Some((app.flows.sel, t.selected()));
    table.draw(f, inner, sel, &mut app.hits, Hit::FlowRow);
}
