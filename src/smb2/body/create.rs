//! SMB2 CREATE request (2.2.13) and response (2.2.14): the file name and the FileId of an open.

use nom::bytes::complete::take;
use nom::number::complete::{le_u16, le_u32, le_u64, le_u8};
use nom::Parser;

use super::{file_id, fixed, locate, run, structure};
use crate::smb2::error::Smb2Error;
use crate::smb2::file_id::FileId;

pub(super) const REQUEST_FIXED: usize = 56;
pub(super) const RESPONSE_FIXED: usize = 88;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateRequest {
    pub desired_access: u32,
    pub create_disposition: u32,
    pub create_options: u32,
    pub name_offset: u16,
    pub name_length: u16,
    /// The name decoded from UTF-16LE (lossy); `None` if the part does not hold all of it.
    pub name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateResponse {
    pub create_action: u32,
    pub end_of_file: u64,
    pub file_attributes: u32,
    pub file_id: FileId,
}

pub fn parse_create_request(part: &[u8]) -> Result<CreateRequest, Smb2Error> {
    let body = fixed(part, "CREATE request", REQUEST_FIXED, 57)?;
    let (desired_access, create_disposition, create_options, name_offset, name_length) = run(
        "CREATE request",
        body,
        (
            structure,
            take(6usize),  // SecurityFlags, RequestedOplockLevel, ImpersonationLevel
            take(16usize), // SmbCreateFlags, Reserved
            le_u32,
            take(8usize), // FileAttributes, ShareAccess
            le_u32,
            le_u32,
            le_u16,
            le_u16,
        )
            .map(|(_, _, _, da, _, cd, co, no, nl)| (da, cd, co, no, nl)),
    )?;
    let located = locate(part, u32::from(name_offset), u32::from(name_length));
    let name = (!located.is_truncated()).then(|| utf16le(located.bytes));
    Ok(CreateRequest {
        desired_access,
        create_disposition,
        create_options,
        name_offset,
        name_length,
        name,
    })
}

pub fn parse_create_response(part: &[u8]) -> Result<CreateResponse, Smb2Error> {
    let body = fixed(part, "CREATE response", RESPONSE_FIXED, 89)?;
    run(
        "CREATE response",
        body,
        (
            structure,
            le_u8,
            le_u8,
            le_u32,
            take(40usize), // four times, AllocationSize
            le_u64,
            le_u32,
            le_u32,
            file_id,
        )
            .map(
                |(_, _, _, create_action, _, end_of_file, file_attributes, _, file_id)| {
                    CreateResponse {
                        create_action,
                        end_of_file,
                        file_attributes,
                        file_id,
                    }
                },
            ),
    )
}

/// UTF-16LE to a String; an unpaired surrogate is written as its escape (`\ud800`, as
/// `output::escape` writes what it escapes), so it stays visible and distinct; an odd trailing
/// byte is ignored.
pub(crate) fn utf16le(bytes: &[u8]) -> String {
    let units = bytes.chunks_exact(2).map(|c| {
        u16::from_le_bytes([
            c.first().copied().unwrap_or(0),
            c.get(1).copied().unwrap_or(0),
        ])
    });
    let mut out = String::with_capacity(bytes.len() / 2);
    for r in char::decode_utf16(units) {
        match r {
            Ok(c) => out.push(c),
            Err(e) => out.push_str(&format!("\\u{:04x}", e.unpaired_surrogate())),
        }
    }
    out
}
