//! SMB3 key derivation (MS-SMB2 3.1.4.2): SP800-108 in counter mode with HMAC-SHA256, one
//! block (L is 128 or 256), and the labels and contexts of the encryption keys.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::cipher::Cipher;
use super::preauth::PreauthHash;

/// KDF(Ki, Label, Context) with L = `bits` (≤ 256): HMAC-SHA256(Ki, 1 || Label || 0x00 ||
/// Context || L), both counters big-endian 32-bit. Labels and contexts include their NUL.
pub fn kdf(ki: &[u8], label: &[u8], context: &[u8], bits: u32) -> Vec<u8> {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(ki) else {
        return Vec::new();
    };
    mac.update(&1u32.to_be_bytes());
    mac.update(label);
    mac.update(&[0]);
    mac.update(context);
    mac.update(&bits.to_be_bytes());
    let out = mac.finalize().into_bytes();
    out.get(..(bits as usize / 8).min(out.len()))
        .unwrap_or(&[])
        .to_vec()
}

/// The two encryption keys of a session, named by the direction of the messages they protect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectionKeys {
    /// Server's EncryptionKey / client's DecryptionKey.
    pub server_to_client: Vec<u8>,
    /// Client's EncryptionKey / server's DecryptionKey.
    pub client_to_server: Vec<u8>,
}

impl DirectionKeys {
    /// Bytes of key held (what a table of them is charged).
    pub fn key_bytes(&self) -> usize {
        self.server_to_client.len() + self.client_to_server.len()
    }
}

/// SMB 3.0 and 3.0.2: AES-128-CCM keys from the session key alone.
pub fn smb30_keys(session_key: &[u8]) -> DirectionKeys {
    let ki = session_key.get(..16).unwrap_or(session_key);
    DirectionKeys {
        client_to_server: kdf(ki, b"SMB2AESCCM\0", b"ServerIn \0", 128),
        server_to_client: kdf(ki, b"SMB2AESCCM\0", b"ServerOut\0", 128),
    }
}

/// SMB 3.1.1: keys from the session key and the session's preauth integrity hash. AES-256
/// ciphers use the full session key (32 bytes with Kerberos; NTLM's is 16) and L = 256.
pub fn smb311_keys(session_key: &[u8], preauth: &PreauthHash, cipher: Cipher) -> DirectionKeys {
    let (ki, bits) = if cipher.key_len() == 32 {
        (session_key, 256)
    } else {
        (session_key.get(..16).unwrap_or(session_key), 128)
    };
    DirectionKeys {
        client_to_server: kdf(ki, b"SMBC2SCipherKey\0", preauth, bits),
        server_to_client: kdf(ki, b"SMBS2CCipherKey\0", preauth, bits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    /// The keys smbprotocol derived for captures/real/smb302-encrypted.pcap (Samba agreed).
    #[test]
    fn smb302_keys_of_the_samba_capture() {
        let k = smb30_keys(&hex("77bf8107fdd45c0c1206608b3f23edf4"));
        assert_eq!(k.client_to_server, hex("94524b02bdf9c93b855e7c19a7836bad"));
        assert_eq!(k.server_to_client, hex("e731fe0fce835fd76b438d315f3cae20"));
    }

    #[test]
    fn aes256_keys_are_32_bytes_and_differ_from_aes128() {
        let sk = [5u8; 16];
        let h = [1u8; 64];
        let a = smb311_keys(&sk, &h, Cipher::Aes256Gcm);
        let b = smb311_keys(&sk, &h, Cipher::Aes128Gcm);
        assert_eq!(a.client_to_server.len(), 32);
        assert_eq!(b.client_to_server.len(), 16);
        assert_ne!(&a.client_to_server[..16], &b.client_to_server[..]);
        assert_ne!(a.client_to_server, a.server_to_client);
    }
}
