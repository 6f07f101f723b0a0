//! Rendering tests of `sqos tui` on real captures: each capture is read the way `sqos tui FILE`
//! reads it (`sqos::tui::start`, the reader joined so it runs to the end), every view is drawn
//! into ratatui's TestBackend at 80×24 and 160×48, and the screen is compared with what the
//! library says about the capture: the flows and figures of `sqos flows --format json` (the
//! same analysis, run here), the latest interval of each flow's series (`sqos export --what
//! series`), the SQOS records the pipeline emits, their decoded fields and bytes.

use std::path::{Path, PathBuf};

use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::{Color, Modifier};
use ratatui::Terminal;
use serde_json::Value;

use sqos::analysis::{Analysis, Analyzer};
use sqos::output::flows::{flows_json, series_row_json};
use sqos::output::text::summary_line;
use sqos::pipeline::{PipelineConfig, SqosBody, SqosRecord};
use sqos::run::run_path;
use sqos::sqos::{parse_request, parse_response, Field};
use sqos::tui::app::{App, View};
use sqos::tui::live::{Live, ReadState};
use sqos::tui::source::Input;
use sqos::tui::store::DEFAULT_MAX_MESSAGES;
use sqos::tui::theme::Theme;
use sqos::tui::view::draw;

const STEADY: &str = "captures/steady.pcap.gz";
const NOISY: &str = "captures/noisy-neighbour.pcapng.gz";
const INSUFFICIENT: &str = "captures/insufficient-throughput.pcap.gz";
const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

fn path(rel: &str) -> PathBuf {
    crate::support::repo().join(rel)
}

/// The capture read to its end through the TUI's own start path.
fn load(rel: &str) -> sqos::tui::Started {
    let started = sqos::tui::start(
        &Input::File(PathBuf::from(rel)),
        PipelineConfig::default(),
        DEFAULT_MAX_MESSAGES,
    )
    .unwrap_or_else(|e| panic!("{rel}: {e}"));
    // Relative paths resolve against the package root, where cargo runs the tests.
    assert!(Path::new(rel).exists());
    started
}

fn loaded(rel: &str) -> sqos::tui::live::Shared {
    let s = load(rel);
    let shared = s.shared.clone();
    s.reader.join().expect("the reader thread ends cleanly");
    assert_eq!(shared.lock().tap.progress.state, ReadState::Done, "{rel}");
    shared
}

/// What `sqos flows` computes for the capture, and its JSON.
fn analysis(rel: &str) -> (Analysis, Vec<Value>) {
    let mut analyzer = Analyzer::default();
    run_path(&path(rel), PipelineConfig::default(), &mut analyzer)
        .unwrap_or_else(|e| panic!("{rel}: {e}"));
    let a = analyzer.finish();
    let json = match flows_json(&a) {
        Value::Array(v) => v,
        other => panic!("flows json is not an array: {other}"),
    };
    (a, json)
}

/// The latest update interval of a flow as `sqos export --what series` prints it.
fn latest_interval(a: &Analysis, name: &str) -> Value {
    let f = a
        .flows
        .iter()
        .find(|f| f.initiator_name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no flow {name}"));
    let row = f.series.rows.last().expect("the flow has intervals");
    series_row_json(f.id, f.initiator_name.as_deref(), row)
}

/// A rate as the TUI and `sqos flows` print it: no decimals from 100 up, one below.
fn rate(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
        None => "-".into(),
    }
}

/// A latency in ms, two decimals.
fn ms(v: &Value) -> String {
    v.as_f64().map_or_else(|| "-".into(), |x| format!("{x:.2}"))
}

fn st<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("{key} in {v}"))
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// KB/s: reported by 1.1 clients, else what was seen on the wire.
fn kbps(reported: &Value, observed: &Value) -> String {
    if reported.is_null() {
        rate(observed)
    } else {
        rate(reported)
    }
}

/// The TUI's status label for a `last_status_name`.
fn status(flow: &Value) -> &'static str {
    match flow["last_status_name"].as_str() {
        Some("StorageQoSStatusOk") => "Ok",
        Some("StorageQoSStatusInsufficientThroughput") => "Insufficient",
        other => panic!("status {other:?} not expected in these captures"),
    }
}

/// The Limit/Resv cell: the server policy id (short) or limit/reservation.
fn policy(flow: &Value) -> String {
    let pid = st(flow, "policy_id");
    if pid.chars().all(|c| c == '0' || c == '-') {
        format!("{}/{}", u(flow, "limit"), u(flow, "reservation"))
    } else {
        format!("policy {}", &pid[..8])
    }
}

fn render(app: &mut App, live: &Live, w: u16, h: u16) -> Buffer {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    term.draw(|f| draw(f, app, live)).expect("draw");
    term.backend().buffer().clone()
}

fn rows_of(buf: &Buffer) -> Vec<String> {
    let a = buf.area;
    (0..a.height)
        .map(|y| {
            (0..a.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

fn screen(app: &mut App, live: &Live, w: u16, h: u16) -> Vec<String> {
    rows_of(&render(app, live, w, h))
}

fn key(app: &mut App, live: &Live, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE), live);
}

fn row_with(s: &[String], needle: &str) -> usize {
    s.iter()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{}", s.join("\n")))
}

fn line_with<'a>(s: &'a [String], needle: &str) -> &'a str {
    &s[row_with(s, needle)]
}

/// The cells of a row, split at spaces ("policy 6f2e1a3c" is one cell).
fn words(l: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in l.split_whitespace() {
        match out.last_mut() {
            Some(last)
                if last == "policy" && w.len() == 8 && w.chars().all(|c| c.is_ascii_hexdigit()) =>
            {
                last.push(' ');
                last.push_str(w);
            }
            _ => out.push(w.to_string()),
        }
    }
    out
}

fn shown(s: &[String]) -> String {
    s.join("\n")
}

// ---------------------------------------------------------------------------------------------
// Flows

/// The cells of a flow's row, in the order of the columns the screen has room for.
fn expected_flow_words(a: &Analysis, flow: &Value, wide: bool) -> Vec<String> {
    let name = st(flow, "initiator_name");
    let now = latest_interval(a, name);
    let mut w = vec![
        name.to_string(),
        st(flow, "initiator_node_name").to_string(),
        policy(flow),
    ];
    w.push(format!(
        "{}/{}",
        u(flow, "maximum_io_rate"),
        u(flow, "minimum_io_rate")
    ));
    w.push(rate(&now["normalized_iops"]));
    // At 80 columns the server's answer stays; Seen and KB/s give way.
    if wide {
        w.push(rate(&now["observed_normalized_iops"]));
    }
    w.push(ms(&now["avg_latency_ms"]));
    if wide {
        w.push(kbps(
            &now["kilobytes_per_second"],
            &now["observed_kilobytes_per_second"],
        ));
    }
    if wide {
        // The whole-capture figures, exactly as `sqos flows --format json` has them.
        w.extend([
            rate(&flow["normalized_iops"]),
            ms(&flow["avg_latency_ms"]),
            kbps(
                &flow["kilobytes_per_second"],
                &flow["observed"]["kilobytes_per_second"],
            ),
        ]);
    }
    w.push(status(flow).to_string());
    let n = u(flow, "findings_total");
    w.push(if n == 0 { "-".into() } else { n.to_string() });
    w
}

#[test]
fn flows_view_of_steady_shows_the_flows_and_figures_of_sqos_flows() {
    let shared = loaded(STEADY);
    let live = shared.lock();
    let (a, json) = analysis(STEADY);
    assert_eq!(json.len(), 4, "steady has 4 flows");
    for (w, h) in SIZES {
        let mut app = App::new(Theme::plain());
        let s = screen(&mut app, &live, w, h);
        let wide = w >= 160;
        if wide {
            assert_eq!(
                s[0],
                " sqos  1 Flows   2 Messages   3 Findings  captures/steady.pcap.gz · \
                 done · 11029 frames · 58 SQOS"
            );
        } else {
            // At 80 columns the tabs are shorter and the frame count goes: the file name stays.
            assert_eq!(
                s[0],
                " sqos  1 Flows   2 Msgs   3 Findings  captures/steady.pcap.gz · done · 58 SQOS"
            );
        }
        // The figures say which time they are of.
        let said = if wide {
            " Flows 4 · last interval; avg: whole capture ─"
        } else {
            " Flows 4 · figures of the last interval ─"
        };
        assert!(s[1].starts_with(said), "{}", s[1]);
        // Every column fits at 160; at 80 the averages, Seen and KB/s give way, the server's
        // Max/Min stays, and the node names are whole.
        let header = if wide {
            "Initiator Node                    Limit/Resv Max/Min NIOPS Seen Lat ms KB/s \
             avg NIOPS avg lat avg KB/s Status Find"
        } else {
            "Initiator Node                    Limit/Resv Max/Min NIOPS Lat ms Status Find"
        };
        assert_eq!(s[2], header, "{w}x{h}\n{}", shown(&s));
        // Rows in order of first appearance in the capture.
        let names: Vec<String> = s[3..7].iter().map(|l| words(l)[0].clone()).collect();
        assert_eq!(names, ["vm01", "vm02", "vm03", "vm04"], "{}", shown(&s));
        assert_eq!(s[7], "", "nothing after the 4 flows");
        for flow in &json {
            let name = st(flow, "initiator_name");
            let row = line_with(&s, &format!("{name} "));
            assert_eq!(
                words(row),
                expected_flow_words(&a, flow, wide),
                "{w}x{h} {name}\n{}",
                shown(&s)
            );
        }
        // The node names are not cut.
        assert_eq!(
            s.iter()
                .filter(|l| l.contains(" HV01.contoso.local "))
                .count(),
            2
        );
        assert_eq!(
            s[h as usize - 1],
            " ⏎ detail  m msgs  s/S sort  / filter  Tab view  ? help  q quit"
        );
        assert!(s.iter().all(|l| l.chars().count() <= w as usize));
    }
}

#[test]
fn flows_view_figures_are_those_of_the_exported_series_and_of_sqos_flows() {
    // Independent of the helpers above: vm01 of steady by hand from `sqos flows` and
    // `sqos export --what series` (latest interval: 18.6 NIOPS, 0.41 ms, 128 KB/s;
    // capture: 13.9 NIOPS, 0.40 ms, 93.6 KB/s; limit 120/30, MaximumIoRate 120/30).
    let shared = loaded(STEADY);
    let live = shared.lock();
    let mut app = App::new(Theme::plain());
    let s = screen(&mut app, &live, 160, 48);
    assert_eq!(
        line_with(&s, "vm01 "),
        "vm01      HV01.contoso.local          120/30  120/30  18.6 18.6   0.41  128      13.9    0.40     93.6 Ok        -"
    );
    let s = screen(&mut app, &live, 80, 24);
    assert_eq!(
        line_with(&s, "vm04 "),
        "vm04      HV02.contoso.local            80/0    80/0  21.5   0.42 Ok        -"
    );
}

#[test]
fn flows_view_at_80_columns_drops_columns_before_cutting_names() {
    // Insufficient-throughput: six flows whose status label is 12 wide and latencies of
    // seconds (7 wide); at 80 columns "Seen" and "KB/s" give way, the node names stay whole.
    let shared = loaded(INSUFFICIENT);
    let live = shared.lock();
    let (a, json) = analysis(INSUFFICIENT);
    let mut app = App::new(Theme::plain());
    let s = screen(&mut app, &live, 80, 24);
    assert_eq!(
        s[2],
        "Initiator Node               Limit/Resv Max/Min NIOPS  Lat ms Status       Find",
        "{}",
        shown(&s)
    );
    assert!(
        s[1].starts_with(" Flows 6 · figures of the last interval ─"),
        "{}",
        s[1]
    );
    for flow in &json {
        let name = st(flow, "initiator_name");
        let want = expected_flow_words(&a, flow, false);
        assert_eq!(words(line_with(&s, &format!("{name} "))), want, "{name}");
    }
    // `s` cycles through the columns on screen only: the 6th press sorts by latency.
    for _ in 0..6 {
        key(&mut app, &live, KeyCode::Char('s'));
    }
    let s = screen(&mut app, &live, 80, 24);
    assert!(s[1].starts_with(" Flows 6 · by Lat ms ↓ "), "{}", s[1]);
    let lat: Vec<f64> = s[3..9]
        .iter()
        .map(|l| words(l)[5].parse().expect("a latency"))
        .collect();
    assert!(lat.windows(2).all(|p| p[0] >= p[1]), "{lat:?}");
}

#[test]
fn flows_view_status_and_findings_are_coloured() {
    let shared = loaded(NOISY);
    let live = shared.lock();
    let (_, json) = analysis(NOISY);
    let mut app = App::new(Theme { color: true });
    let buf = render(&mut app, &live, 80, 24);
    let s = rows_of(&buf);
    let vm01 = json
        .iter()
        .find(|f| f["initiator_name"] == "vm01")
        .expect("vm01");
    assert_eq!(u(vm01, "findings_total"), 1);
    let y = row_with(&s, "vm01 ") as u16;
    let row = &s[y as usize];
    // The findings count (last cell) in the error colour, the status in green.
    let x = row.chars().count() as u16 - 1;
    assert_eq!(buf[(x, y)].symbol(), "1");
    assert_eq!(buf[(x, y)].fg, Color::Red);
    let ok_x = row.find(" Ok ").expect("Ok") as u16 + 1;
    assert_eq!(buf[(ok_x, y)].fg, Color::Green);
    let y2 = row_with(&s, "vm02 ") as u16;
    assert_eq!(buf[(x, y2)].symbol(), "-");
    assert_eq!(buf[(x, y2)].fg, Color::Reset);
}

#[test]
fn flows_view_colours_rates_above_the_maximum_io_rate() {
    // A breach stands out: a rate cell above the server's MaximumIoRate is drawn in red.
    let shared = loaded(NOISY);
    let live = shared.lock();
    let (a, json) = analysis(NOISY);
    let mut app = App::new(Theme { color: true });
    let buf = render(&mut app, &live, 160, 48);
    let s = rows_of(&buf);
    let header = &s[2];
    // Figures are right-aligned: a cell ends under its header's last letter.
    let x = (header.find(" NIOPS").expect("NIOPS") + " NIOPS".len() - 1) as u16;
    let mut breaching = 0;
    for flow in &json {
        let name = st(flow, "initiator_name");
        let now = latest_interval(&a, name);
        let max = u(flow, "maximum_io_rate");
        let over = max > 0 && now["normalized_iops"].as_f64().expect("NIOPS") > max as f64;
        let y = row_with(&s, &format!("{name} ")) as u16;
        let want = if over { Color::Red } else { Color::Reset };
        assert_eq!(
            buf[(x, y)].fg,
            want,
            "{name}: {}\n{}",
            s[y as usize],
            shown(&s)
        );
        breaching += usize::from(over);
    }
    assert!(
        breaching > 0,
        "noisy-neighbour has a flow above its maximum"
    );
}

// ---------------------------------------------------------------------------------------------
// Flow detail

fn open_detail(app: &mut App, live: &Live, row: usize) {
    for _ in 0..row {
        key(app, live, KeyCode::Down);
    }
    key(app, live, KeyCode::Enter);
    assert_eq!(app.view, View::Detail);
}

/// The four header lines of the detail of `flow`, from its JSON.
fn expected_detail_header(flow: &Value) -> [String; 4] {
    let mut asked = format!(
        "asked   limit {}  resv {}",
        u(flow, "limit"),
        u(flow, "reservation")
    );
    // 1.0 clients send no BandwidthLimit (null).
    let bw = flow["bandwidth_limit"].as_u64().unwrap_or(0);
    if bw > 0 {
        asked.push_str(&format!("  bw {bw} KB/s"));
    }
    let pid = st(flow, "policy_id");
    if !pid.chars().all(|c| c == '0' || c == '-') {
        asked.push_str(&format!("  policy {}", &pid[..8]));
    }
    asked.push_str(&format!("  v{}", st(flow, "dialect")));
    let mut server = format!(
        "server  {}  max {}  min {}",
        status(flow),
        u(flow, "maximum_io_rate"),
        u(flow, "minimum_io_rate")
    );
    if let Some(mb) = flow["maximum_bandwidth"].as_u64().filter(|b| *b > 0) {
        server.push_str(&format!("  maxbw {mb}"));
    }
    server.push_str(&format!(
        "  base {}  ttl {}ms",
        u(flow, "base_io_size"),
        u(flow, "time_to_live")
    ));
    let avg = format!(
        "average {} NIOPS  seen {}  lat {} ms  {} KB/s",
        rate(&flow["normalized_iops"]),
        rate(&flow["observed"]["normalized_iops"]),
        ms(&flow["avg_latency_ms"]),
        kbps(
            &flow["kilobytes_per_second"],
            &flow["observed"]["kilobytes_per_second"]
        ),
    );
    [
        format!(
            "{} @ {}  flow {}",
            st(flow, "initiator_name"),
            st(flow, "initiator_node_name"),
            st(flow, "logical_flow_id")
        ),
        asked,
        server,
        avg,
    ]
}

/// The Channels tab of a flow on several channels (SMB3 multichannel): one row per channel,
/// as `sqos flows --format json` lists them, with how each joined and ended.
#[test]
fn detail_channels_tab_lists_the_channels_of_a_multichannel_flow() {
    const MULTI: &str = "captures/multichannel.pcap.gz";
    let (_, json) = analysis(MULTI);
    let shared = loaded(MULTI);
    let live = shared.lock();
    // The TUI lists flows in appearance order, `sqos flows` by its own: each detail is
    // matched to its JSON flow by the flow id it shows, and every flow is shown once.
    let mut seen = Vec::new();
    for row in 0..json.len() {
        let mut app = App::new(Theme::plain());
        open_detail(&mut app, &live, row);
        for _ in 0..4 {
            key(&mut app, &live, KeyCode::Right);
        }
        let s = screen(&mut app, &live, 160, 48);
        let flow = json
            .iter()
            .find(|f| s[1].contains(&format!("flow {}  ", st(f, "logical_flow_id"))))
            .unwrap_or_else(|| panic!("row {row}: no JSON flow for {}", s[1]));
        seen.push(st(flow, "logical_flow_id").to_string());
        let chans = flow["channels"].as_array().expect("channels");
        let name = st(flow, "initiator_name");
        assert!(
            s[1].ends_with(&format!(
                "{}  {} channels",
                st(flow, "logical_flow_id"),
                chans.len()
            )),
            "{name}: {}",
            s[1]
        );
        assert!(
            line_with(&s, " Channels (").starts_with(&format!(" Channels ({}) ─", chans.len())),
            "{}",
            shown(&s)
        );
        for c in chans {
            let ends = format!("{} → {}", st(c, "client"), st(c, "server"));
            let ended = match (c["ended_by"].as_str(), c["ended_frame"].as_u64()) {
                (Some(by), Some(f)) => format!("{by} @{f}"),
                _ => "-".into(),
            };
            let mut want = vec![u(c, "first_frame").to_string()];
            want.extend(words(&ends));
            want.extend([
                st(c, "joined").to_string(),
                u(c, "io_count").to_string(),
                u(c, "sqos_requests").to_string(),
            ]);
            want.extend(words(&ended));
            assert_eq!(words(line_with(&s, &ends)), want, "{name}\n{}", shown(&s));
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), json.len(), "{seen:?}");
}

/// Chart glyphs only (no legend text) right of the y axis, on every plot row.
fn assert_plot_has_no_text(s: &[String], top: usize, bottom: usize) {
    for l in &s[top..bottom] {
        let plot: String = l.chars().skip_while(|c| *c != '│').skip(1).collect();
        assert!(
            plot.chars().all(|c| c == ' '
                || c == '•'
                || c == '▀'
                || c == '▄'
                || c == '█'
                || ('\u{2800}'..='\u{28ff}').contains(&c)),
            "text inside the plot: {l:?}\n{}",
            shown(s)
        );
    }
}

#[test]
fn detail_view_shows_what_was_asked_answered_and_the_averages_of_sqos_flows() {
    let shared = loaded(STEADY);
    let live = shared.lock();
    let (_, json) = analysis(STEADY);
    // Rows in appearance order: vm01, vm02, vm03, vm04.
    for (row, name) in ["vm01", "vm02", "vm03", "vm04"].iter().enumerate() {
        let flow = json
            .iter()
            .find(|f| f["initiator_name"] == *name)
            .expect("flow");
        for (w, h) in SIZES {
            let mut app = App::new(Theme::plain());
            open_detail(&mut app, &live, row);
            let s = screen(&mut app, &live, w, h);
            let want = expected_detail_header(flow);
            assert_eq!(&s[1..5], &want[..], "{name} {w}x{h}\n{}", shown(&s));
            assert_eq!(
                s[5],
                " IOPS │ KB/s │ Latency │ Opens │ Channels │ Status │ Findings │"
            );
            assert!(
                s[6].starts_with(&format!(
                    " Normalized IOPS over time ({} intervals) ─",
                    u(flow, "intervals")
                )),
                "{}",
                s[6]
            );
        }
    }
}

#[test]
fn detail_chart_has_its_legend_above_the_plot_never_on_a_line() {
    let shared = loaded(STEADY);
    let live = shared.lock();
    let (a, json) = analysis(STEADY);
    let vm01 = json
        .iter()
        .find(|f| f["initiator_name"] == "vm01")
        .expect("vm01");
    let (max, min) = (u(vm01, "maximum_io_rate"), u(vm01, "minimum_io_rate"));
    // Where vm01's intervals begin and end, in seconds of the capture.
    let rows = &a
        .flows
        .iter()
        .find(|f| f.initiator_name.as_deref() == Some("vm01"))
        .expect("vm01")
        .series
        .rows;
    let start = a.start.expect("a start");
    let (first, last) = (
        rows[0].start.secs_since(start),
        rows[rows.len() - 1].end.secs_since(start),
    );
    assert_eq!(format!("{last:.1}"), "16.9");
    for (w, h) in SIZES {
        let mut app = App::new(Theme::plain());
        open_detail(&mut app, &live, 0);
        let s = screen(&mut app, &live, w, h);
        assert_eq!(
            s[7],
            format!(" ⠒⠒ reported   •• seen   ━━ MaximumIoRate {max}   ━━ MinimumIoRate {min}"),
            "{w}x{h}\n{}",
            shown(&s)
        );
        // y axis: 15 % above the highest line, MaximumIoRate 120 → 138.
        assert!(s[8].starts_with("138 NIOPS│"), "{}", s[8]);
        let axis = row_with(&s, "└──");
        assert_plot_has_no_text(&s, 8, axis);
        // The MaximumIoRate line runs uncovered, in steps, from the first interval's start to
        // the right edge of the plot.
        let top_line = s[9..axis]
            .iter()
            .find(|l| l.contains('▄') || l.contains('▀'))
            .expect("the MaximumIoRate line");
        let plot: String = top_line.chars().skip_while(|c| *c != '│').skip(1).collect();
        assert_eq!(plot.chars().count(), w as usize - 10, "{top_line}");
        let line = plot.trim_start();
        assert!(line.chars().all(|c| c == '▄' || c == '▀'), "{top_line:?}");
        let lead = plot.chars().count() - line.chars().count();
        let want = (first / last * plot.chars().count() as f64).round() as usize;
        assert!(lead.abs_diff(want) <= 2, "{lead} vs {want}: {top_line:?}");
        // The x axis: from the capture's start (as `sqos plot`) to the last interval's end.
        assert!(
            s[axis + 1].trim_start().starts_with("0.0s"),
            "{}",
            s[axis + 1]
        );
        assert!(s[axis + 1].ends_with("16.9s"), "{}", s[axis + 1]);
    }
    // The other charts too.
    for (tab, legend) in [
        (1, " ⠒⠒ KB/s   ━━ MaximumBandwidth 2048"),
        (2, " ⠒⠒ latency ms"),
    ] {
        let mut app = App::new(Theme::plain());
        open_detail(&mut app, &live, 0);
        for _ in 0..tab {
            key(&mut app, &live, KeyCode::Right);
        }
        let s = screen(&mut app, &live, 80, 24);
        assert_eq!(s[7], legend, "{}", shown(&s));
        assert_plot_has_no_text(&s, 8, row_with(&s, "└──"));
    }
}

#[test]
fn detail_chart_of_a_single_interval_shows_its_point_over_the_levels() {
    // A capture started mid-stream: each flow has one whole interval, so one point per
    // series; it is drawn (not hidden under the MinimumIoRate line drawn before it).
    const MIDSTREAM: &str = "captures/steady-midstream.pcap.gz";
    let (_, json) = analysis(MIDSTREAM);
    let flow = &json[0];
    assert_eq!(u(flow, "intervals"), 1);
    let shared = loaded(MIDSTREAM);
    let live = shared.lock();
    for (w, h) in SIZES {
        let mut app = App::new(Theme::plain());
        open_detail(&mut app, &live, 0);
        let s = screen(&mut app, &live, w, h);
        assert!(
            s[6].starts_with(" Normalized IOPS over time (1 interval) ─"),
            "{}",
            shown(&s)
        );
        assert_eq!(
            s[1],
            format!(
                "(no initiator name) @ -  flow {}",
                st(flow, "logical_flow_id")
            )
        );
        let axis = row_with(&s, "└──");
        assert_plot_has_no_text(&s, 8, axis);
        let dots = s[8..axis].iter().filter(|l| l.contains('•')).count();
        assert_eq!(dots, 1, "the seen point\n{}", shown(&s));
    }
}

#[test]
fn detail_lists_show_the_opens_timeline_and_findings_with_their_frames() {
    let (_, steady) = analysis(STEADY);
    let vm01 = steady
        .iter()
        .find(|f| f["initiator_name"] == "vm01")
        .expect("vm01");
    let shared = loaded(STEADY);
    let live = shared.lock();
    // Tall screens: the opens list under the chart.
    let mut app = App::new(Theme::plain());
    open_detail(&mut app, &live, 0);
    let s = screen(&mut app, &live, 160, 48);
    let open = &vm01["opens"][0];
    assert!(line_with(&s, " Opens (1) ").starts_with(" Opens (1) ─"));
    assert_eq!(
        words(line_with(&s, st(open, "file_name"))),
        [
            u(open, "frame").to_string(),
            "0.0s".into(),
            st(open, "file_name").into(),
            "10.0.0.11".into(),
            "-".into()
        ]
    );
    // 80×24: one tab at a time. Status: the policy and the server's answer, with frames.
    let mut app = App::new(Theme::plain());
    open_detail(&mut app, &live, 0);
    for _ in 0..5 {
        key(&mut app, &live, KeyCode::Right);
    }
    let s = screen(&mut app, &live, 80, 24);
    let tl = &vm01["timeline"];
    assert!(
        s[6].starts_with(&format!(
            " Status timeline ({}) ─",
            tl.as_array().map_or(0, Vec::len)
        )),
        "{}",
        s[6]
    );
    assert_eq!(
        words(&s[8]),
        [
            u(&tl[0], "frame").to_string(),
            "0.0s".into(),
            "policy".into(),
            "set:".into(),
            format!("limit={}", u(&tl[0], "limit")),
            format!("resv={}", u(&tl[0], "reservation")),
            format!("bw={}KB/s", u(&tl[0], "bandwidth_limit")),
        ]
    );
    assert_eq!(
        words(&s[9]),
        [
            u(&tl[1], "frame").to_string(),
            "0.0s".into(),
            "Ok".into(),
            format!("max={}", u(&tl[1], "maximum_io_rate")),
            format!("min={}", u(&tl[1], "minimum_io_rate")),
            format!("maxbw={}KB/s", u(&tl[1], "maximum_bandwidth")),
            format!("ttl={}ms", u(&tl[1], "time_to_live")),
        ]
    );
    drop(live);

    // Noisy neighbour: vm01's finding, and Enter goes to its frame.
    let (_, noisy) = analysis(NOISY);
    let f = &noisy
        .iter()
        .find(|f| f["initiator_name"] == "vm01")
        .expect("vm01")["findings"][0];
    let shared = loaded(NOISY);
    let live = shared.lock();
    let mut app = App::new(Theme::plain());
    open_detail(&mut app, &live, 0);
    key(&mut app, &live, KeyCode::Left); // wraps to the last tab: Findings
    let s = screen(&mut app, &live, 80, 24);
    assert!(s[6].starts_with(" Findings (1) ─"), "{}", shown(&s));
    assert_eq!(s[7], "Sev     Frame   Time     Finding");
    let frame = u(f, "frame");
    let row = &s[8];
    assert!(
        row.starts_with(&format!(
            "error   {frame:>7} {:>8} {}: observed",
            "5.0s",
            st(f, "code")
        )),
        "{row}"
    );
    assert!(
        row.ends_with('…'),
        "cut to the screen with an ellipsis: {row}"
    );
    assert_eq!(row.chars().count(), 80);
    key(&mut app, &live, KeyCode::Enter);
    assert_eq!(app.view, View::Messages);
    let s = screen(&mut app, &live, 80, 24);
    assert!(
        line_with(&s, " Fields · frame ").starts_with(&format!(" Fields · frame {frame} request")),
        "{}",
        shown(&s)
    );
}

// ---------------------------------------------------------------------------------------------
// Messages

/// The SQOS records the pipeline emits for the capture, with their fields.
fn records(rel: &str) -> Vec<SqosRecord> {
    crate::support::run(&path(rel)).0.sqos
}

fn fields_of(rec: &SqosRecord) -> Vec<Field> {
    match &rec.body {
        SqosBody::Request(_) => parse_request(&rec.buffer).fields,
        SqosBody::Response(_) => parse_response(&rec.buffer).fields,
        SqosBody::NoBuffer => Vec::new(),
    }
}

/// A list row as drawn: frame, time, (addresses,) the summary after "SQOS ", cut to the screen.
fn expected_msg_row(rec: &SqosRecord, first: sqos::capture::Timestamp, w: usize) -> String {
    let summary = summary_line(rec, first);
    let tail = summary
        .split_once(" SQOS ")
        .map_or(summary.clone(), |(_, t)| t.to_string());
    let t = rec.ts.secs_since(first);
    let (head, room) = if w >= 120 {
        (
            format!(
                "{:>7} {:>9} {:<45} ",
                rec.frame,
                format!("{t:.3}"),
                format!("{} → {}", rec.src, rec.dst)
            ),
            w - 64,
        )
    } else {
        (
            format!("{:>7} {:>9} ", rec.frame, format!("{t:.3}")),
            w - 18,
        )
    };
    let cut = if tail.chars().count() <= room {
        tail
    } else {
        let mut c: String = tail.chars().take(room - 1).collect();
        c.push('…');
        c
    };
    format!("{head}{cut}").trim_end().to_string()
}

#[test]
fn messages_list_shows_the_frames_times_and_summaries_of_the_sqos_records() {
    let recs = records(STEADY);
    assert_eq!(recs.len(), 58);
    let shared = loaded(STEADY);
    let live = shared.lock();
    let first = live.tap.store.start();
    for (w, h) in SIZES {
        let mut app = App::new(Theme::plain());
        key(&mut app, &live, KeyCode::Char('2'));
        let s = screen(&mut app, &live, w, h);
        assert!(s[1].starts_with(" Messages 58 ─"), "{}", s[1]);
        let header = if w >= 120 {
            "  Frame      Time Source → Destination                          Message"
        } else {
            "  Frame      Time Message"
        };
        assert_eq!(s[2], header);
        // The list pane is 40 % of the body: 8 rows at 24 lines, 17 at 48, less its header.
        let n = if h == 24 { 6 } else { 16 };
        for (i, rec) in recs.iter().take(n).enumerate() {
            assert_eq!(
                s[3 + i],
                expected_msg_row(rec, first, w as usize),
                "{w}x{h} row {i}\n{}",
                shown(&s)
            );
        }
        assert_eq!(words(&s[3])[..2], ["14".to_string(), "0.001".to_string()]);
        assert!(
            s[3].contains("SET_LOGICAL_FLOW_ID flow=06608ea2"),
            "{}",
            s[3]
        );
    }
}

/// The screen cells drawn reversed (the selection and the lit field bytes) on row `y`.
fn reversed(buf: &Buffer, y: u16) -> String {
    (0..buf.area.width)
        .filter(|&x| buf[(x, y)].modifier.contains(Modifier::REVERSED))
        .map(|x| buf[(x, y)].symbol().to_string())
        .collect()
}

/// The hex and ASCII of `bytes` as lit in the hex pane: "xx xx" runs, the 8-byte gap kept.
fn lit_text(buf: &[u8], from: usize, to: usize) -> String {
    let mut hex = String::new();
    let mut asc = String::new();
    for (b, &byte) in buf.iter().enumerate().take(to).skip(from) {
        if !hex.is_empty() {
            hex.push(' ');
            if b % 16 == 8 {
                hex.push(' ');
            }
        }
        hex.push_str(&format!("{byte:02x}"));
        asc.push(if byte.is_ascii_graphic() || byte == b' ' {
            byte as char
        } else {
            '.'
        });
    }
    format!("{hex}{asc}")
}

#[test]
fn messages_field_tree_and_hex_light_the_selected_fields_bytes() {
    let recs = records(STEADY);
    let rec = &recs[0];
    assert_eq!(rec.frame, 14);
    let fields = fields_of(rec);
    assert_eq!(fields.len(), 18);
    let shared = loaded(STEADY);
    let live = shared.lock();
    for (w, h) in SIZES {
        let mut app = App::new(Theme { color: true });
        key(&mut app, &live, KeyCode::Char('2'));
        key(&mut app, &live, KeyCode::Right); // to the field tree
                                              // Options (one line of bytes), then LogicalFlowID (16 bytes from 0x0008: two lines).
        for (k, presses) in [(2usize, 2usize), (3, 1)] {
            for _ in 0..presses {
                key(&mut app, &live, KeyCode::Down);
            }
            let fl = &fields[k];
            let buf = render(&mut app, &live, w, h);
            let s = rows_of(&buf);
            assert!(
                s.iter()
                    .any(|l| l.starts_with(" Fields · frame 14 request (18 fields) ─")),
                "{}",
                shown(&s)
            );
            let hex_title = format!(
                " Hex · 128 bytes · {} at 0x{:04x}+{} ─",
                fl.name, fl.offset, fl.len
            );
            assert!(
                s.iter().any(|l| l.starts_with(&hex_title)),
                "{hex_title}\n{}",
                shown(&s)
            );
            // The field's line in the tree is the selection (reverse video), and names the value.
            let tree_y = row_with(&s, &format!("] {}: ", fl.name));
            let tree_line = &s[tree_y];
            assert!(
                tree_line.starts_with(&format!(
                    "    [0x{:04x}+{:<3}] {}: ",
                    fl.offset, fl.len, fl.name
                )),
                "{tree_line}"
            );
            assert_eq!(reversed(&buf, tree_y as u16).trim_end(), tree_line.as_str());
            // Exactly the field's bytes are lit, on each hex line it spans.
            let (lo, hi) = (fl.offset, fl.offset + fl.len);
            for line in lo / 16..=(hi - 1) / 16 {
                let y = row_with(&s, &format!("{:04x}  ", line * 16));
                let from = lo.max(line * 16);
                let to = hi.min(line * 16 + 16);
                assert_eq!(
                    reversed(&buf, y as u16),
                    lit_text(&rec.buffer, from, to),
                    "{} line {line:04x} at {w}x{h}",
                    fl.name
                );
                // Column of the first lit byte's hex digits (hex_dump's layout).
                let j = from % 16;
                let x = 6 + 3 * j + usize::from(j > 7);
                let lit = &buf[(x as u16, y as u16)];
                assert_eq!(
                    lit.symbol(),
                    format!("{:02x}", rec.buffer[from]).get(..1).unwrap()
                );
                assert_eq!(lit.fg, Color::Yellow, "{}", fl.name);
            }
        }
        // Field values as the tree shows them for this request.
        let s = screen(&mut app, &live, w, h);
        let text = shown(&s);
        assert!(
            text.contains("    [0x0000+2  ] ProtocolVersion: 0x0101 (1.1)") || h < 48,
            "{text}"
        );
        assert!(
            text.contains("    [0x0008+16 ] LogicalFlowID: 06608ea2-2224-4ea5-8fa9-8d515d322030"),
            "{text}"
        );
    }
}

#[test]
fn messages_request_response_jump_shows_the_response_fields() {
    let recs = records(STEADY);
    // The first response carrying a status: frame 17, id 8, vm01's SET_POLICY|GET_STATUS.
    let resp = recs
        .iter()
        .find(|r| matches!(&r.body, SqosBody::Response(d) if d.message.is_some()))
        .expect("a response with a buffer");
    let req_frame = resp.request_frame.expect("its request");
    let shared = loaded(STEADY);
    let live = shared.lock();
    let mut app = App::new(Theme::plain());
    key(&mut app, &live, KeyCode::Char('2'));
    // Select the request (first message of its frame with the same id), then jump.
    let pos = recs
        .iter()
        .position(|r| r.frame == req_frame && r.msg_id == resp.msg_id)
        .expect("the request");
    for _ in 0..pos {
        key(&mut app, &live, KeyCode::Down);
    }
    let s = screen(&mut app, &live, 80, 24);
    assert!(line_with(&s, " Fields · frame ")
        .starts_with(&format!(" Fields · frame {req_frame} request")));
    key(&mut app, &live, KeyCode::Char('p'));
    let s = screen(&mut app, &live, 160, 48);
    let n = fields_of(resp).len();
    assert!(
        line_with(&s, " Fields · frame ").starts_with(&format!(
            " Fields · frame {} response ({n} fields) ─",
            resp.frame
        )),
        "{}",
        shown(&s)
    );
    let text = shown(&s);
    assert!(
        text.contains("STORAGE_QOS_CONTROL_RESPONSE (96 bytes)"),
        "{text}"
    );
    assert!(
        text.contains("] Status: 0 (StorageQoSStatusOk)") || text.contains("] Status: 0x00000000"),
        "{text}"
    );
    assert!(text.contains("] MaximumIoRate: 120"), "{text}");
    assert!(text.contains("] MinimumIoRate: 30"), "{text}");
    assert!(text.contains("] BaseIoSize: 8192"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Findings and help

#[test]
fn findings_view_of_noisy_neighbour_lists_each_finding_and_jumps_to_its_frame() {
    let (_, json) = analysis(NOISY);
    let total: u64 = json.iter().map(|f| u(f, "findings_total")).sum();
    assert_eq!(total, 1);
    let f = &json
        .iter()
        .find(|f| f["initiator_name"] == "vm01")
        .expect("vm01")["findings"][0];
    let frame = u(f, "frame");
    let shared = loaded(NOISY);
    let live = shared.lock();
    for (w, h) in SIZES {
        let mut app = App::new(Theme::plain());
        key(&mut app, &live, KeyCode::Char('3'));
        let s = screen(&mut app, &live, w, h);
        assert!(s[1].starts_with(" Findings 1 · 1 error ─"), "{}", shown(&s));
        let (header, start) = if w >= 160 {
            (
                "Sev     Frame   Time     Flow             Code                         Finding",
                format!(
                    "error   {frame:>7} {:>8} vm01             {:<28} observed 88.2 normalized IOPS",
                    "5.0s",
                    st(f, "code")
                ),
            )
        } else {
            (
                "Sev     Frame   Time     Flow       Finding",
                format!(
                    "error   {frame:>7} {:>8} vm01       {}: observed",
                    "5.0s",
                    st(f, "code")
                ),
            )
        };
        assert_eq!(s[2], header);
        assert!(s[3].starts_with(&start), "{w}x{h}: {}", s[3]);
        assert_eq!(s[4], "");
        // The list cuts long messages; the pane under it has the selected one in full.
        let pane = row_with(&s, " Selected ─");
        assert_eq!(pane, h as usize - 5, "{}", shown(&s));
        let full: Vec<&str> = s[pane + 1..h as usize - 1]
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(
            full.join(" "),
            format!(
                "error {} · frame {frame} · {} (×{})",
                st(f, "code"),
                st(f, "message"),
                u(f, "occurrences")
            )
        );
        key(&mut app, &live, KeyCode::Enter);
        assert_eq!(app.view, View::Messages);
        let s = screen(&mut app, &live, w, h);
        assert!(
            line_with(&s, " Fields · frame ")
                .starts_with(&format!(" Fields · frame {frame} request")),
            "{}",
            shown(&s)
        );
    }
}

#[test]
fn help_shows_every_key_whole_at_both_sizes() {
    let shared = loaded(STEADY);
    let live = shared.lock();
    for (w, h) in SIZES {
        let mut app = App::new(Theme::plain());
        key(&mut app, &live, KeyCode::Char('?'));
        let s = screen(&mut app, &live, w, h);
        let top = row_with(&s, "┌ sqos tui keys ");
        let left = s[top].chars().position(|c| c == '┌').expect("corner");
        let right = s[top].chars().position(|c| c == '┐').expect("corner");
        for (i, (k, what)) in sqos::tui::view::KEYS.iter().enumerate() {
            let l: String = s[top + 1 + i]
                .chars()
                .skip(left)
                .take(right + 1 - left)
                .collect();
            assert!(
                l.starts_with(&format!("│ {k:<18}{what}")) && l.trim_end().ends_with('│'),
                "{w}x{h}: {l:?}"
            );
        }
        let bottom = top + sqos::tui::view::KEYS.len() + 3;
        assert!(
            s[bottom]
                .chars()
                .skip(left)
                .collect::<String>()
                .starts_with('└'),
            "{}",
            shown(&s)
        );
        key(&mut app, &live, KeyCode::Char('x'));
        assert!(!app.help);
    }
}

// ---------------------------------------------------------------------------------------------
// README

/// The README shows the Flows view of steady as rendered at 100×10 and the help's key list;
/// both are compared with the real thing so they cannot drift.
#[test]
fn readme_flows_screenshot_and_key_list_are_current() {
    let readme = std::fs::read_to_string(path("README.md")).expect("README.md");
    let shared = loaded(STEADY);
    let live = shared.lock();
    let mut app = App::new(Theme::plain());
    let s = screen(&mut app, &live, 100, 10);
    let want = format!("```\n{}\n```", s.join("\n"));
    let block = readme
        .split("<!-- tui-flows: rendered by tests/tui_render_captures.rs -->\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```\n").next())
        .map(|b| format!("{b}\n```"))
        .expect("the marked screenshot block in README.md");
    assert_eq!(
        block, want,
        "README screenshot is stale; the current render:\n{want}"
    );

    let keys = readme
        .split(
            "<!-- tui-keys: the help screen's list, checked by tests/tui_render_captures.rs -->\n",
        )
        .nth(1)
        .expect("the marked key table in README.md");
    let rows: Vec<&str> = keys
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let want: Vec<String> = sqos::tui::view::KEYS
        .iter()
        .map(|(k, what)| format!("| `{k}` | {what} |"))
        .collect();
    assert_eq!(rows, want);
}

#[test]
fn follow_on_a_finished_file_settles_on_its_last_interval() {
    // policy-change, as issue 15 found it: under --follow each flow was one update interval
    // behind `sqos tui FILE` (vm01 15.8 NIOPS / 242 ms instead of 14.6 / 875 ms), because the
    // input never ends. Once it has been idle a moment the views show what the end would.
    use sqos::tui::live::IdleWatch;
    use std::io::Read;
    use std::time::{Duration, Instant};
    let rel = "captures/policy-change.pcap.gz";
    let file = loaded(rel);
    let (want, frames) = {
        let live = file.lock();
        (live.analysis.rows(), live.tap.progress.frames)
    };
    // --follow reads a capture still being written (uncompressed); here one already complete.
    let mut pcap = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path(rel)).expect("open"))
        .read_to_end(&mut pcap)
        .expect("gunzip");
    let scratch = crate::support::scratch("sqos-follow-");
    let dir = scratch.path().to_path_buf();
    let copy = dir.join("policy-change.pcap");
    std::fs::write(&copy, &pcap).expect("write the copy");
    let mut started = sqos::tui::start(
        &Input::Follow(copy.clone()),
        PipelineConfig::default(),
        DEFAULT_MAX_MESSAGES,
    )
    .expect("follow");
    let deadline = Instant::now() + Duration::from_secs(120);
    while started.shared.lock().tap.progress.frames < frames {
        assert!(
            Instant::now() < deadline,
            "the follower never read the whole file"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    {
        let mut live = started.shared.lock();
        assert_eq!(
            live.tap.progress.state,
            ReadState::Reading,
            "following, not ended"
        );
        let vm01 = |rows: &[sqos::tui::model::FlowRow]| {
            rows.iter()
                .find(|r| r.initiator == "vm01")
                .map(|r| (r.reported_iops, r.latency_ms))
        };
        let before = live.analysis.rows();
        assert_ne!(
            vm01(&before),
            vm01(&want),
            "the last interval is still open"
        );
        let mut idle = IdleWatch::new(Duration::ZERO);
        idle.tick(&mut live);
        idle.tick(&mut live);
        let after = live.analysis.rows();
        assert_eq!(after, want);
        let (iops, lat) = vm01(&after).expect("vm01");
        assert_eq!(
            (
                format!("{:.1}", iops.unwrap()),
                format!("{:.0}", lat.unwrap())
            ),
            ("14.6".to_string(), "875".to_string())
        );
    }
    started.stop();
    let _ = started.reader.join();
}

/// Encrypted sessions left closed are said in the TUI as the other commands say them on
/// stderr: short in the title bar (with the `--keys` hint), the full sentence naming the
/// session in the Findings view; with the key file, nothing is said.
#[test]
fn encrypted_sessions_left_closed_are_said_in_the_title_bar_and_findings() {
    const ENCRYPTED: &str = "captures/real/smb311-encrypted.pcap";
    let live = loaded(ENCRYPTED);
    let live = live.lock();
    for (w, h) in SIZES {
        let mut app = App::new(Theme::plain());
        let s = screen(&mut app, &live, w, h);
        assert!(
            s[0].contains("22 encrypted closed (--keys)"),
            "{w}x{h}: {}",
            s[0]
        );
        key(&mut app, &live, KeyCode::Char('3'));
        let s = screen(&mut app, &live, w, h).join(" ");
        let flat = words(&s).join(" ");
        assert!(
            flat.contains("22 encrypted SMB3 messages not decrypted: session 0x00000000e08f4391"),
            "{w}x{h}: {flat}"
        );
    }
    drop(live);
    // With the keys: decrypted, nothing said.
    let started = sqos::tui::start(
        &Input::File(PathBuf::from(ENCRYPTED)),
        crate::support::with_keys(&[&crate::support::real_keys()]),
        DEFAULT_MAX_MESSAGES,
    )
    .expect("start");
    let shared = started.shared.clone();
    started.reader.join().expect("reader");
    let live = shared.lock();
    assert_eq!(live.tap.stats.undecrypted(), 0);
    assert!(live.tap.stats.decrypted_messages > 0);
    let mut app = App::new(Theme::plain());
    let s = screen(&mut app, &live, 160, 48);
    assert!(!s[0].contains("encrypted closed"), "{}", s[0]);
    key(&mut app, &live, KeyCode::Char('3'));
    assert!(!screen(&mut app, &live, 160, 48)
        .join(" ")
        .contains("not decrypted"));
}
