//! SMB2 READ (2.2.19, 2.2.20) and WRITE (2.2.21, 2.2.22): only the fixed parts; the data is
//! never copied.

use nom::bytes::complete::take;
use nom::number::complete::{le_u16, le_u32, le_u64, le_u8};
use nom::Parser;

use super::{file_id, fixed, run, structure};
use crate::smb2::error::Smb2Error;
use crate::smb2::file_id::FileId;

pub(super) const READ_REQUEST_FIXED: usize = 48;
pub(super) const READ_RESPONSE_FIXED: usize = 16;
pub(super) const WRITE_REQUEST_FIXED: usize = 48;
pub(super) const WRITE_RESPONSE_FIXED: usize = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    pub length: u32,
    pub offset: u64,
    pub file_id: FileId,
    pub minimum_count: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadResponse {
    pub data_offset: u8,
    pub data_length: u32,
    pub data_remaining: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRequest {
    pub data_offset: u16,
    pub length: u32,
    pub offset: u64,
    pub file_id: FileId,
    pub flags: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteResponse {
    pub count: u32,
    pub remaining: u32,
}

pub fn parse_read_request(part: &[u8]) -> Result<ReadRequest, Smb2Error> {
    let body = fixed(part, "READ request", READ_REQUEST_FIXED, 49)?;
    run(
        "READ request",
        body,
        (structure, take(2usize), le_u32, le_u64, file_id, le_u32).map(
            |(_, _, length, offset, file_id, minimum_count)| ReadRequest {
                length,
                offset,
                file_id,
                minimum_count,
            },
        ),
    )
}

pub fn parse_read_response(part: &[u8]) -> Result<ReadResponse, Smb2Error> {
    let body = fixed(part, "READ response", READ_RESPONSE_FIXED, 17)?;
    run(
        "READ response",
        body,
        (structure, le_u8, le_u8, le_u32, le_u32).map(
            |(_, data_offset, _, data_length, data_remaining)| ReadResponse {
                data_offset,
                data_length,
                data_remaining,
            },
        ),
    )
}

pub fn parse_write_request(part: &[u8]) -> Result<WriteRequest, Smb2Error> {
    let body = fixed(part, "WRITE request", WRITE_REQUEST_FIXED, 49)?;
    run(
        "WRITE request",
        body,
        (
            structure,
            le_u16,
            le_u32,
            le_u64,
            file_id,
            take(12usize), // Channel, RemainingBytes, WriteChannelInfoOffset/Length
            le_u32,
        )
            .map(
                |(_, data_offset, length, offset, file_id, _, flags)| WriteRequest {
                    data_offset,
                    length,
                    offset,
                    file_id,
                    flags,
                },
            ),
    )
}

pub fn parse_write_response(part: &[u8]) -> Result<WriteResponse, Smb2Error> {
    let body = fixed(part, "WRITE response", WRITE_RESPONSE_FIXED, 17)?;
    run(
        "WRITE response",
        body,
        (structure, le_u16, le_u32, le_u32)
            .map(|(_, _, count, remaining)| WriteResponse { count, remaining }),
    )
}
