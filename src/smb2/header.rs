//! The 64-byte SMB2 packet header (MS-SMB2 2.2.1), sync and async forms, and the protocol ids
//! that can open an SMB2-family message.

use nom::bytes::complete::take;
use nom::number::complete::{le_u16, le_u32, le_u64};
use nom::Parser;

use super::error::{truncated, Smb2Error};
use super::names::{Command, NtStatus};

/// Size of the SMB2 header; also the value of its StructureSize field.
pub const HEADER_LEN: usize = 64;

/// Where each field of the header starts (MS-SMB2 2.2.1); [`Header::to_bytes`] writes by these,
/// and readers that look at one field of raw bytes (resynchronisation, the generator) read by
/// them. [`parse_header`] takes the same fields in this order.
pub mod field {
    pub const PROTOCOL_ID: usize = 0;
    pub const STRUCTURE_SIZE: usize = 4;
    pub const CREDIT_CHARGE: usize = 6;
    /// Status (responses) or ChannelSequence/Reserved (requests).
    pub const STATUS: usize = 8;
    pub const COMMAND: usize = 12;
    pub const CREDITS: usize = 14;
    pub const FLAGS: usize = 16;
    pub const NEXT_COMMAND: usize = 20;
    pub const MESSAGE_ID: usize = 24;
    /// ProcessId and TreeId (sync) or AsyncId (async).
    pub const FORM: usize = 32;
    pub const SESSION_ID: usize = 40;
    pub const SIGNATURE: usize = 48;
}

/// First four bytes of a message in an NBSS session message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProtocolId {
    /// 0xFE 'SMB': a plain SMB2 header.
    Smb2,
    /// 0xFD 'SMB': SMB2 TRANSFORM_HEADER (encrypted message).
    Transform,
    /// 0xFC 'SMB': SMB2 COMPRESSION_TRANSFORM_HEADER.
    Compressed,
    /// 0xFF 'SMB': SMB1.
    Smb1,
}

impl ProtocolId {
    /// Recognise a protocol id from the first four bytes of a message.
    pub fn from_bytes(b: [u8; 4]) -> Option<ProtocolId> {
        match b {
            [0xFE, b'S', b'M', b'B'] => Some(ProtocolId::Smb2),
            [0xFD, b'S', b'M', b'B'] => Some(ProtocolId::Transform),
            [0xFC, b'S', b'M', b'B'] => Some(ProtocolId::Compressed),
            [0xFF, b'S', b'M', b'B'] => Some(ProtocolId::Smb1),
            _ => None,
        }
    }

    /// Smallest size of a message that starts with this id (its fixed header).
    pub fn min_len(self) -> usize {
        match self {
            ProtocolId::Smb2 => HEADER_LEN,
            ProtocolId::Transform => 52,
            ProtocolId::Compressed => 16,
            ProtocolId::Smb1 => 32,
        }
    }
}

/// SMB2 header Flags (MS-SMB2 2.2.1.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HeaderFlags(pub u32);

impl HeaderFlags {
    pub const SERVER_TO_REDIR: u32 = 0x0000_0001;
    pub const ASYNC_COMMAND: u32 = 0x0000_0002;
    pub const RELATED_OPERATIONS: u32 = 0x0000_0004;
    pub const SIGNED: u32 = 0x0000_0008;
    pub const DFS_OPERATIONS: u32 = 0x1000_0000;
    pub const REPLAY_OPERATION: u32 = 0x2000_0000;

    pub fn is_response(self) -> bool {
        self.0 & Self::SERVER_TO_REDIR != 0
    }
    pub fn is_async(self) -> bool {
        self.0 & Self::ASYNC_COMMAND != 0
    }
    pub fn is_related(self) -> bool {
        self.0 & Self::RELATED_OPERATIONS != 0
    }
    pub fn is_signed(self) -> bool {
        self.0 & Self::SIGNED != 0
    }
    pub fn is_replay(self) -> bool {
        self.0 & Self::REPLAY_OPERATION != 0
    }
}

/// The header's bytes 32..40 differ between the two forms; the flag ASYNC_COMMAND selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeaderForm {
    Sync { process_id: u32, tree_id: u32 },
    Async { async_id: u64 },
}

/// A decoded SMB2 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// 64 per the spec; other values are kept (Wireshark decodes such headers too) and reported
    /// by [`Header::check_structure_size`].
    pub structure_size: u16,
    pub credit_charge: u16,
    /// Status in responses; ChannelSequence/Reserved in requests (kept raw).
    pub status: NtStatus,
    pub command: Command,
    /// CreditRequest (requests) or CreditResponse (responses).
    pub credits: u16,
    pub flags: HeaderFlags,
    /// Offset from this header to the next one of a compound chain, 0 for the last.
    pub next_command: u32,
    pub message_id: u64,
    pub form: HeaderForm,
    pub session_id: u64,
    pub signature: [u8; 16],
}

impl Header {
    pub fn is_response(&self) -> bool {
        self.flags.is_response()
    }
    pub fn tree_id(&self) -> Option<u32> {
        match self.form {
            HeaderForm::Sync { tree_id, .. } => Some(tree_id),
            HeaderForm::Async { .. } => None,
        }
    }
    pub fn async_id(&self) -> Option<u64> {
        match self.form {
            HeaderForm::Async { async_id } => Some(async_id),
            HeaderForm::Sync { .. } => None,
        }
    }
    /// The typed error for a StructureSize other than 64.
    pub fn check_structure_size(&self) -> Result<(), Smb2Error> {
        if usize::from(self.structure_size) == HEADER_LEN {
            Ok(())
        } else {
            Err(Smb2Error::StructureSize {
                what: "SMB2 header",
                expected: 64,
                found: self.structure_size,
            })
        }
    }
    /// Requests (SMB 3.x): ChannelSequence, the low half of the Status field.
    pub fn channel_sequence(&self) -> u16 {
        (self.status.0 & 0xFFFF) as u16
    }
    /// An interim response: async, STATUS_PENDING; the final response follows later.
    pub fn is_interim(&self) -> bool {
        self.is_response() && self.flags.is_async() && self.status == NtStatus::PENDING
    }

    /// The 64 bytes of this header (0xFE 'SMB' first), as [`parse_header`] reads them.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        let mut put = |at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(field::PROTOCOL_ID, b"\xfeSMB");
        put(field::STRUCTURE_SIZE, &self.structure_size.to_le_bytes());
        put(field::CREDIT_CHARGE, &self.credit_charge.to_le_bytes());
        put(field::STATUS, &self.status.0.to_le_bytes());
        put(field::COMMAND, &self.command.0.to_le_bytes());
        put(field::CREDITS, &self.credits.to_le_bytes());
        put(field::FLAGS, &self.flags.0.to_le_bytes());
        put(field::NEXT_COMMAND, &self.next_command.to_le_bytes());
        put(field::MESSAGE_ID, &self.message_id.to_le_bytes());
        let form = match self.form {
            HeaderForm::Async { async_id } => async_id,
            HeaderForm::Sync {
                process_id,
                tree_id,
            } => u64::from(process_id) | (u64::from(tree_id) << 32),
        };
        put(field::FORM, &form.to_le_bytes());
        put(field::SESSION_ID, &self.session_id.to_le_bytes());
        put(field::SIGNATURE, &self.signature);
        b
    }
}

/// MessageId of unsolicited server messages (oplock/lease breaks); never matched to a request.
pub const UNSOLICITED_MESSAGE_ID: u64 = u64::MAX;

/// Decode the 64-byte SMB2 header at the start of `buf`. A StructureSize other than 64 is not
/// an error here (the NBSS framing already says where the message is); see
/// [`Header::check_structure_size`].
#[inline]
pub fn parse_header(buf: &[u8]) -> Result<Header, Smb2Error> {
    let fixed = buf
        .get(..HEADER_LEN)
        .ok_or_else(|| truncated("SMB2 header", HEADER_LEN, buf.len()))?;
    let res: nom::IResult<&[u8], _> = (
        take(4usize),
        le_u16,
        le_u16,
        le_u32,
        le_u16,
        le_u16,
        le_u32,
        le_u32,
        le_u64,
        le_u64,
        le_u64,
        take(16usize),
    )
        .parse(fixed);
    let (
        _,
        (
            proto,
            structure_size,
            credit_charge,
            status,
            command,
            credits,
            flags,
            next_command,
            message_id,
            form_raw,
            session_id,
            sig,
        ),
    ) = res.map_err(|_| truncated("SMB2 header", HEADER_LEN, buf.len()))?;
    let proto: [u8; 4] = proto
        .try_into()
        .map_err(|_| truncated("SMB2 protocol id", 4, proto.len()))?;
    if ProtocolId::from_bytes(proto) != Some(ProtocolId::Smb2) {
        return Err(Smb2Error::UnknownProtocol(proto));
    }
    let flags = HeaderFlags(flags);
    let form = if flags.is_async() {
        HeaderForm::Async { async_id: form_raw }
    } else {
        // Little-endian: low half is the (reserved) process id, high half the tree id.
        HeaderForm::Sync {
            process_id: (form_raw & 0xFFFF_FFFF) as u32,
            tree_id: (form_raw >> 32) as u32,
        }
    };
    let signature: [u8; 16] = sig
        .try_into()
        .map_err(|_| truncated("SMB2 signature", 16, sig.len()))?;
    Ok(Header {
        structure_size,
        credit_charge,
        status: NtStatus(status),
        command: Command(command),
        credits,
        flags,
        next_command,
        message_id,
        form,
        session_id,
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each field written at its offset reads back as that field, in both forms.
    #[test]
    fn to_bytes_is_what_parse_reads() {
        let sync = Header {
            structure_size: 64,
            credit_charge: 0x0102,
            status: NtStatus(0xC000_0016),
            command: Command::IOCTL,
            credits: 0x0304,
            flags: HeaderFlags(HeaderFlags::SERVER_TO_REDIR | HeaderFlags::REPLAY_OPERATION),
            next_command: 0x0506_0708,
            message_id: 0x1122_3344_5566_7788,
            form: HeaderForm::Sync {
                process_id: 0xfeff,
                tree_id: 0x0a0b_0c0d,
            },
            session_id: 0x99aa_bbcc_ddee_ff00,
            signature: *b"0123456789abcdef",
        };
        let b = sync.to_bytes();
        assert_eq!(&b[..4], b"\xfeSMB");
        assert_eq!(&b[field::COMMAND..field::COMMAND + 2], &[0x0b, 0]);
        assert_eq!(
            &b[field::FORM..field::FORM + 8],
            &[0xff, 0xfe, 0, 0, 0x0d, 0x0c, 0x0b, 0x0a]
        );
        assert_eq!(parse_header(&b).unwrap(), sync);
        let asynchronous = Header {
            flags: HeaderFlags(HeaderFlags::ASYNC_COMMAND),
            form: HeaderForm::Async {
                async_id: 0x0102_0304_0506_0708,
            },
            ..sync
        };
        assert_eq!(
            parse_header(&asynchronous.to_bytes()).unwrap(),
            asynchronous
        );
    }
}
