//! A regular file is read in chunks (the default, [`FileAccess::Auto`], until a look says the
//! map pays), its records parsed
//! where they lie in the chunks' buffers: records cut by a chunk's end, longer than the room
//! kept before a chunk (80 KiB) or than a chunk (256 KiB), give the frames the stream gives,
//! read on one thread or with a thread reading ahead; a file cut under the reader ends the
//! read, its frames intact.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use sqos::capture::{
    CaptureReader, FileAccess, MergedCaptures, PcapWriter, PcapngWriter, Reading, Timestamp,
};

/// A frame's number, timestamp, length and a digest of its bytes.
type Seen = (u64, i64, usize, u64);

/// Every frame, and how reading ended (the error's text).
fn frames(r: &mut CaptureReader) -> (Vec<Seen>, Option<String>) {
    let mut out = Vec::new();
    loop {
        match r.next_frame() {
            Ok(Some(f)) => {
                let digest = f.data.iter().fold(0u64, |h, b| {
                    h.wrapping_mul(0x100_0000_01b3).wrapping_add(u64::from(*b))
                });
                out.push((f.number, f.ts.0, f.data.len(), digest));
            }
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
}

/// The frame of index `i`, `len` bytes: an Ethernet header, then bytes that depend on both.
fn frame(i: usize, len: usize) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x88, 0xcc];
    f.extend((14..len).map(|j| (i * 7 + j) as u8));
    f.truncate(len);
    f
}

/// Frame lengths that make records of every kind a chunked read meets: small, a jumbo, one of
/// segmentation offload's 64 KiB, longer than the room before a chunk, longer than a chunk,
/// and nearly the longest record accepted (1 MiB), between runs of small ones.
const LENGTHS: [usize; 12] = [
    60, 1514, 9000, 65_535, 100_000, 60, 300_000, 1514, 1_000_000, 40, 81_900, 262_200,
];

fn legacy(n: usize) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
    for i in 0..n {
        let len = LENGTHS[i % LENGTHS.len()];
        w.write_packet(Timestamp(i as i64 * 1_000), &frame(i, len))
            .unwrap();
    }
    w.into_inner()
}

fn pcapng(n: usize) -> Vec<u8> {
    let mut w = PcapngWriter::new(Vec::new()).unwrap();
    let eth = w.add_interface(1, 0, 6).unwrap();
    for i in 0..n {
        let len = LENGTHS[i % LENGTHS.len()];
        let f = frame(i, len);
        w.write_epb(eth, Timestamp(i as i64 * 1_000), &f, len as u32)
            .unwrap();
    }
    w.into_inner()
}

/// A file in a directory removed when the value drops.
struct TempFile(PathBuf, #[allow(dead_code)] tempfile::TempDir);

impl TempFile {
    fn with(name: &str, bytes: &[u8]) -> Self {
        let dir = crate::support::scratch("sqos-chunks-");
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        TempFile(path, dir)
    }
}

fn chunked(path: &Path, ahead: bool) -> CaptureReader {
    let mut r = CaptureReader::open_as(path, FileAccess::Chunks).unwrap();
    assert!(r.is_chunked() && !r.is_mapped());
    if ahead {
        assert!(r.read_ahead(), "a helper starts");
        assert!(!r.read_ahead(), "one helper a reader");
    }
    r
}

fn streamed(path: &Path) -> CaptureReader {
    CaptureReader::from_reader(Box::new(std::fs::File::open(path).unwrap())).unwrap()
}

#[test]
fn records_across_chunks_and_longer_than_a_chunk_read_as_the_stream() {
    // 180 records: about 15 MB, 60 chunks (a helper starts after 32, see `read_ahead`).
    for (name, bytes) in [("long.pcap", legacy(180)), ("long.pcapng", pcapng(180))] {
        let file = TempFile::with(name, &bytes);
        let reference = frames(&mut streamed(&file.0));
        assert_eq!(reference.0.len(), 180, "{name}");
        assert_eq!(reference.1, None, "{name}");
        for ahead in [false, true] {
            assert_eq!(
                frames(&mut chunked(&file.0, ahead)),
                reference,
                "{name}, read ahead: {ahead}"
            );
        }
        // Cut inside a record, and the cut said.
        let cut = TempFile::with(name, &bytes[..bytes.len() / 2]);
        let reference = frames(&mut streamed(&cut.0));
        assert!(
            reference
                .1
                .as_deref()
                .is_some_and(|e| e.contains("cut off")),
            "{name}: {:?}",
            reference.1
        );
        for ahead in [false, true] {
            assert_eq!(
                frames(&mut chunked(&cut.0, ahead)),
                reference,
                "{name} cut, read ahead: {ahead}"
            );
        }
    }
}

/// Many small records over many chunks, read with a thread reading ahead (both threads take
/// chunks): the stream's frames, in order.
#[test]
fn a_file_read_ahead_gives_the_frames_the_stream_gives() {
    let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
    // 20,000 records of 100 to 1,600 bytes: about 17 MB, 65 chunks.
    for i in 0..20_000 {
        w.write_packet(Timestamp(i as i64), &frame(i, 100 + i * 37 % 1500))
            .unwrap();
    }
    let file = TempFile::with("many.pcap", &w.into_inner());
    let reference = frames(&mut streamed(&file.0));
    assert_eq!(reference.0.len(), 20_000);
    let len = std::fs::metadata(&file.0).unwrap().len();
    for _ in 0..3 {
        let mut r = chunked(&file.0, true);
        assert_eq!(frames(&mut r), reference);
        // Progress is where the reader is in the file, not what the threads read.
        assert_eq!(r.input_bytes_read(), len);
    }
    assert_eq!(frames(&mut chunked(&file.0, false)), reference);
}

/// Another writer cuts the file while a helper reads it ahead: the read ends (cut off in a
/// record, or cleanly between two) with every frame read intact, at the cut or past it by no
/// more than what was read before the cut.
#[test]
fn a_file_cut_while_read_ahead_ends_with_its_frames_intact() {
    let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
    for i in 0..24_000 {
        w.write_packet(Timestamp(i as i64), &frame(i, 1000))
            .unwrap();
    }
    let file = TempFile::with("cut.pcap", &w.into_inner());
    let mut r = chunked(&file.0, true);
    // About 12 MB read: the helper started after 8 MiB.
    const READ: u64 = 12_000;
    for i in 0..READ {
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!(f.number, i + 1);
    }
    const CUT: u64 = 14 << 20;
    OpenOptions::new()
        .write(true)
        .open(&file.0)
        .unwrap()
        .set_len(CUT)
        .unwrap();
    let (after, end) = frames(&mut r);
    let whole = (CUT as usize - 24) / 1016;
    let read = READ as usize + after.len();
    assert!(read >= whole && read < 24_000, "{read} frames");
    for (n, _, len, digest) in &after {
        let f = frame(*n as usize - 1, 1000);
        let want = f.iter().fold(0u64, |h, b| {
            h.wrapping_mul(0x100_0000_01b3).wrapping_add(u64::from(*b))
        });
        assert_eq!((*len, *digest), (1000, want), "frame {n} intact");
    }
    assert!(
        end.as_deref().is_none_or(|e| e.contains("cut off")),
        "{end:?}"
    );
}

/// On one thread, a file of 40 MB (enough for the look at three places of it) is read through
/// its map or in chunks as the look finds: the frames and the progress are the same.
#[test]
fn a_run_on_one_thread_reads_the_same_frames_whichever_way_it_chooses() {
    let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
    let (mut i, mut written) = (0, 0);
    while written < 40 << 20 {
        let len = LENGTHS[i % LENGTHS.len()];
        written += 16 + len;
        w.write_packet(Timestamp(i as i64 * 1_000), &frame(i, len))
            .unwrap();
        i += 1;
    }
    let bytes = w.into_inner();
    let file = TempFile::with("large.pcap", &bytes);
    let want = frames(&mut CaptureReader::open_as(&file.0, FileAccess::Chunks).unwrap());
    assert_eq!(want.0.len(), i);
    for _ in 0..2 {
        let mut r = CaptureReader::open_as(&file.0, FileAccess::Auto).unwrap();
        let switched = r.map_from_the_start();
        assert_eq!(switched, r.is_mapped());
        assert_eq!(!switched, r.is_chunked());
        assert!(!r.map_from_the_start(), "decided once");
        assert_eq!(frames(&mut r), want, "mapped: {switched}");
        assert_eq!(r.input_bytes_read(), bytes.len() as u64);
    }
}

/// Rotated captures read as one timeline, each file read ahead by a helper of its own while it
/// is read: the frames of the one file they were cut from, numbered on across the files.
#[test]
fn rotated_files_read_ahead_give_the_frames_of_one_file() {
    let write = |range: std::ops::Range<usize>| {
        let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
        // 20,000 records of 100 to 1,600 bytes a file: about 17 MB, 65 chunks.
        for i in range {
            w.write_packet(Timestamp(i as i64), &frame(i, 100 + i * 37 % 1500))
                .unwrap();
        }
        w.into_inner()
    };
    let whole = TempFile::with("whole.pcap", &write(0..40_000));
    let first = TempFile::with("part1.pcap", &write(0..20_000));
    let second = TempFile::with("part2.pcap", &write(20_000..40_000));
    let reference = frames(&mut streamed(&whole.0));
    assert_eq!(reference.0.len(), 40_000);
    let mut merged = MergedCaptures::new(vec![
        (first.0.clone(), chunked(&first.0, false)),
        (second.0.clone(), chunked(&second.0, false)),
    ]);
    merged.read_for(Reading::Ahead);
    let mut seen = Vec::new();
    while let Some(f) = merged.next_frame().unwrap() {
        let digest = f.data.iter().fold(0u64, |h, b| {
            h.wrapping_mul(0x100_0000_01b3).wrapping_add(u64::from(*b))
        });
        seen.push((f.number, f.ts.0, f.data.len(), digest));
    }
    assert_eq!((seen, None), reference);
    let len = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert_eq!(merged.input_bytes_read(), len(&first.0) + len(&second.0));
}
