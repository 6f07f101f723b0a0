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
    pub const fn version(self) -> ProtocolVersion {
        match self {
            Dialect::V1_0 => ProtocolVersion(0x0100),
            Dialect::V1_1 => ProtocolVersion(0x0101),
        }
    }
    /// "1.0" / "1.1", as the spec writes the dialects.
    pub const fn as_str(self) -> &'static str {
        match self {
            Dialect::V1_0 => "1.0",
            Dialect::V1_1 => "1.1",
        }
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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

    /// The defined flags in bit order, with their names (without the STORAGE_QOS_CONTROL_FLAG_
    /// prefix).
    pub const FLAGS: [(Options, &'static str); 5] = [
        (Options::SET_LOGICAL_FLOW_ID, "SET_LOGICAL_FLOW_ID"),
        (Options::SET_POLICY, "SET_POLICY"),
        (Options::PROBE_POLICY, "PROBE_POLICY"),
        (Options::GET_STATUS, "GET_STATUS"),
        (Options::UPDATE_COUNTERS, "UPDATE_COUNTERS"),
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
        Self::FLAGS
            .iter()
            .filter(|(flag, _)| self.contains(*flag))
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

    /// The statuses the spec defines, with their names.
    const NAMED: [(Status, &'static str); 5] = [
        (Status::OK, "StorageQoSStatusOk"),
        (
            Status::INSUFFICIENT_THROUGHPUT,
            "StorageQoSStatusInsufficientThroughput",
        ),
        (Status::UNKNOWN_POLICY_ID, "StorageQoSUnknownPolicyId"),
        (
            Status::CONFIGURATION_MISMATCH,
            "StorageQoSStatusConfigurationMismatch",
        ),
        (Status::NOT_AVAILABLE, "StorageQoSStatusNotAvailable"),
    ];

    /// Every status the spec defines, in value order.
    pub fn known() -> impl Iterator<Item = Status> {
        Status::NAMED.into_iter().map(|(s, _)| s)
    }

    /// The spec's name of a known status, `None` for values the spec does not define.
    pub fn name(self) -> Option<&'static str> {
        Status::NAMED
            .iter()
            .find(|(s, _)| *s == self)
            .map(|&(_, n)| n)
    }

    /// The name without its `StorageQoSStatus` / `StorageQoS` prefix ("InsufficientThroughput").
    pub fn short_name(self) -> Option<&'static str> {
        self.name().map(|n| {
            n.trim_start_matches("StorageQoSStatus")
                .trim_start_matches("StorageQoS")
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

impl Request {
    /// A request of `dialect` with every field zero (section 3.1.4.1: "All fields ... SHOULD
    /// initially be set to zero"), no names, and the 1.1 fields present for dialect 1.1.
    pub fn new(dialect: Dialect) -> Request {
        Request {
            protocol_version: dialect.version(),
            reserved: 0,
            options: Options(0),
            logical_flow_id: Uuid::nil(),
            policy_id: Uuid::nil(),
            initiator_id: Uuid::nil(),
            limit: 0,
            reservation: 0,
            initiator_name_offset: 0,
            initiator_name_length: 0,
            initiator_node_name_offset: 0,
            initiator_node_name_length: 0,
            io_count_increment: 0,
            normalized_io_count_increment: 0,
            latency_increment: 0,
            lower_latency_increment: 0,
            v1_1: match dialect {
                Dialect::V1_0 => None,
                Dialect::V1_1 => Some(RequestV11::default()),
            },
            initiator_name: None,
            initiator_node_name: None,
        }
    }

    /// The dialect named by ProtocolVersion, `None` for an unknown version.
    pub fn dialect(&self) -> Option<Dialect> {
        self.protocol_version.dialect()
    }

    /// Length of the fixed part as the encoder writes it: 128 bytes when the 1.1 fields are
    /// present, else 112.
    pub fn encoded_fixed_len(&self) -> usize {
        match self.v1_1 {
            Some(_) => Dialect::V1_1.request_fixed_len(),
            None => Dialect::V1_0.request_fixed_len(),
        }
    }

    /// Sets InitiatorName and InitiatorNodeName, placed one after the other right after the
    /// fixed part (as Windows and the spec's example bytes do), with their offsets and lengths.
    /// An empty string means "no name" (offset and length 0). Names too long for the 16-bit
    /// offset/length fields are cut at a character boundary so the result stays encodable.
    pub fn with_names(mut self, name: &str, node: &str) -> Request {
        let fixed = self.encoded_fixed_len();
        let room = usize::from(u16::MAX).saturating_sub(fixed);
        let (name, name_len) = utf16_prefix(name, room);
        let (node, node_len) = utf16_prefix(node, usize::from(u16::MAX));
        let name_off = if name_len > 0 { fixed } else { 0 };
        let node_off = if node_len > 0 {
            fixed + usize::from(name_len)
        } else {
            0
        };
        // Both offsets are at most u16::MAX by construction of `room`.
        self.initiator_name_offset = u16::try_from(name_off).unwrap_or(0);
        self.initiator_name_length = name_len;
        self.initiator_node_name_offset = u16::try_from(node_off).unwrap_or(0);
        self.initiator_node_name_length = node_len;
        self.initiator_name = name;
        self.initiator_node_name = node;
        self
    }
}

/// The longest prefix of `s` whose UTF-16 encoding fits in `max_bytes` (and in a u16), as the
/// kept string and its byte length; `None` for an empty result.
fn utf16_prefix(s: &str, max_bytes: usize) -> (Option<String>, u16) {
    let max_bytes = max_bytes.min(usize::from(u16::MAX));
    let mut bytes = 0usize;
    let mut kept = String::new();
    for c in s.chars() {
        let n = c.len_utf16() * 2;
        if bytes + n > max_bytes {
            break;
        }
        bytes += n;
        kept.push(c);
    }
    if kept.is_empty() {
        (None, 0)
    } else {
        (Some(kept), u16::try_from(bytes).unwrap_or(0))
    }
}

impl Response {
    /// A response of `dialect` with every field zero except ProtocolVersion and BaseIoSize,
    /// which is 8192 (the value Windows always sends, note <9>, and the client's initial value,
    /// section 3.1.3). TimeToLive stays 0: the caller has to choose one.
    pub fn new(dialect: Dialect) -> Response {
        Response {
            protocol_version: dialect.version(),
            reserved: 0,
            options: 0,
            logical_flow_id: Uuid::nil(),
            policy_id: Uuid::nil(),
            initiator_id: Uuid::nil(),
            time_to_live: 0,
            status: Status::OK,
            maximum_io_rate: 0,
            minimum_io_rate: 0,
            base_io_size: DEFAULT_BASE_IO_SIZE,
            reserved2: 0,
            maximum_bandwidth: match dialect {
                Dialect::V1_0 => None,
                Dialect::V1_1 => Some(0),
            },
        }
    }

    /// The dialect named by ProtocolVersion, `None` for an unknown version.
    pub fn dialect(&self) -> Option<Dialect> {
        self.protocol_version.dialect()
    }

    /// Length as the encoder writes it: 96 bytes when MaximumBandwidth is present, else 88.
    pub fn encoded_len(&self) -> usize {
        match self.maximum_bandwidth {
            Some(_) => Dialect::V1_1.response_len(),
            None => Dialect::V1_0.response_len(),
        }
    }
}

/// BaseIoSize of every Windows server (note <9>) and initial value on the client (section 3.1.3).
pub const DEFAULT_BASE_IO_SIZE: u32 = 8192;

/// Section 4.1: NormalizedIoSize = (IoSizeInBytes + BaseIoSize - 1) / BaseIoSize, computed
/// without overflow. `None` when BaseIoSize is 0 (the formula is undefined).
pub fn normalized_io_size(io_size_in_bytes: u64, base_io_size: u32) -> Option<u64> {
    if base_io_size == 0 {
        return None;
    }
    Some(io_size_in_bytes.div_ceil(u64::from(base_io_size)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_io_size_matches_section_4_1_table() {
        // Section 4.1 table, BaseIoSize 8192.
        let table = [
            (512, 1),
            (4096, 1),
            (8192, 1),
            (12288, 2),
            (16384, 2),
            (65536, 8),
            (1_048_576, 128),
        ];
        for (bytes, normalized) in table {
            assert_eq!(normalized_io_size(bytes, 8192), Some(normalized), "{bytes}");
        }
        assert_eq!(normalized_io_size(0, 8192), Some(0));
        assert_eq!(normalized_io_size(u64::MAX, 1), Some(u64::MAX));
        assert_eq!(normalized_io_size(u64::MAX, 2), Some(u64::MAX / 2 + 1));
        assert_eq!(normalized_io_size(100, 0), None);
    }

    #[test]
    fn with_names_places_names_after_fixed_part() {
        let r = Request::new(Dialect::V1_1).with_names("TEST-VM", "node");
        assert_eq!(r.initiator_name_offset, 128);
        assert_eq!(r.initiator_name_length, 14);
        assert_eq!(r.initiator_node_name_offset, 142);
        assert_eq!(r.initiator_node_name_length, 8);
        assert_eq!(r.initiator_name.as_deref(), Some("TEST-VM"));

        let r = Request::new(Dialect::V1_0).with_names("", "n\u{1F600}");
        assert_eq!((r.initiator_name_offset, r.initiator_name_length), (0, 0));
        assert_eq!(r.initiator_name, None);
        assert_eq!(r.initiator_node_name_offset, 112);
        // 'n' is one UTF-16 unit, the emoji a surrogate pair.
        assert_eq!(r.initiator_node_name_length, 6);
    }

    #[test]
    fn with_names_cuts_overlong_names_at_char_boundary() {
        let long = "\u{1F600}".repeat(20_000); // 80,000 bytes of UTF-16
        let r = Request::new(Dialect::V1_0).with_names(&long, &long);
        // 65535 - 112 = 65423 bytes of room, 4 bytes per char: 16355 chars.
        assert_eq!(r.initiator_name_length, 65420);
        assert_eq!(r.initiator_node_name_offset, 112 + 65420);
        assert_eq!(r.initiator_node_name_length, 65532);
        assert_eq!(
            r.initiator_name.as_deref().map(|s| s.chars().count()),
            Some(16355)
        );
    }
}
