//! Findings ("expert info") about one SQOS message: a stable code, a severity and a sentence.
//!
//! The codes are a public contract (Wireshark plugin, `sqos check`, JSON output): a code's
//! string and its severity never change once released; new kinds get new codes. Every code is
//! listed with its meaning in docs/sqos-codec.md (a test keeps the two in step).

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Note,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// Stable identifier of a finding kind; `as_str` is the code users filter on and must never change.
///
/// Each code has exactly one severity (`severity()`), like a Wireshark expert field:
/// - error: the buffer is malformed, or it breaks a rule on which the receiver MUST fail the request;
/// - warning: it breaks a MUST/SHOULD of the spec, but the receiver can still go on;
/// - note: the decoder made a choice worth knowing about, or something is unusual but legal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "&'static str")]
pub enum FindingCode {
    // --- structure (both messages) ---
    /// The buffer ends before the fixed part of its dialect.
    ShortBuffer,
    /// ProtocolVersion is neither 0x0100 nor 0x0101.
    UnknownVersion,
    /// Bytes after the end of the structure (fixed part and names).
    TrailingBytes,
    /// A Reserved field is not zero.
    ReservedNonZero,
    // --- request: Options ---
    /// Options has none of the defined flags: the server MUST fail the request.
    OptionsNone,
    /// Options has bits the spec does not define.
    OptionsUnknownBits,
    /// PROBE_POLICY with a NULL LogicalFlowID: the server MUST fail the request.
    ProbeNullFlowId,
    // --- request: names ---
    /// A name's length is above STORAGE_QOS_INITIATOR_NAME_SIZE (0x200).
    NameTooLong,
    /// A name's length is odd, which UTF-16 cannot be.
    NameLengthOdd,
    /// A name's offset points inside the fixed part of the structure.
    NameOffsetInFixedPart,
    /// A name's offset + length runs past the end of the buffer.
    NameOutOfBounds,
    /// A name's bytes are not valid UTF-16LE (unpaired surrogate).
    NameInvalidUtf16,
    /// A name ends with a NUL character although names MUST NOT be null-terminated.
    NameNullTerminated,
    /// The names' offsets point into the fixed part, as in the spec's section 4.2 example, but
    /// the bytes right after the fixed part read as valid names.
    NameLayoutSpecExample,
    // --- request: server parameter rules (3.2.5.1.2 and product note <8>) ---
    /// Limit, Reservation or BandwidthLimit above 1,000,000,000.
    ParamTooLarge,
    /// Reservation above a non-zero Limit.
    ReservationAboveLimit,
    /// Limit, Reservation or BandwidthLimit non-zero together with a non-NULL PolicyID.
    ParamWithPolicyId,
    /// GET_STATUS with a MaxOutputResponse too small for the response.
    MaxOutputTooSmall,
    // --- response ---
    /// Response Options is not zero.
    ResponseOptionsNonZero,
    /// TimeToLive is zero although it MUST be positive.
    TimeToLiveZero,
    /// Status is none of the values of section 2.2.2.1.
    UnknownStatus,
    /// BaseIoSize is zero, which makes the normalized I/O size formula divide by zero.
    BaseIoSizeZero,
    /// A 1.1 response whose bytes look like the spec's section 4.3 example layout
    /// (MaximumBandwidth at 80, BaseIoSize at 88) rather than the structure's.
    ResponseLayoutSpecExample,
    // --- response checked against its request ---
    /// The response's ProtocolVersion differs from the request's.
    ResponseVersionMismatch,
    /// The response's LogicalFlowID differs from the one the request set.
    ResponseFlowIdMismatch,
    /// The response's PolicyID / InitiatorID differ from those a SET_POLICY request set.
    ResponsePolicyMismatch,
    /// A response buffer for a request without GET_STATUS.
    ResponseWithoutGetStatus,
}

impl FindingCode {
    /// Every code, in documentation order.
    pub const ALL: [FindingCode; 27] = [
        FindingCode::ShortBuffer,
        FindingCode::UnknownVersion,
        FindingCode::TrailingBytes,
        FindingCode::ReservedNonZero,
        FindingCode::OptionsNone,
        FindingCode::OptionsUnknownBits,
        FindingCode::ProbeNullFlowId,
        FindingCode::NameTooLong,
        FindingCode::NameLengthOdd,
        FindingCode::NameOffsetInFixedPart,
        FindingCode::NameOutOfBounds,
        FindingCode::NameInvalidUtf16,
        FindingCode::NameNullTerminated,
        FindingCode::NameLayoutSpecExample,
        FindingCode::ParamTooLarge,
        FindingCode::ReservationAboveLimit,
        FindingCode::ParamWithPolicyId,
        FindingCode::MaxOutputTooSmall,
        FindingCode::ResponseOptionsNonZero,
        FindingCode::TimeToLiveZero,
        FindingCode::UnknownStatus,
        FindingCode::BaseIoSizeZero,
        FindingCode::ResponseLayoutSpecExample,
        FindingCode::ResponseVersionMismatch,
        FindingCode::ResponseFlowIdMismatch,
        FindingCode::ResponsePolicyMismatch,
        FindingCode::ResponseWithoutGetStatus,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FindingCode::ShortBuffer => "sqos.short_buffer",
            FindingCode::UnknownVersion => "sqos.unknown_version",
            FindingCode::TrailingBytes => "sqos.trailing_bytes",
            FindingCode::ReservedNonZero => "sqos.reserved_nonzero",
            FindingCode::OptionsNone => "sqos.options_none",
            FindingCode::OptionsUnknownBits => "sqos.options_unknown_bits",
            FindingCode::ProbeNullFlowId => "sqos.probe_null_flow_id",
            FindingCode::NameTooLong => "sqos.name_too_long",
            FindingCode::NameLengthOdd => "sqos.name_length_odd",
            FindingCode::NameOffsetInFixedPart => "sqos.name_offset_in_fixed_part",
            FindingCode::NameOutOfBounds => "sqos.name_out_of_bounds",
            FindingCode::NameInvalidUtf16 => "sqos.name_invalid_utf16",
            FindingCode::NameNullTerminated => "sqos.name_null_terminated",
            FindingCode::NameLayoutSpecExample => "sqos.name_layout_spec_example",
            FindingCode::ParamTooLarge => "sqos.param_too_large",
            FindingCode::ReservationAboveLimit => "sqos.reservation_above_limit",
            FindingCode::ParamWithPolicyId => "sqos.param_with_policy_id",
            FindingCode::MaxOutputTooSmall => "sqos.max_output_too_small",
            FindingCode::ResponseOptionsNonZero => "sqos.response_options_nonzero",
            FindingCode::TimeToLiveZero => "sqos.ttl_zero",
            FindingCode::UnknownStatus => "sqos.unknown_status",
            FindingCode::BaseIoSizeZero => "sqos.base_io_size_zero",
            FindingCode::ResponseLayoutSpecExample => "sqos.response_layout_spec_example",
            FindingCode::ResponseVersionMismatch => "sqos.response_version_mismatch",
            FindingCode::ResponseFlowIdMismatch => "sqos.response_flow_id_mismatch",
            FindingCode::ResponsePolicyMismatch => "sqos.response_policy_mismatch",
            FindingCode::ResponseWithoutGetStatus => "sqos.response_without_get_status",
        }
    }

    /// The one severity of this kind of finding.
    pub fn severity(self) -> Severity {
        use FindingCode::*;
        match self {
            ShortBuffer
            | UnknownVersion
            | OptionsNone
            | ProbeNullFlowId
            | NameTooLong
            | NameLengthOdd
            | NameOffsetInFixedPart
            | NameOutOfBounds
            | NameInvalidUtf16
            | ParamTooLarge
            | ReservationAboveLimit
            | ParamWithPolicyId
            | MaxOutputTooSmall => Severity::Error,
            ReservedNonZero
            | OptionsUnknownBits
            | NameNullTerminated
            | ResponseOptionsNonZero
            | TimeToLiveZero
            | UnknownStatus
            | BaseIoSizeZero
            | ResponseLayoutSpecExample
            | ResponseVersionMismatch
            | ResponseFlowIdMismatch
            | ResponsePolicyMismatch
            | ResponseWithoutGetStatus => Severity::Warning,
            TrailingBytes | NameLayoutSpecExample => Severity::Note,
        }
    }

    /// The code for a string produced by `as_str`.
    pub fn from_code(s: &str) -> Option<FindingCode> {
        FindingCode::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl From<FindingCode> for &'static str {
    fn from(c: FindingCode) -> &'static str {
        c.as_str()
    }
}

impl std::fmt::Display for FindingCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: FindingCode,
    pub severity: Severity,
    /// A human sentence naming the field and the values.
    pub message: String,
}

impl Finding {
    /// A finding with the code's own severity.
    pub fn new(code: FindingCode, message: impl Into<String>) -> Finding {
        Finding {
            code,
            severity: code.severity(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for c in FindingCode::ALL {
            assert!(seen.insert(c.as_str()), "duplicate {}", c.as_str());
            assert_eq!(FindingCode::from_code(c.as_str()), Some(c));
            assert!(c.as_str().starts_with("sqos."));
        }
        assert_eq!(seen.len(), FindingCode::ALL.len());
    }

    #[test]
    fn serializes_as_code_string() {
        let f = Finding::new(FindingCode::TimeToLiveZero, "TimeToLive is 0");
        let j = serde_json::to_value(&f).unwrap_or_default();
        assert_eq!(j["code"], "sqos.ttl_zero");
        assert_eq!(j["severity"], "warning");
    }
}
