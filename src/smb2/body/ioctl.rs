//! SMB2 IOCTL request (2.2.31) and response (2.2.32). The input/output buffers are located by
//! their offsets (from the header), never assumed to follow the fixed part.

use nom::number::complete::{le_u16, le_u32};
use nom::Parser;

use super::{file_id, fixed, locate, run, structure, Located};
use crate::smb2::error::Smb2Error;
use crate::smb2::file_id::FileId;

pub(super) const REQUEST_FIXED: usize = 56;
pub(super) const RESPONSE_FIXED: usize = 48;

/// SMB2_0_IOCTL_IS_FSCTL.
pub const IOCTL_IS_FSCTL: u32 = 0x0000_0001;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoctlRequest {
    pub ctl_code: u32,
    pub file_id: FileId,
    pub input_offset: u32,
    pub input_count: u32,
    pub max_input_response: u32,
    pub output_offset: u32,
    pub output_count: u32,
    pub max_output_response: u32,
    pub flags: u32,
}

impl IoctlRequest {
    /// The input buffer within `part` (the bytes this IOCTL carries to the server).
    pub fn input<'a>(&self, part: &'a [u8]) -> Located<'a> {
        locate(part, self.input_offset, self.input_count)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoctlResponse {
    pub ctl_code: u32,
    pub file_id: FileId,
    pub input_offset: u32,
    pub input_count: u32,
    pub output_offset: u32,
    pub output_count: u32,
    pub flags: u32,
}

impl IoctlResponse {
    /// The output buffer within `part` (the server's answer).
    pub fn output<'a>(&self, part: &'a [u8]) -> Located<'a> {
        locate(part, self.output_offset, self.output_count)
    }
}

pub fn parse_ioctl_request(part: &[u8]) -> Result<IoctlRequest, Smb2Error> {
    let body = fixed(part, "IOCTL request", REQUEST_FIXED, 57)?;
    run(
        "IOCTL request",
        body,
        (
            structure, le_u16, le_u32, file_id, le_u32, le_u32, le_u32, le_u32, le_u32, le_u32,
            le_u32,
        )
            .map(
                |(
                    _,
                    _,
                    ctl_code,
                    file_id,
                    input_offset,
                    input_count,
                    max_input_response,
                    output_offset,
                    output_count,
                    max_output_response,
                    flags,
                )| IoctlRequest {
                    ctl_code,
                    file_id,
                    input_offset,
                    input_count,
                    max_input_response,
                    output_offset,
                    output_count,
                    max_output_response,
                    flags,
                },
            ),
    )
}

pub fn parse_ioctl_response(part: &[u8]) -> Result<IoctlResponse, Smb2Error> {
    let body = fixed(part, "IOCTL response", RESPONSE_FIXED, 49)?;
    run(
        "IOCTL response",
        body,
        (
            structure, le_u16, le_u32, file_id, le_u32, le_u32, le_u32, le_u32, le_u32,
        )
            .map(
                |(
                    _,
                    _,
                    ctl_code,
                    file_id,
                    input_offset,
                    input_count,
                    output_offset,
                    output_count,
                    flags,
                )| IoctlResponse {
                    ctl_code,
                    file_id,
                    input_offset,
                    input_count,
                    output_offset,
                    output_count,
                    flags,
                },
            ),
    )
}

/// The CtlCode of an IOCTL part (request or response) from its fixed body, without decoding the
/// rest: the framer uses it to decide whether the buffers are worth keeping.
pub fn peek_ctl_code(part: &[u8]) -> Option<u32> {
    let b = part.get(64 + 4..64 + 8)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}
