//! One malformed or suspicious message per finding code (and the near misses that must stay
//! quiet), built with the encoder or by hand.

use sqos::sqos::{
    check_max_output, check_response_against_request, encode_request, encode_response,
    parse_request, parse_response, DecodeError, Dialect, Dissection, FieldValue, FindingCode,
    Options, ProtocolVersion, Request, RequestV11, Response, Severity, Status,
};
use uuid::Uuid;

const FLOW: Uuid = Uuid::from_u128(0xb13a32e4_e2ad_5db2_a4f8_5cd3be9d696e);
const POLICY: Uuid = Uuid::from_u128(0x04b4f24e_b3e9_4594_adaa_e327528de54b);

fn codes<T>(d: &Dissection<T>) -> Vec<FindingCode> {
    d.findings.iter().map(|f| f.code).collect()
}

/// A request no rule objects to.
fn good_request(dialect: Dialect) -> Request {
    let mut r = Request::new(dialect);
    r.options = Options::SET_LOGICAL_FLOW_ID | Options::GET_STATUS;
    r.logical_flow_id = FLOW;
    r
}

/// A response no rule objects to.
fn good_response(dialect: Dialect) -> Response {
    let mut r = Response::new(dialect);
    r.logical_flow_id = FLOW;
    r.time_to_live = 10_000;
    if dialect == Dialect::V1_1 {
        r.maximum_bandwidth = Some(8192);
    }
    r
}

fn req_findings(r: &Request) -> Vec<FindingCode> {
    codes(&parse_request(&encode_request(r)))
}

fn resp_findings(r: &Response) -> Vec<FindingCode> {
    codes(&parse_response(&encode_response(r)))
}

#[test]
fn good_messages_have_no_findings() {
    for d in [Dialect::V1_0, Dialect::V1_1] {
        assert_eq!(req_findings(&good_request(d)), vec![]);
        assert_eq!(resp_findings(&good_response(d)), vec![]);
        let named = good_request(d).with_names("vm-01", "host.example");
        assert_eq!(req_findings(&named), vec![]);
    }
}

#[test]
fn short_buffers_keep_the_fields_read() {
    let d = parse_request(&[]);
    assert_eq!(
        d.error,
        Some(DecodeError::Short {
            len: 0,
            needed: 112
        })
    );
    assert_eq!(
        (d.fields.len(), codes(&d)),
        (0, vec![FindingCode::ShortBuffer])
    );

    // Only the version: its dialect decides the length needed.
    let d = parse_request(&[0x01, 0x01, 0x00]);
    assert_eq!(
        d.error,
        Some(DecodeError::Short {
            len: 3,
            needed: 128
        })
    );
    assert_eq!(d.fields.len(), 1);
    assert_eq!(
        d.fields[0].value,
        FieldValue::Version(ProtocolVersion::V1_1)
    );

    // A 1.1 request cut inside KilobyteCountIncrement: the 16 fields of 1.0 and BandwidthLimit.
    let bytes = encode_request(&good_request(Dialect::V1_1));
    let d = parse_request(&bytes[..127]);
    assert_eq!(d.message, None);
    assert_eq!(
        d.error,
        Some(DecodeError::Short {
            len: 127,
            needed: 128
        })
    );
    assert_eq!(d.fields.len(), 17);
    assert_eq!(d.field("BandwidthLimit").map(|f| f.offset), Some(112));
    assert_eq!(d.field("KilobyteCountIncrement"), None);
    assert!(
        d.findings[0].message.contains("dialect 1.1 request"),
        "{}",
        d.findings[0].message
    );

    // A 1.1 response in a 1.0-sized buffer.
    let bytes = encode_response(&good_response(Dialect::V1_1));
    let d = parse_response(&bytes[..88]);
    assert_eq!(
        d.error,
        Some(DecodeError::Short {
            len: 88,
            needed: 96
        })
    );
    assert_eq!(d.fields.len(), 12);
    assert_eq!(codes(&d), vec![FindingCode::ShortBuffer]);
    assert_eq!(
        DecodeError::Short {
            len: 88,
            needed: 96
        }
        .to_string(),
        "buffer of 88 bytes is shorter than the 96-byte fixed part"
    );
}

#[test]
fn unknown_version_is_decoded_with_the_1_0_layout() {
    let mut r = good_request(Dialect::V1_1);
    r.protocol_version = ProtocolVersion(0x0200);
    // Encoded with the 1.1 fields: 16 bytes the 1.0 layout does not cover.
    let bytes = encode_request(&r);
    let d = parse_request(&bytes);
    let m = d.message.as_ref().unwrap();
    assert_eq!(m.v1_1, None);
    assert_eq!(m.logical_flow_id, FLOW);
    assert_eq!(
        codes(&d),
        vec![FindingCode::UnknownVersion, FindingCode::TrailingBytes]
    );
    assert_eq!(d.findings[0].severity, Severity::Error);
    assert!(d.findings[0].message.contains("0x0200"));
    assert!(d.findings[1]
        .message
        .contains("16 bytes after the end of the request at offset 112"));

    let mut resp = good_response(Dialect::V1_0);
    resp.protocol_version = ProtocolVersion(0x0000);
    let d = parse_response(&encode_response(&resp));
    assert_eq!(d.message.as_ref().unwrap().maximum_bandwidth, None);
    assert_eq!(codes(&d), vec![FindingCode::UnknownVersion]);
    // Too short even for the 1.0 prefix.
    let d = parse_response(&encode_response(&resp)[..40]);
    assert_eq!(
        d.error,
        Some(DecodeError::Short {
            len: 40,
            needed: 88
        })
    );
    assert_eq!(
        codes(&d),
        vec![FindingCode::ShortBuffer, FindingCode::UnknownVersion]
    );
    // The Wireshark plugin shows this text as sqos writes it (the expert item's text).
    assert_eq!(
        d.findings[0].message,
        "buffer of 40 bytes is shorter than the 88-byte fixed part of a unknown-version \
         (read as 1.0) response"
    );
}

#[test]
fn trailing_bytes_are_a_note() {
    let mut bytes = encode_request(&good_request(Dialect::V1_0).with_names("a", ""));
    bytes.extend([1, 2, 3, 4]);
    let d = parse_request(&bytes);
    assert_eq!(codes(&d), vec![FindingCode::TrailingBytes]);
    assert_eq!(d.findings[0].severity, Severity::Note);
    assert!(d.findings[0]
        .message
        .starts_with("4 bytes after the end of the request at offset 114"));

    // A 1.0 response in a 96-byte buffer.
    let mut bytes = encode_response(&good_response(Dialect::V1_0));
    bytes.extend([0; 8]);
    let d = parse_response(&bytes);
    assert_eq!(codes(&d), vec![FindingCode::TrailingBytes]);
}

#[test]
fn reserved_fields() {
    let mut r = good_request(Dialect::V1_0);
    r.reserved = 5;
    assert_eq!(req_findings(&r), vec![FindingCode::ReservedNonZero]);

    let mut resp = good_response(Dialect::V1_1);
    resp.reserved = 1;
    resp.reserved2 = 7;
    let d = parse_response(&encode_response(&resp));
    assert_eq!(
        codes(&d),
        vec![FindingCode::ReservedNonZero, FindingCode::ReservedNonZero]
    );
    assert!(d.findings[1]
        .message
        .contains("Reserved2 (offset 84) is 0x7"));
    assert_eq!(d.findings[1].severity, Severity::Warning);
}

#[test]
fn options_without_known_flags_or_with_unknown_bits() {
    let mut r = good_request(Dialect::V1_0);
    r.options = Options(0);
    assert_eq!(req_findings(&r), vec![FindingCode::OptionsNone]);
    r.options = Options(0x20);
    assert_eq!(
        req_findings(&r),
        vec![FindingCode::OptionsNone, FindingCode::OptionsUnknownBits]
    );
    r.options = Options(0x8000_0001);
    let d = parse_request(&encode_request(&r));
    assert_eq!(codes(&d), vec![FindingCode::OptionsUnknownBits]);
    assert!(d.findings[0].message.contains("undefined bits 0x80000000"));
}

#[test]
fn probe_policy_needs_a_flow_id() {
    let mut r = Request::new(Dialect::V1_1);
    r.options = Options::PROBE_POLICY;
    assert_eq!(req_findings(&r), vec![FindingCode::ProbeNullFlowId]);
    r.logical_flow_id = FLOW;
    assert_eq!(req_findings(&r), vec![]);
    // SET_LOGICAL_FLOW_ID with a NULL id is legal: it removes the association.
    r.options = Options::SET_LOGICAL_FLOW_ID;
    r.logical_flow_id = Uuid::nil();
    assert_eq!(req_findings(&r), vec![]);
}

#[test]
fn name_length_rules() {
    // 257 UTF-16 units = 514 bytes > 0x200: reported, still decoded.
    let long = "a".repeat(257);
    let r = good_request(Dialect::V1_0).with_names(&long, "");
    let d = parse_request(&encode_request(&r));
    assert_eq!(codes(&d), vec![FindingCode::NameTooLong]);
    assert!(d.findings[0].message.contains("InitiatorNameLength 514"));
    assert_eq!(d.message.unwrap().initiator_name, Some(long));
    // Exactly 0x200 is allowed.
    let r = good_request(Dialect::V1_0).with_names("", &"b".repeat(256));
    assert_eq!(req_findings(&r), vec![]);

    // Odd length: the bytes are located but not decoded.
    let mut r = good_request(Dialect::V1_1).with_names("AB", "");
    r.initiator_name_length = 3;
    let d = parse_request(&encode_request(&r));
    assert_eq!(
        codes(&d),
        vec![FindingCode::NameLengthOdd, FindingCode::TrailingBytes]
    );
    assert_eq!(d.message.as_ref().unwrap().initiator_name, None);
    let f = d.field("InitiatorName").unwrap();
    assert_eq!((f.offset, f.len, &f.value), (128, 3, &FieldValue::Bytes));
}

#[test]
fn name_offsets_inside_the_fixed_part_or_past_the_end() {
    let mut r = good_request(Dialect::V1_0).with_names("AB", "");
    r.initiator_name_offset = 50;
    let d = parse_request(&encode_request(&r));
    // The encoder keeps the fixed part intact, so the name bytes are not in the buffer.
    assert_eq!(codes(&d), vec![FindingCode::NameOffsetInFixedPart]);
    assert!(d.findings[0]
        .message
        .contains("below the spec text's minimum of 104"));
    assert_eq!(d.message.unwrap().initiator_name, None);

    // 104..112: allowed by the spec text, still inside the 1.0 fixed part.
    let mut r = good_request(Dialect::V1_0).with_names("AB", "");
    r.initiator_name_offset = 108;
    let d = parse_request(&encode_request(&r));
    assert_eq!(d.findings[0].code, FindingCode::NameOffsetInFixedPart);
    assert!(d.findings[0]
        .message
        .contains("is itself inside the fixed part"));

    let mut r = good_request(Dialect::V1_0).with_names("", "node");
    r.initiator_node_name_length = 20;
    let d = parse_request(&encode_request(&r));
    assert_eq!(codes(&d), vec![FindingCode::NameOutOfBounds]);
    assert!(d.findings[0]
        .message
        .contains("InitiatorNodeNameOffset 112 + InitiatorNodeNameLength 20 = 132 is past the end of the 120-byte buffer"));
    assert_eq!(d.field("InitiatorNodeName"), None);
}

#[test]
fn invalid_utf16_and_null_terminated_names() {
    let mut bytes = encode_request(&good_request(Dialect::V1_0));
    bytes[72..74].copy_from_slice(&112u16.to_le_bytes());
    bytes[74..76].copy_from_slice(&4u16.to_le_bytes());
    bytes.extend([0x41, 0x00, 0x00, 0xDC]); // 'A', then a lone low surrogate
    let d = parse_request(&bytes);
    assert_eq!(codes(&d), vec![FindingCode::NameInvalidUtf16]);
    assert!(d.findings[0]
        .message
        .contains("unpaired surrogate 0xDC00 at byte 114"));
    assert_eq!(
        d.field("InitiatorName").map(|f| &f.value),
        Some(&FieldValue::Bytes)
    );

    let r = good_request(Dialect::V1_0).with_names("vm\0", "");
    let d = parse_request(&encode_request(&r));
    assert_eq!(codes(&d), vec![FindingCode::NameNullTerminated]);
    assert_eq!(d.message.unwrap().initiator_name.as_deref(), Some("vm\0"));
}

#[test]
fn names_in_fixed_part_without_a_packed_reading_give_no_layout_note() {
    // Offsets inside the fixed part, and nothing after it: no alternative reading to offer.
    let mut r = good_request(Dialect::V1_0);
    r.initiator_name_offset = 104;
    r.initiator_name_length = 14;
    let d = parse_request(&encode_request(&r));
    assert_eq!(codes(&d), vec![FindingCode::NameOffsetInFixedPart]);
}

#[test]
fn server_parameter_rules_of_note_8() {
    let mut r = good_request(Dialect::V1_1);
    r.options = Options::SET_POLICY;
    r.limit = 1_000_000_000;
    assert_eq!(req_findings(&r), vec![]);
    r.limit = 1_000_000_001;
    r.v1_1 = Some(RequestV11 {
        bandwidth_limit: 2_000_000_000,
        kilobyte_count_increment: 0,
    });
    let d = parse_request(&encode_request(&r));
    assert_eq!(
        codes(&d),
        vec![FindingCode::ParamTooLarge, FindingCode::ParamTooLarge]
    );
    assert!(d.findings[0].message.starts_with("Limit 1000000001"));
    assert!(d.findings[1]
        .message
        .starts_with("BandwidthLimit 2000000000"));
    assert_eq!(d.findings[1].severity, Severity::Error);

    // Reservation above a non-zero limit; with Limit 0 there is no limit to exceed.
    r.v1_1 = Some(RequestV11::default());
    r.limit = 10;
    r.reservation = 11;
    assert_eq!(req_findings(&r), vec![FindingCode::ReservationAboveLimit]);
    r.limit = 0;
    assert_eq!(req_findings(&r), vec![]);

    // Parameters together with a PolicyID: one finding per parameter.
    r.policy_id = POLICY;
    r.reservation = 0;
    r.limit = 5;
    r.v1_1 = Some(RequestV11 {
        bandwidth_limit: 7,
        kilobyte_count_increment: 0,
    });
    let d = parse_request(&encode_request(&r));
    assert_eq!(
        codes(&d),
        vec![
            FindingCode::ParamWithPolicyId,
            FindingCode::ParamWithPolicyId
        ]
    );
    assert!(d.findings[0]
        .message
        .starts_with("Limit 5 is non-zero with PolicyID 04b4f24e"));
    assert!(d.findings[1].message.starts_with("BandwidthLimit 7"));

    // The rules apply only to SET_POLICY / PROBE_POLICY.
    r.options = Options::UPDATE_COUNTERS;
    r.limit = u64::MAX;
    assert_eq!(req_findings(&r), vec![]);
}

#[test]
fn max_output_response_for_get_status() {
    let r = good_request(Dialect::V1_0);
    let f = check_max_output(&r, 79).unwrap();
    assert_eq!(
        (f.code, f.severity),
        (FindingCode::MaxOutputTooSmall, Severity::Error)
    );
    assert!(
        f.message.contains("below even the spec text's 80"),
        "{}",
        f.message
    );
    let f = check_max_output(&r, 87).unwrap();
    assert!(
        f.message.contains("the spec text's minimum is 80"),
        "{}",
        f.message
    );
    assert_eq!(check_max_output(&r, 88), None);
    // Without GET_STATUS no response is expected.
    let mut r = r;
    r.options = Options::SET_LOGICAL_FLOW_ID;
    assert_eq!(check_max_output(&r, 0), None);
}

#[test]
fn response_value_rules() {
    let mut r = good_response(Dialect::V1_0);
    r.options = 2;
    r.time_to_live = 0;
    r.status = Status(3);
    r.base_io_size = 0;
    let d = parse_response(&encode_response(&r));
    assert_eq!(
        codes(&d),
        vec![
            FindingCode::ResponseOptionsNonZero,
            FindingCode::TimeToLiveZero,
            FindingCode::UnknownStatus,
            FindingCode::BaseIoSizeZero,
        ]
    );
    assert!(d.findings[2].message.contains("Status 0x00000003"));
    for s in [0, 1, 2, 4, 5] {
        let mut r = good_response(Dialect::V1_0);
        r.status = Status(s);
        assert_eq!(resp_findings(&r), vec![], "status {s}");
    }
}

#[test]
fn response_layout_heuristic_stays_quiet_for_plausible_values() {
    // BaseIoSize 8192 with a MaximumBandwidth of 8192 KB/s: plausible, nothing to say.
    assert_eq!(resp_findings(&good_response(Dialect::V1_1)), vec![]);
    // Implausible BaseIoSize, but the upper half of MaximumBandwidth is not zero.
    let mut r = good_response(Dialect::V1_1);
    r.base_io_size = 200;
    r.maximum_bandwidth = Some((1 << 33) | 8192);
    assert_eq!(resp_findings(&r), vec![]);
    // Implausible BaseIoSize and MaximumBandwidth 4096: the example's order fits.
    r.maximum_bandwidth = Some(4096);
    assert_eq!(
        resp_findings(&r),
        vec![FindingCode::ResponseLayoutSpecExample]
    );
    // A 1.0 response has no MaximumBandwidth, so no such reading.
    let mut r = good_response(Dialect::V1_0);
    r.base_io_size = 200;
    assert_eq!(resp_findings(&r), vec![]);
}

#[test]
fn response_against_request() {
    let req = good_request(Dialect::V1_1);
    let resp = good_response(Dialect::V1_1);
    assert_eq!(check_response_against_request(&req, &resp), vec![]);

    let mut other = resp.clone();
    other.protocol_version = ProtocolVersion::V1_0;
    other.logical_flow_id = POLICY;
    let f = check_response_against_request(&req, &other);
    let c: Vec<_> = f.iter().map(|f| f.code).collect();
    assert_eq!(
        c,
        vec![
            FindingCode::ResponseVersionMismatch,
            FindingCode::ResponseFlowIdMismatch
        ]
    );

    // PROBE_POLICY alone is ignored when the open already has a flow: no mismatch.
    let mut probe = req.clone();
    probe.options = Options::PROBE_POLICY | Options::GET_STATUS;
    let mut resp2 = resp.clone();
    resp2.logical_flow_id = POLICY;
    assert_eq!(check_response_against_request(&probe, &resp2), vec![]);

    // SET_POLICY: the response carries the policy just set.
    let mut set = req.clone();
    set.options = Options::SET_POLICY | Options::GET_STATUS;
    set.policy_id = POLICY;
    let f = check_response_against_request(&set, &resp);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].code, FindingCode::ResponsePolicyMismatch);
    assert!(f[0]
        .message
        .contains("PolicyID 00000000-0000-0000-0000-000000000000"));

    // No GET_STATUS, yet a response buffer.
    let mut no_status = req;
    no_status.options = Options::SET_LOGICAL_FLOW_ID;
    let f = check_response_against_request(&no_status, &resp);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].code, FindingCode::ResponseWithoutGetStatus);
}

#[test]
fn every_code_is_documented_with_its_severity() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/sqos-codec.md"))
        .unwrap();
    for c in FindingCode::ALL {
        let row = format!("| `{}` | {} |", c.as_str(), c.severity().as_str());
        assert!(doc.contains(&row), "docs/sqos-codec.md lacks the row {row}");
    }
}
