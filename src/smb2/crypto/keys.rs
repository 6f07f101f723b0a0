//! The key file of `--keys`: Wireshark's "SMB2 Secret Keys" table (`smb2_seskey_list` in a
//! Wireshark profile), read and written as Wireshark does.
//!
//! One session a line, four comma-separated fields of hex bytes: the SessionId as its 8 bytes
//! on the wire (little-endian: session 0x0000_00e0_8f43_9100 is `0091438fe0000000`), the
//! session key, the server-to-client key and the client-to-server key. An empty field is
//! written as nothing (`id,key,,`). Wireshark's UAT writer puts hex bytes unquoted (its quoted
//! form is for text fields: a quoted hex field is read by Wireshark as the ASCII of the digits
//! and rejected), and its reader skips blank lines and `#` comments; files written by older
//! Wireshark releases have only the first two fields. We accept what Wireshark reads, plus
//! hex inside double quotes (a hand-written file), and write exactly what Wireshark writes.

use std::collections::HashMap;
use std::path::Path;

use thiserror::Error;

/// The keys of one session, as given by the user.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKeys {
    pub session_id: u64,
    /// The session key (16 bytes; 32 for the full key of an AES-256 Kerberos session); empty
    /// when only the direction keys are known.
    pub session_key: Vec<u8>,
    /// Server-to-client key (16 or 32 bytes), or empty.
    pub server_to_client: Vec<u8>,
    /// Client-to-server key (16 or 32 bytes), or empty.
    pub client_to_server: Vec<u8>,
}

impl std::fmt::Debug for SessionKeys {
    // Keys are secrets: a debug print names the session and the key sizes only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SessionKeys({:#018x}: session key {} B, s2c {} B, c2s {} B)",
            self.session_id,
            self.session_key.len(),
            self.server_to_client.len(),
            self.client_to_server.len()
        )
    }
}

#[derive(Debug, Error)]
pub enum KeyFileError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
}

/// The sessions of one or more key files, by SessionId.
#[derive(Clone, Debug, Default)]
pub struct KeyRing {
    sessions: HashMap<u64, SessionKeys>,
}

impl KeyRing {
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
    pub fn len(&self) -> usize {
        self.sessions.len()
    }
    pub fn get(&self, session_id: u64) -> Option<&SessionKeys> {
        self.sessions.get(&session_id)
    }
    /// A later entry for the same session replaces an earlier one (as in Wireshark, the first
    /// match wins there; a file with two entries for one session is a mistake either way).
    pub fn insert(&mut self, k: SessionKeys) {
        self.sessions.insert(k.session_id, k);
    }

    /// Add every session of `other`.
    pub fn extend(&mut self, other: &KeyRing) {
        for k in other.sessions.values() {
            self.insert(k.clone());
        }
    }

    /// Read a key file (see the module comment for the format).
    pub fn load(&mut self, path: &Path) -> Result<(), KeyFileError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| KeyFileError::Io {
            path: name.clone(),
            source,
        })?;
        for k in parse_key_file(&text).map_err(|(line, message)| KeyFileError::Line {
            path: name.clone(),
            line,
            message,
        })? {
            self.insert(k);
        }
        Ok(())
    }
}

fn hex_field(field: &str, what: &str) -> Result<Vec<u8>, String> {
    let f = field.trim();
    let f = match f.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) => inner,
        None => f,
    };
    if f.len() % 2 != 0 {
        return Err(format!("{what}: odd number of hex digits"));
    }
    (0..f.len())
        .step_by(2)
        .map(|i| {
            f.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| format!("{what}: not hex: {f:?}"))
        })
        .collect()
}

/// Parse the text of a key file. Errors give the 1-based line number.
pub fn parse_key_file(text: &str) -> Result<Vec<SessionKeys>, (usize, String)> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fail = |m: String| (i + 1, m);
        let fields: Vec<&str> = line.split(',').collect();
        if !(2..=4).contains(&fields.len()) {
            return Err(fail(format!(
                "{} fields; expected session id, session key, server-to-client key, \
                 client-to-server key",
                fields.len()
            )));
        }
        let field = |n: usize, what: &str| -> Result<Vec<u8>, (usize, String)> {
            match fields.get(n) {
                Some(f) => hex_field(f, what).map_err(fail),
                None => Ok(Vec::new()),
            }
        };
        let id = field(0, "session id")?;
        let id: [u8; 8] = id.as_slice().try_into().map_err(|_| {
            fail(format!(
                "session id: {} bytes, must be 8 (as on the wire, little-endian)",
                id.len()
            ))
        })?;
        let mut session_key = field(1, "session key")?;
        if session_key.len() > 32 {
            return Err(fail(format!(
                "session key: {} bytes, at most 32",
                session_key.len()
            )));
        }
        if !session_key.is_empty() && session_key.len() < 16 {
            // MS-SMB2 3.2.1.3: a shorter key is right-padded with zeros.
            session_key.resize(16, 0);
        }
        let server_to_client = field(2, "server-to-client key")?;
        let client_to_server = field(3, "client-to-server key")?;
        for (k, what) in [
            (&server_to_client, "server-to-client key"),
            (&client_to_server, "client-to-server key"),
        ] {
            if !matches!(k.len(), 0 | 16 | 32) {
                return Err(fail(format!("{what}: {} bytes, must be 16 or 32", k.len())));
            }
        }
        if session_key.is_empty() && server_to_client.is_empty() && client_to_server.is_empty() {
            return Err(fail("no key in the line".into()));
        }
        out.push(SessionKeys {
            session_id: u64::from_le_bytes(id),
            session_key,
            server_to_client,
            client_to_server,
        });
    }
    Ok(out)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One line of the file, as Wireshark writes it (without the newline).
pub fn key_line(k: &SessionKeys) -> String {
    format!(
        "{},{},{},{}",
        hex(&k.session_id.to_le_bytes()),
        hex(&k.session_key),
        hex(&k.server_to_client),
        hex(&k.client_to_server)
    )
}

/// A whole file, as Wireshark's UAT writer saves it.
pub fn key_file(keys: &[SessionKeys]) -> String {
    let mut s = String::from("# This file is automatically generated, DO NOT MODIFY.\n");
    for k in keys {
        s.push_str(&key_line(k));
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wireshark_lines_read_and_write_back_the_same() {
        let text = "# This file is automatically generated, DO NOT MODIFY.\n\
            0091438fe0000000,2d0449b77b91d908069e04cb0c13ed59,5935686abd1c68bff08b8be658f31082,de92444b52ee9a7dddbf6ccc89dd3cdf\n\
            a767a0bc00000000,77bf8107fdd45c0c1206608b3f23edf4,,\n";
        let keys = parse_key_file(text).expect("parse");
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].session_id, 0x0000_00e0_8f43_9100);
        assert_eq!(keys[0].session_key.len(), 16);
        assert_eq!(keys[0].server_to_client[0], 0x59);
        assert_eq!(keys[1].session_id, 0x0000_0000_bca0_67a7);
        assert!(keys[1].client_to_server.is_empty());
        assert_eq!(key_file(&keys), text);
    }

    #[test]
    fn old_two_field_lines_quotes_and_crlf_are_accepted() {
        let keys =
            parse_key_file("  \"0100000000000000\" , \"00112233445566778899aabbccddeeff\"\r\n")
                .expect("parse");
        assert_eq!(keys[0].session_id, 1);
        assert_eq!(keys[0].session_key[15], 0xff);
    }

    #[test]
    fn bad_lines_name_the_line_and_the_field() {
        let err = |t: &str| parse_key_file(t).expect_err(t);
        assert_eq!(err("\n01020304,aa\n").0, 2);
        assert!(err("0102030405060708,zz").1.contains("session key"));
        assert!(err("0102030405060708,,0011,")
            .1
            .contains("server-to-client"));
        assert!(err("0102030405060708").1.contains("1 fields"));
        assert!(err("0102030405060708,,,").1.contains("no key"));
        assert!(err("0102030405060708,abc").1.contains("odd"));
    }

    #[test]
    fn debug_never_prints_a_key() {
        let k = &parse_key_file("0100000000000000,00112233445566778899aabbccddeeff").expect("k")[0];
        assert!(!format!("{k:?}").contains("0011"));
    }
}
