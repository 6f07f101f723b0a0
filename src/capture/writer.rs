//! Minimal pcap and pcapng writers, for tests and the capture generator. They write what they
//! are given (no buffering: wrap the target in a `BufWriter` for bulk output).

use std::io::{self, Write};

use super::Timestamp;

/// Snapshot length written in headers when none is given (Wireshark's default).
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Timestamp precision of a classic pcap file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsPrecision {
    Micro,
    Nano,
}

/// Options of a classic pcap file.
#[derive(Clone, Copy, Debug)]
pub struct PcapOptions {
    pub link_type: u32,
    pub precision: TsPrecision,
    pub big_endian: bool,
    pub snaplen: u32,
}

impl Default for PcapOptions {
    fn default() -> Self {
        PcapOptions {
            link_type: 1,
            precision: TsPrecision::Micro,
            big_endian: false,
            snaplen: DEFAULT_SNAPLEN,
        }
    }
}

/// Classic libpcap format writer.
pub struct PcapWriter<W: Write> {
    w: W,
    opts: PcapOptions,
}

impl<W: Write> PcapWriter<W> {
    /// Little-endian, microsecond timestamps, default snaplen.
    pub fn new(w: W, link_type: u32) -> io::Result<Self> {
        Self::with_options(
            w,
            PcapOptions {
                link_type,
                ..PcapOptions::default()
            },
        )
    }

    pub fn with_options(mut w: W, opts: PcapOptions) -> io::Result<Self> {
        let magic: u32 = match opts.precision {
            TsPrecision::Micro => 0xa1b2_c3d4,
            TsPrecision::Nano => 0xa1b2_3c4d,
        };
        let mut h = Vec::with_capacity(24);
        put32(&mut h, magic, opts.big_endian);
        put16(&mut h, 2, opts.big_endian);
        put16(&mut h, 4, opts.big_endian);
        put32(&mut h, 0, opts.big_endian); // thiszone
        put32(&mut h, 0, opts.big_endian); // sigfigs
        put32(&mut h, opts.snaplen, opts.big_endian);
        put32(&mut h, opts.link_type, opts.big_endian);
        w.write_all(&h)?;
        Ok(PcapWriter { w, opts })
    }

    /// Writes a frame, cut to the snaplen (the original length is recorded).
    pub fn write_packet(&mut self, ts: Timestamp, data: &[u8]) -> io::Result<()> {
        let cut = data.len().min(self.opts.snaplen as usize);
        let orig = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.write_captured(ts, data.get(..cut).unwrap_or(data), orig)
    }

    /// Writes `captured` bytes of a frame that was `orig_len` bytes long on the wire.
    pub fn write_captured(
        &mut self,
        ts: Timestamp,
        captured: &[u8],
        orig_len: u32,
    ) -> io::Result<()> {
        let be = self.opts.big_endian;
        let secs = ts.0.div_euclid(1_000_000_000);
        let nanos = ts.0.rem_euclid(1_000_000_000);
        let frac = match self.opts.precision {
            TsPrecision::Micro => nanos / 1000,
            TsPrecision::Nano => nanos,
        };
        let caplen = u32::try_from(captured.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
        let mut h = [0u8; 16];
        let fields = [secs as u32, frac as u32, caplen, orig_len];
        for (slot, v) in h.chunks_exact_mut(4).zip(fields) {
            slot.copy_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() });
        }
        self.w.write_all(&h)?;
        self.w.write_all(captured)
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}

/// pcapng writer: sections, interfaces, enhanced and simple packet blocks.
pub struct PcapngWriter<W: Write> {
    w: W,
    big_endian: bool,
    /// Per interface of the current section: timestamp units per second, and offset (s).
    interfaces: Vec<u64>,
    offsets: Vec<i64>,
}

impl<W: Write> PcapngWriter<W> {
    /// Starts the first section (little endian).
    pub fn new(w: W) -> io::Result<Self> {
        Self::with_byte_order(w, false)
    }

    /// Starts the first section in the given byte order.
    pub fn with_byte_order(w: W, big_endian: bool) -> io::Result<Self> {
        let mut me = PcapngWriter {
            w,
            big_endian,
            interfaces: Vec::new(),
            offsets: Vec::new(),
        };
        me.new_section()?;
        Ok(me)
    }

    /// Starts a new section; interfaces must be described again.
    pub fn new_section(&mut self) -> io::Result<()> {
        let be = self.big_endian;
        let mut body = Vec::with_capacity(16);
        put32(&mut body, 0x1a2b_3c4d, be); // byte-order magic
        put16(&mut body, 1, be);
        put16(&mut body, 0, be);
        body.extend_from_slice(&[0xff; 8]); // section length unknown (-1)
        self.interfaces.clear();
        self.offsets.clear();
        self.block(0x0A0D_0D0A, &body)
    }

    /// Describes an interface; returns its index in the section. `tsresol` is the pcapng
    /// if_tsresol byte (6 = µs, 9 = ns, 0x80|n = 2^-n s).
    pub fn add_interface(&mut self, link_type: u16, snaplen: u32, tsresol: u8) -> io::Result<u32> {
        self.add_interface_with_offset(link_type, snaplen, tsresol, 0)
    }

    /// Like [`add_interface`](Self::add_interface), with an if_tsoffset (seconds added to
    /// every timestamp of the interface; packets are then written relative to it).
    pub fn add_interface_with_offset(
        &mut self,
        link_type: u16,
        snaplen: u32,
        tsresol: u8,
        tsoffset: i64,
    ) -> io::Result<u32> {
        let be = self.big_endian;
        let exp = u32::from(tsresol & 0x7f);
        let per_sec = if tsresol & 0x80 == 0 {
            10u64.checked_pow(exp)
        } else {
            1u64.checked_shl(exp).filter(|_| exp < 64)
        }
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad tsresol"))?;
        let mut body = Vec::with_capacity(20);
        put16(&mut body, link_type, be);
        put16(&mut body, 0, be);
        put32(&mut body, snaplen, be);
        if tsresol != 6 {
            put16(&mut body, 9, be); // if_tsresol
            put16(&mut body, 1, be);
            body.extend_from_slice(&[tsresol, 0, 0, 0]);
        }
        if tsoffset != 0 {
            put16(&mut body, 14, be); // if_tsoffset
            put16(&mut body, 8, be);
            body.extend_from_slice(&if be {
                tsoffset.to_be_bytes()
            } else {
                tsoffset.to_le_bytes()
            });
        }
        if tsresol != 6 || tsoffset != 0 {
            body.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
        }
        self.block(1, &body)?;
        self.interfaces.push(per_sec);
        self.offsets.push(tsoffset);
        u32::try_from(self.interfaces.len() - 1)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many interfaces"))
    }

    /// Writes an enhanced packet block: `captured` bytes of a frame `orig_len` bytes long.
    pub fn write_epb(
        &mut self,
        interface: u32,
        ts: Timestamp,
        captured: &[u8],
        orig_len: u32,
    ) -> io::Result<()> {
        let per_sec = *self
            .interfaces
            .get(interface as usize)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "unknown interface"))?;
        let offset = self.offsets.get(interface as usize).copied().unwrap_or(0);
        let ns =
            u128::try_from(ts.0.saturating_sub(offset.saturating_mul(1_000_000_000))).unwrap_or(0);
        let units = u64::try_from(ns * u128::from(per_sec) / 1_000_000_000).unwrap_or(u64::MAX);
        let caplen = u32::try_from(captured.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
        let be = self.big_endian;
        let mut body = Vec::with_capacity(20 + captured.len() + 3);
        put32(&mut body, interface, be);
        put32(&mut body, (units >> 32) as u32, be);
        put32(&mut body, units as u32, be);
        put32(&mut body, caplen, be);
        put32(&mut body, orig_len, be);
        body.extend_from_slice(captured);
        self.block(6, &body)
    }

    /// Writes a simple packet block (interface 0, no timestamp).
    pub fn write_spb(&mut self, captured: &[u8], orig_len: u32) -> io::Result<()> {
        let mut body = Vec::with_capacity(4 + captured.len() + 3);
        put32(&mut body, orig_len, self.big_endian);
        body.extend_from_slice(captured);
        self.block(3, &body)
    }

    /// Writes a block of any type (the body is padded to 32 bits).
    pub fn write_block(&mut self, block_type: u32, body: &[u8]) -> io::Result<()> {
        self.block(block_type, body)
    }

    fn block(&mut self, block_type: u32, body: &[u8]) -> io::Result<()> {
        let pad = (4 - body.len() % 4) % 4;
        let total = u32::try_from(12 + body.len() + pad)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "block too large"))?;
        let be = self.big_endian;
        let mut head = Vec::with_capacity(8);
        put32(&mut head, block_type, be);
        put32(&mut head, total, be);
        self.w.write_all(&head)?;
        self.w.write_all(body)?;
        self.w.write_all(&[0u8; 3][..pad])?;
        let mut tail = Vec::with_capacity(4);
        put32(&mut tail, total, be);
        self.w.write_all(&tail)
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}

fn put32(v: &mut Vec<u8>, x: u32, be: bool) {
    v.extend_from_slice(&if be { x.to_be_bytes() } else { x.to_le_bytes() });
}

fn put16(v: &mut Vec<u8>, x: u16, be: bool) {
    v.extend_from_slice(&if be { x.to_be_bytes() } else { x.to_le_bytes() });
}
