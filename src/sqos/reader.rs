//! A cursor over one buffer that reads little-endian wire fields with nom and records each one
//! (name, offset, length, value), so short buffers still yield every field read before the end.

use nom::bytes::complete::take;
use nom::combinator::map_opt;
use nom::number::complete::{le_u16, le_u32, le_u64};
use nom::{IResult, Parser};
use uuid::Uuid;

use super::parse::{Field, FieldValue};

/// A GUID in Microsoft's mixed-endian wire order (first three groups little-endian).
pub(crate) fn guid(input: &[u8]) -> IResult<&[u8], Uuid> {
    map_opt(take(16usize), |b: &[u8]| {
        <[u8; 16]>::try_from(b).ok().map(Uuid::from_bytes_le)
    })
    .parse(input)
}

pub(crate) struct FieldReader<'a> {
    rest: &'a [u8],
    len: usize,
    fields: Vec<Field>,
}

impl<'a> FieldReader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> FieldReader<'a> {
        FieldReader {
            rest: buf,
            len: buf.len(),
            fields: Vec::with_capacity(24),
        }
    }

    /// Offset of the next byte to read, from the start of the structure.
    pub(crate) fn offset(&self) -> usize {
        self.len - self.rest.len()
    }

    pub(crate) fn into_fields(self) -> Vec<Field> {
        self.fields
    }

    /// Runs `parser` at the cursor; on success records the field and advances, on failure
    /// (not enough bytes) leaves everything as it was.
    fn field<O, P>(
        &mut self,
        name: &'static str,
        mut parser: P,
        value: impl FnOnce(&O) -> FieldValue,
    ) -> Option<O>
    where
        P: Parser<&'a [u8], Output = O, Error = nom::error::Error<&'a [u8]>>,
    {
        let offset = self.offset();
        let (rest, out) = parser.parse(self.rest).ok()?;
        let len = self.rest.len() - rest.len();
        self.rest = rest;
        self.fields.push(Field {
            name,
            offset,
            len,
            value: value(&out),
        });
        Some(out)
    }

    pub(crate) fn u16(&mut self, name: &'static str) -> Option<u16> {
        self.field(name, le_u16, |v| FieldValue::U16(*v))
    }

    pub(crate) fn u32(&mut self, name: &'static str) -> Option<u32> {
        self.field(name, le_u32, |v| FieldValue::U32(*v))
    }

    pub(crate) fn u64(&mut self, name: &'static str) -> Option<u64> {
        self.field(name, le_u64, |v| FieldValue::U64(*v))
    }

    pub(crate) fn guid(&mut self, name: &'static str) -> Option<Uuid> {
        self.field(name, guid, |g| FieldValue::Guid(*g))
    }

    pub(crate) fn version(&mut self) -> Option<super::ProtocolVersion> {
        self.field("ProtocolVersion", le_u16.map(super::ProtocolVersion), |v| {
            FieldValue::Version(*v)
        })
    }

    pub(crate) fn options(&mut self) -> Option<super::Options> {
        self.field("Options", le_u32.map(super::Options), |o| {
            FieldValue::Options(*o)
        })
    }

    pub(crate) fn status(&mut self) -> Option<super::Status> {
        self.field("Status", le_u32.map(super::Status), |s| {
            FieldValue::Status(*s)
        })
    }

    /// Records a field that was located elsewhere (the names), without moving the cursor.
    pub(crate) fn record(&mut self, field: Field) {
        self.fields.push(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_is_mixed_endian() {
        let wire = [
            0xE4, 0x32, 0x3A, 0xB1, 0xAD, 0xE2, 0xB2, 0x5D, 0xA4, 0xF8, 0x5C, 0xD3, 0xBE, 0x9D,
            0x69, 0x6E, 0xFF,
        ];
        let (rest, g) = guid(&wire).unwrap();
        assert_eq!(g.to_string(), "b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e");
        assert_eq!(rest, &[0xFF]);
        assert!(guid(&wire[..15]).is_err());
    }

    #[test]
    fn failed_read_records_nothing() {
        let mut r = FieldReader::new(&[1, 0, 2]);
        assert_eq!(r.u16("A"), Some(1));
        assert_eq!(r.u16("B"), None);
        assert_eq!(r.offset(), 2);
        let f = r.into_fields();
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].name, f[0].offset, f[0].len), ("A", 0, 2));
    }
}
