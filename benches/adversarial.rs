//! Generators of the adversarial captures of issue 16 (docs/robustness.md, "Adversarial
//! captures"), written as pcap to standard output so that `benches/adversarial.sh` can pipe
//! them into `sqos` without a multi-GB file: the cases that once broke the memory bounds or
//! linear time, at the size (`SCALE` 1) or larger (`SCALE` 10).
//!
//!   cargo bench --bench adversarial -- CASE SCALE > capture.pcap
//!   cargo bench --bench adversarial -- list
//!
//! The frames are built with the generator's own encoders (`sqos::synth`): the layout of every
//! header is stated once, there.

use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr};

use sqos::capture::writer::{FileFormat, FileOptions, FileWriter};
use sqos::capture::Timestamp;
use sqos::sqos::{encode_request, encode_response, Dialect, Options, Request, Response};
use sqos::sqos::{Status, FSCTL_STORAGE_QOS_CONTROL};
use sqos::synth::packet::{build_headers, Endpoint, TcpFields, TCP_ACK, TCP_PSH, TCP_SYN};
use sqos::synth::smb2::{self, FileId, Header};
use sqos::synth::wire::Part;
use uuid::Uuid;

/// Each case: name, what it is at scale 1 (the sizes), how to write it.
const CASES: [(&str, &str); 9] = [
    ("connections", "200,000 connections, SYN + 100 B each"),
    (
        "netbios-length",
        "NetBIOS length 0xFFFFFF on 10,000 connections",
    ),
    ("unanswered-ioctls", "1,000,000 unanswered SQOS IOCTLs"),
    ("creates-never-closed", "1,000,000 CREATEs never closed"),
    ("flow-ids", "1,000,000 distinct LogicalFlowIds"),
    (
        "out-of-order-connections",
        "100,000 connections × 1 KB out-of-order + 20,000 segments",
    ),
    (
        "snaplen-cut-segments",
        "3,000,000 snaplen-cut out-of-order segments (a million per connection)",
    ),
    (
        "one-byte-segments",
        "3,000,000 one-byte out-of-order segments",
    ),
    (
        "pending-and-resets",
        "65,536 pending + 100,000 SYN/RST connections",
    ),
];

const SERVER: Endpoint = Endpoint {
    mac: [0x02, 0, 0, 0, 0, 0x64],
    ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 100)),
    port: 445,
};
const TCP_RST: u8 = 0x04;
/// The client's initial sequence number (the server's is the same).
const ISN: u32 = 1000;

/// Connection `i`'s client: a distinct address and port for up to 2^32 connections.
fn client(i: u64) -> Endpoint {
    let host = (i / 50_000) as u32;
    Endpoint {
        mac: [0x02, 0, 0, 0, 0, 0x01],
        ip: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | ((host + 1) & 0x00ff_ffff))),
        port: 10_000 + (i % 50_000) as u16,
    }
}

struct Out<W: Write> {
    w: FileWriter<W>,
    hdr: Vec<u8>,
    ts_us: u64,
    ip_id: u16,
}

impl<W: Write> Out<W> {
    fn new(w: W, snaplen: u32) -> io::Result<Self> {
        let opts = FileOptions {
            format: FileFormat::Pcap,
            link_type: 1,
            nanos: false,
            interfaces: 1,
            snaplen,
        };
        Ok(Out {
            w: FileWriter::new(w, opts)?,
            hdr: Vec::with_capacity(128),
            // 2026-01-01, 10 µs a frame.
            ts_us: 1_767_225_600_000_000,
            ip_id: 0,
        })
    }

    /// One segment of connection `conn`, from the client (`to_server`) or the server.
    fn seg(
        &mut self,
        conn: u64,
        to_server: bool,
        seq: u32,
        flags: u8,
        payload: &[u8],
    ) -> io::Result<()> {
        let c = client(conn);
        let (src, dst) = if to_server { (c, SERVER) } else { (SERVER, c) };
        let tcp = TcpFields {
            seq,
            ack: if flags & TCP_ACK != 0 { ISN + 1 } else { 0 },
            flags,
            window: 1024,
            ts_val: 0,
            ts_ecr: 0,
            syn_mss: (flags & TCP_SYN != 0).then_some(1460),
        };
        self.ip_id = self.ip_id.wrapping_add(1);
        build_headers(&mut self.hdr, None, &src, &dst, self.ip_id, &tcp, payload);
        self.ts_us += 10;
        let ts = Timestamp(self.ts_us as i64 * 1000);
        self.w.write_frame(0, ts, &[&self.hdr, payload])?;
        Ok(())
    }

    fn syn(&mut self, conn: u64) -> io::Result<()> {
        self.seg(conn, true, ISN, TCP_SYN, &[])
    }

    /// A whole SMB2 message (NetBIOS header included) in one segment at stream offset `at`.
    fn msg(&mut self, conn: u64, to_server: bool, at: u32, msg: &[u8]) -> io::Result<u32> {
        self.seg(conn, to_server, ISN + 1 + at, TCP_ACK | TCP_PSH, msg)?;
        Ok(at + msg.len() as u32)
    }

    /// Ends the capture; its frame count goes to stderr (for the table).
    fn finish(self) -> io::Result<()> {
        eprintln!("{}", self.w.frames());
        self.w.into_inner().flush()
    }
}

/// The bytes of an SMB2 message (the generator's `Part`s, filler as zeros).
fn bytes(parts: Vec<Part>) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        match p {
            Part::Bytes(b) => out.extend_from_slice(&b),
            Part::Fill(n) => out.resize(out.len() + n, 0),
        }
    }
    out
}

fn header(command: u16, message_id: u64, response: bool) -> Header {
    Header {
        command,
        status: 0,
        response,
        message_id,
        credit_charge: 1,
        credits: 1,
        tree_id: 1,
        session_id: 0x1000_0000_0001,
        replay: false,
    }
}

fn fid(i: u64) -> FileId {
    FileId {
        persistent: i + 1,
        volatile: 0x4000_0000 + i,
    }
}

/// An SQOS IOCTL request (GET_STATUS | UPDATE_COUNTERS) for flow `flow` on open `i`.
fn sqos_request(i: u64, flow: u128) -> Vec<u8> {
    let mut r = Request::new(Dialect::V1_1);
    r.options = Options::GET_STATUS.union(Options::UPDATE_COUNTERS);
    r.logical_flow_id = Uuid::from_u128(flow);
    r.io_count_increment = 1;
    r.normalized_io_count_increment = 1;
    let body = smb2::ioctl_request(FSCTL_STORAGE_QOS_CONTROL, &fid(i), &encode_request(&r), 96);
    bytes(smb2::message(&header(smb2::IOCTL, i, false), &body, 0))
}

fn sqos_response(i: u64, flow: u128) -> Vec<u8> {
    let mut r = Response::new(Dialect::V1_1);
    r.logical_flow_id = Uuid::from_u128(flow);
    r.time_to_live = 4000;
    r.status = Status::OK;
    r.maximum_io_rate = 100;
    let body = smb2::ioctl_response(FSCTL_STORAGE_QOS_CONTROL, &fid(i), &encode_response(&r));
    bytes(smb2::message(&header(smb2::IOCTL, i, true), &body, 0))
}

fn write_case<W: Write>(case: &str, scale: u64, w: W) -> io::Result<()> {
    let snaplen = if case == "snaplen-cut-segments" {
        96
    } else {
        0
    };
    let mut o = Out::new(w, snaplen)?;
    match case {
        "connections" => {
            for c in 0..200_000 * scale {
                o.syn(c)?;
                o.seg(c, true, ISN + 1, TCP_ACK | TCP_PSH, &[0x55; 100])?;
            }
        }
        "netbios-length" => {
            let mut p = vec![0x00, 0xff, 0xff, 0xff];
            p.extend_from_slice(b"\xfeSMB");
            p.resize(100, 0);
            for c in 0..10_000 * scale {
                o.syn(c)?;
                o.msg(c, true, 0, &p)?;
            }
        }
        "unanswered-ioctls" => {
            o.syn(0)?;
            let mut at = 0;
            for i in 0..1_000_000 * scale {
                at = o.msg(0, true, at, &sqos_request(i, u128::from(i % 4) + 1))?;
            }
        }
        "creates-never-closed" => {
            o.syn(0)?;
            let (mut up, mut down) = (0, 0);
            for i in 0..1_000_000 * scale {
                let name = format!("vm{i}\\disk0.vhdx");
                let req = smb2::create_request(&name);
                let req = bytes(smb2::message(&header(smb2::CREATE, i, false), &req, 0));
                up = o.msg(0, true, up, &req)?;
                let resp = smb2::create_response(&fid(i), 0, 1 << 30);
                let resp = bytes(smb2::message(&header(smb2::CREATE, i, true), &resp, 0));
                down = o.msg(0, false, down, &resp)?;
            }
        }
        "flow-ids" => {
            o.syn(0)?;
            let (mut up, mut down) = (0, 0);
            for i in 0..1_000_000 * scale {
                let flow = 0x5105_0000_0000_0000_0000_0000_0000_0000 | u128::from(i);
                up = o.msg(0, true, up, &sqos_request(i, flow))?;
                down = o.msg(0, false, down, &sqos_response(i, flow))?;
            }
        }
        "out-of-order-connections" => {
            let kb = [0x55u8; 1024];
            let conns = 100_000 * scale;
            for c in 0..conns {
                o.syn(c)?;
                // 1 KB after a 1 KB hole: held until the hole fills, which it never does.
                o.seg(c, true, ISN + 1 + 1024, TCP_ACK, &kb)?;
            }
            for i in 0..20_000 * scale {
                let c = i % conns;
                let n = (i / conns) as u32 + 2;
                o.seg(c, true, ISN + 1 + 2048 * n, TCP_ACK, &kb)?;
            }
        }
        "snaplen-cut-segments" => {
            // 1448-byte segments cut to 96 bytes (42 of payload) by the snaplen, after a hole;
            // a million per connection, so that sequence numbers never wrap.
            let seg = [0x55u8; 1448];
            for i in 0..3_000_000 * scale {
                let (c, n) = (i / 1_000_000, (i % 1_000_000) as u32);
                if n == 0 {
                    o.syn(c)?;
                }
                o.seg(c, true, ISN + 1 + 1448 * (n + 1), TCP_ACK, &seg)?;
            }
        }
        "one-byte-segments" => {
            // Every other byte, after a hole: nothing coalesces.
            o.syn(0)?;
            for i in 0..3_000_000 * scale {
                let seq = ISN + 1 + 2 * (i as u32).wrapping_add(1);
                o.seg(0, true, seq, TCP_ACK, &[0x55])?;
            }
        }
        "pending-and-resets" => {
            o.syn(0)?;
            let mut at = 0;
            for i in 0..65_536 * scale {
                let body = smb2::read_request(&fid(0), i * 4096, 4096);
                let m = bytes(smb2::message(&header(smb2::READ, i, false), &body, 0));
                at = o.msg(0, true, at, &m)?;
            }
            for c in 1..=100_000 * scale {
                o.syn(c)?;
                o.seg(c, true, ISN + 1, TCP_RST | TCP_ACK, &[])?;
            }
        }
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown case {other} (list: `-- list`)"),
            ))
        }
    }
    o.finish()
}

fn main() {
    // `cargo bench` passes `--bench`; the case and scale are the other arguments.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let code = match args.as_slice() {
        [list] if list == "list" => {
            for (name, what) in CASES {
                println!("{name}\t{what}");
            }
            0
        }
        [case, scale] => {
            let scale = scale.parse::<u64>().unwrap_or(0);
            if scale == 0 {
                eprintln!("adversarial: SCALE is a positive integer");
                2
            } else {
                let out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
                match write_case(case, scale, out) {
                    Ok(()) => 0,
                    // A closed pipe is the reader's choice.
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
                    Err(e) => {
                        eprintln!("adversarial: {e}");
                        2
                    }
                }
            }
        }
        _ => {
            eprintln!("usage: cargo bench --bench adversarial -- CASE SCALE | list");
            0
        }
    };
    std::process::exit(code);
}
