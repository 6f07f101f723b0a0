//! The Wireshark plugin (`plugin/sqos.lua`, protocol `sqosa`) run by tshark. The analysis is
//! sqos's (`sqos annotate`); these tests check what the plugin shows users:
//! - on every capture of the project, each SQOS message sqos decodes is shown on its frame with
//!   sqos's matching, status, flow and findings (second pass, `tshark -2`), and nothing else;
//! - on the plugin's test captures (plugin/test/) the exact fields, figures and findings;
//! - its expert info in `tshark -z expert` under the right severities, on the right frames;
//! - the flow summary: the table `sqos flows` prints and every figure of `sqos flows --format
//!   json`;
//! - a missing or too old sqos, and a single pass, are said plainly, never a Lua error.
//!
//! The tests that run tshark are switched on by `SQOS_EXTERNAL_TESTS=1` (tests/it/support/need.rs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::plugin_summary::{same_value, summary_kv, FLOW_KEYS};
use crate::support::{captures_in, need, repo};
use serde_json::Value;

fn plugin() -> PathBuf {
    repo().join("plugin/sqos.lua")
}

fn plugin_capture(name: &str) -> PathBuf {
    repo().join("plugin/test").join(name)
}

fn sqos_bin() -> &'static str {
    env!("CARGO_BIN_EXE_sqos")
}

/// tshark with the plugin loaded and pointed at `sqos` (the program that analyses), reading
/// `path` with `args`.
fn tshark_command(path: &Path, sqos: &str, args: &[&str]) -> Command {
    let mut c = Command::new("tshark");
    c.arg("-n")
        .arg("-X")
        .arg(format!("lua_script:{}", plugin().display()))
        .args(["-o", &format!("sqosa.sqos:{sqos}")])
        .args(args)
        .arg("-r")
        .arg(path);
    c
}

fn run_tshark(path: &Path, sqos: &str, args: &[&str]) -> std::process::Output {
    tshark_command(path, sqos, args)
        .output()
        .expect("run tshark")
}

/// tshark with the plugin and this build's sqos; fails on any Lua or sqosa error.
fn tshark(path: &Path, args: &[&str]) -> String {
    checked(path, run_tshark(path, sqos_bin(), args))
}

/// tshark's output, failing on any Lua or sqosa error.
fn checked(path: &Path, out: std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("Lua: Error")
            && !stderr.contains("Lua Error")
            && !stderr.contains("sqosa:"),
        "{}: the plugin failed:\n{stderr}",
        path.display()
    );
    assert!(
        out.status.success(),
        "{}: tshark failed: {stderr}",
        path.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One SQOS message as the plugin shows it (the `sqosa` subtree).
#[derive(Clone, Debug, Default, PartialEq)]
struct PluginMsg {
    frame: u64,
    fields: BTreeMap<String, Vec<String>>,
}

impl PluginMsg {
    fn get(&self, k: &str) -> Option<&str> {
        self.fields
            .get(k)
            .and_then(|v| v.first())
            .map(String::as_str)
    }
    fn num(&self, k: &str) -> Option<f64> {
        self.get(k).and_then(|v| v.parse::<f64>().ok())
    }
    fn int(&self, k: &str) -> Option<u64> {
        self.get(k).map(parse_num)
    }
    fn findings(&self) -> Vec<String> {
        let mut v = self
            .fields
            .get("sqosa.finding")
            .cloned()
            .unwrap_or_default();
        v.sort();
        v
    }
}

/// tshark prints integers in decimal or 0x-hex depending on the field's base (u64::MAX when
/// the text is neither).
fn parse_num(v: &str) -> u64 {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap_or(u64::MAX),
        None => v.parse().unwrap_or(u64::MAX),
    }
}

/// Flattens a `-T json` subtree into field → values (strings; arrays from repeated fields).
fn collect(v: &Value, out: &mut BTreeMap<String, Vec<String>>) {
    if let Value::Object(m) = v {
        for (k, val) in m {
            match val {
                Value::String(s) => out.entry(k.clone()).or_default().push(s.clone()),
                Value::Array(a) => {
                    for x in a {
                        match x {
                            Value::String(s) => out.entry(k.clone()).or_default().push(s.clone()),
                            other => collect(other, out),
                        }
                    }
                }
                Value::Object(_) => collect(val, out),
                _ => {}
            }
        }
    }
}

/// Every `sqosa` subtree of the second pass (`tshark -2`), in frame order.
/// tshark's arguments for the `sqosa` subtrees of the second pass, as JSON.
const SECOND_PASS_JSON: [&str; 8] = [
    "-2",
    "-Y",
    "sqosa",
    "-T",
    "json",
    "--no-duplicate-keys",
    "-J",
    "frame sqosa",
];

fn plugin_messages(path: &Path, extra: &[&str]) -> Vec<PluginMsg> {
    let mut args = SECOND_PASS_JSON.to_vec();
    args.extend_from_slice(extra);
    plugin_messages_of(&tshark(path, &args))
}

/// The `sqosa` subtrees of tshark's `-T json -J "frame sqosa"` output.
fn plugin_messages_of(text: &str) -> Vec<PluginMsg> {
    let packets: Value = serde_json::from_str(text).unwrap_or(Value::Array(vec![]));
    let mut out = Vec::new();
    for p in packets.as_array().into_iter().flatten() {
        let layers = &p["_source"]["layers"];
        let frame: u64 = layers["frame"]["frame.number"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("frame.number");
        let subtrees = match &layers["sqosa"] {
            Value::Array(a) => a.clone(),
            Value::Object(_) => vec![layers["sqosa"].clone()],
            _ => vec![],
        };
        for st in subtrees {
            let mut fields = BTreeMap::new();
            collect(&st, &mut fields);
            out.push(PluginMsg { frame, fields });
        }
    }
    out
}

fn msg_at(msgs: &[PluginMsg], frame: u64, msg_id: u64) -> &PluginMsg {
    msgs.iter()
        .find(|m| m.frame == frame && m.int("sqosa.msg_id") == Some(msg_id))
        .unwrap_or_else(|| panic!("no SQOS message {msg_id} in frame {frame}: {msgs:#?}"))
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= 1e-6 * b.abs().max(1.0))
}

/// The finding codes and severities of the plugin's table (between its BEGIN/END markers).
fn plugin_codes() -> BTreeMap<String, String> {
    let src = std::fs::read_to_string(plugin()).expect("read plugin");
    let start = src.find("-- BEGIN FINDING CODES").expect("BEGIN marker");
    let end = src.find("-- END FINDING CODES").expect("END marker");
    src[start..end]
        .lines()
        .filter_map(|l| {
            let q: Vec<&str> = l.split('"').collect();
            (q.len() >= 5).then(|| (q[1].to_string(), q[3].to_string()))
        })
        .collect()
}

/// The plugin's codes and severities are exactly the codec's (`FindingCode::ALL`): the plugin
/// registers an expert item per code before any packet is read.
#[test]
fn plugin_codes_are_the_codecs() {
    let rust: BTreeMap<String, String> = sqos::sqos::FindingCode::ALL
        .iter()
        .map(|c| (c.as_str().to_string(), c.severity().as_str().to_string()))
        .collect();
    let block: String = sqos::sqos::FindingCode::ALL
        .iter()
        .map(|c| {
            format!(
                "    {{ \"{}\", \"{}\" }},\n",
                c.as_str(),
                c.severity().as_str()
            )
        })
        .collect();
    assert_eq!(
        plugin_codes(),
        rust,
        "plugin/sqos.lua's CODES (between BEGIN/END FINDING CODES) must read:\n{block}"
    );
}

/// The plugin's flow finding codes are exactly the analysis's (`FlowFindingCode::ALL`).
#[test]
fn plugin_flow_codes_are_the_analysis() {
    let src = std::fs::read_to_string(plugin()).expect("read plugin");
    let start = src
        .find("-- BEGIN FLOW FINDING CODES")
        .expect("BEGIN marker");
    let end = src.find("-- END FLOW FINDING CODES").expect("END marker");
    let ours: Vec<&str> = src[start..end]
        .lines()
        .filter_map(|l| l.split('"').nth(1))
        .collect();
    let rust: Vec<&str> = sqos::analysis::FlowFindingCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    let block: String = rust.iter().map(|c| format!("    \"{c}\",\n")).collect();
    assert_eq!(
        ours, rust,
        "plugin/sqos.lua's FLOW_CODES (between BEGIN/END FLOW FINDING CODES) must read:\n{block}"
    );
}

#[test]
fn plugin_code_table_is_well_formed() {
    let codes = plugin_codes();
    assert!(codes.len() >= 27, "only {} codes", codes.len());
    for (c, s) in &codes {
        assert!(c.starts_with("sqos."), "{c}");
        assert!(
            ["error", "warning", "note"].contains(&s.as_str()),
            "{c}: {s}"
        );
    }
    assert_eq!(codes["sqos.short_buffer"], "error");
    assert_eq!(codes["sqos.response_layout_spec_example"], "warning");
    assert_eq!(codes["sqos.name_layout_spec_example"], "note");
}

/// Malformed and rule-breaking buffers: the exact findings on each frame.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_findings_on_malformed_capture() {
    crate::support::need::tshark();
    let msgs = plugin_messages(&plugin_capture("sqos-plugin-malformed.pcap"), &[]);
    let by_frame = |f: u64| -> Vec<String> {
        msgs.iter()
            .filter(|m| m.frame == f)
            .flat_map(|m| m.findings())
            .collect()
    };
    let expect: &[(u64, &[&str])] = &[
        (6, &["sqos.short_buffer"]),
        (8, &["sqos.unknown_version"]),
        (10, &["sqos.options_none"]),
        (12, &["sqos.options_unknown_bits"]),
        (14, &["sqos.probe_null_flow_id"]),
        (
            16,
            &[
                "sqos.param_too_large",
                "sqos.param_with_policy_id",
                "sqos.param_with_policy_id",
                "sqos.param_with_policy_id",
            ],
        ),
        (18, &["sqos.reservation_above_limit"]),
        (
            20,
            &[
                "sqos.name_length_odd",
                "sqos.name_out_of_bounds",
                "sqos.trailing_bytes",
            ],
        ),
        (22, &["sqos.reserved_nonzero"]),
        (
            24,
            &["sqos.name_invalid_utf16", "sqos.name_null_terminated"],
        ),
        (26, &["sqos.max_output_too_small"]),
        (
            27,
            &[
                "sqos.base_io_size_zero",
                "sqos.response_options_nonzero",
                "sqos.ttl_zero",
                "sqos.unknown_status",
            ],
        ),
        (28, &[]),
        (29, &["sqos.short_buffer"]),
        (30, &["sqos.trailing_bytes"]),
        (
            31,
            &[
                "sqos.response_flow_id_mismatch",
                "sqos.response_version_mismatch",
                "sqos.response_without_get_status",
            ],
        ),
    ];
    for (frame, codes) in expect {
        assert_eq!(by_frame(*frame), codes.to_vec(), "frame {frame}");
    }
    // Error responses are matched to their requests and carry no findings.
    let err = msg_at(&msgs, 7, 2);
    assert_eq!(err.get("sqosa.direction"), Some("response"));
    assert_eq!(err.int("sqosa.nt_status"), Some(0xC000_000D));
    assert_eq!(err.int("sqosa.request_frame"), Some(6));
    assert_eq!(err.int("sqosa.finding_count"), Some(0));
    // Compound CREATE + IOCTL (related FileId) and its compound answer.
    let creq = msg_at(&msgs, 32, 16);
    assert_eq!(
        creq.get("sqosa.options.names"),
        Some("SET_LOGICAL_FLOW_ID|GET_STATUS")
    );
    let cresp = msg_at(&msgs, 33, 16);
    assert_eq!(cresp.int("sqosa.request_frame"), Some(32));
    assert_eq!(
        cresp.get("sqosa.file_id"),
        Some("00000052-0000-0000-6200-000000000000")
    );
    // Two requests in one segment; the first answer spans two segments (completed in 36).
    assert_eq!(
        msg_at(&msgs, 34, 17).get("sqosa.direction"),
        Some("request")
    );
    assert_eq!(
        msg_at(&msgs, 34, 18).get("sqosa.direction"),
        Some("request")
    );
    assert_eq!(msg_at(&msgs, 36, 17).int("sqosa.request_frame"), Some(34));
    assert_eq!(msg_at(&msgs, 37, 18).int("sqosa.request_frame"), Some(34));
    assert_eq!(msgs.len(), 32);
}

/// The spec's own examples: the plugin decodes by the structure layout and says where the
/// bytes look like the examples' contradicting layouts (sections 4.2 and 4.3).
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_reports_spec_example_layouts() {
    crate::support::need::tshark();
    let msgs = plugin_messages(&plugin_capture("sqos-plugin-spec-examples.pcap"), &[]);
    assert_eq!(msgs.len(), 12);
    // 1.0 SET_POLICY: InitiatorNameOffset 104 is inside the 112-byte fixed part.
    assert_eq!(
        msg_at(&msgs, 8, 3).findings(),
        [
            "sqos.name_layout_spec_example",
            "sqos.name_offset_in_fixed_part"
        ]
    );
    // 1.1 SET_POLICY: both offsets (104, 118) are inside the 128-byte fixed part.
    assert_eq!(
        msg_at(&msgs, 16, 7).findings(),
        [
            "sqos.name_layout_spec_example",
            "sqos.name_offset_in_fixed_part",
            "sqos.name_offset_in_fixed_part"
        ]
    );
    // 1.1 response of section 4.3: by the structure, BaseIoSize 200 and MaximumBandwidth 8192
    // (what Wireshark shows too); the finding says the bytes follow the example's layout.
    let r = msg_at(&msgs, 19, 8);
    assert_eq!(r.findings(), ["sqos.response_layout_spec_example"]);
    assert_eq!(r.int("sqosa.flow.base_io_size"), Some(200));
    assert_eq!(r.int("sqosa.flow.maximum_bandwidth"), Some(8192));
    assert_eq!(r.int("sqosa.flow.maximum_io_rate"), Some(100));
    assert_eq!(r.int("sqosa.flow.time_to_live"), Some(3981));
    // The 1.0 response of the same exchange is clean.
    assert_eq!(msg_at(&msgs, 11, 4).findings(), Vec::<String>::new());
    let wireshark = crate::support::tshark_fields(
        &plugin_capture("sqos-plugin-spec-examples.pcap"),
        Some("frame.number == 19"),
        &[
            "smb2.ioctl.sqos.base_io_size",
            "smb2.ioctl.sqos.maximum_bandwidth",
        ],
    );
    assert_eq!(wireshark, [["200", "8192"]]);
}

/// Association, matching and the per-interval figures on two flows with known counters.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_flow_figures_on_flows_capture() {
    crate::support::need::tshark();
    let msgs = plugin_messages(&plugin_capture("sqos-plugin-flows.pcap"), &[]);
    let a = "b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e";
    let b = "5d0c5f2a-6f3e-4c61-9a55-0b8c6d1e2f30";
    // Counters before association: STATUS_NOT_FOUND, no figures.
    let nf = msg_at(&msgs, 12, 2);
    assert_eq!(nf.int("sqosa.nt_status"), Some(0xC000_0225));
    assert_eq!(nf.get("sqosa.iops"), None);
    // The first update of A opens the series: no figures.
    let first = msg_at(&msgs, 22, 4);
    assert_eq!(first.get("sqosa.flow"), Some(a));
    assert_eq!(first.get("sqosa.first_update"), Some("1"));
    assert_eq!(first.get("sqosa.iops"), None);
    assert_eq!(first.get("sqosa.latency_ms"), None);
    // Then one interval per second: (frame, iops, normalized, latency, lower, KB/s).
    for (frame, id, iops, niops, lat, lower, kbps) in [
        (24, 5, 400.0, 420.0, 0.5, 0.45, 3360.0),
        (28, 6, 600.0, 700.0, 1.5, 1.0, 5600.0),
        (30, 7, 300.0, 300.0, 0.2, 0.5 / 3.0, 2400.0),
    ] {
        let m = msg_at(&msgs, frame, id);
        assert_eq!(m.get("sqosa.flow"), Some(a), "frame {frame}");
        assert_eq!(m.get("sqosa.flow.source"), Some("open"), "frame {frame}");
        assert!(close(m.num("sqosa.interval"), 1.0), "frame {frame}: {m:?}");
        assert!(close(m.num("sqosa.iops"), iops), "frame {frame}: {m:?}");
        assert!(
            close(m.num("sqosa.normalized_iops"), niops),
            "frame {frame}"
        );
        assert!(close(m.num("sqosa.latency_ms"), lat), "frame {frame}");
        assert!(
            close(m.num("sqosa.lower_latency_ms"), lower),
            "frame {frame}"
        );
        assert!(close(m.num("sqosa.kbps"), kbps), "frame {frame}");
    }
    // Flow B (dialect 1.0, no KB/s) every 2 s.
    let m = msg_at(&msgs, 32, 6);
    assert_eq!(m.get("sqosa.flow"), Some(b));
    assert!(close(m.num("sqosa.interval"), 2.0));
    assert!(close(m.num("sqosa.iops"), 175.0));
    assert!(close(m.num("sqosa.normalized_iops"), 180.0));
    assert!(close(m.num("sqosa.latency_ms"), 2.0));
    assert_eq!(m.get("sqosa.kbps"), None);
    // The status of the third update, and the limits after the policy change.
    assert_eq!(msg_at(&msgs, 28, 6).int("sqosa.flow.status"), Some(1));
    let last = msg_at(&msgs, 34, 8);
    assert_eq!(last.int("sqosa.flow.limit"), Some(800));
    assert_eq!(last.int("sqosa.flow.maximum_io_rate"), Some(800));
    assert_eq!(last.int("sqosa.flow.updates"), Some(4));
    assert_eq!(last.get("sqosa.flow.initiator_name"), Some("VM07"));
}

/// The analysis shows in the second pass (`tshark -2`; Wireshark dissects a packet again when it
/// is displayed): the first pass only writes the frames for sqos, and says so on SQOS frames and
/// once on stderr. Requests show their answer's interval figures.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_shows_the_analysis_in_the_second_pass() {
    crate::support::need::tshark();
    let path = plugin_capture("sqos-plugin-flows.pcap");
    let one = run_tshark(
        &path,
        sqos_bin(),
        &["-Y", "frame.number == 23", "-O", "sqosa"],
    );
    let text = String::from_utf8_lossy(&one.stdout);
    assert!(
        text.contains("SQOS analysis: in a second pass (tshark -2"),
        "{text}"
    );
    assert!(
        !text.contains("sqosa.iops") && !text.contains("IOPS:"),
        "{text}"
    );
    assert!(
        String::from_utf8_lossy(&one.stderr).contains("run tshark with -2"),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    let two = plugin_messages(&path, &[]);
    let req = msg_at(&two, 23, 5);
    assert_eq!(req.get("sqosa.direction"), Some("request"));
    assert_eq!(req.int("sqosa.response_frame"), Some(24));
    assert!(close(req.num("sqosa.iops"), 400.0));
    assert!(close(msg_at(&two, 24, 5).num("sqosa.iops"), 400.0));
    // No hint when there is a second pass.
    let out = run_tshark(&path, sqos_bin(), &["-2", "-q"]);
    assert!(String::from_utf8_lossy(&out.stderr)
        .lines()
        .all(|l| !l.contains("sqosa")));
}

/// The copy of the frames goes to the user's temporary directory (`$TMPDIR`) and is gone, with
/// sqos's stderr file, when tshark ends.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_keeps_its_files_in_tmpdir_and_removes_them() {
    need::tshark();
    let tmp = crate::support::scratch("sqosa-tmpdir");
    let path = plugin_capture("sqos-plugin-flows.pcap");
    let out = tshark_command(&path, sqos_bin(), &SECOND_PASS_JSON)
        .env("TMPDIR", tmp.path())
        .output()
        .expect("run tshark");
    let shown = plugin_messages_of(&checked(&path, out));
    assert_eq!(shown.len(), dissect_jsonl(&path, &[]).len());
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("read TMPDIR")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left, Vec::<std::ffi::OsString>::new());
    // It is that directory the plugin writes to: one that does not exist is named in the error.
    let missing = tmp.path().join("missing");
    let out = tshark_command(&path, sqos_bin(), &["-2", "-q"])
        .env("TMPDIR", &missing)
        .output()
        .expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "sqosa: cannot write the frames to {}/sqosa-",
        missing.display()
    );
    assert!(stderr.contains(&want), "{stderr}");
}

/// `tshark -z expert` lists the plugin's findings under the codec's severities.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_expert_info_in_z_expert() {
    crate::support::need::tshark();
    let codes = plugin_codes();
    for (capture, expected) in [
        (
            "sqos-plugin-malformed.pcap",
            &[
                "sqos.short_buffer",
                "sqos.unknown_version",
                "sqos.options_none",
                "sqos.options_unknown_bits",
                "sqos.param_too_large",
                "sqos.name_invalid_utf16",
                "sqos.ttl_zero",
                "sqos.trailing_bytes",
                "sqos.max_output_too_small",
            ][..],
        ),
        (
            "sqos-plugin-spec-examples.pcap",
            &[
                "sqos.response_layout_spec_example",
                "sqos.name_layout_spec_example",
                "sqos.name_offset_in_fixed_part",
            ][..],
        ),
    ] {
        let text = tshark(&plugin_capture(capture), &["-2", "-q", "-z", "expert"]);
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for (section, line) in sqosa_expert_lines(&text) {
            if let Some(open) = line.find("[sqos.") {
                let rest = &line[open + 1..];
                let code = rest.split(']').next().unwrap_or_default().to_string();
                seen.insert(code, section.to_string());
            }
        }
        for code in expected {
            assert_eq!(
                seen.get(*code).map(String::as_str),
                codes.get(*code).map(String::as_str),
                "{capture}: {code} in -z expert:\n{text}"
            );
        }
    }
}

/// The plugin's lines of `tshark -z expert` output, each with the severity of the section it is
/// under (headings "Errors (18)", "Warns (10)", "Notes (2)"; "Chats" / "Comments" end them).
fn sqosa_expert_lines(text: &str) -> Vec<(&'static str, &str)> {
    let mut section = "";
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        for (head, sev) in [("Errors", "error"), ("Warns", "warning"), ("Notes", "note")] {
            if t.starts_with(head) {
                section = sev;
            }
        }
        if t.starts_with("Chats") || t.starts_with("Comments") {
            section = "";
        }
        if line.contains("SQOSA") {
            out.push((section, line));
        }
    }
    out
}

/// `tshark -z expert` on `captures/faulty-server.pcap.gz`: the server bugs the analysis finds,
/// each on the frame of the response that shows it (the request never answered on its request),
/// under their severities.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_expert_info_shows_the_faulty_server() {
    crate::support::need::tshark();
    let text = tshark(
        &repo().join("captures/faulty-server.pcap.gz"),
        &["-2", "-q", "-z", "expert"],
    );
    let mut seen = Vec::new();
    for (section, line) in sqosa_expert_lines(&text) {
        if let Some(open) = line.find("[flow.") {
            let rest = &line[open + 1..];
            let code = rest.split(']').next().unwrap_or_default().to_string();
            let frame = rest
                .split(", frame ")
                .nth(1)
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse::<u64>().ok());
            seen.push((code, section.to_string(), frame));
        }
    }
    seen.sort();
    let want: Vec<(String, String, Option<u64>)> = [
        ("flow.request_unanswered", "warning", 4744),
        ("flow.server_should_have_failed", "error", 1075),
        ("flow.server_should_have_failed", "warning", 2186),
        ("flow.server_state_mismatch", "error", 2922),
        ("flow.server_wrong_error", "warning", 1354),
        ("flow.server_wrongly_failed", "error", 448),
    ]
    .iter()
    .map(|(c, s, f)| (c.to_string(), s.to_string(), Some(*f)))
    .collect();
    assert_eq!(seen, want, "{text}");
    // Each on the frame it names.
    let mut on: Vec<(String, String, Option<u64>)> = tshark(
        &repo().join("captures/faulty-server.pcap.gz"),
        &[
            "-2",
            "-Y",
            "sqosa.flow_finding",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "sqosa.flow_finding",
        ],
    )
    .lines()
    .filter_map(|l| l.split_once('\t'))
    .map(|(f, c)| (c.to_string(), String::new(), f.parse().ok()))
    .collect();
    on.sort();
    let frames = |v: &[(String, String, Option<u64>)]| -> Vec<(String, Option<u64>)> {
        v.iter().map(|(c, _, f)| (c.clone(), *f)).collect()
    };
    assert_eq!(frames(&on), frames(&want));
}

/// The flow summary at the end of a tshark run, asked for by the script argument or the pref.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_flow_summary_in_tshark() {
    crate::support::need::tshark();
    let path = plugin_capture("sqos-plugin-flows.pcap");
    let by_arg = tshark(&path, &["-q", "-X", "lua_script1:flows"]);
    let by_pref = tshark(&path, &["-q", "-o", "sqosa.flows:TRUE"]);
    assert_eq!(by_arg, by_pref);
    assert!(!tshark(&path, &["-2", "-q"]).contains("SQOS flows"));
    let flows = summary_flows(&by_arg);
    assert_eq!(flows.len(), 2, "{by_arg}");
    let a = &flows["b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e"];
    assert_eq!(a["initiator_name"], "VM07");
    assert_eq!(a["initiator_node_name"], "HV01.contoso.com");
    assert_eq!(a["dialect"], "1.1");
    assert_eq!(a["limit"], "800");
    assert_eq!(a["maximum_io_rate"], "800");
    assert_eq!(a["updates_sent"], "4");
    assert_eq!(a["updates_applied"], "4");
    assert_eq!(a["intervals"], "3");
    assert_eq!(a["opens_total"], "1");
    // After the first update: 1300 IOs, 1420 normalized, 11.6e6 / 8.3e6 latency units and
    // 11360 KB over 3 s.
    assert_eq!(a["iops"], "433.333333");
    assert_eq!(a["normalized_iops"], "473.333333");
    assert_eq!(a["avg_latency_ms"], "0.892308");
    assert_eq!(a["avg_lower_latency_ms"], "0.638462");
    assert_eq!(a["kilobytes_per_second"], "3786.666667");
    let b = &flows["5d0c5f2a-6f3e-4c61-9a55-0b8c6d1e2f30"];
    assert_eq!(b["dialect"], "1.0");
    assert_eq!(b["iops"], "175");
    assert_eq!(b["policy_id"], "04b4f24e-b3e9-4594-adaa-e327528de54b");
    assert!(!b.contains_key("kilobytes_per_second"));
    // Above the lines: the table `sqos flows` prints, line for line (flows that appeared in
    // the same frame may come in either order).
    let table = sqos_cli(&["flows"], &path);
    let mut want: Vec<&str> = std::str::from_utf8(&table.stdout)
        .expect("utf-8")
        .lines()
        .collect();
    let mut got: Vec<&str> = by_arg
        .lines()
        .skip_while(|l| l.starts_with('='))
        .take_while(|l| !l.starts_with("The same figures"))
        .collect();
    assert_eq!(got.pop(), Some(""), "{by_arg}");
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want, "{by_arg}");
}

/// SMB3 multichannel (issue 13): the plugin shows the analysis of sqos, so a flow's channels
/// are in its summary — the `CHANNELS` column and the *Channels* section of `sqos flows`, line
/// for line (each channel's client → server, how it joined, its I/O, how it failed), and
/// `channels_total` on each flow line.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_shows_the_channels_of_a_multichannel_capture() {
    crate::support::need::tshark();
    let path = repo().join("captures/multichannel.pcap.gz");
    let text = tshark(&path, &["-q", "-X", "lua_script1:flows"]);
    let table = sqos_cli(&["flows"], &path);
    let table = String::from_utf8(table.stdout).expect("utf-8");
    let section: Vec<&str> = table
        .lines()
        .skip_while(|l| *l != "Channels:")
        .take_while(|l| !l.is_empty())
        .collect();
    // vm01, vm02 on 4 channels, vm03, vm04 on 2: a header and a line per flow and channel.
    assert_eq!(section.len(), 1 + 2 * (1 + 4) + 2 * (1 + 2), "{table}");
    assert!(section.iter().any(|l| l.contains("reset (RST) at frame")));
    assert!(section.iter().any(|l| l.contains("silent after frame")));
    let shown: Vec<&str> = text.lines().collect();
    for l in &section {
        assert!(shown.contains(l), "plugin lacks {l:?}:\n{text}");
    }
    let flows = summary_flows(&text);
    let totals: Vec<&str> = flows
        .values()
        .map(|f| f.get("channels_total").map_or("-", String::as_str))
        .collect();
    let mut totals = totals;
    totals.sort_unstable();
    assert_eq!(totals, ["2", "2", "4", "4"], "{text}");
}

/// READ/WRITE on the wire and a client and server that break the rules: the flow findings of
/// the Rust analysis, on the frames it puts them, and the observed figures.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_flow_findings_on_io_capture() {
    crate::support::need::tshark();
    let path = plugin_capture("sqos-plugin-io.pcap");
    let (flows, findings) = plugin_flows(&path);
    let id = "3c2b1a09-8f7e-4d6c-9b5a-493827160504";
    let got: Vec<(&str, &str, u64, u64, u64)> = findings
        .iter()
        .map(|(f, c, s, fr, n, l)| {
            assert_eq!(f, id);
            (c.as_str(), s.as_str(), *fr, *n, *l)
        })
        .collect();
    assert_eq!(
        got,
        [
            ("flow.counters_mismatch", "warning", 336, 1, 336),
            ("flow.exceeds_max_io_rate", "error", 314, 1, 314),
            ("flow.multiple_initiators", "note", 357, 1, 357),
            ("flow.multiple_initiators", "warning", 357, 1, 357),
            ("flow.no_status_after_set_policy", "warning", 10, 1, 10),
            ("flow.request_unanswered", "warning", 363, 1, 363),
            ("flow.reservation_not_met", "warning", 336, 4, 354),
            ("flow.server_should_have_failed", "error", 359, 1, 359),
            ("flow.status_poll_late", "warning", 347, 1, 347),
            ("flow.status_poll_late", "warning", 367, 1, 367),
        ]
    );
    let f = &flows[id];
    // 150 reads + 10 writes + 6 reads + 3 reads.
    assert_eq!(f["observed_io_count"], "169");
    assert_eq!(
        f["observed_bytes"],
        (150 * 8192 + 10 * 4096 + 6 * 8192 + 3 * 4096).to_string()
    );
    assert_eq!(f["initiator_node_name"], "HV04");
    assert_eq!(f["findings_total"], "10");
    // Each finding is expert info on the frame it names, also those known only at the end of
    // the capture (an episode still open, a request never answered); an episode of several
    // intervals on its first frame.
    let msgs = plugin_messages(&path, &[]);
    let shown: Vec<(u64, String)> = msgs
        .iter()
        .flat_map(|m| {
            m.fields
                .get("sqosa.flow_finding")
                .into_iter()
                .flatten()
                .map(move |c| (m.frame, c.clone()))
        })
        .collect();
    let expect: Vec<(u64, String)> = [
        (10, "flow.no_status_after_set_policy"),
        (314, "flow.exceeds_max_io_rate"),
        (336, "flow.reservation_not_met"),
        (336, "flow.counters_mismatch"),
        (347, "flow.status_poll_late"),
        (357, "flow.multiple_initiators"),
        (357, "flow.multiple_initiators"),
        (359, "flow.server_should_have_failed"),
        (363, "flow.request_unanswered"),
        (367, "flow.status_poll_late"),
    ]
    .iter()
    .map(|(f, c)| (*f, c.to_string()))
    .collect();
    assert_eq!(shown, expect);
    // The interim STATUS_PENDING answer is not the response; the async final one is.
    assert_eq!(msg_at(&msgs, 361, 179).get("sqosa.interim"), Some("1"));
    assert_eq!(
        msg_at(&msgs, 362, 179).int("sqosa.request_frame"),
        Some(360)
    );
    let text = tshark(&path, &["-2", "-q", "-z", "expert"]);
    assert!(
        text.contains(
            "[flow.reservation_not_met] flow 3c2b1a09-8f7e-4d6c-9b5a-493827160504, frame 336 (×4 intervals, until frame 354): observed 10.0"
        ),
        "{text}"
    );
    assert!(text.contains("[flow.exceeds_max_io_rate] flow 3c2b1a09-8f7e-4d6c-9b5a-493827160504, frame 314: observed 150.0 normalized IOPS"), "{text}");
}

/// `flow ID key=value key="quoted value" …` lines → flow id → key → value.
fn summary_flows(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    text.lines()
        .filter_map(|line| line.strip_prefix("flow "))
        .map(|rest| {
            let (id, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            (id.to_string(), summary_kv(rest))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Against the CLI
// ---------------------------------------------------------------------------------------------

/// Every capture the project has: captures/ (generated and real), the plugin's own, and the
/// shared real SMB2/3 captures.
fn all_captures() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in [
        repo().join("captures"),
        repo().join("captures/real"),
        repo().join("plugin/test"),
        need::real_captures(),
    ] {
        v.extend(captures_in(&dir));
        // captures_in knows .pcap, .pcapng and .pcap.gz; the generator also writes .pcapng.gz.
        let mut gz: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(".pcapng.gz"))
            .collect();
        gz.sort();
        v.extend(gz);
    }
    v
}

fn sqos_cli(args: &[&str], path: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(args)
        .arg(path)
        .output()
        .expect("run sqos")
}

/// `sqos dissect --format jsonl [extra]` → one JSON object per message.
fn dissect_jsonl(path: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["dissect", "--format", "jsonl"];
    args.extend_from_slice(extra);
    let out = sqos_cli(&args, path);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("jsonl line"))
        .collect()
}

/// What both sides must agree on for one message, as comparable strings.
fn key_of_cli(v: &Value, sev: &BTreeMap<String, String>) -> (u64, u64, String, Vec<String>) {
    let frame = v["frame"].as_u64().unwrap_or(0);
    let msg_id = v["msg_id"].as_u64().unwrap_or(0);
    let mut facts = vec![format!(
        "direction={}",
        v["direction"].as_str().unwrap_or("")
    )];
    for k in ["request_frame", "response_frame", "nt_status"] {
        if let Some(x) = v[k].as_u64() {
            facts.push(format!("{k}={x}"));
        }
    }
    if v["interim"].as_bool() == Some(true) {
        facts.push("interim".into());
    }
    if let Some(f) = v["file_id"].as_str() {
        facts.push(format!("file_id={f}"));
    }
    // The plugin shows Options for requests (a response's must be 0: a finding says otherwise).
    if let Some(o) = v["sqos"]["options"]
        .as_u64()
        .filter(|_| v["direction"] == "request")
    {
        facts.push(format!("options={o}"));
    }
    if let Some(s) = v["sqos"]["status"].as_u64() {
        facts.push(format!("status={s}"));
    }
    let mut findings: Vec<String> = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let code = f["code"].as_str().unwrap_or("").to_string();
            let s = f["severity"].as_str().unwrap_or("");
            // The plugin's severity for the code must be the CLI's.
            assert_eq!(
                sev.get(&code).map(String::as_str),
                Some(s),
                "severity of {code}"
            );
            code
        })
        .collect();
    findings.sort();
    facts.extend(findings.into_iter().map(|c| format!("finding={c}")));
    (
        frame,
        msg_id,
        v["direction"].as_str().unwrap_or("").into(),
        facts,
    )
}

fn key_of_plugin(m: &PluginMsg) -> (u64, u64, String, Vec<String>) {
    let dir = m.get("sqosa.direction").unwrap_or("").to_string();
    let mut facts = vec![format!("direction={dir}")];
    for (k, f) in [
        ("request_frame", "sqosa.request_frame"),
        ("response_frame", "sqosa.response_frame"),
        ("nt_status", "sqosa.nt_status"),
    ] {
        if let Some(x) = m.int(f) {
            facts.push(format!("{k}={x}"));
        }
    }
    if m.get("sqosa.interim").is_some() {
        facts.push("interim".into());
    }
    if let Some(f) = m.get("sqosa.file_id") {
        facts.push(format!("file_id={f}"));
    }
    if let Some(o) = m.int("sqosa.options") {
        facts.push(format!("options={o}"));
    }
    if let Some(s) = m.int("sqosa.status") {
        facts.push(format!("status={s}"));
    }
    facts.extend(m.findings().into_iter().map(|c| format!("finding={c}")));
    (m.frame, m.int("sqosa.msg_id").unwrap_or(0), dir, facts)
}

/// Message by message, on every capture, the plugin shows what sqos decodes (`sqos dissect
/// --format jsonl`), on the frames sqos puts it: the same messages (frame, MessageId,
/// direction), matching, NT status, FileId, Options/Status and findings (codes, and the
/// expert item of each code has the CLI's severity); and never a Lua error, in either pass.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_shows_sqos_on_every_capture() {
    crate::support::need::tshark();
    let sev = plugin_codes();
    let files = all_captures();
    assert!(files.len() >= 3);
    // Per capture: the messages compared and what differed.
    let per_capture = crate::support::par_map(&files, |f| {
        let mut errors = Vec::new();
        let ours: Vec<_> = dissect_jsonl(f, &[])
            .iter()
            .map(|v| key_of_cli(v, &sev))
            .collect();
        let msgs = plugin_messages(f, &[]);
        let theirs: Vec<_> = msgs
            .iter()
            .filter(|m| m.get("sqosa.direction").is_some())
            .map(key_of_plugin)
            .collect();
        let compared = ours.len();
        if ours != theirs {
            let only_cli: Vec<_> = ours
                .iter()
                .filter(|k| !theirs.contains(k))
                .take(4)
                .collect();
            let only_plugin: Vec<_> = theirs
                .iter()
                .filter(|k| !ours.contains(k))
                .take(4)
                .collect();
            errors.push(format!(
                "{}:\n  sqos dissect only: {only_cli:?}\n  plugin only:       {only_plugin:?}",
                f.display()
            ));
        }
        // A Lua error shows as `_ws.lua.error` in the packet (first pass: alone).
        let first = run_tshark(
            f,
            sqos_bin(),
            &["-Y", "_ws.lua.error", "-T", "fields", "-e", "frame.number"],
        );
        let frames = String::from_utf8_lossy(&first.stdout);
        let stderr = String::from_utf8_lossy(&first.stderr);
        if !frames.trim().is_empty()
            || stderr.contains("Lua")
            || msgs.iter().any(|m| m.fields.contains_key("_ws.lua.error"))
        {
            errors.push(format!(
                "{}: Lua errors in frames {frames} {stderr}",
                f.display()
            ));
        }
        (compared, errors)
    });
    let compared: usize = per_capture.iter().map(|(n, _)| n).sum();
    let errors: Vec<String> = per_capture.into_iter().flat_map(|(_, e)| e).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    eprintln!("compared {compared} SQOS messages with the plugin");
}

/// The plugin's flow table: flow id → keys, and its findings as comparable tuples.
type PluginFlows = (
    BTreeMap<String, BTreeMap<String, String>>,
    Vec<(String, String, String, u64, u64, u64)>,
);

fn plugin_flows(path: &Path) -> PluginFlows {
    let text = tshark(path, &["-q", "-X", "lua_script1:flows"]);
    let mut flows = BTreeMap::new();
    let mut findings = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("flow ") {
            let (id, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            flows.insert(id.to_string(), summary_kv(rest));
        } else if let Some(rest) = line.strip_prefix("finding ") {
            let (id, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            let kv = summary_kv(rest);
            let n = |k: &str| kv.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
            findings.push((
                id.to_string(),
                kv.get("code").cloned().unwrap_or_default(),
                kv.get("severity").cloned().unwrap_or_default(),
                n("frame"),
                n("occurrences"),
                n("last_frame"),
            ));
        }
    }
    findings.sort();
    (flows, findings)
}

/// Flow by flow, the plugin's summary lines carry every figure of `sqos flows --format json`
/// (FLOW_KEYS) and its findings (code, severity, frame, occurrences), on the generated captures
/// and the plugin's own.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_summary_is_sqos_flows() {
    crate::support::need::tshark();
    let mut files = captures_in(&repo().join("captures"));
    files.extend(captures_in(&repo().join("plugin/test")));
    // Per capture: the figures compared and what differed.
    let per_capture = crate::support::par_map(&files, |f| {
        let mut errors = Vec::new();
        let mut compared = 0usize;
        let out = sqos_cli(&["flows", "--format", "json"], f);
        let ours: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Array(vec![]));
        let (theirs, their_findings) = plugin_flows(f);
        let mut our_findings = Vec::new();
        let list = ours.as_array().cloned().unwrap_or_default();
        if list.len() != theirs.len() {
            errors.push(format!(
                "{}: {} flows from sqos flows, {} from the plugin",
                f.display(),
                list.len(),
                theirs.len()
            ));
        }
        for flow in &list {
            let id = flow["logical_flow_id"].as_str().unwrap_or_default();
            let Some(p) = theirs.get(id) else {
                errors.push(format!("{}: flow {id} missing in the plugin", f.display()));
                continue;
            };
            for (pk, path) in FLOW_KEYS {
                let v = path.iter().fold(flow, |v, k| &v[*k]);
                compared += 1;
                if !same_value(v, p.get(*pk)) {
                    errors.push(format!(
                        "{}: flow {id} {pk}: sqos flows {v}, plugin {:?}",
                        f.display(),
                        p.get(*pk)
                    ));
                }
            }
            for fd in flow["findings"].as_array().into_iter().flatten() {
                let n = |k: &str| fd[k].as_u64().unwrap_or(0);
                our_findings.push((
                    id.to_string(),
                    fd["code"].as_str().unwrap_or_default().to_string(),
                    fd["severity"].as_str().unwrap_or_default().to_string(),
                    n("frame"),
                    n("occurrences"),
                    n("last_frame"),
                ));
            }
        }
        our_findings.sort();
        if our_findings != their_findings {
            errors.push(format!(
                "{}: flow findings differ\n  sqos flows: {our_findings:?}\n  plugin:     {their_findings:?}",
                f.display()
            ));
        }
        (compared, errors)
    });
    let compared: usize = per_capture.iter().map(|(n, _)| n).sum();
    let errors: Vec<String> = per_capture.into_iter().flat_map(|(_, e)| e).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(compared > 100, "only {compared} figures compared");
    eprintln!("compared {compared} flow figures with the plugin");
}

/// Encrypted SMB3: the SMB2 keys of the Wireshark profile (its `smb2_seskey_list` file) go to
/// sqos (`--keys`), so the plugin shows the SQOS messages inside the encrypted session, as
/// `sqos dissect --keys` decodes them; without the file, none.
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn plugin_decrypts_with_the_profiles_keys() {
    crate::support::need::tshark();
    let capture = repo().join("captures/real/smb311-encrypted.pcap");
    let keys = repo().join("captures/real/smb2_seskey_list");
    let scratch = crate::support::scratch("sqosa-keys");
    let home = scratch.path();
    let profile = home.join(".config/wireshark");
    std::fs::create_dir_all(&profile).expect("profile dir");
    let shown = |with_keys: bool| -> Vec<(u64, u64, String, Vec<String>)> {
        let list = profile.join("smb2_seskey_list");
        if with_keys {
            std::fs::copy(&keys, &list).expect("copy keys");
        } else {
            let _ = std::fs::remove_file(&list);
        }
        let out = tshark_command(&capture, sqos_bin(), &SECOND_PASS_JSON)
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .output()
            .expect("run tshark");
        plugin_messages_of(&checked(&capture, out))
            .iter()
            .filter(|m| m.get("sqosa.direction").is_some())
            .map(key_of_plugin)
            .collect()
    };
    let sev = plugin_codes();
    let keys_arg = keys.display().to_string();
    let ours: Vec<_> = dissect_jsonl(&capture, &["--keys", &keys_arg])
        .iter()
        .map(|v| key_of_cli(v, &sev))
        .collect();
    assert!(ours.len() >= 6, "{ours:?}");
    assert_eq!(shown(true), ours);
    assert_eq!(shown(false), vec![]);
}

// ---------------------------------------------------------------------------------------------
// Without a usable sqos
// ---------------------------------------------------------------------------------------------

/// An executable shell script in a fresh directory, standing in for sqos.
#[cfg(unix)]
fn fake_sqos(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::create_dir_all(&path).expect("temp dir");
    let path = path.join("sqos");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// What the plugin says, on the SQOS frames (expert item `sqosa.no_analysis`) and on stderr,
/// when `sqos` cannot give the analysis; never a Lua error.
fn no_analysis(sqos: &str) -> (Vec<(u64, String)>, String) {
    let path = plugin_capture("sqos-plugin-flows.pcap");
    let out = run_tshark(
        &path,
        sqos,
        &[
            "-2",
            "-Y",
            "sqosa.no_analysis",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "_ws.expert.message",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("Lua"), "{stderr}");
    let frames = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter_map(|(f, m)| Some((f.parse().ok()?, m.to_string())))
        .collect();
    (frames, stderr)
}

/// Every frame with an SQOS IOCTL (Wireshark's `smb2.ioctl.function`) of the flows capture.
fn sqos_frames() -> Vec<u64> {
    crate::support::tshark_fields(
        &plugin_capture("sqos-plugin-flows.pcap"),
        Some("smb2.ioctl.function == 0x00090350"),
        &["frame.number"],
    )
    .iter()
    .filter_map(|r| r.first()?.parse().ok())
    .collect()
}

#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_says_when_sqos_is_missing() {
    crate::support::need::tshark();
    let (frames, stderr) = no_analysis("/nonexistent/sqos");
    assert_eq!(
        frames.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
        sqos_frames()
    );
    for (_, m) in &frames {
        assert!(
            m.contains("`/nonexistent/sqos annotate` gave no analysis"),
            "{m}"
        );
        assert!(m.contains("-o sqosa.sqos:PATH"), "{m}");
    }
    assert!(
        stderr.contains("sqosa: `/nonexistent/sqos annotate` gave no analysis"),
        "{stderr}"
    );
}

#[cfg(unix)]
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn plugin_says_when_sqos_is_too_old_or_too_new() {
    crate::support::need::tshark();
    let dir = crate::support::scratch("sqosa-test");
    let old = fake_sqos(
        dir.path(),
        "old",
        "echo \"error: unrecognized subcommand 'annotate'\" >&2; exit 2",
    );
    let (frames, _) = no_analysis(&old.display().to_string());
    assert!(!frames.is_empty());
    assert!(
        frames[0]
            .1
            .contains("this sqos has no `sqos annotate`: it is older than this plugin needs"),
        "{frames:?}"
    );
    let new = fake_sqos(
        dir.path(),
        "new",
        r#"echo '{"type":"header","format":"sqos-annotate","version":2,"sqos":"9.0.0"}'"#,
    );
    let (frames, stderr) = no_analysis(&new.display().to_string());
    assert!(!frames.is_empty());
    assert!(
        frames[0]
            .1
            .contains("sqos 9.0.0 writes `sqos annotate` version 2; this plugin"),
        "{frames:?}"
    );
    assert!(stderr.contains("reads version 1"), "{stderr}");
}
