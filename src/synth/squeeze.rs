//! `--compress`: SMB 3.1.1 compression of a simulated session's messages, as a Windows client
//! and server with compression negotiated send them (MS-SMB2 3.1.4.4): after SESSION_SETUP
//! every message that comes out smaller is sent compressed (Windows' "compress all requests
//! and responses"); unchained with one algorithm, or — when chained compression is negotiated —
//! chained, with Pattern_V1 for the runs of equal bytes at the start and end of the data
//! (3.1.4.4.1). Compression comes before encryption (3.1.4.3). The layout and the algorithms
//! are `smb2::compress`, the same code that decompresses.

use super::wire::Part;
use crate::smb2::body::fixed_body_len;
use crate::smb2::compress::{compress_chained, compress_unchained, Algorithm};
use crate::smb2::netbios::session_message_header;
use crate::smb2::{parse_header, Command, HEADER_LEN};

/// How one connection compresses.
#[derive(Clone, Copy, Debug)]
pub struct Squeezer {
    pub algorithm: Algorithm,
    /// Chained compression negotiated (with Pattern_V1).
    pub chained: bool,
}

impl Squeezer {
    /// The algorithms of the SMB2_COMPRESSION_CAPABILITIES context, both ways.
    pub fn algorithm_ids(&self) -> Vec<u16> {
        let mut ids = vec![self.algorithm.id()];
        if self.chained {
            ids.push(Algorithm::PatternV1.id());
        }
        ids
    }

    /// A message (`parts` as `smb2::message` builds them: NetBIOS header first; `fill` the
    /// wire's filler) as it goes on the wire: compressed when that makes it smaller.
    /// NEGOTIATE and SESSION_SETUP stay in clear (compression is not set up yet; the preauth
    /// hash covers them as sent).
    pub fn outgoing(&self, parts: Vec<Part>, fill: &[u8]) -> Vec<Part> {
        let Some(h) = parts.first().and_then(|p| match p {
            Part::Bytes(b) => parse_header(b.get(4..)?).ok(),
            Part::Fill(_) => None,
        }) else {
            return parts;
        };
        if matches!(h.command, Command::NEGOTIATE | Command::SESSION_SETUP) {
            return parts;
        }
        let mut msg = Vec::new();
        for p in &parts {
            match p {
                Part::Bytes(b) => msg.extend_from_slice(b),
                // Half of each READ/WRITE payload is zeros, as unallocated VHDX blocks read:
                // runs for Pattern_V1.
                Part::Fill(n) => {
                    let data = n - n / 2;
                    msg.extend_from_slice(fill.get(..data).unwrap_or(&[]));
                    msg.resize(msg.len() + n / 2, 0);
                }
            }
        }
        let Some(body) = msg.get(4..) else {
            return parts;
        };
        // READ responses and WRITE requests keep their header and fixed body in clear: the
        // compressed part starts at the data (Offset, or after a first NONE payload).
        let bulk = matches!(
            (h.command, h.is_response()),
            (Command::READ, true) | (Command::WRITE, false)
        );
        let clear = if bulk {
            HEADER_LEN + fixed_body_len(h.command, h.is_response())
        } else {
            0
        };
        let packed = if self.chained {
            compress_chained(body, Some(self.algorithm), true, clear)
        } else {
            compress_unchained(body, self.algorithm, clear)
        };
        let Some(packed) = packed else {
            return parts;
        };
        let mut out = Vec::with_capacity(4 + packed.len());
        out.extend_from_slice(&session_message_header(packed.len()));
        out.extend_from_slice(&packed);
        vec![Part::Bytes(out)]
    }
}
