//! Hostile names on every face, on `captures/hostile/hostile-names.pcap.gz` (`sqos synth
//! --scenario hostile-names`): InitiatorNames that set the terminal's title and clear the screen,
//! forge a dissect line, reverse text with a bidi override, run as a spreadsheet formula, carry
//! markup; a node name that colours the terminal. Text faces show them escaped, CSV neutralises
//! the formula, XML faces stay well-formed, JSON keeps them exact.

use std::path::PathBuf;
use std::process::Command;

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use sqos::synth::scenario::{HOSTILE_NAMES, HOSTILE_NODE};
use sqos::tui::app::App;
use sqos::tui::source::Input;
use sqos::tui::store::DEFAULT_MAX_MESSAGES;
use sqos::tui::theme::Theme;
use sqos::tui::view::draw;

const CAPTURE: &str = "captures/hostile/hostile-names.pcap.gz";

fn capture() -> PathBuf {
    crate::support::repo().join(CAPTURE)
}

/// (stdout, stderr) of `sqos ARGS`, which must succeed.
fn sqos(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(args)
        .output()
        .expect("run sqos");
    assert!(out.status.success(), "sqos {args:?}: {out:?}");
    (
        String::from_utf8(out.stdout).expect("utf-8 stdout"),
        String::from_utf8(out.stderr).expect("utf-8 stderr"),
    )
}

/// No character that acts on a terminal or reorders text: C0 controls but the line feed, DEL,
/// C1, bidi overrides and isolates.
fn assert_inert(face: &str, s: &str) {
    if let Some((i, c)) = s.char_indices().find(|&(_, c)| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    }) {
        panic!(
            "{face}: raw {c:?} at byte {i}: {:?}",
            &s[i.saturating_sub(40)..(i + 40).min(s.len())]
        );
    }
}

/// Each hostile name as `output::escape::text` shows it.
fn escaped() -> Vec<String> {
    HOSTILE_NAMES
        .iter()
        .map(|n| sqos::output::escape::text(n).into_owned())
        .collect()
}

#[test]
fn dissect_lines_show_names_escaped_and_cannot_be_forged() {
    let c = capture();
    let (out, err) = sqos(&["dissect", "--quiet", c.to_str().unwrap_or_default()]);
    assert_inert("dissect", &out);
    assert_inert("dissect stderr", &err);
    assert!(
        out.contains(r#"name="vm01\x1b]0;pwned\x07\x1b[2J""#),
        "{out}"
    );
    assert!(out.contains(r#"name="vm03\u202exdhv.exe""#));
    assert!(out.contains(r#"node="HV02\x1b[31m.contoso.local""#));
    // The forged line stays inside its request's line.
    assert!(out.contains(r#"name="vm02\r\n     99   0.000000 10.6.6.6:445"#));
    for line in out.lines() {
        assert!(!line.trim_start().starts_with("99 "), "forged: {line}");
        let frame = line.split_whitespace().next().unwrap_or_default();
        assert!(frame.parse::<u64>().is_ok(), "not a message line: {line}");
    }
}

#[test]
fn dissect_tree_shows_fields_and_file_names_escaped() {
    let c = capture();
    let (out, _) = sqos(&["dissect", "-V", "--quiet", c.to_str().unwrap_or_default()]);
    assert_inert("dissect -V", &out);
    for name in escaped() {
        assert!(
            out.contains(&format!("\"{name}\"")),
            "{name} not in the tree"
        );
        // The file the open was created with, named after the VM, on the share it was opened on.
        assert!(
            out.contains(&format!("(\\\\sofs\\vms\\{name}\\disk0.vhdx)")),
            "\\\\sofs\\vms\\{name}\\disk0.vhdx"
        );
    }
    assert!(out.contains(&format!("\"{}\"", sqos::output::escape::text(HOSTILE_NODE))));
}

#[test]
fn flows_text_shows_names_escaped_and_json_keeps_them_exact() {
    let c = capture();
    let (text, _) = sqos(&["flows", "--quiet", c.to_str().unwrap_or_default()]);
    assert_inert("flows", &text);
    assert!(text.contains(r"vm03\u202exdhv.exe"), "{text}");
    assert!(text.contains(r"HV02\x1b[31m.contoso.lo"), "{text}");
    let (json, _) = sqos(&[
        "flows",
        "--quiet",
        "--format",
        "json",
        c.to_str().unwrap_or_default(),
    ]);
    let flows: serde_json::Value = serde_json::from_str(&json).expect("flows JSON");
    let mut names: Vec<String> = flows
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|f| f["initiator_name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    let mut want: Vec<String> = HOSTILE_NAMES.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(names, want, "JSON is exact");
    let nodes: Vec<&str> = flows
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|f| f["initiator_node_name"].as_str())
        .collect();
    assert_eq!(nodes.iter().filter(|n| **n == HOSTILE_NODE).count(), 2);
}

#[test]
fn csv_neutralises_formulas_for_spreadsheets() {
    let c = capture();
    let (csv, _) = sqos(&[
        "export",
        "--quiet",
        "--what",
        "flows",
        "--format",
        "csv",
        c.to_str().unwrap_or_default(),
    ]);
    assert_inert("csv", &csv);
    let mut r = ::csv::Reader::from_reader(csv.as_bytes());
    let header = r.headers().expect("header").clone();
    let col = header
        .iter()
        .position(|h| h == "initiator_name")
        .expect("initiator_name column");
    let cells: Vec<String> = r
        .records()
        .map(|rec| rec.expect("row").get(col).unwrap_or_default().to_string())
        .collect();
    assert!(
        cells.contains(&format!("'{}", HOSTILE_NAMES[3])),
        "{cells:?}"
    );
    for cell in &cells {
        assert!(
            !cell.starts_with(['=', '+', '-', '@']),
            "a formula reaches the spreadsheet: {cell}"
        );
    }
    assert!(cells.contains(&r"vm03\u202exdhv.exe".to_string()));
}

#[test]
fn plot_svg_is_well_formed_with_names_escaped() {
    let dir = std::env::temp_dir().join(format!("sqos-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let svg = dir.join("hostile.svg");
    let c = capture();
    sqos(&[
        "plot",
        "--quiet",
        c.to_str().unwrap_or_default(),
        "-o",
        svg.to_str().unwrap_or_default(),
    ]);
    let text = std::fs::read_to_string(&svg).expect("svg written");
    let _ = std::fs::remove_dir_all(&dir);
    assert_inert("svg", &text);
    let mut reader = quick_xml::Reader::from_str(&text);
    let mut shown = String::new();
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Text(t)) => {
                shown.push_str(&t.decode().expect("text"));
                shown.push('\n');
            }
            Ok(_) => {}
            Err(e) => panic!("SVG is not well-formed XML: {e}"),
        }
    }
    assert!(shown.contains(r"vm01\x1b]0;pwned\x07\x1b[2J"), "{shown}");
    assert!(text.contains("&lt;b&gt;&amp;amp;"), "markup escaped");
}

#[test]
fn check_report_and_junit_show_names_escaped() {
    let dir = std::env::temp_dir().join(format!("sqos-hostile-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let rules = dir.join("fail.rules.toml");
    std::fs::write(
        &rules,
        "[[flow_metric]]\nname = \"every flow under 1 IOPS\"\nmetric = \"normalized_iops\"\nmax = 1\n",
    )
    .expect("rules");
    let junit = dir.join("junit.xml");
    let c = capture();
    let out = Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args([
            "check",
            "--quiet",
            c.to_str().unwrap_or_default(),
            "--rules",
            rules.to_str().unwrap_or_default(),
            "--junit",
            junit.to_str().unwrap_or_default(),
        ])
        .output()
        .expect("run sqos check");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert_inert("check", &text);
    assert!(text.contains(r"vm01\x1b]0;pwned\x07\x1b[2J"), "{text}");
    let xml = std::fs::read_to_string(&junit).expect("junit written");
    let _ = std::fs::remove_dir_all(&dir);
    assert_inert("junit", &xml);
    let mut reader = quick_xml::Reader::from_str(&xml);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("JUnit is not well-formed XML: {e}"),
        }
    }
    assert!(xml.contains(r"vm03\u202exdhv.exe"), "{xml}");
}

#[test]
fn tui_screens_show_names_escaped() {
    let started = sqos::tui::start(
        &Input::File(capture()),
        Default::default(),
        DEFAULT_MAX_MESSAGES,
    )
    .expect("start");
    let shared = started.shared.clone();
    started.reader.join().expect("reader ends");
    let live = shared.lock();
    let mut app = App::new(Theme::plain());
    let mut seen = String::new();
    // Flows, then the first flow's detail, then messages (keys as a user presses them).
    for keys in [
        &[][..],
        &[ratatui::crossterm::event::KeyCode::Enter][..],
        &[ratatui::crossterm::event::KeyCode::Char('2')][..],
        &[ratatui::crossterm::event::KeyCode::Char('3')][..],
    ] {
        for k in keys {
            app.on_key(
                ratatui::crossterm::event::KeyEvent::new(
                    *k,
                    ratatui::crossterm::event::KeyModifiers::NONE,
                ),
                &live,
            );
        }
        let mut term = Terminal::new(TestBackend::new(200, 50)).expect("terminal");
        term.draw(|f| draw(f, &mut app, &live)).expect("draw");
        let buf = term.backend().buffer().clone();
        let screen: String = (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
                    + "\n"
            })
            .collect();
        assert_inert("tui", &screen);
        seen.push_str(&screen);
    }
    assert!(seen.contains(r"vm01\x1b]0;pwned"), "{seen}");
    assert!(seen.contains(r"vm03\u202exdhv.exe"), "{seen}");
}
