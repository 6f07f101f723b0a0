//! Findings about a logical flow: stable codes (listed in docs/analysis.md), severity, where.

use serde::Serialize;

use crate::capture::Timestamp;
use crate::sqos::Severity;

/// Stable identifier of a flow finding; `as_str` is what users filter on and never changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum FlowFindingCode {
    ExceedsMaxIoRate,
    ExceedsMaxBandwidth,
    ReservationNotMet,
    CountersMismatch,
    StatusPollLate,
    NoStatusAfterSetPolicy,
    ServerShouldHaveFailed,
    ServerWronglyFailed,
    ServerWrongError,
    ServerStateMismatch,
    ServerQosUnsupported,
    RequestUnanswered,
    MultipleInitiators,
    MemoryBound,
}

impl FlowFindingCode {
    pub const ALL: [FlowFindingCode; 14] = [
        FlowFindingCode::ExceedsMaxIoRate,
        FlowFindingCode::ExceedsMaxBandwidth,
        FlowFindingCode::ReservationNotMet,
        FlowFindingCode::CountersMismatch,
        FlowFindingCode::StatusPollLate,
        FlowFindingCode::NoStatusAfterSetPolicy,
        FlowFindingCode::ServerShouldHaveFailed,
        FlowFindingCode::ServerWronglyFailed,
        FlowFindingCode::ServerWrongError,
        FlowFindingCode::ServerStateMismatch,
        FlowFindingCode::ServerQosUnsupported,
        FlowFindingCode::RequestUnanswered,
        FlowFindingCode::MultipleInitiators,
        FlowFindingCode::MemoryBound,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FlowFindingCode::ExceedsMaxIoRate => "flow.exceeds_max_io_rate",
            FlowFindingCode::ExceedsMaxBandwidth => "flow.exceeds_max_bandwidth",
            FlowFindingCode::ReservationNotMet => "flow.reservation_not_met",
            FlowFindingCode::CountersMismatch => "flow.counters_mismatch",
            FlowFindingCode::StatusPollLate => "flow.status_poll_late",
            FlowFindingCode::NoStatusAfterSetPolicy => "flow.no_status_after_set_policy",
            FlowFindingCode::ServerShouldHaveFailed => "flow.server_should_have_failed",
            FlowFindingCode::ServerWronglyFailed => "flow.server_wrongly_failed",
            FlowFindingCode::ServerWrongError => "flow.server_wrong_error",
            FlowFindingCode::ServerStateMismatch => "flow.server_state_mismatch",
            FlowFindingCode::ServerQosUnsupported => "flow.server_qos_unsupported",
            FlowFindingCode::RequestUnanswered => "flow.request_unanswered",
            FlowFindingCode::MultipleInitiators => "flow.multiple_initiators",
            FlowFindingCode::MemoryBound => "flow.memory_bound",
        }
    }

    /// Position in `ALL` (for per-code counters).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One finding. Findings that repeat over consecutive intervals are one finding with
/// `occurrences` > 1 and the frame of the last one in `last_frame`.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowFinding {
    pub code: FlowFindingCode,
    pub severity: Severity,
    pub message: String,
    pub frame: u64,
    pub time: Timestamp,
    pub occurrences: u32,
    pub last_frame: u64,
}

impl FlowFinding {
    pub fn new(
        code: FlowFindingCode,
        severity: Severity,
        message: String,
        frame: u64,
        time: Timestamp,
    ) -> Self {
        FlowFinding {
            code,
            severity,
            message,
            frame,
            time,
            occurrences: 1,
            last_frame: frame,
        }
    }
}
