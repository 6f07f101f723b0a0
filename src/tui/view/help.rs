//! The `?` popup: every key.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

use crate::tui::app::App;

/// The key list, also printed in the README.
pub const KEYS: &[(&str, &str)] = &[
    ("↑ ↓  j k", "move the selection (mouse wheel too)"),
    ("PgUp PgDn  ^u ^d", "page / half page"),
    ("Home End  g G", "first / last"),
    ("Enter", "open: flow detail, go to the frame, field tree"),
    ("← →  h l", "detail tab / Messages pane"),
    ("1 2 3  Tab", "Flows, Messages, Findings"),
    ("m", "messages of the selected flow"),
    ("p", "jump request ↔ response"),
    ("s  S", "sort Flows by the next column / reverse"),
    ("/", "filter the list (Enter keeps, Esc clears)"),
    ("Esc  Backspace", "clear filter, back"),
    ("click", "select; again to open; header sorts"),
    ("?", "this help"),
    ("q  ^c", "quit"),
];

const NIOPS_NOTE: &str = " NIOPS: normalized IOPS (8 KiB units), as MaximumIoRate";

pub fn draw(f: &mut Frame<'_>, area: Rect, app: &App) {
    let t = app.theme;
    // As wide as the longest line (key column, text, borders), so nothing is cut.
    let text_w = KEYS
        .iter()
        .map(|(_, what)| what.chars().count())
        .chain(std::iter::once(
            NIOPS_NOTE.chars().count().saturating_sub(20),
        ))
        .max()
        .unwrap_or(0);
    let w = ((text_w + 20 + 2) as u16).min(area.width);
    let h = (KEYS.len() as u16 + 4).min(area.height);
    let popup = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    let mut lines: Vec<Line<'static>> = KEYS
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!(" {k:<18}"), t.key()),
                Span::raw(what.to_string()),
            ])
        })
        .collect();
    lines.push(Line::styled(NIOPS_NOTE, t.dim()));
    lines.push(Line::styled(" any key closes", t.dim()));
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(Line::styled(" sqos tui keys ", t.title())),
        ),
        popup,
    );
}
