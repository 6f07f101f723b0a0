//! Reads fixed fields at the offsets of the layout table and records each one (name, offset,
//! length, value), so short buffers still yield every field read before the end.

use super::field::Field;
use super::layout::{WireField, WireValue};

pub(crate) struct FieldReader<'a> {
    buf: &'a [u8],
    fields: Vec<Field>,
}

impl<'a> FieldReader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> FieldReader<'a> {
        FieldReader {
            buf,
            fields: Vec::with_capacity(24),
        }
    }

    pub(crate) fn into_fields(self) -> Vec<Field> {
        self.fields
    }

    /// The field's value and a record of it; `None` (and no record) when the buffer ends first.
    pub(crate) fn get<T: WireValue>(&mut self, field: WireField<T>) -> Option<T> {
        let (_, v) = T::read(self.buf.get(field.offset()..)?).ok()?;
        self.fields.push(Field {
            name: field.def.name,
            offset: field.offset(),
            len: field.def.width(),
            value: v.value(),
        });
        Some(v)
    }

    /// Records a field that was located elsewhere (the names).
    pub(crate) fn record(&mut self, field: Field) {
        self.fields.push(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqos::layout::request;

    #[test]
    fn failed_read_records_nothing() {
        let mut r = FieldReader::new(&[1, 0, 2, 0, 7]);
        assert_eq!(
            r.get(request::PROTOCOL_VERSION),
            Some(crate::sqos::ProtocolVersion(1))
        );
        assert_eq!(r.get(request::RESERVED), Some(2));
        assert_eq!(r.get(request::OPTIONS), None);
        let f = r.into_fields();
        assert_eq!(f.len(), 2);
        assert_eq!((f[1].name, f[1].offset, f[1].len), ("Reserved", 2, 2));
    }
}
