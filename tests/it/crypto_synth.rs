//! `sqos synth --encrypt`: encrypted sessions decrypt to everything the generator sent, with
//! all four ciphers, from the key file it writes, from the session key alone (3.0.2's KDF;
//! 3.1.1's preauth hash), and never by buffering bulk data.

use std::path::{Path, PathBuf};

use crate::support::*;
use sqos::capture::CaptureReader;
use sqos::pipeline::Pipeline;
use sqos::smb2::crypto::Cipher;
use sqos::synth::{Scenario, SynthConfig, SynthSummary};

/// Generate `scenario` (encrypted with `cipher` if given); returns (capture, keys, summary).
fn synth(
    d: &Path,
    scenario: Scenario,
    cipher: Option<Cipher>,
    tweak: impl Fn(&mut SynthConfig),
) -> (PathBuf, PathBuf, SynthSummary) {
    let tag = format!("{scenario:?}-{cipher:?}");
    let mut a = SynthConfig::new(scenario, d.join(format!("{tag}.pcap")));
    a.encrypt = cipher;
    a.keys_out = cipher.map(|_| d.join(format!("{tag}.keys")));
    tweak(&mut a);
    let summary = sqos::synth::run(&a).expect("synth");
    (a.output.clone(), d.join(format!("{tag}.keys")), summary)
}

/// Everything the generator sent is decoded: every SQOS request and response, every I/O, all
/// four VM disks by name; the SMB2 commands are those of the same scenario in clear (the
/// simulated timing shifts a little with the longer messages, so the runs are not identical).
#[test]
fn every_cipher_decrypts_everything_the_generator_sent() {
    let tmp = scratch("sqos-crypto-synth-");
    let (plain, _, _) = synth(tmp.path(), Scenario::Steady, None, |_| {});
    let (_, pr) = run(&plain);
    for cipher in [
        Cipher::Aes128Ccm,
        Cipher::Aes128Gcm,
        Cipher::Aes256Ccm,
        Cipher::Aes256Gcm,
    ] {
        let tmp = scratch("sqos-crypto-synth-");
        let (cap, keys, sum) = synth(tmp.path(), Scenario::Steady, Some(cipher), |_| {});
        // Without keys: nothing but the count, and the summary names both sessions.
        let (c0, r0) = run(&cap);
        assert!(c0.sqos.is_empty(), "{cipher:?}");
        let summary = r0.stats.undecrypted_summary().expect("summary");
        assert!(
            summary.contains("session 0x0000440000000011")
                && summary.contains("session 0x0000440000000111"),
            "{summary}"
        );
        // With the key file it wrote: everything.
        let (c, r) = run_with(&cap, with_keys(&[&keys]));
        assert_eq!(c.sqos.len() as u64, 2 * sum.sqos_requests, "{cipher:?}");
        assert_eq!(c.io.len() as u64, sum.ios, "{cipher:?}");
        let mut names: Vec<&str> = c
            .sqos
            .iter()
            .filter_map(|q| q.file_name.as_deref())
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(
            names,
            [
                "\\\\sofs\\vms\\vm01\\disk0.vhdx",
                "\\\\sofs\\vms\\vm02\\disk0.vhdx",
                "\\\\sofs\\vms\\vm03\\disk0.vhdx",
                "\\\\sofs\\vms\\vm04\\disk0.vhdx"
            ],
            "{cipher:?}"
        );
        let cmds: Vec<sqos::smb2::Command> = r.stats.by_command.by_code().map(|(c, _)| c).collect();
        let plain_cmds: Vec<sqos::smb2::Command> =
            pr.stats.by_command.by_code().map(|(c, _)| c).collect();
        assert_eq!(cmds, plain_cmds, "{cipher:?}");
        assert_eq!(r.stats.undecrypted(), 0, "{cipher:?}");
        assert_eq!(
            r.stats.decrypted_messages, r.stats.encrypted_messages,
            "{cipher:?}"
        );
        // WRITE requests and READ responses longer than 4 KiB are read by header only (steady's
        // I/Os are 4-64 KiB, so every one of their data messages); everything else is
        // authenticated.
        let bulk = c.io.len() as u64;
        assert!(c.io.iter().all(|i| i.requested >= 4096), "{cipher:?}");
        const { assert!(sqos::smb2::framer::STREAM_MIN < 4096 + 64) };
        assert_eq!(r.stats.decrypted_headers_only, bulk, "{cipher:?}");
        assert!(bulk > 100, "{cipher:?}: {bulk}");
    }
}

fn session_key_only(keys: &Path) -> PathBuf {
    let text = std::fs::read_to_string(keys).expect("keys");
    let only: String = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            format!("{},{},,\n", f[0], f[1])
        })
        .collect();
    let p = keys.with_extension("session-only");
    std::fs::write(&p, only).expect("write");
    p
}

#[test]
fn the_session_key_alone_derives_both_dialects_keys() {
    // steady has an SMB 3.0.2 host and an SMB 3.1.1 host.
    let tmp = scratch("sqos-crypto-synth-");
    let (cap, keys, _) = synth(
        tmp.path(),
        Scenario::Steady,
        Some(Cipher::Aes128Ccm),
        |_| {},
    );
    let (c, r) = run_with(&cap, with_keys(&[&session_key_only(&keys)]));
    assert_eq!(c.sqos.len(), 58);
    assert_eq!(r.stats.undecrypted(), 0);
}

#[test]
fn a_capture_that_starts_after_the_setup_needs_the_direction_keys() {
    let tmp = scratch("sqos-crypto-synth-");
    let (cap, keys, _) = synth(tmp.path(), Scenario::Steady, Some(Cipher::Aes256Gcm), |a| {
        a.midstream = true
    });
    let (c, r) = run_with(&cap, with_keys(&[&session_key_only(&keys)]));
    assert!(c.sqos.is_empty());
    let notes: Vec<&str> = c
        .notes
        .iter()
        .map(|n| n.message.as_str())
        .filter(|m| m.contains("server-to-client and client-to-server keys are needed"))
        .collect();
    assert_eq!(notes.len(), 2, "one note per session: {notes:?}");
    assert!(notes
        .iter()
        .any(|n| n.contains("session 0x0000440000000011")));
    assert!(r.stats.undecrypted() > 0);
    // With the direction keys the same capture decrypts.
    let (c, r) = run_with(&cap, with_keys(&[&keys]));
    assert!(c.sqos.len() > 20, "{}", c.sqos.len());
    assert_eq!(r.stats.undecrypted(), 0);
}

/// The benchmark stream encrypted: bulk data is never buffered (the framers hold at most a
/// few small messages), the SQOS updates come out whole.
#[test]
fn encrypted_bulk_is_streamed_not_buffered() {
    let tmp = scratch("sqos-crypto-synth-");
    let (cap, keys, _) = synth(tmp.path(), Scenario::Large, Some(Cipher::Aes128Gcm), |a| {
        a.size = Some(8 << 20)
    });
    let mut reader = CaptureReader::open(&cap).expect("open");
    let mut p = Pipeline::new(with_keys(&[&keys]));
    let mut sink = Collected::default();
    let mut most = 0usize;
    while let Some(frame) = reader.next_frame().expect("read") {
        p.push_frame(&frame, &mut sink);
        most = most.max(p.framer_bytes());
    }
    p.finish(&mut sink);
    let s = p.stats();
    // 128 I/Os of 64 KiB, 2 SQOS exchanges (the first and the one after the last I/O).
    assert_eq!(sink.io.len(), 128);
    assert_eq!(sink.sqos.len(), 4);
    assert_eq!(s.decrypted_headers_only, 128);
    assert_eq!(s.undecrypted(), 0);
    assert!(most < 4096, "framers held {most} bytes at once");
}
