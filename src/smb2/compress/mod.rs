//! SMB 3.1.1 compression (MS-SMB2 2.2.42, 3.1.4.4, 3.1.5.3): the compression transform header
//! (`layout`), the MS-XCA algorithms (`lznt1`, `lz77`, `huffman`) and Pattern_V1, as pure
//! functions from bytes to bytes. [`decompress`] turns a compressed message into the SMB2
//! message it stands for; [`compress_unchained`] and [`compress_chained`] are the inverse
//! (`sqos synth --compress`).
//!
//! Crates: LZNT1 is the `lznt1` crate (MIT, `forbid(unsafe_code)`, round-trip tests; its
//! decoder has no output bound, so `lznt1.rs` feeds it one chunk at a time); LZ77+Huffman
//! decoding is `xpress-huffman` (Apache-2.0, `forbid(unsafe_code)`, fuzzed in its CI, takes
//! the output size and stops there; it does not read MS-XCA's 32-bit match length, which only
//! a match longer than 64 KiB needs). Plain LZ77 is written here: `rust-lzxpress` and
//! `xpress_rs` index the input unchecked (a bad message panics) and have no output bound.
//! LZ4 (0x0005, newer Windows) is recognised and counted, not decoded.
//!
//! Memory: the caller gives a `limit`, and no more than about that much is ever produced,
//! whatever OriginalCompressedSegmentSize claims; a claim above [`MAX_ORIGINAL_SIZE`] (the
//! largest SMB2 message the framer accepts) is refused. A bulk READ/WRITE needs only its
//! header and fixed body: with a small `limit`, decoding stops after the first chunk, match
//! or payload that covers it.

pub mod huffman;
pub mod layout;
pub mod lz77;
pub mod lznt1;
mod matcher;

use thiserror::Error;

use layout::{
    parse_pattern_v1, parse_payload_header, parse_transform_header, CHAINED_START, FLAG_CHAINED,
    UNCHAINED_LEN,
};
pub use layout::{Algorithm, PatternV1, PayloadHeader, TransformHeader};

use super::netbios::MAX_MESSAGE_LEN;

/// Largest decompressed message accepted (the largest SMB2 message sqos frames).
pub const MAX_ORIGINAL_SIZE: u64 = MAX_MESSAGE_LEN as u64;
/// Pattern_V1 is used for runs of at least this many bytes (MS-SMB2 3.1.4.4.1).
pub const PATTERN_MIN_RUN: usize = 64;

/// Why a compressed message could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CompressError {
    #[error("not a compression transform header")]
    NotCompressed,
    #[error("{what} cut off at byte {offset}")]
    Truncated { what: &'static str, offset: usize },
    #[error("compression algorithm {0} not decoded")]
    Unsupported(Algorithm),
    #[error("{algorithm} data corrupt: {why}")]
    Corrupt {
        algorithm: Algorithm,
        why: &'static str,
    },
    #[error("OriginalCompressedSegmentSize {size} exceeds the largest SMB2 message ({cap} bytes)")]
    TooLarge { size: u64, cap: u64 },
    #[error("decompressed to {got} bytes, the header says {expected}")]
    SizeMismatch { expected: u64, got: u64 },
    #[error("decompressed message does not start with an SMB2 header")]
    NotSmb2,
}

/// A decompressed message (or its first `limit` bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decompressed {
    /// The SMB2 message from its start: all of it when `complete`, else at least `limit`
    /// bytes of it.
    pub bytes: Vec<u8>,
    /// Size of the whole decompressed message, as the header declares.
    pub total: u64,
    pub complete: bool,
    pub chained: bool,
    /// Algorithms used, in order of first use (NONE included for chained payloads in clear);
    /// those of payloads not decoded (stopped early) too.
    pub algorithms: Vec<Algorithm>,
}

fn note_algorithm(list: &mut Vec<Algorithm>, a: Algorithm) {
    if !list.contains(&a) {
        list.push(a);
    }
}

/// One algorithm's data to at most `limit` bytes (`whole`: `data` is all of it).
fn expand(
    algorithm: Algorithm,
    data: &[u8],
    limit: usize,
    whole: bool,
) -> Result<Vec<u8>, CompressError> {
    match algorithm {
        Algorithm::Lznt1 => lznt1::decompress(data, limit),
        Algorithm::Lz77 => lz77::decompress(data, limit),
        Algorithm::Lz77Huffman => huffman::decompress_from(data, limit, whole),
        other => Err(CompressError::Unsupported(other)),
    }
}

/// Decompress the message `msg` (from its 0xFC protocol id, without the NetBIOS header),
/// producing at least its first `limit` bytes, all of it when it is no longer (then its size
/// is checked against the header).
pub fn decompress(msg: &[u8], limit: usize) -> Result<Decompressed, CompressError> {
    decode(msg, limit, false)
}

/// [`decompress`] for the first bytes of a message whose rest was not kept (larger than the
/// buffering bound, or lost): what they decode to, not complete.
pub fn decompress_prefix(msg: &[u8], limit: usize) -> Result<Decompressed, CompressError> {
    decode(msg, limit, true)
}

fn decode(msg: &[u8], limit: usize, cut: bool) -> Result<Decompressed, CompressError> {
    let header = parse_transform_header(msg)?;
    let mut algorithms = Vec::new();
    let (total, chained, mut out) = match header {
        TransformHeader::Unchained {
            original_size,
            algorithm,
            offset,
        } => {
            let total = u64::from(original_size) + u64::from(offset);
            check_size(total)?;
            if matches!(algorithm, Algorithm::None | Algorithm::PatternV1) {
                return Err(CompressError::Corrupt {
                    algorithm,
                    why: "not allowed in an unchained message",
                });
            }
            let start = UNCHAINED_LEN + offset as usize;
            let clear_end = if cut { start.min(msg.len()) } else { start };
            let clear = msg
                .get(UNCHAINED_LEN..clear_end)
                .ok_or(CompressError::Truncated {
                    what: "uncompressed part (Offset)",
                    offset: msg.len(),
                })?;
            let mut out = clear.to_vec();
            if out.len() < limit {
                let want = (limit - out.len()).min(original_size as usize);
                note_algorithm(&mut algorithms, algorithm);
                match expand(algorithm, msg.get(start..).unwrap_or(&[]), want, !cut) {
                    Ok(seg) => out.extend_from_slice(&seg),
                    // Kept in part: the end of the kept bytes may cut a token.
                    Err(_) if cut => {}
                    Err(e) => return Err(e),
                }
            }
            (total, false, out)
        }
        TransformHeader::Chained { original_size } => {
            let total = u64::from(original_size);
            check_size(total)?;
            let out = chained(msg, total, limit, cut, &mut algorithms)?;
            (total, true, out)
        }
    };
    let complete = out.len() as u64 >= total;
    if complete && out.len() as u64 != total {
        return Err(CompressError::SizeMismatch {
            expected: total,
            got: out.len() as u64,
        });
    }
    if !complete && out.len() < limit && !cut {
        // The data ended before the header's size was reached.
        return Err(CompressError::SizeMismatch {
            expected: total,
            got: out.len() as u64,
        });
    }
    if out.get(..4).is_some_and(|p| p != [0xFE, b'S', b'M', b'B']) || (!cut && out.len() < 4) {
        return Err(CompressError::NotSmb2);
    }
    out.truncate(total as usize);
    Ok(Decompressed {
        bytes: out,
        total,
        complete,
        chained,
        algorithms,
    })
}

fn check_size(total: u64) -> Result<(), CompressError> {
    if total > MAX_ORIGINAL_SIZE {
        return Err(CompressError::TooLarge {
            size: total,
            cap: MAX_ORIGINAL_SIZE,
        });
    }
    Ok(())
}

/// The payloads of a chained message (MS-SMB2 3.1.5.3), until `limit` bytes are out.
fn chained(
    msg: &[u8],
    total: u64,
    limit: usize,
    cut: bool,
    algorithms: &mut Vec<Algorithm>,
) -> Result<Vec<u8>, CompressError> {
    let mut out = Vec::with_capacity(limit.min(total as usize));
    let mut at = CHAINED_START;
    while at < msg.len() && out.len() < limit {
        let (ph, data_at) = match parse_payload_header(msg, at) {
            Ok(p) => p,
            Err(_) if cut => break,
            Err(e) => return Err(e),
        };
        let end = (at + layout::PAYLOAD_HEADER_LEN)
            .checked_add(ph.length as usize)
            .filter(|&e| e >= data_at);
        // A message kept only in part: the payload the bytes end in is decoded as far as
        // it goes (NONE and the MS-XCA decoders stop at the end of their input).
        let end = match end {
            Some(e) if e <= msg.len() => e,
            Some(_) if cut && ph.algorithm != Algorithm::PatternV1 => msg.len(),
            _ => {
                return Err(CompressError::Truncated {
                    what: "chained payload",
                    offset: at,
                })
            }
        };
        let data = &msg[data_at..end];
        let room = total.saturating_sub(out.len() as u64) as usize;
        note_algorithm(algorithms, ph.algorithm);
        match ph.algorithm {
            Algorithm::None => {
                if data.len() > room {
                    return Err(CompressError::SizeMismatch {
                        expected: total,
                        got: (out.len() + data.len()) as u64,
                    });
                }
                out.extend_from_slice(data);
            }
            Algorithm::PatternV1 => {
                let p = parse_pattern_v1(data)?;
                if p.repetitions as usize > room {
                    return Err(CompressError::SizeMismatch {
                        expected: total,
                        got: out.len() as u64 + u64::from(p.repetitions),
                    });
                }
                let n = (p.repetitions as usize).min(limit.saturating_sub(out.len()));
                out.resize(out.len() + n, p.pattern);
            }
            a => {
                let size = ph.original_payload_size.unwrap_or(0) as usize;
                if size > room {
                    return Err(CompressError::SizeMismatch {
                        expected: total,
                        got: (out.len() + size) as u64,
                    });
                }
                let want = size.min(limit.saturating_sub(out.len()));
                let seg = match expand(a, data, want, !(cut && end == msg.len())) {
                    Err(_) if cut && end == msg.len() => break,
                    r => r?,
                };
                if want == size && seg.len() != size && !(cut && end == msg.len()) {
                    return Err(CompressError::SizeMismatch {
                        expected: size as u64,
                        got: seg.len() as u64,
                    });
                }
                out.extend_from_slice(&seg[..want.min(seg.len())]);
            }
        }
        at = end;
    }
    // Stopped early: the algorithms of the payloads not decoded, from their headers alone.
    while at < msg.len() {
        let Ok((ph, _)) = parse_payload_header(msg, at) else {
            break;
        };
        note_algorithm(algorithms, ph.algorithm);
        at += layout::PAYLOAD_HEADER_LEN + ph.length as usize;
    }
    Ok(out)
}

/// An algorithm's compressed form of `data`.
pub fn squeeze(algorithm: Algorithm, data: &[u8]) -> Option<Vec<u8>> {
    match algorithm {
        Algorithm::Lznt1 => Some(lznt1::compress(data)),
        Algorithm::Lz77 => Some(lz77::compress(data)),
        Algorithm::Lz77Huffman if !data.is_empty() => Some(huffman::compress(data)),
        _ => None,
    }
}

/// MS-SMB2 3.1.4.4, unchained: the first `clear` bytes of `msg` stay as they are, the rest is
/// compressed with `algorithm`. None when that would not be smaller (the message then goes
/// uncompressed).
pub fn compress_unchained(msg: &[u8], algorithm: Algorithm, clear: usize) -> Option<Vec<u8>> {
    let clear = clear.min(msg.len());
    let rest = &msg[clear..];
    let packed = squeeze(algorithm, rest)?;
    if packed.len() >= rest.len() {
        return None;
    }
    let mut out = TransformHeader::Unchained {
        original_size: rest.len() as u32,
        algorithm,
        offset: clear as u32,
    }
    .to_bytes();
    out.extend_from_slice(&msg[..clear]);
    out.extend_from_slice(&packed);
    Some(out)
}

/// Length of the run of `data`'s first byte at its start (`from_end`: of its last byte at
/// its end).
fn run_len(data: &[u8], from_end: bool) -> usize {
    let mut it: Box<dyn Iterator<Item = &u8>> = if from_end {
        Box::new(data.iter().rev())
    } else {
        Box::new(data.iter())
    };
    let Some(&first) = it.next() else {
        return 0;
    };
    1 + it.take_while(|&&b| b == first).count()
}

/// MS-SMB2 3.1.4.4, chained: the first `clear` bytes in a NONE payload; then, with
/// `pattern` (Pattern_V1 negotiated), the runs of 64 or more equal bytes at the start and the
/// end of the rest as Pattern_V1 payloads (3.1.4.4.1); what is between compressed with
/// `algorithm` if that is smaller, else in a NONE payload. None when the whole would not be
/// smaller than the message.
pub fn compress_chained(
    msg: &[u8],
    algorithm: Option<Algorithm>,
    pattern: bool,
    clear: usize,
) -> Option<Vec<u8>> {
    let clear = clear.min(msg.len());
    let mut out = TransformHeader::Chained {
        original_size: msg.len() as u32,
    }
    .to_bytes();
    let mut first = true;
    let mut payload = |out: &mut Vec<u8>, algorithm: Algorithm, body: &[u8], size: Option<u32>| {
        let length = body.len() as u32 + if size.is_some() { 4 } else { 0 };
        PayloadHeader {
            algorithm,
            flags: if first { FLAG_CHAINED } else { 0 },
            length,
            original_payload_size: size,
        }
        .write(out);
        out.extend_from_slice(body);
        first = false;
    };
    if clear > 0 {
        payload(&mut out, Algorithm::None, &msg[..clear], None);
    }
    let mut rest = &msg[clear..];
    let mut tail = None;
    if pattern {
        let fwd = run_len(rest, false);
        if fwd >= PATTERN_MIN_RUN {
            let p = PatternV1 {
                pattern: rest[0],
                repetitions: fwd as u32,
            };
            payload(&mut out, Algorithm::PatternV1, &p.to_bytes(), None);
            rest = &rest[fwd..];
        }
        let back = run_len(rest, true);
        if back >= PATTERN_MIN_RUN {
            tail = Some(PatternV1 {
                pattern: rest[rest.len() - 1],
                repetitions: back as u32,
            });
            rest = &rest[..rest.len() - back];
        }
    }
    if !rest.is_empty() {
        match algorithm.and_then(|a| Some((a, squeeze(a, rest)?))) {
            Some((a, packed)) if packed.len() + 4 < rest.len() => {
                payload(&mut out, a, &packed, Some(rest.len() as u32));
            }
            _ => payload(&mut out, Algorithm::None, rest, None),
        }
    }
    if let Some(p) = tail {
        payload(&mut out, Algorithm::PatternV1, &p.to_bytes(), None);
    }
    (out.len() < msg.len()).then_some(out)
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// What `fuzz/fuzz_targets/compress.rs` checks, on arbitrary bytes after a valid
        /// header of each form: no panic, the output bounded by the limit.
        #[test]
        fn arbitrary_data_never_panics_and_stays_bounded(
            algorithm in 0u16..6,
            chained in any::<bool>(),
            size in 0u32..200_000,
            body in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            let mut msg = if chained {
                TransformHeader::Chained { original_size: size }.to_bytes()
            } else {
                TransformHeader::Unchained {
                    original_size: size,
                    algorithm: Algorithm::from_id(algorithm),
                    offset: 0,
                }
                .to_bytes()
            };
            if chained {
                msg.extend_from_slice(&algorithm.to_le_bytes());
                msg.extend_from_slice(&FLAG_CHAINED.to_le_bytes());
                msg.extend_from_slice(&(body.len() as u32).to_le_bytes());
            }
            msg.extend_from_slice(&body);
            for d in [decompress(&msg, 1000), decompress_prefix(&msg, 1000)].into_iter().flatten() {
                prop_assert!(d.bytes.len() <= 1000 + 4096);
                prop_assert!(d.bytes.len() as u64 <= d.total);
            }
            for a in [Algorithm::Lznt1, Algorithm::Lz77, Algorithm::Lz77Huffman] {
                if let Ok(out) = expand(a, &body, 1000, true) {
                    prop_assert!(out.len() <= 1000 + 4096);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(data: &[u8]) -> Vec<u8> {
        let mut m = b"\xfeSMB".to_vec();
        m.resize(64, 0);
        m.extend_from_slice(&[0x31, 0, 0x70, 0]);
        m.resize(112, 0);
        m.extend_from_slice(data);
        m
    }

    #[test]
    fn unchained_round_trips_with_every_algorithm() {
        let m = message(&b"VHDX ".repeat(400));
        for a in [Algorithm::Lznt1, Algorithm::Lz77, Algorithm::Lz77Huffman] {
            for clear in [0, 112] {
                let c = compress_unchained(&m, a, clear).expect("smaller");
                assert!(c.len() < m.len() / 4, "{a}");
                let d = decompress(&c, usize::MAX).unwrap();
                assert_eq!(d.bytes, m, "{a} clear {clear}");
                assert!(d.complete && !d.chained);
                assert_eq!(d.algorithms, vec![a]);
                assert_eq!(d.total, m.len() as u64);
            }
        }
    }

    #[test]
    fn chained_round_trips_with_patterns() {
        let mut data = vec![0u8; 3000];
        data.extend_from_slice(&b"VHDX ".repeat(200));
        data.extend_from_slice(&[0xAA; 500]);
        let m = message(&data);
        let c = compress_chained(&m, Some(Algorithm::Lz77), true, 112).expect("smaller");
        let d = decompress(&c, usize::MAX).unwrap();
        assert_eq!(d.bytes, m);
        assert!(d.chained);
        assert_eq!(
            d.algorithms,
            vec![Algorithm::None, Algorithm::PatternV1, Algorithm::Lz77,]
        );
        // A message of only a run: header in clear, then one pattern.
        let z = message(&[0u8; 65536]);
        let c = compress_chained(&z, None, true, 112).unwrap();
        assert_eq!(c.len(), 8 + 8 + 112 + 8 + 8);
        assert_eq!(decompress(&c, usize::MAX).unwrap().bytes, z);
    }

    #[test]
    fn stops_early_with_a_small_limit() {
        let m = message(&b"VHDX ".repeat(40_000));
        for a in [Algorithm::Lznt1, Algorithm::Lz77, Algorithm::Lz77Huffman] {
            let c = compress_unchained(&m, a, 0).unwrap();
            let d = decompress(&c, 200).unwrap();
            assert!(!d.complete);
            assert!(d.bytes.len() >= 200 && d.bytes.len() < 70_000, "{a}");
            assert_eq!(d.bytes[..], m[..d.bytes.len()]);
        }
    }

    #[test]
    fn a_prefix_decodes_as_far_as_it_goes() {
        // Numbers: compressible, but not to almost nothing.
        let text: Vec<String> = (0..40_000u32)
            .map(|i| (i * 7919 % 100_003).to_string())
            .collect();
        let m = message(text.join(" ").as_bytes());
        for a in [Algorithm::Lznt1, Algorithm::Lz77, Algorithm::Lz77Huffman] {
            let c = compress_unchained(&m, a, 112).unwrap();
            assert!(c.len() > 1000, "{a}");
            let d = decompress_prefix(&c[..c.len() / 2], 1 << 20).unwrap();
            assert!(!d.complete, "{a}");
            assert!(d.bytes.len() >= 112, "{a}");
            assert!(d.bytes[..] == m[..d.bytes.len()], "{a}");
            assert!(decompress(&c[..c.len() / 2], 1 << 20).is_err(), "{a}");
            let ch = compress_chained(&m, Some(a), true, 112).unwrap();
            let d = decompress_prefix(&ch[..ch.len() / 2], 1 << 20).unwrap();
            assert!(d.bytes.len() >= 112 && !d.complete, "{a}");
            assert!(d.bytes[..] == m[..d.bytes.len()], "{a}");
            assert!(decompress(&ch[..ch.len() / 2], 1 << 20).is_err(), "{a}");
        }
    }

    #[test]
    fn lies_and_damage_are_errors() {
        let m = message(&b"VHDX ".repeat(400));
        let mut c = compress_unchained(&m, Algorithm::Lz77, 0).unwrap();
        // OriginalCompressedSegmentSize of 4 GiB.
        c[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decompress(&c, usize::MAX),
            Err(CompressError::TooLarge { .. })
        ));
        // One more byte than there is.
        c[4..8].copy_from_slice(&(m.len() as u32 + 1).to_le_bytes());
        assert!(matches!(
            decompress(&c, usize::MAX),
            Err(CompressError::SizeMismatch { .. })
        ));
        let mut u = c.clone();
        u[8] = 5;
        assert_eq!(
            decompress(&u, usize::MAX),
            Err(CompressError::Unsupported(Algorithm::Lz4))
        );
        // A chained payload longer than the message.
        let mut ch = compress_chained(&m, Some(Algorithm::Lz77), false, 112).unwrap();
        ch[12..16].copy_from_slice(&9999u32.to_le_bytes());
        assert!(matches!(
            decompress(&ch, usize::MAX),
            Err(CompressError::Truncated { .. })
        ));
    }
}
