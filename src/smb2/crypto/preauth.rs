//! The SMB 3.1.1 preauthentication integrity hash (MS-SMB2 3.2.5.2, 3.3.5.4, 3.3.5.5): SHA-512
//! chained over the NEGOTIATE request and response (the connection's value), then over each
//! SESSION_SETUP request and each non-final response of a session (the session's value, the
//! context of its key derivation).

use sha2::{Digest, Sha512};

pub type PreauthHash = [u8; 64];

/// The value before any message.
pub const PREAUTH_ZERO: PreauthHash = [0; 64];

/// SHA-512(previous || message), `message` being the whole SMB2 message (header on).
pub fn preauth_next(prev: &PreauthHash, message: &[u8]) -> PreauthHash {
    let mut h = Sha512::new();
    h.update(prev);
    h.update(message);
    let mut out = [0u8; 64];
    out.copy_from_slice(&h.finalize());
    out
}
