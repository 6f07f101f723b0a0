//! Writes the fuzz targets' seed corpora (`fuzz/seeds/<target>/`) from the bundled captures:
//!
//! - `pipeline`: each capture's frames up to its sixth SQOS message without the bulk segments
//!   (handshake, session setup, CREATE, the first SQOS exchanges, the gaps the left-out bulk
//!   makes), at most 40 frames, and its first SQOS exchange alone; uncompressed, in the
//!   capture's own format: a few KB or less, as a small `-max_len` wants;
//! - `smb2_stream`: the first connection's reassembled streams of both in the target's chunk
//!   format (direction and length in a 2-byte header, gaps as gap chunks);
//! - `parse`: every distinct SQOS buffer (requests and responses);
//! - `render`: each of those buffers as a request and as a response record, with a file name
//!   (one of them hostile: a terminal title and a forged line);
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
/// Frames kept per pipeline seed, at most: the first and the last half of those chosen.
const FRAMES: usize = 40;
/// SQOS messages a pipeline seed runs to (the spec examples' six).
const SQOS_MESSAGES: usize = 6;
/// Frames longer than this are bulk (READ/WRITE data) and left out of the pipeline seeds,
/// unless they complete an SQOS message.
const BULK: usize = 700;
/// Frames of a capture read to find its first SQOS messages.
const SEARCHED: u64 = 5_000;
/// Bytes of stream kept per smb2_stream seed.
const STREAM_BYTES: usize = 8 << 10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = Path::new("fuzz/seeds");
    for t in [
        "pipeline",
        "smb2_stream",
        "parse",
        "render",
        "rules",
        "filter",
    ] {
        fs::create_dir_all(out.join(t))?;
    }
    let mut buffers = BTreeSet::new();
    for name in CAPTURES {
        let path = Path::new("captures").join(name);
        let stem = name.trim_end_matches(".gz");
        let (frames, exchange, format) = seed_frames(&path)?;
        fs::write(out.join("pipeline").join(stem), capture(&frames, format)?)?;
        // The first SQOS exchange alone (picked up mid-stream): a kilobyte or two, whole under
        // a small `-max_len`.
        fs::write(
            out.join("smb2_stream").join(format!("{stem}.stream")),
            stream_seed(&frames),
        )?;
        if !exchange.is_empty() {
            let (base, ext) = stem.rsplit_once('.').unwrap_or((stem, "pcap"));
            fs::write(
                out.join("pipeline").join(format!("{base}.exchange.{ext}")),
                capture(&exchange, format)?,
            )?;
            fs::write(
                out.join("smb2_stream")
                    .join(format!("{base}.exchange.stream")),
                stream_seed(&exchange),
            )?;
        }
        buffers.extend(sqos_buffers(&path)?);
    }
    for (i, b) in buffers.iter().enumerate() {
        fs::write(out.join("parse").join(format!("buffer-{i:03}.bin")), b)?;
        let name = if i == 0 {
            "\\\\sofs\\vms\\\x1b]0;owned\x07vm\r\n     9 0.1 forged\\disk0.vhdx"
        } else {
            "\\\\sofs\\vms\\vm01\\disk0.vhdx"
        };
        for (dir, flags) in [("request", 0x50), ("response", 0x51)] {
            fs::write(
                out.join("render").join(format!("{dir}-{i:03}.bin")),
                render_seed(flags, name, b),
            )?;
        }
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

/// A record as the render target reads it: flags (here: a file name, the frames around it;
/// bit 0 a response), 40 bytes of header fields, the name, a split byte (no matched request),
/// the SQOS buffer.
fn render_seed(flags: u8, name: &str, buffer: &[u8]) -> Vec<u8> {
    let mut out = vec![flags];
    out.extend(7u64.to_le_bytes()); // MessageId
    out.extend(0x1000_0000_0041u64.to_le_bytes()); // SessionId
    out.extend(1_700_000_000_000_000_000u64.to_le_bytes()); // time (ns)
    out.extend((16u64 << 32 | 1).to_le_bytes()); // frame, tree
    out.extend(0u32.to_le_bytes()); // NTSTATUS
    out.extend(1024u32.to_le_bytes()); // MaxOutputResponse
    out.push(name.len() as u8);
    out.extend(name.as_bytes());
    out.push(0);
    out.extend(buffer);
    out
}

/// A capture file of `frames` in `format`.
fn capture(frames: &Frames, format: CaptureFormat) -> std::io::Result<Vec<u8>> {
    let mut file = Vec::new();
    let link = frames.first().map_or(1, |f| f.1);
    match format {
        CaptureFormat::PcapNg => {
            let mut w = PcapngWriter::new(&mut file)?;
            let iface = w.add_interface(link as u16, 65535, 6)?;
            for (ts, _, data) in frames {
                w.write_epb(iface, *ts, data, data.len() as u32)?;
            }
        }
        _ => {
            let mut w = PcapWriter::new(&mut file, link)?;
            for (ts, _, data) in frames {
                w.write_packet(*ts, data)?;
            }
        }
    }
    Ok(file)
}

/// The frames of the two pipeline seeds of a capture, bulk left out (frames longer than
/// [`BULK`] that complete no SQOS message), each at most [`FRAMES`] (the first and the last
/// half of them): the capture's opening up to the frame that completes its
/// [`SQOS_MESSAGES`]th SQOS message, and its first SQOS exchange (from the frame its request
/// begins in to the one that completes its response).
fn seed_frames(path: &Path) -> Result<(Frames, Frames, CaptureFormat), Box<dyn std::error::Error>> {
    /// Each SQOS message's first and completing frame, in the order they come.
    struct Spans(Vec<(u64, u64)>);
    impl RecordSink for Spans {
        fn on_sqos(&mut self, rec: SqosRecord) {
            self.0
                .push((rec.first_frame.unwrap_or(rec.frame), rec.frame));
        }
        fn on_channel(&mut self, _rec: &ChannelRecord) {}
    }
    let mut r = CaptureReader::open(path)?;
    let format = r.format();
    let mut p = Pipeline::new(PipelineConfig {
        keep_frames: true,
        ..PipelineConfig::default()
    });
    let mut spans = Spans(Vec::new());
    let mut frames = Vec::new();
    while let Some(f) = r.next_frame()? {
        p.push_frame(&f, &mut spans);
        frames.push((f.number, f.ts, f.link_type, f.data.to_vec()));
        if spans.0.len() >= SQOS_MESSAGES || f.number >= SEARCHED {
            break;
        }
    }
    p.finish(&mut spans);
    let completing: BTreeSet<u64> = spans.0.iter().map(|s| s.1).collect();
    let pick = |from: u64, to: u64| -> Frames {
        let kept: Frames = frames
            .iter()
            .filter(|(n, _, _, data)| {
                (from..=to).contains(n) && (data.len() <= BULK || completing.contains(n))
            })
            .map(|(_, ts, link, data)| (*ts, *link, data.clone()))
            .collect();
        if kept.len() <= FRAMES {
            return kept;
        }
        let tail = kept.len() - FRAMES / 2;
        kept.iter()
            .take(FRAMES / 2)
            .chain(&kept[tail..])
            .cloned()
            .collect()
    };
    let last = completing
        .iter()
        .nth(SQOS_MESSAGES - 1)
        .copied()
        .unwrap_or(u64::MAX);
    let opening = pick(1, last);
    let exchange = match spans.0.as_slice() {
        [req, resp, ..] => pick(req.0, resp.1),
        _ => Vec::new(),
    };
    Ok((opening, exchange, format))
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
            let mut missing = missing;
            while missing > 0 {
                let n = missing.min(0x4000);
                let len = n - 1;
                self.out.push(d | 0x40 | (len >> 8) as u8);
                self.out.push(len as u8);
                missing -= n;
            }
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
