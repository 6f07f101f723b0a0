//! The value types of rules files, each validated while it is read so that toml can point at
//! the offending value.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::check::figure::Figure;
use crate::check::flows::{status_from_name, status_label};
use crate::smb2::NtStatus;
use crate::sqos::{Severity, Status};

/// A lower or upper bound: a number, or a figure of the same flow times a factor (e.g. the
/// server's `maximum_io_rate`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    Value(f64),
    Field { figure: Figure, factor: f64 },
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Value(v) => write!(f, "{}", fmt_num(*v)),
            Bound::Field { figure, factor } if *factor == 1.0 => write!(f, "{figure}"),
            Bound::Field { figure, factor } => write!(f, "{} × {figure}", fmt_num(*factor)),
        }
    }
}

/// A number as people write it: integers without a fraction, others with up to 3 decimals.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldBound {
    field: Figure,
    #[serde(default = "one")]
    factor: f64,
}

fn one() -> f64 {
    1.0
}

fn finite<E: de::Error>(v: f64) -> Result<f64, E> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(E::custom(format!("{v} is not a finite number")))
    }
}

impl<'de> Deserialize<'de> for Bound {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Bound;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    r#"a number, or a table like { field = "maximum_io_rate", factor = 1.1 }"#,
                )
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Bound, E> {
                Ok(Bound::Value(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Bound, E> {
                Ok(Bound::Value(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Bound, E> {
                finite(v).map(Bound::Value)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Bound, A::Error> {
                let fb = FieldBound::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let factor = finite(fb.factor)?;
                Ok(Bound::Field {
                    figure: fb.field,
                    factor,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// How far two figures may differ: |a − b| ≤ absolute + relative × |b|, b being the reference
/// (the observed figure, or the baseline's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(try_from = "RawTolerance")]
pub struct Tolerance {
    pub relative: f64,
    pub absolute: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTolerance {
    #[serde(default)]
    relative: f64,
    #[serde(default)]
    absolute: f64,
}

impl TryFrom<RawTolerance> for Tolerance {
    type Error = String;
    fn try_from(r: RawTolerance) -> Result<Self, String> {
        Tolerance::new(r.relative, r.absolute)
    }
}

/// Relative slack always allowed, so figures that went through a JSON file compare equal.
const FLOAT_NOISE: f64 = 1e-9;

impl Tolerance {
    pub const EXACT: Tolerance = Tolerance {
        relative: 0.0,
        absolute: 0.0,
    };

    pub fn new(relative: f64, absolute: f64) -> Result<Self, String> {
        for (k, v) in [("relative", relative), ("absolute", absolute)] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("`{k}` must be a number ≥ 0, not {v}"));
            }
        }
        Ok(Tolerance { relative, absolute })
    }

    /// Whether `value` is within tolerance of `reference`.
    pub fn accepts(&self, value: f64, reference: f64) -> bool {
        let slack = self.absolute
            + self.relative * reference.abs()
            + FLOAT_NOISE * value.abs().max(reference.abs());
        (value - reference).abs() <= slack
    }

    /// Parse the command-line form: `10%`, `5`, `10%+5` or `5+10%`.
    pub fn parse_cli(s: &str) -> Result<Self, String> {
        let (mut rel, mut abs) = (None, None);
        for part in s.split('+').map(str::trim) {
            let (slot, text, scale) = match part.strip_suffix('%') {
                Some(p) => (&mut rel, p, 0.01),
                None => (&mut abs, part, 1.0),
            };
            let v: f64 = text
                .trim()
                .parse()
                .map_err(|_| format!("`{part}` is not a number or a percentage"))?;
            if slot.replace(v * scale).is_some() {
                return Err(format!("`{s}` gives the same kind of tolerance twice"));
            }
        }
        Tolerance::new(rel.unwrap_or(0.0), abs.unwrap_or(0.0))
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.relative > 0.0, self.absolute > 0.0) {
            (false, false) => f.write_str("exact"),
            (true, false) => write!(f, "±{}%", fmt_num(self.relative * 100.0)),
            (false, true) => write!(f, "±{}", fmt_num(self.absolute)),
            (true, true) => write!(
                f,
                "±({} + {}%)",
                fmt_num(self.absolute),
                fmt_num(self.relative * 100.0)
            ),
        }
    }
}

/// An NT status in a rules file: its MS-ERREF name (`STATUS_NOT_FOUND`), an integer
/// (`0xC0000225`) or a hex string (`"0xC0000225"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NtStatusSpec(pub u32);

impl fmt::Display for NtStatusSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", NtStatus(self.0))
    }
}

impl<'de> Deserialize<'de> for NtStatusSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = NtStatusSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an NT status name like \"STATUS_NOT_FOUND\" or a 32-bit number")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<NtStatusSpec, E> {
                u32::try_from(v)
                    .map(NtStatusSpec)
                    .map_err(|_| E::custom(format!("{v} is not a 32-bit NT status")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<NtStatusSpec, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<NtStatusSpec, E> {
                if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                    return u32::from_str_radix(hex, 16)
                        .map(NtStatusSpec)
                        .map_err(|_| E::custom(format!("`{s}` is not a 32-bit hex number")));
                }
                NtStatus::from_name(s)
                    .map(|n| NtStatusSpec(n.0))
                    .ok_or_else(|| {
                        E::custom(format!(
                        "unknown NT status name `{s}` (write its value instead, e.g. 0xC0000225)"
                    ))
                    })
            }
        }
        d.deserialize_any(V)
    }
}

/// The final SQOS status a flow must have: a name (`ok`, `insufficient_throughput`, … or the
/// spec's `StorageQoSStatusOk`, …) or its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusSpec(pub Status);

impl fmt::Display for StatusSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&status_label(self.0))
    }
}

impl<'de> Deserialize<'de> for StatusSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = StatusSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a status name (ok, insufficient_throughput, unknown_policy_id, configuration_mismatch, not_available) or a number")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<StatusSpec, E> {
                u32::try_from(v)
                    .map(|v| StatusSpec(Status(v)))
                    .map_err(|_| E::custom(format!("{v} is not a 32-bit status")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<StatusSpec, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<StatusSpec, E> {
                status_from_name(s)
                    .map(StatusSpec)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Str(s), &self))
            }
        }
        d.deserialize_any(V)
    }
}

/// A shell-style pattern over initiator names (`vm0*`, `vm?1`, `[a-c]*`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub struct Glob(glob::Pattern);

impl Glob {
    pub fn matches(&self, s: &str) -> bool {
        self.0.matches(s)
    }
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl TryFrom<String> for Glob {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        glob::Pattern::new(&s)
            .map(Glob)
            .map_err(|e| format!("bad pattern `{s}`: {}", e.msg))
    }
}

/// The lowest severity a finding rule counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MinSeverity {
    Note,
    Warning,
    Error,
}

impl MinSeverity {
    pub fn severity(self) -> Severity {
        match self {
            MinSeverity::Note => Severity::Note,
            MinSeverity::Warning => Severity::Warning,
            MinSeverity::Error => Severity::Error,
        }
    }
}

/// Which SQOS requests a message count counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OptionName {
    SetLogicalFlowId,
    SetPolicy,
    ProbePolicy,
    GetStatus,
    UpdateCounters,
    /// Requests with no known flag or with unknown bits.
    Other,
    /// Every request.
    Any,
}

impl OptionName {
    pub fn name(self) -> &'static str {
        match self {
            OptionName::SetLogicalFlowId => "SET_LOGICAL_FLOW_ID",
            OptionName::SetPolicy => "SET_POLICY",
            OptionName::ProbePolicy => "PROBE_POLICY",
            OptionName::GetStatus => "GET_STATUS",
            OptionName::UpdateCounters => "UPDATE_COUNTERS",
            OptionName::Other => "OTHER",
            OptionName::Any => "ANY",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_cli_forms() {
        assert_eq!(Tolerance::parse_cli("10%"), Tolerance::new(0.1, 0.0));
        assert_eq!(Tolerance::parse_cli("5"), Tolerance::new(0.0, 5.0));
        assert_eq!(Tolerance::parse_cli("10% + 2.5"), Tolerance::new(0.1, 2.5));
        assert_eq!(Tolerance::parse_cli("2.5+10%"), Tolerance::new(0.1, 2.5));
        assert!(Tolerance::parse_cli("5+6").is_err());
        assert!(Tolerance::parse_cli("-1").is_err());
        assert!(Tolerance::parse_cli("x%").is_err());
    }

    #[test]
    fn tolerance_accepts_within_and_rejects_beyond() {
        let t = Tolerance::new(0.1, 1.0).unwrap();
        assert!(t.accepts(111.0, 100.0));
        assert!(!t.accepts(111.5, 100.0));
        assert!(t.accepts(89.0, 100.0));
        assert!(!Tolerance::EXACT.accepts(100.001, 100.0));
        assert!(Tolerance::EXACT.accepts(0.1 + 0.2, 0.3));
    }

    #[test]
    fn numbers_print_plainly() {
        assert_eq!(fmt_num(200.0), "200");
        assert_eq!(fmt_num(12.3456), "12.346");
        assert_eq!(fmt_num(0.5), "0.5");
    }
}
