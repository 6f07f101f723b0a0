//! Encoder: typed request / response → bytes, each fixed field at its offset in the layout table
//! and exactly as given (no field is fixed up), so tests and the capture generator can also build
//! malformed buffers.

use super::field::FieldValue;
use super::layout::FieldDef;
use super::{Request, Response};

/// Where the encoder writes InitiatorName / InitiatorNodeName.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamePlacement {
    /// Each name present with a non-zero length field at its offset field (its whole text,
    /// whatever the length field says); gaps are zero and name bytes that would fall inside
    /// the fixed part are dropped, so the fixed fields always read back as given.
    AtOffsets,
    /// Every name present, one after the other right after the fixed part, whatever the offset
    /// and length fields say: how a client lays the names out, so a request whose offsets lie
    /// (the spec's section 4.2 example, the generator's rule breakers) still carries them.
    AfterFixedPart,
}

/// Writes each field's bytes at its offset, growing `buf` with zeros as needed.
fn put_fields(buf: &mut Vec<u8>, fields: &[(FieldDef, FieldValue)]) {
    let mut bytes = Vec::with_capacity(16);
    for (def, value) in fields {
        bytes.clear();
        value.put_le(&mut bytes);
        put_at(buf, def.offset, &bytes);
    }
}

/// Writes `bytes` at `offset`, growing `buf` with zeros as needed.
fn put_at(buf: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    let end = offset + bytes.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    if let Some(dst) = buf.get_mut(offset..end) {
        dst.copy_from_slice(bytes);
    }
}

fn utf16le(text: &str) -> Vec<u8> {
    text.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// Encodes a request with the names at their offsets ([`NamePlacement::AtOffsets`]): the fixed
/// part (128 bytes when `v1_1` is present, else 112) with every field as given, then the names.
pub fn encode_request(req: &Request) -> Vec<u8> {
    encode_request_with(req, NamePlacement::AtOffsets)
}

/// Encodes a request, placing the names as `names` says.
pub fn encode_request_with(req: &Request, names: NamePlacement) -> Vec<u8> {
    let fixed_len = req.encoded_fixed_len();
    let mut buf = Vec::with_capacity(fixed_len + 128);
    put_fields(&mut buf, &req.wire_fields());
    match names {
        NamePlacement::AtOffsets => {
            let declared = [
                (
                    req.initiator_name.as_deref(),
                    req.initiator_name_offset,
                    req.initiator_name_length,
                ),
                (
                    req.initiator_node_name.as_deref(),
                    req.initiator_node_name_offset,
                    req.initiator_node_name_length,
                ),
            ];
            for (text, offset, length) in declared {
                if let Some(text) = text.filter(|_| length > 0) {
                    let offset = usize::from(offset);
                    let bytes = utf16le(text);
                    // Name bytes inside the fixed part are dropped: the fixed fields win.
                    let skip = fixed_len.saturating_sub(offset).min(bytes.len());
                    if let Some(rest) = bytes.get(skip..).filter(|b| !b.is_empty()) {
                        put_at(&mut buf, offset + skip, rest);
                    }
                }
            }
        }
        NamePlacement::AfterFixedPart => {
            for text in [&req.initiator_name, &req.initiator_node_name]
                .into_iter()
                .flatten()
            {
                buf.extend(utf16le(text));
            }
        }
    }
    buf
}

/// Encodes a response: 96 bytes when `maximum_bandwidth` is present (at offset 88, the
/// structure layout), else 88.
pub fn encode_response(resp: &Response) -> Vec<u8> {
    let mut buf = Vec::with_capacity(resp.encoded_len());
    put_fields(&mut buf, &resp.wire_fields());
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqos::Dialect;

    #[test]
    fn lengths_and_name_offsets() {
        let r = Request::new(Dialect::V1_1).with_names("TEST-VM", "HV");
        let b = encode_request(&r);
        assert_eq!(b.len(), 128 + 14 + 4);
        assert_eq!(&b[128..130], &[b'T', 0]);
        assert_eq!(b, encode_request_with(&r, NamePlacement::AfterFixedPart));
        assert_eq!(encode_request(&Request::new(Dialect::V1_0)).len(), 112);
        assert_eq!(encode_response(&Response::new(Dialect::V1_0)).len(), 88);
        let mut resp = Response::new(Dialect::V1_1);
        resp.maximum_bandwidth = Some(200);
        let b = encode_response(&resp);
        assert_eq!(b.len(), 96);
        assert_eq!(&b[88..90], &[200, 0]);
        assert_eq!(&b[80..84], &8192u32.to_le_bytes());
    }

    /// Offsets that lie: at their offsets the name inside the fixed part is dropped; after the
    /// fixed part both names are there, whatever the offset and length fields say.
    #[test]
    fn name_placements_differ_when_offsets_lie() {
        let mut r = Request::new(Dialect::V1_0).with_names("vm", "node");
        r.initiator_name_offset = 40;
        r.initiator_node_name_length = 0;
        let at = encode_request(&r);
        assert_eq!(at.len(), 112);
        assert_eq!(&at[40..48], &r.policy_id.to_bytes_le()[..8]);
        let after = encode_request_with(&r, NamePlacement::AfterFixedPart);
        assert_eq!(after.len(), 112 + 4 + 8);
        assert_eq!(&after[..112], &at[..]);
        assert_eq!(&after[112..116], &[b'v', 0, b'm', 0]);
        assert_eq!(&after[116..118], &[b'n', 0]);
    }

    /// A name that starts inside the fixed part keeps only its bytes after it.
    #[test]
    fn name_straddling_the_fixed_part_keeps_its_tail() {
        let mut r = Request::new(Dialect::V1_0).with_names("abcd", "");
        r.initiator_name_offset = 108;
        let b = encode_request(&r);
        assert_eq!(b.len(), 116);
        assert_eq!(&b[104..112], &0u64.to_le_bytes());
        assert_eq!(&b[112..116], &[b'c', 0, b'd', 0]);
    }
}
