//! `sqos check` as CI runs it: exit codes and messages when it cannot run.

use std::process::Command;

fn sqos() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sqos"))
}

#[test]
fn a_bad_rules_file_is_exit_2_naming_line_and_key() {
    let tmp = crate::support::scratch("sqos-check-cli-");
    let rules = tmp.path().join("bad.rules.toml");
    std::fs::write(
        &rules,
        "[[flow_count]]\nmin = 1\n\n[[flow_metric]]\nmetric = \"iops\"\nmaxx = 5\n",
    )
    .unwrap();
    let out = sqos()
        .args(["check", "captures/real/smb311-plain.pcap", "--rules"])
        .arg(&rules)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.rules.toml:6:1: key `maxx`: unknown field `maxx`"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn nothing_to_check_against_is_exit_2() {
    let out = sqos()
        .args(["check", "captures/real/smb311-plain.pcap"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give --rules and/or --baseline"));
}

#[test]
fn a_bad_tolerance_is_exit_2() {
    let tmp = crate::support::scratch("sqos-check-cli-");
    let rules = tmp.path().join("ok.rules.toml");
    std::fs::write(&rules, "[[flow_count]]\nmin = 1\n").unwrap();
    let out = sqos()
        .args(["check", "x.pcap", "--tolerance", "iops=ten", "--rules"])
        .arg(&rules)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--tolerance `iops=ten`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_unusable_capture_is_exit_2_and_a_junit_error() {
    let tmp = crate::support::scratch("sqos-check-cli-");
    let rules = tmp.path().join("ok2.rules.toml");
    std::fs::write(&rules, "[[flow_count]]\nmin = 1\n").unwrap();
    let missing = tmp.path().join("missing.pcap");
    let junit = tmp.path().join("out.xml");
    let out = sqos()
        .arg("check")
        .arg(&missing)
        .arg("--rules")
        .arg(&rules)
        .arg("--junit")
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuites name=\"sqos check\" tests=\"1\" failures=\"0\" errors=\"1\">"),
        "{xml}"
    );
    assert!(xml.contains("<error message=\"unusable capture: "), "{xml}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("ERROR unusable capture"), "{stdout}");
}

const SAMBA_311: &str = "captures/real/smb311-plain.pcap";
const SAMBA_210: &str = "captures/real/smb210-plain.pcap";

fn run_in_repo(args: &[&str]) -> (Option<i32>, String, String) {
    let out = sqos()
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn samba_captures_pass_or_fail_by_their_nt_statuses() {
    let tmp = crate::support::scratch("sqos-check-cli-");
    // smbd answers every FSCTL_STORAGE_QOS_CONTROL with STATUS_INVALID_DEVICE_REQUEST.
    let strict = tmp.path().join("strict.rules.toml");
    std::fs::write(
        &strict,
        "[[nt_statuses]]\nname = \"success only\"\nallowed = [\"STATUS_SUCCESS\"]\n\n[[all_answered]]\n",
    )
    .unwrap();
    let junit = tmp.path().join("samba.xml");
    let (code, out, _) = run_in_repo(&[
        "check",
        SAMBA_311,
        SAMBA_210,
        "--quiet",
        "--rules",
        strict.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("FAIL  success only            STATUS_INVALID_DEVICE_REQUEST ×6, first in frame 17  (expected only STATUS_SUCCESS)"),
        "{out}"
    );
    assert!(
        out.contains("PASS  every request answered  all 6 requests answered"),
        "{out}"
    );
    assert!(
        out.ends_with("2 captures: 2 passed, 2 failed, 0 could not be judged\n"),
        "{out}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testsuite ").count(), 2, "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), 4, "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 2, "{xml}");

    let lenient = tmp.path().join("lenient.rules.toml");
    std::fs::write(
        &lenient,
        "[[nt_statuses]]\nallowed = [\"STATUS_SUCCESS\", \"STATUS_INVALID_DEVICE_REQUEST\"]\n",
    )
    .unwrap();
    let (code, out, _) = run_in_repo(&[
        "check",
        SAMBA_311,
        "--quiet",
        "--rules",
        lenient.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.ends_with("  1 passed, 0 failed\n"), "{out}");
}

#[test]
fn a_saved_flow_table_is_a_baseline() {
    let tmp = crate::support::scratch("sqos-check-cli-");
    let (code, json, err) = run_in_repo(&["flows", "--format", "json", "--quiet", SAMBA_311]);
    assert_eq!(code, Some(0), "{err}");
    let base = tmp.path().join("samba.baseline.json");
    std::fs::write(&base, &json).unwrap();
    let (code, out, err) = run_in_repo(&[
        "check",
        SAMBA_311,
        "--quiet",
        "--baseline",
        base.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("PASS  baseline: flow [b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e]"),
        "{out}"
    );

    // The same flow with another protocol version and an extra flow: both differences.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v[0]["protocol_version"] = serde_json::json!(256);
    let mut extra = v[0].clone();
    extra["logical_flow_id"] = serde_json::json!("99999999-0000-4000-8000-000000000009");
    extra["initiator_name"] = serde_json::json!("vm09");
    v.as_array_mut().unwrap().push(extra);
    std::fs::write(&base, v.to_string()).unwrap();
    let (code, out, _) = run_in_repo(&[
        "check",
        SAMBA_311,
        "--quiet",
        "--baseline",
        base.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("FAIL  baseline: flow [b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e]  protocol_version 256 → 257"), "{out}");
    assert!(
        out.contains("FAIL  baseline: flow vm09 [99999999]"),
        "{out}"
    );
    assert!(
        out.contains("vanished  (expected present, as in the baseline)"),
        "{out}"
    );
}

#[test]
fn several_captures_are_each_judged_alone() {
    let tmp = crate::support::scratch("sqos-check-cli-");
    let junit = tmp.path().join("limits.xml");
    let (code, out, err) = run_in_repo(&[
        "check",
        "captures/steady.pcap.gz",
        "captures/noisy-neighbour.pcapng.gz",
        "--quiet",
        "--rules",
        "captures/limits.rules.toml",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{out}{err}");
    let (steady, noisy) = out
        .split_once("\ncaptures/noisy-neighbour.pcapng.gz\n")
        .unwrap();
    assert!(steady.starts_with("captures/steady.pcap.gz\n"), "{out}");
    assert!(steady.ends_with("  6 passed, 0 failed\n"), "{out}");
    assert!(noisy.contains("  3 passed, 3 failed\n"), "{out}");
    assert!(
        out.ends_with("2 captures: 9 passed, 3 failed, 0 could not be judged\n"),
        "{out}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(
            "<testsuite name=\"captures/steady.pcap.gz\" tests=\"6\" failures=\"0\" errors=\"0\">"
        ),
        "{xml}"
    );
    assert!(xml.contains("<testsuite name=\"captures/noisy-neighbour.pcapng.gz\" tests=\"6\" failures=\"3\" errors=\"0\">"), "{xml}");

    let (code, out, _) = run_in_repo(&[
        "check",
        "captures/steady.pcap.gz",
        "--quiet",
        "--rules",
        "captures/steady.rules.toml",
    ]);
    assert_eq!(code, Some(0), "{out}");
}

#[test]
fn a_capture_cut_short_is_judged_and_fails_its_integrity_check() {
    let tmp = crate::support::scratch("sqos-check-cli-");
    let whole = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/captures/real/smb311-plain.pcap"
    ))
    .unwrap();
    let cut = tmp.path().join("cut.pcap");
    // Cut inside the last record so the reader sees a truncated packet.
    std::fs::write(&cut, &whole[..whole.len() - 7]).unwrap();
    let rules = tmp.path().join("cut.rules.toml");
    std::fs::write(&rules, "[[message_count]]\noption = \"ANY\"\nmin = 1\n").unwrap();
    let out = sqos()
        .arg("check")
        .arg(&cut)
        .args(["--quiet", "--rules"])
        .arg(&rules)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("  FAIL  capture read to its end  damaged: "),
        "{stdout}"
    );
    assert!(stdout.contains("  PASS  ANY requests "), "{stdout}");
    assert!(stdout.ends_with("  1 passed, 1 failed\n"), "{stdout}");
}
