//! Property tests: encode → parse round-trips for every valid value of both dialects, and
//! parsing arbitrary (or mutated) bytes never panics and never points outside the buffer.

use proptest::prelude::*;
use sqos::sqos::{
    encode_request, encode_response, parse_request, parse_response, Dialect, Dissection,
    FieldValue, Options, ProtocolVersion, Request, RequestV11, Response, Status,
};
use uuid::Uuid;

fn arb_uuid() -> impl Strategy<Value = Uuid> {
    prop_oneof![Just(Uuid::nil()), any::<u128>().prop_map(Uuid::from_u128)]
}

fn arb_version() -> impl Strategy<Value = ProtocolVersion> {
    prop_oneof![
        3 => Just(ProtocolVersion::V1_0),
        3 => Just(ProtocolVersion::V1_1),
        1 => any::<u16>().prop_map(ProtocolVersion),
    ]
}

/// Up to 128 chars of any Unicode scalar value: at most 512 bytes of UTF-16.
fn arb_name() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..=128).prop_map(|v| v.into_iter().collect())
}

prop_compose! {
    fn arb_request()(
        pv in arb_version(),
        reserved in any::<u16>(),
        options in any::<u32>(),
        ids in (arb_uuid(), arb_uuid(), arb_uuid()),
        limits in (any::<u64>(), any::<u64>()),
        counters in any::<[u64; 4]>(),
        v11 in any::<(u64, u64)>(),
        names in prop::option::of((arb_name(), arb_name())),
        stray_offsets in any::<(u16, u16)>(),
    ) -> Request {
        let mut r = Request::new(Dialect::V1_0);
        r.protocol_version = pv;
        r.reserved = reserved;
        r.options = Options(options);
        (r.logical_flow_id, r.policy_id, r.initiator_id) = ids;
        (r.limit, r.reservation) = limits;
        [
            r.io_count_increment,
            r.normalized_io_count_increment,
            r.latency_increment,
            r.lower_latency_increment,
        ] = counters;
        // The 1.1 fields exist exactly when the version says 1.1 (that is what a parse gives).
        if pv.dialect() == Some(Dialect::V1_1) {
            r.v1_1 = Some(RequestV11 { bandwidth_limit: v11.0, kilobyte_count_increment: v11.1 });
        }
        match names {
            Some((name, node)) => r.with_names(&name, &node),
            None => {
                // No names: offsets are ignored when the lengths are 0.
                (r.initiator_name_offset, r.initiator_node_name_offset) = stray_offsets;
                r
            }
        }
    }
}

prop_compose! {
    fn arb_response()(
        pv in arb_version(),
        reserved in any::<u16>(),
        options in any::<u32>(),
        ids in (arb_uuid(), arb_uuid(), arb_uuid()),
        ttl in any::<u32>(),
        status in prop_oneof![(0u32..6).prop_map(Status), any::<u32>().prop_map(Status)],
        rates in any::<(u64, u64)>(),
        base in prop_oneof![Just(8192u32), any::<u32>()],
        reserved2 in any::<u32>(),
        bw in any::<u64>(),
    ) -> Response {
        let mut r = Response::new(Dialect::V1_0);
        r.protocol_version = pv;
        r.reserved = reserved;
        r.options = options;
        (r.logical_flow_id, r.policy_id, r.initiator_id) = ids;
        r.time_to_live = ttl;
        r.status = status;
        (r.maximum_io_rate, r.minimum_io_rate) = rates;
        r.base_io_size = base;
        r.reserved2 = reserved2;
        r.maximum_bandwidth = (pv.dialect() == Some(Dialect::V1_1)).then_some(bw);
        r
    }
}

/// Invariants of any dissection of `buf`.
fn check_dissection<T>(d: &Dissection<T>, buf: &[u8]) -> Result<(), TestCaseError> {
    prop_assert_eq!(d.message.is_some(), d.error.is_none());
    for f in &d.fields {
        prop_assert!(f.len > 0, "empty field {}", f.name);
        prop_assert!(
            f.offset + f.len <= buf.len(),
            "{} at {}+{} outside {} bytes",
            f.name,
            f.offset,
            f.len,
            buf.len()
        );
    }
    for f in &d.findings {
        prop_assert_eq!(f.severity, f.code.severity());
        prop_assert!(!f.message.is_empty());
    }
    Ok(())
}

/// A valid encoded request or response, then some bytes overwritten and maybe truncated:
/// reaches the name and rule paths far more often than uniform noise.
fn mutated(base: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = base.len();
    (
        prop::collection::vec((0..len.max(1), any::<u8>()), 0..8),
        prop_oneof![Just(len), 0..=len],
    )
        .prop_map(move |(edits, keep)| {
            let mut b = base.clone();
            for (i, v) in edits {
                if let Some(x) = b.get_mut(i) {
                    *x = v;
                }
            }
            b.truncate(keep);
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn request_round_trips(req in arb_request()) {
        let bytes = encode_request(&req);
        let d = parse_request(&bytes);
        prop_assert_eq!(d.error.as_ref(), None);
        prop_assert_eq!(d.message.as_ref(), Some(&req));
        check_dissection(&d, &bytes)?;
        // The decoded names are also the text fields.
        let texts: Vec<&str> = d.fields.iter().filter_map(|f| match &f.value {
            FieldValue::Text(t) => Some(t.as_str()),
            _ => None,
        }).collect();
        let expected: Vec<&str> = [&req.initiator_name, &req.initiator_node_name]
            .into_iter().flatten().map(String::as_str).collect();
        prop_assert_eq!(texts, expected);
    }

    #[test]
    fn response_round_trips(resp in arb_response()) {
        let bytes = encode_response(&resp);
        prop_assert_eq!(bytes.len(), resp.encoded_len());
        let d = parse_response(&bytes);
        prop_assert_eq!(d.message.as_ref(), Some(&resp));
        check_dissection(&d, &bytes)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..300)) {
        let d = parse_request(&buf);
        check_dissection(&d, &buf)?;
        if let Some(m) = &d.message {
            // The fixed part re-encodes to exactly the bytes it came from.
            let fixed = m.encoded_fixed_len();
            prop_assert_eq!(&encode_request(m)[..fixed], &buf[..fixed]);
        }
        let d = parse_response(&buf);
        check_dissection(&d, &buf)?;
        if let Some(m) = &d.message {
            prop_assert_eq!(&encode_response(m)[..], &buf[..m.encoded_len()]);
        }
    }

    #[test]
    fn mutated_requests_never_panic(buf in arb_request().prop_flat_map(|r| mutated(encode_request(&r)))) {
        check_dissection(&parse_request(&buf), &buf)?;
        check_dissection(&parse_response(&buf), &buf)?;
    }

    #[test]
    fn mutated_responses_never_panic(buf in arb_response().prop_flat_map(|r| mutated(encode_response(&r)))) {
        check_dissection(&parse_response(&buf), &buf)?;
        check_dissection(&parse_request(&buf), &buf)?;
    }
}
