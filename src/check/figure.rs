//! The per-flow figures rules and baselines talk about, and where each sits in the flow JSON of
//! `sqos flows --format json` (issue 5's schema).

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

use crate::analysis::{FlowState, ObservedRates, Rates};

/// A number a flow carries: a setting, a figure derived from the reported counters, or one
/// observed on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(try_from = "String")]
pub enum Figure {
    Limit,
    Reservation,
    BandwidthLimit,
    MaximumIoRate,
    MinimumIoRate,
    MaximumBandwidth,
    BaseIoSize,
    Iops,
    NormalizedIops,
    AvgLatencyMs,
    AvgLowerLatencyMs,
    KilobytesPerSecond,
    ObservedIops,
    ObservedNormalizedIops,
    ObservedKilobytesPerSecond,
    ObservedAvgResponseMs,
    /// Channels (session × connection) the flow's I/O and SQOS requests went over.
    Channels,
}

impl Figure {
    pub const ALL: [Figure; 17] = [
        Figure::Limit,
        Figure::Reservation,
        Figure::BandwidthLimit,
        Figure::MaximumIoRate,
        Figure::MinimumIoRate,
        Figure::MaximumBandwidth,
        Figure::BaseIoSize,
        Figure::Iops,
        Figure::NormalizedIops,
        Figure::AvgLatencyMs,
        Figure::AvgLowerLatencyMs,
        Figure::KilobytesPerSecond,
        Figure::ObservedIops,
        Figure::ObservedNormalizedIops,
        Figure::ObservedKilobytesPerSecond,
        Figure::ObservedAvgResponseMs,
        Figure::Channels,
    ];

    /// The figure's row of [`FIGURES`].
    fn def(self) -> &'static FigureDef {
        &FIGURES[self as usize]
    }

    /// The name used in rules files and on the command line.
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// JSON pointer of the figure inside one flow object.
    pub fn pointer(self) -> &'static str {
        self.def().pointer
    }

    /// Settings are integers the client or server sent (and the channel count, also exact); the
    /// rest are rates computed from them.
    pub fn is_setting(self) -> bool {
        self.def().setting
    }

    fn names_list() -> String {
        Figure::ALL
            .iter()
            .map(|f| format!("`{}`", f.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One figure: its name, where a saved flow table (`sqos flows --format json`) holds it, and how
/// a flow of the analysis gives it: both sides of a baseline comparison read this one row.
struct FigureDef {
    name: &'static str,
    pointer: &'static str,
    setting: bool,
    of_flow: fn(&FlowFigures<'_>) -> Option<f64>,
}

fn int(v: Option<u64>) -> Option<f64> {
    v.map(|v| v as f64)
}

/// Whether a figure is a setting (exact) or a rate (computed).
const SETTING: bool = true;
const RATE: bool = false;

/// Every figure, in the order of [`Figure::ALL`] (a test checks it): name, pointer, kind, and
/// how a flow of the analysis gives it.
#[rustfmt::skip]
const FIGURES: [FigureDef; 17] = [
    row("limit", "/limit", SETTING, |x| int(x.flow.policy.map(|p| p.limit))),
    row("reservation", "/reservation", SETTING, |x| int(x.flow.policy.map(|p| p.reservation))),
    row("bandwidth_limit", "/bandwidth_limit", SETTING, |x| int(x.flow.policy.and_then(|p| p.bandwidth_limit))),
    row("maximum_io_rate", "/maximum_io_rate", SETTING, |x| int(x.flow.server.map(|s| s.maximum_io_rate))),
    row("minimum_io_rate", "/minimum_io_rate", SETTING, |x| int(x.flow.server.map(|s| s.minimum_io_rate))),
    row("maximum_bandwidth", "/maximum_bandwidth", SETTING, |x| int(x.flow.server.and_then(|s| s.maximum_bandwidth))),
    row("base_io_size", "/base_io_size", SETTING, |x| x.flow.server.map(|s| f64::from(s.base_io_size))),
    row("iops", "/iops", RATE, |x| x.reported.map(|r| r.iops)),
    row("normalized_iops", "/normalized_iops", RATE, |x| x.reported.map(|r| r.normalized_iops)),
    row("avg_latency_ms", "/avg_latency_ms", RATE, |x| x.reported.and_then(|r| r.avg_latency_ms)),
    row("avg_lower_latency_ms", "/avg_lower_latency_ms", RATE, |x| x.reported.and_then(|r| r.avg_lower_latency_ms)),
    row("kilobytes_per_second", "/kilobytes_per_second", RATE, |x| x.reported.and_then(|r| r.kilobytes_per_second)),
    row("observed_iops", "/observed/iops", RATE, |x| x.observed.map(|o| o.iops)),
    row("observed_normalized_iops", "/observed/normalized_iops", RATE, |x| x.observed.map(|o| o.normalized_iops)),
    row("observed_kilobytes_per_second", "/observed/kilobytes_per_second", RATE, |x| x.observed.map(|o| o.kilobytes_per_second)),
    row("observed_avg_response_ms", "/observed/avg_response_ms", RATE, |x| x.observed.and_then(|o| o.avg_response_ms)),
    row("channels", "/channels_total", SETTING, |x| Some(x.flow.channels_total as f64)),
];

const fn row(
    name: &'static str,
    pointer: &'static str,
    setting: bool,
    of_flow: fn(&FlowFigures<'_>) -> Option<f64>,
) -> FigureDef {
    FigureDef {
        name,
        pointer,
        setting,
        of_flow,
    }
}

/// A flow of the analysis with the rates derived from it, as the figures read it.
pub struct FlowFigures<'a> {
    flow: &'a FlowState,
    reported: Option<Rates>,
    observed: Option<ObservedRates>,
}

impl<'a> FlowFigures<'a> {
    pub fn new(flow: &'a FlowState) -> Self {
        FlowFigures {
            flow,
            reported: flow.reported_rates(),
            observed: flow.observed_rates(),
        }
    }

    /// The figure's value as the flow table gives it (`sqos flows`): a rate that is not finite
    /// is written as null there, so it is none here too.
    pub fn get(&self, fig: Figure) -> Option<f64> {
        (fig.def().of_flow)(self).filter(|x| x.is_finite())
    }
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown figure `{0}`, expected one of {list}", list = Figure::names_list())]
pub struct UnknownFigure(pub String);

impl FromStr for Figure {
    type Err = UnknownFigure;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Figure::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFigure(s.to_string()))
    }
}

impl TryFrom<String> for Figure {
    type Error = UnknownFigure;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// A reported figure and the observed one it should agree with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agreement {
    Iops,
    NormalizedIops,
    KilobytesPerSecond,
    /// The client's average latency against the response time seen on the wire.
    Latency,
}

impl Agreement {
    pub fn figures(self) -> (Figure, Figure) {
        match self {
            Agreement::Iops => (Figure::Iops, Figure::ObservedIops),
            Agreement::NormalizedIops => (Figure::NormalizedIops, Figure::ObservedNormalizedIops),
            Agreement::KilobytesPerSecond => (
                Figure::KilobytesPerSecond,
                Figure::ObservedKilobytesPerSecond,
            ),
            Agreement::Latency => (Figure::AvgLatencyMs, Figure::ObservedAvgResponseMs),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Agreement::Iops => "iops",
            Agreement::NormalizedIops => "normalized_iops",
            Agreement::KilobytesPerSecond => "kilobytes_per_second",
            Agreement::Latency => "latency",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_listed() {
        for (i, f) in Figure::ALL.into_iter().enumerate() {
            assert_eq!(f as usize, i, "FIGURES is in the order of Figure::ALL");
            assert_eq!(f.name().parse::<Figure>(), Ok(f));
        }
        let e = "iopz".parse::<Figure>().unwrap_err().to_string();
        assert!(
            e.starts_with("unknown figure `iopz`, expected one of `limit`"),
            "{e}"
        );
    }
}
