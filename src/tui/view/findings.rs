//! The Findings view: every finding, worst first, each leading to its message.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Wrap};
use ratatui::Frame;

use super::{fit, right, secs, span, ListTable};
use crate::tui::app::{App, Hit};
use crate::tui::lists::{finding_rows, flow_label};
use crate::tui::live::Live;

pub fn draw(f: &mut Frame<'_>, area: Rect, app: &mut App, live: &Live) {
    let t = app.theme;
    let rows = finding_rows(live, &app.findings_filter);
    let mut title = format!(" Findings {}", rows.len());
    for sev in [
        crate::sqos::Severity::Error,
        crate::sqos::Severity::Warning,
        crate::sqos::Severity::Note,
    ] {
        let n = rows.iter().filter(|r| r.severity == sev).count();
        if n > 0 {
            title.push_str(&format!(" · {n} {}", sev.as_str()));
        }
    }
    if !app.findings_filter.is_empty() {
        title.push_str(&format!(" · filter \"{}\"", app.findings_filter));
    }
    title.push(' ');
    let block = Block::default()
        .borders(Borders::TOP)
        .title(Line::styled(title, t.title()));
    let mut inner = block.inner(area);
    f.render_widget(block, area);
    // Encrypted messages left closed hide whatever SQOS they carry: said first, in full.
    if let Some(closed) = live.tap.stats.undecrypted_summary() {
        let [top, rest] =
            Layout::vertical([Constraint::Length(3), Constraint::Min(0)]).areas(inner);
        f.render_widget(
            Paragraph::new(closed)
                .style(t.warn())
                .wrap(Wrap { trim: true }),
            top,
        );
        inner = rest;
    }
    if rows.is_empty() {
        f.render_widget(Paragraph::new("No findings.").style(t.dim()), inner);
        return;
    }
    // The selected finding in full under the list: the list cuts long messages.
    let [inner, full] = Layout::vertical([Constraint::Min(3), Constraint::Length(4)]).areas(inner);
    let wide = inner.width >= 120;
    let mut widths = vec![
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(if wide { 16 } else { 10 }),
    ];
    let mut header = vec!["Sev", "Frame", "Time", "Flow"];
    if wide {
        widths.push(Constraint::Length(28));
        header.push("Code");
    }
    widths.push(Constraint::Fill(1));
    header.push("Finding");
    let msg_w = (inner.width as usize).saturating_sub(if wide { 72 } else { 36 });
    let height = inner.height.saturating_sub(1) as usize;
    app.page = height;
    let range = app.findings.visible(rows.len(), height);
    let drawn = range
        .filter_map(|i| rows.get(i).map(|r| (i, r)))
        .map(|(i, r)| {
            let mut cells = vec![
                Cell::from(r.severity.as_str()).style(t.severity(r.severity)),
                right(r.frame.to_string()),
                right(secs(r.t)),
                Cell::from(flow_label(live, r.flow)),
            ];
            let mut msg = r.message.clone();
            if wide {
                cells.push(Cell::from(r.code.clone()));
            } else {
                msg = format!("{}: {msg}", r.code);
            }
            if r.occurrences > 1 {
                msg.push_str(&format!(" (×{})", r.occurrences));
            }
            cells.push(Cell::from(fit(&msg, msg_w.max(10))));
            (i, cells, Style::default())
        })
        .collect();
    let table = ListTable {
        widths,
        header: header
            .into_iter()
            .map(|h| Cell::from(h).style(t.header()))
            .collect(),
        rows: drawn,
    };
    table.draw(
        f,
        inner,
        Some((app.findings.sel, t.selected())),
        &mut app.hits,
        Hit::FindingRow,
    );
    if let Some(r) = rows.get(app.findings.sel) {
        let mut text = vec![
            span(r.severity.as_str(), t.severity(r.severity)),
            Span::raw(format!(" {} · frame {} · ", r.code, r.frame)),
            Span::raw(r.message.clone()),
        ];
        if r.occurrences > 1 {
            text.push(Span::raw(format!(" (×{})", r.occurrences)));
        }
        let block = Block::default()
            .borders(Borders::TOP)
            .title(Line::styled(" Selected ", t.title()));
        f.render_widget(
            Paragraph::new(Line::from(text))
                .wrap(Wrap { trim: false })
                .block(block),
            full,
        );
    }
}
