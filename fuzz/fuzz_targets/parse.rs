//! Fuzz both SQOS parsers with the same bytes, and check what the property tests check:
//! no panic, every field inside the buffer, and what was decoded re-encodes to the same values.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sqos::sqos::{
    encode_request, encode_response, parse_request, parse_response, Dissection, FindingCode,
};

fn check_fields<T>(d: &Dissection<T>, data: &[u8]) {
    assert_eq!(d.message.is_some(), d.error.is_none());
    for f in &d.fields {
        assert!(
            f.offset + f.len <= data.len(),
            "{} outside the buffer",
            f.name
        );
    }
    for f in &d.findings {
        assert_eq!(f.severity, f.code.severity());
    }
}

fuzz_target!(|data: &[u8]| {
    let d = parse_request(data);
    check_fields(&d, data);
    if let Some(m) = &d.message {
        let enc = encode_request(m);
        let fixed = m.encoded_fixed_len();
        assert_eq!(enc.get(..fixed), data.get(..fixed));
        // Undecodable name bytes are not kept, so only then may a re-parse differ.
        let lossy = d.findings.iter().any(|f| {
            matches!(
                f.code,
                FindingCode::NameLengthOdd | FindingCode::NameInvalidUtf16
            )
        });
        if !lossy {
            assert_eq!(parse_request(&enc).message.as_ref(), Some(m));
        }
    }

    let d = parse_response(data);
    check_fields(&d, data);
    if let Some(m) = &d.message {
        let enc = encode_response(m);
        assert_eq!(Some(&enc[..]), data.get(..enc.len()));
        assert_eq!(parse_response(&enc).message.as_ref(), Some(m));
    }
});
