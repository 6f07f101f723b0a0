//! SMB2 command bodies sqos needs (CREATE, CLOSE, IOCTL, READ, WRITE; SESSION_SETUP and
//! TREE_CONNECT for channels and share names). Every parser is a pure function over the bytes of
//! one compound part (starting at its SMB2 header, since SMB2 offsets count from there)
//! returning a typed value.

mod close;
mod create;
mod error_response;
mod ioctl;
mod negotiate;
mod read_write;
mod session_setup;
mod tree_connect;

pub use close::{parse_close_request, parse_close_response, CloseRequest, CloseResponse};
pub use create::{parse_create_request, parse_create_response, CreateRequest, CreateResponse};
pub use error_response::{parse_error_response, ErrorResponse};
pub use ioctl::{
    parse_ioctl_request, parse_ioctl_response, peek_ctl_code, IoctlRequest, IoctlResponse,
    IOCTL_IS_FSCTL,
};
pub use negotiate::{parse_negotiate_response, NegotiateResponse};
pub use read_write::{
    parse_read_request, parse_read_response, parse_write_request, parse_write_response,
    ReadRequest, ReadResponse, WriteRequest, WriteResponse,
};
pub use session_setup::{
    parse_session_setup_request, parse_session_setup_response, SessionSetupRequest,
    SessionSetupResponse, SESSION_FLAG_BINDING, SESSION_FLAG_ENCRYPT_DATA,
};
pub use tree_connect::{
    parse_tree_connect_request, parse_tree_connect_response, TreeConnectRequest,
    TreeConnectResponse, TREE_CONNECT_FLAG_EXTENSION_PRESENT,
};

use nom::number::complete::{le_u16, le_u64};
use nom::{IResult, Parser};

use super::error::{truncated, Smb2Error};
use super::header::{Header, HEADER_LEN};
use super::names::{Command, NtStatus};
use crate::smb2::file_id::FileId;

/// A decoded body, by command and direction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    CreateRequest(CreateRequest),
    CreateResponse(CreateResponse),
    CloseRequest(CloseRequest),
    CloseResponse(CloseResponse),
    IoctlRequest(IoctlRequest),
    IoctlResponse(IoctlResponse),
    ReadRequest(ReadRequest),
    ReadResponse(ReadResponse),
    WriteRequest(WriteRequest),
    WriteResponse(WriteResponse),
    SessionSetupRequest(SessionSetupRequest),
    SessionSetupResponse(SessionSetupResponse),
    TreeConnectRequest(TreeConnectRequest),
    TreeConnectResponse(TreeConnectResponse),
    /// SMB2 ERROR Response (StructureSize 9), any command.
    Error(ErrorResponse),
    /// A command whose body sqos does not decode.
    NotDecoded,
}

/// StructureSize of the SMB2 ERROR Response.
const ERROR_STRUCTURE_SIZE: u16 = 9;

/// Decode the body of `part` (which starts at its header) according to the header.
pub fn parse_body(header: &Header, part: &[u8]) -> Result<Body, Smb2Error> {
    let resp = header.is_response();
    // The SESSION_SETUP response is the one success body of StructureSize 9: it is sent with
    // STATUS_SUCCESS, or STATUS_MORE_PROCESSING_REQUIRED between authentication legs.
    if resp
        && header.command == Command::SESSION_SETUP
        && (header.status == NtStatus::SUCCESS
            || header.status == NtStatus::MORE_PROCESSING_REQUIRED)
    {
        return parse_session_setup_response(part).map(Body::SessionSetupResponse);
    }
    if resp && structure_size(part) == Some(ERROR_STRUCTURE_SIZE) {
        // Any command can answer with the error body; other success bodies never have size 9.
        return parse_error_response(part).map(Body::Error);
    }
    Ok(match header.command {
        Command::CREATE if resp => Body::CreateResponse(parse_create_response(part)?),
        Command::CREATE => Body::CreateRequest(parse_create_request(part)?),
        Command::CLOSE if resp => Body::CloseResponse(parse_close_response(part)?),
        Command::CLOSE => Body::CloseRequest(parse_close_request(part)?),
        Command::IOCTL if resp => Body::IoctlResponse(parse_ioctl_response(part)?),
        Command::IOCTL => Body::IoctlRequest(parse_ioctl_request(part)?),
        Command::READ if resp => Body::ReadResponse(parse_read_response(part)?),
        Command::READ => Body::ReadRequest(parse_read_request(part)?),
        Command::WRITE if resp => Body::WriteResponse(parse_write_response(part)?),
        Command::WRITE => Body::WriteRequest(parse_write_request(part)?),
        Command::SESSION_SETUP => Body::SessionSetupRequest(parse_session_setup_request(part)?),
        Command::TREE_CONNECT if resp => {
            Body::TreeConnectResponse(parse_tree_connect_response(part)?)
        }
        Command::TREE_CONNECT => Body::TreeConnectRequest(parse_tree_connect_request(part)?),
        _ => Body::NotDecoded,
    })
}

/// The longest fixed body [`fixed_body_len`] gives (CREATE's response): a part's header and
/// fixed body fit in `HEADER_LEN + MAX_FIXED_BODY_LEN` bytes.
pub const MAX_FIXED_BODY_LEN: usize = create::RESPONSE_FIXED;

/// Size of the fixed part of a body sqos decodes (StructureSize rounded down to even), or 8
/// (enough for an ERROR Response) for the others. The framer keeps this much of every part.
pub fn fixed_body_len(command: Command, is_response: bool) -> usize {
    match (command, is_response) {
        (Command::CREATE, false) => create::REQUEST_FIXED,
        (Command::CREATE, true) => create::RESPONSE_FIXED,
        (Command::CLOSE, false) => close::REQUEST_FIXED,
        (Command::CLOSE, true) => close::RESPONSE_FIXED,
        (Command::IOCTL, false) => ioctl::REQUEST_FIXED,
        (Command::IOCTL, true) => ioctl::RESPONSE_FIXED,
        (Command::READ, false) => read_write::READ_REQUEST_FIXED,
        (Command::READ, true) => read_write::READ_RESPONSE_FIXED,
        (Command::WRITE, false) => read_write::WRITE_REQUEST_FIXED,
        (Command::WRITE, true) => read_write::WRITE_RESPONSE_FIXED,
        (Command::SESSION_SETUP, false) => session_setup::REQUEST_FIXED,
        (Command::SESSION_SETUP, true) => session_setup::RESPONSE_FIXED,
        (Command::TREE_CONNECT, false) => tree_connect::REQUEST_FIXED,
        (Command::TREE_CONNECT, true) => tree_connect::RESPONSE_FIXED,
        _ => error_response::FIXED,
    }
}

/// The body's StructureSize, if the part is long enough to hold it.
pub fn structure_size(part: &[u8]) -> Option<u16> {
    let b = part.get(HEADER_LEN..HEADER_LEN + 2)?;
    Some(u16::from_le_bytes([*b.first()?, *b.get(1)?]))
}

/// A variable-length buffer located by an offset (from the header) and a length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Located<'a> {
    /// The bytes available (fewer than announced when the part was cut short).
    pub bytes: &'a [u8],
    /// Bytes announced but not present.
    pub missing: usize,
}

impl Located<'_> {
    pub fn is_truncated(&self) -> bool {
        self.missing > 0
    }
}

/// Locate `len` bytes at `offset` of `part`, honouring the offset; bytes beyond the end of `part`
/// are reported as missing rather than failing, so a cut-off buffer is still shown.
pub fn locate(part: &[u8], offset: u32, len: u32) -> Located<'_> {
    let (Ok(off), Ok(len)) = (usize::try_from(offset), usize::try_from(len)) else {
        return Located {
            bytes: &[],
            missing: usize::MAX,
        };
    };
    if len == 0 {
        return Located {
            bytes: &[],
            missing: 0,
        };
    }
    let start = off.min(part.len());
    let end = off.saturating_add(len).min(part.len());
    let bytes = part.get(start..end).unwrap_or(&[]);
    Located {
        bytes,
        missing: len - bytes.len(),
    }
}

/// The fixed part of a body: `len` bytes after the header, with its StructureSize checked.
fn fixed<'a>(
    part: &'a [u8],
    what: &'static str,
    len: usize,
    structure_size: u16,
) -> Result<&'a [u8], Smb2Error> {
    let body = part
        .get(HEADER_LEN..HEADER_LEN + len)
        .ok_or_else(|| truncated(what, HEADER_LEN + len, part.len()))?;
    let found = self::structure_size(part).ok_or_else(|| truncated(what, HEADER_LEN + 2, 0))?;
    if found != structure_size {
        return Err(Smb2Error::StructureSize {
            what,
            expected: structure_size,
            found,
        });
    }
    Ok(body)
}

/// A FileId: persistent then volatile, 8 bytes each.
fn file_id(i: &[u8]) -> IResult<&[u8], FileId> {
    let (i, (persistent, volatile)) = (le_u64, le_u64).parse(i)?;
    Ok((
        i,
        FileId {
            persistent,
            volatile,
        },
    ))
}

/// Skip the StructureSize field (already checked by [`fixed`]).
fn structure(i: &[u8]) -> IResult<&[u8], u16> {
    le_u16(i)
}

/// Run a nom parser over a fixed body that has the right length; failing is a bug in the length
/// constants, reported as truncation rather than a panic.
fn run<'a, T>(
    what: &'static str,
    body: &'a [u8],
    mut p: impl Parser<&'a [u8], Output = T, Error = nom::error::Error<&'a [u8]>>,
) -> Result<T, Smb2Error> {
    p.parse(body)
        .map(|(_, v)| v)
        .map_err(|_| truncated(what, body.len() + 1, body.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_fixed_body_is_longer_than_the_longest() {
        let longest = (0..=u16::MAX)
            .flat_map(|c| [false, true].map(|r| fixed_body_len(Command(c), r)))
            .max();
        assert_eq!(longest, Some(MAX_FIXED_BODY_LEN));
    }
}
