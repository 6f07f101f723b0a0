//! A decoded wire field: its name, place in the buffer and value — what the field tree, the hex
//! highlighting and the JSON keys are made from.

use serde::Serialize;
use uuid::Uuid;

use super::{Options, ProtocolVersion, Status};

/// A decoded wire field with its place in the buffer (for field trees and hex highlighting).
/// `offset + len` never exceeds the buffer's length.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Field {
    pub name: &'static str,
    pub offset: usize,
    pub len: usize,
    pub value: FieldValue,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum FieldValue {
    U16(u16),
    U32(u32),
    U64(u64),
    Guid(Uuid),
    Version(ProtocolVersion),
    Options(Options),
    Status(Status),
    Text(String),
    Bytes,
}

impl FieldValue {
    /// Appends the value's wire bytes (little-endian; GUIDs in Microsoft's mixed-endian order).
    /// Text and undecoded bytes have no fixed encoding and append nothing.
    pub(crate) fn put_le(&self, out: &mut Vec<u8>) {
        match self {
            FieldValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
            FieldValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
            FieldValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
            FieldValue::Guid(g) => out.extend_from_slice(&g.to_bytes_le()),
            FieldValue::Version(v) => out.extend_from_slice(&v.0.to_le_bytes()),
            FieldValue::Options(o) => out.extend_from_slice(&o.bits().to_le_bytes()),
            FieldValue::Status(s) => out.extend_from_slice(&s.0.to_le_bytes()),
            FieldValue::Text(_) | FieldValue::Bytes => {}
        }
    }
}
