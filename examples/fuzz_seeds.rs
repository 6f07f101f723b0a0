//! Writes the fuzz targets' seed corpora (`fuzz/seeds/<target>/`) from the bundled captures:
//!
//! - `pipeline`: the first frames of each capture (handshake, session setup, CREATE, the first
//!   SQOS exchanges), uncompressed, in the capture's own format;
//! - `smb2_stream`: the first connection's reassembled streams in the target's chunk format
//!   (direction and length in a 2-byte header, gaps as gap chunks);
//! - `parse`: every distinct SQOS buffer (requests and responses);
//! - `rules`: the rules files;
//! - `filter`: every display filter the docs show (`-Y '…'` in docs/filter.md and README.md).
//!
//! Run: `cargo run --release --example fuzz_seeds` (from the repository root). `cargo fuzz cmin`
//! then minimises a grown corpus (docs/robustness.md).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use sqos::capture::{CaptureFormat, CaptureReader, PcapWriter, PcapngWriter, Timestamp};
use sqos::net::{decode_tcp, ConnId, Dir, Reassembler, ReassemblyConfig, StreamSink};
use sqos::pipeline::{ChannelRecord, Pipeline, PipelineConfig, RecordSink, SqosRecord};

const CAPTURES: [&str; 7] = [
    "spec-examples-1.0.pcap",
    "spec-examples-1.1.pcap",
    "steady.pcap.gz",
    "steady-ipv6.pcapng.gz",
    "steady-midstream.pcap.gz",
    "lossy-network.pcapng.gz",
    "faulty-server.pcap.gz",
];
/// Frames kept per pipeline seed: enough for the first SQOS exchanges of the synth captures.
const FRAMES: u64 = 40;
/// Bytes of stream kept per smb2_stream seed.
const STREAM_BYTES: usize = 8 << 10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = Path::new("fuzz/seeds");
    for t in ["pipeline", "smb2_stream", "parse", "rules", "filter"] {
        fs::create_dir_all(out.join(t))?;
    }
    let mut buffers = BTreeSet::new();
    for name in CAPTURES {
        let path = Path::new("captures").join(name);
        let stem = name.trim_end_matches(".gz");
        let (frames, format) = first_frames(&path)?;
        let mut file = Vec::new();
        match format {
            CaptureFormat::PcapNg => {
                let mut w = PcapngWriter::new(&mut file)?;
                let link = frames.first().map_or(1, |f| f.1);
                let iface = w.add_interface(link as u16, 65535, 6)?;
                for (ts, _, data) in &frames {
                    w.write_epb(iface, *ts, data, data.len() as u32)?;
                }
            }
            _ => {
                let link = frames.first().map_or(1, |f| f.1);
                let mut w = PcapWriter::new(&mut file, link)?;
                for (ts, _, data) in &frames {
                    w.write_packet(*ts, data)?;
                }
            }
        }
        fs::write(out.join("pipeline").join(stem), &file)?;
        fs::write(
            out.join("smb2_stream").join(format!("{stem}.stream")),
            stream_seed(&frames),
        )?;
        buffers.extend(sqos_buffers(&path)?);
    }
    for (i, b) in buffers.iter().enumerate() {
        fs::write(out.join("parse").join(format!("buffer-{i:03}.bin")), b)?;
    }
    for rules in ["steady.rules.toml", "limits.rules.toml"] {
        fs::copy(
            Path::new("captures").join(rules),
            out.join("rules").join(rules),
        )?;
    }
    let mut filters = BTreeSet::new();
    for doc in ["docs/filter.md", "README.md"] {
        let text = fs::read_to_string(doc)?;
        for (i, _) in text.match_indices("-Y '") {
            let rest = &text[i + 4..];
            if let Some(end) = rest.find('\'') {
                filters.insert(rest[..end].to_string());
            }
        }
    }
    for (i, f) in filters.iter().enumerate() {
        fs::write(out.join("filter").join(format!("filter-{i:02}.txt")), f)?;
    }
    println!("seeds written to {}", out.display());
    Ok(())
}

type Frames = Vec<(Timestamp, u32, Vec<u8>)>;

fn first_frames(path: &Path) -> Result<(Frames, CaptureFormat), Box<dyn std::error::Error>> {
    let mut r = CaptureReader::open(path)?;
    let format = r.format();
    let mut frames = Vec::new();
    while let Some(f) = r.next_frame()? {
        frames.push((f.ts, f.link_type, f.data.to_vec()));
        if f.number >= FRAMES {
            break;
        }
    }
    Ok((frames, format))
}

/// The first connection's streams as the smb2_stream target reads them.
fn stream_seed(frames: &Frames) -> Vec<u8> {
    struct Rec {
        out: Vec<u8>,
    }
    impl StreamSink for Rec {
        fn on_data(&mut self, conn: ConnId, dir: Dir, _f: u64, _t: Timestamp, data: &[u8]) {
            if conn != ConnId(0) || self.out.len() > STREAM_BYTES {
                return;
            }
            for c in data.chunks(0x3fff) {
                let d = if dir == Dir::ToServer { 0 } else { 0x80 };
                self.out.push(d | (c.len() >> 8) as u8);
                self.out.push(c.len() as u8);
                self.out.extend_from_slice(c);
            }
        }
        fn on_gap(&mut self, conn: ConnId, dir: Dir, _f: u64, _t: Timestamp, missing: u64) {
            if conn != ConnId(0) || self.out.len() > STREAM_BYTES {
                return;
            }
            let d = if dir == Dir::ToServer { 0 } else { 0x80 };
            let n = missing.saturating_sub(1).min(0x3fff) as usize;
            self.out.push(d | 0x40 | (n >> 8) as u8);
            self.out.push(n as u8);
            self.out.extend(std::iter::repeat_n(0, n));
        }
    }
    let mut r = Reassembler::new(ReassemblyConfig::default());
    let mut rec = Rec { out: Vec::new() };
    for (i, (ts, link, data)) in frames.iter().enumerate() {
        if let Ok(l3) = sqos::capture::decode_link(*link, data) {
            if let Ok(Some(seg)) = decode_tcp(l3) {
                r.push(i as u64 + 1, *ts, &seg, &mut rec);
            }
        }
    }
    r.finish(&mut rec);
    rec.out
}

fn sqos_buffers(path: &Path) -> Result<Vec<Vec<u8>>, Box<dyn std::error::Error>> {
    struct Bufs(Vec<Vec<u8>>);
    impl RecordSink for Bufs {
        fn on_sqos(&mut self, rec: SqosRecord) {
            if !rec.buffer.is_empty() && self.0.len() < 12 {
                self.0.push(rec.buffer);
            }
        }
        /// Seeds are SQOS buffers only: channels carry none.
        fn on_channel(&mut self, _rec: &ChannelRecord) {}
    }
    let mut r = CaptureReader::open(path)?;
    let mut p = Pipeline::new(PipelineConfig::default());
    let mut b = Bufs(Vec::new());
    while let Some(f) = r.next_frame()? {
        p.push_frame(&f, &mut b);
    }
    p.finish(&mut b);
    Ok(b.0)
}
