//! The generator's ground truth (`--truth FILE`): what it sent and why, frame by frame, so
//! tests and the flow analysis can compare what they derive from the capture with it.

use serde::Serialize;
use uuid::Uuid;

use crate::sqos::Dialect;

use super::scenario::{CounterReporting, DropKind, PolicySpec};
use super::server::ServerFault;

/// How I/O is assigned to update intervals; also written into the truth file.
pub const INTERVAL_RULE: &str = "An I/O (READ or WRITE) is counted in the first UPDATE_COUNTERS request of its logical flow whose first frame comes after the frame that completed the I/O's response; I/O still outstanding when an update is sent is counted in a later one. The sums over the I/Os listed with an update are its `actual` increments; an honest client (host `counters` \"honest\") sends exactly these.";

/// How latencies are measured; also written into the truth file.
pub const LATENCY_RULE: &str = "LowerLatencyIncrement sums, per I/O, the time from the frame that completed the request to the frame that completed the response (capture clock, client side, in 100 ns). LatencyIncrement adds the time the I/O waited in the client's queue (throttling, queue depth) before its request was sent, which the capture cannot show. NormalizedIoCountIncrement uses section 4.1 with the flow's BaseIoSize; KilobyteCountIncrement (1.1) is bytes / 1024, all sizes being multiples of 4 KiB.";

#[derive(Clone, Debug, Default, Serialize)]
pub struct Truth {
    pub generator: GeneratorInfo,
    pub interval_rule: &'static str,
    pub latency_rule: &'static str,
    pub capture: CaptureInfo,
    pub hosts: Vec<HostTruth>,
    pub flows: Vec<FlowTruth>,
    pub messages: Vec<MessageTruth>,
    /// Server bugs injected (`faulty-server`), in the order of their requests.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultTruth>,
    pub totals: Totals,
}

impl Truth {
    /// An empty truth that states its rules.
    pub fn new() -> Truth {
        Truth {
            interval_rule: INTERVAL_RULE,
            latency_rule: LATENCY_RULE,
            ..Truth::default()
        }
    }

    /// The truth of a capture written by one session (spec examples, `large`): its frames and
    /// bytes, starting at the simulation's epoch.
    pub fn of_session_capture(frames: u64, file_bytes: u64) -> Truth {
        let mut t = Truth::new();
        t.capture.frames = frames;
        t.capture.file_bytes = file_bytes;
        t.capture.start_time = secs(super::scenario::EPOCH_US);
        t
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct GeneratorInfo {
    pub scenario: String,
    pub seed: u64,
    pub command: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CaptureInfo {
    pub frames: u64,
    pub file_bytes: u64,
    pub start_time: f64,
    pub duration_s: f64,
    /// Frames before this time were not written (mid-connection start).
    pub capture_from: Option<f64>,
    pub retransmissions: u64,
    pub reordered_segments: u64,
    pub missing_segments: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct HostTruth {
    pub name: String,
    pub address: String,
    pub smb_dialect: String,
    pub sqos_dialect: Dialect,
    pub obeys_limits: bool,
    /// Throttles to MaximumBandwidth too (else to MaximumIoRate only).
    pub throttles_bandwidth: bool,
    /// What its UPDATE_COUNTERS report ("honest", or "reads-only": WRITEs left out).
    pub counters: CounterReporting,
    pub poll_factor: u32,
    /// The channels of its session (SMB3 multichannel), the first where it was set up.
    pub channels: Vec<ChannelTruth>,
}

/// One channel of a host's session: a TCP connection over a pair of NICs.
#[derive(Clone, Debug, Serialize)]
pub struct ChannelTruth {
    /// `ip:port` of the host's and the server's end.
    pub client: String,
    pub server: String,
    /// "setup" (the session was set up on it) or "binding" (SESSION_SETUP with the binding
    /// flag).
    pub joined: &'static str,
    /// How and when it failed, and when the client noticed (then sent what was outstanding
    /// on it again on its other channels).
    pub dropped: Option<DropKind>,
    pub dropped_time: Option<f64>,
    pub detected_time: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FlowTruth {
    pub logical_flow_id: Uuid,
    pub initiator_id: Uuid,
    pub initiator_name: String,
    pub initiator_node_name: String,
    pub host: String,
    pub dialect: Dialect,
    pub file_names: Vec<String>,
    /// The channels (`client → server`) its completed I/O and its SQOS requests in the capture
    /// went over, in order of first use.
    pub channels: Vec<String>,
    pub obeys_limits: bool,
    /// The policies the client asked for (SET_POLICY), in order.
    pub policies: Vec<PolicyTruth>,
    pub updates: Vec<UpdateTruth>,
    /// I/O completed after the last update (reported to nobody).
    pub unreported_ios: u64,
    pub totals: FlowTotals,
}

#[derive(Clone, Debug, Serialize)]
pub struct PolicyTruth {
    pub time: f64,
    pub request_frame: Option<u64>,
    #[serde(flatten)]
    pub policy: PolicySpec,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct FlowTotals {
    pub io_count: u64,
    pub normalized_io_count: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub latency_100ns: u64,
    pub lower_latency_100ns: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct UpdateTruth {
    pub request_frame: Option<u64>,
    pub request_time: f64,
    pub response_frame: Option<u64>,
    pub nt_status: u32,
    /// Time of the previous update of the flow (the interval start), if any.
    pub previous_request_time: Option<f64>,
    /// The MaximumIoRate the client was throttling to when the interval ended (0: none).
    pub maximum_io_rate_in_effect: u64,
    pub io_count_increment: u64,
    pub normalized_io_count_increment: u64,
    pub latency_increment: u64,
    pub lower_latency_increment: u64,
    pub kilobyte_count_increment: Option<u64>,
    /// What the I/O listed with this update really adds up to (equal to the increments above
    /// unless the host misreports).
    pub actual: Increments,
    pub ios: Vec<IoTruth>,
}

/// The five UPDATE_COUNTERS increments (KilobyteCount for 1.1 only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Increments {
    pub io_count: u64,
    pub normalized_io_count: u64,
    pub latency: u64,
    pub lower_latency: u64,
    pub kilobyte_count: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct IoTruth {
    pub op: &'static str,
    pub offset: u64,
    pub length: u32,
    pub normalized: u64,
    pub request_frame: Option<u64>,
    pub response_frame: Option<u64>,
    pub request_time: f64,
    pub response_time: f64,
    pub queue_delay_100ns: u64,
    pub latency_100ns: u64,
    pub lower_latency_100ns: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct MessageTruth {
    pub host: String,
    pub logical_flow_id: Option<Uuid>,
    pub file_name: Option<String>,
    /// The first of its requests in the capture (a replay's original may be lost with a
    /// silent channel).
    pub request_frame: Option<u64>,
    pub request_time: f64,
    /// The same request sent again on another channel after its channel failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replay_request_frames: Vec<u64>,
    pub response_frame: Option<u64>,
    pub response_time: Option<f64>,
    pub protocol_version: u16,
    pub options: u32,
    pub option_names: Vec<&'static str>,
    pub max_output_response: u32,
    pub nt_status: Option<u32>,
    pub nt_status_name: Option<&'static str>,
    pub response: Option<ResponseTruth>,
    pub purpose: String,
}

/// One request a server bug struck, and what the analysis should say about it.
#[derive(Clone, Debug, Serialize)]
pub struct FaultTruth {
    pub fault: ServerFault,
    /// The `sqos flows` finding code it should give, on `logical_flow_id`.
    pub finding: &'static str,
    pub what: &'static str,
    pub host: String,
    /// The flow concerned: the open's, or the one a request on an unassociated open names.
    pub logical_flow_id: Uuid,
    pub initiator_name: String,
    /// The file of the open the request was sent on.
    pub file_name: Option<String>,
    /// SMB2 MessageId of the IOCTL.
    pub message_id: u64,
    pub option_names: Vec<&'static str>,
    pub request_frame: Option<u64>,
    pub request_time: f64,
    /// `None`: never answered.
    pub response_frame: Option<u64>,
    pub response_time: Option<f64>,
    pub nt_status: Option<u32>,
    pub nt_status_name: Option<&'static str>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ResponseTruth {
    pub status: u32,
    pub time_to_live: u32,
    pub maximum_io_rate: u64,
    pub minimum_io_rate: u64,
    pub maximum_bandwidth: Option<u64>,
    pub base_io_size: u32,
}

impl From<&crate::sqos::Response> for ResponseTruth {
    fn from(r: &crate::sqos::Response) -> Self {
        ResponseTruth {
            status: r.status.0,
            time_to_live: r.time_to_live,
            maximum_io_rate: r.maximum_io_rate,
            minimum_io_rate: r.minimum_io_rate,
            maximum_bandwidth: r.maximum_bandwidth,
            base_io_size: r.base_io_size,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    pub ios: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub sqos_requests: u64,
    pub sqos_errors: u64,
    pub updates: u64,
}

/// The status's name in the crate's one NT status table, "(other)" when it has none.
pub fn nt_status_name(s: u32) -> &'static str {
    crate::smb2::NtStatus(s).name().unwrap_or("(other)")
}

/// Seconds (with µs) of a capture time in µs.
pub fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}
