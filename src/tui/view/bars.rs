//! The title bar (views, source, progress) and the key bar (hints, filter being typed, notes).

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::span;
use crate::tui::app::{App, Hit, View};
use crate::tui::live::{Live, ReadState};

fn mb(b: u64) -> String {
    let m = b as f64 / 1e6;
    if m >= 100.0 {
        format!("{m:.0} MB")
    } else {
        format!("{m:.1} MB")
    }
}

/// Where reading stands, short enough for the title bar.
pub fn progress_text(live: &Live) -> (String, bool) {
    let p = &live.tap.progress;
    let (state, bad) = match &p.state {
        ReadState::Opening => ("waiting for capture…".to_string(), false),
        ReadState::Reading => match p.total {
            Some(t) if t > 0 => (
                format!(
                    "reading {}% {}/{}",
                    (p.bytes.min(t) * 100) / t,
                    mb(p.bytes),
                    mb(t)
                ),
                false,
            ),
            _ => (format!("live {}", mb(p.bytes)), false),
        },
        ReadState::Done => ("done".into(), false),
        ReadState::Damaged(e) => (format!("damaged: {e}"), true),
        ReadState::Failed(e) => (format!("failed: {e}"), true),
    };
    let mut s = format!("{state} · {} frames · {} SQOS", p.frames, p.sqos_messages);
    if live.tap.store.dropped() > 0 {
        s.push_str(&format!(" · last {} kept", live.tap.store.len()));
    }
    (s, bad)
}

/// The progress without the frame count, for narrow screens.
fn short_progress(live: &Live, full: &str) -> String {
    let frames = format!(" · {} frames", live.tap.progress.frames);
    full.replacen(&frames, "", 1)
}

/// The source and the progress in `room` columns: all of it; else without the frame count;
/// else the source name cut (at least 8 columns of it); else the progress alone.
fn source_and_progress(src: &str, prog: &str, short: &str, room: usize) -> String {
    let len = |s: &str| s.chars().count();
    for p in [prog, short] {
        if len(src) + len(p) + 3 <= room {
            return format!("{src} · {p}");
        }
    }
    let left = room.saturating_sub(len(short) + 3);
    if left >= 8 {
        format!("{} · {short}", super::fit(src, left))
    } else {
        prog.to_string()
    }
}

/// What of the capture stayed closed, short enough for the title bar: encrypted messages not
/// decrypted (the other commands say it on stderr), compressed ones not decompressed. The
/// Findings view has the full sentence.
pub fn closed_text(live: &Live) -> Option<String> {
    let s = &live.tap.stats;
    let mut parts = Vec::new();
    let n = s.undecrypted();
    if n > 0 {
        parts.push(if s.key_file_sessions == 0 {
            format!("{n} encrypted closed (--keys)")
        } else {
            format!("{n} encrypted closed (no key opens them)")
        });
    }
    if s.undecompressed_messages > 0 {
        parts.push(format!(
            "{} compressed undecoded",
            s.undecompressed_messages
        ));
    }
    (!parts.is_empty()).then(|| parts.join(" · "))
}

pub fn title_bar(f: &mut Frame<'_>, area: Rect, app: &mut App, live: &Live) {
    let t = app.theme;
    let mut spans = vec![span(" sqos ", t.title())];
    let mut x = area.x + 6;
    // Below 100 columns the tabs are shorter, to leave the capture's name room.
    let narrow = area.width < 100;
    for (v, label) in [
        (View::Flows, "1 Flows"),
        (View::Messages, if narrow { "2 Msgs" } else { "2 Messages" }),
        (View::Findings, "3 Findings"),
    ] {
        let on = app.view == v || (v == View::Flows && app.view == View::Detail);
        let style = if on { t.selected() } else { Style::default() };
        let w = label.len() as u16 + 2;
        app.hits.push((
            Rect::new(x, area.y, w.min(area.right().saturating_sub(x)), 1),
            Hit::View(v),
        ));
        spans.push(span(format!(" {label} "), style));
        spans.push(Span::raw(" "));
        x = x.saturating_add(w + 1);
    }
    // Before the progress: what stayed closed matters more than the source name.
    if let Some(closed) = closed_text(live) {
        let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
        let room = (area.width as usize).saturating_sub(used + 1);
        spans.push(span(super::fit(&closed, room), t.warn()));
        spans.push(Span::raw(" · "));
    }
    let (prog, bad) = progress_text(live);
    let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    let room = (area.width as usize).saturating_sub(used + 1);
    let src = live.tap.progress.source.clone();
    let text = if bad {
        prog
    } else {
        source_and_progress(&src, &prog, &short_progress(live, &prog), room)
    };
    spans.push(span(
        super::fit(&text, room),
        if bad { t.bad() } else { t.dim() },
    ));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn hints(view: View) -> &'static [(&'static str, &'static str)] {
    match view {
        View::Flows => &[
            ("⏎", "detail"),
            ("m", "msgs"),
            ("s/S", "sort"),
            ("/", "filter"),
            ("Tab", "view"),
            ("?", "help"),
            ("q", "quit"),
        ],
        View::Detail => &[
            ("←→", "tab"),
            ("↑↓", "row"),
            ("⏎", "frame"),
            ("m", "msgs"),
            ("Esc", "back"),
            ("?", "help"),
            ("q", "quit"),
        ],
        View::Messages => &[
            ("↑↓", "move"),
            ("←→", "pane"),
            ("p", "req↔resp"),
            ("/", "filter"),
            ("Esc", "back"),
            ("?", "help"),
            ("q", "quit"),
        ],
        View::Findings => &[
            ("↑↓", "move"),
            ("⏎", "message"),
            ("/", "filter"),
            ("Esc", "back"),
            ("?", "help"),
            ("q", "quit"),
        ],
    }
}

pub fn key_bar(f: &mut Frame<'_>, area: Rect, app: &App) {
    let t = app.theme;
    let line = if app.editing {
        let filter = match app.view {
            View::Flows => &app.flows_filter,
            View::Messages => &app.msgs_filter,
            View::Findings => &app.findings_filter,
            View::Detail => &app.flows_filter,
        };
        Line::from(vec![
            span(" filter: ", t.key()),
            Span::raw(format!("{filter}█")),
            span("   ⏎ keep  Esc clear", t.dim()),
        ])
    } else if let Some(msg) = &app.flash {
        Line::from(span(format!(" {msg}"), t.warn()))
    } else {
        let mut spans = vec![Span::raw(" ")];
        for (k, what) in hints(app.view) {
            spans.push(span(*k, t.key()));
            spans.push(Span::raw(format!(" {what}  ")));
        }
        Line::from(spans)
    };
    f.render_widget(Paragraph::new(line), area);
}

#[cfg(test)]
mod tests {
    use super::source_and_progress;

    #[test]
    fn the_source_name_stays_as_long_as_it_can() {
        let (src, full, short) = (
            "noisy.pcapng.gz",
            "done · 11029 frames · 58 SQOS",
            "done · 58 SQOS",
        );
        assert_eq!(
            source_and_progress(src, full, short, 60),
            "noisy.pcapng.gz · done · 11029 frames · 58 SQOS"
        );
        assert_eq!(
            source_and_progress(src, full, short, 35),
            "noisy.pcapng.gz · done · 58 SQOS"
        );
        assert_eq!(
            source_and_progress(src, full, short, 27),
            "noisy.pca… · done · 58 SQOS"
        );
        assert_eq!(source_and_progress(src, full, short, 20), full);
    }
}
