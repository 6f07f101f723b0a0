//! `--threads N`: the output is the single thread's, byte for byte, on every capture we have.

use std::path::{Path, PathBuf};

use sqos::pipeline::{
    CaptureNote, ChannelRecord, CloseRecord, IoRecord, OpenRecord, Pipeline, PipelineConfig,
    RecordSink, SqosRecord,
};

use crate::support::{captures_in, need, repo, sqos_on, stdout_text};

/// Every capture committed to the repository.
fn committed() -> Vec<PathBuf> {
    let mut v = captures_in(&repo().join("captures"));
    v.extend(captures_in(&repo().join("captures/hostile")));
    v.extend(captures_in(&repo().join("captures/real")));
    assert!(v.len() >= 28, "captures found: {v:?}");
    v
}

/// What the commands print (stdout and stderr) with `--threads 1` and with more, compared.
fn same_output_with_threads(captures: &[PathBuf]) {
    let commands: [&[&str]; 4] = [
        &["dissect", "-T", "jsonl"],
        &["dissect"],
        // The text table includes the memory shares' peaks.
        &["stats"],
        &["flows", "--format", "json"],
    ];
    for capture in captures {
        for args in commands {
            let one = sqos_on(
                &[args, &["--threads", "1"]].concat(),
                std::slice::from_ref(capture),
            );
            // (dissect prints nothing for a capture without SQOS messages; stats always does.)
            assert!(
                args[0] != "stats" || stdout_text(&one).contains("frames"),
                "{}: {args:?} printed no statistics",
                capture.display()
            );
            for n in ["2", "3"] {
                let many = sqos_on(
                    &[args, &["--threads", n]].concat(),
                    std::slice::from_ref(capture),
                );
                assert_eq!(
                    stdout_text(&many),
                    stdout_text(&one),
                    "{}: {args:?} --threads {n}",
                    capture.display()
                );
                assert_eq!(many.stderr, one.stderr, "{}: {args:?}", capture.display());
                assert_eq!(many.status.code(), one.status.code());
            }
        }
    }
}

#[test]
fn every_committed_capture_gives_the_same_output_on_several_threads() {
    same_output_with_threads(&committed());
}

#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs ../shared/real-captures (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn every_shared_real_capture_gives_the_same_output_on_several_threads() {
    let captures = captures_in(&need::real_captures());
    assert!(captures.len() >= 15, "{captures:?}");
    same_output_with_threads(&captures);
}

/// Every record, note and channel event, in the order given, as text.
#[derive(Default)]
struct Everything(Vec<String>);

impl RecordSink for Everything {
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.0.push(format!("{rec:?}"));
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        self.0.push(format!("{rec:?}"));
    }
    fn on_close(&mut self, rec: &CloseRecord) {
        self.0.push(format!("{rec:?}"));
    }
    fn on_io(&mut self, rec: &IoRecord) {
        self.0.push(format!("{rec:?}"));
    }
    fn on_channel(&mut self, rec: &ChannelRecord) {
        self.0.push(format!("{rec:?}"));
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.0.push(format!("note {note:?}"));
    }
    fn on_info(&mut self, note: &CaptureNote) {
        self.0.push(format!("info {note:?}"));
    }
}

/// The library's pipeline on `threads`: how many workers it ran, what it gave, its statistics.
fn pipeline_on(path: &Path, cfg: PipelineConfig) -> (usize, Vec<String>, String) {
    let mut reader = sqos::run::open(path).expect("capture opens");
    let mut p = Pipeline::new(cfg);
    let workers = p.workers();
    let mut out = Everything::default();
    while let Some(frame) = reader.next_frame().expect("capture reads") {
        p.push_frame(&frame, &mut out);
    }
    p.finish(&mut out);
    let stats = serde_json::to_string(p.stats()).expect("stats serialise");
    (workers, out.0, stats)
}

#[test]
fn the_pipeline_gives_every_record_in_the_same_order_on_workers() {
    let mut spread = 0;
    for capture in committed() {
        let threads = |n| PipelineConfig {
            threads: n,
            ..PipelineConfig::default()
        };
        let (w1, one, stats1) = pipeline_on(&capture, threads(1));
        let (w4, four, stats4) = pipeline_on(&capture, threads(4));
        assert_eq!((w1, w4), (0, 4), "{}", capture.display());
        assert!(!one.is_empty(), "{}", capture.display());
        assert_eq!(four, one, "{}", capture.display());
        assert_eq!(stats4, stats1, "{}", capture.display());
        let conns: serde_json::Value = serde_json::from_str(&stats1).expect("json");
        if conns["connections"].as_u64().is_some_and(|c| c >= 4) {
            spread += 1;
        }
    }
    // Captures with several connections (multichannel's 6, Samba's 32 channels), so that
    // several workers had some of them.
    assert!(spread >= 2, "{spread} captures with 4 or more connections");
}

#[test]
fn keys_and_kept_frames_run_on_one_thread() {
    let capture = repo().join("captures/real/smb311-encrypted.pcap");
    let keyed = PipelineConfig {
        threads: 4,
        ..crate::support::with_keys(&[&crate::support::real_keys()])
    };
    let (workers, with_keys, _) = pipeline_on(&capture, keyed.clone());
    assert_eq!(workers, 0);
    let one = PipelineConfig {
        threads: 1,
        ..keyed
    };
    assert_eq!(pipeline_on(&capture, one).1, with_keys);
    let kept = PipelineConfig {
        threads: 4,
        keep_frames: true,
        ..PipelineConfig::default()
    };
    assert_eq!(Pipeline::new(kept).workers(), 0);
    let plain = PipelineConfig {
        threads: 4,
        ..PipelineConfig::default()
    };
    assert_eq!(Pipeline::new(plain).workers(), 4);
}

/// A run stopped part-way (the reader of the output went away) ends its workers cleanly.
#[test]
fn a_closed_output_stops_a_threaded_run() {
    let capture = repo().join("captures/multichannel.pcap.gz");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' dissect --threads 2 --quiet '{}' | head -n 1",
            env!("CARGO_BIN_EXE_sqos"),
            capture.display()
        ))
        .output()
        .expect("sh runs");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    assert!(out.status.success());
}
