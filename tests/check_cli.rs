//! `sqos check` as CI runs it: exit codes and messages when it cannot run.

use std::path::PathBuf;
use std::process::Command;

fn sqos() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sqos"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sqos-check-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn a_bad_rules_file_is_exit_2_naming_line_and_key() {
    let rules = tmp("bad.rules.toml");
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
    let rules = tmp("ok.rules.toml");
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
    let rules = tmp("ok2.rules.toml");
    std::fs::write(&rules, "[[flow_count]]\nmin = 1\n").unwrap();
    let missing = tmp("missing.pcap");
    let junit = tmp("out.xml");
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
