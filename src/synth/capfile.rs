//! Writers for the two capture file formats, by hand (both are a few fixed headers): classic
//! pcap (microsecond or nanosecond timestamps) and pcapng (one Section Header Block, one
//! Interface Description Block per interface, Enhanced Packet Blocks). Ethernet link type.

use std::io::{self, Write};

/// LINKTYPE_ETHERNET.
const LINKTYPE_ETHERNET: u16 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Pcap,
    Pcapng,
}

/// Settings of the file being written.
#[derive(Clone, Copy, Debug)]
pub struct FileConfig {
    pub format: Format,
    /// Nanosecond timestamps (pcap magic 0xa1b23c4d, pcapng if_tsresol 9).
    pub nanos: bool,
    /// Interfaces declared in a pcapng file (at least 1); pcap has exactly one.
    pub interfaces: u32,
    /// Bytes kept per frame (0 = whole frames).
    pub snaplen: u32,
}

/// Streams frames into `out`. Timestamps are microseconds since the Unix epoch.
pub struct CaptureWriter<W: Write> {
    out: W,
    cfg: FileConfig,
    frames: u64,
    bytes: u64,
}

const MAX_SNAPLEN: u32 = 262_144;

impl<W: Write> CaptureWriter<W> {
    pub fn new(mut out: W, cfg: FileConfig) -> io::Result<CaptureWriter<W>> {
        let snaplen = if cfg.snaplen == 0 {
            MAX_SNAPLEN
        } else {
            cfg.snaplen
        };
        let mut header = Vec::with_capacity(128);
        match cfg.format {
            Format::Pcap => {
                let magic: u32 = if cfg.nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
                header.extend_from_slice(&magic.to_le_bytes());
                header.extend_from_slice(&2u16.to_le_bytes());
                header.extend_from_slice(&4u16.to_le_bytes());
                header.extend_from_slice(&0i32.to_le_bytes()); // thiszone
                header.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
                header.extend_from_slice(&snaplen.to_le_bytes());
                header.extend_from_slice(&u32::from(LINKTYPE_ETHERNET).to_le_bytes());
            }
            Format::Pcapng => {
                // Section Header Block: no options, section length unknown (-1).
                header.extend_from_slice(&0x0A0D_0D0Au32.to_le_bytes());
                header.extend_from_slice(&28u32.to_le_bytes());
                header.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
                header.extend_from_slice(&1u16.to_le_bytes());
                header.extend_from_slice(&0u16.to_le_bytes());
                header.extend_from_slice(&(-1i64).to_le_bytes());
                header.extend_from_slice(&28u32.to_le_bytes());
                for _ in 0..cfg.interfaces.max(1) {
                    // IDB with option if_tsresol (code 9, length 1) and opt_endofopt.
                    let resol: u8 = if cfg.nanos { 9 } else { 6 };
                    let len: u32 = 20 + 8 + 4;
                    header.extend_from_slice(&1u32.to_le_bytes());
                    header.extend_from_slice(&len.to_le_bytes());
                    header.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
                    header.extend_from_slice(&0u16.to_le_bytes());
                    header.extend_from_slice(&snaplen.to_le_bytes());
                    header.extend_from_slice(&9u16.to_le_bytes());
                    header.extend_from_slice(&1u16.to_le_bytes());
                    header.extend_from_slice(&[resol, 0, 0, 0]);
                    header.extend_from_slice(&0u32.to_le_bytes());
                    header.extend_from_slice(&len.to_le_bytes());
                }
            }
        }
        out.write_all(&header)?;
        Ok(CaptureWriter {
            out,
            cfg,
            frames: 0,
            bytes: header.len() as u64,
        })
    }

    /// Writes one frame made of `parts` (headers, then payload slices), cut at the snaplen.
    /// Returns the frame number (1-based).
    pub fn write_frame(&mut self, ts_us: u64, interface: u32, parts: &[&[u8]]) -> io::Result<u64> {
        let orig_len: usize = parts.iter().map(|p| p.len()).sum();
        let cap_len = if self.cfg.snaplen == 0 {
            orig_len
        } else {
            orig_len.min(self.cfg.snaplen as usize)
        };
        let (hi, lo) = if self.cfg.nanos {
            (ts_us / 1_000_000, (ts_us % 1_000_000) * 1000)
        } else {
            (ts_us / 1_000_000, ts_us % 1_000_000)
        };
        let cap32 = u32::try_from(cap_len).map_err(|_| too_big())?;
        let orig32 = u32::try_from(orig_len).map_err(|_| too_big())?;
        match self.cfg.format {
            Format::Pcap => {
                let mut rec = [0u8; 16];
                rec[0..4].copy_from_slice(&(hi as u32).to_le_bytes());
                rec[4..8].copy_from_slice(&(lo as u32).to_le_bytes());
                rec[8..12].copy_from_slice(&cap32.to_le_bytes());
                rec[12..16].copy_from_slice(&orig32.to_le_bytes());
                self.out.write_all(&rec)?;
                self.write_parts(parts, cap_len)?;
                self.bytes += 16 + cap_len as u64;
            }
            Format::Pcapng => {
                let pad = (4 - cap_len % 4) % 4;
                let total = 32 + cap_len + pad;
                let total32 = u32::try_from(total).map_err(|_| too_big())?;
                let units = if self.cfg.nanos {
                    1_000_000_000
                } else {
                    1_000_000
                };
                let t = hi * units + lo;
                let mut blk = [0u8; 28];
                blk[0..4].copy_from_slice(&6u32.to_le_bytes());
                blk[4..8].copy_from_slice(&total32.to_le_bytes());
                blk[8..12].copy_from_slice(&interface.to_le_bytes());
                blk[12..16].copy_from_slice(&((t >> 32) as u32).to_le_bytes());
                blk[16..20].copy_from_slice(&(t as u32).to_le_bytes());
                blk[20..24].copy_from_slice(&cap32.to_le_bytes());
                blk[24..28].copy_from_slice(&orig32.to_le_bytes());
                self.out.write_all(&blk)?;
                self.write_parts(parts, cap_len)?;
                self.out.write_all(&[0u8; 3][..pad])?;
                self.out.write_all(&total32.to_le_bytes())?;
                self.bytes += total as u64;
            }
        }
        self.frames += 1;
        Ok(self.frames)
    }

    fn write_parts(&mut self, parts: &[&[u8]], mut left: usize) -> io::Result<()> {
        for p in parts {
            let n = p.len().min(left);
            self.out.write_all(p.get(..n).unwrap_or(&[]))?;
            left -= n;
            if left == 0 {
                break;
            }
        }
        Ok(())
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Bytes written to the file so far.
    pub fn file_bytes(&self) -> u64 {
        self.bytes
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

fn too_big() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "frame longer than 4 GiB")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(format: Format) -> FileConfig {
        FileConfig {
            format,
            nanos: false,
            interfaces: 2,
            snaplen: 0,
        }
    }

    #[test]
    fn pcap_record_layout() {
        let mut w = CaptureWriter::new(Vec::new(), cfg(Format::Pcap)).unwrap();
        assert_eq!(w.write_frame(1_500_000, 0, &[b"abc", b"de"]).unwrap(), 1);
        let out = w.finish().unwrap();
        assert_eq!(out.len(), 24 + 16 + 5);
        assert_eq!(&out[0..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(&out[24..28], &1u32.to_le_bytes());
        assert_eq!(&out[28..32], &500_000u32.to_le_bytes());
        assert_eq!(&out[32..36], &5u32.to_le_bytes());
        assert_eq!(&out[40..], b"abcde");
    }

    #[test]
    fn pcapng_blocks_are_padded_and_counted() {
        let mut w = CaptureWriter::new(Vec::new(), cfg(Format::Pcapng)).unwrap();
        w.write_frame(2_000_001, 1, &[b"abcde"]).unwrap();
        let out = w.finish().unwrap();
        // SHB 28 + 2 IDBs of 32 + EPB 32 + 8.
        assert_eq!(out.len(), 28 + 64 + 40);
        let epb = &out[92..];
        assert_eq!(&epb[0..4], &6u32.to_le_bytes());
        assert_eq!(&epb[4..8], &40u32.to_le_bytes());
        assert_eq!(&epb[8..12], &1u32.to_le_bytes());
        assert_eq!(&epb[16..20], &2_000_001u32.to_le_bytes());
        assert_eq!(&epb[36..40], &40u32.to_le_bytes());
    }

    #[test]
    fn snaplen_cuts_but_keeps_original_length() {
        let mut c = cfg(Format::Pcap);
        c.snaplen = 3;
        let mut w = CaptureWriter::new(Vec::new(), c).unwrap();
        w.write_frame(0, 0, &[b"ab", b"cdef"]).unwrap();
        let out = w.finish().unwrap();
        assert_eq!(&out[32..36], &3u32.to_le_bytes());
        assert_eq!(&out[36..40], &6u32.to_le_bytes());
        assert_eq!(&out[40..], b"abc");
    }
}
