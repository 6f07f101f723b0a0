//! The Messages view, Wireshark's three panes: the message list, the decoded field tree of the
//! selected message (with its findings), and the hex of its buffer with the selected field lit.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph};
use ratatui::Frame;

use super::{fit, right, span, ListTable};
use crate::output::text::{detail_tree, hex_dump, summary_line};
use crate::pipeline::{Direction, SqosRecord};
use crate::sqos::Field;
use crate::tui::app::{App, Hit, Pane};
use crate::tui::lists::message_indices;
use crate::tui::live::Live;
use crate::tui::model::short_id;
use crate::tui::theme::Theme;

/// Lines of the field tree that start a field (the rest are flag bits, headers, findings).
fn is_field_line(l: &str) -> bool {
    l.starts_with("    [0x")
}

fn pane_block(title: String, focused: bool, t: Theme) -> Block<'static> {
    Block::default().borders(Borders::TOP).title(Line::styled(
        title,
        if focused { t.focus_border() } else { t.title() },
    ))
}

/// The message's summary without the frame, time and addresses the list shows in columns.
fn summary_tail(rec: &SqosRecord, live: &Live) -> String {
    let s = summary_line(rec, live.tap.store.start());
    match s.split_once(" SQOS ") {
        Some((_, tail)) => tail.to_string(),
        None => s,
    }
}

pub fn draw(f: &mut Frame<'_>, area: Rect, app: &mut App, live: &Live) {
    let shown = message_indices(live, app.msg_scope, &app.msgs_filter);
    app.sync_msg_cursor(live, &shown);
    let [list, tree, hex] = Layout::vertical([
        Constraint::Percentage(40),
        Constraint::Percentage(35),
        Constraint::Min(4),
    ])
    .areas(area);
    draw_list(f, list, app, live, &shown);
    let rec = shown
        .get(app.msgs.sel)
        .and_then(|&i| live.tap.store.full(i));
    let field = draw_tree(f, tree, app, live, rec.as_ref());
    draw_hex(f, hex, app, rec.as_ref(), field.as_ref());
}

fn draw_list(f: &mut Frame<'_>, area: Rect, app: &mut App, live: &Live, shown: &[usize]) {
    let t = app.theme;
    let mut title = format!(" Messages {}", shown.len());
    if shown.len() != live.tap.store.len() {
        title.push_str(&format!(" of {}", live.tap.store.len()));
    }
    if live.tap.store.dropped() > 0 {
        title.push_str(&format!(" (last {} kept)", live.tap.store.cap()));
    }
    if let Some(id) = app.msg_scope {
        title.push_str(&format!(" · flow {}", short_id(&id)));
    }
    if !app.msgs_filter.is_empty() {
        title.push_str(&format!(" · filter \"{}\"", app.msgs_filter));
    }
    title.push(' ');
    let block = pane_block(title, app.pane == Pane::List, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    if shown.is_empty() {
        let msg = if live.tap.store.is_empty() {
            "No SQOS messages yet."
        } else {
            "No message matches (Esc clears the filter)."
        };
        f.render_widget(Paragraph::new(msg).style(t.dim()), inner);
        return;
    }
    let wide = inner.width >= 120;
    let mut widths = vec![Constraint::Length(7), Constraint::Length(9)];
    let mut header = vec![right("Frame".into()), right("Time".into())];
    if wide {
        widths.push(Constraint::Length(45));
        header.push(Cell::from("Source → Destination"));
    }
    widths.push(Constraint::Fill(1));
    header.push(Cell::from("Message"));
    let height = inner.height.saturating_sub(1) as usize;
    if app.pane == Pane::List {
        app.page = height;
    }
    let range = app.msgs.visible(shown.len(), height);
    // What the message column has left: frame, time (and addresses), one space between.
    let msg_w =
        (inner.width as usize).saturating_sub(if wide { 7 + 9 + 45 + 3 } else { 7 + 9 + 2 });
    let rows = range
        .filter_map(|pos| {
            let rec = live.tap.store.get(*shown.get(pos)?)?;
            let mut cells = vec![
                right(rec.frame.to_string()),
                right(format!("{:.3}", live.rel(rec.ts))),
            ];
            if wide {
                cells.push(Cell::from(format!("{} → {}", rec.src, rec.dst)));
            }
            cells.push(Cell::from(fit(&summary_tail(rec, live), msg_w)));
            let worst = rec.body.findings().iter().map(|x| x.severity).max();
            let style = match (worst, rec.nt_status) {
                (Some(s), _) => t.severity(s),
                (None, Some(st)) if st != 0 && !rec.interim => t.warn(),
                _ => Style::default(),
            };
            Some((pos, cells, style))
        })
        .collect();
    let table = ListTable {
        widths,
        header: header.into_iter().map(|c| c.style(t.header())).collect(),
        rows,
    };
    let sel_style = if app.pane == Pane::List {
        t.selected()
    } else {
        t.selected_unfocused()
    };
    table.draw(
        f,
        inner,
        Some((app.msgs.sel, sel_style)),
        &mut app.hits,
        Hit::MsgRow,
    );
}

/// Draw the field tree; returns the selected field (for the hex pane).
fn draw_tree(
    f: &mut Frame<'_>,
    area: Rect,
    app: &mut App,
    live: &Live,
    rec: Option<&SqosRecord>,
) -> Option<Field> {
    let t = app.theme;
    let focused = app.pane == Pane::Tree;
    let Some(rec) = rec else {
        let block = pane_block(" Fields ".into(), focused, t);
        f.render_widget(Paragraph::new("").block(block), area);
        return None;
    };
    let fields = rec.body.fields();
    let kind = match rec.direction {
        Direction::Request => "request",
        Direction::Response => "response",
    };
    let block = pane_block(
        format!(
            " Fields · frame {} {kind} ({} fields) ",
            rec.frame,
            fields.len()
        ),
        focused,
        t,
    );
    let inner = block.inner(area);
    f.render_widget(block, area);
    let text = detail_tree(rec, live.tap.store.start());
    let lines: Vec<&str> = text.lines().collect();
    app.tree.sel = app.tree.sel.min(fields.len().saturating_sub(1));
    if focused {
        app.page = inner.height as usize;
    }
    // Line index of each field line, in field order.
    let field_lines: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| is_field_line(l))
        .map(|(i, _)| i)
        .collect();
    let sel_line = field_lines.get(app.tree.sel).copied();
    // Scroll so the selected field shows, keeping the header lines when possible.
    let h = inner.height as usize;
    let top = match sel_line {
        Some(l) if l >= h => l + 1 - h + h / 3,
        _ => 0,
    }
    .min(lines.len().saturating_sub(h));
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate().skip(top).take(h) {
        let style = if Some(i) == sel_line {
            if focused {
                t.selected()
            } else {
                t.selected_unfocused()
            }
        } else if l.trim_start().starts_with("[error]") {
            t.bad()
        } else if l.trim_start().starts_with("[warning]") {
            t.warn()
        } else if l.trim_start().starts_with("[note]") {
            t.severity(crate::sqos::Severity::Note)
        } else if !l.starts_with(' ') {
            t.title()
        } else {
            Style::default()
        };
        if let Some(k) = field_lines.iter().position(|&fl| fl == i) {
            let y = inner.y + (i - top) as u16;
            app.hits
                .push((Rect::new(inner.x, y, inner.width, 1), Hit::TreeRow(k)));
        }
        out.push(Line::styled(fit(l, inner.width as usize), style));
    }
    f.render_widget(Paragraph::new(out), inner);
    fields.get(app.tree.sel).cloned()
}

/// Columns of byte `j` (0-15) of a line of `hex_dump`: its hex digits and its ASCII character.
fn byte_columns(j: usize) -> (usize, usize) {
    (6 + 3 * j + usize::from(j > 7), 56 + j)
}

fn draw_hex(
    f: &mut Frame<'_>,
    area: Rect,
    app: &App,
    rec: Option<&SqosRecord>,
    field: Option<&Field>,
) {
    let t = app.theme;
    let Some(rec) = rec else {
        f.render_widget(
            Paragraph::new("").block(pane_block(" Hex ".into(), false, t)),
            area,
        );
        return;
    };
    let mut title = format!(" Hex · {} bytes", rec.buffer.len());
    if let Some(fl) = field {
        title.push_str(&format!(" · {} at 0x{:04x}+{}", fl.name, fl.offset, fl.len));
    }
    title.push(' ');
    let block = pane_block(title, false, t);
    let inner = block.inner(area);
    f.render_widget(block, area);
    if rec.buffer.is_empty() {
        f.render_widget(Paragraph::new("(no buffer)").style(t.dim()), inner);
        return;
    }
    let dump = hex_dump(&rec.buffer);
    let lines: Vec<&str> = dump.lines().collect();
    let (lo, hi) = field.map_or((0, 0), |fl| (fl.offset, fl.offset.saturating_add(fl.len)));
    let h = inner.height as usize;
    let first = lo / 16;
    let top = if first >= h {
        first + 1 - h.max(1) / 2
    } else {
        0
    }
    .min(lines.len().saturating_sub(h));
    let mut out = Vec::new();
    for (li, l) in lines.iter().enumerate().skip(top).take(h) {
        let chars: Vec<char> = l.chars().collect();
        let mut lit = vec![false; chars.len()];
        for j in 0..16 {
            let b = li * 16 + j;
            if b >= lo && b < hi {
                let (hx, asc) = byte_columns(j);
                for c in [hx, hx + 1, asc] {
                    if let Some(x) = lit.get_mut(c) {
                        *x = true;
                    }
                }
                // The space between two lit bytes is lit too, so a field reads as one block.
                if b + 1 < hi && j != 15 {
                    let gap_end = byte_columns(j + 1).0;
                    for c in hx + 2..gap_end {
                        if let Some(x) = lit.get_mut(c) {
                            *x = true;
                        }
                    }
                }
            }
        }
        let mut spans: Vec<Span<'static>> = Vec::new();
        let mut run = String::new();
        let mut run_lit = false;
        for (c, on) in chars.iter().zip(lit.iter()) {
            if *on != run_lit && !run.is_empty() {
                let style = if run_lit {
                    t.field_bytes()
                } else {
                    Style::default()
                };
                spans.push(span(std::mem::take(&mut run), style));
            }
            run_lit = *on;
            run.push(*c);
        }
        if !run.is_empty() {
            let style = if run_lit {
                t.field_bytes()
            } else {
                Style::default()
            };
            spans.push(span(run, style));
        }
        out.push(Line::from(spans));
    }
    f.render_widget(Paragraph::new(out), inner);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_columns_match_hex_dump_layout() {
        let buf: Vec<u8> = (0x41u8..0x51).collect();
        let d = hex_dump(&buf);
        let line: Vec<char> = d.lines().next().unwrap().chars().collect();
        for j in 0..16 {
            let (hx, asc) = byte_columns(j);
            let want = format!("{:02x}", 0x41 + j);
            let got: String = line[hx..hx + 2].iter().collect();
            assert_eq!(got, want, "hex of byte {j}");
            assert_eq!(line[asc], (0x41u8 + j as u8) as char, "ascii of byte {j}");
        }
    }
}
