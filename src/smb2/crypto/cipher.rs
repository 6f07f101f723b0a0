//! The four SMB3 ciphers (MS-SMB2 2.2.3.1.2) over RustCrypto: AEAD open/seal of a whole message,
//! and the CTR keystream under GCM and CCM, which reads part of a message (the header of a bulk
//! READ/WRITE) without decrypting the rest — unauthenticated, so used only where the brief allows.

use std::sync::Arc;

use aes::{Aes128, Aes256};
use aes_gcm::aead::generic_array::GenericArray;
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm};
use ccm::consts::{U11, U16};
use ctr::cipher::{
    BlockCipher, BlockEncrypt, BlockSizeUser, InnerIvInit, StreamCipher, StreamCipherSeek,
};

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

/// Encrypt `buf` (a whole SMB2 message) in place; returns the transform header that goes in
/// front of it. `nonce` is the Nonce field (bytes past the cipher's nonce length must be zero).
pub fn seal(
    cipher: Cipher,
    key: &[u8],
    nonce: [u8; 16],
    session_id: u64,
    buf: &mut [u8],
) -> Result<TransformHeader, AuthFailed> {
    Keyed::new(cipher, key)
        .ok_or(AuthFailed)?
        .seal(nonce, session_id, buf)
}

/// An AES block cipher with its key schedule expanded: what the keystream encrypts counter
/// blocks with.
#[allow(clippy::large_enum_variant)] // one a Keyed, already on the heap: a Box adds a pointer
enum Block {
    Aes128(Aes128),
    Aes256(Aes256),
}

/// The AEAD of each cipher, keyed (key schedule and, for GCM, the hash key).
enum Aead {
    Aes128Ccm(Aes128Ccm),
    Aes128Gcm(Aes128Gcm),
    Aes256Ccm(Aes256Ccm),
    Aes256Gcm(Aes256Gcm),
}

/// `$body` with `$a` the keyed AEAD, whichever type it is: the one dispatch over the four.
macro_rules! with_aead {
    ($aead:expr, |$a:ident| $body:expr) => {
        match $aead {
            Aead::Aes128Ccm($a) => $body,
            Aead::Aes128Gcm($a) => $body,
            Aead::Aes256Ccm($a) => $body,
            Aead::Aes256Gcm($a) => $body,
        }
    };
}

/// A cipher and key made ready once for every message sealed with them: expanding the AES key
/// schedule (and GCM's hash key) costs about as much as decrypting a small message, and every
/// message of a session has the same key. About 2 KiB (both AES implementations' schedules).
pub struct Keyed {
    cipher: Cipher,
    block: Block,
    aead: Aead,
}

impl Keyed {
    /// None when the key is not of the cipher's length.
    pub fn new(cipher: Cipher, key: &[u8]) -> Option<Keyed> {
        // The AEAD is built from the block cipher: one key expansion for both.
        let (aead, block) = match cipher {
            Cipher::Aes128Ccm => {
                let b = Aes128::new_from_slice(key).ok()?;
                (Aead::Aes128Ccm(b.clone().into()), Block::Aes128(b))
            }
            Cipher::Aes128Gcm => {
                let b = Aes128::new_from_slice(key).ok()?;
                (Aead::Aes128Gcm(b.clone().into()), Block::Aes128(b))
            }
            Cipher::Aes256Ccm => {
                let b = Aes256::new_from_slice(key).ok()?;
                (Aead::Aes256Ccm(b.clone().into()), Block::Aes256(b))
            }
            Cipher::Aes256Gcm => {
                let b = Aes256::new_from_slice(key).ok()?;
                (Aead::Aes256Gcm(b.clone().into()), Block::Aes256(b))
            }
        };
        Some(Keyed {
            cipher,
            block,
            aead,
        })
    }

    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// Decrypt `buf` (the ciphertext after `th`) in place and check the tag. On failure no
    /// plaintext is left: GCM checks the tag first and leaves `buf` as it was, CCM (its tag is
    /// over the plaintext) zeroes it.
    pub fn open(&self, th: &TransformHeader, buf: &mut [u8]) -> Result<(), AuthFailed> {
        let aad = th.aad();
        let n = &th.nonce[..self.cipher.nonce_len()];
        let tag = GenericArray::from_slice(&th.signature);
        with_aead!(&self.aead, |a| a.decrypt_in_place_detached(
            GenericArray::from_slice(n),
            &aad,
            buf,
            tag
        ))
        .map_err(|_| AuthFailed)
    }

    /// [`seal`] with this cipher and key.
    pub fn seal(
        &self,
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
        for b in th.nonce.iter_mut().skip(self.cipher.nonce_len()) {
            *b = 0;
        }
        let aad = th.aad();
        let n = &th.nonce[..self.cipher.nonce_len()];
        let tag = with_aead!(&self.aead, |a| a.encrypt_in_place_detached(
            GenericArray::from_slice(n),
            &aad,
            buf
        ))
        .map_err(|_| AuthFailed)?;
        th.signature.copy_from_slice(&tag);
        Ok(th)
    }
}

/// The keystream that GCM and CCM XOR with the plaintext, positioned anywhere in the message:
/// GCM encrypts plaintext block i with counter block `nonce(12) || BE32(2 + i)`, CCM (11-byte
/// nonce, 4-byte counter) with `0x03 || nonce(11) || BE32(1 + i)` (NIST SP 800-38D and 800-38C).
/// Shares the key schedule of its [`Keyed`] (no allocation a message).
pub struct Keystream {
    keyed: Arc<Keyed>,
    /// The first counter block.
    iv: [u8; 16],
}

impl Keystream {
    pub fn new(keyed: Arc<Keyed>, nonce: &[u8; 16]) -> Keystream {
        let mut iv = [0u8; 16];
        if keyed.cipher.is_gcm() {
            iv[..12].copy_from_slice(&nonce[..12]);
            iv[15] = 2;
        } else {
            iv[0] = 3;
            iv[1..12].copy_from_slice(&nonce[..11]);
            iv[15] = 1;
        }
        Keystream { keyed, iv }
    }

    /// XOR `buf` with the keystream for message bytes `pos..pos + buf.len()`.
    pub fn apply_at(&self, pos: u64, buf: &mut [u8]) {
        let iv = GenericArray::from(self.iv);
        match &self.keyed.block {
            Block::Aes128(b) => xor_at(ctr::CtrCore::inner_iv_init(b, &iv), pos, buf),
            Block::Aes256(b) => xor_at(ctr::CtrCore::inner_iv_init(b, &iv), pos, buf),
        }
    }
}

/// SMB3's CTR (32-bit big-endian counter) over a borrowed key schedule: making one copies only
/// the counter block.
fn xor_at<B>(core: ctr::CtrCore<&B, ctr::flavors::Ctr32BE>, pos: u64, buf: &mut [u8])
where
    B: BlockEncrypt + BlockCipher + BlockSizeUser<BlockSize = U16>,
{
    let mut ctr = ctr::Ctr32BE::from_core(core);
    ctr.seek(pos);
    ctr.apply_keystream(buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + 3) as u8).collect()
    }

    fn open(c: Cipher, key: &[u8], th: &TransformHeader, buf: &mut [u8]) -> Result<(), AuthFailed> {
        Keyed::new(c, key).ok_or(AuthFailed)?.open(th, buf)
    }

    fn keystream(c: Cipher, key: &[u8], nonce: &[u8; 16]) -> Keystream {
        Keystream::new(Arc::new(Keyed::new(c, key).expect("key")), nonce)
    }

    /// `len` keystream bytes from message byte `at`.
    fn bytes_at(ks: &Keystream, at: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0; len];
        ks.apply_at(at, &mut b);
        b
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
            // A wrong key, a changed header or a changed byte fails.
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

    /// What `Sealed::open_whole` relies on when it tries a second candidate: a failed GCM open
    /// leaves the ciphertext as it was, a failed CCM open does not (it zeroes it).
    #[test]
    fn a_failed_open_leaves_the_ciphertext_under_gcm_only() {
        for c in Cipher::ALL {
            let key = vec![7; c.key_len()];
            let mut sealed = message(200);
            let th = seal(c, &key, [3; 16], 9, &mut sealed).expect("seal");
            let mut buf = sealed.clone();
            assert_eq!(
                open(c, &vec![8; c.key_len()], &th, &mut buf),
                Err(AuthFailed)
            );
            if c.is_gcm() {
                assert_eq!(buf, sealed, "{c}");
            } else {
                assert_eq!(buf, vec![0; 200], "{c}");
            }
        }
    }

    #[test]
    fn keys_of_the_wrong_length_make_no_cipher() {
        for c in Cipher::ALL {
            assert!(Keyed::new(c, &vec![1; c.key_len()]).is_some(), "{c}");
            for len in [0, 15, 24, 48] {
                assert!(Keyed::new(c, &vec![1; len]).is_none(), "{c} {len}");
            }
            let other = if c.key_len() == 16 { 32 } else { 16 };
            assert!(Keyed::new(c, &vec![1; other]).is_none(), "{c}");
            assert!(seal(c, &vec![1; other], [0; 16], 1, &mut [0; 64]).is_err());
        }
    }

    #[test]
    fn keystream_reads_any_slice_like_the_aead() {
        for c in Cipher::ALL {
            let key: Vec<u8> = (100..100 + c.key_len() as u8).collect();
            let plain = message(70_000);
            let mut buf = plain.clone();
            let th = seal(c, &key, [0x42; 16], 7, &mut buf).expect("seal");
            let ks = keystream(c, &key, &th.nonce);
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

    /// The GCM paper's test cases 2 and 14 (zero key, zero IV, one zero block): the
    /// keystream's first block is their ciphertext.
    #[test]
    fn gcm_keystream_is_the_published_one() {
        let cases = [
            (Cipher::Aes128Gcm, "0388dace60b6a392f328c2b971b2fe78"),
            (Cipher::Aes256Gcm, "cea7403d4d606b6e074ec5d3baf39d18"),
        ];
        for (c, want) in cases {
            let ks = keystream(c, &vec![0; c.key_len()], &[0; 16]);
            let hex: String = bytes_at(&ks, 0, 16)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(hex, want, "{c}");
        }
    }

    /// One [`Keyed`] serves every message of its key: its keystreams are those of a cipher made
    /// for the message alone, and it opens message after message (using it changes nothing).
    #[test]
    fn one_keyed_cipher_serves_every_message_of_its_key() {
        for c in Cipher::ALL {
            let key: Vec<u8> = (0..c.key_len() as u8).map(|b| b * 3 + 1).collect();
            let mut other = key.clone();
            other[c.key_len() - 1] ^= 0x80;
            let shared = Arc::new(Keyed::new(c, &key).expect("key"));
            let foreign = Keyed::new(c, &other).expect("key");
            for i in 0..5u8 {
                let nonce = [i.wrapping_mul(37) ^ 0x5c; 16];
                let ks = Keystream::new(Arc::clone(&shared), &nonce);
                let fresh = keystream(c, &key, &nonce);
                for at in [0, 64, 4099] {
                    assert_eq!(bytes_at(&ks, at, 80), bytes_at(&fresh, at, 80), "{c} {i}");
                }
                // Another key's keystream differs from the first byte on.
                let theirs = keystream(c, &other, &nonce);
                assert_ne!(bytes_at(&ks, 0, 16), bytes_at(&theirs, 0, 16), "{c} {i}");

                let plain = message(300 + usize::from(i) * 50);
                let mut buf = plain.clone();
                let th = seal(c, &key, nonce, u64::from(i), &mut buf).expect("seal");
                let mut head = buf[..64].to_vec();
                ks.apply_at(0, &mut head);
                assert_eq!(head, &plain[..64], "{c} {i}");
                let mut b2 = buf.clone();
                assert_eq!(foreign.open(&th, &mut b2), Err(AuthFailed), "{c} {i}");
                let zeroed = b2.iter().all(|&b| b == 0);
                assert!(if c.is_gcm() { b2 == buf } else { zeroed }, "{c} {i}");
                assert_eq!(shared.open(&th, &mut buf), Ok(()), "{c} {i}");
                assert_eq!(buf, plain, "{c} {i}");
                // Sealed by the shared cipher: the same bytes as by a fresh one.
                let mut again = plain.clone();
                let th2 = shared.seal(nonce, u64::from(i), &mut again).expect("seal");
                let mut fresh_sealed = plain.clone();
                seal(c, &key, nonce, u64::from(i), &mut fresh_sealed).expect("seal");
                assert_eq!(
                    (th2.signature, again),
                    (th.signature, fresh_sealed),
                    "{c} {i}"
                );
            }
        }
    }
}
