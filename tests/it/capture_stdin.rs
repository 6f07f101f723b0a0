//! `-` reads the capture from standard input, also when it arrives slowly through a pipe and
//! when it is gzip-compressed: the CLI sees every frame.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use flate2::write::GzEncoder;
use flate2::Compression;
use sqos::capture::{PcapWriter, Timestamp};

fn capture(frames: u64) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
    for i in 0..frames {
        // Ethernet frames of an unrelated EtherType: read and counted, nothing to decode.
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x88, 0xcc];
        f.extend(std::iter::repeat_n(i as u8, 100));
        w.write_packet(Timestamp(i as i64 * 1_000_000), &f).unwrap();
    }
    w.into_inner()
}

/// Runs `sqos stats - --format json`, feeding `input` in small pieces with pauses.
fn stats_from_stdin(input: Vec<u8>) -> serde_json::Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(["stats", "-", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        for piece in input.chunks(333) {
            stdin.write_all(piece).unwrap();
            stdin.flush().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn slow_stdin_pipe_delivers_every_frame() {
    let v = stats_from_stdin(capture(40));
    assert_eq!(v["frames"], 40);
}

#[test]
fn gzip_on_stdin_is_recognised() {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(&capture(25)).unwrap();
    let v = stats_from_stdin(e.finish().unwrap());
    assert_eq!(v["frames"], 25);
}
