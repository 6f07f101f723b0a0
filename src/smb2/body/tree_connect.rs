//! SMB2 TREE_CONNECT request (2.2.9) and response (2.2.10): the share path a TreeId stands for.

use nom::number::complete::{le_u16, le_u32, le_u8};
use nom::Parser;

use super::create::utf16le;
use super::{fixed, locate, run, structure};
use crate::smb2::error::Smb2Error;

pub(super) const REQUEST_FIXED: usize = 8;
pub(super) const RESPONSE_FIXED: usize = 16;

/// SMB2_TREE_CONNECT_FLAG_EXTENSION_PRESENT (3.1.1): the Buffer starts with the request
/// extension; PathOffset/PathLength still locate the path name inside it (2.2.9.1).
pub const TREE_CONNECT_FLAG_EXTENSION_PRESENT: u16 = 0x0004;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeConnectRequest {
    /// Flags in 3.1.1, Reserved before.
    pub flags: u16,
    pub path_offset: u16,
    pub path_length: u16,
    /// The share path (`\\server\share`) from UTF-16LE; `None` if the part does not hold it.
    pub path: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeConnectResponse {
    /// 1 disk, 2 pipe, 3 printer.
    pub share_type: u8,
    pub share_flags: u32,
    pub capabilities: u32,
    pub maximal_access: u32,
}

pub fn parse_tree_connect_request(part: &[u8]) -> Result<TreeConnectRequest, Smb2Error> {
    let body = fixed(part, "TREE_CONNECT request", REQUEST_FIXED, 9)?;
    let (flags, path_offset, path_length) = run(
        "TREE_CONNECT request",
        body,
        (structure, le_u16, le_u16, le_u16).map(|(_, f, o, l)| (f, o, l)),
    )?;
    let located = locate(part, u32::from(path_offset), u32::from(path_length));
    let path = (!located.is_truncated()).then(|| utf16le(located.bytes));
    Ok(TreeConnectRequest {
        flags,
        path_offset,
        path_length,
        path,
    })
}

pub fn parse_tree_connect_response(part: &[u8]) -> Result<TreeConnectResponse, Smb2Error> {
    let body = fixed(part, "TREE_CONNECT response", RESPONSE_FIXED, 16)?;
    run(
        "TREE_CONNECT response",
        body,
        (structure, le_u8, le_u8, le_u32, le_u32, le_u32).map(
            |(_, share_type, _, share_flags, capabilities, maximal_access)| TreeConnectResponse {
                share_type,
                share_flags,
                capabilities,
                maximal_access,
            },
        ),
    )
}
