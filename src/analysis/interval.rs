//! Update intervals: what the client reported (UPDATE_COUNTERS) and what was seen on the wire
//! (READ/WRITE) between two counter updates of a flow, and the rates derived from them.
//!
//! Interval i runs from the request frame of update i−1 (exclusive) to the request frame of
//! update i (inclusive): the client zeroes its counters when it sends an update (section
//! 3.1.4.1), so an update carries the I/O issued since the previous one was sent. The first
//! update of a flow opens the series: the start of what it counts was not seen.

use serde::Serialize;

use crate::capture::Timestamp;
use crate::sqos::{self, Request, DEFAULT_BASE_IO_SIZE};

/// 100-ns units per millisecond (LatencyIncrement is in 100-ns units).
const TICKS_PER_MS: f64 = 10_000.0;

/// Section 4.1's NormalizedIoSize (`sqos::normalized_io_size`) of an I/O seen on the wire. A
/// BaseIoSize of 0 (a server bug) is read as the default (section 3.1.3), not divided by.
pub fn normalized_io_size(bytes: u64, base_io_size: u32) -> u64 {
    let base = if base_io_size == 0 {
        DEFAULT_BASE_IO_SIZE
    } else {
        base_io_size
    };
    // `None` only for a BaseIoSize of 0, ruled out above.
    sqos::normalized_io_size(bytes, base).unwrap_or_default()
}

/// The increments one or more UPDATE_COUNTERS carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub io_count: u64,
    pub normalized_io_count: u64,
    /// 100-ns units.
    pub latency: u64,
    /// 100-ns units.
    pub lower_latency: u64,
    /// Dialect 1.1 only.
    pub kilobytes: Option<u64>,
}

impl Counters {
    pub fn from_request(r: &Request) -> Self {
        Counters {
            io_count: r.io_count_increment,
            normalized_io_count: r.normalized_io_count_increment,
            latency: r.latency_increment,
            lower_latency: r.lower_latency_increment,
            kilobytes: r.v1_1.map(|v| v.kilobyte_count_increment),
        }
    }

    pub fn add(&mut self, o: &Counters) {
        self.io_count = self.io_count.saturating_add(o.io_count);
        self.normalized_io_count = self
            .normalized_io_count
            .saturating_add(o.normalized_io_count);
        self.latency = self.latency.saturating_add(o.latency);
        self.lower_latency = self.lower_latency.saturating_add(o.lower_latency);
        self.kilobytes = match (self.kilobytes, o.kilobytes) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
    }

    /// Rates over `secs` seconds; `None` for an empty span.
    pub fn rates(&self, secs: f64) -> Option<Rates> {
        if secs <= 0.0 || !secs.is_finite() {
            return None;
        }
        let per_io = |ticks: u64| {
            (self.io_count > 0).then(|| ticks as f64 / self.io_count as f64 / TICKS_PER_MS)
        };
        Some(Rates {
            iops: self.io_count as f64 / secs,
            normalized_iops: self.normalized_io_count as f64 / secs,
            kilobytes_per_second: self.kilobytes.map(|kb| kb as f64 / secs),
            avg_latency_ms: per_io(self.latency),
            avg_lower_latency_ms: per_io(self.lower_latency),
        })
    }
}

/// Figures derived from reported counters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rates {
    pub iops: f64,
    pub normalized_iops: f64,
    pub kilobytes_per_second: Option<f64>,
    /// LatencyIncrement / IoCountIncrement, in ms; `None` without I/O.
    pub avg_latency_ms: Option<f64>,
    pub avg_lower_latency_ms: Option<f64>,
}

/// READ/WRITE seen on the wire on a flow's opens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Observed {
    pub io_count: u64,
    /// Normalized with the flow's BaseIoSize at the time of the I/O (section 4.1).
    pub normalized_io_count: u64,
    /// Bytes asked for by the requests.
    pub bytes: u64,
    /// Sum of request → response times, ns.
    pub response_ns: u64,
}

impl Observed {
    pub fn add_io(&mut self, bytes: u32, base_io_size: u32, response_ns: i64) {
        self.io_count = self.io_count.saturating_add(1);
        self.normalized_io_count = self
            .normalized_io_count
            .saturating_add(normalized_io_size(u64::from(bytes), base_io_size));
        self.bytes = self.bytes.saturating_add(u64::from(bytes));
        self.response_ns = self
            .response_ns
            .saturating_add(u64::try_from(response_ns).unwrap_or(0));
    }

    pub fn add(&mut self, o: &Observed) {
        self.io_count = self.io_count.saturating_add(o.io_count);
        self.normalized_io_count = self
            .normalized_io_count
            .saturating_add(o.normalized_io_count);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.response_ns = self.response_ns.saturating_add(o.response_ns);
    }

    pub fn rates(&self, secs: f64) -> Option<ObservedRates> {
        if secs <= 0.0 || !secs.is_finite() {
            return None;
        }
        Some(ObservedRates {
            iops: self.io_count as f64 / secs,
            normalized_iops: self.normalized_io_count as f64 / secs,
            kilobytes_per_second: self.bytes as f64 / 1024.0 / secs,
            avg_response_ms: (self.io_count > 0)
                .then(|| self.response_ns as f64 / self.io_count as f64 / 1e6),
        })
    }
}

/// Figures derived from observed I/O.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ObservedRates {
    pub iops: f64,
    pub normalized_iops: f64,
    /// KB = 1024 bytes.
    pub kilobytes_per_second: f64,
    pub avg_response_ms: Option<f64>,
}

/// The server's values in effect at some time during an interval: the highest maxima and the
/// lowest minimum (so the checks give the client and the server the benefit of a change).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InEffect {
    pub maximum_io_rate: Option<u64>,
    pub minimum_io_rate: Option<u64>,
    pub maximum_bandwidth: Option<u64>,
    /// Some status was known during the interval.
    pub status_known: bool,
    /// Every status known during the interval was StorageQoSStatusOk.
    pub all_ok: bool,
}

impl InEffect {
    pub fn merge(&mut self, o: &InEffect) {
        self.maximum_io_rate = max_opt(self.maximum_io_rate, o.maximum_io_rate);
        self.maximum_bandwidth = max_opt(self.maximum_bandwidth, o.maximum_bandwidth);
        self.minimum_io_rate = match (self.minimum_io_rate, o.minimum_io_rate) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.all_ok = match (self.status_known, o.status_known) {
            (true, true) => self.all_ok && o.all_ok,
            (true, false) => self.all_ok,
            (false, _) => o.all_ok,
        };
        self.status_known |= o.status_known;
    }
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// One update interval of one flow (or several merged neighbours, see `Series`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntervalRow {
    /// 0-based number of the first interval in this row (interval 0 ends at the 2nd update).
    pub index: u64,
    /// Raw intervals merged into this row (1 unless the series was decimated).
    pub intervals: u32,
    #[serde(skip)]
    pub start: Timestamp,
    #[serde(skip)]
    pub end: Timestamp,
    /// Request frames of the updates that open and close the row.
    pub start_frame: u64,
    pub end_frame: u64,
    /// Updates in the row the server applied (failed or unanswered ones lost their counts).
    pub updates_applied: u32,
    /// Sum of applied increments and the seconds they cover.
    pub reported: Counters,
    pub reported_secs: f64,
    pub observed: Observed,
    /// False when the capture noted lost data or the flow's opens were not all known.
    pub observed_complete: bool,
    pub in_effect: InEffect,
}

impl IntervalRow {
    pub fn secs(&self) -> f64 {
        self.end.secs_since(self.start)
    }
    pub fn reported_rates(&self) -> Option<Rates> {
        self.reported.rates(self.reported_secs)
    }
    pub fn observed_rates(&self) -> Option<ObservedRates> {
        self.observed.rates(self.secs())
    }
    /// Append the row that follows this one.
    pub fn merge(&mut self, next: &IntervalRow) {
        self.intervals = self.intervals.saturating_add(next.intervals);
        self.end = next.end;
        self.end_frame = next.end_frame;
        self.updates_applied = self.updates_applied.saturating_add(next.updates_applied);
        self.reported.add(&next.reported);
        self.reported_secs += next.reported_secs;
        self.observed.add(&next.observed);
        self.observed_complete &= next.observed_complete;
        self.in_effect.merge(&next.in_effect);
    }
}

/// A flow's interval rows, bounded: past its cap the series halves its resolution by merging
/// neighbouring rows (sums stay exact; only the time resolution is lost).
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub rows: Vec<IntervalRow>,
    /// How many times the resolution was halved.
    pub halvings: u32,
}

impl Series {
    pub fn push(&mut self, row: IntervalRow, cap: usize) {
        self.rows.reserve_exact(1);
        self.rows.push(row);
        if self.rows.len() > cap.max(2) {
            self.halve();
        }
    }

    fn halve(&mut self) {
        let old = std::mem::take(&mut self.rows);
        let mut it = old.into_iter();
        while let Some(mut a) = it.next() {
            if let Some(b) = it.next() {
                a.merge(&b);
            }
            self.rows.push(a);
        }
        self.rows.shrink_to_fit();
        self.halvings += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_size_follows_section_4_1_table() {
        let table = [
            (512, 1),
            (4096, 1),
            (8192, 1),
            (12288, 2),
            (16384, 2),
            (65536, 8),
            (1_048_576, 128),
        ];
        for (bytes, norm) in table {
            assert_eq!(normalized_io_size(bytes, 8192), norm, "{bytes} bytes");
        }
        assert_eq!(normalized_io_size(0, 8192), 0);
        assert_eq!(normalized_io_size(4097, 4096), 2);
        assert_eq!(normalized_io_size(100, 0), 1, "BaseIoSize 0 reads as 8192");
        // The exact ceiling, without overflow.
        assert_eq!(normalized_io_size(u64::MAX, 8192), u64::MAX / 8192 + 1);
    }

    #[test]
    fn counter_rates_use_100ns_units_and_per_io_latency() {
        let c = Counters {
            io_count: 399,
            normalized_io_count: 399,
            latency: 38_223_584,
            lower_latency: 38_223_584,
            kilobytes: Some(1600),
        };
        let r = c.rates(4.0).expect("non-empty span");
        assert_eq!(r.iops, 99.75);
        assert_eq!(r.normalized_iops, 99.75);
        assert_eq!(r.kilobytes_per_second, Some(400.0));
        // 38223584 × 100 ns / 399 = 9.5798 ms
        let lat = r.avg_latency_ms.expect("I/O present");
        assert!((lat - 9.579_845).abs() < 1e-6, "{lat}");
        assert_eq!(c.rates(0.0), None);
        let idle = Counters::default().rates(1.0).expect("span");
        assert_eq!(idle.avg_latency_ms, None);
        assert_eq!(idle.kilobytes_per_second, None);
    }

    #[test]
    fn observed_rates() {
        let mut o = Observed::default();
        o.add_io(65536, 8192, 2_000_000);
        o.add_io(4096, 8192, 4_000_000);
        let r = o.rates(2.0).expect("span");
        assert_eq!(r.iops, 1.0);
        assert_eq!(r.normalized_iops, 4.5);
        assert_eq!(r.kilobytes_per_second, 34.0);
        assert_eq!(r.avg_response_ms, Some(3.0));
    }

    fn row(i: u64, start_s: i64, end_s: i64, io: u64) -> IntervalRow {
        IntervalRow {
            index: i,
            intervals: 1,
            start: Timestamp(start_s * 1_000_000_000),
            end: Timestamp(end_s * 1_000_000_000),
            start_frame: i,
            end_frame: i + 1,
            updates_applied: 1,
            reported: Counters {
                io_count: io,
                ..Counters::default()
            },
            reported_secs: (end_s - start_s) as f64,
            observed: Observed::default(),
            observed_complete: true,
            in_effect: InEffect::default(),
        }
    }

    #[test]
    fn series_halves_and_keeps_sums() {
        let mut s = Series::default();
        for i in 0..9 {
            s.push(row(i, i as i64, i as i64 + 1, 10 * (i + 1)), 8);
        }
        assert_eq!(s.halvings, 1);
        assert_eq!(s.rows.len(), 5);
        let first = &s.rows[0];
        assert_eq!((first.index, first.intervals), (0, 2));
        assert_eq!(first.reported.io_count, 30);
        assert_eq!(first.reported_secs, 2.0);
        let total: u64 = s.rows.iter().map(|r| r.reported.io_count).sum();
        assert_eq!(total, 450);
        assert_eq!(s.rows[4].intervals, 1);
    }
}
