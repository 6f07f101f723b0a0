//! nom parsers: bytes → typed request / response. STUB: owned by the codec work.

use serde::Serialize;
use thiserror::Error;
use uuid::Uuid;

use super::{Finding, Options, ProtocolVersion, Request, Response, Status};

#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize)]
pub enum DecodeError {
    #[error("buffer of {len} bytes is shorter than the {needed}-byte fixed part")]
    Short { len: usize, needed: usize },
}

/// A decoded wire field with its place in the buffer (for field trees and hex highlighting).
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

/// What the decoder made of one buffer: the message when the fixed part was complete, every
/// field it could read (also for short buffers), the findings and the error that stopped it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Dissection<T> {
    pub message: Option<T>,
    pub fields: Vec<Field>,
    pub findings: Vec<Finding>,
    pub error: Option<DecodeError>,
}

pub fn parse_request(buf: &[u8]) -> Dissection<Request> {
    let _ = buf;
    Dissection {
        message: None,
        fields: vec![],
        findings: vec![],
        error: None,
    }
}

pub fn parse_response(buf: &[u8]) -> Dissection<Response> {
    let _ = buf;
    Dissection {
        message: None,
        fields: vec![],
        findings: vec![],
        error: None,
    }
}
