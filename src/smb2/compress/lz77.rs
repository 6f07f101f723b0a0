//! Plain LZ77 of MS-XCA (2.3 compression, 2.4 decompression): 32-bit flag words, 16-bit
//! match tokens (offset 13 bits, length 3 bits) with the shared-nibble, byte, 16-bit and
//! 32-bit length extensions. Written here because the crates that have it panic on bad input
//! or have no output bound (see `super` for the survey).

use super::layout::Algorithm;
use super::matcher::{tokens, Limits, Token};
use super::CompressError;

fn corrupt(why: &'static str) -> CompressError {
    CompressError::Corrupt {
        algorithm: Algorithm::Lz77,
        why,
    }
}

/// Decompress `input`, stopping once `limit` bytes are out (the output may then be longer
/// than `limit` by the rest of one match, never by more than that match's length, itself
/// bounded by `limit`).
pub fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, CompressError> {
    let mut out: Vec<u8> = Vec::with_capacity(limit.min(input.len().saturating_mul(4)));
    let mut pos = 0usize;
    let mut flags = 0u32;
    let mut flag_count = 0u32;
    let mut nibble_at: Option<usize> = None;
    let byte = |at: usize| input.get(at).copied().ok_or(corrupt("length past the end"));
    while out.len() < limit {
        if flag_count == 0 {
            let Some(w) = input.get(pos..pos + 4) else {
                // The end: what is left is padding (or nothing).
                return Ok(out);
            };
            flags = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            pos += 4;
            flag_count = 32;
        }
        flag_count -= 1;
        if flags & (1 << flag_count) == 0 {
            let Some(&b) = input.get(pos) else {
                return Ok(out);
            };
            out.push(b);
            pos += 1;
            continue;
        }
        // A match flag with no input left is the encoder's padding: the end.
        let Some(t) = input.get(pos..pos + 2) else {
            return Ok(out);
        };
        let token = usize::from(u16::from_le_bytes([t[0], t[1]]));
        pos += 2;
        let offset = token / 8 + 1;
        let mut length = token % 8;
        if length == 7 {
            length = match nibble_at.take() {
                None => {
                    nibble_at = Some(pos);
                    pos += 1;
                    usize::from(byte(pos - 1)? & 0x0F)
                }
                Some(at) => usize::from(byte(at)? >> 4),
            };
            if length == 15 {
                length = usize::from(byte(pos)?);
                pos += 1;
                if length == 255 {
                    let w = input
                        .get(pos..pos + 2)
                        .ok_or(corrupt("length past the end"))?;
                    length = usize::from(u16::from_le_bytes([w[0], w[1]]));
                    pos += 2;
                    if length == 0 {
                        let w = input
                            .get(pos..pos + 4)
                            .ok_or(corrupt("length past the end"))?;
                        length = u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as usize;
                        pos += 4;
                    }
                    length = length
                        .checked_sub(15 + 7)
                        .ok_or(corrupt("extended length below 22"))?;
                }
                length += 15;
            }
            length += 7;
        }
        length += 3;
        if offset > out.len() {
            return Err(corrupt("match before the start of the output"));
        }
        // Never copy more than the caller wants (a 4-byte length could ask for 4 GiB).
        let length = length.min(limit - out.len());
        let from = out.len() - offset;
        for i in 0..length {
            let b = out[from + i];
            out.push(b);
        }
    }
    Ok(out)
}

/// What plain LZ77 can say: 13-bit offsets (8 KiB back), lengths up to the 32-bit extension
/// (kept at 64 KiB for the search).
const LIMITS: Limits = Limits {
    max_dist: 8192,
    max_len: 1 << 16,
    block: None,
    hash_bits: 14,
};

/// Compress `input` (the shared greedy match search). The MS-XCA 2.3 encoding: each flag
/// word is written where it was reserved once its 32 items are known; unused flag bits at
/// the end are ones, which the decoder reads as the end.
pub fn compress(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() / 2 + 8);
    let mut flags = 0u32;
    let mut flag_count = 0u32;
    let mut flag_at = 0usize;
    out.extend_from_slice(&[0; 4]);
    let mut nibble_at: Option<usize> = None;
    for token in tokens(input, &LIMITS) {
        let bit = match token {
            Token::Literal(b) => {
                out.push(b);
                0
            }
            Token::Match { len, dist } => {
                put_match(&mut out, &mut nibble_at, len, dist);
                1
            }
        };
        flags = (flags << 1) | bit;
        flag_count += 1;
        if flag_count == 32 {
            out[flag_at..flag_at + 4].copy_from_slice(&flags.to_le_bytes());
            flag_count = 0;
            flags = 0;
            flag_at = out.len();
            out.extend_from_slice(&[0; 4]);
        }
    }
    let unused = 32 - flag_count;
    let word = if unused == 32 {
        u32::MAX
    } else {
        (flags << unused) | ((1u32 << unused) - 1)
    };
    out[flag_at..flag_at + 4].copy_from_slice(&word.to_le_bytes());
    out
}

/// One match (MS-XCA 2.3): offset and length in a 16-bit word, longer lengths in a shared
/// nibble, a byte, then 16 or 32 bits.
fn put_match(out: &mut Vec<u8>, nibble_at: &mut Option<usize>, len: usize, dist: usize) {
    let len = len - 3;
    let off = (dist - 1) << 3;
    if len < 7 {
        out.extend_from_slice(&((off | len) as u16).to_le_bytes());
        return;
    }
    out.extend_from_slice(&((off | 7) as u16).to_le_bytes());
    let rest = len - 7;
    let nib = rest.min(15) as u8;
    match nibble_at.take() {
        None => {
            *nibble_at = Some(out.len());
            out.push(nib);
        }
        Some(at) => out[at] |= nib << 4,
    }
    if rest >= 15 {
        let rest = rest - 15;
        if rest < 255 {
            out.push(rest as u8);
        } else {
            out.push(255);
            let total = rest + 15 + 7;
            if total < 1 << 16 {
                out.extend_from_slice(&(total as u16).to_le_bytes());
            } else {
                out.extend_from_slice(&0u16.to_le_bytes());
                out.extend_from_slice(&(total as u32).to_le_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MS-XCA 3.1, first example: no matches.
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
    const ALPHABET_XCA: &[u8] = &[
        0x3f, 0x00, 0x00, 0x00, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b,
        0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a,
    ];
    /// MS-XCA 3.1, second example: "abc" 100 times, one long match.
    const ABC_XCA: &[u8] = &[
        0xff, 0xff, 0xff, 0x1f, 0x61, 0x62, 0x63, 0x17, 0x00, 0x0f, 0xff, 0x26, 0x01,
    ];

    fn abc100() -> Vec<u8> {
        b"abc".repeat(100)
    }

    #[test]
    fn decodes_the_ms_xca_examples() {
        assert_eq!(decompress(ALPHABET_XCA, 1 << 20).unwrap(), ALPHABET);
        assert_eq!(decompress(ABC_XCA, 1 << 20).unwrap(), abc100());
    }

    #[test]
    fn encodes_the_ms_xca_examples_byte_for_byte() {
        assert_eq!(compress(ALPHABET), ALPHABET_XCA);
        assert_eq!(compress(&abc100()), ABC_XCA);
    }

    #[test]
    fn stops_at_the_limit() {
        assert_eq!(decompress(ABC_XCA, 10).unwrap(), &abc100()[..10]);
        assert_eq!(decompress(ALPHABET_XCA, 5).unwrap(), b"abcde");
    }

    #[test]
    fn round_trips_long_runs_and_text() {
        let mut data = vec![0u8; 70_000];
        data.extend_from_slice(&b"sqos-synth VHDX block data ".repeat(900));
        data.extend((0..5000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
        let c = compress(&data);
        assert!(c.len() < data.len() / 10, "{} bytes", c.len());
        assert_eq!(decompress(&c, data.len()).unwrap(), data);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        // A match before any literal.
        assert!(decompress(&[0xff, 0xff, 0xff, 0xff, 0x00, 0x00], 100).is_err());
        // Length extension cut off.
        assert!(decompress(&[0x00, 0x00, 0x00, 0x40, 0x61, 0x07, 0x00], 100).is_err());
        // A 4-byte length of 4 GiB is bounded by the limit.
        let huge = [
            0x00, 0x00, 0x00, 0x40, 0x61, 0x07, 0x00, 0x0f, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(decompress(&huge, 1000).unwrap().len(), 1000);
    }
}
