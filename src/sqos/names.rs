//! InitiatorName / InitiatorNodeName: UTF-16LE strings located by offset and length fields
//! relative to the start of the request. A name is decoded only when its bytes lie after the
//! fixed part and inside the buffer, its length is even and the bytes are valid UTF-16;
//! everything else becomes a finding.

use std::ops::Range;

use super::field::{Field, FieldValue};
use super::findings::{Finding, FindingCode};
use super::layout::SPEC_TEXT_MIN_NAME_OFFSET;
use super::STORAGE_QOS_INITIATOR_NAME_SIZE;

/// One name as the fixed part declares it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NameRef {
    /// Spec name of the string field, e.g. "InitiatorName".
    pub label: &'static str,
    pub offset: u16,
    pub length: u16,
}

impl NameRef {
    fn range(&self) -> Range<usize> {
        let start = usize::from(self.offset);
        start..start + usize::from(self.length)
    }
}

/// What reading one name gave.
#[derive(Debug, Default)]
pub(crate) struct NameRead {
    /// The decoded string.
    pub text: Option<String>,
    /// The bytes of the buffer the name covers when it starts after the fixed part (also when
    /// it did not decode or runs past the end), for the extent of the structure.
    pub range: Option<Range<usize>>,
}

/// Decodes UTF-16LE; on an unpaired surrogate gives its byte position and value.
pub(crate) fn decode_utf16le(bytes: &[u8]) -> Result<String, (usize, u16)> {
    let units = bytes
        .chunks_exact(2)
        .map(|c| <[u8; 2]>::try_from(c).map_or(0, u16::from_le_bytes));
    let mut out = String::with_capacity(bytes.len() / 2);
    let mut pos = 0usize;
    for r in char::decode_utf16(units) {
        match r {
            Ok(c) => {
                pos += c.len_utf16() * 2;
                out.push(c);
            }
            Err(e) => return Err((pos, e.unpaired_surrogate())),
        }
    }
    Ok(out)
}

/// Reads one name from `buf`; records a field for bytes it could locate and findings for
/// whatever is wrong.
pub(crate) fn read_name(
    buf: &[u8],
    fixed_len: usize,
    name: NameRef,
    fields: &mut Vec<Field>,
    findings: &mut Vec<Finding>,
) -> NameRead {
    let label = name.label;
    if name.length == 0 {
        return NameRead::default();
    }
    if name.length > STORAGE_QOS_INITIATOR_NAME_SIZE {
        findings.push(Finding::new(
            FindingCode::NameTooLong,
            format!(
                "{label}Length {} is above STORAGE_QOS_INITIATOR_NAME_SIZE (0x200 = 512 bytes); \
                 a server MUST reject it with STATUS_INVALID_PARAMETER for SET_POLICY/PROBE_POLICY",
                name.length
            ),
        ));
    }
    let odd = name.length % 2 == 1;
    if odd {
        findings.push(Finding::new(
            FindingCode::NameLengthOdd,
            format!(
                "{label}Length {} is odd; a UTF-16 string has an even number of bytes",
                name.length
            ),
        ));
    }
    let range = name.range();
    if range.start < fixed_len {
        let text_rule = if range.start < SPEC_TEXT_MIN_NAME_OFFSET {
            format!("and below the spec text's minimum of {SPEC_TEXT_MIN_NAME_OFFSET}")
        } else {
            format!(
                "(the spec text's minimum of {SPEC_TEXT_MIN_NAME_OFFSET}, section 3.2.5.1.2, \
                 is itself inside the fixed part)"
            )
        };
        findings.push(Finding::new(
            FindingCode::NameOffsetInFixedPart,
            format!(
                "{label}Offset {} points inside the {fixed_len}-byte fixed part {text_rule}; \
                 the name is not decoded",
                name.offset
            ),
        ));
        return NameRead::default();
    }
    let Some(bytes) = buf.get(range.clone()) else {
        findings.push(Finding::new(
            FindingCode::NameOutOfBounds,
            format!(
                "{label}Offset {} + {label}Length {} = {} is past the end of the {}-byte buffer",
                name.offset,
                name.length,
                range.end,
                buf.len()
            ),
        ));
        // The part inside the buffer still belongs to the name, not to trailing bytes.
        let inside = range.start..range.end.min(buf.len());
        return NameRead {
            text: None,
            range: (!inside.is_empty()).then_some(inside),
        };
    };
    let mut field = Field {
        name: label,
        offset: range.start,
        len: bytes.len(),
        value: FieldValue::Bytes,
    };
    let mut text = None;
    if !odd {
        match decode_utf16le(bytes) {
            Ok(s) => {
                if s.ends_with('\0') {
                    findings.push(Finding::new(
                        FindingCode::NameNullTerminated,
                        format!(
                            "{label} ends with a NUL character; names MUST NOT be null-terminated"
                        ),
                    ));
                }
                field.value = FieldValue::Text(s.clone());
                text = Some(s);
            }
            Err((pos, unit)) => findings.push(Finding::new(
                FindingCode::NameInvalidUtf16,
                format!(
                    "{label} is not valid UTF-16LE: unpaired surrogate 0x{unit:04X} at byte {} \
                     of the structure",
                    range.start + pos
                ),
            )),
        }
    }
    fields.push(field);
    NameRead {
        text,
        range: Some(range),
    }
}

/// The reading the spec's section 4.2 example implies when the declared offsets point into the
/// fixed part: the non-empty names one after the other, right after the fixed part. Gives the
/// decoded names with their offsets when every one of them is in bounds, even-sized and valid.
pub(crate) fn packed_after_fixed_part(
    buf: &[u8],
    fixed_len: usize,
    names: &[NameRef],
) -> Option<Vec<(&'static str, usize, String)>> {
    let mut pos = fixed_len;
    let mut out = Vec::new();
    for n in names.iter().filter(|n| n.length > 0) {
        let len = usize::from(n.length);
        if len % 2 == 1 {
            return None;
        }
        let bytes = buf.get(pos..pos + len)?;
        let s = decode_utf16le(bytes).ok()?;
        out.push((n.label, pos, s));
        pos += len;
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(u16::to_le_bytes).collect()
    }

    #[test]
    fn decodes_surrogate_pairs_and_reports_unpaired() {
        assert_eq!(
            decode_utf16le(&utf16("a\u{1F600}b")).as_deref(),
            Ok("a\u{1F600}b")
        );
        // 'a', then a lone high surrogate D83D followed by 'b'.
        let bad = [0x61, 0x00, 0x3D, 0xD8, 0x62, 0x00];
        assert_eq!(decode_utf16le(&bad), Err((2, 0xD83D)));
        // A lone low surrogate.
        assert_eq!(decode_utf16le(&[0x00, 0xDC]), Err((0, 0xDC00)));
    }

    #[test]
    fn odd_name_is_located_but_not_decoded() {
        let mut buf = vec![0u8; 112];
        buf.extend(utf16("AB"));
        let (mut fields, mut findings) = (vec![], vec![]);
        let n = NameRef {
            label: "InitiatorName",
            offset: 112,
            length: 3,
        };
        let r = read_name(&buf, 112, n, &mut fields, &mut findings);
        assert_eq!(r.text, None);
        assert_eq!(r.range, Some(112..115));
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].code, FindingCode::NameLengthOdd);
        assert_eq!(fields[0].value, FieldValue::Bytes);
        assert_eq!((fields[0].offset, fields[0].len), (112, 3));
    }
}
