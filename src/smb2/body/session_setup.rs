//! SMB2 SESSION_SETUP request (2.2.5) and response (2.2.6): what sqos needs to follow a session
//! over its channels — the request's binding flag and the response's session flags.

use nom::number::complete::{le_u16, le_u32, le_u64, le_u8};
use nom::Parser;

use super::{fixed, run, structure};
use crate::smb2::error::Smb2Error;

pub(super) const REQUEST_FIXED: usize = 24;
pub(super) const RESPONSE_FIXED: usize = 8;

/// SMB2_SESSION_FLAG_BINDING (request Flags, SMB 3.x): bind an existing session to this
/// connection, i.e. a new channel of the session (MS-SMB2 3.2.4.2.3, 3.3.5.5).
pub const SESSION_FLAG_BINDING: u8 = 0x01;
/// SMB2_SESSION_FLAG_ENCRYPT_DATA (response SessionFlags): the server encrypts this session.
pub const SESSION_FLAG_ENCRYPT_DATA: u16 = 0x0004;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSetupRequest {
    pub flags: u8,
    pub security_mode: u8,
    pub capabilities: u32,
    pub security_buffer_offset: u16,
    pub security_buffer_length: u16,
    pub previous_session_id: u64,
}

impl SessionSetupRequest {
    /// The request binds the session in its header to this connection (a new channel).
    pub fn is_binding(&self) -> bool {
        self.flags & SESSION_FLAG_BINDING != 0
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSetupResponse {
    pub session_flags: u16,
    pub security_buffer_offset: u16,
    pub security_buffer_length: u16,
}

pub fn parse_session_setup_request(part: &[u8]) -> Result<SessionSetupRequest, Smb2Error> {
    let body = fixed(part, "SESSION_SETUP request", REQUEST_FIXED, 25)?;
    run(
        "SESSION_SETUP request",
        body,
        (
            structure, le_u8, le_u8, le_u32, le_u32, // Channel (reserved)
            le_u16, le_u16, le_u64,
        )
            .map(
                |(_, flags, security_mode, capabilities, _, off, len, previous_session_id)| {
                    SessionSetupRequest {
                        flags,
                        security_mode,
                        capabilities,
                        security_buffer_offset: off,
                        security_buffer_length: len,
                        previous_session_id,
                    }
                },
            ),
    )
}

/// The response body (StructureSize 9, like the ERROR response: the command and status tell
/// them apart, see [`super::parse_body`]).
pub fn parse_session_setup_response(part: &[u8]) -> Result<SessionSetupResponse, Smb2Error> {
    let body = fixed(part, "SESSION_SETUP response", RESPONSE_FIXED, 9)?;
    run(
        "SESSION_SETUP response",
        body,
        (structure, le_u16, le_u16, le_u16).map(|(_, session_flags, off, len)| {
            SessionSetupResponse {
                session_flags,
                security_buffer_offset: off,
                security_buffer_length: len,
            }
        }),
    )
}
