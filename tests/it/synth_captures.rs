//! The committed captures in captures/: each is exactly what the command in captures/README.md
//! produces (run as a user runs it, compared byte for byte), tshark reads each without
//! malformed-packet or TCP notes other than the ones its scenario makes on purpose, and
//! tshark's SQOS fields agree with the generator's ground truth.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::scratch;
use sqos::synth::Scenario;

/// A row of the README table: the committed file, its scenario and the words of its command
/// after `sqos synth`.
struct Row {
    file: PathBuf,
    scenario: Scenario,
    words: Vec<String>,
}

fn table() -> Vec<Row> {
    let readme = std::fs::read_to_string("captures/README.md").unwrap();
    let mut rows = Vec::new();
    for line in readme.lines() {
        let Some(start) = line.find("`sqos synth ").filter(|_| line.starts_with('|')) else {
            continue;
        };
        let rest = &line[start + 1..];
        let cmd = &rest[..rest.find('`').unwrap()];
        let words: Vec<String> = cmd.split_whitespace().skip(2).map(String::from).collect();
        let after = |flag: &str| {
            let at = words.iter().position(|w| w == flag);
            at.and_then(|i| words.get(i + 1)).cloned()
        };
        let file = PathBuf::from(after("-o").unwrap_or_else(|| panic!("{cmd}: no -o")));
        let name = after("--scenario").unwrap_or_else(|| panic!("{cmd}: no --scenario"));
        let scenario = Scenario::from_name(&name).unwrap_or_else(|| panic!("{cmd}: {name}"));
        rows.push(Row {
            file,
            scenario,
            words,
        });
    }
    rows
}

/// Runs the row's command as a user would, writing into `dir`: (capture bytes, truth).
fn regenerate(row: &Row, dir: &Path) -> (Vec<u8>, serde_json::Value) {
    let name = row.file.file_name().unwrap();
    let (out, truth) = (dir.join(name), dir.join("truth.json"));
    let mut words = row.words.clone();
    let o = words.iter().position(|w| w == "-o").unwrap();
    words[o + 1] = out.display().to_string();
    let run = Command::new(env!("CARGO_BIN_EXE_sqos"))
        .arg("synth")
        .args(&words)
        .arg("--truth")
        .arg(&truth)
        .arg("--quiet")
        .output()
        .unwrap();
    assert!(run.status.success(), "{words:?}: {:?}", run);
    let truth = serde_json::from_slice(&std::fs::read(&truth).unwrap()).unwrap();
    (std::fs::read(&out).unwrap(), truth)
}

#[test]
fn readme_lists_every_generated_capture() {
    let rows = table();
    let listed: Vec<String> = rows.iter().map(|r| r.file.display().to_string()).collect();
    for name in [
        "captures/steady.pcap.gz",
        "captures/noisy-neighbour.pcapng.gz",
        "captures/policy-change.pcap.gz",
        "captures/misbehaving-client.pcap.gz",
        "captures/insufficient-throughput.pcap.gz",
        "captures/lossy-network.pcapng.gz",
        "captures/faulty-server.pcap.gz",
        "captures/bandwidth-hog.pcap.gz",
        "captures/misreporting-client.pcap.gz",
        "captures/live-migration.pcap.gz",
        "captures/multichannel.pcap.gz",
        "captures/spec-examples-1.0.pcap",
        "captures/spec-examples-1.1.pcap",
    ] {
        assert!(
            listed.iter().any(|l| l == name),
            "{name} missing from captures/README.md"
        );
    }
    for row in &rows {
        let len = std::fs::metadata(&row.file).unwrap().len();
        assert!(len < 600_000, "{} is {len} bytes", row.file.display());
    }
}

#[test]
fn committed_captures_regenerate_byte_for_byte() {
    let dir = scratch("sqos-synth-captures-");
    for row in table() {
        let (bytes, _) = regenerate(&row, dir.path());
        let committed = std::fs::read(&row.file).unwrap();
        assert!(
            bytes == committed,
            "{} differs from what its command generates",
            row.file.display()
        );
    }
}

/// `tshark -z expert` summary lines: (severity section, count, summary).
fn expert(file: &Path) -> Vec<(String, u64, String)> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(["-q", "-z", "expert"])
        .output()
        .unwrap();
    assert!(out.status.success(), "tshark failed on {}", file.display());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut section = String::new();
    let mut rows = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t
            .split(" (")
            .next()
            .filter(|_| t.ends_with(')') && !t.starts_with(char::is_numeric))
        {
            section = name.to_string();
            continue;
        }
        let mut parts = t.split_whitespace();
        if let Some(n) = parts.next().and_then(|w| w.parse::<u64>().ok()) {
            let summary: Vec<&str> = parts.skip(2).collect();
            rows.push((section.clone(), n, summary.join(" ")));
        }
    }
    rows
}

#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn tshark_reads_every_capture_with_only_the_intended_notes() {
    crate::support::need::tshark();
    for row in table() {
        let file = row.file;
        let rows = expert(&file);
        for (section, n, summary) in rows.iter().filter(|r| r.0 != "Chats") {
            let intended = match row.scenario {
                // Unknown ProtocolVersion (tshark reads a 1.1 layout) and a name length running
                // past the buffer: the two broken requests the scenario sends on purpose.
                Scenario::MisbehavingClient => {
                    section == "Errors" && *n == 2 && summary.contains("Malformed")
                }
                // Loss, retransmission, reordering and capture gaps are the point.
                Scenario::LossyNetwork => {
                    summary.starts_with("TCP")
                        || summary.contains("segment")
                        || summary.contains("retransmission")
                }
                // The server resets one channel on purpose (the other fails silently).
                Scenario::Multichannel => {
                    section == "Warns" && *n == 1 && summary == "Connection reset (RST)"
                }
                _ => false,
            };
            assert!(intended, "{}: {section} {n} {summary}", file.display());
        }
    }
}

#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn tshark_sqos_fields_agree_with_the_truth() {
    crate::support::need::tshark();
    let rows = table();
    let row = rows
        .iter()
        .find(|r| r.file.ends_with("steady.pcap.gz"))
        .unwrap();
    let file = &row.file;
    let dir = scratch("sqos-synth-captures-");
    let (_, truth) = regenerate(row, dir.path());
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args([
            "-Y",
            "smb2.ioctl.sqos.protocol_version",
            "-T",
            "fields",
            "-E",
            "separator=;",
        ])
        .args([
            "-e",
            "frame.number",
            "-e",
            "smb2.ioctl.sqos.io_count_increment",
        ])
        .args([
            "-e",
            "smb2.ioctl.sqos.normalized_io_count_increment",
            "-e",
            "smb2.ioctl.sqos.lower_latency_increment",
        ])
        .args([
            "-e",
            "smb2.ioctl.sqos.time_to_live",
            "-e",
            "smb2.ioctl.sqos.maximum_io_rate",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    // frame → (counters of each request in it, (ttl, max rate) of each response in it)
    let mut seen: HashMap<u64, Vec<Vec<String>>> = HashMap::new();
    for line in text.lines() {
        let cols: Vec<String> = line.split(';').map(str::to_string).collect();
        seen.insert(
            cols[0].parse().unwrap(),
            cols[1..]
                .iter()
                .map(|c| c.split(',').map(str::to_string).collect())
                .collect(),
        );
    }
    let mut checked = 0;
    for f in truth["flows"].as_array().unwrap() {
        for u in f["updates"].as_array().unwrap() {
            let frame = u["request_frame"].as_u64().unwrap();
            let cols = &seen[&frame];
            let want = [
                &u["io_count_increment"],
                &u["normalized_io_count_increment"],
                &u["lower_latency_increment"],
            ];
            let found = (0..cols[0].len()).any(|i| {
                (0..3).all(|k| {
                    cols[k].get(i).map(String::as_str) == Some(want[k].to_string().as_str())
                })
            });
            assert!(found, "frame {frame}: tshark {cols:?}, truth {want:?}");
            checked += 1;
        }
    }
    for m in truth["messages"].as_array().unwrap() {
        let (Some(frame), Some(r)) = (m["response_frame"].as_u64(), m["response"].as_object())
        else {
            continue;
        };
        let cols = &seen[&frame];
        let ttl = r["time_to_live"].to_string();
        let max = r["maximum_io_rate"].to_string();
        assert!(
            cols[3].contains(&ttl) && cols[4].contains(&max),
            "frame {frame}: tshark {cols:?}"
        );
        checked += 1;
    }
    assert!(checked >= 40, "{checked}");
}
