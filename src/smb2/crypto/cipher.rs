//! The four SMB3 ciphers (MS-SMB2 2.2.3.1.2) over RustCrypto: AEAD open/seal of a whole message,
//! and the CTR keystream under GCM and CCM, which reads part of a message (the header of a bulk
//! READ/WRITE) without decrypting the rest — unauthenticated, so used only where the brief allows.

use aes::{Aes128, Aes256};
use aes_gcm::aead::generic_array::GenericArray;
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm};
use ccm::consts::{U11, U16};
use ctr::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};

use crate::smb2::transform::{TransformHeader, TRANSFORM_FLAG_ENCRYPTED};

type Aes128Ccm = ccm::Ccm<Aes128, U16, U11>;
type Aes256Ccm = ccm::Ccm<Aes256, U16, U11>;

/// An SMB3 cipher, by its id in the ENCRYPTION_CAPABILITIES negotiate context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cipher {
    Aes128Ccm,
    Aes128Gcm,
    Aes256Ccm,
    Aes256Gcm,
}

impl Cipher {
    pub const ALL: [Cipher; 4] = [
        Cipher::Aes128Ccm,
        Cipher::Aes128Gcm,
        Cipher::Aes256Ccm,
        Cipher::Aes256Gcm,
    ];

    pub fn from_id(id: u16) -> Option<Cipher> {
        match id {
            1 => Some(Cipher::Aes128Ccm),
            2 => Some(Cipher::Aes128Gcm),
            3 => Some(Cipher::Aes256Ccm),
            4 => Some(Cipher::Aes256Gcm),
            _ => None,
        }
    }

    pub fn id(self) -> u16 {
        match self {
            Cipher::Aes128Ccm => 1,
            Cipher::Aes128Gcm => 2,
            Cipher::Aes256Ccm => 3,
            Cipher::Aes256Gcm => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes128Ccm => "AES-128-CCM",
            Cipher::Aes128Gcm => "AES-128-GCM",
            Cipher::Aes256Ccm => "AES-256-CCM",
            Cipher::Aes256Gcm => "AES-256-GCM",
        }
    }

    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            Cipher::Aes128Ccm | Cipher::Aes128Gcm => 16,
            Cipher::Aes256Ccm | Cipher::Aes256Gcm => 32,
        }
    }

    /// Bytes of the transform header's Nonce field the cipher uses.
    pub fn nonce_len(self) -> usize {
        if self.is_gcm() {
            12
        } else {
            11
        }
    }

    pub fn is_gcm(self) -> bool {
        matches!(self, Cipher::Aes128Gcm | Cipher::Aes256Gcm)
    }

    /// The ciphers a key of `len` bytes can belong to, GCM first (what current Windows picks).
    pub fn for_key_len(len: usize) -> &'static [Cipher] {
        match len {
            16 => &[Cipher::Aes128Gcm, Cipher::Aes128Ccm],
            32 => &[Cipher::Aes256Gcm, Cipher::Aes256Ccm],
            _ => &[],
        }
    }
}

impl std::fmt::Display for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The message did not authenticate under this key and cipher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthFailed;

/// Decrypt `buf` (the ciphertext after `th`) in place and check the tag. On failure `buf` is
/// left as it was.
pub fn open(
    cipher: Cipher,
    key: &[u8],
    th: &TransformHeader,
    buf: &mut [u8],
) -> Result<(), AuthFailed> {
    if key.len() != cipher.key_len() {
        return Err(AuthFailed);
    }
    let aad = th.aad();
    let nonce = &th.nonce[..cipher.nonce_len()];
    let tag = GenericArray::from_slice(&th.signature);
    let n = nonce;
    let r = match cipher {
        Cipher::Aes128Gcm => Aes128Gcm::new_from_slice(key)
            .map_err(|_| AuthFailed)?
            .decrypt_in_place_detached(GenericArray::from_slice(n), &aad, buf, tag),
        Cipher::Aes256Gcm => Aes256Gcm::new_from_slice(key)
            .map_err(|_| AuthFailed)?
            .decrypt_in_place_detached(GenericArray::from_slice(n), &aad, buf, tag),
        Cipher::Aes128Ccm => Aes128Ccm::new_from_slice(key)
            .map_err(|_| AuthFailed)?
            .decrypt_in_place_detached(GenericArray::from_slice(n), &aad, buf, tag),
        Cipher::Aes256Ccm => Aes256Ccm::new_from_slice(key)
            .map_err(|_| AuthFailed)?
            .decrypt_in_place_detached(GenericArray::from_slice(n), &aad, buf, tag),
    };
    r.map_err(|_| AuthFailed)
}

/// Encrypt `buf` (a whole SMB2 message) in place; returns the transform header that goes in
/// front of it. `nonce` is the Nonce field (bytes past the cipher's nonce length must be zero).
pub fn seal(
    cipher: Cipher,
    key: &[u8],
    nonce: [u8; 16],
    session_id: u64,
    buf: &mut [u8],
) -> Result<TransformHeader, AuthFailed> {
    let mut th = TransformHeader {
        signature: [0; 16],
        nonce,
        original_size: u32::try_from(buf.len()).map_err(|_| AuthFailed)?,
        reserved: 0,
        flags: TRANSFORM_FLAG_ENCRYPTED,
        session_id,
    };
    for b in th.nonce.iter_mut().skip(cipher.nonce_len()) {
        *b = 0;
    }
    let aad = th.aad();
    let n = &th.nonce[..cipher.nonce_len()];
    let tag = match cipher {
        Cipher::Aes128Gcm => Aes128Gcm::new_from_slice(key)
            .map_err(|_| AuthFailed)?
            .encrypt_in_place_detached(GenericArray::from_slice(n), &aad, buf),
        Cipher::Aes256Gcm => Aes256Gcm::new_from_slice(key)
            .map_err(|_| AuthFailed)?
            .encrypt_in_place_detached(GenericArray::from_slice(n), &aad, buf),
        Cipher::Aes128Ccm => Aes128Ccm::new_from_slice(key)
            .map_err(|_| AuthFailed)?
            .encrypt_in_place_detached(GenericArray::from_slice(n), &aad, buf),
        Cipher::Aes256Ccm => Aes256Ccm::new_from_slice(key)
            .map_err(|_| AuthFailed)?
            .encrypt_in_place_detached(GenericArray::from_slice(n), &aad, buf),
    }
    .map_err(|_| AuthFailed)?;
    th.signature.copy_from_slice(&tag);
    Ok(th)
}

// Boxed: the AES key schedules (software and AES-NI) make a keystream about 1 KiB.
enum Ctr {
    A128(Box<ctr::Ctr32BE<Aes128>>),
    A256(Box<ctr::Ctr32BE<Aes256>>),
}

/// The keystream that GCM and CCM XOR with the plaintext, positioned anywhere in the message:
/// GCM encrypts plaintext block i with counter block `nonce(12) || BE32(2 + i)`, CCM (11-byte
/// nonce, 4-byte counter) with `0x03 || nonce(11) || BE32(1 + i)` (NIST SP 800-38D and 800-38C).
pub struct Keystream {
    ctr: Ctr,
}

impl Keystream {
    pub fn new(cipher: Cipher, key: &[u8], nonce: &[u8; 16]) -> Option<Keystream> {
        let mut iv = [0u8; 16];
        if cipher.is_gcm() {
            iv[..12].copy_from_slice(&nonce[..12]);
            iv[15] = 2;
        } else {
            iv[0] = 3;
            iv[1..12].copy_from_slice(&nonce[..11]);
            iv[15] = 1;
        }
        let ctr = match cipher.key_len() {
            16 => Ctr::A128(Box::new(
                ctr::Ctr32BE::<Aes128>::new_from_slices(key, &iv).ok()?,
            )),
            _ => Ctr::A256(Box::new(
                ctr::Ctr32BE::<Aes256>::new_from_slices(key, &iv).ok()?,
            )),
        };
        Some(Keystream { ctr })
    }

    /// XOR `buf` with the keystream for message bytes `pos..pos + buf.len()`.
    pub fn apply_at(&mut self, pos: u64, buf: &mut [u8]) {
        match &mut self.ctr {
            Ctr::A128(c) => {
                c.seek(pos);
                c.apply_keystream(buf);
            }
            Ctr::A256(c) => {
                c.seek(pos);
                c.apply_keystream(buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + 3) as u8).collect()
    }

    #[test]
    fn seal_then_open_round_trips_for_every_cipher() {
        for c in Cipher::ALL {
            let key: Vec<u8> = (0..c.key_len() as u8).collect();
            let plain = message(1000);
            let mut buf = plain.clone();
            let th = seal(c, &key, [9; 16], 0x1122, &mut buf).expect("seal");
            assert_ne!(buf, plain, "{c}");
            assert_eq!(th.original_size, 1000);
            assert!(th.nonce[c.nonce_len()..].iter().all(|&b| b == 0));
            let mut opened = buf.clone();
            assert_eq!(open(c, &key, &th, &mut opened), Ok(()), "{c}");
            assert_eq!(opened, plain, "{c}");
            // A wrong key, a changed header or a changed byte fails, and leaves the bytes alone.
            let mut wrong = key.clone();
            wrong[0] ^= 1;
            let mut b2 = buf.clone();
            assert_eq!(open(c, &wrong, &th, &mut b2), Err(AuthFailed), "{c}");
            let mut th2 = th;
            th2.session_id ^= 1;
            assert_eq!(open(c, &key, &th2, &mut b2), Err(AuthFailed), "{c}");
            b2[500] ^= 1;
            assert_eq!(open(c, &key, &th, &mut b2), Err(AuthFailed), "{c}");
        }
    }

    #[test]
    fn keystream_reads_any_slice_like_the_aead() {
        for c in Cipher::ALL {
            let key: Vec<u8> = (100..100 + c.key_len() as u8).collect();
            let plain = message(70_000);
            let mut buf = plain.clone();
            let th = seal(c, &key, [0x42; 16], 7, &mut buf).expect("seal");
            let mut ks = Keystream::new(c, &key, &th.nonce).expect("keystream");
            for (at, len) in [
                (0usize, 64usize),
                (64, 49),
                (65_000, 17),
                (69_990, 10),
                (5, 1),
            ] {
                let mut part = buf[at..at + len].to_vec();
                ks.apply_at(at as u64, &mut part);
                assert_eq!(part, &plain[at..at + len], "{c} at {at}");
            }
        }
    }
}
