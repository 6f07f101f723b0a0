//! SMB2 CLOSE request (2.2.15) and response (2.2.16).

use nom::bytes::complete::take;
use nom::number::complete::le_u16;
use nom::Parser;

use super::{file_id, fixed, run, structure};
use crate::smb2::error::Smb2Error;
use crate::smb2::file_id::FileId;

pub(super) const REQUEST_FIXED: usize = 24;
pub(super) const RESPONSE_FIXED: usize = 60;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseRequest {
    pub flags: u16,
    pub file_id: FileId,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseResponse {
    pub flags: u16,
}

pub fn parse_close_request(part: &[u8]) -> Result<CloseRequest, Smb2Error> {
    let body = fixed(part, "CLOSE request", REQUEST_FIXED, 24)?;
    run(
        "CLOSE request",
        body,
        (structure, le_u16, take(4usize), file_id)
            .map(|(_, flags, _, file_id)| CloseRequest { flags, file_id }),
    )
}

pub fn parse_close_response(part: &[u8]) -> Result<CloseResponse, Smb2Error> {
    let body = fixed(part, "CLOSE response", RESPONSE_FIXED, 60)?;
    run(
        "CLOSE response",
        body,
        (structure, le_u16).map(|(_, flags)| CloseResponse { flags }),
    )
}
