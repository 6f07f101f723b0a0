//! Live output: a record is written and flushed as soon as it is complete when the capture
//! arrives through a pipe that then stalls, and a closed stdout (`| head -1`) ends the run at
//! once — without waiting for more output to fail, and although the input has not ended.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sqos::capture::{CaptureReader, PcapWriter, Timestamp};

/// Only a guard against a hang: the tests assert what happens, not how fast.
const GUARD: Duration = Duration::from_secs(120);

/// The frames 1..=`last` of a capture, as a pcap stream.
fn head_of(path: &Path, last: u64) -> Vec<u8> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut w: Option<PcapWriter<Vec<u8>>> = None;
    while let Some(f) = r.next_frame().unwrap() {
        let w = w.get_or_insert_with(|| PcapWriter::new(Vec::new(), f.link_type).unwrap());
        w.write_packet(f.ts, f.data).unwrap();
        if f.number == last {
            break;
        }
    }
    w.unwrap().into_inner()
}

/// `n` Ethernet frames of an unrelated EtherType (read and counted, nothing to decode), after
/// the pcap header `PcapWriter` writes: the caller strips the first 24 bytes.
fn filler(n: u64) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
    for i in 0..n {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x88, 0xcc];
        f.extend(std::iter::repeat_n(i as u8, 100));
        w.write_packet(Timestamp(2_000_000_000_000_000_000), &f)
            .unwrap();
    }
    w.into_inner().split_off(24)
}

/// `sqos dissect -` with both ends piped. Its first stdout line arrives on the channel with the
/// reader, so that the caller can close the pipe by dropping it.
type FirstLine = mpsc::Receiver<(String, BufReader<ChildStdout>)>;

fn dissect_stdin(extra: &[&str]) -> (Child, ChildStdin, FirstLine) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(["dissect", "-"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        if reader.read_line(&mut line).is_ok() {
            let _ = tx.send((line.trim_end().to_string(), reader));
        }
    });
    (child, stdin, rx)
}

/// The first SQOS message of steady.pcap.gz as `dissect --format jsonl` writes it, and the
/// frame that completes it (a request waits for its response).
fn first_message() -> (String, u64) {
    let cap = crate::support::repo().join("captures/steady.pcap.gz");
    let out = Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(["dissect", "--format", "jsonl"])
        .arg(&cap)
        .output()
        .unwrap();
    let first = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    let done = v["response_frame"].as_u64().unwrap();
    (first, done)
}

#[test]
fn a_record_is_printed_while_the_input_pipe_stalls() {
    let (first, done) = first_message();
    let cap = crate::support::repo().join("captures/steady.pcap.gz");
    let (mut child, mut stdin, lines) = dissect_stdin(&["--format", "jsonl"]);
    // The frames up to the one that completes the first message, then nothing: the pipe stays
    // open, as `tcpdump -w - | sqos dissect -` does between packets.
    stdin.write_all(&head_of(&cap, done)).unwrap();
    stdin.flush().unwrap();
    let (line, _stdout) = lines
        .recv_timeout(GUARD)
        .expect("no line while the input stalls");
    assert_eq!(line, first);
    assert!(
        child.try_wait().unwrap().is_none(),
        "sqos ended although its input has not"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_closed_stdout_ends_the_run_although_the_input_goes_on() {
    let (first, done) = first_message();
    let cap = crate::support::repo().join("captures/steady.pcap.gz");
    let (mut child, mut stdin, lines) = dissect_stdin(&["--format", "jsonl"]);
    stdin.write_all(&head_of(&cap, done)).unwrap();
    stdin.flush().unwrap();
    let (line, stdout) = lines.recv_timeout(GUARD).expect("no first line");
    assert_eq!(line, first);
    // `| head -1`: the reader goes away after one line.
    drop(stdout);
    // More frames, none of them SQOS (so no write can fail), and the input never ends: sqos
    // must notice the closed pipe by itself and stop.
    let more = filler(50_000);
    let feeder = std::thread::spawn(move || {
        // Fails with a broken pipe once sqos has gone, which is the point.
        let _ = stdin.write_all(&more);
        let _ = stdin.flush();
        std::thread::sleep(GUARD);
        drop(stdin);
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < GUARD,
            "sqos still reads with nobody reading its output"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{status:?}");
    assert!(!feeder.is_finished(), "the input ended before sqos stopped");
}
