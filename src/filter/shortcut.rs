//! The command-line shortcuts that stand for common filters: `--flow ID|NAME`, `--vm NAME`,
//! `--finding CODE`, `--time FROM..TO`. Each becomes a node of the filter expression.

use chrono::{DateTime, Local, NaiveDateTime, TimeZone};
use glob::{MatchOptions, Pattern};

use super::error::FilterError;
use crate::capture::Timestamp;

/// Names and codes match case-insensitively, with shell wildcards (`vm0*`, `flow.server_*`).
const CASELESS: MatchOptions = MatchOptions {
    case_sensitive: false,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

#[derive(Clone, Debug)]
pub struct NameGlob {
    pub text: String,
    pattern: Pattern,
}

impl NameGlob {
    pub fn new(option: &'static str, text: &str) -> Result<Self, FilterError> {
        let pattern = Pattern::new(text).map_err(|e| FilterError::Option {
            option,
            value: text.to_string(),
            why: e.to_string(),
        })?;
        Ok(NameGlob {
            text: text.to_string(),
            pattern,
        })
    }

    pub fn matches(&self, s: &str) -> bool {
        self.pattern.matches_with(s, CASELESS)
    }
}

/// One end of a `--time` window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TimeBound {
    /// Seconds after the capture's first frame.
    Relative(f64),
    /// A point in time.
    Absolute(Timestamp),
}

impl TimeBound {
    fn resolve(self, start: Timestamp) -> Timestamp {
        match self {
            TimeBound::Relative(s) => Timestamp(start.0.saturating_add((s * 1e9) as i64)),
            TimeBound::Absolute(t) => t,
        }
    }
}

/// `--time FROM..TO`: either end may be left out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeWindow {
    pub from: Option<TimeBound>,
    pub to: Option<TimeBound>,
}

impl TimeWindow {
    pub fn parse(s: &str) -> Result<Self, FilterError> {
        let bad = |why: &str| FilterError::Option {
            option: "--time",
            value: s.to_string(),
            why: why.to_string(),
        };
        let (a, b) = s
            .split_once("..")
            .ok_or_else(|| bad("give FROM..TO (seconds from the first frame, or dates)"))?;
        let bound = |t: &str| -> Result<Option<TimeBound>, FilterError> {
            let t = t.trim();
            if t.is_empty() {
                return Ok(None);
            }
            if let Ok(secs) = t.parse::<f64>() {
                if secs.is_finite() {
                    return Ok(Some(TimeBound::Relative(secs)));
                }
            }
            parse_datetime(t)
                .map(|ts| Some(TimeBound::Absolute(ts)))
                .ok_or_else(|| {
                    bad(&format!(
                        "`{t}` is neither seconds nor a date like 2024-05-01T10:00:00Z"
                    ))
                })
        };
        let w = TimeWindow {
            from: bound(a)?,
            to: bound(b)?,
        };
        if w.from.is_none() && w.to.is_none() {
            return Err(bad("give at least one end"));
        }
        Ok(w)
    }

    /// True when `ts` lies in the window (both ends included).
    pub fn contains(&self, ts: Timestamp, start: Timestamp) -> bool {
        self.overlaps(ts, ts, start)
    }

    /// True when the span `a..=b` and the window share a moment.
    pub fn overlaps(&self, a: Timestamp, b: Timestamp, start: Timestamp) -> bool {
        self.from.is_none_or(|f| b >= f.resolve(start))
            && self.to.is_none_or(|t| a <= t.resolve(start))
    }
}

/// An ISO-8601 date and time: with `Z` or an offset, or without (then local time).
pub fn parse_datetime(t: &str) -> Option<Timestamp> {
    let to_ts = |secs: i64, nanos: u32| Timestamp::from_secs_nanos(secs, nanos);
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Some(to_ts(d.timestamp(), d.timestamp_subsec_nanos()));
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(n) = NaiveDateTime::parse_from_str(t, fmt) {
            let d = Local.from_local_datetime(&n).earliest()?;
            return Some(to_ts(d.timestamp(), d.timestamp_subsec_nanos()));
        }
    }
    None
}

#[derive(Clone, Debug)]
pub enum Shortcut {
    /// `--flow`: a LogicalFlowID (or its first characters) or an initiator name.
    Flow(NameGlob),
    /// `--vm`: an initiator (VM) name.
    Vm(NameGlob),
    /// `--finding`: a finding code of the message or flow.
    Finding(NameGlob),
    /// `--time`: the message's time.
    Time(TimeWindow),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_windows() {
        let w = TimeWindow::parse("1.5..3").expect("window");
        assert_eq!(w.from, Some(TimeBound::Relative(1.5)));
        let start = Timestamp(10_000_000_000);
        assert!(w.contains(Timestamp(11_500_000_000), start));
        assert!(w.contains(Timestamp(13_000_000_000), start));
        assert!(!w.contains(Timestamp(13_000_000_001), start));
        assert!(!w.contains(Timestamp(11_000_000_000), start));
        let w = TimeWindow::parse("..2").expect("open start");
        assert_eq!(w.from, None);
        let w = TimeWindow::parse("2024-05-01T10:00:00Z..").expect("date");
        assert_eq!(
            w.from,
            Some(TimeBound::Absolute(Timestamp(1_714_557_600_000_000_000)))
        );
        assert!(TimeWindow::parse("5").is_err());
        assert!(TimeWindow::parse("..").is_err());
        assert!(TimeWindow::parse("yesterday..").is_err());
    }

    #[test]
    fn globs_ignore_case() {
        let g = NameGlob::new("--vm", "VM0*").expect("glob");
        assert!(g.matches("vm01"));
        assert!(!g.matches("db01"));
        assert!(NameGlob::new("--vm", "[").is_err());
    }
}
