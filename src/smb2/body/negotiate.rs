//! SMB2 NEGOTIATE response (2.2.4): the dialect and, for 3.1.1, the cipher of the
//! ENCRYPTION_CAPABILITIES negotiate context (2.2.3.1.2) — what decryption needs to know.

use super::fixed;
use crate::smb2::error::Smb2Error;

pub(super) const RESPONSE_FIXED: usize = 64;
const ENCRYPTION_CAPABILITIES: u16 = 0x0002;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NegotiateResponse {
    pub dialect: u16,
    /// CipherId the server chose (3.1.1 with an ENCRYPTION_CAPABILITIES context), 0 for none.
    pub cipher_id: Option<u16>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Decode a NEGOTIATE response part (starting at its header). Negotiate contexts that run past
/// the part are ignored (the dialect alone is still useful).
pub fn parse_negotiate_response(part: &[u8]) -> Result<NegotiateResponse, Smb2Error> {
    let body = fixed(part, "NEGOTIATE response", RESPONSE_FIXED, 65)?;
    let dialect = u16_at(body, 4).unwrap_or(0);
    let mut cipher_id = None;
    if dialect == 0x0311 {
        let count = u16_at(body, 6).unwrap_or(0);
        let mut at = u32_at(body, 60).map_or(usize::MAX, |o| o as usize);
        for _ in 0..count {
            let (Some(kind), Some(len)) = (u16_at(part, at), u16_at(part, at + 2)) else {
                break;
            };
            let data = at + 8;
            if kind == ENCRYPTION_CAPABILITIES && u16_at(part, data).unwrap_or(0) >= 1 {
                cipher_id = u16_at(part, data + 2);
            }
            // Contexts are 8-byte aligned from the header.
            at = (data + usize::from(len) + 7) & !7;
        }
    }
    Ok(NegotiateResponse { dialect, cipher_id })
}
