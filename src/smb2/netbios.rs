//! NetBIOS session service framing (RFC 1002 as used by SMB2 over TCP 445, MS-SMB2 2.1): a 4-byte
//! header, type then a 24-bit big-endian length; and the test for "a message plausibly starts
//! here" used to resynchronise after lost data.

use super::header::{field, ProtocolId, HEADER_LEN};
use super::names::Command;

pub const NBSS_HEADER_LEN: usize = 4;
/// Larger lengths are taken as a sign of desynchronisation: SMB2 messages are at most
/// MaxRead/Write/TransactSize (8 MiB on current Windows and Samba servers) plus headers.
pub const MAX_MESSAGE_LEN: u32 = (8 << 20) + (64 << 10);
/// Bytes needed to judge a resynchronisation candidate: NBSS header + the SMB2 header up to and
/// including NextCommand.
pub const PROBE_LEN: usize = NBSS_HEADER_LEN + field::MESSAGE_ID;

/// The NBSS packet types (RFC 1002 4.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NbssType {
    SessionMessage,
    SessionRequest,
    PositiveResponse,
    NegativeResponse,
    RetargetResponse,
    KeepAlive,
}

impl NbssType {
    pub fn from_byte(b: u8) -> Option<NbssType> {
        Some(match b {
            0x00 => NbssType::SessionMessage,
            0x81 => NbssType::SessionRequest,
            0x82 => NbssType::PositiveResponse,
            0x83 => NbssType::NegativeResponse,
            0x84 => NbssType::RetargetResponse,
            0x85 => NbssType::KeepAlive,
            _ => return None,
        })
    }
}

/// Longest NBSS packet other than a session message: a session request holds two encoded
/// NetBIOS names (2 × 34 bytes); responses are shorter. Longer means we are not in step.
pub const MAX_CONTROL_LEN: u32 = 128;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NbssHeader {
    pub kind: NbssType,
    /// Length of what follows the 4-byte header.
    pub length: u32,
}

/// Decode an NBSS header; `None` when the type byte is not an NBSS type.
pub fn parse_nbss_header(b: [u8; 4]) -> Option<NbssHeader> {
    let [t, l0, l1, l2] = b;
    Some(NbssHeader {
        kind: NbssType::from_byte(t)?,
        length: u32::from_be_bytes([0, l0, l1, l2]),
    })
}

/// The NBSS header of a session message of `len` bytes (the length is 24 bits: a larger one is
/// cut to them, as on the wire).
pub fn session_message_header(len: usize) -> [u8; NBSS_HEADER_LEN] {
    (len as u32 & 0x00ff_ffff).to_be_bytes()
}

/// Does an SMB2-family message plausibly start at `b[0]` (an NBSS session message header)?
/// `b` must hold at least [`PROBE_LEN`] bytes; fewer is "no".
///
/// Checks: NBSS type 0 and a length within bounds and at least the protocol's fixed header;
/// a known protocol id; for 0xFE SMB2 also StructureSize 64, a defined command, and a NextCommand
/// that is 0 or an 8-aligned offset inside the message. Five fixed bytes plus these checks make a
/// false match inside file data very unlikely.
pub fn plausible_message_start(b: &[u8]) -> bool {
    let Some(probe) = b.get(..PROBE_LEN) else {
        return false;
    };
    let word = |at: usize| -> Option<[u8; 4]> { probe.get(at..at + 4)?.try_into().ok() };
    let Some(nb) = word(0).and_then(parse_nbss_header) else {
        return false;
    };
    if nb.kind != NbssType::SessionMessage || nb.length > MAX_MESSAGE_LEN {
        return false;
    }
    let Some(proto) = word(4).and_then(ProtocolId::from_bytes) else {
        return false;
    };
    let Ok(len) = usize::try_from(nb.length) else {
        return false;
    };
    if len < proto.min_len() {
        return false;
    }
    if proto != ProtocolId::Smb2 {
        return true;
    }
    let u16_at = |at: usize| -> Option<u16> {
        Some(u16::from_le_bytes(probe.get(at..at + 2)?.try_into().ok()?))
    };
    let at = |f: usize| NBSS_HEADER_LEN + f;
    let structure_ok = u16_at(at(field::STRUCTURE_SIZE)).map(usize::from) == Some(HEADER_LEN);
    let command_ok = u16_at(at(field::COMMAND)).is_some_and(|c| c <= Command::MAX_KNOWN);
    let next_ok = word(at(field::NEXT_COMMAND))
        .map(u32::from_le_bytes)
        .is_some_and(|n| n == 0 || (n % 8 == 0 && n as usize >= HEADER_LEN && n <= nb.length));
    structure_ok && command_ok && next_ok
}
