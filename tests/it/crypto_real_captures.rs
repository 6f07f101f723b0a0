//! SMB3 decryption on the Samba captures (captures/real): the SQOS IOCTLs inside the encrypted
//! sessions come out decoded, matched and named exactly like those of the plain captures, with
//! the committed key file, with the session key alone (3.0.2: SP800-108 KDF; 3.1.1: the preauth
//! hash of the capture's NEGOTIATE and SESSION_SETUP), and with the direction keys alone; a
//! wrong key is a note naming the session, never garbage.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;
use sqos::pipeline::{Direction, SqosBody};

const ENCRYPTED: &[(&str, u64, u64, u64)] = &[
    // capture, session id, frame of the first SQOS request, its MessageId
    ("smb302-encrypted.pcap", 0x0000_0000_bca0_67a7, 18, 6),
    ("smb311-encrypted.pcap", 0x0000_0000_e08f_4391, 16, 5),
    (
        "smb311-encrypted-aes-128-ccm.pcap",
        0x0000_0000_4fa8_1daa,
        18,
        5,
    ),
    (
        "smb311-encrypted-aes-256-gcm.pcap",
        0x0000_0000_c157_f6a1,
        18,
        5,
    ),
    (
        "smb311-encrypted-aes-256-ccm.pcap",
        0x0000_0000_f4d1_3311,
        19,
        5,
    ),
];

fn cap(name: &str) -> PathBuf {
    repo().join("captures/real").join(name)
}

fn key_line(session: u64) -> String {
    let text = std::fs::read_to_string(real_keys()).expect("key file");
    let id: String = session
        .to_le_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    text.lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("session {session:#x} in the key file"))
        .to_string()
}

/// A key file with only some fields of the committed line of `session`.
fn keys_with(session: u64, keep: [bool; 4], dir: &Path) -> PathBuf {
    let line = key_line(session);
    let f: Vec<&str> = line.split(',').collect();
    let kept: Vec<&str> = f
        .iter()
        .zip(keep)
        .map(|(v, k)| if k { *v } else { "" })
        .collect();
    let p = dir.join(format!("keys-{session:x}-{keep:?}"));
    std::fs::write(&p, format!("{}\n", kept.join(","))).expect("write keys");
    p
}

/// The six SQOS requests of qos_client.py and Samba's six error answers.
fn assert_samba_sqos(c: &Collected, first_frame: u64, first_id: u64, what: &str) {
    assert_eq!(c.sqos.len(), 12, "{what}");
    assert_eq!(c.sqos[0].frame, first_frame, "{what}");
    for (i, r) in c.sqos.iter().enumerate() {
        if let Some(prev) = i.checked_sub(1).and_then(|p| c.sqos.get(p)) {
            assert!(r.frame > prev.frame, "{what}: frames in order");
        }
        assert_eq!(r.msg_id, first_id + i as u64 / 2, "{what}");
        // The share of the TREE_CONNECT (decrypted too) before the CREATE name.
        assert_eq!(
            r.file_name.as_deref(),
            Some("\\\\127.0.0.1\\vms\\vm01\\disk0.vhdx"),
            "{what}"
        );
        if i % 2 == 1 {
            assert_eq!(r.direction, Direction::Response, "{what}");
            assert_eq!(r.nt_status, Some(0xC000_0010), "{what}");
            assert_eq!(r.request_frame, Some(c.sqos[i - 1].frame), "{what}");
            assert!(matches!(r.body, SqosBody::NoBuffer), "{what}");
            continue;
        }
        assert_eq!(r.response_frame, Some(c.sqos[i + 1].frame), "{what}");
        let SqosBody::Request(d) = &r.body else {
            panic!("{what}: request {i} has no SQOS body");
        };
        let q = d.message.as_ref().expect("decoded request");
        let n = i / 2;
        assert_eq!(
            q.protocol_version.0,
            if n < 3 { 0x0100 } else { 0x0101 },
            "{what}"
        );
        assert_eq!(q.options.bits(), [0x01, 0x02, 0x1C][n % 3], "{what}");
        assert_eq!(
            q.logical_flow_id.to_string(),
            "b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e",
            "{what}"
        );
        if n % 3 == 1 {
            assert_eq!(q.initiator_name.as_deref(), Some("TEST-VM"), "{what}");
            assert_eq!(
                q.initiator_node_name.as_deref(),
                Some("HYPERV-TEST.contoso.com"),
                "{what}"
            );
            assert_eq!(
                q.policy_id.to_string(),
                "04b4f24e-b3e9-4594-adaa-e327528de54b",
                "{what}"
            );
        }
        if n % 3 == 2 {
            assert_eq!(q.io_count_increment, 399, "{what}");
            assert_eq!(q.normalized_io_count_increment, 399, "{what}");
            assert_eq!(q.latency_increment, 38_223_584, "{what}");
            assert_eq!(q.lower_latency_increment, 38_223_584, "{what}");
        }
    }
}

#[test]
fn committed_key_file_decrypts_every_encrypted_samba_capture() {
    let cfg = with_keys(&[&real_keys()]);
    for &(name, _, frame, id) in ENCRYPTED {
        let (c, r) = run_with(&cap(name), cfg.clone());
        assert_samba_sqos(&c, frame, id, name);
        let s = &r.stats;
        assert_eq!(s.decrypted_messages, s.encrypted_messages, "{name}");
        assert!(s.encrypted_messages >= 22, "{name}");
        assert_eq!(s.undecrypted(), 0, "{name}");
        assert_eq!(s.auth_failed_messages, 0, "{name}");
        assert_eq!(s.undecrypted_summary(), None, "{name}");
        // The same SMB2 messages as the plain capture of the same dialect.
        let plain = format!("{}-plain.pcap", &name[..6]);
        let (_, rp) = run(&cap(&plain));
        assert_eq!(s.by_command, rp.stats.by_command, "{name} vs {plain}");
        assert!(
            !c.notes.iter().any(|n| n.message.contains("session 0x")),
            "{name}: {:?}",
            c.notes
        );
    }
}

#[test]
fn session_key_alone_is_enough_when_the_setup_is_captured() {
    let tmp = tempdir();
    let dir = tmp.path();
    for &(name, sid, frame, id) in ENCRYPTED {
        let k = keys_with(sid, [true, true, false, false], dir);
        let (c, r) = run_with(&cap(name), with_keys(&[&k]));
        assert_samba_sqos(&c, frame, id, &format!("{name}, session key only"));
        assert_eq!(r.stats.undecrypted(), 0, "{name}");
    }
}

#[test]
fn direction_keys_alone_are_enough() {
    let tmp = tempdir();
    let dir = tmp.path();
    for &(name, sid, frame, id) in ENCRYPTED {
        let k = keys_with(sid, [true, false, true, true], dir);
        let (c, _) = run_with(&cap(name), with_keys(&[&k]));
        assert_samba_sqos(&c, frame, id, &format!("{name}, direction keys only"));
    }
}

#[test]
fn a_wrong_key_is_a_note_naming_the_session_never_garbage() {
    let tmp = tempdir();
    let dir = tmp.path();
    for &(name, sid, _, _) in ENCRYPTED {
        let line = key_line(sid);
        let (id, rest) = line.split_once(',').expect("fields");
        // Flip one bit of the session key, drop the direction keys.
        let sk = rest.split(',').next().expect("session key");
        let mut bytes: Vec<u8> = (0..sk.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&sk[i..i + 2], 16).expect("hex"))
            .collect();
        bytes[0] ^= 1;
        let bad: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let k = dir.join(format!("bad-{sid:x}"));
        std::fs::write(&k, format!("{id},{bad},,\n")).expect("write");
        let (c, r) = run_with(&cap(name), with_keys(&[&k]));
        assert!(
            c.sqos.is_empty(),
            "{name}: nothing decoded from a wrong key"
        );
        assert_eq!(r.stats.decrypted_messages, 0, "{name}");
        assert_eq!(
            r.stats.auth_failed_messages, r.stats.encrypted_messages,
            "{name}"
        );
        let session = format!("session 0x{sid:016x}");
        let notes: Vec<&str> = c
            .notes
            .iter()
            .map(|n| n.message.as_str())
            .filter(|m| m.contains("authentication failed"))
            .collect();
        assert_eq!(notes.len(), 1, "{name}: one note per session: {notes:?}");
        assert!(notes[0].contains(&session), "{name}: {}", notes[0]);
        let summary = r.stats.undecrypted_summary().expect("summary");
        assert!(summary.contains(&session), "{summary}");
        assert!(summary.contains("authentication failed"), "{summary}");
    }
}

#[test]
fn without_keys_every_command_says_once_which_sessions_stayed_closed() {
    let exe = env!("CARGO_BIN_EXE_sqos");
    let path = cap("smb311-encrypted.pcap");
    for cmd in [
        vec!["dissect"],
        vec!["stats"],
        vec!["flows"],
        vec!["export", "--what", "messages", "--format", "jsonl"],
    ] {
        let out = Command::new(exe)
            .args(&cmd)
            .arg(&path)
            .output()
            .expect("run sqos");
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("not decrypted"))
            .collect();
        assert_eq!(lines.len(), 1, "{cmd:?}: {err}");
        assert!(
            lines[0].contains("22 encrypted SMB3 messages not decrypted")
                && lines[0].contains("session 0x00000000e08f4391 (22, no key)")
                && lines[0].contains("--keys"),
            "{cmd:?}: {}",
            lines[0]
        );
        assert_eq!(out.status.code(), Some(0), "{cmd:?}");
    }
    // With the keys: the six requests and their answers, nothing said about encryption.
    let out = Command::new(exe)
        .args(["dissect", "--keys"])
        .arg(real_keys())
        .arg(&path)
        .output()
        .expect("run sqos");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 12, "{text}");
    assert!(text.contains("name=\"TEST-VM\""), "{text}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("not decrypted"));
}

#[test]
fn a_bad_key_file_is_a_usage_error_naming_file_and_line() {
    let tmp = tempdir();
    let dir = tmp.path();
    let k = dir.join("broken");
    std::fs::write(&k, "# comment\n0102,00\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(["stats", "--keys"])
        .arg(&k)
        .arg(cap("smb311-encrypted.pcap"))
        .output()
        .expect("run sqos");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken:2: session id"), "{err}");
}

fn tempdir() -> tempfile::TempDir {
    crate::support::scratch("sqos-crypto-test-")
}
