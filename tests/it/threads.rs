//! `--threads N`: the output is the single thread's, byte for byte, on every capture we have.

use std::path::{Path, PathBuf};

use sqos::pipeline::{Pipeline, PipelineConfig};

use crate::support::{captures_in, need, pipeline_on, repo, sqos_on, stdout_text};

/// Every capture committed to the repository.
pub(crate) fn committed() -> Vec<PathBuf> {
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
            // 2: the reading thread and the pager; 3: and a sole worker; 4: two workers.
            for n in ["2", "3", "4"] {
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

/// Committed capture `name` (gzipped, in captures/) unpacked into `dir`: a regular file,
/// memory-mapped.
fn unpacked(dir: &Path, name: &str) -> PathBuf {
    gunzipped(dir, &repo().join("captures").join(name))
}

/// Capture `gz` unpacked into `dir` under its name without `.gz`.
pub(crate) fn gunzipped(dir: &Path, gz: &Path) -> PathBuf {
    let name = gz.file_name().expect("a file").to_string_lossy();
    let path = dir.join(name.trim_end_matches(".gz"));
    let file = std::fs::File::open(gz).expect("capture");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(file), &mut bytes)
        .expect("gunzip");
    std::fs::write(&path, bytes).expect("write");
    path
}

/// The committed captures are mostly gzipped, which is streamed: the workers get copies of the
/// frames. Unpacked, the same captures are regular files, read in chunks (ahead on a thread of
/// its own with `--threads 2` and more) or, with `SQOS_READ=map`, memory-mapped (with
/// `--threads 2`, a legacy pcap file's records indexed ahead of the reader on the other thread;
/// the workers read the frames where they lie in the map); the output is still the gzip's on
/// one thread.
#[test]
fn regular_files_of_many_connections_give_the_same_output_on_several_threads() {
    let dir = crate::support::scratch("sqos-threads-");
    let mut files = Vec::new();
    for name in [
        "multichannel.pcap.gz",
        "noisy-neighbour.pcapng.gz",
        "lossy-network.pcapng.gz",
        "steady-ipv6.pcapng.gz",
    ] {
        let gz = repo().join("captures").join(name);
        let path = unpacked(dir.path(), name);
        assert!(sqos::run::open(&path).expect("opens").is_chunked());
        for args in [&["dissect", "-T", "jsonl"][..], &["stats"]] {
            let gz_one = sqos_on(
                &[args, &["--threads", "1"]].concat(),
                std::slice::from_ref(&gz),
            );
            for (access, n) in [("chunks", "1"), ("chunks", "2"), ("chunks", "3")]
                .into_iter()
                .chain([("map", "1"), ("map", "2"), ("map", "3")])
            {
                let read = std::process::Command::new(env!("CARGO_BIN_EXE_sqos"))
                    .env("SQOS_READ", access)
                    .args(args)
                    .args(["--threads", n, "--quiet"])
                    .arg(&path)
                    .output()
                    .expect("sqos runs");
                assert_eq!(
                    stdout_text(&read),
                    stdout_text(&gz_one),
                    "{name}: {args:?} --threads {n}, SQOS_READ={access}"
                );
            }
        }
        files.push(path);
    }
    same_output_with_threads(&files);
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

#[test]
fn the_pipeline_gives_every_record_in_the_same_order_on_workers() {
    let mut spread = 0;
    for capture in committed() {
        let threads = |n| PipelineConfig {
            threads: n,
            ..PipelineConfig::default()
        };
        let (w1, one, stats1) = pipeline_on(&capture, threads(1), true);
        let (w4, four, stats4) = pipeline_on(&capture, threads(4), true);
        let (w3, three, stats3) = pipeline_on(&capture, threads(3), false);
        // N threads: the calling thread, the pager and N - 2 workers.
        assert_eq!((w1, w4, w3), (0, 2, 1), "{}", capture.display());
        assert!(!one.is_empty(), "{}", capture.display());
        assert_eq!(four, one, "{}", capture.display());
        assert_eq!(stats4, stats1, "{}", capture.display());
        assert_eq!(three, one, "{}", capture.display());
        assert_eq!(stats3, stats1, "{}", capture.display());
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
    let (workers, with_keys, _) = pipeline_on(&capture, keyed.clone(), true);
    assert_eq!(workers, 0);
    let one = PipelineConfig {
        threads: 1,
        ..keyed
    };
    assert_eq!(pipeline_on(&capture, one, true).1, with_keys);
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
    // The reading thread, the pager and two workers.
    assert_eq!(Pipeline::new(plain).workers(), 2);
}

/// A run stopped part-way (the reader of the output went away) ends its workers cleanly.
#[test]
fn a_closed_output_stops_a_threaded_run() {
    let capture = repo().join("captures/multichannel.pcap.gz");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' dissect --threads 3 --quiet '{}' | head -n 1",
            env!("CARGO_BIN_EXE_sqos"),
            capture.display()
        ))
        .output()
        .expect("sh runs");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    assert!(out.status.success());
}

/// `--separate` and `check A B` share `--threads N` out between the files read at once and
/// their workers (`src/cli/threads.rs`); whatever N, each file's output is its own.
#[test]
fn files_in_parallel_share_the_threads_and_keep_their_output() {
    let dir = crate::support::scratch("sqos-threads-");
    let mut files = Vec::new();
    for name in ["multichannel.pcap.gz", "steady.pcap.gz"] {
        files.push(unpacked(dir.path(), name));
    }
    let separate = |n: &str| sqos_on(&["stats", "--separate", "--threads", n], &files);
    let one = separate("1");
    assert!(one.status.success(), "{one:?}");
    let text = stdout_text(&one);
    // Each file's table, labelled with its file.
    assert!(text
        .lines()
        .any(|l| l.starts_with(&format!("{}: ", files[0].display()))));
    for n in ["2", "4", "64"] {
        assert_eq!(stdout_text(&separate(n)), text, "--threads {n}");
    }
    let rules = repo().join("captures/steady.rules.toml");
    // The same capture twice: two judged at once.
    let check = |n: &str| {
        let steady = files[1].to_str().expect("utf-8");
        let mut args = vec!["check", "--rules", rules.to_str().expect("utf-8")];
        args.extend(["--threads", n, steady]);
        sqos_on(&args, std::slice::from_ref(&files[1]))
    };
    let one = check("1");
    assert!(stdout_text(&one).contains("steady.pcap"), "{one:?}");
    for n in ["2", "4"] {
        let many = check(n);
        assert_eq!(stdout_text(&many), stdout_text(&one), "check --threads {n}");
        assert_eq!(many.status.code(), one.status.code());
    }
}
