//! `--encrypt`: SMB3 encryption of a simulated session, as a Windows client and server do it.
//! The preauth integrity hash follows the NEGOTIATE and SESSION_SETUP messages the simulation
//! sends, the keys derive from a session key the seed chooses (SMB 3.0.2: "SMB2AESCCM"; 3.1.1:
//! the preauth hash), and after the final SESSION_SETUP response every message both ways goes
//! inside a TRANSFORM_HEADER — the layout, KDF and ciphers of `smb2::transform` and
//! `smb2::crypto`, the same code that decrypts.

use super::wire::Part;
use crate::smb2::crypto::cipher::{seal, Cipher};
use crate::smb2::crypto::kdf::{smb30_keys, smb311_keys, DirectionKeys};
use crate::smb2::crypto::preauth::{preauth_next, PreauthHash, PREAUTH_ZERO};
use crate::smb2::crypto::SessionKeys;
use crate::smb2::netbios::session_message_header;
use crate::smb2::transform::TRANSFORM_HEADER_LEN;
use crate::smb2::{parse_header, Command, NtStatus};

/// The encryption state of one session (one connection of the simulation).
pub struct Sealer {
    cipher: Cipher,
    dialect: u16,
    session_key: [u8; 16],
    hash: PreauthHash,
    keys: Option<DirectionKeys>,
    session_id: u64,
    nonce: u64,
}

impl Sealer {
    pub fn new(cipher: Cipher, dialect: u16, session_key: [u8; 16]) -> Sealer {
        Sealer {
            cipher,
            dialect,
            session_key,
            hash: PREAUTH_ZERO,
            keys: None,
            session_id: 0,
            nonce: 0,
        }
    }

    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// Whether the session is set up (its messages are sealed from now on).
    pub fn established(&self) -> bool {
        self.keys.is_some()
    }

    /// The key file line of this session (session key and both direction keys).
    pub fn session_keys(&self) -> Option<SessionKeys> {
        let k = self.keys.as_ref()?;
        Some(SessionKeys {
            session_id: self.session_id,
            session_key: self.session_key.to_vec(),
            server_to_client: k.server_to_client.clone(),
            client_to_server: k.client_to_server.clone(),
        })
    }

    /// A message about to be sent in clear (`msg` without its NetBIOS header): NEGOTIATE and
    /// SESSION_SETUP feed the preauth hash; the successful final SESSION_SETUP response sets
    /// the session up.
    pub fn observe(&mut self, msg: &[u8]) {
        if self.keys.is_some() {
            return;
        }
        // The generator builds every message with a whole header; anything else is not one.
        let Ok(h) = parse_header(msg) else {
            return;
        };
        if !matches!(h.command, Command::NEGOTIATE | Command::SESSION_SETUP) {
            return;
        }
        if h.command == Command::SESSION_SETUP && h.is_response() && h.status == NtStatus::SUCCESS {
            self.session_id = h.session_id;
            self.keys = Some(if self.dialect == super::smb2::DIALECT_311 {
                smb311_keys(&self.session_key, &self.hash, self.cipher)
            } else {
                smb30_keys(&self.session_key)
            });
            return;
        }
        self.hash = preauth_next(&self.hash, msg);
    }

    /// A message as it goes on the wire: sealed once the session is set up; before, in clear
    /// (NEGOTIATE and SESSION_SETUP then feed the preauth hash).
    pub fn outgoing(&mut self, from_client: bool, parts: Vec<Part>, fill: &[u8]) -> Vec<Part> {
        if self.established() {
            return self.seal(from_client, parts, fill);
        }
        if let Some(b) = message_bytes(&parts) {
            self.observe(b);
        }
        parts
    }

    /// Seal one message (`parts` as `smb2::message` builds them: NetBIOS header first; `fill`
    /// the wire's filler that `Part::Fill` refers to). Before the session is set up, or if
    /// sealing fails, the message goes in clear.
    pub fn seal(&mut self, from_client: bool, parts: Vec<Part>, fill: &[u8]) -> Vec<Part> {
        let Some(keys) = &self.keys else {
            return parts;
        };
        let mut plain = Vec::new();
        for p in &parts {
            match p {
                Part::Bytes(b) => plain.extend_from_slice(b),
                Part::Fill(n) => plain.extend_from_slice(fill.get(..*n).unwrap_or(&[])),
            }
        }
        let Some(body) = plain.get_mut(4..) else {
            return parts;
        };
        let key = if from_client {
            &keys.client_to_server
        } else {
            &keys.server_to_client
        };
        // Nonces never repeat under a key: a counter per session (each direction has its key).
        self.nonce += 1;
        let mut nonce = [0u8; 16];
        nonce[..8].copy_from_slice(&self.nonce.to_le_bytes());
        nonce[8] = u8::from(from_client);
        let Ok(th) = seal(self.cipher, key, nonce, self.session_id, body) else {
            return parts;
        };
        let len = TRANSFORM_HEADER_LEN + body.len();
        let mut out = Vec::with_capacity(4 + len);
        out.extend_from_slice(&session_message_header(len));
        out.extend_from_slice(&th.to_bytes());
        out.extend_from_slice(body);
        vec![Part::Bytes(out)]
    }
}

/// The bytes of a message built in one piece (NEGOTIATE, SESSION_SETUP: no filler), without
/// its NetBIOS header.
pub fn message_bytes(parts: &[Part]) -> Option<&[u8]> {
    match parts.first() {
        Some(Part::Bytes(b)) if parts.len() == 1 => b.get(4..),
        _ => None,
    }
}
