//! The user's path through the command line (issue 15): tshark's habits (`-r`, `-c`, `-t`,
//! `-T fields -e -E`, `-x`, `-w`), the display filter and its shortcuts, and what `dissect` says
//! when it has nothing to show.

use crate::support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sqos::capture::CaptureReader;
use sqos::pipeline::{Direction, SqosBody, SqosRecord};

fn sqos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(args)
        .current_dir(support::repo())
        .env("TZ", "UTC")
        .output()
        .expect("run sqos")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `text` holds every one of `parts` (the text is shown when it does not).
fn has(text: &str, parts: &[&str]) {
    for p in parts {
        assert!(text.contains(p), "{p:?} not in:\n{text}");
    }
}

/// `sqos dissect captures/steady.pcap.gz ARGS`.
fn dissect_steady(args: &[&str]) -> Output {
    sqos(&[&["dissect", "captures/steady.pcap.gz"][..], args].concat())
}

fn capture(name: &str) -> PathBuf {
    support::repo().join("captures").join(name)
}

/// Frame numbers in the first column of `sqos dissect` text lines.
fn frames_of(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

fn body_flow(r: &SqosRecord) -> Option<uuid::Uuid> {
    match &r.body {
        SqosBody::Request(d) => d.message.as_ref().map(|m| m.logical_flow_id),
        SqosBody::Response(d) => d.message.as_ref().map(|m| m.logical_flow_id),
        SqosBody::NoBuffer => None,
    }
}

/// The frames of one VM's messages, worked out from the records: its flow is the one its
/// SET_POLICY names; its requests name that flow; its responses answer those requests.
fn frames_of_vm(path: &Path, vm: &str) -> Vec<u64> {
    let (c, _) = support::run(path);
    let flow = c
        .sqos
        .iter()
        .find_map(|r| match &r.body {
            SqosBody::Request(d) => d
                .message
                .as_ref()
                .filter(|m| m.initiator_name.as_deref() == Some(vm))
                .map(|m| m.logical_flow_id),
            _ => None,
        })
        .expect("the VM's SET_POLICY");
    let mut asked = HashSet::new();
    let mut frames = Vec::new();
    for r in &c.sqos {
        let mine = match r.direction {
            Direction::Request => body_flow(r) == Some(flow),
            Direction::Response => asked.contains(&(r.conn, r.msg_id)),
        };
        if mine {
            if r.direction == Direction::Request {
                asked.insert((r.conn, r.msg_id));
            }
            frames.push(r.frame);
        }
    }
    frames
}

#[test]
fn vm_shortcut_and_filter_keep_exactly_the_vms_messages() {
    let path = capture("steady.pcap.gz");
    let want = frames_of_vm(&path, "vm03");
    assert!(want.len() >= 12, "vm03 has {} messages", want.len());
    let o = sqos(&["dissect", "-r", "captures/steady.pcap.gz", "--vm", "VM03"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(frames_of(&stdout(&o)), want);
    // The same through -Y on the flow's field; and from stdin (one pass: the flow as it stood).
    let o = dissect_steady(&["-Y", "flow.initiator_name == vm03"]);
    assert_eq!(frames_of(&stdout(&o)), want);
    let o = dissect_steady(&["--vm", "vm03", "-c", "3"]);
    assert_eq!(frames_of(&stdout(&o)), want[..3].to_vec());
}

/// Files whose messages pass the share held to judge `-Y` on the flows' final state are read a
/// second time: the run says so on stderr, and shows what one holding reading shows.
#[test]
fn messages_past_the_held_share_are_read_again_and_said_to_be() {
    // 256 flows, 32 MB: ~1,000 messages, ~130 KB held, past the 102 KiB a fortieth of the
    // smallest budget (4 MiB) holds, within the default's 1.6 MiB.
    let dir = support::scratch("held");
    let path = dir.path().join("many-flows.pcap");
    let file = path.to_str().expect("utf-8 path");
    let many = "--hosts 1 --vms 16 --disks 16 --duration 1";
    let made = sqos(
        &[
            &["synth", "-q", "-o", file],
            &many.split(' ').collect::<Vec<_>>()[..],
        ]
        .concat(),
    );
    assert!(made.status.success(), "{}", stderr(&made));
    let run = |memory: &str| {
        let filter = "flow.initiator_name == vm03";
        sqos(&["dissect", "-Y", filter, "--memory", memory, file])
    };
    let once = run("64M");
    let twice = run("4M");
    assert!(once.status.success() && twice.status.success());
    let shown = frames_of(&stdout(&once));
    assert_eq!(shown.len(), 60, "vm03's 16 flows");
    // The same messages (the smaller budget's queue shows some requests before their
    // response: a note says so).
    assert_eq!(frames_of(&stdout(&twice)), shown);
    let again = "the captures are read a second time";
    assert!(!stderr(&once).contains(again), "{}", stderr(&once));
    let err = stderr(&twice);
    let said: Vec<&str> = err.lines().filter(|l| l.contains(again)).collect();
    assert_eq!(said.len(), 1, "{err}");
    has(
        said[0],
        &[
            &format!("sqos: {file}: the messages held"),
            "passed their share (102 KiB, a fortieth of --memory) at frame ",
        ],
    );
}

#[test]
fn message_fields_compare_as_numbers_strings_and_lists() {
    let path = capture("steady.pcap.gz");
    let (c, _) = support::run(&path);
    let want: Vec<u64> = c
        .sqos
        .iter()
        .filter(|r| match &r.body {
            SqosBody::Request(d) => d.message.as_ref().is_some_and(|m| m.limit >= 100),
            _ => false,
        })
        .map(|r| r.frame)
        .collect();
    assert!(!want.is_empty());
    let o = dissect_steady(&["-Y", "sqos.limit >= 100"]);
    assert_eq!(frames_of(&stdout(&o)), want);
    let want: Vec<u64> = c
        .sqos
        .iter()
        .filter(|r| match &r.body {
            SqosBody::Request(d) => d
                .message
                .as_ref()
                .is_some_and(|m| m.options.names().contains(&"SET_POLICY")),
            _ => false,
        })
        .map(|r| r.frame)
        .collect();
    let o = dissect_steady(&["-Y", "option_names == SET_POLICY and direction == request"]);
    assert_eq!(frames_of(&stdout(&o)), want);
}

#[test]
fn a_bad_filter_shows_a_caret_and_exits_2() {
    let o = sqos(&["dissect", "captures/steady.pcap.gz", "-Y", "lmit > 3"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "sqos: -Y: unknown field `lmit` (did you mean `limit`?)\n  lmit > 3\n  ^^^^\n"
    );
    assert!(o.stdout.is_empty());
    let o = sqos(&["flows", "captures/steady.pcap.gz", "-Y", "limit > and x"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "sqos: -Y: expected a value, found `and`\n  limit > and x\n          ^^^\n"
    );
    let o = sqos(&["dissect", "captures/steady.pcap.gz", "--time", "soon"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--time \"soon\""), "{}", stderr(&o));
}

#[test]
fn fields_output_with_header_separator_and_flow_fields() {
    let o = dissect_steady(&[
        "--vm",
        "vm01",
        "-Y",
        "direction == response and status_name",
        "-T",
        "fields",
        "-e",
        "frame",
        "-e",
        "flow.initiator_name",
        "-e",
        "maximum_io_rate",
        "-e",
        "sqos.status_name",
        "-E",
        "header=y",
        "-E",
        "separator=,",
        "-c",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "frame,flow.initiator_name,maximum_io_rate,sqos.status_name"
    );
    assert_eq!(lines.len(), 3);
    for l in &lines[1..] {
        let cells: Vec<&str> = l.split(',').collect();
        assert_eq!(cells[1..], ["vm01", "120", "StorageQoSStatusOk"], "{l}");
        cells[0].parse::<u64>().expect("frame number");
    }
    let o = sqos(&["dissect", "captures/steady.pcap.gz", "-T", "fields"]);
    assert_eq!(o.status.code(), Some(2));
    let o = dissect_steady(&["-T", "fields", "-e", "vm"]);
    assert_eq!(o.status.code(), Some(2));
    has(&stderr(&o), &["-e vm: unknown field"]);
}

#[test]
fn time_formats() {
    let path = capture("steady.pcap.gz");
    let (c, _) = support::run(&path);
    let first = c.first_ts.expect("first frame");
    let rec = &c.sqos[0];
    let secs = rec.ts.0.div_euclid(1_000_000_000);
    let micros = rec.ts.0.rem_euclid(1_000_000_000) / 1000;
    let col = |fmt: &str| {
        let o = sqos(&["dissect", "captures/steady.pcap.gz", "-c", "1", "-t", fmt]);
        assert!(o.status.success(), "{}", stderr(&o));
        let line = stdout(&o);
        let mut it = line.split_whitespace().skip(1);
        match fmt {
            "ad" | "ud" => format!("{} {}", it.next().unwrap_or(""), it.next().unwrap_or("")),
            _ => it.next().unwrap_or("").to_string(),
        }
    };
    assert_eq!(col("e"), format!("{secs}.{micros:06}"));
    assert_eq!(col("r"), format!("{:.6}", rec.ts.secs_since(first)));
    // TZ=UTC: local and UTC agree.
    let ud = col("ud");
    assert_eq!(col("ad"), ud);
    assert!(ud.starts_with("2026-11-20 09:00:00."), "{ud}");
    assert_eq!(col("u"), ud[11..]);
    assert_eq!(col("a"), ud[11..]);
    assert_eq!(col("d"), "0.000000");
    // JSON carries an ISO-8601 UTC datetime beside the epoch seconds.
    let o = dissect_steady(&["-c", "1", "--format", "jsonl"]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("json");
    assert_eq!(v["datetime"], format!("{}Z", ud.replace(' ', "T")));
}

#[test]
fn write_keeps_the_matching_frames_whole_with_their_timestamps() {
    let scratch = crate::support::scratch("sqos-w-");
    let dir = scratch.path().to_path_buf();
    let out = dir.join("vm03.pcap");
    let o = dissect_steady(&["--vm", "vm03", "-w", out.to_str().expect("utf-8 path")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut want: Vec<u64> = frames_of_vm(&capture("steady.pcap.gz"), "vm03");
    want.dedup();
    assert!(
        stderr(&o).contains(&format!(
            "{} frames carrying {} SQOS messages, as pcap (link type 1, Ethernet; nanosecond timestamps)",
            want.len(),
            frames_of_vm(&capture("steady.pcap.gz"), "vm03").len()
        )),
        "{}",
        stderr(&o)
    );
    // The original frames, byte for byte, with their times and lengths.
    let mut orig = CaptureReader::open(&capture("steady.pcap.gz")).expect("open");
    let mut originals = Vec::new();
    while let Some(f) = orig.next_frame().expect("frame") {
        if want.contains(&f.number) {
            originals.push((f.ts, f.orig_len, f.data.to_vec()));
        }
    }
    let mut written = CaptureReader::open(&out).expect("open the written capture");
    let mut got = Vec::new();
    while let Some(f) = written.next_frame().expect("frame") {
        assert_eq!(f.link_type, 1);
        got.push((f.ts, f.orig_len, f.data.to_vec()));
    }
    assert_eq!(got.len(), want.len());
    assert!(got == originals, "written frames differ from the originals");
    // And sqos reads them back as the same messages of vm03.
    let o = sqos(&["dissect", out.to_str().expect("utf-8"), "--vm", "vm03"]);
    assert_eq!(frames_of(&stdout(&o)).len(), want.len());
}

#[test]
fn hex_shows_the_whole_frame_then_the_buffer() {
    let o = sqos(&["dissect", "captures/steady.pcap.gz", "-x", "-c", "1"]);
    let text = stdout(&o);
    let (c, _) = support::run(&capture("steady.pcap.gz"));
    let rec = &c.sqos[0];
    let mut r = CaptureReader::open(&capture("steady.pcap.gz")).expect("open");
    let mut len = 0;
    while let Some(f) = r.next_frame().expect("frame") {
        if f.number == rec.frame {
            len = f.data.len();
            break;
        }
    }
    has(
        &text,
        &[&format!("Frame {}: {len} bytes:\n0000  ", rec.frame)],
    );
    has(
        &text,
        &[&format!("SQOS buffer ({} bytes):\n", rec.buffer.len())],
    );
    let hex_lines = text
        .lines()
        .filter(|l| {
            l.len() > 6 && l.as_bytes()[..4].iter().all(u8::is_ascii_hexdigit) && &l[4..6] == "  "
        })
        .count();
    assert_eq!(
        hex_lines,
        len.div_ceil(16) + rec.buffer.len().div_ceil(16),
        "{text}"
    );
}

#[test]
fn dissect_says_what_it_saw_when_there_is_nothing_to_show() {
    let o = sqos(&["dissect", "captures/steady.pcap.gz", "--vm", "nobody"]);
    assert!(o.status.success());
    assert!(o.stdout.is_empty());
    let (c, _) = support::run(&capture("steady.pcap.gz"));
    assert_eq!(
        stderr(&o),
        format!(
            "sqos: captures/steady.pcap.gz: no message matched the filter ({} SQOS messages seen)\n",
            c.sqos.len()
        )
    );
}

#[test]
fn flows_filter_and_export_series_filter() {
    let o = sqos(&[
        "flows",
        "captures/noisy-neighbour.pcapng.gz",
        "--format",
        "json",
        "-Y",
        "finding_codes == flow.exceeds_max_io_rate",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let names: Vec<&str> = v
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|f| f["initiator_name"].as_str())
        .collect();
    assert_eq!(names, ["vm01"]);
    let o = sqos(&[
        "export",
        "captures/steady.pcap.gz",
        "--what",
        "series",
        "--vm",
        "vm02",
        "--format",
        "jsonl",
    ]);
    let rows: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("row"))
        .collect();
    assert!(rows.len() > 3);
    assert!(rows.iter().all(|r| r["initiator_name"] == "vm02"));
}

#[test]
fn errors_name_the_file_once_and_an_empty_file_is_empty() {
    let o = sqos(&["dissect", "no-such-file.pcap"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "sqos: no-such-file.pcap: No such file or directory (os error 2)\n"
    );
    let scratch = crate::support::scratch("sqos-empty-");
    let dir = scratch.path().to_path_buf();
    let empty = dir.join("empty.pcap");
    std::fs::write(&empty, b"").expect("write");
    let o = sqos(&["flows", empty.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        format!(
            "sqos: {}: empty: no capture in it (0 bytes)\n",
            empty.display()
        )
    );
}

#[test]
fn synth_is_quiet_on_request_and_names_scenarios_as_typed() {
    let scratch = crate::support::scratch("sqos-synth-");
    let dir = scratch.path().to_path_buf();
    let out = dir.join("nn.pcap");
    let out = out.to_str().expect("utf-8");
    let args = [
        "synth",
        "--scenario",
        "noisy-neighbour",
        "--duration",
        "2",
        "-o",
        out,
    ];
    let o = sqos(&args);
    assert!(o.status.success());
    assert!(
        stderr(&o).starts_with("noisy-neighbour: "),
        "{}",
        stderr(&o)
    );
    let o = sqos(&[&args[..], &["--quiet"]].concat());
    assert!(o.status.success());
    assert_eq!(stderr(&o), "");
    // A snaplen cut is named as such in the notes.
    let cut = dir.join("cut.pcap");
    let cut = cut.to_str().expect("utf-8");
    let o = sqos(&[
        "synth",
        "--duration",
        "2",
        "--snaplen",
        "200",
        "-q",
        "-o",
        cut,
    ]);
    assert!(o.status.success());
    let o = sqos(&["dissect", cut]);
    let notes = stderr(&o);
    let line = notes
        .lines()
        .find(|l| l.contains("not in the capture"))
        .expect("a snaplen note");
    has(
        line,
        &[
            "bytes not in the capture: its snaplen cut frame ",
            " to 200 of ",
        ],
    );
}

#[test]
fn flows_notes_count_only_lost_data_with_the_right_grammar() {
    // noisy-neighbour ends with one unanswered (non-SQOS) request: nothing was lost.
    let o = sqos(&["flows", "captures/noisy-neighbour.pcapng.gz"]);
    let text = stdout(&o);
    assert!(!text.contains("notes ("), "{text}");
    let o = sqos(&["dissect", "captures/noisy-neighbour.pcapng.gz"]);
    has(
        &stderr(&o),
        &["1 SMB2 request had no response by the end of the capture"],
    );
    // lossy-network has real gaps.
    let o = sqos(&["flows", "captures/lossy-network.pcapng.gz"]);
    let text = stdout(&o);
    has(
        &text,
        &[
            "note: the capture has ",
            " (gaps, undecodable or dropped data",
        ],
    );
}

#[test]
fn check_refuses_an_empty_rules_file_and_tolerates_5_percent_by_default() {
    let scratch = crate::support::scratch("sqos-check-");
    let dir = scratch.path().to_path_buf();
    let rules = dir.join("empty.toml");
    std::fs::write(&rules, "# nothing yet\n").expect("write");
    let o = sqos(&[
        "check",
        "captures/steady.pcap.gz",
        "--rules",
        rules.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    has(&stderr(&o), &["no rules in the file: nothing to check"]);
    // A baseline whose latency differs by 1 %: passes by default, fails when exact.
    let o = sqos(&["flows", "captures/steady.pcap.gz", "--format", "json"]);
    let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let f = v
        .as_array_mut()
        .expect("flows")
        .iter_mut()
        .find(|f| f["initiator_name"] == "vm01")
        .expect("vm01");
    let lat = f["avg_latency_ms"].as_f64().expect("latency");
    f["avg_latency_ms"] = serde_json::json!(lat * 1.01);
    let base = dir.join("base.json");
    std::fs::write(&base, v.to_string()).expect("write");
    let base = base.to_str().expect("utf-8");
    let o = sqos(&["check", "captures/steady.pcap.gz", "--baseline", base]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = sqos(&[
        "check",
        "captures/steady.pcap.gz",
        "--baseline",
        base,
        "--tolerance",
        "default=0",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("avg_latency_ms"), "{}", stdout(&o));
    // --vm narrows what the baseline judges: vm02's flow alone, unchanged, passes even exactly.
    let o = sqos(&[
        "check",
        "captures/steady.pcap.gz",
        "--baseline",
        base,
        "--tolerance",
        "default=0",
        "--vm",
        "vm02",
    ]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}{}", stderr(&o));
    assert_eq!(text.matches("baseline: flow").count(), 1, "{text}");
    assert!(text.contains("baseline: flow vm02"), "{text}");
}

#[test]
fn every_help_ends_with_examples_and_completions_and_man_come_from_it() {
    for cmd in [
        "dissect",
        "stats",
        "flows",
        "export",
        "plot",
        "check",
        "synth",
        "tui",
        "annotate",
        "completions",
        "man",
    ] {
        let o = sqos(&[cmd, "--help"]);
        assert!(o.status.success(), "{cmd}");
        let text = stdout(&o);
        let tail = text
            .rsplit_once("Examples:\n")
            .map(|(_, t)| t)
            .unwrap_or_else(|| panic!("{cmd} --help has no examples:\n{text}"));
        let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(
            (2..=3).contains(&lines.len()),
            "{cmd}: {} examples",
            lines.len()
        );
        for l in lines {
            assert!(l.starts_with("  ") && l.contains("sqos "), "{cmd}: {l}");
            // The examples use the options that exist: clap accepts them.
            if let Some(args) = l.trim().strip_prefix("sqos ") {
                if !args.contains(['|', '>', '*', '\'', '~']) {
                    let words: Vec<&str> = args.split_whitespace().collect();
                    let o = Command::new(env!("CARGO_BIN_EXE_sqos"))
                        .args(&words)
                        .arg("--help")
                        .output()
                        .expect("run");
                    assert!(o.status.success(), "{cmd}: `{l}` does not parse");
                }
            }
        }
    }
    let o = sqos(&["completions", "bash"]);
    let s = stdout(&o);
    assert!(
        s.contains("--display-filter") && s.contains("dissect"),
        "bash completion"
    );
    let o = sqos(&["man", "dissect"]);
    let s = stdout(&o);
    assert!(s.contains(".TH sqos-dissect 1"), "{s}");
    assert!(s.contains("display\\-filter"), "{s}");
}

/// The largest y-axis label of each panel of a `sqos plot` SVG (one `<g>` per flow).
fn panel_tops(svg: &str) -> Vec<f64> {
    svg.split("<g>")
        .skip(1)
        .map(|g| {
            g.split(r##"text-anchor="end" fill="#333">"##)
                .skip(1)
                .filter_map(|t| t.split('<').next()?.parse::<f64>().ok())
                .fold(0.0, f64::max)
        })
        .collect()
}

#[test]
fn plot_names_its_capture_and_its_markers_and_shares_one_scale_on_request() {
    let scratch = crate::support::scratch("sqos-plot-");
    let dir = scratch.path().to_path_buf();
    let (own, same) = (dir.join("own.svg"), dir.join("same.svg"));
    let cap = "captures/noisy-neighbour.pcapng.gz";
    for (out, extra) in [(&own, None), (&same, Some("--same-scale"))] {
        let mut args = vec!["plot", cap, "-o", out.to_str().unwrap()];
        args.extend(extra);
        let o = sqos(&args);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let svg = std::fs::read_to_string(&own).unwrap();
    assert!(
        svg.contains(">noisy-neighbour.pcapng.gz</text>"),
        "the capture in the title"
    );
    // Each finding's marker carries its name in text (a PNG has no tooltips).
    let o = sqos(&["flows", cap, "--format", "json"]);
    let flows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let codes: HashSet<String> = flows
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["logical_flow_id"]
                .as_str()
                .is_some_and(|id| !id.starts_with("00000000"))
        })
        .flat_map(|f| f["findings"].as_array().cloned().unwrap_or_default())
        .filter_map(|x| x["code"].as_str().map(str::to_string))
        .collect();
    assert!(!codes.is_empty());
    for code in &codes {
        let name = code.split_once('.').map_or(code.as_str(), |(_, n)| n);
        assert!(
            svg.contains(&format!(r##"fill="#d62728">{name}</text>"##)),
            "marker {name} named"
        );
    }
    // Own scales differ between panels; --same-scale gives them one.
    let tops = panel_tops(&svg);
    assert!(
        tops.len() >= 2 && tops.iter().any(|t| *t != tops[0]),
        "{tops:?}"
    );
    let shared = panel_tops(&std::fs::read_to_string(&same).unwrap());
    let top = tops.iter().copied().fold(0.0, f64::max);
    assert!(shared.iter().all(|t| *t == top), "{shared:?} vs {top}");
}

#[test]
fn csv_export_gives_pandas_dtypes_for_the_columns_left_empty() {
    let scratch = crate::support::scratch("sqos-dtypes-");
    let dir = scratch.path().to_path_buf();
    let (csv, dtypes) = (dir.join("m.csv"), dir.join("m.dtypes.json"));
    let o = sqos(&[
        "export",
        "captures/steady.pcap.gz",
        "--what",
        "messages",
        "--format",
        "csv",
        "-o",
        csv.to_str().unwrap(),
        "--dtypes",
        dtypes.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let types: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dtypes).unwrap()).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    assert_eq!(types.as_object().unwrap().len(), header.len());
    // A response column: integers, empty on request rows — pandas needs the nullable Int64.
    let col = header.iter().position(|c| *c == "maximum_io_rate").unwrap();
    let cells: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(col).unwrap_or(""))
        .collect();
    assert!(cells.iter().any(|c| c.is_empty()) && cells.iter().any(|c| c.parse::<u64>().is_ok()));
    // Declared, as Parquet types it (a 64-bit protocol field is unsigned), not guessed from
    // what this capture held.
    assert_eq!(types["maximum_io_rate"], "UInt64");
    assert_eq!(types["frame"], "Int64");
    assert_eq!(types["time"], "float64");
    assert_eq!(types["datetime"], "string");
    assert_eq!(types["direction"], "string");
    // JSON lines carry their own types: --dtypes is for CSV.
    let o = sqos(&[
        "export",
        "captures/steady.pcap.gz",
        "--what",
        "messages",
        "--dtypes",
        dtypes.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn fields_output_escapes_hostile_names_and_filters_match_them_as_sent() {
    use sqos::synth::scenario::{HOSTILE_NAMES, HOSTILE_NODE};
    let hostile = "captures/hostile/hostile-names.pcap.gz";
    // The filter sees the names as sent: the title-setting one is found by its payload.
    let fields = [
        "dissect",
        hostile,
        "-T",
        "fields",
        "-e",
        "frame",
        "-e",
        "flow.initiator_name",
        "-e",
        "flow.initiator_node_name",
    ];
    let o = sqos(
        &[
            &fields[..],
            &["-Y", r#"flow.initiator_name ~ "pwned""#, "-E", "header=y"],
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let escaped = |s: &str| sqos::output::escape::text(s).into_owned();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("frame\tflow.initiator_name\tflow.initiator_node_name")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split('\t').collect()).collect();
    assert!(rows.len() >= 2, "{text}");
    for r in &rows {
        assert!(r[0].parse::<u64>().is_ok(), "{r:?}");
        assert_eq!(r[1], escaped(HOSTILE_NAMES[0]), "{r:?}");
        assert_eq!(r[1], r"vm01\x1b]0;pwned\x07\x1b[2J");
        assert_eq!(r[2], "HV01.contoso.local");
    }
    // Every name in cells: no raw control character or bidi override, and the forged line
    // stays inside its cell (one line per message, three cells each).
    let o = sqos(&fields);
    let text = stdout(&o);
    assert!(
        !text
            .chars()
            .any(|c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{202e}'),
        "{text:?}"
    );
    let shown: HashSet<&str> = text
        .lines()
        .map(|l| {
            let cells: Vec<&str> = l.split('\t').collect();
            assert_eq!(cells.len(), 3, "{l:?}");
            cells[1]
        })
        .collect();
    for name in HOSTILE_NAMES {
        assert!(
            shown.contains(escaped(name).as_str()),
            "{name:?} in {shown:?}"
        );
    }
    has(&text, &[&escaped(HOSTILE_NODE)]);
    // --vm matches the name as sent, with wildcards.
    let o = sqos(&["flows", hostile, "--vm", "vm03*"]);
    has(&stdout(&o), &[r"vm03\u202exdhv.exe"]);
}
