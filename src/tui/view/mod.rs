//! Drawing: the title bar, the current view, the key bar, and the help popup over them.

mod bars;
mod detail;
mod findings;
mod flows;
mod help;
mod messages;

pub use help::KEYS;

use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table};
use ratatui::Frame;

use super::app::{App, View};
use super::live::Live;

/// Draw everything for one frame; records the clickable areas in `app.hits`.
pub fn draw(f: &mut Frame<'_>, app: &mut App, live: &Live) {
    app.hits.clear();
    let [top, body, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    bars::title_bar(f, top, app, live);
    match app.view {
        View::Flows => flows::draw(f, body, app, live),
        View::Detail => detail::draw(f, body, app, live),
        View::Messages => messages::draw(f, body, app, live),
        View::Findings => findings::draw(f, body, app, live),
    }
    bars::key_bar(f, bottom, app);
    if app.help {
        help::draw(f, f.area(), app);
    }
}

/// A table of the rows `range` of some list, with a header, the selected row marked, and each
/// drawn row recorded as clickable. `cells` renders one row.
struct ListTable<'a> {
    widths: Vec<Constraint>,
    header: Vec<Cell<'a>>,
    rows: Vec<(usize, Vec<Cell<'a>>, Style)>,
}

impl<'a> ListTable<'a> {
    fn draw(
        self,
        f: &mut Frame<'_>,
        area: Rect,
        selected: Option<(usize, Style)>,
        hits: &mut Vec<(Rect, super::app::Hit)>,
        hit: fn(usize) -> super::app::Hit,
    ) {
        let mut y = area.y.saturating_add(1);
        let mut rows = Vec::with_capacity(self.rows.len());
        for (i, cells, style) in self.rows {
            let style = match selected {
                Some((s, sel)) if s == i => style.patch(sel),
                _ => style,
            };
            if y < area.bottom() {
                hits.push((Rect::new(area.x, y, area.width, 1), hit(i)));
            }
            y = y.saturating_add(1);
            rows.push(Row::new(cells).style(style));
        }
        let t = Table::new(rows, self.widths)
            .header(Row::new(self.header).style(Style::default()))
            .column_spacing(1)
            .flex(Flex::Start);
        f.render_widget(t, area);
    }
}

fn right(s: String) -> Cell<'static> {
    Cell::from(Line::from(s).right_aligned())
}

fn span(s: impl Into<String>, style: Style) -> Span<'static> {
    Span::styled(s.into(), style)
}

/// Seconds as a short label for axes and lists.
fn secs(t: f64) -> String {
    if t.abs() >= 100.0 {
        format!("{t:.0}s")
    } else {
        format!("{t:.1}s")
    }
}

/// Truncate to `w` display columns with an ellipsis.
fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
    out.push('…');
    out
}
