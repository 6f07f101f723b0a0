//! LZNT1 (MS-XCA 2.5): the `lznt1` crate decodes and encodes; this wrapper walks the chunks
//! itself so that each chunk is decoded on its own (a match cannot reach into the previous
//! chunk, as in Windows), is held to the 4096 bytes a chunk decompresses to, and decoding
//! stops once the caller has what it wants.

use super::layout::Algorithm;
use super::CompressError;

/// Uncompressed size of a full chunk.
const CHUNK: usize = 4096;

fn corrupt(why: &'static str) -> CompressError {
    CompressError::Corrupt {
        algorithm: Algorithm::Lznt1,
        why,
    }
}

/// Decompress `input`, stopping after the chunk that brings the output to `limit` bytes
/// (the output is at most one chunk, 4 KiB, longer than `limit`).
pub fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, CompressError> {
    let mut out = Vec::with_capacity(limit.min(input.len().saturating_mul(8)));
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut pos = 0usize;
    while out.len() < limit {
        let Some(h) = input.get(pos..pos + 2) else {
            // The end, or a lone terminating zero byte.
            return Ok(out);
        };
        let header = u16::from_le_bytes([h[0], h[1]]);
        if header == 0 {
            return Ok(out);
        }
        let size = usize::from(header & 0x0FFF) + 1;
        // A chunk that runs past the end: the input was cut (the caller's size check
        // says so); what came before stands.
        let Some(body) = input.get(pos..pos + 2 + size) else {
            return Ok(out);
        };
        chunk.clear();
        if header & 0x8000 != 0 {
            lznt1::decompress(body, &mut chunk).map_err(|_| corrupt("bad chunk"))?;
        } else {
            chunk.extend_from_slice(&body[2..]);
        }
        if chunk.len() > CHUNK {
            return Err(corrupt("chunk decompresses to more than 4096 bytes"));
        }
        out.extend_from_slice(&chunk);
        pos += 2 + size;
    }
    Ok(out)
}

/// Compress `input` with the crate's encoder.
pub fn compress(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() / 2 + 8);
    lznt1::compress(input, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MS-XCA 3.3: the LZNT1 example.
    const SONG: &[u8] = b"F# F# G A A G F# E D D E F# F# E E F# F# G A A G F# E D D E F# E D D E E F# D E F# G F# D E F# G F# E D E A F# F# G A A G F# E D D E F# E D D\0";
    const SONG_XCA: &[u8] = &[
        0x38, 0xb0, 0x88, 0x46, 0x23, 0x20, 0x00, 0x20, 0x47, 0x20, 0x41, 0x00, 0x10, 0xa2, 0x47,
        0x01, 0xa0, 0x45, 0x20, 0x44, 0x00, 0x08, 0x45, 0x01, 0x50, 0x79, 0x00, 0xc0, 0x45, 0x20,
        0x05, 0x24, 0x13, 0x88, 0x05, 0xb4, 0x02, 0x4a, 0x44, 0xef, 0x03, 0x58, 0x02, 0x8c, 0x09,
        0x16, 0x01, 0x48, 0x45, 0x00, 0xbe, 0x00, 0x9e, 0x00, 0x04, 0x01, 0x18, 0x90, 0x00,
    ];

    #[test]
    fn decodes_the_ms_xca_example() {
        assert_eq!(decompress(SONG_XCA, 1 << 20).unwrap(), SONG);
    }

    #[test]
    fn round_trips_and_stops_early() {
        let mut data = vec![0u8; 9000];
        data.extend_from_slice(&b"sqos-synth VHDX block data ".repeat(400));
        let c = compress(&data);
        assert!(c.len() < data.len() / 10);
        assert_eq!(decompress(&c, usize::MAX).unwrap(), data);
        // One chunk is enough for 100 bytes.
        assert_eq!(decompress(&c, 100).unwrap().len(), 4096);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert_eq!(decompress(&[0x10, 0xb0, 0x01], 100), Ok(vec![]));
        // A match before anything in the chunk.
        assert!(decompress(&[0x02, 0xb0, 0x01, 0x00, 0x00], 100).is_err());
    }
}
