//! Every hex example of the spec, decoded field by field. The byte arrays are transcribed from
//! ../shared/spec/ (file and section cited on each); where an example contradicts the structure
//! layout (see docs/sqos-codec.md), the test asserts the finding the decoder reports.

use sqos::sqos::{
    check_max_output, check_response_against_request, encode_request, encode_response,
    parse_request, parse_response, DecodeError, Dialect, FieldValue, FindingCode, Options,
    ProtocolVersion, Request, RequestV11, Severity, Status,
};
use uuid::Uuid;

/// 001 (rev 1.0) section 4.2 step 3: set LogicalFlowID (104 bytes).
#[rustfmt::skip]
const SPEC_001_4_2_SET_FLOW_ID: &[u8] = &[
    0x00, 0x01,
    0x00, 0x00,
    0x01, 0x00, 0x00, 0x00,
    0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D, 0x69, 0x6E,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// 001 (rev 1.0) section 4.2 step 5: set policy, with names (198 bytes).
#[rustfmt::skip]
const SPEC_001_4_2_SET_POLICY: &[u8] = &[
    0x00, 0x01,
    0x00, 0x00,
    0x02, 0x00, 0x00, 0x00,
    0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D, 0x69, 0x6E,
    0x4E, 0xF2, 0xB4, 0x04, 0xE9, 0xB3, 0x94, 0x45, 0xAD, 0xAA, 0xE3, 0x27, 0x52, 0x8D, 0xE5, 0x4B,
    0xC6, 0x4D, 0x9E, 0x1B, 0xC0, 0xF8, 0x9F, 0x41, 0x87, 0x85, 0x80, 0x65, 0xBC, 0xFF, 0x72, 0x84,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x68, 0x00, 0x0E, 0x00,
    0x76, 0x00, 0x48, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x54, 0x00, 0x45, 0x00, 0x53, 0x00, 0x54, 0x00, 0x2D, 0x00, 0x56, 0x00, 0x4D, 0x00,
    0x48, 0x00, 0x59, 0x00, 0x50, 0x00, 0x45, 0x00, 0x52, 0x00, 0x56, 0x00, 0x2D, 0x00, 0x54, 0x00, 0x45, 0x00, 0x53, 0x00, 0x54, 0x00, 0x2E, 0x00, 0x6E, 0x00, 0x74, 0x00, 0x64, 0x00, 0x65,
    0x00, 0x76, 0x00, 0x2E, 0x00, 0x63, 0x00, 0x6F, 0x00, 0x72, 0x00, 0x70, 0x00, 0x2E, 0x00, 0x6D, 0x00, 0x69, 0x00, 0x63, 0x00, 0x72, 0x00, 0x6F, 0x00, 0x73, 0x00, 0x6F, 0x00, 0x66, 0x00,
    0x74, 0x00, 0x2E, 0x00, 0x63, 0x00, 0x6F, 0x00, 0x6D, 0x00,
];

/// 001 (rev 1.0) section 4.3 step 1: probe policy, get status, update counters (112 bytes).
#[rustfmt::skip]
const SPEC_001_4_3_REQUEST: &[u8] = &[
    0x00, 0x01,
    0x00, 0x00,
    0x1C, 0x00, 0x00, 0x00,
    0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D, 0x69, 0x6E,
    0x4E, 0xF2, 0xB4, 0x04, 0xE9, 0xB3, 0x94, 0x45, 0xAD, 0xAA, 0xE3, 0x27, 0x52, 0x8D, 0xE5, 0x4B,
    0xC6, 0x4D, 0x9E, 0x1B, 0xC0, 0xF8, 0x9F, 0x41, 0x87, 0x85, 0x80, 0x65, 0xBC, 0xFF, 0x72, 0x84,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x8F, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x8F, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xE0, 0x3E, 0x47, 0x02, 0x00, 0x00, 0x00, 0x00,
    0xE0, 0x3E, 0x47, 0x02, 0x00, 0x00, 0x00, 0x00,
];

/// 001 (rev 1.0) section 4.3 step 2: response (its last 4 lines are printed after the code block) (88 bytes).
#[rustfmt::skip]
const SPEC_001_4_3_RESPONSE: &[u8] = &[
    0x00, 0x01,
    0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D, 0x69, 0x6E,
    0x4E, 0xF2, 0xB4, 0x04, 0xE9, 0xB3, 0x94, 0x45, 0xAD, 0xAA, 0xE3, 0x27, 0x52, 0x8D, 0xE5, 0x4B,
    0xC6, 0x4D, 0x9E, 0x1B, 0xC0, 0xF8, 0x9F, 0x41, 0x87, 0x85, 0x80, 0x65, 0xBC, 0xFF, 0x72, 0x84,
    0x8D, 0x0F, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x20, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
];

/// 004 (latest) section 4.2 step 5: dialect 1.1 set policy, with names (214 bytes).
#[rustfmt::skip]
const SPEC_004_4_2_SET_POLICY: &[u8] = &[
    0x01, 0x01,
    0x00, 0x00,
    0x02, 0x00, 0x00, 0x00,
    0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D, 0x69, 0x6E,
    0x4E, 0xF2, 0xB4, 0x04, 0xE9, 0xB3, 0x94, 0x45, 0xAD, 0xAA, 0xE3, 0x27, 0x52, 0x8D, 0xE5, 0x4B,
    0xC6, 0x4D, 0x9E, 0x1B, 0xC0, 0xF8, 0x9F, 0x41, 0x87, 0x85, 0x80, 0x65, 0xBC, 0xFF, 0x72, 0x84,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x68, 0x00, 0x0E, 0x00,
    0x76, 0x00, 0x48, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x54, 0x00, 0x45, 0x00, 0x53, 0x00, 0x54, 0x00, 0x2D, 0x00, 0x56, 0x00, 0x4D, 0x00,
    0x48, 0x00, 0x59, 0x00, 0x50, 0x00, 0x45, 0x00, 0x52, 0x00, 0x56, 0x00, 0x2D, 0x00, 0x54, 0x00, 0x45, 0x00, 0x53, 0x00, 0x54, 0x00, 0x2E, 0x00, 0x6E, 0x00, 0x74, 0x00, 0x64, 0x00, 0x65,
    0x00, 0x76, 0x00, 0x2E, 0x00, 0x63, 0x00, 0x6F, 0x00, 0x72, 0x00, 0x70, 0x00, 0x2E, 0x00, 0x6D, 0x00, 0x69, 0x00, 0x63, 0x00, 0x72, 0x00, 0x6F, 0x00, 0x73, 0x00, 0x6F, 0x00, 0x66, 0x00,
    0x74, 0x00, 0x2E, 0x00, 0x63, 0x00, 0x6F, 0x00, 0x6D, 0x00,
];

/// 004 (latest) section 4.3 step 1: dialect 1.1 probe policy, get status, update counters (128 bytes).
#[rustfmt::skip]
const SPEC_004_4_3_REQUEST: &[u8] = &[
    0x01, 0x01,
    0x00, 0x00,
    0x1C, 0x00, 0x00, 0x00,
    0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D, 0x69, 0x6E,
    0x4E, 0xF2, 0xB4, 0x04, 0xE9, 0xB3, 0x94, 0x45, 0xAD, 0xAA, 0xE3, 0x27, 0x52, 0x8D, 0xE5, 0x4B,
    0xC6, 0x4D, 0x9E, 0x1B, 0xC0, 0xF8, 0x9F, 0x41, 0x87, 0x85, 0x80, 0x65, 0xBC, 0xFF, 0x72, 0x84,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x8F, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x8F, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xE0, 0x3E, 0x47, 0x02, 0x00, 0x00, 0x00, 0x00,
    0xE0, 0x3E, 0x47, 0x02, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// 004 (latest) section 4.3 step 2: dialect 1.1 response (96 bytes).
#[rustfmt::skip]
const SPEC_004_4_3_RESPONSE: &[u8] = &[
    0x01, 0x01,
    0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D, 0x69, 0x6E,
    0x4E, 0xF2, 0xB4, 0x04, 0xE9, 0xB3, 0x94, 0x45, 0xAD, 0xAA, 0xE3, 0x27, 0x52, 0x8D, 0xE5, 0x4B,
    0xC6, 0x4D, 0x9E, 0x1B, 0xC0, 0xF8, 0x9F, 0x41, 0x87, 0x85, 0x80, 0x65, 0xBC, 0xFF, 0x72, 0x84,
    0x8D, 0x0F, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xC8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x20, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
];

/// 003 (section 4.3 excerpt) step 1: dialect 1.1 request (128 bytes).
#[rustfmt::skip]
const SPEC_003_4_3_REQUEST: &[u8] = &[
    0x01, 0x01,
    0x00, 0x00,
    0x1C, 0x00, 0x00, 0x00,
    0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D, 0x69, 0x6E,
    0x4E, 0xF2, 0xB4, 0x04, 0xE9, 0xB3, 0x94, 0x45, 0xAD, 0xAA, 0xE3, 0x27, 0x52, 0x8D, 0xE5, 0x4B,
    0xC6, 0x4D, 0x9E, 0x1B, 0xC0, 0xF8, 0x9F, 0x41, 0x87, 0x85, 0x80, 0x65, 0xBC, 0xFF, 0x72, 0x84,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x8F, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x8F, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xE0, 0x3E, 0x47, 0x02, 0x00, 0x00, 0x00, 0x00,
    0xE0, 0x3E, 0x47, 0x02, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// 003 (section 4.3 excerpt) step 2: dialect 1.1 response (96 bytes).
#[rustfmt::skip]
const SPEC_003_4_3_RESPONSE: &[u8] = &[
    0x01, 0x01,
    0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D, 0x69, 0x6E,
    0x4E, 0xF2, 0xB4, 0x04, 0xE9, 0xB3, 0x94, 0x45, 0xAD, 0xAA, 0xE3, 0x27, 0x52, 0x8D, 0xE5, 0x4B,
    0xC6, 0x4D, 0x9E, 0x1B, 0xC0, 0xF8, 0x9F, 0x41, 0x87, 0x85, 0x80, 0x65, 0xBC, 0xFF, 0x72, 0x84,
    0x8D, 0x0F, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xC8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x20, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
];

/// 000 (rev 2.0) section 4.2 step 3: dialect 1.1 set LogicalFlowID (96 bytes). The only hex
/// block of 000 used here: its others carry transcription damage ("OE" for 0E, 7-byte lines).
#[rustfmt::skip]
const SPEC_000_4_2_SET_FLOW_ID: &[u8] = &[
    0x01, 0x01,
    0x00, 0x00,
    0x01, 0x00, 0x00, 0x00,
    0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D, 0x69, 0x6E,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

const FLOW: &str = "b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e";
const POLICY: &str = "04b4f24e-b3e9-4594-adaa-e327528de54b";
const INITIATOR: &str = "1b9e4dc6-f8c0-419f-8785-8065bcff7284";
/// What the 4.2 example's bytes hold (36 chars, 72 = 0x48 bytes), not its annotation's
/// "HYPERV-TEST.contoso.com" (46 bytes).
const NODE_IN_BYTES: &str = "HYPERV-TEST.ntdev.corp.microsoft.com";

fn uuid(s: &str) -> Uuid {
    Uuid::parse_str(s).unwrap()
}

fn codes<T>(d: &sqos::sqos::Dissection<T>) -> Vec<FindingCode> {
    d.findings.iter().map(|f| f.code).collect()
}

#[test]
fn rev_1_0_set_flow_id_example_is_one_field_short() {
    // The example prints 104 bytes: after Limit comes the name offset/length line, so one
    // 8-byte line (Reservation) is missing. 104 < 112: a short buffer, by the structure layout.
    let d = parse_request(SPEC_001_4_2_SET_FLOW_ID);
    assert_eq!(SPEC_001_4_2_SET_FLOW_ID.len(), 104);
    assert_eq!(d.message, None);
    assert_eq!(
        d.error,
        Some(DecodeError::Short {
            len: 104,
            needed: 112
        })
    );
    assert_eq!(codes(&d), vec![FindingCode::ShortBuffer]);
    assert_eq!(d.findings[0].severity, Severity::Error);
    assert!(d.findings[0].message.contains("104 bytes"));
    assert!(d.findings[0].message.contains("112-byte"));
    // Everything up to LatencyIncrement could still be read.
    assert_eq!(d.fields.len(), 15);
    assert_eq!(
        d.fields[0].value,
        FieldValue::Version(ProtocolVersion(0x0100))
    );
    assert_eq!(
        d.fields[2].value,
        FieldValue::Options(Options::SET_LOGICAL_FLOW_ID)
    );
    assert_eq!(d.fields[3].name, "LogicalFlowID");
    assert_eq!(d.fields[3].value, FieldValue::Guid(uuid(FLOW)));
    assert_eq!(d.fields[4].value, FieldValue::Guid(Uuid::nil()));
    let last = d.fields.last().unwrap();
    assert_eq!(
        (last.name, last.offset, last.len),
        ("LatencyIncrement", 96, 8)
    );
    assert_eq!(last.value, FieldValue::U64(0));
}

#[test]
fn rev_1_0_set_policy_example_names_sit_after_the_fixed_part() {
    let d = parse_request(SPEC_001_4_2_SET_POLICY);
    assert_eq!(SPEC_001_4_2_SET_POLICY.len(), 198);
    assert_eq!(d.error, None);
    let r = d.message.as_ref().unwrap();
    assert_eq!(r.protocol_version, ProtocolVersion::V1_0);
    assert_eq!(r.reserved, 0);
    assert_eq!(r.options, Options::SET_POLICY);
    assert_eq!(r.logical_flow_id, uuid(FLOW));
    assert_eq!(r.policy_id, uuid(POLICY));
    assert_eq!(r.initiator_id, uuid(INITIATOR));
    assert_eq!((r.limit, r.reservation), (0, 0));
    assert_eq!(
        (r.initiator_name_offset, r.initiator_name_length),
        (104, 14)
    );
    // The hex says 0x48 = 72; the annotation's "46 (0x002E)" does not match the bytes.
    assert_eq!(
        (r.initiator_node_name_offset, r.initiator_node_name_length),
        (118, 72)
    );
    assert_eq!(r.io_count_increment, 0);
    assert_eq!(r.normalized_io_count_increment, 0);
    assert_eq!(r.latency_increment, 0);
    assert_eq!(r.lower_latency_increment, 0);
    assert_eq!(r.v1_1, None);
    // Offset 104 is inside the 112-byte fixed part: InitiatorName is not decoded. Offset 118 is
    // past it, so InitiatorNodeName is read where its offset says: 72 bytes from the middle of
    // "TEST-VM", which is what a server going by the offsets would store...
    assert_eq!(r.initiator_name, None);
    assert_eq!(
        r.initiator_node_name.as_deref(),
        Some("T-VMHYPERV-TEST.ntdev.corp.microsoft")
    );
    let node = d.field("InitiatorNodeName").unwrap();
    assert_eq!((node.offset, node.len), (118, 72));
    assert_eq!(d.field("InitiatorName"), None);
    assert_eq!(
        codes(&d),
        vec![
            FindingCode::NameOffsetInFixedPart,
            FindingCode::NameLayoutSpecExample,
        ]
    );
    assert!(d.findings[0].message.contains("InitiatorNameOffset 104"));
    assert!(d.findings[0].message.contains("112-byte fixed part"));
    // ...and the note says what the bytes right after the fixed part are.
    let note = &d.findings[1];
    assert_eq!(note.severity, Severity::Note);
    assert!(
        note.message
            .contains("InitiatorName \"TEST-VM\" at offset 112"),
        "{}",
        note.message
    );
    assert!(note.message.contains(&format!(
        "InitiatorNodeName \"{NODE_IN_BYTES}\" at offset 126"
    )));
}

#[test]
fn rev_1_0_set_policy_example_is_what_with_names_encodes_up_to_the_offsets() {
    // Built the way this codec (and Windows' test suite) lays names out, the example's bytes
    // come out identical except for the two offset fields: 112/126 instead of 104/118.
    let mut req = Request::new(Dialect::V1_0).with_names("TEST-VM", NODE_IN_BYTES);
    req.options = Options::SET_POLICY;
    req.logical_flow_id = uuid(FLOW);
    req.policy_id = uuid(POLICY);
    req.initiator_id = uuid(INITIATOR);
    let bytes = encode_request(&req);
    let mut expected = SPEC_001_4_2_SET_POLICY.to_vec();
    expected[72..74].copy_from_slice(&112u16.to_le_bytes());
    expected[76..78].copy_from_slice(&126u16.to_le_bytes());
    assert_eq!(bytes, expected);
    let d = parse_request(&bytes);
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(d.message, Some(req));
}

#[test]
fn rev_1_0_probe_request_example() {
    let d = parse_request(SPEC_001_4_3_REQUEST);
    assert_eq!(d.error, None);
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let r = d.message.as_ref().unwrap();
    assert_eq!(r.protocol_version, ProtocolVersion::V1_0);
    assert_eq!(r.options.bits(), 0x1C);
    assert_eq!(
        r.options.names(),
        ["PROBE_POLICY", "GET_STATUS", "UPDATE_COUNTERS"]
    );
    assert_eq!(r.logical_flow_id, uuid(FLOW));
    assert_eq!(r.policy_id, uuid(POLICY));
    assert_eq!(r.initiator_id, uuid(INITIATOR));
    assert_eq!((r.limit, r.reservation), (0, 0));
    assert_eq!(
        [
            r.initiator_name_offset,
            r.initiator_name_length,
            r.initiator_node_name_offset,
            r.initiator_node_name_length
        ],
        [0, 0, 0, 0]
    );
    assert_eq!(r.io_count_increment, 399);
    assert_eq!(r.normalized_io_count_increment, 399);
    assert_eq!(r.latency_increment, 38_223_584);
    assert_eq!(r.lower_latency_increment, 38_223_584);
    assert_eq!(r.v1_1, None);
    assert_eq!(
        (r.initiator_name.as_ref(), r.initiator_node_name.as_ref()),
        (None, None)
    );
    // Every fixed field, in order, at its layout offset.
    let layout: Vec<(&str, usize, usize)> =
        d.fields.iter().map(|f| (f.name, f.offset, f.len)).collect();
    assert_eq!(
        layout,
        [
            ("ProtocolVersion", 0, 2),
            ("Reserved", 2, 2),
            ("Options", 4, 4),
            ("LogicalFlowID", 8, 16),
            ("PolicyID", 24, 16),
            ("InitiatorID", 40, 16),
            ("Limit", 56, 8),
            ("Reservation", 64, 8),
            ("InitiatorNameOffset", 72, 2),
            ("InitiatorNameLength", 74, 2),
            ("InitiatorNodeNameOffset", 76, 2),
            ("InitiatorNodeNameLength", 78, 2),
            ("IoCountIncrement", 80, 8),
            ("NormalizedIoCountIncrement", 88, 8),
            ("LatencyIncrement", 96, 8),
            ("LowerLatencyIncrement", 104, 8),
        ]
    );
    assert_eq!(encode_request(r), SPEC_001_4_3_REQUEST);
    // GET_STATUS: the text's 80 bytes cannot hold the 88-byte 1.0 response.
    let f = check_max_output(r, 80).unwrap();
    assert_eq!(f.code, FindingCode::MaxOutputTooSmall);
    assert!(f.message.contains("88-byte"), "{}", f.message);
    assert_eq!(check_max_output(r, 88), None);
    assert_eq!(check_max_output(r, 4096), None);
}

#[test]
fn rev_1_0_response_example() {
    let d = parse_response(SPEC_001_4_3_RESPONSE);
    assert_eq!(d.error, None);
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let r = d.message.as_ref().unwrap();
    assert_eq!(r.protocol_version, ProtocolVersion::V1_0);
    assert_eq!(r.reserved, 0);
    assert_eq!(r.options, 0);
    assert_eq!(r.logical_flow_id, uuid(FLOW));
    assert_eq!(r.policy_id, uuid(POLICY));
    assert_eq!(r.initiator_id, uuid(INITIATOR));
    assert_eq!(r.time_to_live, 3981);
    assert_eq!(r.status, Status::OK);
    assert_eq!(r.status.name(), Some("StorageQoSStatusOk"));
    assert_eq!(r.maximum_io_rate, 100);
    assert_eq!(r.minimum_io_rate, 0);
    assert_eq!(r.base_io_size, 8192);
    assert_eq!(r.reserved2, 0);
    assert_eq!(r.maximum_bandwidth, None);
    assert_eq!(d.fields.len(), 12);
    let base = d.field("BaseIoSize").unwrap();
    assert_eq!(
        (base.offset, base.len, &base.value),
        (80, 4, &FieldValue::U32(8192))
    );
    assert_eq!(encode_response(r), SPEC_001_4_3_RESPONSE);
    // The response answers the probe request of the same section without complaint.
    let req = parse_request(SPEC_001_4_3_REQUEST).message.unwrap();
    assert_eq!(check_response_against_request(&req, r), vec![]);
}

#[test]
fn latest_set_policy_example_dialect_1_1() {
    let d = parse_request(SPEC_004_4_2_SET_POLICY);
    assert_eq!(SPEC_004_4_2_SET_POLICY.len(), 214);
    assert_eq!(d.error, None);
    let r = d.message.as_ref().unwrap();
    assert_eq!(r.protocol_version, ProtocolVersion::V1_1);
    assert_eq!(r.options, Options::SET_POLICY);
    assert_eq!(r.logical_flow_id, uuid(FLOW));
    assert_eq!(r.policy_id, uuid(POLICY));
    assert_eq!(r.initiator_id, uuid(INITIATOR));
    assert_eq!((r.limit, r.reservation), (0, 0));
    assert_eq!(
        (r.initiator_name_offset, r.initiator_name_length),
        (104, 14)
    );
    assert_eq!(
        (r.initiator_node_name_offset, r.initiator_node_name_length),
        (118, 72)
    );
    assert_eq!(r.io_count_increment + r.normalized_io_count_increment, 0);
    assert_eq!(r.latency_increment + r.lower_latency_increment, 0);
    assert_eq!(
        r.v1_1,
        Some(RequestV11 {
            bandwidth_limit: 0,
            kilobyte_count_increment: 0
        })
    );
    assert_eq!(
        (r.initiator_name.as_ref(), r.initiator_node_name.as_ref()),
        (None, None)
    );
    assert_eq!(
        codes(&d),
        vec![
            FindingCode::NameOffsetInFixedPart,
            FindingCode::NameOffsetInFixedPart,
            FindingCode::NameLayoutSpecExample,
        ]
    );
    assert!(d.findings[0].message.contains("128-byte fixed part"));
    let note = &d.findings[2].message;
    assert!(
        note.contains("InitiatorName \"TEST-VM\" at offset 128"),
        "{note}"
    );
    assert!(note.contains(&format!(
        "InitiatorNodeName \"{NODE_IN_BYTES}\" at offset 142"
    )));
}

fn assert_latest_probe_request(bytes: &[u8]) {
    let d = parse_request(bytes);
    assert_eq!(d.error, None);
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let r = d.message.as_ref().unwrap();
    assert_eq!(r.protocol_version, ProtocolVersion::V1_1);
    assert_eq!(r.dialect(), Some(Dialect::V1_1));
    assert_eq!(
        r.options,
        Options::PROBE_POLICY | Options::GET_STATUS | Options::UPDATE_COUNTERS
    );
    assert_eq!(r.logical_flow_id, uuid(FLOW));
    assert_eq!(r.policy_id, uuid(POLICY));
    assert_eq!(r.initiator_id, uuid(INITIATOR));
    assert_eq!(r.io_count_increment, 399);
    assert_eq!(r.normalized_io_count_increment, 399);
    assert_eq!(r.latency_increment, 38_223_584);
    assert_eq!(r.lower_latency_increment, 38_223_584);
    assert_eq!(
        r.v1_1,
        Some(RequestV11 {
            bandwidth_limit: 0,
            kilobyte_count_increment: 0
        })
    );
    let bw = d.field("BandwidthLimit").unwrap();
    assert_eq!((bw.offset, bw.len), (112, 8));
    let kb = d.field("KilobyteCountIncrement").unwrap();
    assert_eq!((kb.offset, kb.len), (120, 8));
    assert_eq!(d.fields.len(), 18);
    assert_eq!(encode_request(r), bytes);
    // 1.1: the response is 96 bytes.
    assert_eq!(
        check_max_output(r, 88).map(|f| f.code),
        Some(FindingCode::MaxOutputTooSmall)
    );
    assert_eq!(check_max_output(r, 96), None);
}

/// The section 4.3 1.1 response prints MaximumBandwidth before BaseIoSize. By the structure
/// (BaseIoSize @80, Reserved @84, MaximumBandwidth @88) its bytes read BaseIoSize 200 (0xC8),
/// Reserved 0, MaximumBandwidth 8192; the decoder says so in a warning.
fn assert_latest_response(bytes: &[u8]) {
    let d = parse_response(bytes);
    assert_eq!(d.error, None);
    let r = d.message.as_ref().unwrap();
    assert_eq!(r.protocol_version, ProtocolVersion::V1_1);
    assert_eq!(r.reserved, 0);
    assert_eq!(r.options, 0);
    assert_eq!(r.logical_flow_id, uuid(FLOW));
    assert_eq!(r.policy_id, uuid(POLICY));
    assert_eq!(r.initiator_id, uuid(INITIATOR));
    assert_eq!(r.time_to_live, 3981);
    assert_eq!(r.status, Status::OK);
    assert_eq!(r.maximum_io_rate, 100);
    assert_eq!(r.minimum_io_rate, 0);
    assert_eq!(r.base_io_size, 200);
    assert_eq!(r.reserved2, 0);
    assert_eq!(r.maximum_bandwidth, Some(8192));
    let mb = d.field("MaximumBandwidth").unwrap();
    assert_eq!(
        (mb.offset, mb.len, &mb.value),
        (88, 8, &FieldValue::U64(8192))
    );
    assert_eq!(codes(&d), vec![FindingCode::ResponseLayoutSpecExample]);
    let f = &d.findings[0];
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.message
            .contains("BaseIoSize 200, Reserved 0, MaximumBandwidth 8192"),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("MaximumBandwidth 200 (at 80)"),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("BaseIoSize 8192 (at 88)"),
        "{}",
        f.message
    );
    assert_eq!(encode_response(r), bytes);
}

#[test]
fn latest_probe_request_example_dialect_1_1() {
    assert_latest_probe_request(SPEC_004_4_3_REQUEST);
}

#[test]
fn latest_response_example_dialect_1_1() {
    assert_latest_response(SPEC_004_4_3_RESPONSE);
    let req = parse_request(SPEC_004_4_3_REQUEST).message.unwrap();
    let resp = parse_response(SPEC_004_4_3_RESPONSE).message.unwrap();
    assert_eq!(check_response_against_request(&req, &resp), vec![]);
}

#[test]
fn excerpt_003_matches_latest_section_4_3() {
    assert_eq!(SPEC_003_4_3_REQUEST, SPEC_004_4_3_REQUEST);
    assert_eq!(SPEC_003_4_3_RESPONSE, SPEC_004_4_3_RESPONSE);
    assert_latest_probe_request(SPEC_003_4_3_REQUEST);
    assert_latest_response(SPEC_003_4_3_RESPONSE);
}

#[test]
fn rev_1_0_request_answered_by_1_1_response_is_flagged() {
    let req = parse_request(SPEC_001_4_3_REQUEST).message.unwrap();
    let resp = parse_response(SPEC_004_4_3_RESPONSE).message.unwrap();
    let f = check_response_against_request(&req, &resp);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].code, FindingCode::ResponseVersionMismatch);
    assert!(f[0].message.contains("0x0101") && f[0].message.contains("0x0100"));
}

#[test]
fn rev_2_0_set_flow_id_example_is_short_for_dialect_1_1() {
    // 96 bytes printed for a 128-byte 1.1 fixed part ("[all other fields zero]"): between
    // LogicalFlowID and the name fields there are two 8-byte lines where PolicyID, InitiatorID,
    // Limit and Reservation take 48 bytes. Read by the layout, the bytes run out at
    // LatencyIncrement.
    assert_eq!(SPEC_000_4_2_SET_FLOW_ID.len(), 96);
    let d = parse_request(SPEC_000_4_2_SET_FLOW_ID);
    assert_eq!(d.message, None);
    assert_eq!(
        d.error,
        Some(DecodeError::Short {
            len: 96,
            needed: 128
        })
    );
    assert_eq!(codes(&d), vec![FindingCode::ShortBuffer]);
    assert!(d.findings[0].message.contains("dialect 1.1 request"));
    assert_eq!(d.fields.len(), 14);
    assert_eq!(
        d.fields[0].value,
        FieldValue::Version(ProtocolVersion::V1_1)
    );
    assert_eq!(
        d.fields[2].value,
        FieldValue::Options(Options::SET_LOGICAL_FLOW_ID)
    );
    assert_eq!(d.fields[3].value, FieldValue::Guid(uuid(FLOW)));
    let last = d.fields.last().unwrap();
    assert_eq!(
        (last.name, last.offset, last.value.clone()),
        ("NormalizedIoCountIncrement", 88, FieldValue::U64(0))
    );
}
