//! The tables that came after the memory budget stay under it on hostile input, and say what
//! they dropped once: the pipeline's channels and tree connects (the `sessions` share, beside
//! decryption's state), the analysis's channels (`flow_channels`), and compressed messages in
//! progress (the `framers` share). docs/robustness.md.

use std::net::SocketAddr;

use crate::smb2_build::{echo, framed, ioctl_request, nbss, Msg, ECHO, FSCTL_SQOS, IOCTL};
use sqos::analysis::{Analyzer, AnalyzerConfig};
use sqos::budget::{Budget, Kind, MemoryUse, MIN_MEMORY};
use sqos::capture::Timestamp;
use sqos::net::{ConnId, ConnKey, Dir, StreamSink};
use sqos::pipeline::{
    CaptureNote, ChannelEvent, ChannelJoin, ChannelRecord, Limits, Pipeline, PipelineConfig,
    RecordSink, SqosRecord, Stats,
};
use sqos::smb2::compress::{compress_unchained, Algorithm};
use sqos::synth::smb2 as b;

const TREE_CONNECT: u16 = 3;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

#[derive(Default)]
struct Collect {
    channels: u64,
    notes: Vec<String>,
}

impl RecordSink for Collect {
    fn on_sqos(&mut self, _rec: SqosRecord) {}
    // Counted: every channel the hostile stream makes is still announced.
    fn on_channel(&mut self, _rec: &ChannelRecord) {
        self.channels += 1;
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.notes.push(note.message.clone());
    }
}

/// The smallest budget, one connection, and `msgs` sent on it (one frame each).
fn run(msgs: impl IntoIterator<Item = (Dir, Msg)>) -> (Collect, Stats) {
    let cfg = PipelineConfig {
        memory: Budget::new(MIN_MEMORY),
        ..Default::default()
    };
    let mut p = Pipeline::new(cfg);
    let key = ConnKey {
        client: addr("10.0.0.11:50000"),
        server: addr("10.0.0.100:445"),
    };
    p.stream_sink()
        .on_connection(ConnId(0), &key, 1, Timestamp(0));
    let mut out = Collect::default();
    for (i, (dir, m)) in msgs.into_iter().enumerate() {
        let frame = i as u64 + 2;
        let ts = Timestamp(frame as i64 * 1000);
        p.stream_sink()
            .on_data(ConnId(0), dir, frame, ts, &framed(&m));
        p.deliver(ts, &mut out);
    }
    p.finish(&mut out);
    let stats = p.stats().clone();
    (out, stats)
}

fn sessions_row(stats: &Stats) -> MemoryUse {
    stats
        .memory
        .iter()
        .find(|m| m.kind == Kind::Sessions)
        .cloned()
        .expect("sessions row")
}

/// The one note of `share`, which must say `what`.
fn said_once(notes: &[String], share: &str, what: &str) {
    let said: Vec<&String> = notes
        .iter()
        .filter(|n| n.contains(&format!("the {share} share")))
        .collect();
    assert_eq!(said.len(), 1, "{notes:?}");
    assert!(said[0].contains(what), "{}", said[0]);
}

#[test]
fn a_new_session_in_every_message_keeps_the_channel_table_within_its_share() {
    // 20,000 messages on one connection, each of another SessionId: each is a channel.
    let n = 20_000u64;
    let msgs = (0..n).map(|i| {
        let mut m = Msg::request(ECHO, i, echo());
        m.session_id = 0x1_0000 + i;
        (Dir::ToServer, m)
    });
    let (out, stats) = run(msgs);
    // Every channel was announced (joined, then ended), none kept past the share.
    assert_eq!(out.channels, 2 * n - sessions_row(&stats).dropped);
    let row = sessions_row(&stats);
    let limit = Budget::new(MIN_MEMORY).limit(Kind::Sessions) as u64;
    assert_eq!(row.limit_bytes, limit);
    // The table has half the share: 62,910 bytes, 245 channels at 256 bytes (less what the
    // session list of `stats` took).
    assert!(row.peak_bytes <= limit / 2, "{row:?}");
    assert!(row.dropped > n - 300 && row.dropped < n, "{row:?}");
    said_once(
        &out.notes,
        "sessions",
        &format!("{} SMB3 sessions, session setups, channels", row.dropped),
    );
    // The session list stops at a quarter of the table's part; the rest is counted.
    assert!(stats.sessions.len() < 300, "{}", stats.sessions.len());
    assert_eq!(stats.sessions.len() as u64 + stats.sessions_unlisted, n);
}

#[test]
fn tree_connects_with_long_paths_are_charged_their_bytes_and_the_oldest_forgotten() {
    // 500 TREE_CONNECTs of one session, each answered with a new TreeId, each path 2,000
    // characters (4,000 bytes of UTF-16 on the wire, 2,000 kept).
    let n = 500u32;
    let mut msgs = Vec::new();
    for i in 0..n {
        let path = format!("\\\\sofs\\{}{i:05}", "s".repeat(1990));
        let q = Msg::request(TREE_CONNECT, u64::from(i), b::tree_connect_request(&path));
        let mut r = Msg::response(TREE_CONNECT, u64::from(i), 0, b::tree_connect_response());
        r.tree_id = 100 + i;
        msgs.push((Dir::ToServer, q));
        msgs.push((Dir::ToClient, r));
    }
    let (out, stats) = run(msgs);
    let row = sessions_row(&stats);
    let limit = Budget::new(MIN_MEMORY).limit(Kind::Sessions) as u64;
    assert!(row.peak_bytes <= limit / 2, "{row:?}");
    // 62,910 bytes hold 27 trees of 2,256 bytes (less the listed session): the rest went.
    assert!(row.dropped >= u64::from(n) - 28, "{row:?}");
    assert!(row.dropped_bytes >= 2000 * (u64::from(n) - 28), "{row:?}");
    said_once(&out.notes, "sessions", "tree connects not followed");
}

#[test]
fn the_analysis_follows_channels_within_its_share_and_says_how_many_it_did_not() {
    let budget = Budget::new(MIN_MEMORY);
    let mut a = Analyzer::new(AnalyzerConfig::default().with_memory(&budget));
    let n = 10_000u32;
    for i in 0..n {
        a.on_channel(&ChannelRecord {
            frame: u64::from(i) + 1,
            ts: Timestamp(i64::from(i)),
            conn: ConnId(i),
            client: addr("10.0.0.11:50000"),
            server: addr("10.0.0.100:445"),
            session_id: 7,
            event: ChannelEvent::Joined(ChannelJoin::Seen),
        });
    }
    let analysis = a.finish();
    let row = analysis
        .memory
        .iter()
        .find(|m| m.kind == Kind::FlowChannels)
        .expect("flow_channels row");
    // 41,940 bytes at 256 a channel: 163 followed.
    let followed = budget.share(Kind::FlowChannels).max_entries() as u64;
    assert_eq!(followed, 163);
    assert_eq!(row.dropped, u64::from(n) - followed);
    assert_eq!(row.first_drop_frame, Some(followed + 1));
    assert!(row.peak_bytes <= row.limit_bytes, "{row:?}");
    said_once(
        &analysis.notes,
        "flow_channels",
        &format!("{} channels not followed by the analysis", row.dropped),
    );
}

#[test]
fn compressed_messages_in_progress_are_held_in_the_framers_share_and_shed_when_over() {
    // An SQOS IOCTL of 8,000 bytes that compress to about half (4,000 xorshift bytes twice),
    // sent LZ77-compressed on two connections, each held back by its last 16 bytes:
    // 2 × ~4 KB > the 6,000 bytes given.
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut noise: Vec<u8> = (0..4000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    noise.extend_from_within(..);
    let plain = Msg::request(IOCTL, 1, ioctl_request(FSCTL_SQOS, [1; 16], &noise, 96, 0)).bytes(0);
    let packed = compress_unchained(&plain, Algorithm::Lz77, 0).expect("compressed");
    assert!(
        packed.len() > 4000 && packed.len() < 5000,
        "{}",
        packed.len()
    );
    let wire = nbss(&packed);
    let limits = Limits {
        max_framer_bytes: 6_000,
        ..Default::default()
    };
    let mut p = Pipeline::with_limits(PipelineConfig::default(), limits);
    let mut out = Collect::default();
    for c in 0..2u16 {
        let key = ConnKey {
            client: addr(&format!("10.0.0.11:{}", 50000 + c)),
            server: addr("10.0.0.100:445"),
        };
        p.stream_sink()
            .on_connection(ConnId(u32::from(c)), &key, 1, Timestamp(0));
    }
    let cut = wire.len() - 16;
    for (frame, c) in [(2, 0), (3, 1)] {
        p.stream_sink().on_data(
            ConnId(c),
            Dir::ToServer,
            frame,
            Timestamp(frame as i64),
            &wire[..cut],
        );
        assert!(p.framer_bytes() <= 6_000, "{}", p.framer_bytes());
    }
    for (frame, c) in [(4, 0), (5, 1)] {
        p.stream_sink().on_data(
            ConnId(c),
            Dir::ToServer,
            frame,
            Timestamp(frame as i64),
            &wire[cut..],
        );
    }
    p.finish(&mut out);
    let stats = p.stats();
    // The first connection's message was given back; the second decompressed.
    assert_eq!(stats.compressed_messages, 2);
    assert_eq!(stats.decompressed_messages, 1);
    assert_eq!(stats.undecompressed_messages, 1);
    assert_eq!(stats.framer_bytes_shed, cut as u64 - 4);
    said_once(
        &out.notes,
        "framers",
        "was full from frame 3: 1 messages in progress cut",
    );
    assert_eq!(p.framer_bytes(), 0);
}
