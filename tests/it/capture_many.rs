//! Several captures are one timeline: a capture rotated into files (as `tcpdump -G/-C` or
//! `dumpcap -b` write them) gives, read as several files or a glob, in any order, what the one
//! file gives — the same records, frame numbers, flows and findings. A damaged file is named,
//! and the frames of the other files are still read.

use std::path::{Path, PathBuf};
use std::process::Output;

use sqos::capture::{CaptureReader, PcapWriter};

/// Writes the frames of `capture` into `parts` pcap files of consecutive frames in `dir`
/// (part-1.pcap, part-2.pcap, …), the way a rotating capture would.
fn rotate(capture: &Path, parts: u64, dir: &Path) -> Vec<PathBuf> {
    let mut total: u64 = 0;
    let mut r = CaptureReader::open(capture).unwrap();
    while r.next_frame().unwrap().is_some() {
        total += 1;
    }
    let per_part = total.div_ceil(parts);
    let mut r = CaptureReader::open(capture).unwrap();
    let mut files = Vec::new();
    let mut w: Option<PcapWriter<Vec<u8>>> = None;
    let flush = |w: &mut Option<PcapWriter<Vec<u8>>>, files: &mut Vec<PathBuf>| {
        if let Some(w) = w.take() {
            let path = dir.join(format!("part-{}.pcap", files.len() + 1));
            std::fs::write(&path, w.into_inner()).unwrap();
            files.push(path);
        }
    };
    while let Some(f) = r.next_frame().unwrap() {
        let writer = w.get_or_insert_with(|| PcapWriter::new(Vec::new(), f.link_type).unwrap());
        writer.write_packet(f.ts, f.data).unwrap();
        if f.number % per_part == 0 {
            flush(&mut w, &mut files);
        }
    }
    flush(&mut w, &mut files);
    assert_eq!(files.len() as u64, parts);
    files
}

use crate::support::{sqos_on as sqos, stdout_text as text};

/// The output to compare. `export --what series` writes the rows still open at the end in an
/// order that varies from run to run even on one file (a hash map's), so its lines are sorted.
fn canon(args: &[&str], o: &Output) -> Vec<String> {
    let mut lines: Vec<String> = text(o).lines().map(str::to_owned).collect();
    if args.contains(&"series") {
        lines.sort();
    }
    lines
}

#[test]
fn rotated_files_read_as_the_one_capture_they_came_from() {
    let original = crate::support::repo().join("captures/misbehaving-client.pcap.gz");
    let tmp = crate::support::scratch("sqos-many-");
    let parts = rotate(&original, 3, tmp.path());
    // On the command line out of order: the merge is by time, not by argument order.
    let shuffled = vec![parts[2].clone(), parts[0].clone(), parts[1].clone()];
    let glob = vec![tmp.path().join("part-*.pcap")];
    for args in [
        &["dissect"][..],
        &["flows"],
        &["stats", "--format", "json"],
        &["export", "--what", "series", "--format", "csv"],
    ] {
        let one = sqos(args, std::slice::from_ref(&original));
        assert!(one.status.success(), "{args:?} on the original");
        assert!(!text(&one).is_empty(), "{args:?} prints something");
        for captures in [&shuffled, &glob] {
            let many = sqos(args, captures);
            assert!(
                many.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&many.stderr)
            );
            assert_eq!(
                canon(args, &many),
                canon(args, &one),
                "{args:?} on {captures:?}"
            );
        }
    }
    // The flows continue across the files: an interval that spans all three is judged whole.
    let flows = text(&sqos(&["flows"], &shuffled));
    assert!(
        flows.contains("observed 31.0 normalized IOPS over 11.96 s (frames 2158–11509)"),
        "a finding across the files: {flows}"
    );
}

#[test]
fn a_damaged_file_is_named_and_the_others_are_read() {
    let original = crate::support::repo().join("captures/steady.pcap.gz");
    let tmp = crate::support::scratch("sqos-many-");
    let parts = rotate(&original, 3, tmp.path());
    let middle = std::fs::read(&parts[1]).unwrap();
    std::fs::write(&parts[1], &middle[..middle.len() - 10]).unwrap();

    let out = sqos(&["dissect"], &parts);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "damaged but read: {stderr}");
    assert!(
        stderr.contains(&format!("{}: capture cut off", parts[1].display())),
        "the error names the file: {stderr}"
    );
    // The third file's messages are there: all but what the cut frame held, if anything.
    let count = |o: &Output| text(o).lines().count();
    let whole = count(&sqos(&["dissect"], std::slice::from_ref(&original)));
    let first_two = count(&sqos(&["dissect"], &parts[..2]));
    let many = count(&out);
    assert!(
        many + 1 >= whole && many > first_two,
        "{many} of {whole}, {first_two} in the first two"
    );

    let missing = sqos(&["dissect"], &[tmp.path().join("nothing-*.pcap")]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no capture matches"));
}

/// A ring buffer of more files than the process may hold open (`dumpcap -b files:2000`): only
/// the files being read are open, so 100 files read under a limit of 32 descriptors, as the
/// one capture they were cut from.
#[test]
fn more_files_than_open_descriptors_are_read() {
    let original = crate::support::repo().join("captures/steady.pcap.gz");
    let tmp = crate::support::scratch("sqos-many-");
    let parts = rotate(&original, 100, tmp.path());
    let whole = sqos(
        &["stats", "--format", "json"],
        std::slice::from_ref(&original),
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 32 && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_sqos"))
        .args(["stats", "--format", "json"])
        .args(&parts)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text(&out), text(&whole));
}
