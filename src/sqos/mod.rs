//! MS-SQOS codec: STORAGE_QOS_CONTROL_REQUEST / RESPONSE (dialects 1.0 and 1.1), their encoder,
//! and the findings ("expert info") about one message.
//!
//! The byte layout is stated once, in `layout.rs` (the table parse, encode and the faces read);
//! the decisions where the spec contradicts itself are there and in docs/sqos-codec.md, with the
//! table of finding codes.

pub mod encode;
pub mod field;
pub mod findings;
pub mod layout;
pub mod model;
mod names;
pub mod parse;
mod reader;
pub mod rules;

pub use encode::{encode_request, encode_request_with, encode_response, NamePlacement};
pub use field::{Field, FieldValue};
pub use findings::{Finding, FindingCode, Severity};
pub use model::*;
pub use parse::{parse_request, parse_response, DecodeError, Dissection};
pub use rules::{check_max_output, check_request, check_response, check_response_against_request};
