//! The per-flow figures rules and baselines talk about, and where each sits in the flow JSON of
//! `sqos flows --format json` (issue 5's schema).

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

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

    /// The name used in rules files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Figure::Limit => "limit",
            Figure::Reservation => "reservation",
            Figure::BandwidthLimit => "bandwidth_limit",
            Figure::MaximumIoRate => "maximum_io_rate",
            Figure::MinimumIoRate => "minimum_io_rate",
            Figure::MaximumBandwidth => "maximum_bandwidth",
            Figure::BaseIoSize => "base_io_size",
            Figure::Iops => "iops",
            Figure::NormalizedIops => "normalized_iops",
            Figure::AvgLatencyMs => "avg_latency_ms",
            Figure::AvgLowerLatencyMs => "avg_lower_latency_ms",
            Figure::KilobytesPerSecond => "kilobytes_per_second",
            Figure::ObservedIops => "observed_iops",
            Figure::ObservedNormalizedIops => "observed_normalized_iops",
            Figure::ObservedKilobytesPerSecond => "observed_kilobytes_per_second",
            Figure::ObservedAvgResponseMs => "observed_avg_response_ms",
            Figure::Channels => "channels",
        }
    }

    /// JSON pointer of the figure inside one flow object.
    pub fn pointer(self) -> &'static str {
        match self {
            Figure::Limit => "/limit",
            Figure::Reservation => "/reservation",
            Figure::BandwidthLimit => "/bandwidth_limit",
            Figure::MaximumIoRate => "/maximum_io_rate",
            Figure::MinimumIoRate => "/minimum_io_rate",
            Figure::MaximumBandwidth => "/maximum_bandwidth",
            Figure::BaseIoSize => "/base_io_size",
            Figure::Iops => "/iops",
            Figure::NormalizedIops => "/normalized_iops",
            Figure::AvgLatencyMs => "/avg_latency_ms",
            Figure::AvgLowerLatencyMs => "/avg_lower_latency_ms",
            Figure::KilobytesPerSecond => "/kilobytes_per_second",
            Figure::ObservedIops => "/observed/iops",
            Figure::ObservedNormalizedIops => "/observed/normalized_iops",
            Figure::ObservedKilobytesPerSecond => "/observed/kilobytes_per_second",
            Figure::ObservedAvgResponseMs => "/observed/avg_response_ms",
            Figure::Channels => "/channels_total",
        }
    }

    /// Settings are integers the client or server sent (and the channel count, also exact); the
    /// rest are rates computed from them.
    pub fn is_setting(self) -> bool {
        matches!(
            self,
            Figure::Limit
                | Figure::Reservation
                | Figure::BandwidthLimit
                | Figure::MaximumIoRate
                | Figure::MinimumIoRate
                | Figure::MaximumBandwidth
                | Figure::BaseIoSize
                | Figure::Channels
        )
    }

    fn names_list() -> String {
        Figure::ALL
            .iter()
            .map(|f| format!("`{}`", f.name()))
            .collect::<Vec<_>>()
            .join(", ")
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
        for f in Figure::ALL {
            assert_eq!(f.name().parse::<Figure>(), Ok(f));
        }
        let e = "iopz".parse::<Figure>().unwrap_err().to_string();
        assert!(
            e.starts_with("unknown figure `iopz`, expected one of `limit`"),
            "{e}"
        );
    }
}
