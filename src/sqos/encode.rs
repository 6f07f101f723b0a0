//! Encoder: typed request / response → bytes, exactly as given (no field is fixed up), so tests
//! and the capture generator can also build malformed buffers.

use uuid::Uuid;

use super::{Request, Response};

/// Little-endian writer over a growing buffer.
struct Writer(Vec<u8>);

impl Writer {
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Microsoft's mixed-endian GUID order.
    fn guid(&mut self, g: &Uuid) -> &mut Self {
        self.0.extend_from_slice(&g.to_bytes_le());
        self
    }
}

/// Writes `text` as UTF-16LE at `offset`, growing `buf` with zeros as needed.
fn put_utf16(buf: &mut Vec<u8>, offset: usize, text: &str) {
    let bytes: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let end = offset + bytes.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    if let Some(dst) = buf.get_mut(offset..end) {
        dst.copy_from_slice(&bytes);
    }
}

/// Encodes a request: the fixed part (128 bytes when `v1_1` is present, else 112) with every
/// field as given, then each name present and with a non-zero length, as UTF-16LE at its
/// offset (its whole text, whatever the length field says). Gaps are zero. Name bytes that would
/// fall inside the fixed part are dropped: the fixed fields always read back as given.
pub fn encode_request(req: &Request) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(req.encoded_fixed_len() + 128));
    w.u16(req.protocol_version.0)
        .u16(req.reserved)
        .u32(req.options.bits())
        .guid(&req.logical_flow_id)
        .guid(&req.policy_id)
        .guid(&req.initiator_id)
        .u64(req.limit)
        .u64(req.reservation)
        .u16(req.initiator_name_offset)
        .u16(req.initiator_name_length)
        .u16(req.initiator_node_name_offset)
        .u16(req.initiator_node_name_length)
        .u64(req.io_count_increment)
        .u64(req.normalized_io_count_increment)
        .u64(req.latency_increment)
        .u64(req.lower_latency_increment);
    if let Some(v11) = req.v1_1 {
        w.u64(v11.bandwidth_limit).u64(v11.kilobyte_count_increment);
    }
    let fixed = w.0;
    let mut buf = fixed.clone();
    let names = [
        (
            &req.initiator_name,
            req.initiator_name_offset,
            req.initiator_name_length,
        ),
        (
            &req.initiator_node_name,
            req.initiator_node_name_offset,
            req.initiator_node_name_length,
        ),
    ];
    for (text, offset, length) in names {
        if let Some(text) = text.as_deref().filter(|_| length > 0) {
            put_utf16(&mut buf, usize::from(offset), text);
        }
    }
    // Restore the fixed part over any name bytes written into it.
    if let Some(dst) = buf.get_mut(..fixed.len()) {
        dst.copy_from_slice(&fixed);
    }
    buf
}

/// Encodes a response: 96 bytes when `maximum_bandwidth` is present (at offset 88, the
/// structure layout), else 88.
pub fn encode_response(resp: &Response) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(resp.encoded_len()));
    w.u16(resp.protocol_version.0)
        .u16(resp.reserved)
        .u32(resp.options)
        .guid(&resp.logical_flow_id)
        .guid(&resp.policy_id)
        .guid(&resp.initiator_id)
        .u32(resp.time_to_live)
        .u32(resp.status.0)
        .u64(resp.maximum_io_rate)
        .u64(resp.minimum_io_rate)
        .u32(resp.base_io_size)
        .u32(resp.reserved2);
    if let Some(bw) = resp.maximum_bandwidth {
        w.u64(bw);
    }
    w.0
}
