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

/// Every figure, in the order of [`Figure::ALL`] (a test checks it).
const FIGURES: [FigureDef; 17] = [
    FigureDef {
        name: "limit",
        pointer: "/limit",
        setting: true,
        of_flow: |x| int(x.flow.policy.map(|p| p.limit)),
    },
    FigureDef {
        name: "reservation",
        pointer: "/reservation",
        setting: true,
        of_flow: |x| int(x.flow.policy.map(|p| p.reservation)),
    },
    FigureDef {
        name: "bandwidth_limit",
        pointer: "/bandwidth_limit",
        setting: true,
        of_flow: |x| int(x.flow.policy.and_then(|p| p.bandwidth_limit)),
    },
    FigureDef {
        name: "maximum_io_rate",
        pointer: "/maximum_io_rate",
        setting: true,
        of_flow: |x| int(x.flow.server.map(|s| s.maximum_io_rate)),
    },
    FigureDef {
        name: "minimum_io_rate",
        pointer: "/minimum_io_rate",
        setting: true,
        of_flow: |x| int(x.flow.server.map(|s| s.minimum_io_rate)),
    },
    FigureDef {
        name: "maximum_bandwidth",
        pointer: "/maximum_bandwidth",
        setting: true,
        of_flow: |x| int(x.flow.server.and_then(|s| s.maximum_bandwidth)),
    },
    FigureDef {
        name: "base_io_size",
        pointer: "/base_io_size",
        setting: true,
        of_flow: |x| x.flow.server.map(|s| f64::from(s.base_io_size)),
    },
    FigureDef {
        name: "iops",
        pointer: "/iops",
        setting: false,
        of_flow: |x| x.reported.map(|r| r.iops),
    },
    FigureDef {
        name: "normalized_iops",
        pointer: "/normalized_iops",
        setting: false,
        of_flow: |x| x.reported.map(|r| r.normalized_iops),
    },
    FigureDef {
        name: "avg_latency_ms",
        pointer: "/avg_latency_ms",
        setting: false,
        of_flow: |x| x.reported.and_then(|r| r.avg_latency_ms),
    },
    FigureDef {
        name: "avg_lower_latency_ms",
        pointer: "/avg_lower_latency_ms",
        setting: false,
        of_flow: |x| x.reported.and_then(|r| r.avg_lower_latency_ms),
    },
    FigureDef {
        name: "kilobytes_per_second",
        pointer: "/kilobytes_per_second",
        setting: false,
        of_flow: |x| x.reported.and_then(|r| r.kilobytes_per_second),
    },
    FigureDef {
        name: "observed_iops",
        pointer: "/observed/iops",
        setting: false,
        of_flow: |x| x.observed.map(|o| o.iops),
    },
    FigureDef {
        name: "observed_normalized_iops",
        pointer: "/observed/normalized_iops",
        setting: false,
        of_flow: |x| x.observed.map(|o| o.normalized_iops),
    },
    FigureDef {
        name: "observed_kilobytes_per_second",
        pointer: "/observed/kilobytes_per_second",
        setting: false,
        of_flow: |x| x.observed.map(|o| o.kilobytes_per_second),
    },
    FigureDef {
        name: "observed_avg_response_ms",
        pointer: "/observed/avg_response_ms",
        setting: false,
        of_flow: |x| x.observed.and_then(|o| o.avg_response_ms),
    },
    FigureDef {
        name: "channels",
        pointer: "/channels_total",
        setting: true,
        of_flow: |x| Some(x.flow.channels_total as f64),
    },
];

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
