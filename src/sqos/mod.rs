//! MS-SQOS codec: STORAGE_QOS_CONTROL_REQUEST / RESPONSE (dialects 1.0 and 1.1), their encoder,
//! and the findings ("expert info") about one message.
//!
//! Layout decisions where the spec contradicts itself are documented in `layout.rs` and README.

pub mod encode;
pub mod findings;
pub mod model;
pub mod parse;

pub use encode::{encode_request, encode_response};
pub use findings::{Finding, FindingCode, Severity};
pub use model::*;
pub use parse::{parse_request, parse_response, DecodeError, Dissection, Field, FieldValue};
