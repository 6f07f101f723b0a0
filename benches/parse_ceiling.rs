//! The parse ceiling for `benches/dissect.sh`: what reading a capture costs before any of sqos's
//! own work — every record parsed by pcap-parser, every frame's Ethernet / IP / TCP headers by
//! etherparse, no reassembly, no SMB2. sqos cannot be faster than this on one core; how close it
//! comes says what reassembly, framing and the analysis cost on top.
//!
//!   cargo run --release --example parse_ceiling -- CAPTURE.pcap
//!
//! Prints the frames, the TCP segments and their payload bytes (so nothing is optimised away).

use std::fs::File;
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

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: parse_ceiling CAPTURE");
        return ExitCode::from(2);
    };
    let open = || File::open(&path).map_err(|e| format!("{path}: {e}"));
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
