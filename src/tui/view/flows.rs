//! The Flows view: one row per logical flow, sortable by any column, filtered by typing.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph};
use ratatui::Frame;

use super::{fit, right, ListTable};
use crate::tui::app::{App, Hit};
use crate::tui::lists::{flow_rows, FlowCol};
use crate::tui::live::Live;
use crate::tui::model::{rate_cell, status_label, FlowRow};

fn widths() -> Vec<Constraint> {
    vec![
        // Names take what the numbers leave, up to a readable width.
        Constraint::Max(28),
        Constraint::Max(24),
        Constraint::Length(10),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Length(12),
        Constraint::Length(4),
    ]
}

fn cells(r: &FlowRow, app: &App) -> Vec<Cell<'static>> {
    let t = app.theme;
    let mut finds = right(if r.findings == 0 {
        "-".into()
    } else {
        r.findings.to_string()
    });
    if let Some(s) = r.worst {
        finds = finds.style(t.severity(s));
    }
    vec![
        Cell::from(r.initiator.clone()),
        Cell::from(r.node.clone()),
        right(r.policy.label()),
        right(rate_cell(r.reported_iops)),
        right(rate_cell(r.observed_iops)),
        right(match r.latency_ms {
            Some(l) if l.is_finite() => format!("{l:.2}"),
            _ => "-".into(),
        }),
        right(rate_cell(r.kbps)),
        Cell::from(status_label(r.status)).style(t.status(r.status)),
        finds,
    ]
}

pub fn draw(f: &mut Frame<'_>, area: Rect, app: &mut App, live: &Live) {
    let t = app.theme;
    let rows = flow_rows(live, app.sort, &app.flows_filter);
    let total = live.flows.rows().len();
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
    // Header cells, also clickable to sort.
    let cols = Layout::horizontal(widths()).spacing(1).split(inner);
    let mut header = Vec::new();
    for (c, r) in FlowCol::ALL.iter().zip(cols.iter()) {
        app.hits
            .push((Rect::new(r.x, inner.y, r.width, 1), Hit::FlowHeader(*c)));
        let mut label = c.title().to_string();
        if app.sort.col == Some(*c) {
            let desc = c.numeric() != app.sort.reverse;
            label.push(if desc { '↓' } else { '↑' });
        }
        let label = fit(&label, r.width as usize);
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
        widths: widths(),
        header,
        rows: rows
            .get(range.clone())
            .unwrap_or_default()
            .iter()
            .zip(range)
            .map(|(r, i)| (i, cells(r, app), Style::default()))
            .collect(),
    };
    let sel = Some((app.flows.sel, t.selected()));
    table.draw(f, inner, sel, &mut app.hits, Hit::FlowRow);
}
