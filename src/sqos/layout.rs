//! Byte layout of the two structures, and the numbers where the spec's text disagrees with it.
//!
//! Decision (docs/sqos-codec.md has the full write-up): offsets are summed from the field lists of
//! sections 2.2.2.2 / 2.2.2.3, which is also what Microsoft's protocol test suite and Wireshark
//! do. The text's "104" (minimum name offset) and "80" (response size), and the section 4.3
//! example's order of MaximumBandwidth / BaseIoSize, are kept only to explain findings.

/// Request: offsets of the fixed fields (both dialects share the first 112 bytes).
pub mod request {
    pub const PROTOCOL_VERSION: usize = 0;
    pub const RESERVED: usize = 2;
    pub const OPTIONS: usize = 4;
    pub const LOGICAL_FLOW_ID: usize = 8;
    pub const POLICY_ID: usize = 24;
    pub const INITIATOR_ID: usize = 40;
    pub const LIMIT: usize = 56;
    pub const RESERVATION: usize = 64;
    pub const INITIATOR_NAME_OFFSET: usize = 72;
    pub const INITIATOR_NAME_LENGTH: usize = 74;
    pub const INITIATOR_NODE_NAME_OFFSET: usize = 76;
    pub const INITIATOR_NODE_NAME_LENGTH: usize = 78;
    pub const IO_COUNT_INCREMENT: usize = 80;
    pub const NORMALIZED_IO_COUNT_INCREMENT: usize = 88;
    pub const LATENCY_INCREMENT: usize = 96;
    pub const LOWER_LATENCY_INCREMENT: usize = 104;
    /// Dialect 1.1 only.
    pub const BANDWIDTH_LIMIT: usize = 112;
    /// Dialect 1.1 only.
    pub const KILOBYTE_COUNT_INCREMENT: usize = 120;
    pub const FIXED_LEN_V1_0: usize = 112;
    pub const FIXED_LEN_V1_1: usize = 128;
}

/// Response: offsets of the fields.
pub mod response {
    pub const PROTOCOL_VERSION: usize = 0;
    pub const RESERVED: usize = 2;
    pub const OPTIONS: usize = 4;
    pub const LOGICAL_FLOW_ID: usize = 8;
    pub const POLICY_ID: usize = 24;
    pub const INITIATOR_ID: usize = 40;
    pub const TIME_TO_LIVE: usize = 56;
    pub const STATUS: usize = 60;
    pub const MAXIMUM_IO_RATE: usize = 64;
    pub const MINIMUM_IO_RATE: usize = 72;
    pub const BASE_IO_SIZE: usize = 80;
    pub const RESERVED2: usize = 84;
    /// Dialect 1.1 only; the section 4.3 example has it at 80 instead.
    pub const MAXIMUM_BANDWIDTH: usize = 88;
    pub const LEN_V1_0: usize = 88;
    pub const LEN_V1_1: usize = 96;
}

/// The spec text's minimum InitiatorName/InitiatorNodeName offset (section 3.2.5.1.2), which is
/// inside the 112/128-byte fixed part. Used only in finding messages.
pub const SPEC_TEXT_MIN_NAME_OFFSET: usize = 104;

/// The spec text's "size of STORAGE_QOS_CONTROL_RESPONSE" (sections 3.1.4.1, 3.2.5.1.4), smaller
/// than either real response. Used only in finding messages.
pub const SPEC_TEXT_RESPONSE_SIZE: usize = 80;

/// Limit on Limit / Reservation / BandwidthLimit from product note <8> (<4> in revision 1.0).
pub const MAX_POLICY_PARAMETER: u64 = 1_000_000_000;
