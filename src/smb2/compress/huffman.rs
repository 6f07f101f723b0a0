//! LZ77+Huffman (MS-XCA 2.1 compression, 2.2 decompression). Decoding is the
//! `xpress-huffman` crate's; encoding (for `sqos synth --compress lz77-huffman`) is here:
//! LZ77 tokens, a length-limited canonical Huffman code per 64 KiB block, and the bit stream
//! of 16-bit little-endian words with the extra length bytes in between, in the order the
//! decoder reads them.

use std::collections::BinaryHeap;

use super::layout::Algorithm;
use super::matcher::{tokens, Limits, Token};
use super::CompressError;

/// Output bytes per block (each has its own code table).
const BLOCK: usize = 1 << 16;
/// 256 literals + 256 match symbols (offset bit count << 4 | length nibble).
const SYMBOLS: usize = 512;
const EOF_SYMBOL: usize = 256;
const MAX_CODE_LEN: u8 = 15;

/// Decompress `input`, stopping once `limit` bytes are out (at most one match longer).
pub fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, CompressError> {
    decompress_from(input, limit, true)
}

/// [`decompress`]; `whole`: `input` is the whole stream (else a prefix: what follows its end
/// is unknown, and no padding is made up).
pub fn decompress_from(input: &[u8], limit: usize, whole: bool) -> Result<Vec<u8>, CompressError> {
    let mut out = crate_decompress(input, limit)?;
    if whole && out.len() < limit && input.len() > TABLE_LEN {
        // The crate stops once its read position reaches the end of the input, even when the
        // 32 bits it has read ahead still hold symbols: a stream whose last symbols fit in
        // that window (Windows writes such streams for short data) comes out short. Two
        // zero words after the end let it decode them; the caller's size checks still judge
        // the result.
        let mut padded = Vec::with_capacity(input.len() + 4);
        padded.extend_from_slice(input);
        padded.extend_from_slice(&[0; 4]);
        out = crate_decompress(&padded, limit)?;
    }
    out.truncate(limit);
    Ok(out)
}

/// Bytes of the code length table in front of each block.
const TABLE_LEN: usize = 256;

fn crate_decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, CompressError> {
    xpress_huffman::decompress(input, limit).map_err(|e| CompressError::Corrupt {
        algorithm: Algorithm::Lz77Huffman,
        why: match e {
            xpress_huffman::Error::TruncatedTable => "truncated Huffman table",
            xpress_huffman::Error::BadMatchOffset => "match before the start of the output",
            xpress_huffman::Error::InvalidHuffmanTable => "invalid Huffman table",
        },
    })
}

/// What LZ77+Huffman can say: distances below 64 KiB, lengths up to 65538 (the 16-bit
/// extension), never across a block end (each block is decoded to its 64 KiB).
const LIMITS: Limits = Limits {
    max_dist: BLOCK - 1,
    max_len: 65_538,
    block: Some(BLOCK),
    hash_bits: 15,
};

fn bit_len(dist: usize) -> usize {
    (usize::BITS - 1 - dist.leading_zeros()) as usize
}

fn symbol(t: Token) -> usize {
    match t {
        Token::Literal(b) => usize::from(b),
        Token::Match { len, dist } => 256 + (bit_len(dist) << 4 | (len - 3).min(15)),
    }
}

/// Code lengths of at most 15 bits for `freq` (zero-frequency symbols get none): Huffman's
/// construction, with the frequencies flattened and tried again while a code is too long.
fn code_lengths(freq: &[u32; SYMBOLS]) -> [u8; SYMBOLS] {
    let mut f = *freq;
    loop {
        let mut lens = [0u8; SYMBOLS];
        let used: Vec<usize> = (0..SYMBOLS).filter(|&s| f[s] > 0).collect();
        if used.len() == 1 {
            lens[used[0]] = 1;
            return lens;
        }
        // Nodes: leaves then internal nodes; parent links give each leaf its depth.
        let mut parent: Vec<usize> = vec![usize::MAX; used.len()];
        let mut heap: BinaryHeap<std::cmp::Reverse<(u64, usize)>> = used
            .iter()
            .enumerate()
            .map(|(n, &s)| std::cmp::Reverse((u64::from(f[s]), n)))
            .collect();
        while heap.len() > 1 {
            let (Some(std::cmp::Reverse((wa, a))), Some(std::cmp::Reverse((wb, b)))) =
                (heap.pop(), heap.pop())
            else {
                break;
            };
            let n = parent.len();
            parent.push(usize::MAX);
            parent[a] = n;
            parent[b] = n;
            heap.push(std::cmp::Reverse((wa + wb, n)));
        }
        let mut too_long = false;
        for (n, &s) in used.iter().enumerate() {
            let mut d = 0u8;
            let mut p = parent[n];
            while p != usize::MAX {
                d = d.saturating_add(1);
                p = parent[p];
            }
            too_long |= d > MAX_CODE_LEN;
            lens[s] = d;
        }
        if !too_long {
            return lens;
        }
        for x in f.iter_mut().filter(|x| **x > 0) {
            *x = (*x >> 1).max(1);
        }
    }
}

/// Canonical codes (MS-XCA): by increasing length, then symbol value.
fn canonical(lens: &[u8; SYMBOLS]) -> [u16; SYMBOLS] {
    let mut order: Vec<usize> = (0..SYMBOLS).filter(|&s| lens[s] > 0).collect();
    order.sort_by_key(|&s| (lens[s], s));
    let mut codes = [0u16; SYMBOLS];
    let mut code = 0u32;
    let mut prev_len = 0u8;
    for (i, &s) in order.iter().enumerate() {
        if i > 0 {
            code += 1;
        }
        code <<= lens[s] - prev_len;
        prev_len = lens[s];
        codes[s] = code as u16;
    }
    codes
}

/// The bit stream: 16-bit words written into slots reserved two ahead, so that the extra
/// length bytes land where the decoder, which has read two words ahead, looks for them.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    slot_a: usize,
    slot_b: usize,
    acc: u16,
    n: u32,
}

impl<'a> BitWriter<'a> {
    fn new(out: &'a mut Vec<u8>) -> BitWriter<'a> {
        let slot_a = out.len();
        out.extend_from_slice(&[0; 4]);
        BitWriter {
            out,
            slot_a,
            slot_b: slot_a + 2,
            acc: 0,
            n: 0,
        }
    }

    fn bits(&mut self, value: u32, count: usize) {
        for i in (0..count).rev() {
            // A word is written only when the next bit needs room: the decoder refills
            // after consuming the 17th bit, not the 16th.
            if self.n == 16 {
                self.out[self.slot_a..self.slot_a + 2].copy_from_slice(&self.acc.to_le_bytes());
                self.slot_a = self.slot_b;
                self.slot_b = self.out.len();
                self.out.extend_from_slice(&[0; 2]);
                self.acc = 0;
                self.n = 0;
            }
            self.acc = self.acc << 1 | ((value >> i) & 1) as u16;
            self.n += 1;
        }
    }

    fn byte(&mut self, b: u8) {
        self.out.push(b);
    }

    fn finish(self) {
        let word = if self.n == 0 {
            0
        } else {
            self.acc << (16 - self.n)
        };
        self.out[self.slot_a..self.slot_a + 2].copy_from_slice(&word.to_le_bytes());
    }
}

/// Compress `input` (not empty) as Windows' encoder lays it out: per 64 KiB block a 256-byte
/// table of 4-bit code lengths, then the bit stream; an EOF symbol (256) ends the last block.
pub fn compress(input: &[u8]) -> Vec<u8> {
    let toks = tokens(input, &LIMITS);
    let mut blocks: Vec<&[Token]> = Vec::new();
    let (mut start, mut produced) = (0usize, 0usize);
    for (k, t) in toks.iter().enumerate() {
        produced += match *t {
            Token::Literal(_) => 1,
            Token::Match { len, .. } => len,
        };
        if produced >= BLOCK && k + 1 < toks.len() {
            blocks.push(&toks[start..=k]);
            start = k + 1;
            produced = 0;
        }
    }
    blocks.push(&toks[start..]);
    let mut out = Vec::with_capacity(input.len() / 2 + 512);
    let last = blocks.len() - 1;
    for (bi, block) in blocks.iter().enumerate() {
        let mut freq = [0u32; SYMBOLS];
        for &t in block.iter() {
            freq[symbol(t)] += 1;
        }
        if bi == last {
            freq[EOF_SYMBOL] += 1;
        }
        if freq.iter().filter(|&&f| f > 0).count() < 2 {
            // A one-symbol code has no bits to decode: give it a partner.
            let spare = if freq[0] == 0 { 0 } else { 1 };
            freq[spare] = 1;
        }
        let lens = code_lengths(&freq);
        let codes = canonical(&lens);
        for pair in lens.chunks(2) {
            out.push(pair[0] | pair[1] << 4);
        }
        let mut w = BitWriter::new(&mut out);
        let put =
            |w: &mut BitWriter<'_>, s: usize| w.bits(u32::from(codes[s]), usize::from(lens[s]));
        for &t in block.iter() {
            put(&mut w, symbol(t));
            if let Token::Match { len, dist } = t {
                let l = len - 3;
                if l >= 15 {
                    if l - 15 < 255 {
                        w.byte((l - 15) as u8);
                    } else {
                        w.byte(255);
                        for b in (l as u16).to_le_bytes() {
                            w.byte(b);
                        }
                    }
                }
                let bits = bit_len(dist);
                w.bits((dist - (1 << bits)) as u32, bits);
            }
        }
        if bi == last {
            put(&mut w, EOF_SYMBOL);
        }
        w.finish();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MS-XCA 3.2, second example: "abc" 100 times (table, then 7 bytes of bits and lengths).
    fn abc_xca() -> Vec<u8> {
        let mut t = vec![0u8; 256];
        t[48] = 0x30;
        t[49] = 0x23;
        t[128] = 0x02;
        t[143] = 0x20;
        t.extend_from_slice(&[0xa8, 0xdc, 0x00, 0x00, 0xff, 0x26, 0x01]);
        t
    }

    /// MS-XCA 3.2, first example: the alphabet, no matches.
    fn alphabet_xca() -> Vec<u8> {
        let mut t = vec![0u8; 256];
        t[48..62].copy_from_slice(&[
            0x50, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x45, 0x44, 0x04,
        ]);
        t[128] = 0x04;
        t.extend_from_slice(&[
            0xd8, 0x52, 0x3e, 0xd7, 0x94, 0x11, 0x5b, 0xe9, 0x19, 0x5f, 0xf9, 0xd6, 0x7c, 0xdf,
            0x8d, 0x04, 0x00, 0x00, 0x00, 0x00,
        ]);
        t
    }

    #[test]
    fn decodes_the_ms_xca_examples() {
        assert_eq!(decompress(&abc_xca(), 300).unwrap(), b"abc".repeat(100));
        assert_eq!(
            decompress(&alphabet_xca(), 26).unwrap(),
            b"abcdefghijklmnopqrstuvwxyz"
        );
    }

    #[test]
    fn encodes_the_ms_xca_abc_example_byte_for_byte() {
        assert_eq!(compress(&b"abc".repeat(100)), abc_xca());
    }

    #[test]
    fn round_trips_blocks_long_matches_and_noise() {
        let mut data = vec![0u8; 150_000];
        data.extend_from_slice(&b"sqos-synth VHDX block data ".repeat(3000));
        data.extend((0..70_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8));
        data.extend_from_slice(b"tail");
        let c = compress(&data);
        assert!(c.len() < data.len() / 2, "{} bytes", c.len());
        assert_eq!(decompress(&c, data.len()).unwrap(), data);
        for n in [1usize, 2, 3, 17, 300, 65_536, 65_537] {
            let d: Vec<u8> = (0..n).map(|i| (i % 7) as u8 * 31).collect();
            assert_eq!(decompress(&compress(&d), n).unwrap(), d, "{n} bytes");
        }
    }

    #[test]
    fn stops_at_the_limit() {
        assert_eq!(decompress(&abc_xca(), 4).unwrap(), b"abca");
    }
}
