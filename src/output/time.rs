//! Times as tshark's `-t` prints them, and the ISO-8601 form the JSON and CSV outputs carry
//! beside their epoch seconds.

use chrono::{DateTime, Local, SecondsFormat, Utc};

use crate::capture::Timestamp;

/// `-t`: how the time column of `sqos dissect` reads.
// The CLI parses it with clap; the library alone (the fuzz crate) builds without clap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum TimeFormat {
    /// Seconds since the first frame (the default, as tshark).
    #[cfg_attr(feature = "cli", value(name = "r"))]
    Relative,
    /// Local time of day.
    #[cfg_attr(feature = "cli", value(name = "a"))]
    Absolute,
    /// Local date and time.
    #[cfg_attr(feature = "cli", value(name = "ad"))]
    AbsoluteDate,
    /// Seconds since the previous SQOS message.
    #[cfg_attr(feature = "cli", value(name = "d"))]
    Delta,
    /// Seconds since the previous message shown (after the filter).
    #[cfg_attr(feature = "cli", value(name = "dd"))]
    DeltaDisplayed,
    /// Seconds since 1970-01-01 UTC.
    #[cfg_attr(feature = "cli", value(name = "e"))]
    Epoch,
    /// UTC time of day.
    #[cfg_attr(feature = "cli", value(name = "u"))]
    Utc,
    /// UTC date and time.
    #[cfg_attr(feature = "cli", value(name = "ud"))]
    UtcDate,
}

fn datetime(ts: Timestamp) -> DateTime<Utc> {
    let secs = ts.0.div_euclid(1_000_000_000);
    let nanos = ts.0.rem_euclid(1_000_000_000) as u32;
    DateTime::from_timestamp(secs, nanos).unwrap_or_default()
}

/// ISO-8601 in UTC with microseconds, e.g. `2024-05-01T10:00:00.123456Z` (what the JSON and CSV
/// outputs write beside the epoch seconds).
pub fn iso_utc(ts: Timestamp) -> String {
    datetime(ts).to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Formats the time column, remembering what the deltas need.
#[derive(Clone, Debug)]
pub struct TimeColumn {
    format: TimeFormat,
    first: Option<Timestamp>,
    prev_seen: Option<Timestamp>,
    prev_shown: Option<Timestamp>,
}

/// Seconds with six decimals, as `format!("{secs:.6}")` writes them (which rounds the f64's
/// exact value half to even), appended to `s`. A time of a capture (0 to 10^9 s, not near a
/// tie) is rounded by one multiplication: std's exact formatter costs a `dissect` line ~1,600
/// instructions a number, two numbers a line. Anything else, and any value whose product with
/// 10^6 lies within its rounding error of a half, goes to std.
pub fn push_secs6(s: &mut String, secs: f64) {
    if secs.is_sign_positive() && secs < 1e9 {
        let scaled = secs * 1e6;
        let floor = scaled.floor();
        let frac = scaled - floor;
        // The product is off the exact one by at most half an ulp, which is at most
        // `scaled * EPSILON` / 2: a fraction further than that from 0.5 rounds the same way.
        if (frac - 0.5).abs() > scaled * f64::EPSILON {
            let units = floor as u64 + u64::from(frac > 0.5);
            let mut buf = itoa::Buffer::new();
            s.push_str(buf.format(units / 1_000_000));
            s.push('.');
            let micros = buf.format(units % 1_000_000);
            s.extend(std::iter::repeat_n('0', 6 - micros.len()));
            s.push_str(micros);
            return;
        }
    }
    let _ = std::fmt::Write::write_fmt(s, format_args!("{secs:.6}"));
}

/// [`push_secs6`] as a string.
pub fn secs6(secs: f64) -> String {
    let mut s = String::with_capacity(16);
    push_secs6(&mut s, secs);
    s
}

impl TimeColumn {
    pub fn new(format: TimeFormat) -> Self {
        TimeColumn {
            format,
            first: None,
            prev_seen: None,
            prev_shown: None,
        }
    }

    /// The capture's first frame (relative times count from it).
    pub fn set_first(&mut self, ts: Timestamp) {
        self.first = Some(ts);
    }

    /// A message was seen (shown or not): the base of `-t d`.
    pub fn seen(&mut self, ts: Timestamp) -> Option<Timestamp> {
        self.prev_seen.replace(ts)
    }

    /// The column for a message being shown; `prev_seen` is what `seen` returned for it.
    pub fn shown(&mut self, ts: Timestamp, prev_seen: Option<Timestamp>) -> String {
        let prev_shown = self.prev_shown.replace(ts);
        let since = |base: Option<Timestamp>| secs6(ts.secs_since(base.unwrap_or(ts)));
        match self.format {
            TimeFormat::Relative => since(self.first.or(Some(ts))),
            TimeFormat::Delta => since(prev_seen),
            TimeFormat::DeltaDisplayed => since(prev_shown),
            TimeFormat::Epoch => format!(
                "{}.{:06}",
                ts.0.div_euclid(1_000_000_000),
                ts.0.rem_euclid(1_000_000_000) / 1000
            ),
            TimeFormat::Absolute => datetime(ts)
                .with_timezone(&Local)
                .format("%H:%M:%S%.6f")
                .to_string(),
            TimeFormat::AbsoluteDate => datetime(ts)
                .with_timezone(&Local)
                .format("%Y-%m-%d %H:%M:%S%.6f")
                .to_string(),
            TimeFormat::Utc => datetime(ts).format("%H:%M:%S%.6f").to_string(),
            TimeFormat::UtcDate => datetime(ts).format("%Y-%m-%d %H:%M:%S%.6f").to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn std6(x: f64) -> String {
        format!("{x:.6}")
    }

    /// `push_secs6` writes what std's `{:.6}` writes: capture times (nanoseconds since the
    /// first frame, as `secs_since` makes them), values a hair either side of a half
    /// microsecond, the bounds of the quick path, and what it leaves to std.
    #[test]
    fn six_decimals_as_std_writes_them() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut checked = 0;
        let mut check = |v: f64| {
            assert_eq!(secs6(v), std6(v), "{v:e}");
            checked += 1;
        };
        for ns in (0..2_000_000i64).chain((0..200_000).map(|k| k * 500)) {
            check(Timestamp(ns).secs_since(Timestamp(0)));
        }
        for _ in 0..300_000 {
            let ns = (next() % 4_000_000_000_000_000) as i64;
            check(Timestamp(ns).secs_since(Timestamp(0)));
            let bits = next();
            check(f64::from_bits(bits >> 2));
            let v = (next() % 1_000_000_000_000) as f64 / 1e6 + 5e-7;
            for d in [-2.0, -1.0, 0.0, 1.0, 2.0] {
                check(v + d * v * f64::EPSILON);
            }
        }
        for v in [
            0.0,
            -0.0,
            0.5e-6,
            1.5e-6,
            2.5e-6,
            0.9999995,
            999_999_999.999_999_5,
            1e9,
            1e9 + 0.25,
            -1.5,
            -1e-7,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            1e-320,
        ] {
            check(v);
        }
        assert!(checked > 3_000_000);
    }

    const T: Timestamp = Timestamp(1_714_557_600_123_456_789);

    #[test]
    fn iso_is_utc_with_microseconds() {
        assert_eq!(iso_utc(T), "2024-05-01T10:00:00.123456Z");
        assert_eq!(iso_utc(Timestamp(0)), "1970-01-01T00:00:00.000000Z");
    }

    #[test]
    fn columns() {
        let mut c = TimeColumn::new(TimeFormat::Relative);
        c.set_first(Timestamp(T.0 - 1_500_000_000));
        assert_eq!(c.shown(T, None), "1.500000");
        let mut c = TimeColumn::new(TimeFormat::Epoch);
        assert_eq!(c.shown(T, None), "1714557600.123456");
        let mut c = TimeColumn::new(TimeFormat::UtcDate);
        assert_eq!(c.shown(T, None), "2024-05-01 10:00:00.123456");
        let mut c = TimeColumn::new(TimeFormat::Utc);
        assert_eq!(c.shown(T, None), "10:00:00.123456");
        // Deltas: d from the previous message seen, dd from the previous one shown.
        let mut d = TimeColumn::new(TimeFormat::Delta);
        let mut dd = TimeColumn::new(TimeFormat::DeltaDisplayed);
        let t1 = T;
        let t2 = Timestamp(T.0 + 250_000_000);
        let t3 = Timestamp(T.0 + 1_000_000_000);
        for c in [&mut d, &mut dd] {
            let p = c.seen(t1);
            assert_eq!(c.shown(t1, p), "0.000000");
            c.seen(t2); // not shown
        }
        let p = d.seen(t3);
        assert_eq!(d.shown(t3, p), "0.750000");
        let p = dd.seen(t3);
        assert_eq!(dd.shown(t3, p), "1.000000");
    }
}
