//! Typed values of the MS-SQOS structures (section 2.2).

use serde::Serialize;
use uuid::Uuid;

/// Control code of the IOCTL that carries MS-SQOS (section 2.2.1).
pub const FSCTL_STORAGE_QOS_CONTROL: u32 = 0x0009_0350;
/// Maximum length in bytes of InitiatorName / InitiatorNodeName (section 2.2.1).
pub const STORAGE_QOS_INITIATOR_NAME_SIZE: u16 = 0x200;

/// The ProtocolVersion field as found on the wire; unknown values are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct ProtocolVersion(pub u16);

/// The two dialects the spec defines (section 1.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Dialect {
    #[serde(rename = "1.0")]
    V1_0,
    #[serde(rename = "1.1")]
    V1_1,
}

impl Dialect {
    /// Size of the fixed part of STORAGE_QOS_CONTROL_REQUEST, summed from the field list.
    pub const fn request_fixed_len(self) -> usize {
        match self {
            Dialect::V1_0 => 112,
            Dialect::V1_1 => 128,
        }
    }
    /// Size of STORAGE_QOS_CONTROL_RESPONSE, summed from the field list.
    pub const fn response_len(self) -> usize {
        match self {
            Dialect::V1_0 => 88,
            Dialect::V1_1 => 96,
        }
    }
    pub const fn version(self) -> ProtocolVersion {
        match self {
            Dialect::V1_0 => ProtocolVersion(0x0100),
            Dialect::V1_1 => ProtocolVersion(0x0101),
        }
    }
}

impl ProtocolVersion {
    pub const V1_0: ProtocolVersion = ProtocolVersion(0x0100);
    pub const V1_1: ProtocolVersion = ProtocolVersion(0x0101);
    pub fn dialect(self) -> Option<Dialect> {
        match self.0 {
            0x0100 => Some(Dialect::V1_0),
            0x0101 => Some(Dialect::V1_1),
            _ => None,
        }
    }
}

/// Request Options bitmap (section 2.2.2.2). Unknown bits are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Options(pub u32);

impl Options {
    pub const SET_LOGICAL_FLOW_ID: Options = Options(0x01);
    pub const SET_POLICY: Options = Options(0x02);
    pub const PROBE_POLICY: Options = Options(0x04);
    pub const GET_STATUS: Options = Options(0x08);
    pub const UPDATE_COUNTERS: Options = Options(0x10);
    pub const KNOWN: Options = Options(0x1F);

    const NAMES: [(u32, &'static str); 5] = [
        (0x01, "SET_LOGICAL_FLOW_ID"),
        (0x02, "SET_POLICY"),
        (0x04, "PROBE_POLICY"),
        (0x08, "GET_STATUS"),
        (0x10, "UPDATE_COUNTERS"),
    ];

    pub const fn bits(self) -> u32 {
        self.0
    }
    pub const fn contains(self, other: Options) -> bool {
        self.0 & other.0 == other.0
    }
    pub const fn union(self, other: Options) -> Options {
        Options(self.0 | other.0)
    }
    /// Bits set that the spec does not define.
    pub const fn unknown_bits(self) -> u32 {
        self.0 & !Self::KNOWN.0
    }
    /// Names of the known flags that are set, in bit order (without the STORAGE_QOS_CONTROL_FLAG_ prefix).
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(bit, _)| self.0 & bit != 0)
            .map(|&(_, name)| name)
            .collect()
    }
}

impl std::ops::BitOr for Options {
    type Output = Options;
    fn bitor(self, rhs: Options) -> Options {
        self.union(rhs)
    }
}

/// Logical flow status (section 2.2.2.1). Unknown values are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Status(pub u32);

impl Status {
    pub const OK: Status = Status(0);
    pub const INSUFFICIENT_THROUGHPUT: Status = Status(1);
    pub const UNKNOWN_POLICY_ID: Status = Status(2);
    pub const CONFIGURATION_MISMATCH: Status = Status(4);
    pub const NOT_AVAILABLE: Status = Status(5);

    /// The spec's name of a known status, `None` for values the spec does not define.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "StorageQoSStatusOk",
            1 => "StorageQoSStatusInsufficientThroughput",
            2 => "StorageQoSUnknownPolicyId",
            4 => "StorageQoSStatusConfigurationMismatch",
            5 => "StorageQoSStatusNotAvailable",
            _ => return None,
        })
    }
}

/// STORAGE_QOS_CONTROL_REQUEST (section 2.2.2.2), every wire field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Request {
    pub protocol_version: ProtocolVersion,
    pub reserved: u16,
    pub options: Options,
    pub logical_flow_id: Uuid,
    pub policy_id: Uuid,
    pub initiator_id: Uuid,
    pub limit: u64,
    pub reservation: u64,
    pub initiator_name_offset: u16,
    pub initiator_name_length: u16,
    pub initiator_node_name_offset: u16,
    pub initiator_node_name_length: u16,
    pub io_count_increment: u64,
    pub normalized_io_count_increment: u64,
    pub latency_increment: u64,
    pub lower_latency_increment: u64,
    /// Present only in dialect 1.1 (fixed part of 128 bytes).
    pub v1_1: Option<RequestV11>,
    /// Decoded InitiatorName, `None` when its length is 0 or it could not be located/decoded.
    pub initiator_name: Option<String>,
    /// Decoded InitiatorNodeName, `None` when its length is 0 or it could not be located/decoded.
    pub initiator_node_name: Option<String>,
}

/// The fields dialect 1.1 appends to the request's fixed part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RequestV11 {
    pub bandwidth_limit: u64,
    pub kilobyte_count_increment: u64,
}

/// STORAGE_QOS_CONTROL_RESPONSE (section 2.2.2.3), every wire field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Response {
    pub protocol_version: ProtocolVersion,
    pub reserved: u16,
    pub options: u32,
    pub logical_flow_id: Uuid,
    pub policy_id: Uuid,
    pub initiator_id: Uuid,
    pub time_to_live: u32,
    pub status: Status,
    pub maximum_io_rate: u64,
    pub minimum_io_rate: u64,
    pub base_io_size: u32,
    pub reserved2: u32,
    /// Present only in dialect 1.1, at offset 88 (structure layout, not the section 4.3 example).
    pub maximum_bandwidth: Option<u64>,
}
