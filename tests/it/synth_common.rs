//! The generator's captures read back through the crate's own readers (capture, link, TCP
//! segment, NBSS, SMB2 header and bodies, the SQOS codec), with one independent piece: the
//! in-order TCP reassembly below, which records which frame carries each message's first byte
//! and which completes it, so the tests recompute what is on the wire without trusting the
//! generator's bookkeeping: the READ / WRITE / FSCTL_STORAGE_QOS_CONTROL exchanges in them.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::io::Cursor;
use std::net::SocketAddr;

use sqos::capture::{decode_link, CaptureReader};
use sqos::net::decode_tcp;
use sqos::smb2::netbios::{parse_nbss_header, NBSS_HEADER_LEN};
use sqos::smb2::{parse_body, parse_header, Body, Header, NtStatus};
use sqos::sqos::{parse_request, parse_response, Request, Response, FSCTL_STORAGE_QOS_CONTROL};

pub struct Frame {
    pub no: u64,
    pub ts_us: u64,
    pub link_type: u32,
    pub data: Vec<u8>,
}

/// Every frame of a pcap or pcapng file, gzip'd or not (timestamps in µs).
pub fn read_capture(bytes: Vec<u8>) -> Vec<Frame> {
    let mut r = CaptureReader::from_reader(Box::new(Cursor::new(bytes))).expect("a capture");
    let mut frames = Vec::new();
    while let Some(f) = r.next_frame().expect("frame") {
        frames.push(Frame {
            no: f.number,
            ts_us: u64::try_from(f.ts.0 / 1000).expect("timestamp after 1970"),
            link_type: f.link_type,
            data: f.data.to_vec(),
        });
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
    pub header: Header,
}

impl Msg {
    pub fn command(&self) -> u16 {
        self.header.command.0
    }
    pub fn status(&self) -> u32 {
        self.header.status.0
    }
    pub fn is_response(&self) -> bool {
        self.header.is_response()
    }
    pub fn message_id(&self) -> u64 {
        self.header.message_id
    }
    pub fn body(&self) -> Body {
        parse_body(&self.header, &self.bytes).expect("SMB2 body")
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
    let mut conns: HashMap<(SocketAddr, SocketAddr), usize> = HashMap::new();
    let mut dirs: HashMap<(usize, bool), Dir> = HashMap::new();
    let mut out = Vec::new();
    for f in frames {
        let l3 = decode_link(f.link_type, &f.data).expect("link layer");
        let Some(seg) = decode_tcp(l3).expect("TCP") else {
            continue;
        };
        let (seq, payload) = (seg.seq, seg.payload);
        let to_server = seg.dst.port() == 445;
        let key = if to_server {
            (seg.src, seg.dst)
        } else {
            (seg.dst, seg.src)
        };
        let n = conns.len();
        let conn = *conns.entry(key).or_insert(n);
        let dir = dirs.entry((conn, to_server)).or_default();
        if seg.flags.syn {
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
        while let Some(nb) = dir
            .buf
            .first_chunk::<NBSS_HEADER_LEN>()
            .and_then(|b| parse_nbss_header(*b))
        {
            let len = nb.length as usize;
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
                header: parse_header(&bytes).expect("SMB2 header"),
                bytes,
            });
        }
    }
    out
}

/// A request with its response.
pub struct Exchange<'a> {
    pub req: &'a Msg,
    pub resp: Option<&'a Msg>,
}

pub fn exchanges(msgs: &[Msg]) -> Vec<Exchange<'_>> {
    let mut by_id: HashMap<(usize, u64), &Msg> = HashMap::new();
    for m in msgs
        .iter()
        .filter(|m| m.is_response() && m.header.status != NtStatus::PENDING)
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
    match m.body() {
        Body::ReadRequest(r) => Some((r.file_id.volatile, r.length)),
        Body::WriteRequest(w) => Some((w.file_id.volatile, w.length)),
        _ => None,
    }
}

/// FSCTL_STORAGE_QOS_CONTROL request: (volatile FileId, SQOS buffer, MaxOutputResponse).
pub fn sqos_request(m: &Msg) -> Option<(u64, &[u8], u32)> {
    let Body::IoctlRequest(i) = m.body() else {
        return None;
    };
    if i.ctl_code != FSCTL_STORAGE_QOS_CONTROL {
        return None;
    }
    let at = i.input_offset as usize;
    let buf = &m.bytes[at..at + i.input_count as usize];
    Some((i.file_id.volatile, buf, i.max_output_response))
}

/// The SQOS output buffer of an IOCTL response (empty for errors or no output).
pub fn sqos_output(m: &Msg) -> &[u8] {
    match m.body() {
        Body::IoctlResponse(r) if m.status() == 0 => {
            let at = r.output_offset as usize;
            &m.bytes[at..at + r.output_count as usize]
        }
        _ => &[],
    }
}

/// A STORAGE_QOS_CONTROL_REQUEST as the codec reads it (`None`: shorter than its fixed part).
pub fn parse_sqos_request(b: &[u8]) -> Option<Request> {
    parse_request(b).message
}

/// A STORAGE_QOS_CONTROL_RESPONSE as the codec reads it (`None`: shorter than its fixed part).
pub fn parse_sqos_response(b: &[u8]) -> Option<Response> {
    parse_response(b).message
}

/// Generates a scenario in memory: (capture bytes, truth as JSON).
pub fn generate(args: &sqos::synth::SynthConfig) -> (Vec<u8>, serde_json::Value) {
    let (bytes, _, truth) = sqos::synth::generate(args, Vec::new()).unwrap();
    (bytes, serde_json::to_value(&truth).unwrap())
}
