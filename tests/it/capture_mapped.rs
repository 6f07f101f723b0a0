//! A regular file is read through a memory map: the frames are those the streaming reader gives
//! (pcap and pcapng), and a file that shrinks while mapped ends the read with an error naming
//! the cut instead of killing the process (SIGBUS), the frames before it standing.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sqos::capture::{
    CaptureReader, FileAccess, PcapOptions, PcapWriter, PcapngWriter, Timestamp, TsPrecision,
};

/// A file in a directory removed when the value drops.
struct TempFile(PathBuf, #[allow(dead_code)] tempfile::TempDir);

impl TempFile {
    fn new(name: &str) -> Self {
        let dir = crate::support::scratch("sqos-mapped-");
        TempFile(dir.path().join(name), dir)
    }
}

/// `n` Ethernet frames of 1,000 bytes (an unrelated EtherType), each filled with its index.
fn pcap(n: u64) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
    for i in 0..n {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x88, 0xcc];
        f.resize(1000, i as u8);
        w.write_packet(Timestamp(i as i64 * 1_000_000), &f).unwrap();
    }
    w.into_inner()
}

/// `path` read through a memory map (not the default, [`FileAccess::Auto`]: in chunks, and on
/// one thread through the map where a look finds that pays).
fn open_mapped(path: &Path) -> Result<CaptureReader, sqos::capture::CaptureError> {
    CaptureReader::open_as(path, FileAccess::Map)
}

/// `pcap(n)` written to a new file `name`, and that file opened through its map.
fn mapped_pcap(name: &str, n: u64) -> (TempFile, CaptureReader) {
    let file = TempFile::new(name);
    std::fs::write(&file.0, pcap(n)).unwrap();
    let reader = open_mapped(&file.0).unwrap();
    (file, reader)
}

/// A frame's number, timestamp, bytes, interface and link type.
type Read1 = (u64, i64, Vec<u8>, u32, u32);

/// Every frame, and how reading ended (the error's text).
fn frames(r: &mut CaptureReader) -> (Vec<Read1>, Option<String>) {
    let mut out = Vec::new();
    loop {
        match r.next_frame() {
            Ok(Some(f)) => out.push((f.number, f.ts.0, f.data.to_vec(), f.interface, f.link_type)),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
}

/// The file streamed and read by the general path alone (`set_walk(false)`): the reference
/// the record walk, in a map or a stream's buffer, is compared with.
fn streamed(path: &Path) -> CaptureReader {
    let mut r = streamed_walked(path);
    r.set_walk(false);
    r
}

/// The file streamed as a pipe is read: whole records walked where they lie in the buffer.
fn streamed_walked(path: &Path) -> CaptureReader {
    CaptureReader::from_reader(Box::new(std::fs::File::open(path).unwrap())).unwrap()
}

/// `bytes` written to a file named `name` and read as `access` says, then streamed by the
/// general path: the frames and endings of each. Streamed with the walk, they are the general
/// path's.
fn read_and_streamed(
    name: &str,
    bytes: &[u8],
    access: FileAccess,
) -> [(Vec<Read1>, Option<String>); 2] {
    let file = TempFile::new(name);
    std::fs::write(&file.0, bytes).unwrap();
    let mut mapped = CaptureReader::open_as(&file.0, access).unwrap();
    match access {
        FileAccess::Map => assert!(mapped.is_mapped()),
        FileAccess::Chunks | FileAccess::Auto => assert!(mapped.is_chunked()),
    }
    let reference = frames(&mut streamed(&file.0));
    assert_eq!(
        frames(&mut streamed_walked(&file.0)),
        reference,
        "{name}: walked in the stream's buffer"
    );
    [frames(&mut mapped), reference]
}

#[test]
fn mapped_files_give_the_frames_the_stream_gives() {
    let repo = crate::support::repo();
    for rel in [
        "captures/real/smb311-multichannel.pcap",
        "captures/real/smb311-encrypted-aes-128-ccm.pcap",
    ] {
        let path = repo.join(rel);
        let mut mapped = open_mapped(&path).unwrap();
        assert!(mapped.is_mapped(), "{rel}: a regular file is mapped");
        let (m, m_end) = frames(&mut mapped);
        let (s, s_end) = frames(&mut streamed(&path));
        assert!(!m.is_empty(), "{rel}: frames read");
        assert_eq!(m, s, "{rel}: the same frames mapped and streamed");
        assert_eq!(m_end, s_end, "{rel}: the same ending");
    }
    // pcapng (the committed ones are gzipped, and gzip is streamed, not mapped).
    for rel in [
        "captures/noisy-neighbour.pcapng.gz",
        "captures/steady-ipv6.pcapng.gz",
    ] {
        let gz = repo.join(rel);
        let mut streamed_gz = open_mapped(&gz).unwrap();
        assert!(!streamed_gz.is_mapped(), "{rel}: gzip input is streamed");
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap())
            .read_to_end(&mut plain)
            .unwrap();
        let file = TempFile::new("plain.pcapng");
        std::fs::write(&file.0, &plain).unwrap();
        let mut mapped = open_mapped(&file.0).unwrap();
        assert!(mapped.is_mapped(), "{rel}: the plain file is mapped");
        let (m, m_end) = frames(&mut mapped);
        assert!(!m.is_empty());
        assert_eq!((m, m_end), frames(&mut streamed_gz), "{rel}");
    }
}

#[test]
fn a_cut_mapped_file_ends_like_a_cut_stream() {
    let bytes = pcap(50);
    let cut = bytes.len() - 300; // inside the last record
    let file = TempFile::new("cut.pcap");
    std::fs::write(&file.0, &bytes[..cut]).unwrap();
    let mut mapped = open_mapped(&file.0).unwrap();
    assert!(mapped.is_mapped());
    let (m, m_end) = frames(&mut mapped);
    let (s, s_end) = frames(&mut streamed(&file.0));
    assert_eq!(m.len(), 49);
    assert_eq!(m, s);
    assert_eq!(m_end, s_end);
    assert!(m_end.unwrap().contains("cut off in frame 50"));
}

/// Legacy pcap in both byte orders and precisions, whole and damaged (cut inside a record's
/// header, cut inside its bytes, a record claiming too many bytes): the mapped reader, which
/// takes sane whole records in one look, gives the stream's frames and ending.
#[test]
fn mapped_legacy_pcap_reads_as_the_stream_whatever_the_layout_or_damage() {
    legacy_pcap_reads_as_the_stream(FileAccess::Map);
}

/// The same read in chunks.
#[test]
fn chunked_legacy_pcap_reads_as_the_stream_whatever_the_layout_or_damage() {
    legacy_pcap_reads_as_the_stream(FileAccess::Chunks);
}

fn legacy_pcap_reads_as_the_stream(access: FileAccess) {
    let mut checked = 0;
    for (big_endian, precision) in [(false, TsPrecision::Micro), (true, TsPrecision::Nano)] {
        let opts = PcapOptions {
            big_endian,
            precision,
            ..PcapOptions::default()
        };
        let mut w = PcapWriter::with_options(Vec::new(), opts).unwrap();
        for (i, len) in [60usize, 0, 1514, 100].into_iter().enumerate() {
            let frame = vec![i as u8; len];
            w.write_packet(Timestamp(1_700_000_000_123_456_789 + i as i64), &frame)
                .unwrap();
        }
        let whole = w.into_inner();
        // The third record (of 1,514 bytes) starts after the header and two records.
        let third = 24 + (16 + 60) + 16;
        let mut oversized = whole.clone();
        let caplen = if big_endian {
            (64u32 << 20).to_be_bytes()
        } else {
            (64u32 << 20).to_le_bytes()
        };
        oversized[third + 8..third + 12].copy_from_slice(&caplen);
        let cases = [
            ("whole", whole.clone(), None),
            (
                "cut in a header",
                whole[..third + 9].to_vec(),
                Some("cut off in frame 3"),
            ),
            (
                "cut in a frame",
                whole[..third + 16 + 700].to_vec(),
                Some("cut off in frame 3"),
            ),
            ("oversized", oversized, Some("corrupt capture at frame 3")),
        ];
        for (what, bytes, ending) in cases {
            let [(m, m_end), (s, s_end)] = read_and_streamed("layout.pcap", &bytes, access);
            assert_eq!(m, s, "{what}, big endian {big_endian}");
            assert_eq!(m_end, s_end, "{what}, big endian {big_endian}");
            assert_eq!(m.len(), if ending.is_none() { 4 } else { 2 }, "{what}");
            match ending {
                None => assert_eq!(m_end, None),
                Some(e) => assert!(
                    m_end.as_deref().is_some_and(|t| t.contains(e)),
                    "{what}: {m_end:?}"
                ),
            }
            // The timestamp's precision and byte order were honoured.
            let ts1 = if precision == TsPrecision::Nano {
                1_700_000_000_123_456_790
            } else {
                1_700_000_000_123_456_000
            };
            assert_eq!(m[1].1, ts1, "{what}");
            assert_eq!(m[1].2, Vec::<u8>::new(), "{what}: the empty frame");
            checked += 1;
        }
    }
    assert_eq!(checked, 8);
}

/// pcapng as the mapped reader walks it (enhanced packet blocks where they lie, anything else
/// through pcap-parser): two sections in both byte orders, interfaces of several link types
/// and time resolutions, padding, simple and custom blocks among the packets, and damage (a
/// trailing length that disagrees, captured bytes past the block, a packet for an interface
/// the section did not describe, a cut): the frames and ending of the stream.
#[test]
fn mapped_pcapng_reads_as_the_stream_whatever_the_layout_or_damage() {
    pcapng_reads_as_the_stream(FileAccess::Map);
}

/// The same read in chunks.
#[test]
fn chunked_pcapng_reads_as_the_stream_whatever_the_layout_or_damage() {
    pcapng_reads_as_the_stream(FileAccess::Chunks);
}

fn pcapng_reads_as_the_stream(access: FileAccess) {
    let mut w = PcapngWriter::new(Vec::new()).unwrap();
    let eth = w.add_interface(1, 0, 6).unwrap();
    let raw = w.add_interface_with_offset(101, 0, 9, 1_000).unwrap();
    let t = |i: i64| Timestamp(1_700_000_000_123_456_789 + i * 1_000);
    w.write_epb(eth, t(0), &[1; 60], 60).unwrap();
    w.write_epb(raw, t(1), &[2; 101], 101).unwrap();
    w.write_block(0x0000_0BAD, &[0; 8]).unwrap();
    w.write_epb(eth, t(2), &[], 0).unwrap();
    w.write_spb(&[3; 64], 64).unwrap();
    // The block whose damage the cases below make: the fifth packet.
    let fifth = w.bytes() as usize;
    w.write_epb(eth, t(3), &[4; 1514], 1514).unwrap();
    w.write_epb(raw, t(4), &[5; 40], 1500).unwrap();
    let whole_le = w.into_inner();
    let mut w = PcapngWriter::with_byte_order(whole_le.clone(), true).unwrap();
    let sll = w.add_interface(113, 0, 0x80 | 20).unwrap();
    w.write_epb(sll, t(5), &[6; 77], 77).unwrap();
    let whole = w.into_inner();

    let word = |v: u32| v.to_le_bytes();
    let mut trailer = whole.clone();
    let fifth_len = 28 + 1516 + 4;
    trailer[fifth + fifth_len - 4..fifth + fifth_len].copy_from_slice(&word(9));
    let mut caplen = whole.clone();
    caplen[fifth + 20..fifth + 24].copy_from_slice(&word(4000));
    // Past what a streaming reader's buffer holds (a case the `mapped` fuzz target found: the
    // stream called it BufferTooSmall, the map a short record).
    let mut huge = whole.clone();
    huge[fifth + 20..fifth + 24].copy_from_slice(&word(0xff00_004e));
    let mut interface = whole.clone();
    interface[fifth + 8..fifth + 12].copy_from_slice(&word(7));
    // A block too short for an enhanced packet block's fields: short whatever bytes follow it
    // (a case the `mapped` fuzz target found: the stream's parser read on past the block and
    // called it malformed, a chunk that ended after the block, short).
    let mut short = whole.clone();
    short[fifth + 4..fifth + 8].copy_from_slice(&word(16));
    let cases = [
        ("whole", whole.clone(), 7),
        ("trailing length", trailer, 4),
        ("captured bytes past the block", caplen, 4),
        ("captured bytes past any buffer", huge, 4),
        ("undescribed interface", interface, 4),
        ("block shorter than its fields", short, 4),
        ("cut in a block", whole[..fifth + 700].to_vec(), 4),
    ];
    for (what, bytes, count) in cases {
        let [(m, m_end), (s, s_end)] = read_and_streamed("layout.pcapng", &bytes, access);
        assert_eq!(m, s, "{what}");
        assert_eq!(m_end, s_end, "{what}");
        assert_eq!(m.len(), count, "{what}: {m_end:?}");
        assert_eq!(m_end.is_some(), count < 7, "{what}: {m_end:?}");
        if what == "block shorter than its fields" {
            assert!(
                m_end
                    .as_deref()
                    .is_some_and(|e| e.contains("shorter than its contents claim")),
                "{what}: {m_end:?}"
            );
        }
    }
    // What the walk read: interfaces, link types, padding, times with their resolution and
    // offset, the big-endian section's interface.
    let [(m, _), _] = read_and_streamed("whole.pcapng", &whole, access);
    let sizes: Vec<_> = m.iter().map(|f| (f.2.len(), f.3, f.4)).collect();
    assert_eq!(
        sizes,
        [
            (60, 0, 1),
            (101, 1, 101),
            (0, 0, 1),
            (64, 0, 1),
            (1514, 0, 1),
            (40, 1, 101),
            (77, 0, 113)
        ]
    );
    assert_eq!(m[1].1, t(1).0);
    assert_eq!(m[4].1, t(3).0 / 1000 * 1000, "microseconds");
}

/// The resident KiB of this process's maps of `path` (`/proc/self/smaps`: `Rss` counts the
/// pages mapped).
fn resident_kib(path: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = path.to_str().unwrap();
    let mut ours = false;
    let mut kib = 0;
    for line in smaps.lines() {
        if let Some(rss) = line.strip_prefix("Rss:") {
            if ours {
                kib += rss
                    .trim()
                    .trim_end_matches(" kB")
                    .parse::<u64>()
                    .unwrap_or(0);
            }
        } else if line
            .split_whitespace()
            .next()
            .is_some_and(|w| w.contains('-'))
        {
            // A map's first line: its address range, …, and its file.
            ours = line.ends_with(name);
        }
    }
    kib
}

/// Another writer cuts `path` to `len` bytes while `r` reads it: the frames `r` reads on, and
/// its end, the error that says the file shrank.
fn read_on_after_cut(r: &mut CaptureReader, path: &Path, len: u64) -> Vec<Read1> {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
    let (after, end) = frames(r);
    let end = end.expect("the read ends with an error");
    assert!(
        end.contains("shrank while it was being read"),
        "the error says the file shrank: {end}"
    );
    after
}

#[test]
fn a_file_that_shrinks_while_mapped_ends_with_an_error_not_a_crash() {
    // 400 records of 1,016 bytes after the 24-byte header: about 400 KB over ~100 pages.
    let bytes = pcap(400);
    let file = TempFile::new("shrinks.pcap");
    std::fs::write(&file.0, &bytes).unwrap();

    let mut r = open_mapped(&file.0).unwrap();
    assert!(r.is_mapped());
    let mut before = Vec::new();
    for _ in 0..10 {
        let f = r.next_frame().unwrap().unwrap();
        before.push((f.number, f.data.to_vec()));
    }
    // Another writer cuts the file at a page boundary (64 KiB) while we read it: every page
    // from there on is gone from under the map.
    const CUT: u64 = 64 * 1024;
    let after = read_on_after_cut(&mut r, &file.0, CUT);
    // The frames wholly before the cut are read, intact; the one across it is not.
    let whole = (CUT as usize - 24) / 1016;
    assert_eq!(before.len() + after.len(), whole);
    for (i, (n, _, data, _, _)) in after.iter().enumerate() {
        assert_eq!(*n, 11 + i as u64);
        assert_eq!(data.len(), 1000);
        assert!(
            data[14..].iter().all(|b| *b == (10 + i) as u8),
            "frame {n} intact"
        );
    }
    // Later calls stay at the end, and the file can be read again (the handler only patched
    // that one map).
    assert!(matches!(r.next_frame(), Ok(None)));
    drop(r);
    let mut again = open_mapped(&file.0).unwrap();
    let (frames_again, end_again) = frames(&mut again);
    assert_eq!(frames_again.len(), whole);
    assert!(end_again.unwrap().contains("cut off"));
    // And the file grows back: nothing of the patched map is left over.
    let mut f = OpenOptions::new().append(true).open(&file.0).unwrap();
    f.write_all(&bytes[CUT as usize..]).unwrap();
    drop(f);
    let (all, clean) = frames(&mut open_mapped(&file.0).unwrap());
    assert_eq!(all.len(), 400);
    assert_eq!(clean, None);
}

/// The same with the pager (`--threads 2`) mapping the pages ahead of the reader from another
/// thread: a cut behind what it mapped, and ahead, is still a cut, and the pager ends.
#[test]
fn a_file_that_shrinks_while_paged_ahead_ends_with_an_error_not_a_crash() {
    // 12,000 records: about 12 MB, three times what the pager maps ahead.
    let (file, mut r) = mapped_pcap("paged.pcap", 12_000);
    let map = r.shared_map().expect("mapped");
    let pager = map.pager().expect("a pager starts");
    assert!(map.pager().is_none(), "one pager a map");
    for i in 0..5_000u64 {
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!(f.data[999], i as u8);
    }
    // The reader has given back the pages before 4 MiB and touched ~1 MB past them; the pager
    // keeps 3 MiB past them mapped. Without it the map held 2,048 KiB (the kernel maps a
    // little around each fault).
    let mut resident = 0;
    for _ in 0..500 {
        resident = resident_kib(&file.0);
        if resident >= 3 * 1024 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(resident >= 3 * 1024, "the pager mapped {resident} KiB");
    // Cut 1 MiB past the reader (inside what the pager has mapped by now).
    reads_on_to_the_cut(&mut r, &file.0, 5_000, 6 << 20);
    drop(pager);
}

/// The same with the records indexed ahead (`--threads 2` on a legacy pcap file): the file
/// cut inside the step the indexer walks next, so that its loads, not the reader's, are likely
/// the first past the end. Whichever thread faults first, the map is patched as for the
/// reader alone: the reader ends with the cut, nothing crashes, and the indexer ends.
#[test]
fn a_file_that_shrinks_while_indexed_ahead_ends_with_an_error_not_a_crash() {
    let (file, mut r) = mapped_pcap("indexed.pcap", 12_000);
    r.read_for(sqos::capture::Reading::Ahead);
    let map = r.shared_map().expect("mapped");
    // ~7.1 MB in: the reader has given back 6 MiB, and the indexer walks up to 10 MiB.
    for i in 0..7_000u64 {
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!(f.data[999], i as u8);
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(map.records_indexed() > 0, "indexed");
    // Cut at 9 MiB: past 8 MiB the reader gives its step back, and the indexer walks 10-12.
    reads_on_to_the_cut(&mut r, &file.0, 7_000, 9 << 20);
    drop(r);
}

/// After `read` frames of `pcap(..)` in `path` read from `r`, cuts the file to `cut` bytes and
/// reads on: the frames up to the cut, each the file's, then the error that says it shrank.
fn reads_on_to_the_cut(r: &mut CaptureReader, path: &Path, read: usize, cut: u64) {
    let after = read_on_after_cut(r, path, cut);
    let whole = (cut as usize - 24) / 1016;
    assert_eq!(read + after.len(), whole);
    for (n, _, data, _, _) in &after {
        assert!(data[14..].iter().all(|b| *b == (*n - 1) as u8), "frame {n}");
    }
}

/// Reads the frames of `pcap(32_000)` in `path` from `r` to the end, each checked, and gives the
/// most of the file's map found resident (KiB), looked at every 500 frames.
fn most_resident_reading(r: &mut CaptureReader, path: &Path) -> u64 {
    let (mut most, mut samples) = (0, 0);
    for i in 0..32_000u64 {
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!(f.data[999], i as u8);
        if i % 500 == 499 {
            most = most.max(resident_kib(path));
            samples += 1;
        }
    }
    assert!(r.next_frame().unwrap().is_none());
    assert_eq!(samples, 64);
    most
}

/// With the pager mapping the pages ahead, the map's resident pages stay within what the reader
/// has not given back (a 2 MiB step) and the pager's window past it (3 MiB), however long the
/// file: the pages behind the reader are given back, and the pager does not run on. (Without
/// releases, or with a pager that ran on, 32 MB would be resident.)
#[test]
fn the_pager_keeps_the_maps_resident_pages_within_its_window() {
    // 32,000 records: about 32 MB, six times the bound.
    let (file, mut r) = mapped_pcap("window.pcap", 32_000);
    let map = r.shared_map().expect("mapped");
    let pager = map.pager().expect("a pager starts");
    let most = most_resident_reading(&mut r, &file.0);
    drop(pager);
    // One release step (2 MiB) and the pager's window (3 MiB), each rounded up to the 2 MiB
    // folios the page cache may hold the file in (mapped whole), and what the pager maps of a
    // window the reader has passed before it gives it back (a pager that lags on a loaded
    // machine): 8 MiB. 4,096 KiB measured; 31,752 with releases switched off.
    assert!(most <= 8 * 1024, "{most} KiB resident");
}

/// `--threads 2` on one legacy pcap file read through its map: the thread to spare indexes its
/// records ahead of the reader (`capture::index`) instead of paging. The frames are the ones
/// the reader gives alone, the index was filled, and the map's resident pages stay within the
/// reader's step and the one after it, which the indexer walks (2 MiB each, rounded up to the
/// folios the page cache may hold the file in, and a step the indexer walks as the reader
/// passes it on a loaded machine): 8 MiB. (Unbounded, the indexer ran as far ahead as its ring
/// of record places let it: 18,432 KiB.)
#[test]
fn the_indexer_keeps_the_maps_resident_pages_within_the_next_step() {
    let (file, mut r) = mapped_pcap("indexed.pcap", 32_000);
    r.read_for(sqos::capture::Reading::Ahead);
    let map = r.shared_map().expect("mapped");
    assert!(map.pager().is_none(), "the reader started its indexer");
    let most = most_resident_reading(&mut r, &file.0);
    drop(r);
    assert!(map.records_indexed() > 0, "indexed");
    assert!(most <= 8 * 1024, "{most} KiB resident");
}

/// `n` frames like `pcap`'s in each layout a run's walk has a loop of its own for (legacy pcap
/// little-endian in µs, big-endian in ns, pcapng), every fifth a second earlier than the one
/// before (captures are not always in time order).
fn layouts(n: u64) -> [(&'static str, Vec<u8>); 3] {
    let frame = |i: u64| {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x88, 0xcc];
        f.resize(1000, i as u8);
        f
    };
    let ts = |i: u64| Timestamp(i as i64 * 1_000_000 - if i % 5 == 4 { 1_000_000_000 } else { 0 });
    let be = PcapOptions {
        big_endian: true,
        precision: TsPrecision::Nano,
        ..PcapOptions::default()
    };
    let mut le = PcapWriter::new(Vec::new(), 1).unwrap();
    let mut bn = PcapWriter::with_options(Vec::new(), be).unwrap();
    let mut ng = PcapngWriter::new(Vec::new()).unwrap();
    let eth = ng.add_interface(1, 0, 6).unwrap();
    for i in 0..n {
        le.write_packet(ts(i), &frame(i)).unwrap();
        bn.write_packet(ts(i), &frame(i)).unwrap();
        ng.write_epb(eth, ts(i), &frame(i), 1000).unwrap();
    }
    [
        ("pcap", le.into_inner()),
        ("big-endian pcap", bn.into_inner()),
        ("pcapng", ng.into_inner()),
    ]
}

/// Runs that end at a refused frame, mixed with `peek_ts` and `next_frame` in every order (a
/// merge of captures peeks before it reads), hand out every frame once and in order, each
/// with its own bytes: the refused record is walked once, and read by the general path when
/// `peek_ts` comes first. Each run says how many frames it took, its last and the latest time
/// among them, in each layout.
#[test]
fn runs_ended_by_a_refusal_hand_out_every_frame_once() {
    for (layout, bytes) in layouts(200) {
        let file = TempFile::new("runs.cap");
        std::fs::write(&file.0, &bytes).unwrap();
        for how in ["mapped", "streamed"] {
            let what = format!("{layout}, {how}");
            let mut r = if how == "mapped" {
                open_mapped(&file.0).unwrap()
            } else {
                streamed_walked(&file.0)
            };
            let mut seen: Vec<(u64, u8)> = Vec::new();
            let mut runs = 0;
            for step in 0.. {
                let mut taken: Vec<(u64, i64)> = Vec::new();
                let mut take = |f: &sqos::capture::Frame<'_>| {
                    let yes = f.number % 7 != 0 && f.number % 11 != 3;
                    if yes {
                        seen.push((f.number, f.data[999]));
                        taken.push((f.number, f.ts.0));
                    }
                    yes
                };
                if step % 2 == 0 {
                    let run = r.take_run(5, &mut take);
                    match (run, taken.last()) {
                        (None, None) => {}
                        (Some(run), Some(&(last, last_ts))) => {
                            runs += 1;
                            assert_eq!(run.frames, taken.len() as u64, "{what}");
                            assert_eq!((run.last.0, run.last.1 .0), (last, last_ts), "{what}");
                            let latest = taken.iter().map(|t| t.1).max();
                            assert_eq!(Some(run.latest.0), latest, "{what}");
                        }
                        (run, last) => panic!("{what}: run {run:?}, last taken {last:?}"),
                    }
                }
                if step % 3 == 0 && r.peek_ts().unwrap().is_none() {
                    break;
                }
                match r.next_frame().unwrap() {
                    Some(f) => seen.push((f.number, f.data[999])),
                    None => break,
                }
            }
            let want: Vec<(u64, u8)> = (0..200).map(|i| (i + 1, i as u8)).collect();
            assert_eq!(seen, want, "{what}");
            // Runs were taken in every layout and both ways of reading (not all refused).
            assert!(runs > 20, "{what}: {runs} runs");
        }
    }
}

/// A pcapng file read with a thread to spare has its blocks indexed ahead as a legacy pcap
/// file's records are, and gives the stream's frames, whichever byte order its first section
/// has: over a second section in the other byte order too, where the indexer, reading the first
/// section's, finds no sane block and stops.
#[test]
fn a_pcapng_file_is_indexed_ahead_and_reads_as_the_stream() {
    for first_big_endian in [false, true] {
        let file = TempFile::new("indexed.pcapng");
        let mut w = PcapngWriter::with_byte_order(Vec::new(), first_big_endian).unwrap();
        let eth = w.add_interface(1, 0, 9).unwrap();
        let packet = |i: u64| {
            let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x88, 0xcc];
            f.resize(1000, i as u8);
            f
        };
        for i in 0..8_000u64 {
            w.write_epb(eth, Timestamp(i as i64 * 1_000_000), &packet(i), 1000)
                .unwrap();
        }
        let mut w = PcapngWriter::with_byte_order(w.into_inner(), !first_big_endian).unwrap();
        let eth = w.add_interface(1, 0, 6).unwrap();
        for i in 8_000..10_000u64 {
            w.write_epb(eth, Timestamp(i as i64 * 1_000_000), &packet(i), 1000)
                .unwrap();
        }
        std::fs::write(&file.0, w.into_inner()).unwrap();
        let want = frames(&mut streamed(&file.0));
        assert_eq!(want.0.len(), 10_000);
        assert_eq!(want.1, None);
        let mut r = open_mapped(&file.0).unwrap();
        r.read_for(sqos::capture::Reading::Ahead);
        let map = r.shared_map().expect("mapped");
        let mut got = Vec::new();
        for _ in 0..3_000 {
            let f = r.next_frame().unwrap().unwrap();
            got.push((f.number, f.ts.0, f.data.to_vec(), f.interface, f.link_type));
        }
        // Given time, the indexer has walked the step after the reader's (where a loaded
        // machine started it late, from a guessed block start there).
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(
            map.records_indexed() > 0,
            "indexed, big endian {first_big_endian}"
        );
        let rest = frames(&mut r);
        got.extend(rest.0);
        assert_eq!((got, rest.1), want, "big endian {first_big_endian}");
    }
}
