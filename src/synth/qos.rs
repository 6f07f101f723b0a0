//! MS-SQOS buffers as the generator sends them. The generator writes its own bytes (rather than
//! only calling the codec) because it must also produce requests a correct encoder would
//! refuse to make: names at offsets that lie, unknown versions. For well-formed values the
//! bytes equal the codec's (a test checks).
//!
//! Layout: the summed field lists (request fixed part 112 / 128 bytes, response 88 / 96 with
//! MaximumBandwidth at 88), names right after the fixed part, as Windows and tshark do.

use uuid::Uuid;

use crate::sqos::{Dialect, Options, ProtocolVersion, Request, RequestV11, Response, Status};

/// A request of `dialect`, every field zero (section 3.1.4.1).
pub fn new_request(dialect: Dialect) -> Request {
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

fn utf16_len(s: &str) -> u16 {
    (s.encode_utf16().count() * 2).min(usize::from(u16::MAX)) as u16
}

/// Sets both names, placed one after the other right after the fixed part.
pub fn with_names(mut req: Request, name: &str, node: &str) -> Request {
    let fixed = fixed_len(&req) as u16;
    let (nl, ml) = (utf16_len(name), utf16_len(node));
    req.initiator_name_offset = if nl > 0 { fixed } else { 0 };
    req.initiator_name_length = nl;
    req.initiator_node_name_offset = if ml > 0 { fixed.saturating_add(nl) } else { 0 };
    req.initiator_node_name_length = ml;
    req.initiator_name = (nl > 0).then(|| name.to_string());
    req.initiator_node_name = (ml > 0).then(|| node.to_string());
    req
}

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

/// A response of the request's dialect (1.0 layout for unknown versions).
pub fn new_response(version: ProtocolVersion) -> Response {
    Response {
        protocol_version: version,
        reserved: 0,
        options: 0,
        logical_flow_id: Uuid::nil(),
        policy_id: Uuid::nil(),
        initiator_id: Uuid::nil(),
        time_to_live: 0,
        status: Status::OK,
        maximum_io_rate: 0,
        minimum_io_rate: 0,
        base_io_size: 8192,
        reserved2: 0,
        maximum_bandwidth: (version.dialect() == Some(Dialect::V1_1)).then_some(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lengths_and_name_offsets() {
        let r = with_names(new_request(Dialect::V1_1), "TEST-VM", "HV");
        assert_eq!(r.initiator_name_offset, 128);
        assert_eq!(r.initiator_node_name_offset, 142);
        let b = encode_request(&r);
        assert_eq!(b.len(), 128 + 14 + 4);
        assert_eq!(&b[128..130], &[b'T', 0]);
        assert_eq!(encode_request(&new_request(Dialect::V1_0)).len(), 112);
    }

    #[test]
    fn response_lengths() {
        assert_eq!(
            encode_response(&new_response(ProtocolVersion::V1_0)).len(),
            88
        );
        let mut r = new_response(ProtocolVersion::V1_1);
        r.maximum_bandwidth = Some(200);
        let b = encode_response(&r);
        assert_eq!(b.len(), 96);
        assert_eq!(&b[88..90], &[200, 0]);
        assert_eq!(&b[80..84], &8192u32.to_le_bytes());
    }
}
