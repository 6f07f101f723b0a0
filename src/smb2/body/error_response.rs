//! SMB2 ERROR Response (2.2.2): StructureSize 9, sent for failures and interim responses.

use nom::number::complete::{le_u32, le_u8};
use nom::Parser;

use super::{fixed, locate, run, structure};
use crate::smb2::error::Smb2Error;

pub(super) const FIXED: usize = 8;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorResponse {
    pub error_context_count: u8,
    pub byte_count: u32,
    /// ErrorData bytes present in the part.
    pub error_data_len: usize,
}

pub fn parse_error_response(part: &[u8]) -> Result<ErrorResponse, Smb2Error> {
    let body = fixed(part, "ERROR response", FIXED, 9)?;
    let (error_context_count, byte_count) = run(
        "ERROR response",
        body,
        (structure, le_u8, le_u8, le_u32).map(|(_, c, _, n)| (c, n)),
    )?;
    let data = locate(part, 64 + 8, byte_count);
    Ok(ErrorResponse {
        error_context_count,
        byte_count,
        error_data_len: data.bytes.len(),
    })
}
