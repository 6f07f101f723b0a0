//! Fuzz the SMB3 decryption inputs: the key file parser (any text), the transform header
//! parser, and the framer opening encrypted messages with a known key (any stream bytes):
//! no panic, no unbounded memory, a parsed header writes back to the same bytes.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use sqos::smb2::crypto::keys::parse_key_file;
use sqos::smb2::crypto::{Decryptor, KeyRing};
use sqos::smb2::framer::{Framer, FramerConfig, SealCtx, SealSpares};
use sqos::smb2::transform::parse_transform_header;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(keys) = parse_key_file(text) {
            for k in &keys {
                let line = sqos::smb2::crypto::keys::key_line(k);
                assert_eq!(
                    parse_key_file(&line).ok().as_deref(),
                    Some(&[k.clone()][..])
                );
            }
        }
    }
    if let Ok(h) = parse_transform_header(data) {
        assert_eq!(&h.to_bytes()[..], &data[..52]);
    }
    // The stream as NBSS messages, with a key for session 1 so the sealed path runs.
    let mut ring = KeyRing::default();
    if let Ok(k) = parse_key_file("0100000000000000,00112233445566778899aabbccddeeff,,") {
        for x in k {
            ring.insert(x);
        }
    }
    let mut dec = Decryptor::new(Arc::new(ring));
    let cfg = FramerConfig {
        max_keep: 4096,
        max_parts: 8,
        keep_ioctls: &[sqos::sqos::FSCTL_STORAGE_QOS_CONTROL],
    };
    let mut spares = SealSpares::default();
    for to_server in [true, false] {
        let mut f = Framer::new(cfg);
        let mut out = Vec::new();
        let mut ctx = SealCtx {
            crypto: Some(&mut dec),
            conn: 0,
            to_server,
            // Reused across this input's messages, as a thread's framers reuse them.
            spares: Some(&mut spares),
        };
        f.push_sealed(data, &mut ctx, &mut out);
        assert!(f.buffered() <= 2 * cfg.max_keep + 64);
        f.finish_sealed(&mut ctx, &mut out);
    }
});
