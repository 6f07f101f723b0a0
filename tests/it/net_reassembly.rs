//! TCP reassembly: ordering, retransmissions, overlaps, wraparound, gaps, close, bounds.
//! Segments are built directly; a recording sink keeps every callback in order.

use std::net::SocketAddr;

use sqos::capture::Timestamp;
use sqos::net::{
    CloseKind, ConnId, ConnKey, Dir, NetNote, Reassembler, ReassemblyConfig, StreamSink, TcpFlags,
    TcpSegment,
};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Conn(u32, u64),
    Data(u32, Dir, u64, Vec<u8>),
    Gap(u32, Dir, u64, u64),
    Close(u32, CloseKind, u64),
    Note(u32, u64, NetNote),
}

#[derive(Default)]
struct Rec {
    ev: Vec<Ev>,
    keys: Vec<ConnKey>,
    /// Addresses of delivered slices (to check the zero-copy path).
    ptrs: Vec<usize>,
}

impl StreamSink for Rec {
    fn on_connection(&mut self, conn: ConnId, key: &ConnKey, frame: u64, _ts: Timestamp) {
        self.keys.push(*key);
        self.ev.push(Ev::Conn(conn.0, frame));
    }
    fn on_data(&mut self, conn: ConnId, dir: Dir, frame: u64, _ts: Timestamp, data: &[u8]) {
        self.ptrs.push(data.as_ptr() as usize);
        // Merge consecutive deliveries of one frame so tests state the bytes, not the pieces.
        if let Some(Ev::Data(c, d, f, bytes)) = self.ev.last_mut() {
            if (*c, *d, *f) == (conn.0, dir, frame) {
                bytes.extend_from_slice(data);
                return;
            }
        }
        self.ev.push(Ev::Data(conn.0, dir, frame, data.to_vec()));
    }
    fn on_gap(&mut self, conn: ConnId, dir: Dir, frame: u64, _ts: Timestamp, missing: u64) {
        self.ev.push(Ev::Gap(conn.0, dir, frame, missing));
    }
    fn on_close(&mut self, conn: ConnId, how: CloseKind, frame: u64, _ts: Timestamp) {
        self.ev.push(Ev::Close(conn.0, how, frame));
    }
    fn on_note(&mut self, conn: ConnId, frame: u64, note: NetNote) {
        self.ev.push(Ev::Note(conn.0, frame, note));
    }
}

impl Rec {
    /// All bytes delivered in one direction, gaps shown as `#` per missing byte.
    fn stream(&self, conn: u32, dir: Dir) -> String {
        let mut s = String::new();
        for e in &self.ev {
            match e {
                Ev::Data(c, d, _, b) if *c == conn && *d == dir => {
                    s.push_str(&String::from_utf8_lossy(b))
                }
                Ev::Gap(c, d, _, n) if *c == conn && *d == dir => {
                    s.push_str(&"#".repeat(*n as usize))
                }
                _ => {}
            }
        }
        s
    }
    fn data_and_gaps(&self) -> Vec<Ev> {
        self.ev
            .iter()
            .filter(|e| matches!(e, Ev::Data(..) | Ev::Gap(..)))
            .cloned()
            .collect()
    }
}

const CLIENT: &str = "10.0.0.1:50000";
const SERVER: &str = "10.0.0.2:445";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A segment client → server (`to_server`) or back, with ACK set unless it is a bare SYN.
fn seg<'a>(to_server: bool, seq: u32, ack: u32, flags: &str, payload: &'a [u8]) -> TcpSegment<'a> {
    let (src, dst) = if to_server {
        (addr(CLIENT), addr(SERVER))
    } else {
        (addr(SERVER), addr(CLIENT))
    };
    TcpSegment {
        src,
        dst,
        seq,
        ack,
        flags: TcpFlags {
            syn: flags.contains('S'),
            ack: flags.contains('A'),
            fin: flags.contains('F'),
            rst: flags.contains('R'),
            psh: flags.contains('P'),
        },
        window: 65535,
        payload,
        missing: 0,
    }
}

struct Run {
    r: Reassembler,
    rec: Rec,
    frame: u64,
}

impl Run {
    fn new(cfg: ReassemblyConfig) -> Self {
        Run {
            r: Reassembler::new(cfg),
            rec: Rec::default(),
            frame: 0,
        }
    }
    fn default() -> Self {
        Self::new(ReassemblyConfig::default())
    }
    fn push(&mut self, s: TcpSegment<'_>) -> u64 {
        self.frame += 1;
        self.r.push(
            self.frame,
            Timestamp(self.frame as i64 * 1000),
            &s,
            &mut self.rec,
        );
        self.frame
    }
    /// Three-way handshake with client ISN `c` and server ISN `s`.
    fn handshake(&mut self, c: u32, s: u32) {
        self.push(seg(true, c, 0, "S", b""));
        self.push(seg(false, s, c.wrapping_add(1), "SA", b""));
        self.push(seg(true, c.wrapping_add(1), s.wrapping_add(1), "A", b""));
    }
}

const C: u32 = 1000; // client ISN
const S: u32 = 5000; // server ISN

#[test]
fn in_order_data_is_delivered_from_the_frame_without_copying() {
    let mut t = Run::default();
    t.handshake(C, S);
    let payload = b"NEGOTIATE".to_vec();
    let f = t.push(seg(true, C + 1, S + 1, "AP", &payload));
    assert_eq!(
        t.rec.ev,
        vec![
            Ev::Conn(0, 1),
            Ev::Data(0, Dir::ToServer, f, b"NEGOTIATE".to_vec())
        ]
    );
    assert_eq!(t.rec.ptrs, vec![payload.as_ptr() as usize]);
    assert_eq!(t.rec.keys[0].client, addr(CLIENT));
    assert_eq!(t.rec.keys[0].server, addr(SERVER));
    assert_eq!(
        t.r.conn_key(ConnId(0)).map(|k| k.server),
        Some(addr(SERVER))
    );
    let st = t.r.stats();
    assert_eq!((st.connections, st.segments, st.out_of_order), (1, 4, 0));
}

#[test]
fn server_to_client_direction_and_other_ports_ignored() {
    let mut t = Run::default();
    t.handshake(C, S);
    let f = t.push(seg(false, S + 1, C + 1, "AP", b"reply"));
    assert_eq!(t.rec.stream(0, Dir::ToClient), "reply");
    assert_eq!(
        t.rec.data_and_gaps(),
        vec![Ev::Data(0, Dir::ToClient, f, b"reply".to_vec())]
    );
    let mut other = seg(true, 1, 1, "AP", b"http");
    other.dst = addr("10.0.0.2:80");
    t.push(other);
    assert_eq!(t.r.stats().connections, 1);
    assert_eq!(t.r.stats().segments, 4);
}

#[test]
fn out_of_order_segments_are_delivered_in_order_when_the_hole_fills() {
    let mut t = Run::default();
    t.handshake(C, S);
    let f1 = t.push(seg(true, C + 1 + 10, S + 1, "A", b"KLMNO")); // ahead
    let f2 = t.push(seg(true, C + 1 + 5, S + 1, "A", b"FGHIJ")); // ahead
    assert!(t.rec.data_and_gaps().is_empty());
    let f3 = t.push(seg(true, C + 1, S + 1, "A", b"ABCDE")); // fills
    assert_eq!(
        t.rec.data_and_gaps(),
        vec![Ev::Data(0, Dir::ToServer, f3, b"ABCDEFGHIJKLMNO".to_vec())]
    );
    assert!(f1 < f2 && f2 < f3);
    assert_eq!(t.r.stats().out_of_order, 2);
    assert_eq!(t.r.buffered_bytes(), 0);
}

#[test]
fn duplicates_and_retransmissions_are_delivered_once() {
    let mut t = Run::default();
    t.handshake(C, S);
    t.push(seg(true, C + 1, S + 1, "A", b"hello "));
    t.push(seg(true, C + 1, S + 1, "A", b"hello ")); // duplicate
    t.push(seg(true, C + 7, S + 1, "A", b"world"));
    t.push(seg(true, C + 1, S + 1, "A", b"hello ")); // late retransmission
    assert_eq!(t.rec.stream(0, Dir::ToServer), "hello world");
    assert_eq!(t.r.stats().retransmissions, 2);
}

/// Overlapping copies with different content: the first copy of each byte wins. Bytes already
/// delivered cannot be taken back, so buffered bytes follow the same rule; the outcome then
/// does not depend on whether the first copy arrived in order.
#[test]
fn overlapping_retransmission_with_other_content_first_copy_wins() {
    let mut t = Run::default();
    t.handshake(C, S);
    t.push(seg(true, C + 1, S + 1, "A", b"abcdef"));
    // Retransmission covering 3..9 with different bytes: only 6..9 is new.
    let f = t.push(seg(true, C + 4, S + 1, "A", b"XYZghi"));
    assert_eq!(t.rec.stream(0, Dir::ToServer), "abcdefghi");
    assert!(t
        .rec
        .ev
        .contains(&Ev::Data(0, Dir::ToServer, f, b"ghi".to_vec())));

    // Buffered first: 20..24 "wxyz" arrives ahead; then 12..26 with other bytes fills the
    // hole; its 20..24 part is dropped in favour of the buffered "wxyz".
    t.push(seg(true, C + 1 + 20, S + 1, "A", b"wxyz"));
    t.push(seg(true, C + 1 + 9, S + 1, "A", b"jklmnopqrst1234!!"));
    assert_eq!(t.rec.stream(0, Dir::ToServer), "abcdefghijklmnopqrstwxyz!!");
    assert_eq!(t.r.stats().overlaps, 2);
}

#[test]
fn overlapping_out_of_order_segments_fill_only_their_new_bytes() {
    let mut t = Run::default();
    t.handshake(C, S);
    t.push(seg(true, C + 1 + 4, S + 1, "A", b"EFGH"));
    t.push(seg(true, C + 1 + 10, S + 1, "A", b"KL"));
    t.push(seg(true, C + 1 + 2, S + 1, "A", b"cdefghijklmN")); // covers 2..14
    t.push(seg(true, C + 1, S + 1, "A", b"AB"));
    assert_eq!(t.rec.stream(0, Dir::ToServer), "ABcdEFGHijKLmN");
}

#[test]
fn mid_stream_connection_starts_at_first_seen_sequence_number() {
    let mut t = Run::default();
    let f1 = t.push(seg(false, 777_777, 4242, "AP", b"late reply"));
    t.push(seg(true, 4242, 777_787, "AP", b"next request"));
    assert_eq!(t.rec.ev[0], Ev::Conn(0, f1));
    assert_eq!(t.rec.ev[1], Ev::Note(0, f1, NetNote::MidStream));
    assert_eq!(t.rec.stream(0, Dir::ToClient), "late reply");
    assert_eq!(t.rec.stream(0, Dir::ToServer), "next request");
}

#[test]
fn sequence_numbers_wrap_around() {
    let mut t = Run::default();
    let isn = u32::MAX - 3; // data starts at u32::MAX - 2
    t.handshake(isn, S);
    let d0 = isn.wrapping_add(1);
    // "0123" ends at u32::MAX + 1 = 0; "89" at 4 arrives before "4567" at 0.
    t.push(seg(true, d0, S + 1, "A", b"012"));
    t.push(seg(true, d0.wrapping_add(7), S + 1, "A", b"789"));
    t.push(seg(true, d0.wrapping_add(3), S + 1, "A", b"3456"));
    t.push(seg(true, d0, S + 1, "A", b"012")); // old, before the wrap
    assert_eq!(d0.wrapping_add(3), 0);
    assert_eq!(t.rec.stream(0, Dir::ToServer), "0123456789");
    assert_eq!(t.r.stats().retransmissions, 1);
}

#[test]
fn lost_segment_acked_by_peer_becomes_a_gap_and_delivery_resumes() {
    let mut t = Run::new(ReassemblyConfig {
        reorder_window: 2,
        ..ReassemblyConfig::default()
    });
    t.handshake(C, S);
    t.push(seg(true, C + 1, S + 1, "A", b"aaaa"));
    // C+5..C+9 "bbbb" was not captured.
    t.push(seg(true, C + 9, S + 1, "A", b"cccc"));
    let ack = t.push(seg(false, S + 1, C + 13, "A", b"")); // receiver got it all
    t.push(seg(true, C + 13, S + 1, "A", b"dd"));
    assert_eq!(t.rec.stream(0, Dir::ToServer), "aaaa");
    let f = t.push(seg(true, C + 15, S + 1, "A", b"ee")); // ACK now 2 segments old
    assert_eq!(f, ack + 2);
    assert_eq!(
        t.rec.data_and_gaps()[1..],
        [
            Ev::Gap(0, Dir::ToServer, f, 4),
            Ev::Data(0, Dir::ToServer, f, b"ccccddee".to_vec()),
        ]
    );
    let st = t.r.stats();
    assert_eq!((st.gaps, st.gap_bytes), (1, 4));
}

#[test]
fn data_captured_after_its_ack_is_not_a_gap() {
    let mut t = Run::new(ReassemblyConfig {
        reorder_window: 4,
        ..ReassemblyConfig::default()
    });
    t.handshake(C, S);
    t.push(seg(false, S + 1, C + 9, "A", b"")); // ACK seen before the data it acknowledges
    t.push(seg(true, C + 5, S + 1, "A", b"5678"));
    t.push(seg(true, C + 1, S + 1, "A", b"1234"));
    t.push(seg(true, C + 9, S + 1, "A", b"9"));
    t.push(seg(true, C + 10, S + 1, "A", b"0"));
    assert_eq!(t.rec.stream(0, Dir::ToServer), "1234567890");
    assert_eq!(t.r.stats().gaps, 0);
}

#[test]
fn holes_left_at_the_end_are_reported_by_finish() {
    let mut t = Run::default();
    t.handshake(C, S);
    t.push(seg(true, C + 1, S + 1, "A", b"ab"));
    t.push(seg(true, C + 6, S + 1, "A", b"fg")); // 3 bytes missing before
    t.push(seg(false, S + 1, C + 10, "A", b"")); // acks 2 more bytes never captured
    let last = t.frame;
    t.r.finish(&mut t.rec);
    assert_eq!(t.rec.stream(0, Dir::ToServer), "ab###fg##");
    assert_eq!(
        t.rec.data_and_gaps()[1..],
        [
            Ev::Gap(0, Dir::ToServer, last, 3),
            Ev::Data(0, Dir::ToServer, last, b"fg".to_vec()),
            Ev::Gap(0, Dir::ToServer, last, 2),
        ]
    );
}

#[test]
fn fin_in_both_directions_closes_and_port_reuse_opens_a_new_connection() {
    let mut t = Run::default();
    t.handshake(C, S);
    t.push(seg(true, C + 1, S + 1, "AP", b"bye"));
    t.push(seg(true, C + 4, S + 1, "AF", b""));
    t.push(seg(false, S + 1, C + 5, "AF", b""));
    let last_ack = t.push(seg(true, C + 5, S + 2, "A", b""));
    assert!(t
        .rec
        .ev
        .contains(&Ev::Close(0, CloseKind::Fin, last_ack - 1)));
    // Same ports again: a new connection.
    let syn = t.push(seg(true, 90_000, 0, "S", b""));
    t.push(seg(false, 70_000, 90_001, "SA", b""));
    t.push(seg(true, 90_001, 70_001, "AP", b"hello again"));
    assert_eq!(
        t.rec
            .ev
            .iter()
            .filter(|e| matches!(e, Ev::Conn(..)))
            .count(),
        2
    );
    assert!(t.rec.ev.contains(&Ev::Conn(1, syn)));
    assert_eq!(t.rec.stream(1, Dir::ToServer), "hello again");
    assert_eq!(t.rec.stream(0, Dir::ToServer), "bye");
}

#[test]
fn fin_waits_for_data_before_it() {
    let mut t = Run::default();
    t.handshake(C, S);
    t.push(seg(false, S + 1, C + 1, "AF", b""));
    t.push(seg(true, C + 3, S + 2, "AF", b"cd")); // FIN after "cd", "ab" still missing
    assert!(!t.rec.ev.iter().any(|e| matches!(e, Ev::Close(..))));
    let f = t.push(seg(true, C + 1, S + 2, "A", b"ab"));
    assert_eq!(t.rec.stream(0, Dir::ToServer), "abcd");
    assert_eq!(t.rec.ev.last(), Some(&Ev::Close(0, CloseKind::Fin, f)));
    // Data after the FIN is not delivered.
    t.push(seg(true, C + 6, S + 2, "A", b"zz"));
    assert_eq!(t.rec.stream(0, Dir::ToServer), "abcd");
}

#[test]
fn reset_flushes_what_is_buffered_and_closes() {
    let mut t = Run::default();
    t.handshake(C, S);
    t.push(seg(true, C + 1, S + 1, "A", b"12"));
    t.push(seg(true, C + 5, S + 1, "A", b"56")); // "34" missing
    let rst = t.push(seg(false, S + 1, C + 1, "AR", b""));
    assert_eq!(
        t.rec.ev[t.rec.ev.len() - 3..],
        [
            Ev::Gap(0, Dir::ToServer, rst, 2),
            Ev::Data(0, Dir::ToServer, rst, b"56".to_vec()),
            Ev::Close(0, CloseKind::Rst, rst),
        ]
    );
    t.push(seg(true, C + 7, S + 1, "A", b"78")); // after the reset: ignored
    assert_eq!(t.rec.stream(0, Dir::ToServer), "12##56");
}

#[test]
fn snaplen_cut_segment_delivers_captured_bytes_then_a_gap() {
    let mut t = Run::default();
    t.handshake(C, S);
    let mut s1 = seg(false, S + 1, C + 1, "A", b"READ-HDR");
    s1.missing = 1000;
    let f1 = t.push(s1);
    let f2 = t.push(seg(false, S + 1 + 1008, C + 1, "A", b"next"));
    assert_eq!(
        t.rec.data_and_gaps(),
        vec![
            Ev::Data(0, Dir::ToClient, f1, b"READ-HDR".to_vec()),
            Ev::Gap(0, Dir::ToClient, f1, 1000),
            Ev::Data(0, Dir::ToClient, f2, b"next".to_vec()),
        ]
    );
}

#[test]
fn snaplen_cut_segment_out_of_order_keeps_its_missing_part_as_a_gap() {
    let mut t = Run::default();
    t.handshake(C, S);
    let mut cut = seg(false, S + 1 + 4, C + 1, "A", b"xy");
    cut.missing = 6; // offsets 4..12, 6..12 not captured
    t.push(cut);
    t.push(seg(false, S + 1 + 12, C + 1, "A", b"tail"));
    let f = t.push(seg(false, S + 1, C + 1, "A", b"head"));
    assert_eq!(
        t.rec.data_and_gaps(),
        vec![
            Ev::Data(0, Dir::ToClient, f, b"headxy".to_vec()),
            Ev::Gap(0, Dir::ToClient, f, 6),
            Ev::Data(0, Dir::ToClient, f, b"tail".to_vec()),
        ]
    );
}

/// What one held chunk costs besides its bytes.
const CHUNK: usize = sqos::budget::Kind::Reassembly.entry_cost();

#[test]
fn per_direction_bound_gives_up_the_hole_and_counts_it() {
    let mut t = Run::new(ReassemblyConfig {
        max_buffered_per_dir: 2 * CHUNK + 10,
        ..ReassemblyConfig::default()
    });
    t.handshake(C, S);
    // 3 bytes missing at the start, then 3 segments of 4 bytes: the third chunk exceeds the
    // bound (each chunk costs its bytes and CHUNK).
    t.push(seg(true, C + 4, S + 1, "A", b"dddd"));
    t.push(seg(true, C + 8, S + 1, "A", b"eeee"));
    let f = t.push(seg(true, C + 12, S + 1, "A", b"ffff"));
    assert_eq!(
        t.rec.ev[t.rec.ev.len() - 2..],
        [
            Ev::Gap(0, Dir::ToServer, f, 3),
            Ev::Data(0, Dir::ToServer, f, b"ddddeeeeffff".to_vec()),
        ]
    );
    assert_eq!(t.r.buffered_bytes(), 0);
    let [_, held] = t.r.memory();
    assert_eq!(
        (held.dropped, held.dropped_bytes, held.first_drop_frame),
        (1, 3, Some(f))
    );
    // The late bytes are now old.
    t.push(seg(true, C + 1, S + 1, "A", b"abc"));
    assert_eq!(t.rec.stream(0, Dir::ToServer), "###ddddeeeeffff");
}

#[test]
fn one_byte_segments_and_missing_chunks_cost_their_entries() {
    let mut t = Run::new(ReassemblyConfig {
        max_buffered_per_dir: 1 << 30,
        max_buffered_total: 100 * CHUNK,
        ..ReassemblyConfig::default()
    });
    t.handshake(C, S);
    // 1,000 one-byte segments, every other byte missing: 1,000 bytes would fit any byte bound,
    // but 1,000 chunks are ten times the bound.
    for i in 0..1000u32 {
        t.push(seg(true, C + 2 + 2 * i, S + 1, "A", b"x"));
        assert!(t.r.buffered_bytes() <= 100 * CHUNK + 100);
    }
    let [_, held] = t.r.memory();
    assert!(held.dropped > 0);
    assert!(held.peak_bytes as usize <= 101 * (CHUNK + 1));
}

#[test]
fn total_bound_relieves_the_fullest_direction() {
    let mut t = Run::new(ReassemblyConfig {
        max_buffered_total: 2 * CHUNK + 12,
        ..ReassemblyConfig::default()
    });
    t.handshake(C, S);
    // A second connection from another client port.
    let mut syn2 = seg(true, 300, 0, "S", b"");
    syn2.src = addr("10.0.0.1:50001");
    t.push(syn2);
    let mut d2 = seg(true, 303, 0, "A", b"2222222"); // 2 bytes missing before, 7 held
    d2.src = addr("10.0.0.1:50001");
    t.push(d2);
    let f = t.push(seg(true, C + 2, S + 1, "A", b"11111111")); // 1 missing, 8 held: over
                                                               // Connection 0 holds the most (8): its hole is given up.
    assert!(t.rec.ev.contains(&Ev::Gap(0, Dir::ToServer, f, 1)));
    assert_eq!(t.r.buffered_bytes(), CHUNK + 7);
    assert_eq!(t.rec.stream(1, Dir::ToServer), "");
    let [_, held] = t.r.memory();
    assert_eq!((held.dropped, held.dropped_bytes), (1, 1));
}

#[test]
fn connection_table_is_bounded() {
    let mut t = Run::new(ReassemblyConfig {
        max_connections: 4,
        ..ReassemblyConfig::default()
    });
    for port in 0..20u16 {
        let mut s = seg(true, 1, 1, "AP", b"x");
        s.src = SocketAddr::new(addr(CLIENT).ip(), 40000 + port);
        t.push(s);
    }
    assert_eq!(t.r.stats().connections, 20);
    assert!(t.r.tracked_connections() <= 4);
    assert!(t.r.conn_key(ConnId(19)).is_some());
    assert!(t.r.conn_key(ConnId(0)).is_none());
}

#[test]
fn segment_far_outside_the_window_is_dropped() {
    let mut t = Run::default();
    t.handshake(C, S);
    t.push(seg(true, C + 1 + (1 << 31) - 10, S + 1, "A", b"bogus"));
    t.push(seg(true, C + 1, S + 1, "A", b"ok"));
    t.r.finish(&mut t.rec);
    assert_eq!(t.rec.stream(0, Dir::ToServer), "ok");
    assert_eq!(t.r.stats().dropped_bytes, 5);
}
