//! The crate's one pcap and pcapng writer, for `dissect -w`, tests and the capture generator.
//! They write what they are given (no buffering: wrap the target in a `BufWriter` for bulk
//! output); a frame may be given in parts (headers, then payload), never joined. [`FileWriter`]
//! picks the format at run time, [`Gzip`] optionally compresses the file.

use std::io::{self, Write};

use flate2::write::GzEncoder;
use flate2::Compression;

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
    counts: Counts,
}

/// Frames and bytes written so far (headers included).
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    frames: u64,
    bytes: u64,
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
        Ok(PcapWriter {
            w,
            opts,
            counts: Counts {
                frames: 0,
                bytes: h.len() as u64,
            },
        })
    }

    /// Writes a frame, cut to the snaplen (the original length is recorded).
    pub fn write_packet(&mut self, ts: Timestamp, data: &[u8]) -> io::Result<()> {
        let cut = data.len().min(self.opts.snaplen as usize);
        let orig = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.write_captured(ts, data.get(..cut).unwrap_or(data), orig)
    }

    /// Writes a frame made of `parts` (headers, then payload), cut to the snaplen.
    pub fn write_parts(&mut self, ts: Timestamp, parts: &[&[u8]]) -> io::Result<()> {
        let orig = frame_len(parts)?;
        let cut = orig.min(self.opts.snaplen);
        self.record_header(ts, cut, orig)?;
        write_cut(&mut self.w, parts, cut as usize)
    }

    /// Writes `captured` bytes of a frame that was `orig_len` bytes long on the wire.
    pub fn write_captured(
        &mut self,
        ts: Timestamp,
        captured: &[u8],
        orig_len: u32,
    ) -> io::Result<()> {
        let caplen = u32::try_from(captured.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
        self.record_header(ts, caplen, orig_len)?;
        self.w.write_all(captured)
    }

    /// The record header of a frame of `caplen` captured bytes (counted as written).
    fn record_header(&mut self, ts: Timestamp, caplen: u32, orig_len: u32) -> io::Result<()> {
        let be = self.opts.big_endian;
        let secs = ts.0.div_euclid(1_000_000_000);
        let nanos = ts.0.rem_euclid(1_000_000_000);
        let frac = match self.opts.precision {
            TsPrecision::Micro => nanos / 1000,
            TsPrecision::Nano => nanos,
        };
        let mut h = [0u8; 16];
        let fields = [secs as u32, frac as u32, caplen, orig_len];
        for (slot, v) in h.chunks_exact_mut(4).zip(fields) {
            slot.copy_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() });
        }
        self.counts.frames += 1;
        self.counts.bytes += 16 + u64::from(caplen);
        self.w.write_all(&h)
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.counts.frames
    }

    /// Bytes written so far, the file header included.
    pub fn bytes(&self) -> u64 {
        self.counts.bytes
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}

/// pcapng writer: sections, interfaces, enhanced and simple packet blocks.
pub struct PcapngWriter<W: Write> {
    w: W,
    big_endian: bool,
    /// Per interface of the current section: timestamp units per second, offset (s) and
    /// snaplen (0: none).
    interfaces: Vec<u64>,
    offsets: Vec<i64>,
    snaplens: Vec<u32>,
    counts: Counts,
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
            snaplens: Vec::new(),
            counts: Counts::default(),
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
        self.snaplens.clear();
        self.block(0x0A0D_0D0A, &body)
    }

    /// Describes an interface; returns its index in the section. `tsresol` is the pcapng
    /// if_tsresol byte (6 = µs, 9 = ns, 0x80|n = 2^-n s).
    pub fn add_interface(&mut self, link_type: u16, snaplen: u32, tsresol: u8) -> io::Result<u32> {
        self.interface(link_type, snaplen, tsresol, 0, false)
    }

    /// Like [`add_interface`](Self::add_interface), but the if_tsresol option is written even
    /// when it is the default (6, µs).
    pub fn add_interface_stating_tsresol(
        &mut self,
        link_type: u16,
        snaplen: u32,
        tsresol: u8,
    ) -> io::Result<u32> {
        self.interface(link_type, snaplen, tsresol, 0, true)
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
        self.interface(link_type, snaplen, tsresol, tsoffset, false)
    }

    fn interface(
        &mut self,
        link_type: u16,
        snaplen: u32,
        tsresol: u8,
        tsoffset: i64,
        state_tsresol: bool,
    ) -> io::Result<u32> {
        let be = self.big_endian;
        let tsresol_option = tsresol != 6 || state_tsresol;
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
        if tsresol_option {
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
        if tsresol_option || tsoffset != 0 {
            body.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
        }
        self.block(1, &body)?;
        self.interfaces.push(per_sec);
        self.offsets.push(tsoffset);
        self.snaplens.push(snaplen);
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
        self.epb(interface, ts, &[captured], captured.len(), orig_len)
    }

    /// Writes an enhanced packet block of a frame made of `parts` (headers, then payload), cut
    /// to the interface's snaplen.
    pub fn write_epb_parts(
        &mut self,
        interface: u32,
        ts: Timestamp,
        parts: &[&[u8]],
    ) -> io::Result<()> {
        let orig = frame_len(parts)?;
        let snaplen = self.snaplens.get(interface as usize).copied().unwrap_or(0);
        let cut = if snaplen == 0 {
            orig
        } else {
            orig.min(snaplen)
        };
        self.epb(interface, ts, parts, cut as usize, orig)
    }

    /// An EPB carrying the first `caplen` bytes of `parts`.
    fn epb(
        &mut self,
        interface: u32,
        ts: Timestamp,
        parts: &[&[u8]],
        caplen: usize,
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
        let too_large = || io::Error::new(io::ErrorKind::InvalidInput, "frame too large");
        let caplen32 = u32::try_from(caplen).map_err(|_| too_large())?;
        let be = self.big_endian;
        let mut head = [0u8; 20];
        let fields = [
            interface,
            (units >> 32) as u32,
            units as u32,
            caplen32,
            orig_len,
        ];
        for (slot, v) in head.chunks_exact_mut(4).zip(fields) {
            slot.copy_from_slice(&word(v, be));
        }
        let total =
            u32::try_from(12 + 20 + caplen + (4 - caplen % 4) % 4).map_err(|_| too_large())?;
        self.open_block(6, total)?;
        self.w.write_all(&head)?;
        write_cut(&mut self.w, parts, caplen)?;
        self.close_block(caplen + 20, total)?;
        self.counts.frames += 1;
        Ok(())
    }

    /// Writes a simple packet block (interface 0, no timestamp).
    pub fn write_spb(&mut self, captured: &[u8], orig_len: u32) -> io::Result<()> {
        let mut body = Vec::with_capacity(4 + captured.len() + 3);
        put32(&mut body, orig_len, self.big_endian);
        body.extend_from_slice(captured);
        self.block(3, &body)?;
        self.counts.frames += 1;
        Ok(())
    }

    /// Writes a block of any type (the body is padded to 32 bits).
    pub fn write_block(&mut self, block_type: u32, body: &[u8]) -> io::Result<()> {
        self.block(block_type, body)
    }

    fn block(&mut self, block_type: u32, body: &[u8]) -> io::Result<()> {
        let pad = (4 - body.len() % 4) % 4;
        let total = u32::try_from(12 + body.len() + pad)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "block too large"))?;
        self.open_block(block_type, total)?;
        self.w.write_all(body)?;
        self.close_block(body.len(), total)
    }

    /// A block's type and total length (`total` counts the padding and both lengths).
    fn open_block(&mut self, block_type: u32, total: u32) -> io::Result<()> {
        self.counts.bytes += u64::from(total);
        self.w.write_all(&word(block_type, self.big_endian))?;
        self.w.write_all(&word(total, self.big_endian))
    }

    /// Pads a body of `body_len` bytes to 32 bits and repeats the total length.
    fn close_block(&mut self, body_len: usize, total: u32) -> io::Result<()> {
        let pad = (4 - body_len % 4) % 4;
        self.w.write_all(&[0u8; 3][..pad])?;
        self.w.write_all(&word(total, self.big_endian))
    }

    /// Packets (EPB and SPB) written so far.
    pub fn frames(&self) -> u64 {
        self.counts.frames
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.counts.bytes
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}

/// The length of a frame given in parts.
fn frame_len(parts: &[&[u8]]) -> io::Result<u32> {
    u32::try_from(parts.iter().map(|p| p.len()).sum::<usize>())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))
}

/// Writes the first `left` bytes of the concatenated `parts`.
fn write_cut(w: &mut impl Write, parts: &[&[u8]], mut left: usize) -> io::Result<()> {
    for p in parts {
        let n = p.len().min(left);
        w.write_all(p.get(..n).unwrap_or(&[]))?;
        left -= n;
        if left == 0 {
            break;
        }
    }
    Ok(())
}

fn word(x: u32, be: bool) -> [u8; 4] {
    if be {
        x.to_be_bytes()
    } else {
        x.to_le_bytes()
    }
}

fn put32(v: &mut Vec<u8>, x: u32, be: bool) {
    v.extend_from_slice(&word(x, be));
}

fn put16(v: &mut Vec<u8>, x: u16, be: bool) {
    v.extend_from_slice(&if be { x.to_be_bytes() } else { x.to_le_bytes() });
}

/// The format of a capture file being written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    Pcap,
    Pcapng,
}

/// Options of a [`FileWriter`]: every interface has the same link type, resolution and snaplen.
#[derive(Clone, Copy, Debug)]
pub struct FileOptions {
    pub format: FileFormat,
    pub link_type: u16,
    /// Nanosecond timestamps (pcap magic 0xa1b23c4d, pcapng if_tsresol 9), else µs.
    pub nanos: bool,
    /// Interfaces declared in a pcapng file (at least 1); pcap has exactly one.
    pub interfaces: u32,
    /// Bytes kept per frame (0: [`DEFAULT_SNAPLEN`]).
    pub snaplen: u32,
}

/// A pcap or pcapng file whose format is chosen at run time. A pcapng file declares its
/// interfaces up front, each stating its if_tsresol.
pub enum FileWriter<W: Write> {
    Pcap(PcapWriter<W>),
    Pcapng(PcapngWriter<W>),
}

impl<W: Write> FileWriter<W> {
    pub fn new(w: W, opts: FileOptions) -> io::Result<Self> {
        let snaplen = if opts.snaplen == 0 {
            DEFAULT_SNAPLEN
        } else {
            opts.snaplen
        };
        Ok(match opts.format {
            FileFormat::Pcap => FileWriter::Pcap(PcapWriter::with_options(
                w,
                PcapOptions {
                    link_type: u32::from(opts.link_type),
                    precision: if opts.nanos {
                        TsPrecision::Nano
                    } else {
                        TsPrecision::Micro
                    },
                    big_endian: false,
                    snaplen,
                },
            )?),
            FileFormat::Pcapng => {
                let mut p = PcapngWriter::new(w)?;
                let tsresol = if opts.nanos { 9 } else { 6 };
                for _ in 0..opts.interfaces.max(1) {
                    p.add_interface_stating_tsresol(opts.link_type, snaplen, tsresol)?;
                }
                FileWriter::Pcapng(p)
            }
        })
    }

    /// Writes a frame made of `parts` (headers, then payload), cut to the snaplen; returns its
    /// number (1-based). A pcap file ignores `interface`.
    pub fn write_frame(
        &mut self,
        interface: u32,
        ts: Timestamp,
        parts: &[&[u8]],
    ) -> io::Result<u64> {
        match self {
            FileWriter::Pcap(w) => w.write_parts(ts, parts)?,
            FileWriter::Pcapng(w) => w.write_epb_parts(interface, ts, parts)?,
        }
        Ok(self.frames())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        match self {
            FileWriter::Pcap(w) => w.frames(),
            FileWriter::Pcapng(w) => w.frames(),
        }
    }

    /// Bytes written so far (before any compression of the target).
    pub fn bytes(&self) -> u64 {
        match self {
            FileWriter::Pcap(w) => w.bytes(),
            FileWriter::Pcapng(w) => w.bytes(),
        }
    }

    pub fn into_inner(self) -> W {
        match self {
            FileWriter::Pcap(w) => w.into_inner(),
            FileWriter::Pcapng(w) => w.into_inner(),
        }
    }
}

/// A target written plain or gzip-compressed (a `.gz` capture, which the reader opens too).
pub enum Gzip<W: Write> {
    Plain(W),
    Gz(GzEncoder<W>),
}

impl<W: Write> Gzip<W> {
    /// `compress`: gzip at the default level.
    pub fn new(w: W, compress: bool) -> Self {
        if compress {
            Gzip::Gz(GzEncoder::new(w, Compression::default()))
        } else {
            Gzip::Plain(w)
        }
    }

    /// Ends the gzip stream; returns the target.
    pub fn finish(self) -> io::Result<W> {
        match self {
            Gzip::Plain(w) => Ok(w),
            Gzip::Gz(w) => w.finish(),
        }
    }
}

impl<W: Write> Write for Gzip<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Gzip::Plain(w) => w.write(buf),
            Gzip::Gz(w) => w.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Gzip::Plain(w) => w.write_all(buf),
            Gzip::Gz(w) => w.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Gzip::Plain(w) => w.flush(),
            Gzip::Gz(w) => w.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(format: FileFormat) -> FileOptions {
        FileOptions {
            format,
            link_type: 1,
            nanos: false,
            interfaces: 2,
            snaplen: DEFAULT_SNAPLEN,
        }
    }

    #[test]
    fn pcap_record_from_parts() {
        let mut w = FileWriter::new(Vec::new(), opts(FileFormat::Pcap)).unwrap();
        let ts = Timestamp(1_500_000_000);
        assert_eq!(w.write_frame(0, ts, &[b"abc", b"de"]).unwrap(), 1);
        assert_eq!(w.bytes(), 24 + 16 + 5);
        let out = w.into_inner();
        assert_eq!(out.len(), 24 + 16 + 5);
        assert_eq!(&out[0..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(&out[24..28], &1u32.to_le_bytes());
        assert_eq!(&out[28..32], &500_000u32.to_le_bytes());
        assert_eq!(&out[32..36], &5u32.to_le_bytes());
        assert_eq!(&out[40..], b"abcde");
    }

    #[test]
    fn pcapng_blocks_are_padded_and_counted() {
        let mut w = FileWriter::new(Vec::new(), opts(FileFormat::Pcapng)).unwrap();
        w.write_frame(1, Timestamp(2_000_001_000), &[b"abc", b"de"])
            .unwrap();
        assert_eq!(w.frames(), 1);
        // SHB 28 + 2 IDBs of 32 (if_tsresol stated) + EPB 32 + 8.
        assert_eq!(w.bytes(), 28 + 64 + 40);
        let out = w.into_inner();
        assert_eq!(out.len(), 28 + 64 + 40);
        assert_eq!(&out[28 + 16..28 + 20], &[9, 0, 1, 0]);
        assert_eq!(out[28 + 20], 6);
        let epb = &out[92..];
        assert_eq!(&epb[0..4], &6u32.to_le_bytes());
        assert_eq!(&epb[4..8], &40u32.to_le_bytes());
        assert_eq!(&epb[8..12], &1u32.to_le_bytes());
        assert_eq!(&epb[16..20], &2_000_001u32.to_le_bytes());
        assert_eq!(&epb[28..33], b"abcde");
        assert_eq!(&epb[36..40], &40u32.to_le_bytes());
    }

    #[test]
    fn snaplen_cuts_but_keeps_original_length() {
        for format in [FileFormat::Pcap, FileFormat::Pcapng] {
            let mut o = opts(format);
            o.snaplen = 3;
            let mut w = FileWriter::new(Vec::new(), o).unwrap();
            w.write_frame(0, Timestamp(0), &[b"ab", b"cdef"]).unwrap();
            let out = w.into_inner();
            let (caplen_at, data_at) = match format {
                FileFormat::Pcap => (24 + 8, 24 + 16),
                FileFormat::Pcapng => (28 + 64 + 20, 28 + 64 + 28),
            };
            assert_eq!(&out[caplen_at..caplen_at + 4], &3u32.to_le_bytes());
            assert_eq!(&out[caplen_at + 4..caplen_at + 8], &6u32.to_le_bytes());
            assert_eq!(&out[data_at..data_at + 3], b"abc");
        }
    }

    #[test]
    fn gzip_target_round_trips() {
        let mut g = Gzip::new(Vec::new(), true);
        g.write_all(b"pcap bytes").unwrap();
        let gz = g.finish().unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
        let mut back = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut back)
            .unwrap();
        assert_eq!(back, "pcap bytes");
        assert_eq!(
            Gzip::new(Vec::new(), false).finish().unwrap(),
            Vec::<u8>::new()
        );
    }
}
