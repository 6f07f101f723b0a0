//! Checks of one finished update interval: limits (section 3.1.7.1), reservation, and reported
//! counters against observed I/O. Pure functions of the row and the tolerances.

use super::config::Tolerances;
use super::finding::FlowFindingCode;
use super::interval::IntervalRow;
use crate::sqos::Severity;

/// A problem found in one interval, before it is attached to a flow.
#[derive(Clone, Debug, PartialEq)]
pub struct RowIssue {
    pub code: FlowFindingCode,
    pub severity: Severity,
    pub message: String,
}

fn issue(code: FlowFindingCode, severity: Severity, message: String) -> RowIssue {
    RowIssue {
        code,
        severity,
        message,
    }
}

fn above(rate: f64, max: u64, secs: f64, t: &Tolerances) -> bool {
    let burst = if secs > 0.0 { t.burst_secs / secs } else { 0.0 };
    rate > max as f64 * (1.0 + burst) * (1.0 + t.rate_rel) + t.rate_abs
}

fn below(rate: f64, min: u64, t: &Tolerances) -> bool {
    rate < min as f64 * (1.0 - t.rate_rel) - t.rate_abs
}

fn disagree(reported: f64, observed: f64, t: &Tolerances) -> bool {
    (reported - observed).abs() > t.counters_abs.max(t.counters_rel * reported.max(observed))
}

/// Average time an I/O waited in the client before it was sent, from the applied counters.
fn backlog_ms(row: &IntervalRow) -> Option<f64> {
    let r = &row.reported;
    (row.updates_applied > 0 && r.io_count > 0)
        .then(|| r.latency.saturating_sub(r.lower_latency) as f64 / r.io_count as f64 / 10_000.0)
}

/// Section 3.1.7.1 averages the initiation rate; the averaging window is the update interval
/// (the client's own accounting period), judged only when at least `min_window_secs` long.
pub fn check_row(row: &IntervalRow, t: &Tolerances) -> Vec<RowIssue> {
    let mut out = Vec::new();
    let secs = row.secs();
    let span = format!(
        "over {secs:.2} s (frames {}–{})",
        row.start_frame, row.end_frame
    );
    let observed = row.observed_rates();
    let reported = row.reported_rates();
    if secs >= t.min_window_secs {
        if let Some(max) = row.in_effect.maximum_io_rate.filter(|&m| m > 0) {
            if let Some(o) = observed.filter(|o| above(o.normalized_iops, max, secs, t)) {
                out.push(issue(
                    FlowFindingCode::ExceedsMaxIoRate,
                    Severity::Error,
                    format!(
                        "observed {:.1} normalized IOPS {span} above MaximumIoRate {max}",
                        o.normalized_iops
                    ),
                ));
            } else if let Some(r) = reported.filter(|r| above(r.normalized_iops, max, secs, t)) {
                out.push(issue(
                    FlowFindingCode::ExceedsMaxIoRate,
                    Severity::Error,
                    format!(
                        "reported {:.1} normalized IOPS {span} above MaximumIoRate {max}",
                        r.normalized_iops
                    ),
                ));
            }
        }
        if let Some(max) = row.in_effect.maximum_bandwidth.filter(|&m| m > 0) {
            if let Some(o) = observed.filter(|o| above(o.kilobytes_per_second, max, secs, t)) {
                out.push(issue(
                    FlowFindingCode::ExceedsMaxBandwidth,
                    Severity::Error,
                    format!(
                        "observed {:.1} KB/s {span} above MaximumBandwidth {max} KB/s",
                        o.kilobytes_per_second
                    ),
                ));
            } else if let Some(kbps) = reported
                .and_then(|r| r.kilobytes_per_second)
                .filter(|&k| above(k, max, secs, t))
            {
                out.push(issue(
                    FlowFindingCode::ExceedsMaxBandwidth,
                    Severity::Error,
                    format!("reported {kbps:.1} KB/s {span} above MaximumBandwidth {max} KB/s"),
                ));
            }
        }
        let min = row.in_effect.minimum_io_rate.filter(|&m| m > 0);
        let backlog = backlog_ms(row).filter(|&q| q >= t.backlog_ms);
        if let (Some(min), Some(o), Some(q)) = (min, observed, backlog) {
            let ok_throughout = row.in_effect.status_known && row.in_effect.all_ok;
            if ok_throughout && row.observed_complete && below(o.normalized_iops, min, t) {
                out.push(issue(
                    FlowFindingCode::ReservationNotMet,
                    Severity::Warning,
                    format!(
                        "observed {:.1} normalized IOPS {span} below MinimumIoRate {min} while the status is StorageQoSStatusOk and the client queued its I/O {q:.1} ms on average",
                        o.normalized_iops
                    ),
                ));
            }
        }
    }
    // Only a whole interval whose update the server applied and whose I/O was all seen.
    if row.observed_complete && row.updates_applied == row.intervals && row.intervals > 0 {
        let rep = &row.reported;
        let obs = &row.observed;
        let mut diffs = Vec::new();
        if disagree(rep.io_count as f64, obs.io_count as f64, t) {
            diffs.push(format!(
                "IoCountIncrement {} vs {} I/O seen",
                rep.io_count, obs.io_count
            ));
        }
        if disagree(
            rep.normalized_io_count as f64,
            obs.normalized_io_count as f64,
            t,
        ) {
            diffs.push(format!(
                "NormalizedIoCountIncrement {} vs {} seen",
                rep.normalized_io_count, obs.normalized_io_count
            ));
        }
        if let Some(kb) = rep.kilobytes {
            // A client may round each I/O up to a whole KB: allow one KB per I/O more.
            let seen = obs.bytes as f64 / 1024.0;
            let slack = obs.io_count as f64;
            if (kb as f64 - seen).abs() > slack + t.counters_abs.max(t.counters_rel * seen) {
                diffs.push(format!("KilobyteCountIncrement {kb} vs {seen:.1} KB seen"));
            }
        }
        if !diffs.is_empty() {
            out.push(issue(
                FlowFindingCode::CountersMismatch,
                Severity::Warning,
                format!(
                    "reported counters disagree with the wire {span}: {}",
                    diffs.join(", ")
                ),
            ));
        }
    }
    out
}
