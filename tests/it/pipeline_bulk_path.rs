//! The bulk path (`ReassemblyConfig::bulk_path`: plain in-order segments counted off without
//! being decoded in full) changes nothing: every record, note and statistic (the memory
//! shares' peaks included) is the same with it off, on one thread and on workers, on every
//! committed capture and on generated ones that exercise what it must hand to the full path:
//! retransmissions, reordering, gaps, snaplen cuts, VLAN tags, IPv6, many connections, and
//! encrypted sessions decrypted with their keys.

use std::path::{Path, PathBuf};

use sqos::capture::{CaptureReader, Frame, PcapWriter, Timestamp};
use sqos::pipeline::PipelineConfig;
use sqos::run::{no_progress, open_merged, run_capture, Ending, FrameSource};
use sqos::smb2::crypto::Cipher;
use sqos::synth::{Scenario, SynthConfig};

use crate::support::{scratch, Everything};

/// What the pipeline gives on `path` read as the commands read it (records, statistics as
/// JSON) and the segments the bulk path and, of those, the bulk lane took on the calling thread.
/// With `keys`, decrypting (on one thread whatever `threads` says).
fn outcome(
    path: &Path,
    keys: Option<&Path>,
    bulk: bool,
    threads: usize,
) -> (Vec<String>, String, u64, u64) {
    let mut reader = sqos::run::open(path).expect("capture opens");
    outcome_of(&mut reader, keys, bulk, threads)
}

/// [`outcome`] of frames from `source` (one capture, or several merged).
fn outcome_of<F: FrameSource>(
    source: &mut F,
    keys: Option<&Path>,
    bulk: bool,
    threads: usize,
) -> (Vec<String>, String, u64, u64) {
    let mut cfg = match keys {
        Some(k) => crate::support::with_keys(&[k]),
        None => PipelineConfig::default(),
    };
    cfg.threads = threads;
    cfg.reassembly.bulk_path = bulk;
    let mut out = Everything::default();
    let result = run_capture(source, cfg, &mut out, &mut no_progress);
    assert!(matches!(result.ending, Ending::Clean));
    let stats = serde_json::to_string(&result.stats).expect("stats serialise");
    let r = result.reassembly;
    (out.0, stats, r.bulk_segments, r.lane_segments)
}

/// The same with the bulk path on and off, on 1 and 2 threads; returns the segments it took
/// on one thread.
fn same_either_way(path: &Path) -> (u64, u64) {
    same_either_way_with(path, None)
}

/// [`same_either_way`], decrypting with `keys` if given.
fn same_either_way_with(path: &Path, keys: Option<&Path>) -> (u64, u64) {
    let (full, full_stats, none, no_lane) = outcome(path, keys, false, 1);
    assert_eq!((none, no_lane), (0, 0), "{}: bulk path off", path.display());
    assert!(!full.is_empty(), "{}: no records", path.display());
    let (bulk, bulk_stats, taken, in_lane) = outcome(path, keys, true, 1);
    assert!(in_lane <= taken, "{}", path.display());
    assert_eq!(bulk, full, "{}", path.display());
    assert_eq!(bulk_stats, full_stats, "{}", path.display());
    for bulk in [false, true] {
        let (two, two_stats, _, _) = outcome(path, keys, bulk, 2);
        assert_eq!(two, full, "{}: 2 threads, bulk {bulk}", path.display());
        assert_eq!(two_stats, full_stats, "{}: 2 threads", path.display());
    }
    (taken, in_lane)
}

#[test]
fn every_committed_capture_gives_the_same_output_without_the_bulk_path() {
    // Gzipped captures are streamed (the bulk lane, `Pipeline::push_run`, walks the records
    // in the stream's buffer); unpacked, they are mapped and walked in the map.
    let dir = scratch("sqos-bulk-committed-");
    let (mut taken, mut in_lane) = (0, 0);
    for capture in crate::threads::committed() {
        let mut paths = vec![capture.clone()];
        if capture.extension().is_some_and(|e| e == "gz") {
            paths.push(crate::threads::gunzipped(dir.path(), &capture));
        }
        for path in paths {
            let (t, l) = same_either_way(&path);
            taken += t;
            in_lane += l;
        }
    }
    assert!(taken > 10_000, "the bulk path took {taken} segments");
    assert!(in_lane > 10_000, "the bulk lane took {in_lane} segments");
}

/// A generated capture's name and what it changes in the generator's options.
type Variant = (&'static str, fn(&mut SynthConfig));

#[test]
fn generated_captures_of_loss_reordering_cuts_vlan_ipv6_and_many_connections() {
    let dir = scratch("sqos-bulk-");
    let variants: [Variant; 8] = [
        ("retransmitted", |c| c.loss = Some(0.02)),
        ("gaps", |c| {
            c.loss = Some(0.02);
            c.loss_no_retransmit = true;
        }),
        ("reordered", |c| c.reorder = Some(0.05)),
        ("snaplen", |c| c.snaplen = Some(200)),
        ("vlan", |c| c.vlan = Some(42)),
        ("ipv6", |c| c.ipv6 = true),
        ("midstream-delayed-ack", |c| {
            c.midstream = true;
            c.delayed_ack = true;
        }),
        ("many", |c| {
            c.hosts = Some(4);
            c.channels = Some(2);
        }),
    ];
    let mut plain = 0;
    for (name, set) in variants {
        let mut cfg = SynthConfig::new(Scenario::Steady, dir.path().join(format!("{name}.pcap")));
        cfg.duration = Some(3.0);
        cfg.big_io = true;
        set(&mut cfg);
        sqos::synth::run(&cfg).expect("synth");
        let (taken, in_lane) = same_either_way(&cfg.output);
        // IPv6 takes the full path; in the others, what is plain and in order takes the bulk
        // path (with a snaplen of 200, the pure ACKs), most of it in the bulk lane's runs —
        // but for the lone ACKs between cut frames, which are not worth a run.
        if name != "ipv6" {
            assert!(taken > 1000, "{name}: the bulk path took {taken} segments");
            if name != "snaplen" {
                let share = format!("{name}: the lane took {in_lane} of {taken}");
                assert!(in_lane * 2 > taken, "{share}");
            }
            plain += 1;
        }
    }
    assert_eq!(plain, 7);
}

/// Encrypted sessions decrypted with their keys (one thread): the bulk path and the lane see
/// sealed messages the framer opens, and the ACKs between them, and change nothing.
#[test]
fn an_encrypted_capture_with_its_keys_gives_the_same_output_without_the_bulk_path() {
    let dir = scratch("sqos-bulk-sealed-");
    let mut cfg = SynthConfig::new(Scenario::Steady, dir.path().join("sealed.pcap"));
    cfg.duration = Some(3.0);
    cfg.big_io = true;
    cfg.encrypt = Some(Cipher::Aes128Gcm);
    let keys = dir.path().join("sealed.keys");
    cfg.keys_out = Some(keys.clone());
    sqos::synth::run(&cfg).expect("synth");
    let (records, stats, _, _) = outcome(&cfg.output, Some(&keys), true, 1);
    assert!(
        stats.contains("\"decrypted_messages\":") && !stats.contains("\"decrypted_messages\":0,"),
        "nothing decrypted: {stats}"
    );
    assert!(
        records.iter().any(|r| r.contains("SqosRecord")),
        "no SQOS record"
    );
    let (taken, in_lane) = same_either_way_with(&cfg.output, Some(&keys));
    eprintln!("sealed: bulk path {taken} segments, lane {in_lane}");
    // A sealed READ/WRITE's data is streamed, never decrypted: the framer counts it off, so
    // the lane takes its segments as it takes a plain one's.
    assert!(taken > 1000, "the bulk path took {taken} segments");
    assert!(
        in_lane * 2 > taken,
        "the lane took {in_lane} of {taken} segments"
    );
}

/// Writes `capture`'s frames into `sides` files (`NAME-0.pcap`, …), each frame to the file
/// `side` says, its time passed through `time` with its number.
fn deal(
    capture: &Path,
    name: &str,
    sides: usize,
    side: fn(&Frame<'_>) -> usize,
    time: fn(Timestamp, u64) -> Timestamp,
) -> Vec<PathBuf> {
    let dir = capture.parent().expect("a folder");
    let mut r = CaptureReader::open(capture).expect("open");
    let mut w: Vec<Option<PcapWriter<Vec<u8>>>> = (0..sides).map(|_| None).collect();
    while let Some(f) = r.next_frame().expect("read") {
        let writer = w[side(&f) % sides]
            .get_or_insert_with(|| PcapWriter::new(Vec::new(), f.link_type).unwrap());
        writer
            .write_packet(time(f.ts, f.number), f.data)
            .expect("write");
    }
    w.into_iter()
        .enumerate()
        .map(|(i, w)| {
            let path = dir.join(format!("{name}-{i}.pcap"));
            std::fs::write(&path, w.expect("frames on every side").into_inner()).expect("write");
            path
        })
        .collect()
}

/// Three seconds of `steady` traffic with big I/Os from `hosts` hosts, generated in `dir`.
fn steady_big_io(dir: &Path, hosts: u32) -> SynthConfig {
    let mut cfg = SynthConfig::new(Scenario::Steady, dir.join("synth.pcap"));
    cfg.duration = Some(3.0);
    cfg.big_io = true;
    cfg.hosts = Some(hosts);
    sqos::synth::run(&cfg).expect("synth");
    cfg
}

/// `seconds` of `steady` traffic with its own small I/Os (4–64 KiB) from `hosts` hosts on
/// `channels` channels each (none: the generator's defaults), generated in `dir`.
fn steady_small_io(
    dir: &Path,
    hosts: Option<u32>,
    channels: Option<u32>,
    seconds: f64,
) -> SynthConfig {
    let mut cfg = SynthConfig::new(Scenario::Steady, dir.join("synth.pcap"));
    cfg.duration = Some(seconds);
    cfg.hosts = hosts;
    cfg.channels = channels;
    sqos::synth::run(&cfg).expect("synth");
    cfg
}

/// [`same_either_way`] on `capture`, and the bulk lane's share of the bulk path's segments
/// at least `percent`.
fn lane_takes_at_least(capture: &Path, percent: u64) {
    let (taken, in_lane) = same_either_way(capture);
    eprintln!("bulk path {taken} segments, lane {in_lane}");
    assert!(taken > 1000, "the bulk path took {taken} segments");
    assert!(
        in_lane * 100 > taken * percent,
        "the lane took {in_lane} of {taken} segments"
    );
}

/// Captures read as one timeline (`MergedCaptures`) take the lane's runs too, from the file the
/// last frame came from and only while its frames come before the other files' next ones (by
/// time, ties to the file named first): the output is the same with the bulk path on and off,
/// and that of the one capture the files were dealt from.
#[test]
fn merged_captures_take_runs_in_the_merged_order() {
    let dir = scratch("sqos-bulk-merged-");
    let cfg = steady_big_io(dir.path(), 2);
    // The two hosts' connections (clients 10.0.0.11 and .12, server .100): the last bytes of
    // the IPv4 addresses tell them apart, either way.
    let by_connection: fn(&Frame<'_>) -> usize = |f| usize::from((f.data[29] ^ f.data[33]) & 1);
    let by_block: fn(&Frame<'_>) -> usize = |f| ((f.number - 1) / 37 % 2) as usize;
    // Times made distinct (a microsecond a frame on): the merge's order is then the file's.
    let distinct = |t: Timestamp, n: u64| Timestamp(t.0 + n as i64 * 1000);
    let one = deal(&cfg.output, "one", 1, |_| 0, distinct);
    let (whole, whole_stats, _, _) = outcome(&one[0], None, true, 1);
    for (name, side) in [("conns", by_connection), ("blocks", by_block)] {
        let files = deal(&one[0], name, 2, side, |t, _| t);
        let merged = |bulk| outcome_of(&mut open_merged(&files).expect("open"), None, bulk, 1);
        let (bulk, bulk_stats, taken, in_lane) = merged(true);
        eprintln!("{name}: bulk path {taken} segments, lane {in_lane}");
        assert_eq!(bulk, whole, "{name}");
        assert_eq!(bulk_stats, whole_stats, "{name}");
        assert_eq!(merged(false).0, whole, "{name}");
        assert!(
            in_lane * 2 > taken,
            "{name}: the lane took {in_lane} of {taken}"
        );
    }
    // Ties: times cut to the millisecond, so the two connections' frames share times; the
    // merge puts file 0's first, and a run of file 1 stops before a tie.
    let ms = |t: Timestamp, _| Timestamp(t.0 / 1_000_000 * 1_000_000);
    let files = deal(&cfg.output, "ties", 2, by_connection, ms);
    let merged = |bulk| outcome_of(&mut open_merged(&files).expect("open"), None, bulk, 1);
    let (bulk, bulk_stats, taken, in_lane) = merged(true);
    let (full, full_stats, _, _) = merged(false);
    eprintln!("ties: bulk path {taken} segments, lane {in_lane}");
    assert_eq!(bulk, full);
    assert_eq!(bulk_stats, full_stats);
    assert!(
        in_lane * 2 > taken,
        "ties: the lane took {in_lane} of {taken}"
    );
}

/// Runs `capture` and checks that only the segments that open and close connections were
/// decoded in full (at most 4 a connection) over at least `messages` SMB2 messages, on
/// `connections` connections.
fn only_opening_and_closing_segments_in_full(capture: &Path, connections: u64, messages: u64) {
    let (_, result) = crate::support::run(capture);
    assert!(matches!(result.ending, Ending::Clean));
    let (r, stats) = (result.reassembly, result.stats);
    let full = r.segments - r.bulk_segments;
    eprintln!(
        "{} segments, {} in full, {} connections, {} SMB2 messages",
        r.segments, full, stats.connections, stats.smb2_messages
    );
    assert_eq!(stats.connections, connections);
    assert!(
        stats.smb2_messages > messages,
        "{} messages",
        stats.smb2_messages
    );
    assert!(
        full <= 4 * stats.connections,
        "{full} segments decoded in full on {} connections",
        stats.connections
    );
}

/// A message's first segment takes the bulk path too, its bytes handed to the framer as they
/// are (no full decode, no connection lookup): on transfers without loss, only the segments
/// that open and close connections are decoded in full — fewer than one for every SMB2
/// message (each of which begins in a segment that the sink cannot count off unseen).
#[test]
fn without_loss_only_opening_and_closing_segments_are_decoded_in_full() {
    let dir = scratch("sqos-bulk-starts-");
    let cfg = steady_big_io(dir.path(), 1);
    only_opening_and_closing_segments_in_full(&cfg.output, 1, 100);
}

/// The same when hosts' channels interleave their segments (8 hosts, 2 channels each, small
/// I/Os: the last segment's connection is rarely the next one's): a plain segment of any
/// recent connection takes the bulk path, found by its header bytes, not decoded in full and
/// looked up by its key (452 of 4,329 segments were before).
#[test]
fn interleaved_connections_take_the_bulk_path_too() {
    let dir = scratch("sqos-bulk-interleaved-");
    let cfg = steady_small_io(dir.path(), Some(8), Some(2), 2.0);
    only_opening_and_closing_segments_in_full(&cfg.output, 16, 500);
}

/// Small I/Os on one connection: a message's first and last segments, whose bytes
/// the framer takes (they are not counted off unseen), are taken by the bulk lane's runs too,
/// which then go on over the message's body — the lane takes nearly every segment the bulk
/// path takes, not only the bodies' middles (1,040 of 1,646 before), and the output is the
/// same with the bulk path on and off, on one thread and on two.
#[test]
fn the_lane_takes_messages_first_and_last_segments_too() {
    let dir = scratch("sqos-bulk-lane-starts-");
    let cfg = steady_small_io(dir.path(), None, None, 3.0);
    lane_takes_at_least(&cfg.output, 90);
}

/// `capture`'s frames, written to `out`, with a minute more between each pure ACK (an
/// Ethernet/IPv4/TCP frame with no payload) and the frame before it: a quiet frame, which the
/// bulk lane takes in a run, at which every SQOS request still held is past its hold window.
fn a_minute_before_each_ack(capture: &Path, out: &Path) {
    let mut r = CaptureReader::open(capture).expect("open");
    let mut w: Option<PcapWriter<Vec<u8>>> = None;
    let mut shift = 0i64;
    while let Some(f) = r.next_frame().expect("read") {
        let d = f.data;
        let ihl = usize::from(d[14] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([d[16], d[17]]));
        let tcp = usize::from(d[14 + ihl + 12] >> 4) * 4;
        if d[23] == 6 && total == ihl + tcp {
            shift += 60_000_000_000;
        }
        w.get_or_insert_with(|| PcapWriter::new(Vec::new(), f.link_type).unwrap())
            .write_packet(Timestamp(f.ts.0 + shift), f.data)
            .expect("write");
    }
    std::fs::write(out, w.expect("frames").into_inner()).expect("write");
}

/// SQOS requests held for their responses are released by capture time (the 60 s hold
/// window): with a minute before each pure ACK, a request whose response comes after one is
/// released there, unanswered. A run that hands a segment to the layer delivers first what the
/// quiet frames before it would have released, so a response in it finds its request released
/// as frame by frame it would: the output is the same with the bulk path on and off.
#[test]
fn requests_held_in_a_run_are_released_where_frame_by_frame_they_would_be() {
    let dir = scratch("sqos-bulk-held-");
    let cfg = steady_small_io(dir.path(), None, None, 3.0);
    let spaced = dir.path().join("spaced.pcap");
    a_minute_before_each_ack(&cfg.output, &spaced);
    let (records, ..) = outcome(&spaced, None, false, 1);
    let released = records.iter().filter(|r| r.contains("hold window")).count();
    assert!(released > 0, "no request released by the hold window");
    lane_takes_at_least(&spaced, 90);
}

/// Small I/Os on 8 hosts' 2 channels each, whose segments interleave: a run that comes to a
/// plain segment of another recent connection goes on with that connection's lane, so the
/// lane takes nearly every segment the bulk path takes here too (4,272 of 4,297; 3,785 before,
/// when each such segment ended the run and was pushed alone), and the output is the same with
/// the bulk path on and off, on one thread and on two.
#[test]
fn a_run_goes_on_with_the_connection_whose_segment_comes_next() {
    let dir = scratch("sqos-bulk-lane-moves-");
    let cfg = steady_small_io(dir.path(), Some(8), Some(2), 2.0);
    lane_takes_at_least(&cfg.output, 97);
}
