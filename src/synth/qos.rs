//! MS-SQOS buffers as the generator sends them. The generator writes its own bytes (rather than
//! only calling the codec) because it must also produce requests a correct encoder would
//! refuse to make: names at offsets that lie, unknown versions. For well-formed values the
//! bytes equal the codec's (a test checks).
//!
//! Layout: the summed field lists (request fixed part 112 / 128 bytes, response 88 / 96 with
//! MaximumBandwidth at 88), names right after the fixed part, as Windows and tshark do.

use crate::sqos::{Dialect, Request, Response};

fn fixed_len(req: &Request) -> usize {
    match req.v1_1 {
        Some(_) => Dialect::V1_1.request_fixed_len(),
        None => Dialect::V1_0.request_fixed_len(),
    }
}

/// The fixed part with every field as given, then the names' UTF-16 bytes (if any) appended
/// back to back, whatever the offset fields say.
pub fn encode_request(req: &Request) -> Vec<u8> {
    let mut b = Vec::with_capacity(fixed_len(req) + 128);
    b.extend_from_slice(&req.protocol_version.0.to_le_bytes());
    b.extend_from_slice(&req.reserved.to_le_bytes());
    b.extend_from_slice(&req.options.0.to_le_bytes());
    b.extend_from_slice(&req.logical_flow_id.to_bytes_le());
    b.extend_from_slice(&req.policy_id.to_bytes_le());
    b.extend_from_slice(&req.initiator_id.to_bytes_le());
    b.extend_from_slice(&req.limit.to_le_bytes());
    b.extend_from_slice(&req.reservation.to_le_bytes());
    b.extend_from_slice(&req.initiator_name_offset.to_le_bytes());
    b.extend_from_slice(&req.initiator_name_length.to_le_bytes());
    b.extend_from_slice(&req.initiator_node_name_offset.to_le_bytes());
    b.extend_from_slice(&req.initiator_node_name_length.to_le_bytes());
    b.extend_from_slice(&req.io_count_increment.to_le_bytes());
    b.extend_from_slice(&req.normalized_io_count_increment.to_le_bytes());
    b.extend_from_slice(&req.latency_increment.to_le_bytes());
    b.extend_from_slice(&req.lower_latency_increment.to_le_bytes());
    if let Some(v) = req.v1_1 {
        b.extend_from_slice(&v.bandwidth_limit.to_le_bytes());
        b.extend_from_slice(&v.kilobyte_count_increment.to_le_bytes());
    }
    for s in [&req.initiator_name, &req.initiator_node_name]
        .into_iter()
        .flatten()
    {
        b.extend(s.encode_utf16().flat_map(|u| u.to_le_bytes()));
    }
    b
}

pub fn encode_response(resp: &Response) -> Vec<u8> {
    let mut b = Vec::with_capacity(96);
    b.extend_from_slice(&resp.protocol_version.0.to_le_bytes());
    b.extend_from_slice(&resp.reserved.to_le_bytes());
    b.extend_from_slice(&resp.options.to_le_bytes());
    b.extend_from_slice(&resp.logical_flow_id.to_bytes_le());
    b.extend_from_slice(&resp.policy_id.to_bytes_le());
    b.extend_from_slice(&resp.initiator_id.to_bytes_le());
    b.extend_from_slice(&resp.time_to_live.to_le_bytes());
    b.extend_from_slice(&resp.status.0.to_le_bytes());
    b.extend_from_slice(&resp.maximum_io_rate.to_le_bytes());
    b.extend_from_slice(&resp.minimum_io_rate.to_le_bytes());
    b.extend_from_slice(&resp.base_io_size.to_le_bytes());
    b.extend_from_slice(&resp.reserved2.to_le_bytes());
    if let Some(bw) = resp.maximum_bandwidth {
        b.extend_from_slice(&bw.to_le_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqos::{Options, Response};
    use uuid::Uuid;

    #[test]
    fn request_lengths_and_name_offsets() {
        let r = Request::new(Dialect::V1_1).with_names("TEST-VM", "HV");
        assert_eq!(r.initiator_name_offset, 128);
        assert_eq!(r.initiator_node_name_offset, 142);
        let b = encode_request(&r);
        assert_eq!(b.len(), 128 + 14 + 4);
        assert_eq!(&b[128..130], &[b'T', 0]);
        assert_eq!(encode_request(&Request::new(Dialect::V1_0)).len(), 112);
    }

    #[test]
    fn response_lengths() {
        assert_eq!(encode_response(&Response::new(Dialect::V1_0)).len(), 88);
        let mut r = Response::new(Dialect::V1_1);
        r.maximum_bandwidth = Some(200);
        let b = encode_response(&r);
        assert_eq!(b.len(), 96);
        assert_eq!(&b[88..90], &[200, 0]);
        assert_eq!(&b[80..84], &8192u32.to_le_bytes());
    }

    /// For well-formed values the generator's bytes are the codec's.
    #[test]
    fn well_formed_messages_encode_like_the_codec() {
        for d in [Dialect::V1_0, Dialect::V1_1] {
            let mut r = Request::new(d).with_names("vm07", "HV01.contoso.local");
            r.options = Options::SET_LOGICAL_FLOW_ID | Options::SET_POLICY | Options::GET_STATUS;
            r.logical_flow_id = Uuid::from_u128(0x1234_5678_9abc_4def_8123_4567_89ab_cdef);
            r.limit = 120;
            r.reservation = 30;
            r.io_count_increment = 5;
            r.lower_latency_increment = 77;
            if let Some(v) = r.v1_1.as_mut() {
                v.bandwidth_limit = 2048;
                v.kilobyte_count_increment = 9;
            }
            assert_eq!(encode_request(&r), crate::sqos::encode_request(&r));
            let mut resp = Response::new(d);
            resp.time_to_live = 3981;
            resp.maximum_io_rate = 100;
            resp.logical_flow_id = r.logical_flow_id;
            assert_eq!(encode_response(&resp), crate::sqos::encode_response(&resp));
        }
    }
}
