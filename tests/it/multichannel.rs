//! SMB3 multichannel and share names (issue 13, items 1 and 2): a session's channels are
//! recognised (binding, or first use), an open is (SessionId, FileId) on every channel, a flow
//! lists the channels it used, a failed channel's requests and the I/O that moves off it give
//! no false finding; CREATE names are shown after their TREE_CONNECT share.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::analysis_kit::{self, counters_req, policy_req, req, status, Kit, FLOW, SUCCESS};
use crate::smb2_build::{framed, Msg, CREATE, IOCTL, READ};
use crate::support::need;
use sqos::analysis::{Analysis, Analyzer, ChannelEnding, FlowState};
use sqos::capture::Timestamp;
use sqos::net::{CloseKind, ConnId, ConnKey, Dir, StreamSink};
use sqos::pipeline::{
    CaptureNote, ChannelEnd, ChannelEvent, ChannelJoin, ChannelRecord, IoRecord, OpenRecord,
    Pipeline, PipelineConfig, RecordSink, SqosRecord, Stats,
};
use sqos::run::run_path;
use sqos::sqos::{Options, Status};
use sqos::synth::{generate, DropKind, Scenario, SynthConfig, Truth};

const SESSION: u64 = 0x0000_4400_0000_0011;
const SEC: f64 = 1e9;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

/// Connection `n`: 10.0.n.11 → 10.0.n.100:445 (one pair of NICs per channel).
fn conn_key(n: u32) -> ConnKey {
    ConnKey {
        client: addr(&format!("10.0.{n}.11:5000{n}")),
        server: addr(&format!("10.0.{n}.100:445")),
    }
}

#[derive(Default)]
struct Collect {
    channels: Vec<ChannelRecord>,
    opens: Vec<OpenRecord>,
    io: Vec<IoRecord>,
    sqos: Vec<SqosRecord>,
    notes: Vec<CaptureNote>,
}

impl sqos::run::CaptureSink for Collect {}

impl RecordSink for Collect {
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.sqos.push(rec);
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        self.opens.push(rec.clone());
    }
    fn on_io(&mut self, rec: &IoRecord) {
        self.io.push(rec.clone());
    }
    fn on_channel(&mut self, rec: &ChannelRecord) {
        self.channels.push(*rec);
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.notes.push(note.clone());
    }
}

/// A pipeline fed stream bytes over several connections, one frame per message.
struct Wire {
    p: Pipeline,
    out: Collect,
    frame: u64,
}

impl Wire {
    fn new(conns: u32) -> Wire {
        let mut p = Pipeline::new(PipelineConfig::default());
        for n in 0..conns {
            p.stream_sink()
                .on_connection(ConnId(n), &conn_key(n), 1, Timestamp(0));
        }
        Wire {
            p,
            out: Collect::default(),
            frame: 0,
        }
    }
    fn send(&mut self, conn: u32, dir: Dir, secs: f64, m: &Msg) -> u64 {
        self.frame += 1;
        let ts = Timestamp((secs * SEC) as i64);
        self.p
            .stream_sink()
            .on_data(ConnId(conn), dir, self.frame, ts, &framed(m));
        self.p.deliver(ts, &mut self.out);
        self.frame
    }
    fn exchange(&mut self, conn: u32, secs: f64, q: Msg, r: Msg) {
        self.send(conn, Dir::ToServer, secs, &q);
        self.send(conn, Dir::ToClient, secs + 0.0005, &r);
    }
    /// A 4 KiB READ of `F` in `SESSION` (tree 5) on connection `conn`, and its answer.
    fn read_4k(&mut self, conn: u32, secs: f64, mid: u64) {
        self.exchange(
            conn,
            secs,
            with_session(
                Msg::request(READ, mid, crate::smb2_build::read_request(F, 4096, 0)),
                SESSION,
                5,
            ),
            with_session(
                response(READ, mid, 0, crate::smb2_build::read_response(4096, 7)),
                SESSION,
                5,
            ),
        );
    }
    fn finish(mut self) -> (Collect, Stats) {
        self.p.finish(&mut self.out);
        let stats = self.p.stats().clone();
        (self.out, stats)
    }
}

fn with_session(mut m: Msg, session: u64, tree: u32) -> Msg {
    m.session_id = session;
    m.tree_id = tree;
    m
}

fn response(command: u16, mid: u64, status: u32, body: Vec<u8>) -> Msg {
    Msg::response(command, mid, status, body)
}

const SESSION_SETUP: u16 = 1;
const TREE_CONNECT: u16 = 3;
const MORE_PROCESSING: u32 = 0xC000_0016;
const F: [u8; 16] = [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0];

/// A session set up on connection 0 (two legs), its share `\\sofs\vms` as tree 5, and
/// `vm01\disk0.vhdx` opened there; then the session bound to connection 1.
fn session_over_two_connections() -> Wire {
    use sqos::synth::smb2 as b;
    let mut w = Wire::new(2);
    w.exchange(
        0,
        0.0,
        with_session(
            Msg::request(SESSION_SETUP, 1, b::session_setup_request(0)),
            0,
            0,
        ),
        with_session(
            response(
                SESSION_SETUP,
                1,
                MORE_PROCESSING,
                b::session_setup_response(),
            ),
            SESSION,
            0,
        ),
    );
    w.exchange(
        0,
        0.01,
        with_session(
            Msg::request(SESSION_SETUP, 2, b::session_setup_request(0)),
            SESSION,
            0,
        ),
        with_session(
            response(SESSION_SETUP, 2, 0, b::session_setup_response()),
            SESSION,
            0,
        ),
    );
    w.exchange(
        0,
        0.02,
        with_session(
            Msg::request(TREE_CONNECT, 3, b::tree_connect_request("\\\\sofs\\vms")),
            SESSION,
            0,
        ),
        with_session(
            response(TREE_CONNECT, 3, 0, b::tree_connect_response()),
            SESSION,
            5,
        ),
    );
    w.exchange(
        0,
        0.03,
        with_session(
            Msg::request(
                CREATE,
                4,
                crate::smb2_build::create_request("vm01\\disk0.vhdx"),
            ),
            SESSION,
            5,
        ),
        with_session(
            response(CREATE, 4, 0, crate::smb2_build::create_response(F)),
            SESSION,
            5,
        ),
    );
    // The second channel: SESSION_SETUP with SMB2_SESSION_FLAG_BINDING, the session's id.
    for (mid, status, at) in [(1, MORE_PROCESSING, 0.04), (2, 0, 0.05)] {
        w.exchange(
            1,
            at,
            with_session(
                Msg::request(
                    SESSION_SETUP,
                    mid,
                    b::session_setup_request(b::SESSION_FLAG_BINDING),
                ),
                SESSION,
                0,
            ),
            with_session(
                response(SESSION_SETUP, mid, status, b::session_setup_response()),
                SESSION,
                0,
            ),
        );
    }
    w
}

#[test]
fn binding_makes_a_channel_and_io_on_it_reaches_the_open() {
    let mut w = session_over_two_connections();
    // A READ on the second channel of the FileId opened on the first.
    w.read_4k(1, 0.1, 3);
    w.p.stream_sink()
        .on_close(ConnId(1), CloseKind::Rst, 99, Timestamp((0.2 * SEC) as i64));
    let (out, stats) = w.finish();
    // The share path of tree 5 before the CREATE name.
    assert_eq!(out.opens.len(), 1);
    assert_eq!(out.opens[0].file_name, "\\\\sofs\\vms\\vm01\\disk0.vhdx");
    assert_eq!(out.io.len(), 1);
    assert_eq!((out.io[0].conn, out.io[0].session_id), (ConnId(1), SESSION));
    let events: Vec<(u32, ChannelEvent)> =
        out.channels.iter().map(|c| (c.conn.0, c.event)).collect();
    assert_eq!(
        events[..2],
        [
            (0, ChannelEvent::Joined(ChannelJoin::Setup)),
            (1, ChannelEvent::Joined(ChannelJoin::Binding)),
        ]
    );
    assert!(matches!(
        events[2],
        (
            1,
            ChannelEvent::Ended {
                by: ChannelEnd::Rst,
                unanswered: 0,
                ..
            }
        )
    ));
    assert!(matches!(
        events[3],
        (
            0,
            ChannelEvent::Ended {
                by: ChannelEnd::CaptureEnd,
                ..
            }
        )
    ));
    assert_eq!(
        (out.channels[1].client, out.channels[1].server),
        (conn_key(1).client, conn_key(1).server)
    );
    assert_eq!(stats.sessions.len(), 1);
    let s = &stats.sessions[0];
    assert_eq!((s.session_id, s.channels_total), (SESSION, 2));
    assert_eq!(s.channels[0].joined, ChannelJoin::Setup);
    assert_eq!(s.channels[1].joined, ChannelJoin::Binding);
    assert_eq!(s.channels[1].ended_by, Some(ChannelEnd::Rst));
    assert_eq!(s.channels[1].client, "10.0.1.11:50001");
}

#[test]
fn a_session_first_met_on_a_connection_is_a_channel_seen() {
    let mut w = Wire::new(3);
    // The capture began after the setup: a READ of the session on connection 2.
    w.read_4k(2, 0.0, 40);
    let (out, stats) = w.finish();
    assert_eq!(
        out.channels[0].event,
        ChannelEvent::Joined(ChannelJoin::Seen)
    );
    assert_eq!(out.channels[0].conn, ConnId(2));
    assert_eq!(stats.sessions[0].channels[0].joined, ChannelJoin::Seen);
    // Without its TREE_CONNECT a name stays as the CREATE wrote it (none seen here).
    assert!(out.opens.is_empty());
}

#[test]
fn a_replayed_sqos_request_releases_the_one_lost_with_its_channel() {
    let mut w = session_over_two_connections();
    let sqos = counters_buffer();
    // Sent on the second channel, which then goes silent; the client sends it again on the
    // first with SMB2_FLAGS_REPLAY_OPERATION and gets the answer there.
    let q = with_session(
        Msg::request(
            IOCTL,
            7,
            crate::smb2_build::ioctl_request(0x0009_0350, F, &sqos, 4096, 0),
        ),
        SESSION,
        5,
    );
    let lost = w.send(1, Dir::ToServer, 1.0, &q);
    let mut replay = with_session(
        Msg::request(
            IOCTL,
            9,
            crate::smb2_build::ioctl_request(0x0009_0350, F, &sqos, 4096, 0),
        ),
        SESSION,
        5,
    );
    replay.flags |= 0x2000_0000;
    let again = w.send(0, Dir::ToServer, 2.0, &replay);
    w.send(
        0,
        Dir::ToClient,
        2.001,
        &with_session(
            response(
                IOCTL,
                9,
                0,
                crate::smb2_build::ioctl_response(0x0009_0350, F, &[], 0),
            ),
            SESSION,
            5,
        ),
    );
    // Released at once, not held for the 60 s hold window.
    let before_end = w.out.sqos.len();
    assert_eq!(before_end, 3, "{:?}", w.out.notes);
    let (out, _) = w.finish();
    assert_eq!(out.sqos[0].frame, lost);
    assert_eq!(out.sqos[0].response_frame, None);
    assert!(out.sqos[1].replay && out.sqos[1].frame == again);
    assert_eq!(out.sqos[1].response_frame, Some(again + 1));
    assert!(out.notes.iter().any(|n| n.message.contains(&format!(
        "SQOS request in frame {lost} (msg id 7) sent again in frame {again} on connection 0"
    ))));
}

/// A GET_STATUS|UPDATE_COUNTERS request buffer (dialect 1.1).
fn counters_buffer() -> Vec<u8> {
    sqos::sqos::encode_request(&counters_req(FLOW, 10, 10, 1000, 40))
}

// ---- the analysis, records built in code ------------------------------------------------

fn channels(f: &FlowState) -> Vec<(u32, Option<ChannelJoin>, u64, Option<ChannelEnding>)> {
    f.channels
        .iter()
        .map(|c| (c.conn.0, c.joined, c.io_count, c.ended))
        .collect()
}

fn codes(f: &FlowState) -> Vec<&'static str> {
    f.findings.iter().map(|x| x.code.as_str()).collect()
}

/// The case: one session over two connections, CREATE and SQOS on the first, half of
/// the flow's READs on the second. Before, the analysis saw half the I/O (30 of 60 IOPS) and
/// warned `flow.counters_mismatch` on every interval.
#[test]
fn one_session_over_two_connections_counts_the_io_of_both() {
    let mut k = Kit::default();
    k.join(0.0, 0, ChannelJoin::Setup);
    k.join(0.0, 1, ChannelJoin::Binding);
    k.conn = ConnId(0);
    k.create(0.0, 1, "\\\\sofs\\vms\\vm01\\disk0.vhdx");
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    k.exchange(
        0.2,
        1,
        policy_req(FLOW, 100, 10, "vm01", "HV01"),
        SUCCESS,
        None,
    );
    let st = || Some(status(FLOW, 100, 10, 4000, Status::OK));
    k.exchange(0.3, 1, counters_req(FLOW, 0, 0, 0, 0), SUCCESS, st());
    // 9 intervals of 4 s at 60 IOPS (8 KiB), every other READ on the second channel.
    for i in 0..9 {
        let start = 0.3 + 4.0 * f64::from(i);
        for n in 0..240 {
            k.conn = ConnId(n % 2);
            k.io(start + 0.01 + f64::from(n) / 60.0, 1, 8192, 0.001);
        }
        k.conn = ConnId(0);
        k.exchange(
            start + 4.0,
            1,
            counters_req(FLOW, 240, 240, 2_400_000, 1920),
            SUCCESS,
            st(),
        );
    }
    let a = k.finish();
    let f = analysis_kit::flow(&a, FLOW);
    assert!(codes(f).is_empty(), "{:?}", codes(f));
    let r = f.reported_rates().expect("reported");
    let o = f.observed_rates().expect("observed");
    assert!((r.iops - 60.0).abs() < 1e-6, "{}", r.iops);
    assert!((o.iops - 60.0).abs() < 1e-6, "{}", o.iops);
    assert_eq!(f.all_io.io_count, 9 * 240);
    assert_eq!(
        channels(f),
        vec![
            (0, Some(ChannelJoin::Setup), 9 * 120, None),
            (1, Some(ChannelJoin::Binding), 9 * 120, None),
        ]
    );
    // SET_LOGICAL_FLOW_ID, the policy, the first UPDATE_COUNTERS and 9 more.
    assert_eq!(f.channels[0].sqos_requests, 12);
    assert_eq!(f.channels[1].client, Some(addr("10.0.1.2:50001")));
}

/// A status request lost with its channel (reset) and sent again on another: no
/// `flow.request_unanswered`, the replay's answer completes the interval the original bounded,
/// and the interval the failure fell in is not compared.
#[test]
fn a_reset_channel_loses_a_request_that_a_replay_answers() {
    let mut k = Kit::default();
    k.join(0.0, 0, ChannelJoin::Setup);
    k.join(0.0, 1, ChannelJoin::Binding);
    k.create(0.0, 1, "d.vhdx");
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    let st = || Some(status(FLOW, 0, 0, 4000, Status::OK));
    k.exchange(0.2, 1, counters_req(FLOW, 0, 0, 0, 0), SUCCESS, st());
    for n in 0..40 {
        k.io(0.3 + f64::from(n) * 0.1, 1, 8192, 0.001);
    }
    // The update goes out on the second channel, which is reset before the answer.
    k.conn = ConnId(1);
    let lost = k.request(4.5, 1, counters_req(FLOW, 40, 40, 400_000, 320));
    let rst = k.leave(4.6, 1, ChannelEnd::Rst, Some((lost.1 - 1, 4.4)), 1);
    // Sent again on the first, ChannelSequence raised, then more I/O and a regular update.
    k.conn = ConnId(0);
    k.replay = true;
    k.channel_sequence = 1;
    let again = k.request(4.7, 1, counters_req(FLOW, 40, 40, 400_000, 320));
    k.respond(4.701, 1, again, SUCCESS, st());
    k.replay = false;
    for n in 0..20 {
        k.io(4.8 + f64::from(n) * 0.1, 1, 8192, 0.001);
    }
    k.exchange(
        8.5,
        1,
        counters_req(FLOW, 20, 20, 200_000, 160),
        SUCCESS,
        st(),
    );
    k.io(9.0, 1, 8192, 0.001);
    // The capture goes on: the lost request is older than the grace of 5 s.
    k.exchange(12.5, 1, counters_req(FLOW, 1, 1, 10_000, 8), SUCCESS, st());
    k.io(15.0, 1, 8192, 0.001);
    let a = k.finish();
    let f = analysis_kit::flow(&a, FLOW);
    assert!(codes(f).is_empty(), "{:?}", codes(f));
    let ch = &f.channels[1];
    assert_eq!(
        (ch.ended, ch.ended_frame),
        (Some(ChannelEnding::Rst), Some(rst))
    );
    assert_eq!((ch.lost_requests, ch.replayed_requests), (1, 1));
    // The original bounded the interval; the replay's answer applied it.
    let row = f
        .series
        .rows
        .iter()
        .find(|r| r.end_frame == lost.1)
        .expect("row ended by the lost request");
    assert_eq!((row.updates_applied, row.reported.io_count), (1, 40));
    assert_eq!(row.observed.io_count, 40);
    assert!(!row.observed_complete, "the failure fell in it");
    assert!(!f.series.rows.iter().any(|r| r.end_frame == again.1));
    assert_eq!(f.updates_sent, 4);
    // After the failure, intervals are compared again.
    assert!(f.series.rows.last().is_some_and(|r| r.observed_complete));
}

/// A channel that went silent with a request on it: not `flow.request_unanswered`, the channel
/// is shown as silent after the server's last message there.
#[test]
fn a_silent_channel_loses_its_requests_without_a_finding() {
    let mut k = Kit::default();
    k.join(0.0, 0, ChannelJoin::Setup);
    k.join(0.0, 1, ChannelJoin::Binding);
    k.create(0.0, 1, "d.vhdx");
    let st = || Some(status(FLOW, 0, 0, 4000, Status::OK));
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    k.conn = ConnId(1);
    let last = k.exchange(0.2, 1, counters_req(FLOW, 0, 0, 0, 0), SUCCESS, st());
    let lost = k.request(4.2, 1, counters_req(FLOW, 0, 0, 0, 0));
    // The server says nothing more there; the capture ends 10 s later.
    k.conn = ConnId(0);
    k.io(9.0, 1, 4096, 0.001);
    k.leave(14.2, 1, ChannelEnd::CaptureEnd, Some((last, 0.201)), 1);
    let a = k.finish();
    let f = analysis_kit::flow(&a, FLOW);
    assert!(codes(f).is_empty(), "{:?}", codes(f));
    let ch = &f.channels[1];
    assert_eq!(ch.ended, Some(ChannelEnding::Silence));
    assert_eq!(ch.ended_frame, Some(last));
    assert_eq!((ch.lost_requests, ch.replayed_requests), (1, 0));
    assert!(lost.1 > last);
}

/// Without the channel's end, the same unanswered request is the server's doing.
#[test]
fn a_request_unanswered_on_a_live_channel_is_still_a_finding() {
    let mut k = Kit::default();
    k.join(0.0, 0, ChannelJoin::Setup);
    k.create(0.0, 1, "d.vhdx");
    let st = || Some(status(FLOW, 0, 0, 4000, Status::OK));
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    k.request(1.0, 1, counters_req(FLOW, 0, 0, 0, 0));
    // The server keeps answering on the channel.
    let later = k.exchange(5.0, 1, req(Options::GET_STATUS, FLOW), SUCCESS, st());
    k.leave(9.0, 0, ChannelEnd::CaptureEnd, Some((later, 5.001)), 1);
    let a = k.finish();
    let f = analysis_kit::flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.request_unanswered"]);
    assert_eq!(f.channels[0].ended, None);
}

// ---- the committed capture and its ground truth -----------------------------------------

fn analyzed(args: &SynthConfig) -> (Analysis, Truth) {
    let (bytes, _, truth) = generate(args, Vec::new()).expect("generate");
    let path = std::env::temp_dir().join(format!(
        "sqos-multichannel-{}-{}.pcap",
        args.channels.unwrap_or(0),
        std::process::id()
    ));
    std::fs::write(&path, bytes).expect("temp capture");
    let mut a = Analyzer::default();
    let r = run_path(&path, PipelineConfig::default(), &mut a);
    let _ = std::fs::remove_file(&path);
    assert!(r.is_ok());
    (a.finish(), truth)
}

fn by_vm(a: &Analysis) -> BTreeMap<String, &FlowState> {
    a.flows
        .iter()
        .map(|f| (f.initiator_name.clone().unwrap_or_default(), f))
        .collect()
}

fn labels(f: &FlowState) -> Vec<String> {
    f.channels.iter().map(|c| c.label()).collect()
}

#[test]
fn multichannel_scenario_matches_the_truth_with_no_finding() {
    let (a, t) = analyzed(&SynthConfig::new(
        Scenario::Multichannel,
        "captures/multichannel.pcap.gz",
    ));
    crate::analysis_synth::check_against_truth(&a, &t, true);
    let flows = by_vm(&a);
    assert_eq!(flows.len(), 4);
    for tf in &t.flows {
        let f = flows[tf.initiator_name.as_str()];
        assert!(codes(f).is_empty(), "{}: {:?}", tf.initiator_name, codes(f));
        // Observed figures equal what the generator did.
        assert_eq!(
            f.all_io.io_count, tf.totals.io_count,
            "{}",
            tf.initiator_name
        );
        assert_eq!(
            f.all_io.bytes,
            tf.totals.bytes_read + tf.totals.bytes_written
        );
        assert_eq!(
            f.channels.iter().map(|c| c.io_count).sum::<u64>(),
            tf.totals.io_count
        );
        assert_eq!(labels(f), tf.channels, "{}", tf.initiator_name);
        let names: Vec<&str> = f
            .opens
            .iter()
            .filter_map(|o| o.file_name.as_deref())
            .collect();
        assert_eq!(names, tf.file_names, "{}", tf.initiator_name);
    }
    // Every channel of a host's session: set up on the first, bound on the others.
    for (h, ht) in t.hosts.iter().enumerate() {
        let f = a
            .flows
            .iter()
            .find(|f| f.initiator_node_name.as_deref() == Some(ht.name.as_str()))
            .expect("a flow of the host");
        assert_eq!(ht.channels.len(), [4, 2][h]);
        for (i, tc) in ht.channels.iter().enumerate() {
            let label = format!("{} → {}", tc.client, tc.server);
            let c = f
                .channels
                .iter()
                .find(|c| c.label() == label)
                .unwrap_or_else(|| panic!("{label} not in {:?}", labels(f)));
            let joined = if i == 0 {
                ChannelJoin::Setup
            } else {
                ChannelJoin::Binding
            };
            assert_eq!(c.joined, Some(joined), "{label}");
            let ending = tc.dropped.map(|d| match d {
                DropKind::Rst => ChannelEnding::Rst,
                DropKind::Silence => ChannelEnding::Silence,
            });
            assert_eq!(c.ended, ending, "{label}");
        }
    }
    // The status request the reset took: lost there, answered as a replay on another channel.
    let replayed: Vec<_> = t
        .messages
        .iter()
        .filter(|m| !m.replay_request_frames.is_empty())
        .collect();
    assert_eq!(replayed.len(), 1);
    let m = replayed[0];
    let f = a
        .flows
        .iter()
        .find(|f| Some(f.id) == m.logical_flow_id)
        .expect("its flow");
    let lost_on = f
        .channels
        .iter()
        .find(|c| c.ended == Some(ChannelEnding::Rst))
        .expect("the reset channel");
    assert_eq!((lost_on.lost_requests, lost_on.replayed_requests), (1, 1));
    assert!(lost_on.last_frame <= m.request_frame.expect("captured"));
}

/// `--channels 2` on the steady cluster: every flow's I/O over two channels, nothing fails:
/// reported and observed agree exactly, as on one channel.
#[test]
fn steady_over_two_channels_matches_the_truth() {
    let args = SynthConfig {
        channels: Some(2),
        duration: Some(12.0),
        ..SynthConfig::new(Scenario::Steady, "steady-2ch.pcap")
    };
    let (a, t) = analyzed(&args);
    crate::analysis_synth::check_against_truth(&a, &t, true);
    for f in &a.flows {
        assert!(codes(f).is_empty(), "{:?}", codes(f));
        assert_eq!(f.channels_total, 2, "{:?}", labels(f));
        assert!(f
            .channels
            .iter()
            .all(|c| c.io_count > 0 && c.ended.is_none()));
        let r = f.reported_rates().expect("reported");
        let o = f.observed_rates().expect("observed");
        assert!((r.iops - o.iops).abs() < 1e-9, "{} vs {}", r.iops, o.iops);
    }
}

// ---- the faces -----------------------------------------------------------------------------

fn multichannel_capture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("captures/multichannel.pcap.gz")
}

fn sqos(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(args)
        .output()
        .expect("run sqos");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn stats_flows_and_exports_show_the_channels() {
    let cap = multichannel_capture();
    let cap = cap.to_str().expect("path");
    let stats: serde_json::Value =
        serde_json::from_str(&sqos(&["stats", cap, "--format", "json"])).expect("json");
    let sessions = stats["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 2);
    let joined: Vec<Vec<&str>> = sessions
        .iter()
        .map(|s| {
            s["channels"]
                .as_array()
                .expect("channels")
                .iter()
                .map(|c| c["joined"].as_str().expect("joined"))
                .collect()
        })
        .collect();
    assert_eq!(
        joined,
        vec![
            vec!["setup", "binding", "binding", "binding"],
            vec!["setup", "binding"]
        ]
    );
    assert_eq!(sessions[0]["channels"][2]["ended_by"], "rst");
    let text = sqos(&["stats", cap]);
    assert!(
        text.contains("sessions          2 (2 over several channels)"),
        "{text}"
    );
    assert!(text.contains("10.0.2.11:"), "{text}");

    let flows: serde_json::Value =
        serde_json::from_str(&sqos(&["flows", cap, "--format", "json"])).expect("json");
    let vm03 = flows
        .as_array()
        .expect("flows")
        .iter()
        .find(|f| f["initiator_name"] == "vm03")
        .expect("vm03");
    assert_eq!(vm03["channels_total"], 2);
    let ch = &vm03["channels"][1];
    assert_eq!(ch["server"], "10.0.1.100:445");
    assert_eq!(ch["joined"], "binding");
    assert_eq!(ch["ended_by"], "silence");
    assert_eq!(
        vm03["opens"][0]["file_name"],
        "\\\\sofs\\vms\\vm03\\disk0.vhdx"
    );
    let text = sqos(&["flows", cap]);
    assert!(text.contains("CHANNELS"), "{text}");
    assert!(text.contains("silent after frame"), "{text}");
    assert!(text.contains("reset (RST) at frame"), "{text}");

    let csv = sqos(&["export", cap, "--what", "flows", "--format", "csv"]);
    let header: Vec<&str> = csv.lines().next().expect("header").split(',').collect();
    let col = header
        .iter()
        .position(|h| *h == "channels")
        .expect("column");
    let vm01 = csv
        .lines()
        .find(|l| l.contains(",vm01,"))
        .expect("vm01 row");
    let cell = vm01.split(',').nth(col).expect("cell");
    assert_eq!(cell.split('|').count(), 4, "{cell}");
    assert!(cell.contains("10.0.3.11:"), "{cell}");

    let svg = std::env::temp_dir().join(format!("sqos-mc-{}.svg", std::process::id()));
    sqos(&["plot", cap, "-o", svg.to_str().expect("path")]);
    let s = std::fs::read_to_string(&svg).expect("svg");
    let _ = std::fs::remove_file(&svg);
    assert!(s.contains(" · 4 channels · "), "panel header");
    assert!(s.contains("ended (rst) at frame"), "the reset is marked");
    assert!(
        s.contains("ended (silence) at frame"),
        "the silence is marked"
    );
}

#[test]
fn check_rules_can_count_channels() {
    use sqos::check::judge::{judge_capture, Plan};
    use sqos::check::rules::Rules;
    use sqos::check::source::flow_analysis;
    let rules = Rules::parse(
        "[[flow_metric]]\nname = \"two channels or more\"\nmetric = \"channels\"\nmin = 2\n\n\
         [[flow_metric]]\nname = \"vm01 on four\"\ninitiator = \"vm01\"\nmetric = \"channels\"\nmin = 4\nmax = 4\n",
        "inline",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let plan = Plan {
        rules: rules.rules,
        ..Plan::default()
    };
    let judge = |cap: &Path| {
        judge_capture(
            cap,
            PipelineConfig::default(),
            &plan,
            flow_analysis(Default::default()),
            &mut sqos::run::no_progress,
        )
    };
    let v = judge(&multichannel_capture());
    assert_eq!(
        (v.passed(), v.failed()),
        (2, 0),
        "{}",
        sqos::check::report::capture_text(&v)
    );
    let steady = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("captures/steady.pcap.gz");
    let v = judge(&steady);
    assert_eq!(v.failed(), 2, "{}", sqos::check::report::capture_text(&v));
}

// ---- real traffic ------------------------------------------------------------------------

/// Zeek's multichannel trace (Windows client, Samba server): one session set up on connection
/// 0 and bound to connections 1–3; files opened on connection 0 written and read on the others.
#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs ../shared/real-captures (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn zeek_multichannel_channels_and_binding_are_recognised() {
    let cap = need::real_capture("zeek-smb3_multichannel.pcap");
    let mut sink = Collect::default();
    let r = run_path(&cap, PipelineConfig::default(), &mut sink).expect("read");
    let sessions = &r.stats.sessions;
    assert_eq!(sessions.len(), 1);
    let s = &sessions[0];
    assert_eq!(s.session_id, 0x0000_1c00_1000_0049);
    let summary: Vec<(u32, ChannelJoin, Option<ChannelEnd>)> = s
        .channels
        .iter()
        .map(|c| (c.connection, c.joined, c.ended_by))
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, ChannelJoin::Setup, Some(ChannelEnd::Rst)),
            (1, ChannelJoin::Binding, Some(ChannelEnd::Rst)),
            (2, ChannelJoin::Binding, Some(ChannelEnd::Rst)),
            (3, ChannelJoin::Binding, Some(ChannelEnd::Rst)),
        ]
    );
    // Frames of the binding SESSION_SETUP responses (tshark: 833, 842, 843).
    let bound: Vec<u64> = s.channels.iter().skip(1).map(|c| c.frame).collect();
    assert_eq!(bound, vec![833, 842, 843]);
    assert!(s
        .channels
        .iter()
        .all(|c| c.client.starts_with("172.17.0.184:") && c.server == "172.17.0.189:445"));
    // Names carry the share (TREE_CONNECT \\172.17.0.189\share2).
    for o in &sink.opens {
        assert!(
            o.file_name.starts_with("\\\\172.17.0.189\\share2"),
            "{}",
            o.file_name
        );
    }
    // Files are opened on every channel: successful CREATE responses per connection
    // (tshark: `smb2.cmd==5 && smb2.flags.response==1 && smb2.nt_status==0` by tcp.stream).
    let mut per_conn = std::collections::BTreeMap::new();
    for o in &sink.opens {
        *per_conn.entry(o.conn.0).or_insert(0u32) += 1;
    }
    assert_eq!(
        per_conn,
        [(0, 53), (1, 2), (2, 13), (3, 1)].into_iter().collect()
    );
    // Opened on connection 0, used on all four.
    let conns: std::collections::BTreeSet<u32> = sink.io.iter().map(|i| i.conn.0).collect();
    assert_eq!(conns, [0, 1, 2, 3].into_iter().collect());
    assert!(sink.io.iter().all(|i| i.session_id == s.session_id));
}

/// (connection, how it joined, frame, frame it ended, how it ended)
type ChannelRow = (u32, ChannelJoin, u64, Option<u64>, Option<ChannelEnd>);

/// Samba's smbtorture binds 31 channels to one SMB 3.1.1 session (captures/real, committed):
/// tshark counts the successful SESSION_SETUP responses by tcp.stream — the setup on stream 1
/// (frame 25), a binding on each of streams 2–32 (frames 39 … 410), none on stream 33 (its
/// binding is refused with STATUS_INSUFFICIENT_RESOURCES: Samba's 32 channels a session); the
/// other session (0xbecf07c1) is set up on stream 0 alone. Every connection ends with a FIN.
#[test]
fn samba_multichannel_32_channels_of_one_session() {
    let cap =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("captures/real/smb311-multichannel.pcap");
    let mut sink = Collect::default();
    let r = run_path(&cap, PipelineConfig::default(), &mut sink).expect("read");
    let ids: Vec<u64> = r.stats.sessions.iter().map(|s| s.session_id).collect();
    assert_eq!(ids, vec![0xbbb5_2830, 0xbecf_07c1]);
    let s = &r.stats.sessions[0];
    assert_eq!(s.channels_total, 32);
    // (connection, how it joined, frame of the SESSION_SETUP response, frame its connection
    // closed: the second FIN; tshark: stream 1 closes at 521, then one stream every 2 frames).
    let got: Vec<ChannelRow> = s
        .channels
        .iter()
        .map(|c| (c.connection, c.joined, c.frame, c.ended_frame, c.ended_by))
        .collect();
    let bound = [
        39, 51, 64, 76, 88, 100, 112, 125, 137, 150, 162, 173, 186, 199, 211, 222, 236, 247, 261,
        272, 286, 297, 310, 323, 336, 349, 361, 373, 384, 398, 410,
    ];
    let mut want = vec![(1, ChannelJoin::Setup, 25, Some(521), Some(ChannelEnd::Fin))];
    for (k, frame) in (2u32..=32).zip(bound) {
        let closed = 521 - 2 * u64::from(k - 1);
        want.push((
            k,
            ChannelJoin::Binding,
            frame,
            Some(closed),
            Some(ChannelEnd::Fin),
        ));
    }
    assert_eq!(got, want);
    assert!(s
        .channels
        .iter()
        .all(|c| c.client.starts_with("127.0.0.1:") && c.server == "127.0.0.1:445"));
    assert_eq!(s.channels[0].client, "127.0.0.1:49174");
    let other = &r.stats.sessions[1];
    assert_eq!(other.channels_total, 1);
    assert_eq!(
        (
            other.channels[0].connection,
            other.channels[0].joined,
            other.channels[0].frame
        ),
        (0, ChannelJoin::Setup, 11)
    );
    // The refused 33rd binding (stream 33) makes no channel: 33 joins, 33 ends.
    assert_eq!(sink.channels.len(), 66);
    assert!(sink.channels.iter().all(|c| c.conn.0 != 33));
}

/// `--encrypt` over multichannel: the session's keys seal every channel's messages (a binding
/// channel's NEGOTIATE and SESSION_SETUP go in clear, as MS-SMB2 has them signed, not
/// encrypted); with the key file everything decrypts, and the flows have the same channels
/// and no finding, their observed I/O the generator's.
#[test]
fn encrypted_multichannel_decrypts_on_every_channel() {
    use sqos::smb2::crypto::Cipher;
    let tmp = crate::support::scratch("sqos-mc-encrypted-");
    let mut args = SynthConfig::new(Scenario::Multichannel, tmp.path().join("mc.pcap"));
    args.encrypt = Some(Cipher::Aes128Gcm);
    args.keys_out = Some(tmp.path().join("mc.keys"));
    let sum = sqos::synth::run(&args).expect("synth");
    let keys = tmp.path().join("mc.keys");
    let mut a = Analyzer::default();
    let r = run_path(&args.output, crate::support::with_keys(&[&keys]), &mut a).expect("read");
    assert!(r.stats.encrypted_messages > 0);
    assert_eq!(r.stats.undecrypted(), 0);
    assert_eq!(r.stats.decrypted_messages, r.stats.encrypted_messages);
    let a = a.finish();
    let flows = by_vm(&a);
    let chans: Vec<(&str, usize)> = flows
        .iter()
        .map(|(vm, f)| (vm.as_str(), f.channels.len()))
        .collect();
    assert_eq!(chans, [("vm01", 4), ("vm02", 4), ("vm03", 2), ("vm04", 2)]);
    for (vm, f) in &flows {
        assert!(codes(f).is_empty(), "{vm}: {:?}", codes(f));
    }
    // The generator's truth for the same (deterministic) run.
    let (_, again, truth) = generate(&args, Vec::new()).expect("generate");
    assert_eq!(again.frames, sum.frames);
    crate::analysis_synth::check_against_truth(&a, &truth, true);
}

/// `sqos plot`: each panel of a flow on several channels says how many, and a channel that
/// failed under the flow is a line at the time it failed, titled with its addresses, how and
/// the frame (HV01's third channel reset at frame 4837, HV02's second silent after 6660).
#[test]
fn plot_shows_the_channel_count_and_where_a_channel_failed() {
    use sqos::output::plot::{iops_svg, PlotOptions};
    let mut a = Analyzer::default();
    run_path(&multichannel_capture(), PipelineConfig::default(), &mut a).expect("read");
    let svg = iops_svg(&a.finish(), &PlotOptions::default());
    assert_eq!(svg.matches(" · 4 channels · ").count(), 2, "{svg}");
    assert_eq!(svg.matches(" · 2 channels · ").count(), 2, "{svg}");
    let mut ended: Vec<&str> = svg
        .match_indices("<title>channel ")
        .map(|(i, _)| {
            let t = &svg[i + 7..];
            &t[..t.find("</title>").unwrap_or(0)]
        })
        .collect();
    let reset = "channel 10.0.2.11:50532 → 10.0.2.100:445 ended (rst) at frame 4837";
    let silent = "channel 10.0.1.12:50214 → 10.0.1.100:445 ended (silence) at frame 6660";
    // Panels in the plot's own order (by flow): sorted here.
    ended.sort_unstable();
    assert_eq!(ended, [silent, silent, reset, reset], "{svg}");
}
