//! A small, independent reader for the generator's captures, so the tests recompute what is on
//! the wire without trusting the generator's bookkeeping: pcap / pcapng (optionally gzip),
//! Ethernet (+802.1Q), IPv4 / IPv6, TCP reassembly per direction, NetBIOS-framed SMB2 messages,
//! and the READ / WRITE / FSCTL_STORAGE_QOS_CONTROL exchanges in them.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::io::Read;

pub struct Frame {
    pub no: u64,
    pub ts_us: u64,
    pub data: Vec<u8>,
}

fn u16le(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32le(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64le(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn u16be(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
fn u32be(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes(b[o..o + 4].try_into().unwrap())
}

pub fn gunzip_if_needed(bytes: Vec<u8>) -> Vec<u8> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        bytes
    }
}

/// Every frame of a pcap or pcapng file (timestamps in µs).
pub fn read_capture(bytes: Vec<u8>) -> Vec<Frame> {
    let b = gunzip_if_needed(bytes);
    let mut frames = Vec::new();
    match u32le(&b, 0) {
        0xa1b2_c3d4 | 0xa1b2_3c4d => {
            let nanos = u32le(&b, 0) == 0xa1b2_3c4d;
            let mut o = 24;
            while o + 16 <= b.len() {
                let (s, frac, cap) = (
                    u32le(&b, o) as u64,
                    u32le(&b, o + 4) as u64,
                    u32le(&b, o + 8) as usize,
                );
                let ts = s * 1_000_000 + if nanos { frac / 1000 } else { frac };
                frames.push(Frame {
                    no: frames.len() as u64 + 1,
                    ts_us: ts,
                    data: b[o + 16..o + 16 + cap].to_vec(),
                });
                o += 16 + cap;
            }
        }
        0x0A0D_0D0A => {
            let mut o = 0;
            let mut resol = Vec::new();
            while o + 12 <= b.len() {
                let (ty, len) = (u32le(&b, o), u32le(&b, o + 4) as usize);
                match ty {
                    1 => resol.push(if b[o + 16 + 4] == 9 { 1000 } else { 1 }),
                    6 => {
                        let iface = u32le(&b, o + 8) as usize;
                        let t = ((u32le(&b, o + 12) as u64) << 32) | u32le(&b, o + 16) as u64;
                        let cap = u32le(&b, o + 20) as usize;
                        frames.push(Frame {
                            no: frames.len() as u64 + 1,
                            ts_us: t / resol[iface],
                            data: b[o + 28..o + 28 + cap].to_vec(),
                        });
                    }
                    _ => {}
                }
                o += len;
            }
        }
        m => panic!("not a capture: magic {m:#x}"),
    }
    frames
}

/// One SMB2 message found in a TCP stream.
pub struct Msg {
    pub conn: usize,
    pub to_server: bool,
    /// Frame carrying the message's first byte.
    pub first_frame: u64,
    /// Frame whose arrival completed the message (in-order reassembly).
    pub last_frame: u64,
    pub last_ts: u64,
    /// The SMB2 message (header included, NetBIOS header stripped).
    pub bytes: Vec<u8>,
}

impl Msg {
    pub fn command(&self) -> u16 {
        u16le(&self.bytes, 12)
    }
    pub fn status(&self) -> u32 {
        u32le(&self.bytes, 8)
    }
    pub fn is_response(&self) -> bool {
        u32le(&self.bytes, 16) & 1 == 1
    }
    pub fn message_id(&self) -> u64 {
        u64le(&self.bytes, 24)
    }
    pub fn body(&self) -> &[u8] {
        &self.bytes[64..]
    }
}

#[derive(Default)]
struct Dir {
    next: Option<u32>,
    ooo: BTreeMap<u32, (Vec<u8>, u64)>,
    buf: Vec<u8>,
    /// (buffer offset where a frame's bytes start, frame no)
    marks: Vec<(usize, u64)>,
}

/// TCP streams by 4-tuple; SMB2 messages in completion order.
pub fn smb2_messages(frames: &[Frame]) -> Vec<Msg> {
    let mut conns: HashMap<(Vec<u8>, u16, Vec<u8>, u16), usize> = HashMap::new();
    let mut dirs: HashMap<(usize, bool), Dir> = HashMap::new();
    let mut out = Vec::new();
    for f in frames {
        let d = &f.data;
        let mut o = 12;
        let mut ety = u16be(d, o);
        if ety == 0x8100 {
            o += 4;
            ety = u16be(d, o);
        }
        o += 2;
        let (src, dst, l4) = match ety {
            0x0800 => {
                let ihl = (d[o] & 0xf) as usize * 4;
                let total = u16be(d, o + 2) as usize;
                (
                    d[o + 12..o + 16].to_vec(),
                    d[o + 16..o + 20].to_vec(),
                    &d[o + ihl..o + total],
                )
            }
            0x86dd => {
                let plen = u16be(d, o + 4) as usize;
                (
                    d[o + 8..o + 24].to_vec(),
                    d[o + 24..o + 40].to_vec(),
                    &d[o + 40..o + 40 + plen],
                )
            }
            _ => continue,
        };
        let (sp, dp) = (u16be(l4, 0), u16be(l4, 2));
        let seq = u32be(l4, 4);
        let flags = l4[13];
        let payload = &l4[((l4[12] >> 4) as usize * 4)..];
        let to_server = dp == 445;
        let key = if to_server {
            (src.clone(), sp, dst.clone(), dp)
        } else {
            (dst.clone(), dp, src.clone(), sp)
        };
        let n = conns.len();
        let conn = *conns.entry(key).or_insert(n);
        let dir = dirs.entry((conn, to_server)).or_default();
        if flags & 0x02 != 0 {
            dir.next = Some(seq.wrapping_add(1));
            continue;
        }
        if payload.is_empty() {
            continue;
        }
        let next = *dir.next.get_or_insert(seq);
        let rel = seq.wrapping_sub(next) as i32;
        if rel > 0 {
            dir.ooo.insert(seq, (payload.to_vec(), f.no));
            continue;
        }
        let skip = (-rel) as usize;
        if skip >= payload.len() {
            continue; // retransmitted duplicate
        }
        dir.marks.push((dir.buf.len(), f.no));
        dir.buf.extend_from_slice(&payload[skip..]);
        let mut nx = next.wrapping_add((payload.len() - skip) as u32);
        // Out-of-order segments that are now in order arrived earlier; this frame completes them.
        while let Some((&s, _)) = dir
            .ooo
            .iter()
            .find(|(&s, _)| (s.wrapping_sub(nx) as i32) <= 0)
        {
            let (p, _) = dir.ooo.remove(&s).unwrap();
            let skip = nx.wrapping_sub(s) as usize;
            if skip < p.len() {
                dir.buf.extend_from_slice(&p[skip..]);
                nx = nx.wrapping_add((p.len() - skip) as u32);
            }
        }
        dir.next = Some(nx);
        // Whole NetBIOS messages.
        loop {
            if dir.buf.len() < 4 {
                break;
            }
            let len = (u32be(&dir.buf, 0) & 0x00ff_ffff) as usize;
            if dir.buf.len() < 4 + len {
                break;
            }
            let first = dir
                .marks
                .iter()
                .rev()
                .find(|m| m.0 == 0)
                .map_or(f.no, |m| m.1);
            let bytes = dir.buf[4..4 + len].to_vec();
            dir.buf.drain(..4 + len);
            let cut = 4 + len;
            let mut marks: Vec<(usize, u64)> = Vec::new();
            let mut last_before = None;
            for &(off, no) in &dir.marks {
                if off < cut {
                    last_before = Some(no);
                } else {
                    marks.push((off - cut, no));
                }
            }
            if marks.first().is_none_or(|m| m.0 > 0) {
                if let Some(no) = last_before {
                    marks.insert(0, (0, no));
                }
            }
            dir.marks = marks;
            out.push(Msg {
                conn,
                to_server,
                first_frame: first,
                last_frame: f.no,
                last_ts: f.ts_us,
                bytes,
            });
        }
    }
    out
}

pub const READ: u16 = 8;
pub const WRITE: u16 = 9;
pub const IOCTL: u16 = 0x0b;
pub const CREATE: u16 = 5;

/// A request with its response.
pub struct Exchange<'a> {
    pub req: &'a Msg,
    pub resp: Option<&'a Msg>,
}

pub fn exchanges(msgs: &[Msg]) -> Vec<Exchange<'_>> {
    let mut by_id: HashMap<(usize, u64), &Msg> = HashMap::new();
    for m in msgs
        .iter()
        .filter(|m| m.is_response() && m.status() != 0x103)
    {
        by_id.insert((m.conn, m.message_id()), m);
    }
    msgs.iter()
        .filter(|m| !m.is_response())
        .map(|m| Exchange {
            req: m,
            resp: by_id.get(&(m.conn, m.message_id())).copied(),
        })
        .collect()
}

/// READ / WRITE request: (volatile FileId, length).
pub fn io_of(m: &Msg) -> Option<(u64, u32)> {
    match m.command() {
        READ | WRITE => Some((u64le(m.body(), 24), u32le(m.body(), 4))),
        _ => None,
    }
}

/// FSCTL_STORAGE_QOS_CONTROL request: (volatile FileId, SQOS buffer, MaxOutputResponse).
pub fn sqos_request(m: &Msg) -> Option<(u64, &[u8], u32)> {
    let b = m.body();
    if m.command() != IOCTL || u32le(b, 4) != 0x0009_0350 {
        return None;
    }
    let (off, cnt) = (u32le(b, 24) as usize, u32le(b, 28) as usize);
    Some((u64le(b, 16), &m.bytes[off..off + cnt], u32le(b, 44)))
}

/// The SQOS output buffer of an IOCTL response (empty for errors or no output).
pub fn sqos_output(m: &Msg) -> &[u8] {
    let b = m.body();
    if m.status() != 0 || u16le(b, 0) != 49 {
        return &[];
    }
    let (off, cnt) = (u32le(b, 32) as usize, u32le(b, 36) as usize);
    &m.bytes[off..off + cnt]
}

/// Fields of a STORAGE_QOS_CONTROL_REQUEST by the summed layout.
pub struct SqosReq {
    pub version: u16,
    pub options: u32,
    pub flow: [u8; 16],
    pub io: u64,
    pub norm: u64,
    pub latency: u64,
    pub lower: u64,
    pub kb: Option<u64>,
}

pub fn parse_sqos_request(b: &[u8]) -> SqosReq {
    let mut flow = [0u8; 16];
    flow.copy_from_slice(&b[8..24]);
    SqosReq {
        version: u16le(b, 0),
        options: u32le(b, 4),
        flow,
        io: u64le(b, 80),
        norm: u64le(b, 88),
        latency: u64le(b, 96),
        lower: u64le(b, 104),
        kb: (u16le(b, 0) == 0x0101 && b.len() >= 128).then(|| u64le(b, 120)),
    }
}

/// (TimeToLive, Status, MaximumIoRate, MaximumBandwidth) of a response buffer.
pub fn parse_sqos_response(b: &[u8]) -> (u32, u32, u64, Option<u64>) {
    (
        u32le(b, 56),
        u32le(b, 60),
        u64le(b, 64),
        (b.len() >= 96).then(|| u64le(b, 88)),
    )
}

/// The GUID in the textual form serde writes (from its little-endian wire bytes).
pub fn guid_text(b: &[u8; 16]) -> String {
    uuid::Uuid::from_bytes_le(*b).to_string()
}

/// Generates a scenario in memory: (capture bytes, truth as JSON).
pub fn generate(args: &sqos::synth::SynthConfig) -> (Vec<u8>, serde_json::Value) {
    let (bytes, _, truth) = sqos::synth::generate(args, Vec::new()).unwrap();
    (bytes, serde_json::to_value(&truth).unwrap())
}
