//! The bulk path (`ReassemblyConfig::bulk_path`: plain in-order segments counted off without
//! being decoded in full) changes nothing: every record, note and statistic (the memory
//! shares' peaks included) is the same with it off, on one thread and on workers, on every
//! committed capture and on generated ones that exercise what it must hand to the full path:
//! retransmissions, reordering, gaps, snaplen cuts, VLAN tags, IPv6, many connections, and
//! encrypted sessions decrypted with their keys.

use std::path::Path;

use sqos::pipeline::PipelineConfig;
use sqos::run::{no_progress, run_capture, Ending};
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
    let mut cfg = match keys {
        Some(k) => crate::support::with_keys(&[k]),
        None => PipelineConfig::default(),
    };
    cfg.threads = threads;
    cfg.reassembly.bulk_path = bulk;
    let mut reader = sqos::run::open(path).expect("capture opens");
    let mut out = Everything::default();
    let result = run_capture(&mut reader, cfg, &mut out, &mut no_progress);
    assert!(matches!(result.ending, Ending::Clean), "{}", path.display());
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
    // Gzipped captures are streamed; unpacked, legacy pcap files are mapped and walked by the
    // bulk lane (`Pipeline::push_run`) too.
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
    assert!(in_lane * 2 > taken, "the lane took {in_lane} of {taken} segments");
}
