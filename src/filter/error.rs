//! What can be wrong with a filter, where (a byte span of its text), and how to show it: the
//! filter again with a caret under the faulty part.

/// Bytes `start..end` of the filter text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FilterError {
    #[error("the filter is empty")]
    Empty,
    #[error("a string is not closed (a quote is missing)")]
    UnterminatedString { at: Span },
    #[error("`{ch}` is not part of the filter syntax")]
    BadChar { ch: char, at: Span },
    #[error("expected {expected}, found {found}")]
    Expected {
        expected: &'static str,
        found: String,
        at: Span,
    },
    #[error("unknown field `{name}`{hint}")]
    UnknownField {
        name: String,
        hint: String,
        at: Span,
    },
    #[error("`{name}` cannot be used here: {why}")]
    NotHere {
        name: String,
        why: &'static str,
        at: Span,
    },
    #[error("bad regular expression: {msg}")]
    BadRegex { msg: String, at: Span },
    #[error("`(` and `not` nest deeper than {max} levels here")]
    TooDeep { max: usize, at: Span },
    #[error("{option} {value:?}: {why}")]
    Option {
        option: &'static str,
        value: String,
        why: String,
    },
}

impl FilterError {
    /// Where in the `-Y` text the error is (none for an empty filter or a bad shortcut option).
    pub fn span(&self) -> Option<Span> {
        match self {
            FilterError::Empty | FilterError::Option { .. } => None,
            FilterError::UnterminatedString { at }
            | FilterError::BadChar { at, .. }
            | FilterError::Expected { at, .. }
            | FilterError::UnknownField { at, .. }
            | FilterError::NotHere { at, .. }
            | FilterError::BadRegex { at, .. }
            | FilterError::TooDeep { at, .. } => Some(*at),
        }
    }

    /// The message, then the filter with carets under the faulty part:
    ///
    /// ```text
    /// unknown field `lmit` (did you mean `limit`?)
    ///   lmit > 100
    ///   ^^^^
    /// ```
    pub fn render(&self, src: &str) -> String {
        let mut out = self.to_string();
        if let Some(at) = self.span() {
            let col = src.get(..at.start).map_or(0, |s| s.chars().count());
            let width = src
                .get(at.start..at.end.min(src.len()))
                .map_or(1, |s| s.chars().count())
                .max(1);
            out.push_str(&format!(
                "\n  {src}\n  {}{}",
                " ".repeat(col),
                "^".repeat(width)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_under_the_span_counting_characters() {
        let e = FilterError::UnknownField {
            name: "lmit".into(),
            hint: " (did you mean `limit`?)".into(),
            at: Span::new(16, 20),
        };
        assert_eq!(
            e.render("name == \"é\" && lmit > 1"),
            "unknown field `lmit` (did you mean `limit`?)\n  name == \"é\" && lmit > 1\n                 ^^^^"
        );
    }

    #[test]
    fn caret_at_the_end_for_a_missing_value() {
        let e = FilterError::Expected {
            expected: "a value",
            found: "the end of the filter".into(),
            at: Span::new(7, 7),
        };
        assert_eq!(
            e.render("limit >"),
            "expected a value, found the end of the filter\n  limit >\n         ^"
        );
    }
}
