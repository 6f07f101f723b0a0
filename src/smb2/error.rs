//! Typed errors of the SMB2 parsers.

use thiserror::Error;

/// Why an SMB2 header or body could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Smb2Error {
    /// Fewer bytes than the structure needs.
    #[error("{what}: {needed} bytes needed, {available} available")]
    Truncated {
        what: &'static str,
        needed: usize,
        available: usize,
    },
    /// The StructureSize field does not have the value the spec fixes for this structure.
    #[error("{what}: StructureSize {found}, expected {expected}")]
    StructureSize {
        what: &'static str,
        expected: u16,
        found: u16,
    },
    /// The first four bytes are not a protocol identifier this crate knows.
    #[error("unknown protocol id {0:02x?}")]
    UnknownProtocol([u8; 4]),
    /// An offset/length pair points outside the message.
    #[error("{what}: offset {offset} + length {len} is outside the {available}-byte message")]
    OutOfBounds {
        what: &'static str,
        offset: usize,
        len: usize,
        available: usize,
    },
}

/// Maps a nom failure on a fixed-size structure to [`Smb2Error::Truncated`].
pub(crate) fn truncated(what: &'static str, needed: usize, available: usize) -> Smb2Error {
    Smb2Error::Truncated {
        what,
        needed,
        available,
    }
}
