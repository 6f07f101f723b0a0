//! Fuzz the SMB 3.1.1 compression transform (`smb2::compress`): arbitrary bytes as a whole
//! message and as a prefix, and each MS-XCA decoder alone. No panic; the output never goes
//! past the limit by more than one LZNT1 chunk (4 KiB) or the header's size; whatever decodes
//! starts with an SMB2 header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sqos::smb2::compress::{decompress, decompress_prefix, huffman, lz77, lznt1};

const LIMIT: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    for d in [decompress(data, LIMIT), decompress_prefix(data, LIMIT)]
        .into_iter()
        .flatten()
    {
        assert!(d.bytes.len() as u64 <= d.total);
        assert!(d.bytes.len() <= LIMIT + 4096);
        assert_eq!(d.bytes.get(..4).unwrap_or(b"\xfeSMB"), b"\xfeSMB");
    }
    if let Ok(out) = lz77::decompress(data, LIMIT) {
        assert!(out.len() <= LIMIT);
    }
    if let Ok(out) = lznt1::decompress(data, LIMIT) {
        assert!(out.len() <= LIMIT + 4096);
    }
    if let Ok(out) = huffman::decompress(data, LIMIT) {
        assert!(out.len() <= LIMIT);
    }
});
