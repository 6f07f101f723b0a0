//! The memory budget in the pipeline: what a full share drops is counted and reported once per
//! kind, and input the framer cannot follow is reported, not skipped silently.

use etherparse::PacketBuilder;
use sqos::budget::{Budget, Kind};
use sqos::capture::{Frame, Timestamp};
use sqos::pipeline::{CaptureNote, Pipeline, PipelineConfig, RecordSink, SqosRecord, Stats};

#[derive(Default)]
struct Notes(Vec<CaptureNote>);

impl RecordSink for Notes {
    // These tests look at messages, opens, I/O and notes, not channels.
    fn on_channel(&mut self, _rec: &sqos::pipeline::ChannelRecord) {}
    fn on_sqos(&mut self, _rec: SqosRecord) {}
    fn on_note(&mut self, note: &CaptureNote) {
        self.0.push(note.clone());
    }
}

/// A TCP segment from client port `port` of 10.0.0.1 to 10.0.0.2:445.
fn segment(port: u16, seq: u32, syn: bool, payload: &[u8]) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(port, 445, seq, 65535);
    let b = if syn { b.syn() } else { b.ack(1) };
    let mut out = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut out, payload).expect("build frame");
    out
}

fn run(frames: &[Vec<u8>], budget: Budget) -> (Notes, Stats) {
    let mut p = Pipeline::new(PipelineConfig::default().with_memory(budget));
    let mut sink = Notes::default();
    for (i, data) in frames.iter().enumerate() {
        let frame = Frame::ethernet(i as u64 + 1, Timestamp(i as i64 * 1000), data);
        p.push_frame(&frame, &mut sink);
    }
    p.finish(&mut sink);
    (sink, p.stats().clone())
}

#[test]
fn many_connections_are_forgotten_counted_and_reported_once() {
    let budget = Budget::new(4 << 20);
    let max = budget.share(Kind::Connections).max_entries();
    // Over 1,000 connections, whatever the entry cost: the notes below are capped at 1,000.
    let conns = (3 * max as u32).max(1_200);
    let mut frames = Vec::new();
    for c in 0..conns {
        let port = 10_000 + (c % 50_000) as u16;
        frames.push(segment(port, 1000, true, &[]));
        frames.push(segment(port, 1001, false, &[0x55; 100]));
    }
    let (notes, stats) = run(&frames, budget);
    assert_eq!(stats.connections, u64::from(conns));
    let m = stats
        .memory
        .iter()
        .find(|m| m.kind == Kind::Connections)
        .expect("connections share");
    // Each eviction forgets an eighth of the table; what is left at the end is not dropped.
    assert!(m.dropped >= u64::from(conns) - max as u64, "{m:?}");
    assert!(m.dropped < u64::from(conns), "{m:?}");
    assert!(m.peak_bytes <= m.limit_bytes, "{m:?}");
    let said: Vec<&CaptureNote> = notes
        .0
        .iter()
        .filter(|n| n.message.contains("connections share"))
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0]
            .message
            .contains(&format!("{} idle connections forgotten", m.dropped)),
        "{}",
        said[0].message
    );
    // The 100 bytes of each connection are not SMB2: noted per kind, at most 1,000 times.
    let unframed = notes
        .0
        .iter()
        .filter(|n| n.message.contains("without an SMB2 message start"))
        .count();
    assert_eq!(unframed, 1000);
    assert!(notes.0.iter().any(|n| n.message.starts_with(&format!(
        "{} more notes of streams with bytes that held no SMB2 message start",
        conns - 1000
    ))));
}

#[test]
fn a_netbios_length_over_the_bound_is_reported() {
    let mut payload = vec![0x00, 0xFF, 0xFF, 0xFF];
    payload.extend_from_slice(&[0xFE; 60]);
    let frames = vec![
        segment(50_000, 1000, true, &[]),
        segment(50_000, 1001, false, &payload),
    ];
    let (notes, stats) = run(&frames, Budget::default());
    assert_eq!(stats.resync_skipped_bytes, 64);
    assert_eq!(stats.smb2_messages, 0);
    assert!(
        notes.0.iter().any(|n| n
            .message
            .contains("64 bytes passed over without an SMB2 message start")),
        "{:?}",
        notes.0
    );
}

#[test]
fn the_default_shares_are_what_stats_report() {
    let (_, stats) = run(&[], Budget::default());
    let kinds: Vec<Kind> = stats.memory.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::Connections,
            Kind::Reassembly,
            Kind::Framers,
            Kind::Pending,
            Kind::Opens,
            Kind::Queued,
            Kind::Sessions
        ]
    );
    let b = Budget::default();
    for m in &stats.memory {
        assert_eq!(m.dropped, 0);
        if m.kind != Kind::Connections {
            assert_eq!(m.limit_bytes, b.limit(m.kind) as u64, "{:?}", m.kind);
        }
    }
}
