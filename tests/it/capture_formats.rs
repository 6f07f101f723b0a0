//! The capture reader on captures written in code: pcap (µs, ns, big endian), pcapng (several
//! interfaces and sections, resolutions, simple and obsolete packet blocks), gzip, slow pipes,
//! and damaged input (cut-off, garbage, corrupt or oversized records).

use std::io::{self, Cursor, Read, Write};
use std::sync::{Arc, Mutex};

use flate2::write::GzEncoder;
use flate2::Compression;
use sqos::capture::{
    CaptureError, CaptureFormat, CaptureReader, PcapOptions, PcapWriter, PcapngWriter, Timestamp,
    TsPrecision,
};

/// Owned copy of a frame, to compare whole captures.
#[derive(Debug, Clone, PartialEq, Eq)]
struct F {
    number: u64,
    ts: i64,
    interface: u32,
    link_type: u32,
    data: Vec<u8>,
    orig_len: u32,
}

fn reader(bytes: Vec<u8>) -> CaptureReader {
    CaptureReader::from_reader(Box::new(Cursor::new(bytes))).expect("a capture")
}

/// All frames, and the error that ended the capture if any.
fn read_all(mut r: CaptureReader) -> (Vec<F>, Option<CaptureError>) {
    let mut out = Vec::new();
    loop {
        match r.next_frame() {
            Ok(Some(f)) => out.push(F {
                number: f.number,
                ts: f.ts.0,
                interface: f.interface,
                link_type: f.link_type,
                data: f.data.to_vec(),
                orig_len: f.orig_len,
            }),
            Ok(None) => return (out, None),
            Err(e) => {
                // After an error the reader is finished; what was read stands.
                assert!(matches!(r.next_frame(), Ok(None)));
                return (out, Some(e));
            }
        }
    }
}

fn frame(n: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| n.wrapping_add(i as u8)).collect()
}

const T0: i64 = 1_700_000_000_123_456_789; // ns

fn pcap(opts: PcapOptions, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut w = PcapWriter::with_options(Vec::new(), opts).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(Timestamp(T0 + i as i64 * 1_000_001), f)
            .unwrap();
    }
    w.into_inner()
}

#[test]
fn pcap_microseconds_little_endian() {
    let frames = [frame(1, 60), frame(2, 1514), frame(3, 0)];
    let bytes = pcap(PcapOptions::default(), &frames);
    let r = reader(bytes.clone());
    assert_eq!(
        r.format(),
        CaptureFormat::Pcap {
            nanosecond: false,
            big_endian: false
        }
    );
    let (got, err) = read_all(r);
    assert!(err.is_none());
    assert_eq!(got.len(), 3);
    for (i, f) in got.iter().enumerate() {
        assert_eq!(f.number, i as u64 + 1);
        assert_eq!(f.link_type, 1);
        assert_eq!(f.data, frames[i]);
        assert_eq!(f.orig_len as usize, frames[i].len());
    }
    // µs precision: the ns digits are lost.
    assert_eq!(got[0].ts, 1_700_000_000_123_456_000);
    assert_eq!(got[1].ts, 1_700_000_000_124_456_000);
    let mut r = reader(bytes.clone());
    while r.next_frame().unwrap().is_some() {}
    assert_eq!(r.bytes_read(), bytes.len() as u64);
    assert_eq!(r.frames_read(), 3);
}

#[test]
fn pcap_nanoseconds_big_endian() {
    let frames = [frame(9, 100), frame(8, 42)];
    let opts = PcapOptions {
        link_type: 101,
        precision: TsPrecision::Nano,
        big_endian: true,
        ..PcapOptions::default()
    };
    let bytes = pcap(opts, &frames);
    assert_eq!(&bytes[..4], &[0xa1, 0xb2, 0x3c, 0x4d]);
    let r = reader(bytes);
    assert_eq!(
        r.format(),
        CaptureFormat::Pcap {
            nanosecond: true,
            big_endian: true
        }
    );
    let (got, err) = read_all(r);
    assert!(err.is_none());
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].ts, T0);
    assert_eq!(got[1].ts, T0 + 1_000_001);
    assert_eq!(got[1].data, frames[1]);
    assert_eq!(got[1].link_type, 101);
}

/// The "modified" pcap format (magic 0xa1b2cd34, Kuznetzov's patches): 24-byte record headers
/// whose first 16 bytes are the usual ones. Read from a stream and through a memory map.
#[test]
fn pcap_modified_format_records() {
    let frames = [frame(4, 70), frame(5, 1514), frame(6, 0)];
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&0xa1b2_cd34u32.to_le_bytes());
    bytes.extend_from_slice(&2u16.to_le_bytes());
    bytes.extend_from_slice(&4u16.to_le_bytes());
    bytes.extend_from_slice(&[0; 8]); // thiszone, sigfigs
    bytes.extend_from_slice(&65535u32.to_le_bytes());
    bytes.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
    for (i, f) in frames.iter().enumerate() {
        bytes.extend_from_slice(&(1_700_000_000 + i as u32).to_le_bytes());
        bytes.extend_from_slice(&(123_456 + i as u32).to_le_bytes());
        bytes.extend_from_slice(&(f.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&(f.len() as u32 + 10).to_le_bytes()); // cut by 10 bytes
        bytes.extend_from_slice(&[2, 0, 0, 0, 8, 0, 0, 0]); // ifindex, protocol, type, pad
        bytes.extend_from_slice(f);
    }
    let check = |(got, err): (Vec<F>, Option<CaptureError>)| {
        assert!(err.is_none(), "{err:?}");
        assert_eq!(got.len(), 3);
        for (i, g) in got.iter().enumerate() {
            assert_eq!(
                g.ts,
                (1_700_000_000 + i as i64) * 1_000_000_000 + (123_456 + i as i64) * 1000
            );
            assert_eq!(g.data, frames[i]);
            assert_eq!(g.orig_len as usize, frames[i].len() + 10);
            assert_eq!(g.link_type, 1);
        }
    };
    check(read_all(reader(bytes.clone())));
    let dir = crate::support::scratch("sqos-formats-");
    let path = dir.path().join("modified.pcap");
    std::fs::write(&path, &bytes).unwrap();
    let mapped = CaptureReader::open_as(&path, sqos::capture::FileAccess::Map).unwrap();
    assert!(mapped.is_mapped());
    check(read_all(mapped));
    let chunked = CaptureReader::open(&path).unwrap();
    assert!(chunked.is_chunked());
    check(read_all(chunked));
}

#[test]
fn snaplen_cut_frame_keeps_its_wire_length() {
    let opts = PcapOptions {
        snaplen: 64,
        ..PcapOptions::default()
    };
    let bytes = pcap(opts, &[frame(1, 1000)]);
    let mut r = reader(bytes);
    let f = r.next_frame().unwrap().unwrap();
    assert_eq!((f.data.len(), f.orig_len), (64, 1000));
    assert!(f.is_truncated());
}

/// pcapng: interface 0 Ethernet in µs, interface 1 raw IP in ns, interleaved.
fn two_interface_ng() -> Vec<u8> {
    let mut w = PcapngWriter::new(Vec::new()).unwrap();
    assert_eq!(w.add_interface(1, 0, 6).unwrap(), 0);
    assert_eq!(w.add_interface(101, 0, 9).unwrap(), 1);
    w.write_epb(0, Timestamp(T0), &frame(1, 61), 61).unwrap();
    w.write_epb(1, Timestamp(T0 + 5), &frame(2, 30), 30)
        .unwrap();
    w.write_epb(0, Timestamp(T0 + 2_000_000_000), &frame(3, 70), 1500)
        .unwrap();
    w.into_inner()
}

#[test]
fn pcapng_two_interfaces_with_their_own_link_type_and_resolution() {
    let r = reader(two_interface_ng());
    assert_eq!(r.format(), CaptureFormat::PcapNg);
    let (got, err) = read_all(r);
    assert!(err.is_none());
    let summary: Vec<_> = got
        .iter()
        .map(|f| {
            (
                f.number,
                f.interface,
                f.link_type,
                f.ts,
                f.data.len(),
                f.orig_len,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, 0, 1, 1_700_000_000_123_456_000, 61, 61),
            (2, 1, 101, T0 + 5, 30, 30),
            (3, 0, 1, 1_700_000_002_123_456_000, 70, 1500),
        ]
    );
    assert_eq!(got[0].data, frame(1, 61));
}

#[test]
fn pcapng_sections_restart_interfaces_and_frame_numbers_continue() {
    let mut w = PcapngWriter::new(Vec::new()).unwrap();
    w.add_interface(1, 0, 6).unwrap();
    w.write_epb(0, Timestamp(T0), &frame(1, 20), 20).unwrap();
    w.new_section().unwrap();
    w.add_interface(113, 128, 0x80 | 10).unwrap(); // SLL, 1/1024 s units
    w.write_epb(
        0,
        Timestamp(3 * 1_000_000_000 + 500_000_000),
        &frame(2, 40),
        40,
    )
    .unwrap();
    // A statistics block (type 5) in between is skipped.
    w.write_block(5, &[0u8; 12]).unwrap();
    // Simple packet block: interface 0, cut to the interface snaplen (128).
    w.write_spb(&frame(3, 200), 200).unwrap();
    // Obsolete packet block (type 2): if 0, drops 0, ts 2048 units = 2 s, 5 of 9 bytes.
    let mut pb = Vec::new();
    pb.extend_from_slice(&0u16.to_le_bytes());
    pb.extend_from_slice(&0u16.to_le_bytes());
    pb.extend_from_slice(&0u32.to_le_bytes());
    pb.extend_from_slice(&2048u32.to_le_bytes());
    pb.extend_from_slice(&5u32.to_le_bytes());
    pb.extend_from_slice(&9u32.to_le_bytes());
    pb.extend_from_slice(b"hello");
    w.write_block(2, &pb).unwrap();
    let (got, err) = read_all(reader(w.into_inner()));
    assert!(err.is_none(), "{err:?}");
    let summary: Vec<_> = got
        .iter()
        .map(|f| (f.number, f.link_type, f.ts, f.data.len(), f.orig_len))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, 1, 1_700_000_000_123_456_000, 20, 20),
            (2, 113, 3_500_000_000, 40, 40),
            // SPBs have no time of their own: the previous frame's.
            (3, 113, 3_500_000_000, 128, 200),
            (4, 113, 2_000_000_000, 5, 9),
        ]
    );
    assert_eq!(got[2].data, frame(3, 128));
    assert_eq!(got[3].data, b"hello");
}

fn gzip(parts: &[&[u8]]) -> Vec<u8> {
    // Each part becomes one gzip member, as `cat a.gz b.gz` produces.
    let mut out = Vec::new();
    for p in parts {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(p).unwrap();
        out.extend(e.finish().unwrap());
    }
    out
}

#[test]
fn gzip_input_is_detected_and_counted_in_both_units() {
    let plain = two_interface_ng();
    let (half1, half2) = plain.split_at(plain.len() / 2);
    let gz = gzip(&[half1, half2]);
    let mut r = reader(gz.clone());
    assert!(r.is_gzip());
    let mut n = 0;
    while r.next_frame().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 3);
    assert_eq!(r.bytes_read(), plain.len() as u64);
    assert_eq!(r.input_bytes_read(), gz.len() as u64);
    let (a, _) = read_all(reader(gz));
    let (b, _) = read_all(reader(plain));
    assert_eq!(a, b);
}

/// Hands out at most a few bytes per read, like a slow pipe.
struct Trickle {
    data: Vec<u8>,
    pos: usize,
    step: usize,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.step = self.step % 7 + 1;
        let n = self.step.min(buf.len()).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[test]
fn short_reads_from_a_pipe_are_not_the_end() {
    for bytes in [
        two_interface_ng(),
        pcap(PcapOptions::default(), &[frame(1, 300), frame(2, 5)]),
        gzip(&[&two_interface_ng()]),
    ] {
        let expected = read_all(reader(bytes.clone())).0;
        let slow = CaptureReader::from_reader(Box::new(Trickle {
            data: bytes,
            pos: 0,
            step: 0,
        }))
        .unwrap();
        let (got, err) = read_all(slow);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(got, expected);
        assert!(!got.is_empty());
    }
}

#[test]
fn cut_off_last_packet_names_frame_and_offset_and_keeps_earlier_frames() {
    let bytes = pcap(
        PcapOptions::default(),
        &[frame(1, 100), frame(2, 100), frame(3, 100)],
    );
    let cut = bytes[..bytes.len() - 30].to_vec();
    let (got, err) = read_all(reader(cut));
    assert_eq!(got.len(), 2);
    let err = err.expect("an error");
    let offset = 24 + 2 * (16 + 100);
    assert!(
        matches!(err, CaptureError::Truncated { frame: 3, offset: o } if o == offset),
        "{err:?}"
    );
    assert!(!err.is_unusable());
    assert_eq!(
        err.to_string(),
        format!("capture cut off in frame 3 at offset {offset}")
    );

    // pcapng, cut inside the block header of the third packet.
    let ng = two_interface_ng();
    let cut = ng[..ng.len() - (32 + 72 + 4) + 6].to_vec();
    let (got, err) = read_all(reader(cut));
    assert_eq!(got.len(), 2);
    assert!(matches!(
        err,
        Some(CaptureError::Truncated { frame: 3, .. })
    ));
}

#[test]
fn garbage_and_empty_input_are_not_captures() {
    // Nothing at all is said to be empty.
    let err = CaptureReader::from_reader(Box::new(Cursor::new(Vec::new())))
        .err()
        .expect("rejected");
    assert!(matches!(err, CaptureError::Empty), "{err:?}");
    assert!(err.is_unusable());
    for bytes in [
        b"GET / HTTP/1.1\r\nHost: example\r\n\r\n".to_vec(),
        vec![0xd4, 0xc3],
    ] {
        let err = CaptureReader::from_reader(Box::new(Cursor::new(bytes)))
            .err()
            .expect("rejected");
        assert!(
            matches!(err, CaptureError::NotACapture { offset: 0 }),
            "{err:?}"
        );
        assert!(err.is_unusable());
    }
    // gzip of garbage: still not a capture.
    let err = CaptureReader::from_reader(Box::new(Cursor::new(gzip(&[b"not pcap data"]))))
        .err()
        .expect("rejected");
    assert!(matches!(err, CaptureError::NotACapture { offset: 0 }));
}

#[test]
fn corrupt_blocks_name_frame_and_offset() {
    // A block length that is not a multiple of 4 after the first packet.
    let mut ng = two_interface_ng();
    let first_epb = 28 + 20 + 32; // SHB, IDB (µs, no options), IDB with tsresol option
    let second_epb = first_epb + 32 + 64;
    ng[second_epb + 4] = 0x3d;
    let (got, err) = read_all(reader(ng));
    assert_eq!(got.len(), 1);
    match err {
        Some(CaptureError::Corrupt {
            frame,
            offset,
            reason,
        }) => {
            assert_eq!((frame, offset), (2, second_epb as u64));
            assert!(reason.contains("length"), "{reason}");
        }
        other => panic!("{other:?}"),
    }

    // A packet for an interface that was never described.
    let mut w = PcapngWriter::new(Vec::new()).unwrap();
    w.add_interface(1, 0, 6).unwrap();
    let mut epb = Vec::new();
    for v in [7u32, 0, 0, 4, 4] {
        epb.extend_from_slice(&v.to_le_bytes());
    }
    epb.extend_from_slice(b"abcd");
    w.write_block(6, &epb).unwrap();
    let (got, err) = read_all(reader(w.into_inner()));
    assert!(got.is_empty());
    assert!(
        matches!(
            err,
            Some(CaptureError::Corrupt {
                frame: 1,
                offset: 48,
                ..
            })
        ),
        "{err:?}"
    );
}

#[test]
fn oversized_records_do_not_grow_the_buffer() {
    // A 200 KiB frame is fine.
    let big = frame(5, 200 * 1024);
    let (got, err) = read_all(reader(pcap(
        PcapOptions::default(),
        std::slice::from_ref(&big),
    )));
    assert!(err.is_none());
    assert_eq!(got[0].data, big);

    // A record claiming 256 MiB is damage, reported before reading it.
    let mut bytes = pcap(PcapOptions::default(), &[frame(1, 10), frame(2, 10)]);
    let second = 24 + 16 + 10;
    bytes[second + 8..second + 12].copy_from_slice(&(256u32 << 20).to_le_bytes());
    let (got, err) = read_all(reader(bytes));
    assert_eq!(got.len(), 1);
    assert!(
        matches!(&err, Some(CaptureError::Corrupt { frame: 2, offset, .. }) if *offset == second as u64),
        "{err:?}"
    );
}

/// A file another process is still writing.
#[derive(Clone, Default)]
struct Growing(Arc<Mutex<(Vec<u8>, usize)>>);

impl Read for Growing {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut g = self.0.lock().unwrap();
        let (data, pos) = &mut *g;
        let n = buf.len().min(data.len() - *pos);
        buf[..n].copy_from_slice(&data[*pos..*pos + n]);
        *pos += n;
        Ok(n)
    }
}

#[test]
fn follow_mode_waits_for_a_partly_written_record() {
    let bytes = pcap(PcapOptions::default(), &[frame(1, 50), frame(2, 50)]);
    let file = Growing::default();
    file.0
        .lock()
        .unwrap()
        .0
        .extend_from_slice(&bytes[..24 + 66 + 20]);
    let mut r = CaptureReader::from_reader(Box::new(file.clone())).unwrap();
    r.set_follow(true);
    assert_eq!(r.next_frame().unwrap().map(|f| f.number), Some(1));
    assert!(r.next_frame().unwrap().is_none()); // frame 2 only partly there
    file.0
        .lock()
        .unwrap()
        .0
        .extend_from_slice(&bytes[24 + 66 + 20..]);
    let f = r.next_frame().unwrap().expect("frame 2 once written");
    assert_eq!((f.number, f.data.to_vec()), (2, frame(2, 50)));
    assert!(r.next_frame().unwrap().is_none());
}

#[test]
fn open_reports_missing_file_by_name() {
    let err = CaptureReader::open(std::path::Path::new("/nonexistent/x.pcap"))
        .err()
        .expect("error");
    assert!(err.to_string().starts_with("/nonexistent/x.pcap: "));
    assert!(err.is_unusable());
}

#[test]
fn pcapng_big_endian_section_with_offset_then_little_endian_section() {
    let mut w = PcapngWriter::with_byte_order(Vec::new(), true).unwrap();
    w.add_interface(1, 0, 6).unwrap();
    // Interface 1 counts ns from 1_600_000_000 s.
    w.add_interface_with_offset(101, 0, 9, 1_600_000_000)
        .unwrap();
    w.write_epb(0, Timestamp(T0), &frame(1, 33), 33).unwrap();
    w.write_epb(1, Timestamp(T0), &frame(2, 34), 34).unwrap();
    let mut bytes = w.into_inner();
    assert_eq!(&bytes[8..12], &[0x1a, 0x2b, 0x3c, 0x4d]);
    let mut le = PcapngWriter::new(Vec::new()).unwrap();
    le.add_interface(113, 0, 6).unwrap();
    le.write_epb(0, Timestamp(T0), &frame(3, 35), 35).unwrap();
    bytes.extend(le.into_inner());
    let (got, err) = read_all(reader(bytes));
    assert!(err.is_none(), "{err:?}");
    let summary: Vec<_> = got
        .iter()
        .map(|f| (f.number, f.link_type, f.ts, f.data.len()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, 1, 1_700_000_000_123_456_000, 33),
            (2, 101, T0, 34),
            (3, 113, 1_700_000_000_123_456_000, 35),
        ]
    );
    assert_eq!(got[1].data, frame(2, 34));
}

#[test]
fn cut_off_gzip_file_is_a_cut_off_capture() {
    let plain = pcap(
        PcapOptions::default(),
        &(0..50).map(|i| frame(i, 300)).collect::<Vec<_>>(),
    );
    let gz = gzip(&[&plain]);
    let cut = gz[..gz.len() * 2 / 3].to_vec();
    let (got, err) = read_all(reader(cut));
    assert!(!got.is_empty() && got.len() < 50);
    let next = got.len() as u64 + 1;
    assert!(
        matches!(err, Some(CaptureError::Truncated { frame, .. }) if frame == next),
        "{err:?}"
    );

    // Corrupt compressed data: the decompressor fails, or yields garbage that fails to parse;
    // either way damage, not a cut-off.
    let mut bad = gz.clone();
    let mid = gz.len() / 2;
    for b in &mut bad[mid..mid + 100] {
        *b ^= 0x55;
    }
    let (got, err) = read_all(reader(bad));
    assert!(got.len() < 50);
    match err {
        Some(CaptureError::Io { offset, source }) => {
            assert!(offset > 0);
            assert_eq!(source.kind(), std::io::ErrorKind::InvalidInput, "{source}");
        }
        Some(CaptureError::Corrupt { frame, .. }) => assert!(frame > 1),
        other => panic!("{other:?}"),
    }
}

/// Fails with an I/O error after `ok` bytes.
struct FailAfter {
    data: Cursor<Vec<u8>>,
    ok: u64,
}

impl Read for FailAfter {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.data.position() >= self.ok {
            return Err(io::Error::other("disk on fire"));
        }
        let room = (self.ok - self.data.position()) as usize;
        let n = buf.len().min(room);
        self.data.read(&mut buf[..n])
    }
}

#[test]
fn read_error_keeps_its_cause_and_offset() {
    let bytes = pcap(
        PcapOptions::default(),
        &[frame(1, 100), frame(2, 100), frame(3, 100)],
    );
    let r = CaptureReader::from_reader(Box::new(FailAfter {
        data: Cursor::new(bytes),
        ok: 24 + 116 + 50,
    }))
    .unwrap();
    let (got, err) = read_all(r);
    assert_eq!(got.len(), 1);
    match err {
        Some(CaptureError::Io { offset, source }) => {
            assert_eq!(offset, 24 + 116);
            assert_eq!(source.to_string(), "disk on fire");
        }
        other => panic!("{other:?}"),
    }
}
