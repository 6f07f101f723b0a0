//! Colours. Only the terminal's own named colours on its own background (no fixed background
//! colours), so the same palette reads on dark and light terminals; selection is reverse video.
//! With `NO_COLOR` set (https://no-color.org) only bold/reverse/underline are used.

use ratatui::style::{Color, Modifier, Style};

use crate::sqos::{Severity, Status};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set to a non-empty value.
    pub fn from_env() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Theme { color: !no_color }
    }

    pub fn plain() -> Self {
        Theme { color: false }
    }

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    pub fn title(&self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    pub fn header(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
    }
    pub fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    /// A selected row in a pane that does not have the focus.
    pub fn selected_unfocused(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
    }
    pub fn key(&self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    pub fn dim(&self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }
    pub fn ok(&self) -> Style {
        self.fg(Color::Green)
    }
    pub fn warn(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    pub fn bad(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    pub fn focus_border(&self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    /// The bytes of the selected field in the hex pane.
    pub fn field_bytes(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::REVERSED)
    }

    pub fn status(&self, s: Option<Status>) -> Style {
        match s {
            None => self.dim(),
            Some(Status::OK) => self.ok(),
            Some(Status::NOT_AVAILABLE) => self.warn(),
            Some(_) => self.bad(),
        }
    }

    pub fn severity(&self, s: Severity) -> Style {
        match s {
            Severity::Note => self.fg(Color::Cyan),
            Severity::Warning => self.warn(),
            Severity::Error => self.bad(),
        }
    }

    /// Chart series colours.
    pub fn series(&self, i: usize) -> Style {
        const C: [Color; 4] = [Color::Cyan, Color::Magenta, Color::Red, Color::Green];
        self.fg(C.get(i).copied().unwrap_or(Color::Reset))
    }
}
