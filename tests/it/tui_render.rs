//! Rendering tests of `sqos tui`'s views with ratatui's TestBackend, at 80×24 and 160×48, on a
//! known set of records built in code (two flows, one of them short of throughput, and one
//! undecodable message): the flows, numbers and statuses actually shown. The same views drawn
//! from real captures, against the library's figures: tests/tui_render_captures.rs.

use std::net::SocketAddr;

use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use uuid::Uuid;

use sqos::capture::Timestamp;
use sqos::net::ConnId;
use sqos::pipeline::{Direction, FileId, RecordSink, SqosBody, SqosRecord};
use sqos::run::CaptureSink;
use sqos::sqos::{
    encode_request, encode_response, parse_request, parse_response, Dialect, Options, Request,
    RequestV11, Response, Status,
};
use sqos::tui::app::{App, View};
use sqos::tui::live::Live;
use sqos::tui::store::MessageStore;
use sqos::tui::theme::Theme;
use sqos::tui::view::draw;

const START: i64 = 1_700_000_000;
const FLOW_A: Uuid = Uuid::from_u128(0xa1a1a1a1_0000_4000_8000_00000000000a);
const FLOW_B: Uuid = Uuid::from_u128(0xb2b2b2b2_0000_4000_8000_00000000000b);

fn ts(secs: f64) -> Timestamp {
    Timestamp(START * 1_000_000_000 + (secs * 1e9) as i64)
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

struct Conn {
    id: u32,
    client: &'static str,
    file: u64,
    file_name: &'static str,
}

/// A request and its response `frame`/`frame + 1`, 1 ms apart, both fully decoded.
fn exchange(
    c: &Conn,
    frame: u64,
    t: f64,
    msg_id: u64,
    req: Request,
    resp: Response,
) -> [SqosRecord; 2] {
    let base = |frame, t, direction| SqosRecord {
        frame,
        ts: ts(t),
        conn: ConnId(c.id),
        src: addr(c.client),
        dst: addr("10.0.0.100:445"),
        direction,
        msg_id,
        session_id: 0x1000 + u64::from(c.id),
        replay: false,
        channel_sequence: None,
        tree_id: Some(1),
        async_id: None,
        file_id: Some(FileId {
            persistent: c.file,
            volatile: c.file,
        }),
        file_name: Some(c.file_name.to_string()),
        nt_status: None,
        interim: false,
        request_frame: None,
        response_frame: None,
        response_time: Some(0.001),
        max_output_response: None,
        buffer: Vec::new(),
        buffer_truncated: false,
        body: SqosBody::NoBuffer,
        first_frame: None,
        frame_copy: None,
    };
    let mut q = base(frame, t, Direction::Request);
    q.buffer = encode_request(&req);
    q.body = SqosBody::Request(parse_request(&q.buffer));
    q.response_frame = Some(frame + 1);
    q.max_output_response = Some(96);
    let mut r = base(frame + 1, t + 0.001, Direction::Response);
    std::mem::swap(&mut r.src, &mut r.dst);
    r.buffer = encode_response(&resp);
    r.body = SqosBody::Response(parse_response(&r.buffer));
    r.nt_status = Some(0);
    r.request_frame = Some(frame);
    [q, r]
}

struct FlowSpec {
    conn: Conn,
    id: Uuid,
    dialect: Dialect,
    name: &'static str,
    node: &'static str,
    limit: u64,
    reservation: u64,
    status: Status,
    /// IOs reported per 1-second interval and their latency in 100 ns units each.
    io: u64,
    latency_each: u64,
}

fn flow_records(f: &FlowSpec, first_frame: u64) -> Vec<SqosRecord> {
    let mut out = Vec::new();
    let mut resp = Response::new(f.dialect);
    resp.logical_flow_id = f.id;
    resp.initiator_id = Uuid::from_u128(0x1111);
    resp.status = f.status;
    resp.maximum_io_rate = f.limit;
    resp.minimum_io_rate = f.reservation;
    resp.time_to_live = 1000;
    if f.dialect == Dialect::V1_1 {
        resp.maximum_bandwidth = Some(10_000);
    }
    let mut set = Request::new(f.dialect).with_names(f.name, f.node);
    set.options = Options::SET_LOGICAL_FLOW_ID | Options::SET_POLICY;
    set.logical_flow_id = f.id;
    set.initiator_id = Uuid::from_u128(0x1111);
    set.limit = f.limit;
    set.reservation = f.reservation;
    if let Some(v) = set.v1_1.as_mut() {
        v.bandwidth_limit = 10_000;
    }
    out.extend(exchange(&f.conn, first_frame, 0.1, 1, set, resp.clone()));
    for k in 1..=4u64 {
        let mut u = Request::new(f.dialect);
        u.options = Options::UPDATE_COUNTERS | Options::GET_STATUS;
        u.logical_flow_id = f.id;
        u.io_count_increment = f.io;
        u.normalized_io_count_increment = f.io;
        u.latency_increment = f.io * f.latency_each;
        u.lower_latency_increment = f.io * f.latency_each / 2;
        if let Some(v) = u.v1_1.as_mut() {
            *v = RequestV11 {
                bandwidth_limit: 10_000,
                kilobyte_count_increment: f.io * 8,
            };
        }
        out.extend(exchange(
            &f.conn,
            first_frame + 2 * k,
            k as f64,
            1 + k,
            u,
            resp.clone(),
        ));
    }
    out
}

fn flow_a() -> FlowSpec {
    FlowSpec {
        conn: Conn {
            id: 0,
            client: "10.0.0.1:50001",
            file: 1,
            file_name: "vms\\vm01\\disk0.vhdx",
        },
        id: FLOW_A,
        dialect: Dialect::V1_1,
        name: "vm01",
        node: "hv01",
        limit: 500,
        reservation: 100,
        status: Status::OK,
        io: 480,
        latency_each: 12_000,
    }
}

fn flow_b() -> FlowSpec {
    FlowSpec {
        conn: Conn {
            id: 1,
            client: "10.0.0.2:50002",
            file: 2,
            file_name: "vms\\vm02\\disk0.vhdx",
        },
        id: FLOW_B,
        dialect: Dialect::V1_0,
        name: "vm02",
        node: "hv02",
        limit: 200,
        reservation: 50,
        status: Status::INSUFFICIENT_THROUGHPUT,
        io: 150,
        latency_each: 50_000,
    }
}

/// Two flows interleaved in frame order, then a 16-byte request the codec cannot decode.
fn known_live() -> Live {
    let mut recs = flow_records(&flow_a(), 10);
    recs.extend(flow_records(&flow_b(), 100));
    // Interleave by time as a capture would.
    recs.sort_by_key(|r| (r.ts, r.frame));
    let mut live = Live::new(
        "known.pcap".into(),
        MessageStore::new(1000),
        sqos::tui::flow_source(),
    );
    live.on_first_frame(ts(0.0));
    for r in recs {
        live.on_sqos(r);
    }
    let c = flow_b().conn;
    let [mut short, _] = exchange(
        &c,
        200,
        4.5,
        99,
        Request::new(Dialect::V1_0),
        Response::new(Dialect::V1_0),
    );
    short.buffer.truncate(16);
    short.body = SqosBody::Request(parse_request(&short.buffer));
    short.response_frame = None;
    live.on_sqos(short);
    live.analysis.finish();
    live.tap.progress.frames = 201;
    live.tap.progress.state = sqos::tui::live::ReadState::Done;
    live
}

fn screen(app: &mut App, live: &Live, w: u16, h: u16) -> Vec<String> {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| draw(f, app, live)).unwrap();
    let buf = term.backend().buffer().clone();
    (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

fn key(app: &mut App, live: &Live, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE), live);
}

fn line_with<'a>(s: &'a [String], needle: &str) -> &'a str {
    s.iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{}", s.join("\n")))
}

fn words(l: &str) -> Vec<&str> {
    l.split_whitespace().collect()
}

#[test]
fn flows_view_shows_each_flow_with_its_numbers_and_status() {
    let live = known_live();
    for (w, h) in [(80, 24), (160, 48)] {
        let mut app = App::new(Theme::plain());
        let s = screen(&mut app, &live, w, h);
        assert!(s[0].contains("1 Flows"), "{}", s[0]);
        assert!(s[0].contains("done · 201 frames · 21 SQOS"), "{}", s[0]);
        assert!(line_with(&s, "Flows 2").contains("Flows 2"));
        let header = line_with(&s, "Initiator");
        for col in [
            "Node",
            "Limit/Resv",
            "Max/Min",
            "IOPS",
            "Seen",
            "Lat ms",
            "KB/s",
            "Status",
            "Find",
        ] {
            assert!(header.contains(col), "{w}x{h}: {header}");
        }
        // Wide screens add the whole-capture averages (the same here: every interval alike).
        let wide = w >= 160;
        // vm01: limit 500/100, the server's 500/100, 480 IOPS, 1.20 ms, 3840 KB/s, Ok.
        let mut want = vec![
            "vm01", "hv01", "500/100", "500/100", "480", "0.0", "1.20", "3840",
        ];
        if wide {
            want.extend(["480", "1.20", "3840"]);
        }
        want.extend(["Ok", "1"]);
        assert_eq!(words(line_with(&s, "vm01")), want, "{w}x{h}");
        // vm02: 1.0 client (no KB reported; 0 KB/s seen), InsufficientThroughput. No READ or
        // WRITE is in the records, so each flow has a counters-mismatch finding; vm02 also one
        // for its status.
        let mut want = vec![
            "vm02", "hv02", "200/50", "200/50", "150", "0.0", "5.00", "0.0",
        ];
        if wide {
            want.extend(["150", "5.00", "0.0"]);
        }
        want.extend(["Insufficient", "2"]);
        assert_eq!(words(line_with(&s, "vm02")), want, "{w}x{h}");
        let bar = s.last().unwrap();
        assert!(bar.contains("q quit"), "{bar}");
        assert!(bar.contains("? help"), "{bar}");
        assert!(
            s.iter().all(|l| l.chars().count() <= w as usize),
            "nothing drawn past the edge"
        );
    }
}

#[test]
fn flows_sort_by_iops_and_filter_by_typing() {
    let live = known_live();
    let mut app = App::new(Theme::plain());
    // s cycles: Initiator, Node, Limit/Resv, Max/Min, IOPS.
    for _ in 0..5 {
        key(&mut app, &live, KeyCode::Char('s'));
    }
    let s = screen(&mut app, &live, 80, 24);
    assert!(line_with(&s, "Flows 2").contains("by NIOPS ↓"));
    let a = s.iter().position(|l| l.contains("vm01")).unwrap();
    let b = s.iter().position(|l| l.contains("vm02")).unwrap();
    assert!(a < b, "480 IOPS before 150 IOPS");
    key(&mut app, &live, KeyCode::Char('S'));
    let s = screen(&mut app, &live, 80, 24);
    let a = s.iter().position(|l| l.contains("vm01")).unwrap();
    let b = s.iter().position(|l| l.contains("vm02")).unwrap();
    assert!(b < a, "reversed: 150 before 480");
    key(&mut app, &live, KeyCode::Char('/'));
    for c in "insuff".chars() {
        key(&mut app, &live, KeyCode::Char(c));
    }
    let s = screen(&mut app, &live, 80, 24);
    assert!(
        s.last().unwrap().contains("filter: insuff"),
        "{:?}",
        s.last()
    );
    assert!(line_with(&s, "Flows 1 of 2").contains("filter \"insuff\""));
    assert!(s.iter().any(|l| l.contains("vm02")));
    assert!(!s.iter().any(|l| l.contains("vm01")));
    key(&mut app, &live, KeyCode::Esc);
    let s = screen(&mut app, &live, 80, 24);
    assert!(s.iter().any(|l| l.contains("vm01")));
}

#[test]
fn detail_view_shows_limits_server_answer_and_iops_chart() {
    let live = known_live();
    for (w, h) in [(80, 24), (160, 48)] {
        let mut app = App::new(Theme::plain());
        key(&mut app, &live, KeyCode::Enter);
        assert_eq!(app.view, View::Detail);
        let s = screen(&mut app, &live, w, h);
        let text = s.join("\n");
        assert!(
            line_with(&s, "vm01 @ hv01").contains(&FLOW_A.to_string()),
            "{text}"
        );
        assert!(
            line_with(&s, "asked").contains("limit 500  resv 100  bw 10000 KB/s"),
            "{text}"
        );
        assert!(
            line_with(&s, "server").contains("Ok  max 500  min 100  maxbw 10000"),
            "{text}"
        );
        assert!(line_with(&s, "average").contains("480 NIOPS"), "{text}");
        assert!(line_with(&s, "average").contains("lat 1.20 ms"), "{text}");
        assert!(line_with(&s, "average").contains("3840 KB/s"), "{text}");
        assert!(
            line_with(&s, "Normalized IOPS over time").contains("(3 intervals)"),
            "{text}"
        );
        // y axis: 15% above the highest line (max 500).
        assert!(text.contains("575 NIOPS"), "{text}");
        assert!(text.contains("MaximumIoRate"), "{text}");
        assert!(text.contains("MinimumIoRate"), "{text}");
        if h >= 48 {
            // Tall: the opens list is shown under the chart.
            assert!(line_with(&s, "Opens (1)").contains("Opens"), "{text}");
            assert!(line_with(&s, "disk0.vhdx").contains("10.0.0.1"), "{text}");
        }
    }
}

#[test]
fn detail_tabs_show_latency_opens_and_status_timeline() {
    let live = known_live();
    let mut app = App::new(Theme::plain());
    key(&mut app, &live, KeyCode::Down); // vm02
    key(&mut app, &live, KeyCode::Enter);
    key(&mut app, &live, KeyCode::Right);
    let s = screen(&mut app, &live, 80, 24);
    // A 1.0 client reports no kilobytes: the chart shows what was seen on the wire.
    assert!(line_with(&s, "Bandwidth over time").contains("(3 intervals)"));
    assert!(s.join("\n").contains("KB/s"));
    key(&mut app, &live, KeyCode::Right);
    let s = screen(&mut app, &live, 80, 24);
    assert!(line_with(&s, "Latency over time").contains("3 intervals"));
    assert!(s.join("\n").contains("latency ms"));
    key(&mut app, &live, KeyCode::Right);
    let s = screen(&mut app, &live, 80, 24);
    let open = words(line_with(&s, "vm02\\disk0.vhdx"));
    assert_eq!(
        open,
        ["101", "0.1s", "vms\\vm02\\disk0.vhdx", "10.0.0.2", "-"]
    );
    // Channels: the one connection its messages went over (no channel record here: its
    // number stands for the addresses), from its first SQOS request (frame 100), with its 5
    // requests (SET_POLICY and 4 UPDATE_COUNTERS).
    key(&mut app, &live, KeyCode::Right);
    let s = screen(&mut app, &live, 80, 24);
    assert!(line_with(&s, " Channels (1) ").starts_with(" Channels (1) ─"));
    assert_eq!(
        words(line_with(&s, "connection ")),
        ["100", "connection", "1", "-", "0", "5", "-"]
    );
    key(&mut app, &live, KeyCode::Right);
    let s = screen(&mut app, &live, 80, 24);
    assert_eq!(
        words(line_with(&s, "Insufficient max=200")),
        [
            "103",
            "1.0s",
            "Insufficient",
            "max=200",
            "min=50",
            "ttl=1000ms"
        ]
    );
    assert_eq!(
        words(line_with(&s, "policy set:")),
        ["101", "0.1s", "policy", "set:", "limit=200", "resv=50"]
    );
    // Enter on the policy change (the first row) goes to its frame in the Messages view.
    key(&mut app, &live, KeyCode::Enter);
    assert_eq!(app.view, View::Messages);
    let s = screen(&mut app, &live, 80, 24);
    assert!(line_with(&s, "Fields · frame 101 response").contains("fields"));
}

#[test]
fn messages_view_has_list_tree_and_hex_with_the_field_lit() {
    let live = known_live();
    for (w, h) in [(80, 24), (160, 48)] {
        let mut app = App::new(Theme::plain());
        key(&mut app, &live, KeyCode::Char('2'));
        let s = screen(&mut app, &live, w, h);
        let text = s.join("\n");
        assert!(line_with(&s, "Messages 21").contains("Messages"), "{text}");
        let first = words(line_with(&s, "SET_LOGICAL_FLOW_ID|SET_POLICY"));
        assert_eq!(&first[..2], ["10", "0.100"], "{text}");
        assert!(first.contains(&"Request"), "{text}");
        if w >= 160 {
            assert!(line_with(&s, "SET_LOGICAL_FLOW_ID|SET_POLICY")
                .contains("10.0.0.1:50001 → 10.0.0.100:445"));
        }
        assert!(
            line_with(&s, "Fields · frame 10 request").contains("fields"),
            "{text}"
        );
        assert!(text.contains("STORAGE_QOS_CONTROL_REQUEST"), "{text}");
        assert!(line_with(&s, "Hex · ").contains("bytes"), "{text}");
        // The first line of the buffer: version 0x0101, options 0x03.
        assert!(text.contains("0000  01 01 00 00 03 00 00 00"), "{text}");
    }
    // Move into the tree, select the Options field: the hex title names it.
    let mut app = App::new(Theme::plain());
    key(&mut app, &live, KeyCode::Char('2'));
    key(&mut app, &live, KeyCode::Right);
    key(&mut app, &live, KeyCode::Down);
    key(&mut app, &live, KeyCode::Down);
    let s = screen(&mut app, &live, 80, 24);
    let hex_title = line_with(&s, "Hex · ");
    assert!(hex_title.contains("at 0x0004+4"), "{hex_title}");
}

#[test]
fn request_response_jump_and_the_field_lit_in_hex() {
    let live = known_live();
    let mut app = App::new(Theme { color: true });
    key(&mut app, &live, KeyCode::Char('2'));
    key(&mut app, &live, KeyCode::Char('p'));
    let s = screen(&mut app, &live, 80, 24);
    assert!(line_with(&s, "Fields · frame 11 response").contains("fields"));
    key(&mut app, &live, KeyCode::Char('p'));
    let s = screen(&mut app, &live, 80, 24);
    assert!(line_with(&s, "Fields · frame 10 request").contains("fields"));
    // Options (0x0004+4) selected in the tree: exactly its bytes are lit in the hex pane.
    key(&mut app, &live, KeyCode::Right);
    key(&mut app, &live, KeyCode::Down);
    key(&mut app, &live, KeyCode::Down);
    let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
    term.draw(|f| draw(f, &mut app, &live)).unwrap();
    let buf = term.backend().buffer().clone();
    let y = (0..24u16)
        .find(|&y| {
            (0..80u16)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                .starts_with("0000  01 01 00 00 03")
        })
        .expect("first hex line");
    let lit: String = (0..80u16)
        .filter(|&x| {
            buf[(x, y)]
                .modifier
                .contains(ratatui::style::Modifier::REVERSED)
        })
        .map(|x| buf[(x, y)].symbol().to_string())
        .collect();
    // Hex "03 00 00 00" (with the spaces between) and its 4 ASCII characters.
    assert_eq!(lit, "03 00 00 00....");
}

#[test]
fn findings_view_lists_the_short_buffer_and_jumps_to_it() {
    let live = known_live();
    for (w, h) in [(80, 24), (160, 48)] {
        let mut app = App::new(Theme::plain());
        key(&mut app, &live, KeyCode::Char('3'));
        let s = screen(&mut app, &live, w, h);
        let text = s.join("\n");
        let row = line_with(&s, "sqos.short_buffer");
        assert!(row.contains("200"), "{text}");
        assert!(row.contains("4.5s"), "{text}");
        key(&mut app, &live, KeyCode::Enter);
        assert_eq!(app.view, View::Messages);
        let s = screen(&mut app, &live, w, h);
        assert!(line_with(&s, "Fields · frame 200 request").contains("fields"));
        assert!(s.join("\n").contains("(undecodable)"));
    }
}

#[test]
fn help_lists_the_keys() {
    let live = known_live();
    let mut app = App::new(Theme::plain());
    key(&mut app, &live, KeyCode::Char('?'));
    let s = screen(&mut app, &live, 80, 24);
    let text = s.join("\n");
    for k in ["j k", "Enter", "req", "filter", "quit", "sort"] {
        assert!(text.contains(k), "{k}: {text}");
    }
    key(&mut app, &live, KeyCode::Char('x'));
    assert!(!app.help);
}

#[test]
fn mouse_clicks_sort_select_and_open_and_the_wheel_scrolls() {
    use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let live = known_live();
    let mut app = App::new(Theme::plain());
    let mouse = |kind, column, row| MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    };
    let click = |x, y| mouse(MouseEventKind::Down(MouseButton::Left), x, y);
    let s = screen(&mut app, &live, 80, 24);
    let header_y = s.iter().position(|l| l.contains("Initiator")).unwrap() as u16;
    let iops_x = s[header_y as usize].find("IOPS").unwrap() as u16;
    app.on_mouse(click(iops_x, header_y), &live);
    assert_eq!(app.sort.col, Some(sqos::tui::lists::FlowCol::Iops));
    let s = screen(&mut app, &live, 80, 24);
    assert!(line_with(&s, "Flows 2").contains("by NIOPS ↓"));
    let vm02_y = s.iter().position(|l| l.contains("vm02")).unwrap() as u16;
    app.on_mouse(click(3, vm02_y), &live);
    assert_eq!(app.view, View::Flows, "first click selects");
    app.on_mouse(click(3, vm02_y), &live);
    assert_eq!(app.view, View::Detail, "second click opens");
    let s = screen(&mut app, &live, 80, 24);
    assert!(line_with(&s, "vm02 @ hv02").contains("b2b2b2b2"));
    // The title bar's "2 Msgs" (80 columns) switches view; the wheel moves the selection by 3.
    let x = s[0].find("2 Msgs").unwrap() as u16;
    app.on_mouse(click(x, 0), &live);
    assert_eq!(app.view, View::Messages);
    let _ = screen(&mut app, &live, 80, 24);
    app.on_mouse(mouse(MouseEventKind::ScrollDown, 10, 4), &live);
    let s = screen(&mut app, &live, 80, 24);
    // Fourth message in frame order: frame 101 (vm02's first response).
    assert!(line_with(&s, "Fields · frame 101 response").contains("fields"));
}
