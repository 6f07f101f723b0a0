//! `sqos synth --compress`: every algorithm, unchained and chained (with Pattern_V1), in clear
//! and inside encryption, decompresses to everything the generator sent.

use std::path::{Path, PathBuf};

use crate::support::*;
use sqos::smb2::compress::Algorithm;
use sqos::smb2::crypto::Cipher;
use sqos::synth::{Scenario, SynthConfig, SynthSummary};

/// Generate steady (10 s) compressed with `algo` (chained or not), encrypted with `cipher`.
fn synth(
    d: &Path,
    algo: Algorithm,
    chained: bool,
    cipher: Option<Cipher>,
) -> (PathBuf, PathBuf, SynthSummary) {
    let tag = format!("{algo:?}-{chained}-{cipher:?}");
    let mut a = SynthConfig::new(Scenario::Steady, d.join(format!("{tag}.pcap")));
    a.duration = Some(10.0);
    a.compress = Some(algo);
    a.chained = chained;
    a.encrypt = cipher;
    a.keys_out = cipher.map(|_| d.join(format!("{tag}.keys")));
    let summary = sqos::synth::run(&a).expect("synth");
    (a.output.clone(), d.join(format!("{tag}.keys")), summary)
}

#[test]
fn every_algorithm_and_form_decompresses_everything_the_generator_sent() {
    let d = scratch("sqos-compress-synth");
    let d = d.path();
    for algo in [Algorithm::Lznt1, Algorithm::Lz77, Algorithm::Lz77Huffman] {
        for chained in [false, true] {
            for cipher in [None, Some(Cipher::Aes128Gcm)] {
                let what = format!("{algo:?} chained {chained} {cipher:?}");
                let (cap, keys, sum) = synth(d, algo, chained, cipher);
                let cfg = match cipher {
                    Some(_) => with_keys(&[&keys]),
                    None => Default::default(),
                };
                let (c, r) = run_with(&cap, cfg);
                let s = &r.stats;
                assert_eq!(c.sqos.len() as u64, 2 * sum.sqos_requests, "{what}");
                assert_eq!(c.io.len() as u64, sum.ios, "{what}");
                let bytes: u64 = c.io.iter().map(|i| u64::from(i.requested)).sum();
                assert_eq!(bytes, sum.io_bytes, "{what}");
                let mut names: Vec<&str> = c
                    .sqos
                    .iter()
                    .filter_map(|q| q.file_name.as_deref())
                    .collect();
                names.sort();
                names.dedup();
                assert_eq!(names.len(), 4, "{what}: {names:?}");
                // Every READ response and WRITE request is compressed (the filler compresses
                // well); nothing fails; the algorithms are the ones negotiated.
                assert!(s.compressed_messages >= sum.ios, "{what}: {s:?}");
                assert_eq!(s.undecompressed_messages, 0, "{what}");
                assert_eq!(s.decompressed_messages, s.compressed_messages, "{what}");
                let used: Vec<&str> = s
                    .compressed_by_algorithm
                    .keys()
                    .map(|k| k.as_str())
                    .collect();
                let name = algo.to_string();
                if chained {
                    assert_eq!(s.compressed_chained, s.compressed_messages, "{what}");
                    // Header and fixed body of READ/WRITE in a NONE payload, the zero half of
                    // their data as Pattern_V1.
                    let mut want = vec![name.as_str(), "NONE", "Pattern_V1"];
                    want.sort();
                    assert_eq!(used, want, "{what}");
                    assert!(s.compressed_by_algorithm["Pattern_V1"] >= sum.ios, "{what}");
                } else {
                    assert_eq!(s.compressed_chained, 0, "{what}");
                    assert_eq!(used, vec![name.as_str()], "{what}");
                }
                if cipher.is_some() {
                    assert_eq!(s.undecrypted(), 0, "{what}");
                    assert_eq!(s.decrypted_messages, s.encrypted_messages, "{what}");
                    assert!(s.encrypted_messages >= s.compressed_messages, "{what}");
                }
                assert!(
                    !c.notes.iter().any(|n| n.message.contains("compressed")),
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn compression_needs_a_session_setup() {
    let d = scratch("sqos-compress-args");
    let d = d.path();
    let mut a = SynthConfig::new(Scenario::SpecExamples, d.join("x.pcap"));
    a.compress = Some(Algorithm::Lz77);
    assert!(sqos::synth::run(&a).is_err());
}

/// `--scenario large --compress` (the compressed benchmark stream): every I/O and SQOS message
/// is found again, every bulk message decompressed only to its fixed body.
#[test]
fn the_large_scenario_compresses_too() {
    let d = scratch("sqos-compress-large");
    let mut a = SynthConfig::new(Scenario::Large, d.path().join("large.pcap"));
    a.size = Some(4 << 20);
    a.compress = Some(Algorithm::Lz77Huffman);
    a.chained = true;
    let sum = sqos::synth::run(&a).expect("synth");
    let (c, r) = run(&a.output);
    assert_eq!(c.io.len() as u64, sum.ios);
    assert_eq!(c.sqos.len() as u64, 2 * sum.sqos_requests);
    assert!(r.stats.compressed_messages >= sum.ios);
    assert_eq!(r.stats.undecompressed_messages, 0);
    // The filler and its zero half compress far below the data they stand for.
    let file = std::fs::metadata(&a.output).expect("capture").len();
    assert!(
        file * 10 < sum.io_bytes,
        "{file} bytes for {}",
        sum.io_bytes
    );
}
