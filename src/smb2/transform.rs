//! The SMB2 TRANSFORM_HEADER (MS-SMB2 2.2.41): the 52 bytes in front of an encrypted message.
//! The layout is stated once here and used by the parser and by the writer (`sqos synth
//! --encrypt`).
//!
//! ```text
//!  0  ProtocolId            0xFD 'S' 'M' 'B'
//!  4  Signature (16)        the AEAD tag
//! 20  Nonce (16)            11 bytes used by AES-CCM, 12 by AES-GCM, the rest zero
//! 36  OriginalMessageSize   length of the plaintext (= ciphertext) that follows
//! 40  Reserved (2)
//! 42  Flags / EncryptionAlgorithm   0x0001 (3.1.1: Encrypted; 3.0.x: AES-128-CCM)
//! 44  SessionId (8)
//! ```
//!
//! The additional authenticated data of the AEAD is bytes 20..52 (Nonce to the end).

use super::error::{truncated, Smb2Error};

pub const TRANSFORM_HEADER_LEN: usize = 52;
/// Where the authenticated part of the header starts (the Nonce field).
pub const AAD_START: usize = 20;
const PROTOCOL_ID: [u8; 4] = [0xFD, b'S', b'M', b'B'];

/// Flags value of every encrypted message (both meanings of the field are 0x0001).
pub const TRANSFORM_FLAG_ENCRYPTED: u16 = 0x0001;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransformHeader {
    pub signature: [u8; 16],
    pub nonce: [u8; 16],
    pub original_size: u32,
    /// Zero when sent by Windows or Samba, but kept as read: the AEAD authenticates it.
    pub reserved: u16,
    pub flags: u16,
    pub session_id: u64,
}

fn array<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(s) = b.get(at..at + N) {
        out.copy_from_slice(s);
    }
    out
}

/// Decode the 52-byte header at the start of `buf`.
pub fn parse_transform_header(buf: &[u8]) -> Result<TransformHeader, Smb2Error> {
    let b = buf
        .get(..TRANSFORM_HEADER_LEN)
        .ok_or_else(|| truncated("SMB2 TRANSFORM_HEADER", TRANSFORM_HEADER_LEN, buf.len()))?;
    let proto: [u8; 4] = array(b, 0);
    if proto != PROTOCOL_ID {
        return Err(Smb2Error::UnknownProtocol(proto));
    }
    Ok(TransformHeader {
        signature: array(b, 4),
        nonce: array(b, 20),
        original_size: u32::from_le_bytes(array(b, 36)),
        reserved: u16::from_le_bytes(array(b, 40)),
        flags: u16::from_le_bytes(array(b, 42)),
        session_id: u64::from_le_bytes(array(b, 44)),
    })
}

impl TransformHeader {
    /// The 52 bytes of this header.
    pub fn to_bytes(&self) -> [u8; TRANSFORM_HEADER_LEN] {
        let mut b = [0u8; TRANSFORM_HEADER_LEN];
        b[..4].copy_from_slice(&PROTOCOL_ID);
        b[4..20].copy_from_slice(&self.signature);
        b[20..36].copy_from_slice(&self.nonce);
        b[36..40].copy_from_slice(&self.original_size.to_le_bytes());
        b[40..42].copy_from_slice(&self.reserved.to_le_bytes());
        b[42..44].copy_from_slice(&self.flags.to_le_bytes());
        b[44..52].copy_from_slice(&self.session_id.to_le_bytes());
        b
    }

    /// The additional authenticated data: the header from the Nonce on.
    pub fn aad(&self) -> [u8; TRANSFORM_HEADER_LEN - AAD_START] {
        let b = self.to_bytes();
        let mut a = [0u8; TRANSFORM_HEADER_LEN - AAD_START];
        a.copy_from_slice(&b[AAD_START..]);
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_emit_agree() {
        let h = TransformHeader {
            signature: [7; 16],
            nonce: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0, 0],
            original_size: 0x1234,
            reserved: 0,
            flags: TRANSFORM_FLAG_ENCRYPTED,
            session_id: 0x0000_00e0_8f43_9100,
        };
        let b = h.to_bytes();
        assert_eq!(&b[..4], b"\xfdSMB");
        assert_eq!(&b[36..40], &[0x34, 0x12, 0, 0]);
        assert_eq!(&b[44..52], &[0x00, 0x91, 0x43, 0x8f, 0xe0, 0, 0, 0]);
        assert_eq!(parse_transform_header(&b), Ok(h));
        assert_eq!(&h.aad()[..], &b[20..]);
    }

    /// Found by the `smb3` fuzz target: Reserved was read as zero, so a header with other bytes
    /// there wrote back differently, and its AAD was not the one the sender authenticated.
    #[test]
    fn reserved_bytes_are_kept_for_the_aad() {
        let mut b = [9u8; TRANSFORM_HEADER_LEN];
        b[..4].copy_from_slice(&PROTOCOL_ID);
        let h = parse_transform_header(&b).unwrap();
        assert_eq!(h.reserved, 0x0909);
        assert_eq!(h.to_bytes(), b);
        assert_eq!(&h.aad()[..], &b[AAD_START..]);
    }

    #[test]
    fn short_or_foreign_input_is_an_error() {
        assert!(matches!(
            parse_transform_header(&[0xFD, b'S', b'M', b'B']),
            Err(Smb2Error::Truncated { .. })
        ));
        let mut b = [0u8; 52];
        b[0] = 0xFE;
        assert!(matches!(
            parse_transform_header(&b),
            Err(Smb2Error::UnknownProtocol(_))
        ));
    }
}
