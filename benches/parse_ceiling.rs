//! The parse ceiling for `benches/dissect.sh`: what reading a capture costs before any of sqos's
//! own work — every record parsed by pcap-parser, every frame's Ethernet / IP / TCP headers by
//! etherparse, no reassembly, no SMB2. sqos cannot be faster than this on one core; how close it
//! comes says what reassembly, framing and the analysis cost on top.
//!
//!   cargo run --release --example parse_ceiling -- CAPTURE.pcap
//!   cargo run --release --example parse_ceiling -- --walk CAPTURE.pcap
//!   cargo run --release --example parse_ceiling -- --walk --threads N CAPTURE.pcap
//!
//! `--walk`: sqos's own record walk alone, as one thread reads a file (`Reading::Alone`: through
//! its memory map where the look finds that pays, else in chunks), each frame's bytes counted
//! and one byte of its IP header read, nothing else: the floor under `sqos dissect -t1`, which
//! does its work on top of this walk.
//!
//! `--walk --threads N`: the same walk of a legacy pcap file cut into N parts, each walked on
//! its own thread (`CaptureReader::open_parts`, through maps): what the walk alone takes where
//! N cores share one capture. Another format is walked whole on one thread.
//!
//! Prints the frames, the TCP segments and their payload bytes (so nothing is optimised away;
//! with `--walk`, the frames whose byte 23 says TCP and the frames' captured bytes).

use std::fs::File;
use std::path::Path;
use std::process::ExitCode;

use etherparse::{LaxSlicedPacket, TransportSlice};
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{LegacyPcapReader, PcapBlockOwned, PcapError, PcapNGReader};

/// The same read size as sqos's streaming reader.
const BUFFER: usize = 1 << 20;

#[derive(Default)]
struct Counts {
    frames: u64,
    segments: u64,
    payload: u64,
}

impl Counts {
    fn frame(&mut self, data: &[u8]) {
        self.frames += 1;
        if let Ok(p) = LaxSlicedPacket::from_ethernet(data) {
            if let Some(TransportSlice::Tcp(tcp)) = p.transport {
                self.segments += 1;
                self.payload += tcp.payload().len() as u64;
            }
        }
    }
}

fn run(reader: &mut dyn PcapReaderIterator, counts: &mut Counts) -> Result<(), String> {
    loop {
        match reader.next() {
            Ok((n, block)) => {
                match block {
                    PcapBlockOwned::Legacy(b) => counts.frame(b.data),
                    PcapBlockOwned::NG(pcap_parser::Block::EnhancedPacket(b)) => {
                        counts.frame(b.data)
                    }
                    _ => {}
                }
                reader.consume(n);
            }
            Err(PcapError::Eof) => return Ok(()),
            Err(PcapError::Incomplete(_)) => reader.refill().map_err(|e| format!("{e:?}"))?,
            Err(e) => return Err(format!("{e:?}")),
        }
    }
}

impl Counts {
    /// A frame as `--walk` counts it: its captured bytes, and as a segment when its byte 23
    /// (IPv4's protocol, on Ethernet) says TCP: one byte of its IP header read, as decoding it
    /// would, not a check of its link or IP version.
    fn walked(&mut self, frame: &sqos::capture::Frame<'_>) {
        self.frames += 1;
        self.payload += frame.data.len() as u64;
        self.segments += u64::from(frame.data.get(23) == Some(&6));
    }
}

/// `--walk`: every record through sqos's reader, in runs where it walks them in place
/// (`take_run`, as `sqos dissect` takes its bulk lane's runs), else one at a time.
fn walk(path: &str) -> Result<Counts, String> {
    let mut reader =
        sqos::capture::CaptureReader::open(Path::new(path)).map_err(|e| format!("{path}: {e}"))?;
    reader.read_for(sqos::capture::Reading::Alone);
    walk_reader(&mut reader).map_err(|e| format!("{path}: {e}"))
}

/// The walk of one reader, to its end; an error after the frames before it.
fn walk_reader(reader: &mut sqos::capture::CaptureReader) -> Result<Counts, String> {
    let mut counts = Counts::default();
    loop {
        let mut take = |f: &sqos::capture::Frame<'_>| {
            counts.walked(f);
            true
        };
        if reader.take_run(u64::MAX, &mut take).is_some() {
            continue;
        }
        match reader.next_frame().map_err(|e| e.to_string())? {
            Some(f) => counts.walked(&f),
            None => return Ok(counts),
        }
    }
}

/// `--walk --threads N`: the file cut into N parts (`CaptureReader::open_parts`), each walked
/// on its own thread: the floor under a design that uses N cores on one capture. A part
/// before the last that ends in an error was cut where no record starts: then the whole file
/// is walked again on one thread (and said so).
#[cfg(target_os = "linux")]
fn walk_parts(path: &str, threads: usize) -> Result<Counts, String> {
    let parts = sqos::capture::CaptureReader::open_parts(Path::new(path), threads)
        .map_err(|e| format!("{path}: {e}"))?;
    let last = parts.len() - 1;
    let walked: Vec<_> = std::thread::scope(|s| {
        let walks: Vec<_> = parts
            .into_iter()
            .map(|mut p| s.spawn(move || walk_reader(&mut p)))
            .collect();
        walks.into_iter().map(|w| w.join()).collect()
    });
    let mut counts = Counts::default();
    for (k, w) in walked.into_iter().enumerate() {
        match w {
            Ok(Ok(c)) => {
                counts.frames += c.frames;
                counts.segments += c.segments;
                counts.payload += c.payload;
            }
            Ok(Err(e)) if k == last => return Err(format!("{path}: {e}")),
            _ => {
                eprintln!("parse_ceiling: {path}: part {k} was cut where no record starts; walking it whole");
                return walk(path);
            }
        }
    }
    Ok(counts)
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let walking = args.first().is_some_and(|a| a == "--walk");
    if walking {
        args.remove(0);
    }
    let threads = match args.first().map(String::as_str) {
        Some("--threads") if walking && args.len() > 1 => {
            let n = args[1].parse::<usize>().ok().filter(|&n| n > 0);
            args.drain(..2);
            n
        }
        _ => Some(1),
    };
    let ([path], Some(threads)) = (&args[..], threads) else {
        eprintln!("usage: parse_ceiling [--walk [--threads N]] CAPTURE");
        return ExitCode::from(2);
    };
    #[cfg(target_os = "linux")]
    if walking && threads > 1 {
        return report(walk_parts(path, threads));
    }
    if walking {
        return report(walk(path));
    }
    let open = || File::open(path).map_err(|e| format!("{path}: {e}"));
    let result = open().and_then(|f| {
        let mut counts = Counts::default();
        match LegacyPcapReader::new(BUFFER, f) {
            Ok(mut r) => run(&mut r, &mut counts),
            Err(_) => {
                let mut r = PcapNGReader::new(BUFFER, open()?)
                    .map_err(|e| format!("{path}: not a capture ({e:?})"))?;
                run(&mut r, &mut counts)
            }
        }
        .map(|()| counts)
    });
    report(result)
}

fn report(result: Result<Counts, String>) -> ExitCode {
    match result {
        Ok(c) => {
            println!(
                "{} frames, {} TCP segments, {} payload bytes",
                c.frames, c.segments, c.payload
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("parse_ceiling: {e}");
            ExitCode::from(1)
        }
    }
}
