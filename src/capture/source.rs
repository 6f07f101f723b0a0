//! Streaming pcap / pcapng reader on top of pcap-parser's buffered readers.
//!
//! The reader looks at each record's length itself before asking pcap-parser to parse it, so it
//! knows whether it needs more input (a short read from a pipe is "need more", only a read of 0
//! bytes is the end), whether the input ended inside a record (cut-off capture), or whether the
//! record is broken. Records are consumed lazily: a returned [`Frame`] borrows the reader's
//! buffer until the next call.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use pcap_parser::pcapng::Block;
use pcap_parser::traits::{PcapNGPacketBlock, PcapReaderIterator};
use pcap_parser::{
    parse_pcap_header, LegacyPcapReader, OptionCode, PcapBlockOwned, PcapError, PcapHeader,
    PcapNGReader,
};
use thiserror::Error;

use super::access::{FileAccess, Reading, ShortLooks};
#[cfg(target_os = "linux")]
use super::ahead::LinesAhead;
use super::chunks::{ChunkReader, TrialCarried};
use super::input::{maybe_gunzip, read_full, rewind, KeepError, Tap, TapState, GZIP_MAGIC};
use super::layout::{next_record, Layout};
#[cfg(target_os = "linux")]
use super::map_reader::MapReader;
#[cfg(target_os = "linux")]
use super::mapped::{Map, MapView, SharedMap};
use super::{Frame, FrameRun, Timestamp};

/// Largest record (pcap record or pcapng block) accepted. Bigger ones are reported as corrupt
/// rather than growing the buffer: real frames stay far below (Wireshark's own limit for a
/// packet is 256 KiB), so such a length is almost always damage.
pub const MAX_BLOCK_LEN: usize = 1 << 20;
/// The read buffer: one maximal record plus slack, allocated once.
const BUFFER_CAPACITY: usize = MAX_BLOCK_LEN + 64 * 1024;
/// A streamed reader's buffer starts this small and grows (up to `BUFFER_CAPACITY`) when a
/// record needs it: most records are far smaller, and a small capture (or a fuzz input) then
/// costs no 1 MiB buffer.
const INITIAL_CAPACITY: usize = 64 * 1024;
/// Interfaces per pcapng section; a file declaring more is treated as damaged.
const MAX_INTERFACES: usize = 1 << 16;

const SHB_TYPE: u32 = 0x0A0D_0D0A;
const IDB_TYPE: u32 = 1;
const PB_TYPE: u32 = 2;
const SPB_TYPE: u32 = 3;
const EPB_TYPE: u32 = 6;
const BOM_LE: [u8; 4] = [0x4d, 0x3c, 0x2b, 0x1a];
const BOM_BE: [u8; 4] = [0x1a, 0x2b, 0x3c, 0x4d];

#[derive(Debug, Error)]
pub enum CaptureError {
    #[error("{path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("not a pcap or pcapng capture (offset {offset})")]
    NotACapture { offset: u64 },
    #[error("empty: no capture in it (0 bytes)")]
    Empty,
    #[error("read error at offset {offset}: {source}")]
    Io { offset: u64, source: std::io::Error },
    #[error("capture cut off in frame {frame} at offset {offset}")]
    Truncated { frame: u64, offset: u64 },
    #[error("corrupt capture at frame {frame}, offset {offset}: {reason}")]
    Corrupt {
        frame: u64,
        offset: u64,
        reason: String,
    },
    /// One of several captures read as one (frame and offset are the file's own).
    #[error("{path}: {source}")]
    InFile {
        path: String,
        source: Box<CaptureError>,
    },
}

impl CaptureError {
    /// True when nothing could be read at all (exit code class "unusable input"); otherwise
    /// the frames read before the error stand ("damaged but read").
    pub fn is_unusable(&self) -> bool {
        match self {
            CaptureError::Open { .. } | CaptureError::NotACapture { .. } | CaptureError::Empty => {
                true
            }
            CaptureError::Io { offset, .. } => *offset == 0,
            CaptureError::Truncated { frame, .. } | CaptureError::Corrupt { frame, .. } => {
                *frame <= 1
            }
            // The other captures were read.
            CaptureError::InFile { .. } => false,
        }
    }
}

/// The container format of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    Pcap { nanosecond: bool, big_endian: bool },
    PcapNg,
}

/// A pcapng interface as described by its IDB.
#[derive(Clone, Copy, Debug)]
struct Interface {
    link_type: u32,
    snaplen: u32,
    /// Timestamp units per second (if_tsresol).
    units_per_sec: u64,
    /// Seconds added to every timestamp (if_tsoffset).
    offset_secs: i64,
    /// Nanoseconds a unit and the offset in nanoseconds, where a unit is a whole number of
    /// nanoseconds (if_tsresol 10^0 to 10^9, and 2^0 to 2^9) and the offset fits: a timestamp
    /// is then a multiplication and an addition ([`ng_timestamp`]).
    exact_ns: Option<(u64, i64)>,
}

impl Interface {
    fn new(link_type: u32, snaplen: u32, units_per_sec: u64, offset_secs: i64) -> Interface {
        let per_unit = (units_per_sec > 0 && 1_000_000_000 % units_per_sec == 0)
            .then(|| 1_000_000_000 / units_per_sec);
        Interface {
            link_type,
            snaplen,
            units_per_sec,
            offset_secs,
            exact_ns: per_unit.zip(offset_secs.checked_mul(1_000_000_000)),
        }
    }
}

/// A legacy pcap file's header: its records start after it.
#[cfg(target_os = "linux")]
const PCAP_HEADER_LEN: usize = 24;
/// Parts a file is cut into at most ([`CaptureReader::open_parts`]): each holds a map.
#[cfg(target_os = "linux")]
const MAX_PARTS: usize = 16;

enum Format {
    Pcap {
        link_type: u32,
        nanosecond: bool,
        big_endian: bool,
        /// pcap-parser hands out the file header as the first "block".
        header_pending: bool,
        /// 16, or 24 for the "modified" (Kuznetzov) format.
        record_header_len: usize,
    },
    PcapNg {
        big_endian: bool,
        interfaces: Vec<Interface>,
    },
}

/// Where the records are read from: a regular file's chunks or its memory map (their readers
/// called directly, so that their small methods inline into the per-record path), or
/// pcap-parser's reader over a stream.
// One a capture, asked for its data on every record: kept inline, not behind a box.
#[allow(clippy::large_enum_variant)]
enum Records {
    #[cfg(target_os = "linux")]
    Mapped(MapReader),
    Chunked(ChunkReader),
    Streamed(Box<dyn PcapReaderIterator + Send>),
}

/// `$body` with `$r` bound to the reader, whichever it is.
macro_rules! on_records {
    ($records:expr, $r:ident => $body:expr) => {
        match $records {
            #[cfg(target_os = "linux")]
            Records::Mapped($r) => $body,
            Records::Chunked($r) => $body,
            Records::Streamed($r) => $body,
        }
    };
}

/// The parts of [`PcapReaderIterator`] the capture reader uses.
impl Records {
    fn next(&mut self) -> Result<(usize, PcapBlockOwned<'_>), PcapError<&[u8]>> {
        on_records!(self, r => r.next())
    }
    fn data(&self) -> &[u8] {
        on_records!(self, r => r.data())
    }
    fn consume_noshift(&mut self, offset: usize) {
        on_records!(self, r => r.consume_noshift(offset))
    }
    fn consumed(&self) -> usize {
        on_records!(self, r => r.consumed())
    }
    fn refill(&mut self) -> Result<(), PcapError<&[u8]>> {
        on_records!(self, r => r.refill())
    }
    fn grow(&mut self, new_size: usize) -> bool {
        on_records!(self, r => r.grow(new_size))
    }
    fn reader_exhausted(&self) -> bool {
        on_records!(self, r => r.reader_exhausted())
    }
}

impl Layout {
    fn of(format: &Format) -> Layout {
        match format {
            Format::Pcap {
                big_endian,
                record_header_len,
                ..
            } => Layout::Pcap {
                big_endian: *big_endian,
                modified: *record_header_len == 24,
            },
            Format::PcapNg { big_endian, .. } => Layout::PcapNg {
                big_endian: *big_endian,
            },
        }
    }
}

/// A legacy pcap record's header: time (seconds, then micro- or nanoseconds), captured and
/// original length. (The modified format's 8 further bytes are not needed.)
struct RecordHeader {
    ts_sec: u32,
    ts_frac: u32,
    caplen: u32,
    orig_len: u32,
}

impl RecordHeader {
    fn read(data: &[u8], big_endian: bool) -> Option<RecordHeader> {
        let bytes: &[u8; 16] = data.first_chunk()?;
        // Four words read alike, then the byte order settled once (no branch per field).
        let words: [u32; 4] = std::array::from_fn(|i| {
            u32::from_le_bytes([
                bytes[4 * i],
                bytes[4 * i + 1],
                bytes[4 * i + 2],
                bytes[4 * i + 3],
            ])
        });
        let [ts_sec, ts_frac, caplen, orig_len] = if big_endian {
            words.map(u32::swap_bytes)
        } else {
            words
        };
        Some(RecordHeader {
            ts_sec,
            ts_frac,
            caplen,
            orig_len,
        })
    }

    /// The whole record's length (this header, `header_len` bytes, and the captured bytes), or
    /// `None` when the record claims more than a block may hold.
    fn record_len(&self, header_len: usize) -> Option<usize> {
        let caplen = self.caplen as usize;
        (caplen <= MAX_BLOCK_LEN - header_len).then_some(header_len + caplen)
    }

    /// The packet of the record this header begins (`header_len` bytes long), whose bytes
    /// follow the header.
    fn packet(&self, header_len: usize, link_type: u32, nanosecond: bool) -> PacketMeta {
        let frac_ns = if nanosecond {
            i64::from(self.ts_frac)
        } else {
            i64::from(self.ts_frac) * 1000
        };
        PacketMeta {
            start: header_len,
            end: header_len + self.caplen as usize,
            ts: timestamp(i64::from(self.ts_sec), frac_ns),
            interface: 0,
            link_type,
            orig_len: self.orig_len,
        }
    }
}

/// How the packets of a mapped file are laid out, for `walk_record`.
#[cfg(target_os = "linux")]
#[derive(Clone, Copy)]
enum Walk<'f> {
    Pcap {
        big_endian: bool,
        header_len: usize,
        nanosecond: bool,
        link_type: u32,
    },
    /// Enhanced packet blocks of the current section, with its interfaces.
    Ng {
        big_endian: bool,
        interfaces: &'f [Interface],
    },
}

/// Where a file read in chunks switches to its map ([`CaptureReader::map_where`]).
#[derive(Clone, Copy)]
enum Pays {
    /// Where a look at the map finds it cheaper than the copy (`access::mapping_pays`).
    Looked,
    /// That, or where the file comes from disk (none of it looked at in the page cache): with
    /// a thread indexing its records ahead, that thread takes the waits for the disk (as
    /// quick as `cat`, where the chunks took 1.15x as long).
    OrCold,
}

#[cfg(target_os = "linux")]
impl Format {
    /// How a legacy pcap file's record headers lie, for finding record starts from the bytes
    /// alone (`split`); `None` for pcapng.
    fn record_layout(&self) -> Option<super::split::RecordLayout> {
        match self {
            Format::Pcap { .. } => Some(self.index_layout().0),
            Format::PcapNg { .. } => None,
        }
    }

    /// How the file's records lie for a thread that indexes them ahead (`capture::index`),
    /// and where the first begins: a legacy pcap file's after its header, a pcapng file's
    /// blocks from its first section header on (in the first section's byte order).
    fn index_layout(&self) -> (super::split::RecordLayout, usize) {
        use super::split::{RecordKind, RecordLayout};
        match *self {
            Format::Pcap {
                nanosecond,
                big_endian,
                record_header_len,
                ..
            } => {
                let kind = RecordKind::Pcap {
                    nanosecond,
                    header_len: record_header_len,
                };
                (RecordLayout { big_endian, kind }, PCAP_HEADER_LEN)
            }
            Format::PcapNg { big_endian, .. } => {
                let kind = RecordKind::PcapNg;
                (RecordLayout { big_endian, kind }, 0)
            }
        }
    }

    /// How `walk_record` reads this file's packets (`None`: the pcap file header comes first).
    fn walk(&self) -> Option<Walk<'_>> {
        match *self {
            Format::Pcap {
                link_type,
                nanosecond,
                big_endian,
                header_pending: false,
                record_header_len,
            } => Some(Walk::Pcap {
                big_endian,
                header_len: record_header_len,
                nanosecond,
                link_type,
            }),
            Format::Pcap { .. } => None,
            Format::PcapNg {
                big_endian,
                ref interfaces,
                ..
            } => Some(Walk::Ng {
                big_endian,
                interfaces,
            }),
        }
    }
}

/// A packet found in a map by `walk_record`: where its bytes lie in its record (offsets from
/// the record's start) and its metadata, and the record's length.
#[cfg(target_os = "linux")]
struct Walked {
    meta: PacketMeta,
    len: usize,
}

/// A run's walk over the records where they lie (`CaptureReader::take_run`), its state in
/// locals: the loop's every frame costs instructions, and fields reached through the reader
/// are loaded and stored anew around each call of `take`.
#[cfg(target_os = "linux")]
struct RunWalk<'m> {
    view: MapView<'m>,
    /// Where `view` begins in the map.
    start: usize,
    map: Option<&'m super::mapped::Map>,
    frames: u64,
    ahead: LinesAhead,
}

#[cfg(target_os = "linux")]
impl RunWalk<'_> {
    /// Shows `take` each whole, sane record from the start of the view (at most `max`) until
    /// it refuses one; returns the bytes taken and the run.
    #[inline(always)]
    fn run<T: FnMut(&Frame<'_>) -> bool>(
        &mut self,
        walk: Walk<'_>,
        max: u64,
        take: &mut T,
    ) -> (usize, Option<FrameRun>) {
        let view = self.view;
        // A run's count kept as a value, not an `Option` (which cost the pcapng walk's loop
        // 55 instructions a frame).
        let (mut at, mut run) = (0, FrameRun::EMPTY);
        // Resident memory stays flat within a run too: the pages behind are given back once
        // the walk passes the map's next release point (asked again after each release).
        let mut release_at = self.map.map_or(usize::MAX, |m| m.next_release());
        for _ in 0..max {
            let Some(w) = walk_record(view, at, walk, &mut self.ahead) else {
                break;
            };
            let Some(data) = view.bytes.get(at + w.meta.start..at + w.meta.end) else {
                break;
            };
            let frame = Frame {
                number: self.frames + 1,
                ts: w.meta.ts,
                interface: w.meta.interface,
                link_type: w.meta.link_type,
                data,
                orig_len: w.meta.orig_len,
            };
            if !take(&frame) {
                break;
            }
            at += w.len;
            self.frames += 1;
            run.join(FrameRun::one(frame.number, frame.ts));
            if self.start + at >= release_at {
                if let Some(map) = self.map {
                    map.release_before(self.start + at);
                    release_at = map.next_release();
                }
            }
        }
        (at, run.taken())
    }
}

/// The bytes not read yet, as the record walk reads them: in the file's map (with its flag of
/// a file that shrank) or in a stream's buffer.
#[cfg(target_os = "linux")]
#[inline]
fn unread<'a>(rdr: &'a Records, mapped: &'a Option<SharedMap>) -> MapView<'a> {
    match mapped {
        Some(map) => map.map().view().from(rdr.consumed()),
        None => MapView::of_buffer(rdr.data()),
    }
}

/// The packet record at offset `at` of a mapped file — a legacy pcap record, or a pcapng
/// enhanced packet block of an interface the section described — when it is whole and sane:
/// its last byte touched, then the map asked whether the file shrank (as `step` does), and the
/// lines the next record's walk touches asked for. `None` leaves the record to `step`, which
/// finds it again and decides (file and section headers, interfaces, other blocks, the end, a
/// cut or corrupt record, a file that shrank). For such a record `step` gives the same packet.
#[cfg(target_os = "linux")]
#[inline(always)]
fn walk_record(
    map: MapView<'_>,
    at: usize,
    walk: Walk<'_>,
    ahead: &mut LinesAhead,
) -> Option<Walked> {
    let data = map.bytes.get(at..)?;
    let (meta, len) = match walk {
        Walk::Pcap {
            big_endian,
            header_len,
            nanosecond,
            link_type,
        } => {
            let header = RecordHeader::read(data, big_endian)?;
            let len = header.record_len(header_len)?;
            (header.packet(header_len, link_type, nanosecond), len)
        }
        Walk::Ng {
            big_endian,
            interfaces,
        } => {
            let epb = Epb::read(data, big_endian)?;
            let ifc = interfaces.get(epb.if_id as usize)?;
            (epb.packet(ifc), epb.len)
        }
    };
    let last = data.get(len.checked_sub(1)?)?;
    super::mapped::touch(last);
    if map.cut_at(last) {
        return None;
    }
    // Where a record begins is known only from the header before it, so walking them is a
    // chain of waits for memory once a frame needs little work (the bulk lane's runs): lines
    // are asked for ahead (`capture::ahead`). Not in a stream's buffer: `read()` has just
    // copied its bytes into the cache.
    if !map.is_buffer() {
        ahead.ask(map, at, len);
    }
    Some(Walked { meta, len })
}

/// A pcapng enhanced packet block's fixed part, as pcap-parser reads it: type 6, a length
/// that `peek` accepts and the trailing copy repeats, and captured bytes that fit.
#[cfg(target_os = "linux")]
struct Epb {
    len: usize,
    if_id: u32,
    units: u64,
    caplen: u32,
    orig_len: u32,
}

#[cfg(target_os = "linux")]
impl Epb {
    /// Type, length, interface, time (high, low), captured and original length.
    const FIXED: usize = 28;

    fn read(data: &[u8], big_endian: bool) -> Option<Epb> {
        let h: &[u8; Epb::FIXED] = data.first_chunk()?;
        // The seven words read alike, then the byte order settled once, as a pcap record's
        // header is (a branch on it for each word cost ~30 instructions a frame).
        let words: [u32; 7] = std::array::from_fn(|i| {
            u32::from_le_bytes([h[4 * i], h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]])
        });
        let [kind, len, if_id, ts_high, ts_low, caplen, orig_len] = if big_endian {
            words.map(u32::swap_bytes)
        } else {
            words
        };
        let len = len as usize;
        if kind != EPB_TYPE || len < Epb::FIXED + 4 || len % 4 != 0 || len > MAX_BLOCK_LEN {
            return None;
        }
        let padded = (caplen as usize).checked_next_multiple_of(4)?;
        if caplen >= u32::MAX - 4 || Epb::FIXED + padded + 4 > len {
            return None;
        }
        // The trailing copy of the length, compared as it lies: no byte order to settle.
        let trailer: &[u8; 4] = data.get(len - 4..len)?.try_into().ok()?;
        if u32::from_le_bytes(*trailer) != words[1] {
            return None;
        }
        Some(Epb {
            len,
            if_id,
            units: (u64::from(ts_high) << 32) | u64::from(ts_low),
            caplen,
            orig_len,
        })
    }

    fn packet(&self, ifc: &Interface) -> PacketMeta {
        PacketMeta {
            start: Epb::FIXED,
            end: Epb::FIXED + self.caplen as usize,
            ts: ng_timestamp(self.units, ifc),
            interface: self.if_id,
            link_type: ifc.link_type,
            orig_len: self.orig_len,
        }
    }
}

/// What the next record is, learnt from its header alone.
enum Peek {
    /// Not enough bytes buffered to tell; at least this many are needed.
    NeedHeader(usize),
    Record {
        len: usize,
        kind: u32,
    },
}

/// Where a packet's bytes lie in the buffer, and its metadata.
struct PacketMeta {
    start: usize,
    end: usize,
    ts: Timestamp,
    interface: u32,
    link_type: u32,
    orig_len: u32,
}

/// Reads frames one at a time from a pcap or pcapng stream, never loading the whole input.
pub struct CaptureReader {
    rdr: Records,
    format: Format,
    tap: Arc<TapState>,
    gzip: bool,
    /// Length of the record last handed out, consumed at the next call.
    pending: usize,
    /// Size of a streamed reader's buffer now.
    capacity: usize,
    frames: u64,
    last_ts: Timestamp,
    done: bool,
    follow: bool,
    /// Set when the file is read through a memory map: asked after every record whether the
    /// file shrank under the map, and shared with worker threads (`--threads`).
    #[cfg(target_os = "linux")]
    mapped: Option<SharedMap>,
    /// A packet moved to by `peek_ts` and not handed out yet.
    ready: Option<PacketMeta>,
    /// How far ahead of the walk the map's lines have been asked for (see `walk_record`).
    ahead: LinesAhead,
    /// Whole packet records are read where they lie (`walk_record`); off, by `step` alone.
    walk: bool,
    /// Read in chunks as [`FileAccess::Auto`] asks: through the map instead if the look a run
    /// asks for finds it pays ([`CaptureReader::map_from_the_start`]).
    may_map: bool,
    /// The looks at short files the run gathered, given with [`Self::read_for_after`] (none
    /// before: a file read alone gathers its own), and added to by this file's.
    short_looks: ShortLooks,
    /// The thread indexing the file's records ahead ([`Self::index_from_the_start`]): it ends
    /// with the reader, so that the files of a run each have theirs in turn.
    #[cfg(target_os = "linux")]
    indexer: Option<super::mapped::Pager>,
    /// The thread that indexer runs on, kept for the run's next file (after `indexer`: its
    /// work on this file ends first).
    #[cfg(target_os = "linux")]
    spare: Option<super::spare::Spare>,
    /// The run's reading-ahead trial, given to a file read otherwise: kept for the next file.
    trial_kept: Option<TrialCarried>,
    /// When the file was opened, where the run's trial of the map against the chunks times it
    /// (`ShortLooks::trying`): from then to the next file's opening.
    map_trial: Option<std::time::Instant>,
}

/// What reading a file leaves for the next file of a run (rotated captures, read one after the
/// other): the reading-ahead trial, the looks at short files' maps, the trial of the ways to
/// ask for lines ahead, and the thread to spare that indexed its records.
#[derive(Default)]
pub(crate) struct Carried {
    pub(crate) trial: Option<TrialCarried>,
    pub(crate) looks: ShortLooks,
    pub(crate) lines: Option<LinesAhead>,
    #[cfg(target_os = "linux")]
    pub(crate) spare: Option<super::spare::Spare>,
}

impl CaptureReader {
    /// Open a file (`-` is stdin); gzip-compressed input is detected by its magic bytes. A
    /// regular file is read as [`FileAccess::from_env`] says.
    pub fn open(path: &Path) -> Result<Self, CaptureError> {
        Self::open_as(path, FileAccess::from_env())
    }

    /// [`open`](Self::open) for a look at the first frame's time only (rotated captures are
    /// opened so and closed until their turn comes, `MergedCaptures`): a regular file through
    /// its map, which reads a page or two where chunks would set up their buffers and read a
    /// whole chunk (per file of a ring of captures, ~0.3 ms). `SQOS_READ=chunks` never maps.
    pub fn open_to_peek(path: &Path) -> Result<Self, CaptureError> {
        let access = match FileAccess::from_env() {
            FileAccess::Chunks => FileAccess::Chunks,
            FileAccess::Auto | FileAccess::Map => FileAccess::Map,
        };
        Self::open_as(path, access)
    }

    /// [`open`](Self::open), a regular file read as `access` says.
    pub fn open_as(path: &Path, access: FileAccess) -> Result<Self, CaptureError> {
        if path.as_os_str() == "-" {
            return Self::from_reader(Box::new(std::io::stdin()));
        }
        let f = std::fs::File::open(path).map_err(|source| CaptureError::Open {
            path: path.display().to_string(),
            source,
        })?;
        #[cfg(target_os = "linux")]
        if access == FileAccess::Map {
            if let Some(mapped) = Self::mapped(&f) {
                return mapped;
            }
        }
        match Self::chunked(f) {
            Ok(chunked) => chunked.map(|mut r| {
                r.may_map = access == FileAccess::Auto;
                r
            }),
            Err(f) => Self::from_reader(Box::new(f)),
        }
    }

    /// A regular, uncompressed file read in chunks into buffers the records are parsed in
    /// where they lie ([`ChunkReader`]). `Err`: read it as a stream instead.
    fn chunked(mut f: std::fs::File) -> Result<Result<Self, CaptureError>, std::fs::File> {
        use std::io::{Seek, SeekFrom};
        if !f.metadata().is_ok_and(|m| m.file_type().is_file()) {
            return Err(f);
        }
        let mut magic = [0u8; 2];
        if !matches!(read_full(&mut f, &mut magic), Ok(2)) || magic == GZIP_MAGIC {
            return match f.seek(SeekFrom::Start(0)) {
                Ok(_) => Err(f),
                Err(source) => Ok(Err(CaptureError::Io { offset: 0, source })),
            };
        }
        let io_err = |source| CaptureError::Io { offset: 0, source };
        if let Err(e) = f.seek(SeekFrom::Start(0)) {
            return Ok(Err(io_err(e)));
        }
        let format = match probe(&mut f) {
            Ok((format, _)) => format,
            Err(e) => return Ok(Err(e)),
        };
        if let Err(e) = f.seek(SeekFrom::Start(0)) {
            return Ok(Err(io_err(e)));
        }
        let tap = Arc::new(TapState::default());
        let rdr = match ChunkReader::new(f, Layout::of(&format), Arc::clone(&tap)) {
            Ok(r) => r,
            Err(e) => return Ok(Err(io_err(e))),
        };
        Ok(Ok(Self::with(Records::Chunked(rdr), format, tap, false)))
    }

    /// Reads as suits the run's threads: alone, through the file's map where that pays
    /// ([`Self::map_from_the_start`]); with a helper, ahead on it ([`Self::read_ahead`]; where
    /// its trial finds the work on a chunk small beside the copy, through the map instead
    /// where that pays); for workers, through the map where that pays, else ahead. The workers then read the frames
    /// where they lie, where in chunks every frame was copied twice, into a chunk and into a
    /// worker's batch (small I/Os from disk, `--threads 3`: 79 ms of CPU against 189).
    pub fn read_for(&mut self, reading: Reading) {
        self.read_for_after(reading, Carried::default());
    }

    /// [`Self::read_for`] the next file of a run, where reading ahead goes on with the trial
    /// the file before left ([`TrialCarried`]), and a look at a short file's map adds to the
    /// looks the files before gathered ([`ShortLooks`]).
    pub(crate) fn read_for_after(&mut self, reading: Reading, before: Carried) {
        let Carried {
            trial: before,
            looks,
            lines,
            #[cfg(target_os = "linux")]
            spare,
        } = before;
        self.short_looks = looks;
        if let Some(lines) = lines {
            self.ahead = lines;
        }
        #[cfg(target_os = "linux")]
        {
            self.spare = spare;
        }
        match reading {
            Reading::Alone => {
                self.map_from_the_start();
            }
            Reading::Ahead => {
                if self.index_from_the_start() {
                    // For the run's next file read in chunks, if there is one.
                    self.trial_kept = before;
                } else {
                    self.ahead_after(before);
                }
            }
            Reading::AheadInChunks => {
                self.ahead_after(before);
            }
            Reading::ForWorkers => {
                if !self.map_from_the_start() {
                    self.ahead_after(before);
                }
            }
        }
    }

    /// Reads the file ahead on a thread of its own too, where a trial on its first chunks
    /// finds that this pays (a file read in chunks; other inputs: nothing happens). False
    /// when nothing changed.
    pub fn read_ahead(&mut self) -> bool {
        self.ahead_after(None)
    }

    /// [`Self::read_ahead`], its trial going on from `before` where there is one.
    fn ahead_after(&mut self, before: Option<TrialCarried>) -> bool {
        let Records::Chunked(r) = &mut self.rdr else {
            return false;
        };
        // The helper reads on the run's thread to spare, where the run has one (several
        // files: `MergedCaptures::read_for`).
        #[cfg(target_os = "linux")]
        if let Some(spare) = &self.spare {
            r.read_ahead_on(spare.clone());
        }
        r.read_ahead(before)
    }

    /// [`Self::open`] and [`Self::read_for_after`], for the next file of a run: where the
    /// looks at the short files before decide that the map pays for this one (one thread,
    /// [`ShortLooks::decide`]), it is opened through its map at once, without the first
    /// chunk and buffers a file read in chunks starts with (~0.1 ms a file of a ring).
    pub(crate) fn open_after(
        path: &Path,
        reading: Reading,
        before: Carried,
    ) -> Result<Self, CaptureError> {
        // The file before, if the run's trial of the map against the chunks timed it, is
        // timed to here; this one is, from here, if the trial is still on.
        let mut before = before;
        let now = std::time::Instant::now();
        before.looks.next_opened(now);
        let map_trial = before.looks.trying().then_some(now);
        #[cfg(target_os = "linux")]
        if reading == Reading::Alone && FileAccess::from_env() == FileAccess::Auto {
            let map = std::fs::File::open(path).ok().and_then(|f| Map::of(&f));
            if let Some(map) = map.filter(|m| before.looks.decide(m) == Some(true)) {
                if let Some(Ok(mut reader)) = Self::mapped_from(map) {
                    reader.short_looks = before.looks;
                    reader.spare = before.spare;
                    if let Some(lines) = before.lines {
                        reader.ahead = lines;
                    }
                    reader.map_trial = map_trial;
                    return Ok(reader);
                }
            }
        }
        let mut reader = Self::open(path)?;
        reader.read_for_after(reading, before);
        reader.map_trial = map_trial;
        Ok(reader)
    }

    /// What the file's reading leaves for the next file of a run: the reading-ahead trial as
    /// its end left it (once), and the looks at short files' maps (with this file's time, where
    /// the run's trial of the map against the chunks timed it).
    pub(crate) fn take_carried(&mut self) -> Carried {
        if let Some(opened) = self.map_trial.take() {
            if self.frames > 0 {
                let (mapped, bytes) = (self.is_mapped(), self.input_bytes_read());
                self.short_looks.ended(mapped, opened, bytes);
            }
        }
        let trial = match &mut self.rdr {
            Records::Chunked(r) => r.take_trial(),
            _ => None,
        }
        .or(self.trial_kept.take());
        Carried {
            trial,
            looks: self.short_looks,
            // A file that had no frame to walk (its header alone) leaves the trial as the
            // files before left it, not the fresh one it was opened with (to peek at).
            lines: (self.frames > 0).then(|| self.ahead.carried_on()),
            #[cfg(target_os = "linux")]
            spare: self.spare.take(),
        }
    }

    /// A pcap or pcapng file is read through its map from its first frame on, the thread to spare
    /// (`SharedMap::pager`) indexing its records ahead of the reader (`capture::index`), where
    /// a look finds the map pays or the file comes from disk ([`Pays::OrCold`]), and where it
    /// was opened through its map (`SQOS_READ=map`). True when it is.
    fn index_from_the_start(&mut self) -> bool {
        #[cfg(target_os = "linux")]
        {
            let (layout, first) = self.format.index_layout();
            if self.frames == 0 && (self.mapped.is_some() || self.map_where(Pays::OrCold)) {
                if let Some(map) = &self.mapped {
                    map.map().set_records(layout, first);
                    // Read through its map to its end: the chunk buffers kept for a next file
                    // would only count in the resident size (a run's next file read in chunks
                    // makes its own: a long file each, ~0.2 ms).
                    super::chunks::free_kept();
                    if self.spare.is_none() {
                        self.spare = super::spare::Spare::start();
                    }
                    self.indexer = match &self.spare {
                        Some(spare) => map.pager_on(spare),
                        None => map.pager(),
                    };
                    return true;
                }
            }
        }
        false
    }

    /// True while a thread indexes the file's records ahead of this reader.
    pub(crate) fn indexing(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.indexer.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// A file opened as [`FileAccess::Auto`] is read through its memory map from its first
    /// frame on where a look at three places of it finds the map costs much less than the
    /// copy ([`super::access`]): asked before the first frame (after it, nothing happens), and
    /// not of a followed file. True when it switched.
    pub fn map_from_the_start(&mut self) -> bool {
        self.frames == 0 && self.map_where_it_pays()
    }

    /// [`Self::map_where`] the look finds that the map pays.
    fn map_where_it_pays(&mut self) -> bool {
        self.map_where(Pays::Looked)
    }

    /// Reads on through the file's map from here, a record boundary, where a look finds that
    /// pays: asked once, of a file opened as [`FileAccess::Auto`] and read in chunks, and not
    /// of a followed one (a map holds the file as long as it was). True when it switched.
    /// Asked by [`Self::map_from_the_start`], and before a refill once the
    /// helper's trial has found reading alone cheaper (where the two cores share no cache).
    fn map_where(&mut self, pays: Pays) -> bool {
        #[cfg(target_os = "linux")]
        {
            let Records::Chunked(chunks) = &mut self.rdr else {
                return false;
            };
            if !self.may_map || self.follow || self.pending > 0 || self.ready.is_some() {
                return false;
            }
            self.may_map = false;
            let pos = chunks.consumed();
            let (file, spare) = chunks.file_and_spare();
            let looks = &mut self.short_looks;
            let pays = |m: &Map| match pays {
                Pays::Looked => super::access::mapping_pays(m, file, spare, looks),
                Pays::OrCold => {
                    super::access::cold(m) || super::access::mapping_pays(m, file, spare, looks)
                }
            };
            match Map::of(file).filter(pays) {
                Some(map) => {
                    self.read_mapped(map, pos);
                    true
                }
                None => false,
            }
        }
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// Reads on through `map` (of the file read) instead, from `pos`, where a record starts
    /// (the format as read so far says how records are laid out: a pcapng section's byte
    /// order).
    #[cfg(target_os = "linux")]
    fn read_mapped(&mut self, map: Map, pos: usize) {
        let map = SharedMap::new(map);
        let layout = Layout::of(&self.format);
        self.rdr = Records::Mapped(MapReader::at(map.clone(), layout, pos));
        self.mapped = Some(map);
    }

    /// A regular, uncompressed file read through a memory map (no copy into a buffer; see
    /// `mapped`). `None`: read it as a stream instead.
    #[cfg(target_os = "linux")]
    fn mapped(f: &std::fs::File) -> Option<Result<Self, CaptureError>> {
        Self::mapped_from(Map::of(f)?)
    }

    /// [`Self::mapped`] through `map`, of the file.
    #[cfg(target_os = "linux")]
    fn mapped_from(map: Map) -> Option<Result<Self, CaptureError>> {
        if map.bytes().starts_with(&GZIP_MAGIC) {
            return None;
        }
        let mut head = map.bytes();
        let format = match probe(&mut head) {
            Ok((format, _)) => format,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(Self::over_map(SharedMap::new(map), format, 0)))
    }

    /// A reader of `map`, a file of `format`, from `at` (0, or where a record starts).
    #[cfg(target_os = "linux")]
    fn over_map(map: SharedMap, format: Format, at: usize) -> Self {
        let records = MapReader::at(map.clone(), Layout::of(&format), at);
        let mut reader = Self::with(
            Records::Mapped(records),
            format,
            Arc::new(TapState::default()),
            false,
        );
        reader.mapped = Some(map);
        reader
    }

    /// The file at `path` cut into up to `n` parts of about equal size, each read by its own
    /// reader, through its own map of the file (which ends where the part does): one capture
    /// walked on several threads. Only a legacy pcap file that can be mapped is cut; any other
    /// capture is one part, read as [`open`](Self::open) reads it.
    ///
    /// A cut is a guess at where a record starts (`split`). The reader of the part before it
    /// checks it: where the cut is right, it ends cleanly (`next_frame` gives `Ok(None)`), and
    /// where it is not, with an error (the record it cut off). So the parts' frames, in order,
    /// are the file's frames exactly when every part but the last ends cleanly. Frame numbers
    /// (in errors too) count within a part; offsets are the file's.
    #[cfg(target_os = "linux")]
    pub fn open_parts(path: &Path, n: usize) -> Result<Vec<Self>, CaptureError> {
        let opened = std::fs::File::open(path).map_err(|source| CaptureError::Open {
            path: path.display().to_string(),
            source,
        });
        let whole = opened.as_ref().ok().and_then(Map::of);
        let format = whole.as_ref().and_then(|m| probe(&mut m.bytes()).ok());
        let (Ok(file), Some(whole), Some((format, _))) = (&opened, whole, format) else {
            return Ok(vec![Self::open_as(path, FileAccess::Map)?]);
        };
        let Some(layout) = format.record_layout() else {
            return Ok(vec![Self::open_as(path, FileAccess::Map)?]);
        };
        let parts = super::split::cut(whole.bytes(), PCAP_HEADER_LEN, n.min(MAX_PARTS), layout);
        drop(whole);
        Self::parts_at(path, file, &format, parts)
    }

    /// [`Self::open_parts`]' readers of `parts` of `file`, a legacy pcap file of `format`.
    #[cfg(target_os = "linux")]
    fn parts_at(
        path: &Path,
        file: &std::fs::File,
        format: &Format,
        parts: Vec<std::ops::Range<usize>>,
    ) -> Result<Vec<Self>, CaptureError> {
        let &Format::Pcap {
            link_type,
            nanosecond,
            big_endian,
            record_header_len,
            ..
        } = format
        else {
            return Ok(vec![Self::open_as(path, FileAccess::Map)?]);
        };
        let mut readers = Vec::with_capacity(parts.len());
        for part in parts {
            let Some(map) = Map::of_first(file, part.end) else {
                return Ok(vec![Self::open_as(path, FileAccess::Map)?]);
            };
            let map = SharedMap::new(map);
            // The first part reads the file header; the others start at a record.
            let first = part.start == PCAP_HEADER_LEN;
            let format = Format::Pcap {
                link_type,
                nanosecond,
                big_endian,
                header_pending: first,
                record_header_len,
            };
            let at = if first { 0 } else { part.start };
            readers.push(Self::over_map(map, format, at));
        }
        Ok(readers)
    }

    pub fn from_reader(inner: Box<dyn Read + Send>) -> Result<Self, CaptureError> {
        let (tap, tap_state) = Tap::new(inner);
        let io_err = |source| CaptureError::Io { offset: 0, source };
        let (stream, gzip) = maybe_gunzip(Box::new(tap)).map_err(io_err)?;
        let mut stream: Box<dyn Read + Send> =
            Box::new(KeepError::new(stream, Arc::clone(&tap_state)));
        let (format, prefix) = probe(&mut stream)?;
        let rdr: Box<dyn PcapReaderIterator + Send> = match format {
            Format::PcapNg { .. } => Box::new(
                PcapNGReader::new(INITIAL_CAPACITY, rewind(prefix, stream))
                    .map_err(|e| corrupt_at(1, 0, &e))?,
            ),
            Format::Pcap { .. } => Box::new(
                LegacyPcapReader::new(INITIAL_CAPACITY, rewind(prefix, stream))
                    .map_err(|e| corrupt_at(1, 0, &e))?,
            ),
        };
        Ok(Self::with(Records::Streamed(rdr), format, tap_state, gzip))
    }

    fn with(rdr: Records, format: Format, tap: Arc<TapState>, gzip: bool) -> Self {
        CaptureReader {
            rdr,
            format,
            tap,
            gzip,
            pending: 0,
            capacity: INITIAL_CAPACITY,
            frames: 0,
            last_ts: Timestamp::default(),
            done: false,
            follow: false,
            #[cfg(target_os = "linux")]
            mapped: None,
            ready: None,
            ahead: LinesAhead::from_env(),
            walk: true,
            may_map: false,
            short_looks: ShortLooks::default(),
            #[cfg(target_os = "linux")]
            indexer: None,
            #[cfg(target_os = "linux")]
            spare: None,
            trial_kept: None,
            map_trial: None,
        }
    }

    /// Whether whole packet records are read where they lie, in the map or the stream's buffer
    /// (on by default: the fast path, and the only one that takes runs); off, every record goes
    /// through the general path. Both give the same frames and endings: off is the reference
    /// that tests and the `mapped` fuzz target compare the walk with.
    pub fn set_walk(&mut self, walk: bool) {
        self.walk = walk;
    }

    /// Follow a growing input (`tail -f`): at the end of the input, a partly written record is
    /// not an error; `next_frame` returns `Ok(None)` and can be called again later.
    pub fn set_follow(&mut self, follow: bool) {
        self.follow = follow;
    }

    /// The next frame, `Ok(None)` at the clean end of the capture.
    ///
    /// After an error the frames returned so far stand and every later call returns `Ok(None)`.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        let meta = match self.ready.take() {
            Some(m) => m,
            None => match self.next_walked() {
                Some(m) => m,
                None => match self.step()? {
                    Some(m) => m,
                    None => return Ok(None),
                },
            },
        };
        let data = self
            .rdr
            .data()
            .get(meta.start..meta.end)
            .unwrap_or_default();
        Ok(Some(Frame {
            number: self.frames,
            ts: meta.ts,
            interface: meta.interface,
            link_type: meta.link_type,
            data,
            orig_len: meta.orig_len,
        }))
    }

    /// The timestamp of the next frame without handing it out: the next [`next_frame`] returns
    /// that frame (for merging several captures by time).
    ///
    /// [`next_frame`]: CaptureReader::next_frame
    pub fn peek_ts(&mut self) -> Result<Option<Timestamp>, CaptureError> {
        if self.ready.is_none() {
            self.ready = self.step()?;
        }
        Ok(self.ready.as_ref().map(|m| m.ts))
    }

    /// The next packet when it is in a whole, sane packet record (nearly every record), taken
    /// without the general path's layers (`step`): one look at the record where it lies in the
    /// map or the stream's buffer (`walk_record`). `None` leaves the record to `step`,
    /// which then finds the same record and decides.
    #[inline]
    fn next_walked(&mut self) -> Option<PacketMeta> {
        let walked = self.peek_walked()?;
        self.pending = walked.len;
        self.frames += 1;
        self.last_ts = walked.meta.ts;
        Some(walked.meta)
    }

    /// Frames handed over as one run, each shown to `take` where it lies and not handed out:
    /// while the next record is one `next_walked` takes and `take` says yes to its frame, it
    /// is consumed and counted — at most `max` of them. The frame `take` refused is the next
    /// one `next_frame` returns. `None`: not one was taken. A stream's run ends where its
    /// buffer does (the next `next_frame` reads on).
    pub fn take_run<T: FnMut(&Frame<'_>) -> bool>(
        &mut self,
        max: u64,
        take: &mut T,
    ) -> Option<FrameRun> {
        #[cfg(target_os = "linux")]
        {
            let walk = self.format.walk().filter(|_| self.walk)?;
            if self.done || self.ready.is_some() {
                return None;
            }
            if self.pending > 0 {
                self.rdr.consume_noshift(self.pending);
                self.pending = 0;
            }
            // The records where they lie, walked with a local offset; the reader moves once.
            let start = self.rdr.consumed();
            let mut walker = RunWalk {
                view: unread(&self.rdr, &self.mapped),
                start,
                map: self.mapped.as_ref().map(|m| m.map()),
                frames: self.frames,
                ahead: self.ahead,
            };
            // One copy of the loop per layout (`run` is inlined into each arm, the arms only
            // look alike): each copy knows its layout's kind, and the first its byte order.
            let (at, run) = match walk {
                Walk::Pcap {
                    big_endian: false,
                    header_len,
                    nanosecond,
                    link_type,
                } => walker.run(
                    Walk::Pcap {
                        big_endian: false,
                        header_len,
                        nanosecond,
                        link_type,
                    },
                    max,
                    take,
                ),
                Walk::Pcap { .. } => walker.run(walk, max, take),
                Walk::Ng { .. } => walker.run(walk, max, take),
            };
            self.frames = walker.frames;
            self.ahead = walker.ahead;
            if let Some(taken) = &run {
                self.last_ts = taken.last.1;
            }
            self.rdr.consume_noshift(at);
            run
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// The record `next_walked` would take, not taken yet.
    #[inline]
    fn peek_walked(&mut self) -> Option<Walked> {
        #[cfg(target_os = "linux")]
        {
            let walk = self.format.walk().filter(|_| self.walk)?;
            if self.done {
                return None;
            }
            if self.pending > 0 {
                self.rdr.consume_noshift(self.pending);
                self.pending = 0;
            }
            walk_record(unread(&self.rdr, &self.mapped), 0, walk, &mut self.ahead)
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Moves to the next packet; after an error, every later call gives `Ok(None)`.
    fn step(&mut self) -> Result<Option<PacketMeta>, CaptureError> {
        let advanced = self.advance();
        #[cfg(target_os = "linux")]
        if let Some(map) = &self.mapped {
            // Where the file shrank: past the cut, for a packet read (another thread may have
            // faulted further on, where the packet's bytes are still the file's).
            let mut cut = map.map().shrunk();
            if let Ok(Some(meta)) = &advanced {
                // Parsing only sliced the packet's bytes: touch its last one, so that a file
                // cut inside it is noticed before the frame is handed out (a cut removes the
                // end of a file: if the last byte is there, so is the rest).
                if let Some(last) = self.rdr.data().get(meta.end.saturating_sub(1)) {
                    super::mapped::touch(last);
                    cut = map.map().cut_at(last);
                }
            }
            if cut && !self.done {
                // What was read past the file's new end is zeros, not capture: drop it.
                self.done = true;
                return Err(CaptureError::Io {
                    offset: self.offset(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the file shrank while it was being read",
                    ),
                });
            }
        }
        advanced.inspect_err(|_| self.done = true)
    }

    /// Bytes of the (decompressed) input consumed so far, for progress display.
    pub fn bytes_read(&self) -> u64 {
        (self.rdr.consumed() + self.pending) as u64
    }

    /// Bytes read from the underlying file or pipe (compressed bytes for gzip input): compare
    /// with the file size for a progress bar.
    pub fn input_bytes_read(&self) -> u64 {
        // A regular file, mapped or in chunks: where the reader is in it. (Not what `read()`
        // returned: a helper reads ahead, and chunks it read past where it stopped are read
        // again.)
        if self.is_mapped() || self.is_chunked() {
            return self.bytes_read();
        }
        self.tap.raw_bytes()
    }

    /// The memory map the file is read through, to share with threads that read its frames
    /// where they lie (`None`: not mapped, frames are in a buffer reused for the next one).
    pub fn shared_map(&self) -> Option<SharedMap> {
        #[cfg(target_os = "linux")]
        return self.mapped.clone();
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// True when a regular file is read in chunks ([`FileAccess::Chunks`], and
    /// [`FileAccess::Auto`] unless it switched to the map).
    pub fn is_chunked(&self) -> bool {
        matches!(self.rdr, Records::Chunked(_))
    }

    /// True when the file is read through a memory map rather than `read()`.
    pub fn is_mapped(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.mapped.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// Number of frames returned so far.
    pub fn frames_read(&self) -> u64 {
        self.frames
    }

    pub fn format(&self) -> CaptureFormat {
        match self.format {
            Format::Pcap {
                nanosecond,
                big_endian,
                ..
            } => CaptureFormat::Pcap {
                nanosecond,
                big_endian,
            },
            Format::PcapNg { .. } => CaptureFormat::PcapNg,
        }
    }

    /// True when the input was gzip-compressed.
    pub fn is_gzip(&self) -> bool {
        self.gzip
    }

    fn offset(&self) -> u64 {
        self.rdr.consumed() as u64
    }

    fn corrupt(&self, reason: impl Into<String>) -> CaptureError {
        CaptureError::Corrupt {
            frame: self.frames + 1,
            offset: self.offset(),
            reason: reason.into(),
        }
    }

    /// Moves to the next packet record, handling the other records on the way.
    fn advance(&mut self) -> Result<Option<PacketMeta>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        if self.pending > 0 {
            self.rdr.consume_noshift(self.pending);
            self.pending = 0;
        }
        loop {
            let (len, kind) = match self.peek()? {
                Peek::NeedHeader(need) => {
                    if !self.fill(need)? {
                        return self.end_of_input();
                    }
                    continue;
                }
                Peek::Record { len, kind } => (len, kind),
            };
            if self.rdr.data().len() < len {
                if !self.fill(len)? {
                    return self.end_of_input();
                }
                continue;
            }
            if let Some(meta) = self.take_record(len, kind)? {
                self.frames += 1;
                self.last_ts = meta.ts;
                return Ok(Some(meta));
            }
        }
    }

    /// Reads until `need` bytes are buffered. False when the input ended first.
    fn fill(&mut self, need: usize) -> Result<bool, CaptureError> {
        // A memory map does not grow (it holds the whole file); a stream's buffer does.
        if need > self.capacity {
            let grown = need
                .next_power_of_two()
                .clamp(self.capacity, BUFFER_CAPACITY);
            if self.rdr.grow(grown) {
                self.capacity = grown;
            }
        }
        // At a record boundary here: `advance` has consumed the record before. The map is
        // looked at once the helper's trial has stopped it, or before it starts where the
        // trial found little work beside the copy (`chunks::map_first`).
        let (refused, map_first) = match &self.rdr {
            Records::Chunked(c) => (c.helper_refused(), c.wants_map_first()),
            _ => (false, false),
        };
        if refused {
            self.map_where_it_pays();
        } else if map_first && !self.map_where_it_pays() {
            if let Records::Chunked(c) = &mut self.rdr {
                c.helper_after_all();
            }
        }
        while self.rdr.data().len() < need {
            let offset = self.offset();
            if self.rdr.refill().is_err() {
                let source = self
                    .tap
                    .take_error()
                    .unwrap_or_else(|| std::io::Error::other("read failed"));
                // A compressed file that ends early reports it this way.
                if source.kind() == std::io::ErrorKind::UnexpectedEof {
                    return Err(CaptureError::Truncated {
                        frame: self.frames + 1,
                        offset,
                    });
                }
                return Err(CaptureError::Io { offset, source });
            }
            if self.rdr.reader_exhausted() {
                return Ok(self.rdr.data().len() >= need);
            }
        }
        Ok(true)
    }

    fn end_of_input(&mut self) -> Result<Option<PacketMeta>, CaptureError> {
        if self.rdr.data().is_empty() || self.follow {
            return Ok(None);
        }
        Err(CaptureError::Truncated {
            frame: self.frames + 1,
            offset: self.offset(),
        })
    }

    fn peek(&self) -> Result<Peek, CaptureError> {
        let data = self.rdr.data();
        match &self.format {
            Format::Pcap {
                header_pending: true,
                ..
            } => Ok(Peek::Record { len: 0, kind: 0 }),
            Format::Pcap {
                big_endian,
                record_header_len,
                ..
            } => {
                let Some(h) = RecordHeader::read(data, *big_endian)
                    .filter(|_| data.len() >= *record_header_len)
                else {
                    return Ok(Peek::NeedHeader(*record_header_len));
                };
                let Some(len) = h.record_len(*record_header_len) else {
                    return Err(self.corrupt(format!(
                        "record claims {} captured bytes, more than the {MAX_BLOCK_LEN}-byte limit",
                        h.caplen
                    )));
                };
                Ok(Peek::Record { len, kind: 0 })
            }
            Format::PcapNg { big_endian, .. } => {
                let (Some(t), Some(l), Some(bom)) =
                    (data.get(0..4), data.get(4..8), data.get(8..12))
                else {
                    return Ok(Peek::NeedHeader(12));
                };
                let (kind, big_endian) = if t == SHB_TYPE.to_le_bytes() {
                    match bom {
                        b if b == BOM_LE => (SHB_TYPE, false),
                        b if b == BOM_BE => (SHB_TYPE, true),
                        _ => return Err(self.corrupt("section header with a bad byte-order mark")),
                    }
                } else {
                    (read_u32(t, *big_endian), *big_endian)
                };
                let len = read_u32(l, big_endian) as usize;
                if len < 12 || len % 4 != 0 {
                    return Err(self.corrupt(format!("block of type {kind:#x} has length {len}")));
                }
                if len > MAX_BLOCK_LEN {
                    return Err(self.corrupt(format!(
                        "block of type {kind:#x} is {len} bytes, more than the {MAX_BLOCK_LEN}-byte limit"
                    )));
                }
                Ok(Peek::Record { len, kind })
            }
        }
    }

    /// Parses the fully buffered record at the front of the buffer. Returns the packet it holds,
    /// or `None` (and consumes it) for records that carry no packet.
    fn take_record(&mut self, len: usize, kind: u32) -> Result<Option<PacketMeta>, CaptureError> {
        match &self.format {
            Format::Pcap { .. } => self.take_pcap_record(),
            Format::PcapNg { .. } => match kind {
                SHB_TYPE | IDB_TYPE | EPB_TYPE | SPB_TYPE => self.take_ng_block(len),
                PB_TYPE => self.take_obsolete_packet(len),
                _ => {
                    // Statistics, name resolution, secrets, custom blocks: not needed here.
                    self.rdr.consume_noshift(len);
                    Ok(None)
                }
            },
        }
    }

    fn take_pcap_record(&mut self) -> Result<Option<PacketMeta>, CaptureError> {
        let (link_type, nanosecond, big_endian, header_len) = match &mut self.format {
            Format::Pcap {
                header_pending: pending @ true,
                ..
            } => {
                // The header was parsed while probing; pcap-parser reports it once more.
                *pending = false;
                let step = match self.rdr.next() {
                    Ok((n, _)) => Ok(n),
                    Err(e) => Err(describe(&e)),
                };
                return match step {
                    Ok(n) => {
                        self.rdr.consume_noshift(n);
                        Ok(None)
                    }
                    Err(reason) => Err(self.corrupt(reason)),
                };
            }
            Format::Pcap {
                link_type,
                nanosecond,
                big_endian,
                record_header_len,
                ..
            } => (*link_type, *nanosecond, *big_endian, *record_header_len),
            Format::PcapNg { .. } => return Ok(None),
        };
        // The record header is read where it lies (`peek` made sure the whole record is
        // buffered): the packet's bytes follow it.
        let data = self.rdr.data();
        let h = RecordHeader::read(data, big_endian)
            .filter(|h| data.len() >= header_len + h.caplen as usize)
            .ok_or_else(|| self.corrupt("record shorter than its contents claim"))?;
        let meta = h.packet(header_len, link_type, nanosecond);
        self.pending = meta.end;
        Ok(Some(meta))
    }

    fn take_ng_block(&mut self, len: usize) -> Result<Option<PacketMeta>, CaptureError> {
        let Format::PcapNg {
            big_endian,
            interfaces,
        } = &mut self.format
        else {
            return Ok(None);
        };
        let base = self.rdr.data().as_ptr() as usize;
        let frames = self.frames;
        let last_ts = self.last_ts;
        // The block alone is parsed, not what follows it: a block whose fields claim more than
        // its length is short whatever bytes follow, and whichever reader holds them (a stream's
        // buffer, a map, a chunk that may end right after it).
        let block = self.rdr.data().get(..len).unwrap_or_default();
        let parsed = next_record(
            &mut Layout::PcapNg {
                big_endian: *big_endian,
            },
            block,
            self.rdr.consumed(),
            |_| PcapError::Incomplete(0),
        );
        // The outcome is computed while the block borrows the buffer, then acted on after.
        let outcome: Result<Option<PacketMeta>, String> = match parsed {
            Ok((_, PcapBlockOwned::NG(block))) => match block {
                Block::SectionHeader(shb) => {
                    *big_endian = shb.big_endian();
                    interfaces.clear();
                    Ok(None)
                }
                Block::InterfaceDescription(idb) => {
                    if interfaces.len() >= MAX_INTERFACES {
                        Err(format!(
                            "more than {MAX_INTERFACES} interfaces in a section"
                        ))
                    } else {
                        interface_from_idb(&idb, *big_endian).map(|i| {
                            interfaces.push(i);
                            None
                        })
                    }
                }
                Block::EnhancedPacket(epb) => match interfaces.get(epb.if_id as usize) {
                    None => Err(format!(
                        "packet for interface {} but the section describes {}",
                        epb.if_id,
                        interfaces.len()
                    )),
                    Some(ifc) => {
                        let data = epb.packet_data();
                        let units = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                        let start = (data.as_ptr() as usize).wrapping_sub(base);
                        Ok(Some(PacketMeta {
                            start,
                            end: start + data.len(),
                            ts: ng_timestamp(units, ifc),
                            interface: epb.if_id,
                            link_type: ifc.link_type,
                            orig_len: epb.origlen,
                        }))
                    }
                },
                Block::SimplePacket(spb) => match interfaces.first() {
                    None => Err("simple packet block before any interface".to_string()),
                    Some(ifc) => {
                        let mut caplen = (spb.origlen as usize).min(spb.data.len());
                        if ifc.snaplen > 0 {
                            caplen = caplen.min(ifc.snaplen as usize);
                        }
                        let start = (spb.data.as_ptr() as usize).wrapping_sub(base);
                        // SPBs carry no time: keep the previous frame's so times stay ordered.
                        Ok(Some(PacketMeta {
                            start,
                            end: start + caplen,
                            ts: last_ts,
                            interface: 0,
                            link_type: ifc.link_type,
                            orig_len: spb.origlen,
                        }))
                    }
                },
                _ => Ok(None),
            },
            Ok(_) => Ok(None),
            Err(e) => Err(describe(&e)),
        };
        match outcome {
            Ok(meta) => {
                if meta.is_some() {
                    self.pending = len;
                } else {
                    self.rdr.consume_noshift(len);
                }
                Ok(meta)
            }
            Err(reason) => Err(CaptureError::Corrupt {
                frame: frames + 1,
                offset: self.offset(),
                reason,
            }),
        }
    }

    /// The obsolete Packet Block (type 2), still written by old tools; pcap-parser skips it.
    fn take_obsolete_packet(&mut self, len: usize) -> Result<Option<PacketMeta>, CaptureError> {
        let Format::PcapNg {
            big_endian,
            interfaces,
        } = &self.format
        else {
            return Ok(None);
        };
        let block = self.rdr.data().get(..len).unwrap_or_default();
        let field = |at: usize| block.get(at..at + 4).map(|b| read_u32(b, *big_endian));
        let if_id = block
            .get(8..10)
            .map(|b| u32::from(read_u16(b, *big_endian)));
        let (Some(if_id), Some(ts_high), Some(ts_low), Some(caplen), Some(orig_len)) =
            (if_id, field(12), field(16), field(20), field(24))
        else {
            return Err(self.corrupt("packet block too short"));
        };
        let Some(ifc) = interfaces.get(if_id as usize).copied() else {
            return Err(self.corrupt(format!("packet for undescribed interface {if_id}")));
        };
        let start = 28usize;
        let end = start + caplen as usize;
        if end + 4 > len {
            return Err(self.corrupt("packet block shorter than its captured length"));
        }
        let units = (u64::from(ts_high) << 32) | u64::from(ts_low);
        self.pending = len;
        Ok(Some(PacketMeta {
            start,
            end,
            ts: ng_timestamp(units, &ifc),
            interface: if_id,
            link_type: ifc.link_type,
            orig_len,
        }))
    }
}

/// Reads the capture's first bytes (the pcap file header, or the whole first pcapng section
/// header) and says what format follows. Returns the bytes read, to be given back to the reader.
fn probe(stream: &mut dyn Read) -> Result<(Format, Vec<u8>), CaptureError> {
    let io_err = |source| CaptureError::Io { offset: 0, source };
    let mut prefix = vec![0u8; 12];
    let n = read_full(stream, &mut prefix).map_err(io_err)?;
    prefix.truncate(n);
    if n == 0 {
        return Err(CaptureError::Empty);
    }
    let magic = prefix.get(..4).unwrap_or_default();
    let not_capture = CaptureError::NotACapture { offset: 0 };

    if magic == SHB_TYPE.to_le_bytes() {
        let big_endian = match prefix.get(8..12) {
            Some(b) if b == BOM_LE => false,
            Some(b) if b == BOM_BE => true,
            _ => return Err(not_capture),
        };
        let len = prefix
            .get(4..8)
            .map(|b| read_u32(b, big_endian) as usize)
            .unwrap_or(0);
        if !(28..=MAX_BLOCK_LEN).contains(&len) || len % 4 != 0 {
            return Err(not_capture);
        }
        prefix.resize(len, 0);
        let got = read_full(stream, prefix.get_mut(12..).unwrap_or_default()).map_err(io_err)?;
        if got + 12 < len {
            return Err(CaptureError::Truncated {
                frame: 1,
                offset: 0,
            });
        }
        return Ok((
            Format::PcapNg {
                big_endian,
                interfaces: Vec::new(),
            },
            prefix,
        ));
    }

    if !is_pcap_magic(magic) {
        return Err(not_capture);
    }
    prefix.resize(24, 0);
    let got = read_full(stream, prefix.get_mut(n..).unwrap_or_default()).map_err(io_err)?;
    if n + got < 24 {
        return Err(not_capture);
    }
    let header: PcapHeader = match parse_pcap_header(&prefix) {
        Ok((_, h)) => h,
        Err(_) => return Err(not_capture),
    };
    let format = Format::Pcap {
        // The upper bits of the link type field carry FCS information, not the type.
        link_type: (header.network.0 as u32) & 0xffff,
        nanosecond: header.is_nanosecond_precision(),
        big_endian: header.is_bigendian(),
        header_pending: true,
        record_header_len: if header.is_modified_format() { 24 } else { 16 },
    };
    Ok((format, prefix))
}

fn is_pcap_magic(magic: &[u8]) -> bool {
    const MAGICS: [u32; 5] = [
        0xa1b2_c3d4, // µs, writer's byte order = little endian here
        0xa1b2_3c4d, // ns
        0xa1b2_cd34, // "modified" pcap
        0xd4c3_b2a1, // µs, big endian
        0x4d3c_b2a1, // ns, big endian
    ];
    magic
        .try_into()
        .map(|b: [u8; 4]| MAGICS.contains(&u32::from_le_bytes(b)))
        .unwrap_or(false)
}

fn read_u32(b: &[u8], big_endian: bool) -> u32 {
    let a: [u8; 4] = b.get(..4).and_then(|s| s.try_into().ok()).unwrap_or([0; 4]);
    if big_endian {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

fn read_u16(b: &[u8], big_endian: bool) -> u16 {
    let a: [u8; 2] = b.get(..2).and_then(|s| s.try_into().ok()).unwrap_or([0; 2]);
    if big_endian {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

fn timestamp(secs: i64, frac_ns: i64) -> Timestamp {
    Timestamp(secs.saturating_mul(1_000_000_000).saturating_add(frac_ns))
}

/// Converts a pcapng timestamp (units since the epoch, plus the interface's offset) to ns.
/// Where a unit is a whole number of nanoseconds (microseconds, the default, every decimal
/// resolution up to nanoseconds, and binary ones up to 2^-9 s) that is one multiplication,
/// the value [`divided_timestamp`] gives with two 128-bit divisions, which cost every frame of
/// a pcapng capture ~30 instructions; a time that would not fit takes the division and its
/// saturation. (Where the sum fits, no step of
/// the division saturates: its seconds are at most the sum's, and at least the offset's.)
#[inline]
fn ng_timestamp(units: u64, ifc: &Interface) -> Timestamp {
    let exact = ifc.exact_ns.and_then(|(per_unit, offset)| {
        let ns = i64::try_from(units.checked_mul(per_unit)?).ok()?;
        ns.checked_add(offset)
    });
    match exact {
        Some(t) => Timestamp(t),
        None => divided_timestamp(units, ifc),
    }
}

/// [`ng_timestamp`] for any resolution: seconds and the fraction apart, saturating.
fn divided_timestamp(units: u64, ifc: &Interface) -> Timestamp {
    let per_sec = u128::from(ifc.units_per_sec.max(1));
    let units = u128::from(units);
    let secs = i64::try_from(units / per_sec).unwrap_or(i64::MAX);
    let frac_ns = i64::try_from((units % per_sec) * 1_000_000_000 / per_sec).unwrap_or(0);
    timestamp(secs.saturating_add(ifc.offset_secs), frac_ns)
}

/// if_tsresol: the high bit selects a power of two, otherwise a power of ten.
fn units_per_sec(tsresol: u8) -> Option<u64> {
    let exp = u32::from(tsresol & 0x7f);
    if tsresol & 0x80 == 0 {
        10u64.checked_pow(exp)
    } else {
        1u64.checked_shl(exp).filter(|_| exp < 64)
    }
}

fn interface_from_idb(
    idb: &pcap_parser::InterfaceDescriptionBlock<'_>,
    big_endian: bool,
) -> Result<Interface, String> {
    let mut tsresol = 6u8;
    let mut offset_secs = 0i64;
    for opt in &idb.options {
        let value = opt.as_bytes().unwrap_or_default();
        match opt.code {
            OptionCode::IfTsresol => {
                if let Some(&r) = value.first() {
                    tsresol = r;
                }
            }
            OptionCode::IfTsoffset => {
                // pcap-parser reads this one as little endian whatever the section says.
                if let Some(b) = value.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
                    offset_secs = if big_endian {
                        i64::from_be_bytes(b)
                    } else {
                        i64::from_le_bytes(b)
                    };
                }
            }
            _ => {}
        }
    }
    let units_per_sec =
        units_per_sec(tsresol).ok_or_else(|| format!("invalid if_tsresol {tsresol:#x}"))?;
    Ok(Interface::new(
        u32::from(idb.linktype.0 as u16),
        idb.snaplen,
        units_per_sec,
        offset_secs,
    ))
}

/// pcap-parser's errors print the raw input; keep reports to one readable line.
fn describe(e: &PcapError<&[u8]>) -> String {
    match e {
        PcapError::NomError(_, kind) | PcapError::OwnedNomError(_, kind) => {
            format!("malformed record ({kind:?})")
        }
        // Called on whole records: "more bytes needed" means the record's contents claim more
        // than its length, whichever reader (streamed: the buffer is too small) says so.
        PcapError::Incomplete(_) | PcapError::UnexpectedEof | PcapError::BufferTooSmall => {
            "record shorter than its contents claim".to_string()
        }
        other => format!("{other:?}"),
    }
}

fn corrupt_at(frame: u64, offset: u64, e: &PcapError<&[u8]>) -> CaptureError {
    CaptureError::Corrupt {
        frame,
        offset,
        reason: describe(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames as (number, length, first byte), and how reading ended.
    #[cfg(target_os = "linux")]
    fn seen(r: &mut CaptureReader) -> (Vec<(u64, usize, u8)>, Option<String>) {
        frames_of(r, |f| (f.number, f.data.len(), f.data[0]))
    }

    /// `what` of every frame of `r`, and the error it ended with.
    fn frames_of<T>(
        r: &mut CaptureReader,
        what: impl Fn(&Frame<'_>) -> T,
    ) -> (Vec<T>, Option<String>) {
        let mut out = Vec::new();
        loop {
            match r.next_frame() {
                Ok(Some(f)) => out.push(what(&f)),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }

    /// Frames as a part's reader gives them (numbers count within a part, so left out).
    #[cfg(target_os = "linux")]
    fn part_seen(r: &mut CaptureReader) -> (Vec<(i64, usize, u8)>, Option<String>) {
        frames_of(r, |f| (f.ts.0, f.data.len(), f.data[0]))
    }

    /// A legacy pcap file of `n` frames of 1,500 bytes, frame `i` at time `i` and filled with
    /// `i`'s low byte.
    #[cfg(target_os = "linux")]
    fn frames_of_1500(n: u32) -> Vec<u8> {
        let mut w = crate::capture::PcapWriter::new(Vec::new(), 1).unwrap();
        for i in 0..n {
            w.write_packet(Timestamp(i64::from(i)), &[i as u8; 1_500])
                .unwrap();
        }
        w.into_inner()
    }

    /// A file of a run that walked no frame leaves no lines-ahead trial to carry on (the
    /// run keeps the one the files before left); one that walked frames does.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_without_frames_carries_no_lines_ahead_trial() {
        let dir = tempfile::tempdir().unwrap();
        for (n, carried) in [(0, false), (3, true)] {
            let path = dir.path().join(format!("{n}.pcap"));
            std::fs::write(&path, frames_of_1500(n)).unwrap();
            let mut r = CaptureReader::open(&path).unwrap();
            assert_eq!(seen(&mut r).0.len(), n as usize);
            assert_eq!(r.take_carried().lines.is_some(), carried, "{n} frames");
        }
    }

    /// A long legacy pcap file that comes from disk is read through its map where a thread
    /// to spare indexes its records ahead (it takes the waits for the disk), and in chunks by
    /// one thread alone (the kernel's readahead). The frames are the same.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_from_disk_is_mapped_where_a_thread_indexes_it_ahead() {
        let (_dir, path) = super::super::access::tests::from_disk(&frames_of_1500(28_000));
        let want = seen(&mut CaptureReader::open_as(&path, FileAccess::Chunks).unwrap());
        assert_eq!(want.0.len(), 28_000);
        if !reads_as_it_chooses() {
            return;
        }
        for (reading, mapped) in [(Reading::Ahead, true), (Reading::Alone, false)] {
            super::super::access::tests::drop_from_cache(&path);
            let mut r = CaptureReader::open_as(&path, FileAccess::Auto).unwrap();
            r.read_for(reading);
            assert_eq!(r.is_mapped(), mapped, "{reading:?}");
            assert_eq!(r.indexing(), mapped, "{reading:?}: indexed where mapped");
            assert_eq!(seen(&mut r), want, "{reading:?}");
        }
    }

    /// A short file of a run whose looks decided that the map pays is opened through its map
    /// at once, on one thread, and after them with a thread to spare that indexes its records
    /// (one file); where they decided not, or with a helper reading chunks ahead (files of a
    /// run), in chunks. The frames are the same either way.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_short_file_opens_through_its_map_where_the_runs_looks_decided() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pcap");
        std::fs::write(&path, frames_of_1500(1_400)).unwrap();
        let want = seen(&mut CaptureReader::open_as(&path, FileAccess::Chunks).unwrap());
        assert_eq!(want.0.len(), 1_400);
        let auto = FileAccess::from_env() == FileAccess::Auto;
        for (reading, pays, mapped) in [
            (Reading::Alone, true, auto),
            (Reading::Alone, false, false),
            (Reading::Ahead, true, auto),
            (Reading::Ahead, false, false),
            (Reading::AheadInChunks, true, false),
        ] {
            let before = Carried {
                looks: ShortLooks::decided(pays),
                ..Carried::default()
            };
            let mut r = CaptureReader::open_after(&path, reading, before).unwrap();
            assert_eq!(r.is_mapped(), mapped, "{reading:?}, pays: {pays}");
            // A thread to spare indexes the file it maps; one thread alone has none.
            let indexed = mapped && reading == Reading::Ahead;
            assert_eq!(r.indexing(), indexed, "{reading:?}, pays: {pays}");
            assert_eq!(
                r.take_carried().looks,
                ShortLooks::decided(pays),
                "carried on"
            );
            assert_eq!(seen(&mut r), want, "{reading:?}, pays: {pays}");
        }
    }

    /// Whether files are read as the reader chooses (`SQOS_READ` unset); if not, says the
    /// test that asks is skipped.
    fn reads_as_it_chooses() -> bool {
        let auto = FileAccess::from_env() == FileAccess::Auto;
        if !auto {
            eprintln!("skipped: SQOS_READ fixes how files are read");
        }
        auto
    }

    /// Where a run's looks find that the map pays, its next short files are read through the
    /// map and in chunks in turn, timed, and the files after them all the same way (which,
    /// depends on the machine), reading the same frames either way.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_runs_short_files_try_the_map_and_the_chunks_in_turn() {
        if !reads_as_it_chooses() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pcap");
        std::fs::write(&path, frames_of_1500(300)).unwrap();
        let want = seen(&mut CaptureReader::open_as(&path, FileAccess::Chunks).unwrap());
        let mut carried = Carried {
            looks: ShortLooks::paying_untried(),
            ..Carried::default()
        };
        let mut ways = Vec::new();
        for _ in 0..16 {
            let mut r = CaptureReader::open_after(&path, Reading::Alone, carried).unwrap();
            ways.push(r.is_mapped());
            assert_eq!(seen(&mut r), want);
            carried = r.take_carried();
        }
        assert_eq!(ways[..12], [true, false].repeat(6), "{ways:?}");
        assert!(ways[12..].iter().all(|&w| w == ways[12]), "{ways:?}");
        assert!(!carried.looks.trying(), "the trial is over");
    }

    /// The files of a run read with a thread to spare have their records indexed in turn on
    /// one thread, kept from file to file, and read the same.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_files_of_a_run_are_indexed_in_turn_on_one_thread() {
        if !reads_as_it_chooses() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<_> = [900, 1_400, 1]
            .into_iter()
            .enumerate()
            .map(|(i, n)| {
                let path = dir.path().join(format!("{i}.pcap"));
                std::fs::write(&path, frames_of_1500(n)).unwrap();
                path
            })
            .collect();
        let mut carried = Carried {
            looks: ShortLooks::decided(true),
            ..Carried::default()
        };
        let mut threads = Vec::new();
        for path in files.iter().chain(&files) {
            let want = seen(&mut CaptureReader::open_as(path, FileAccess::Chunks).unwrap());
            let mut r = CaptureReader::open_after(path, Reading::Ahead, carried).unwrap();
            assert!(r.indexing(), "{path:?}");
            threads.extend(r.spare.as_ref().map(|s| s.thread().id()));
            assert_eq!(seen(&mut r), want, "{path:?}");
            carried = r.take_carried();
        }
        assert_eq!(threads.len(), 6);
        assert!(threads.iter().all(|&t| t == threads[0]), "{threads:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_cut_into_parts_reads_as_the_whole() {
        let mut w = crate::capture::PcapWriter::new(Vec::new(), 1).unwrap();
        for i in 0..3000u32 {
            let len = [60, 1514, 9000, 100][i as usize % 4];
            w.write_packet(Timestamp(i64::from(i) * 1000), &vec![i as u8; len])
                .unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pcap");
        std::fs::write(&path, w.into_inner()).unwrap();
        let whole = part_seen(&mut CaptureReader::open_as(&path, FileAccess::Map).unwrap());
        assert_eq!(whole.0.len(), 3000);
        for n in [1, 2, 5, 16, 40] {
            let mut parts = CaptureReader::open_parts(&path, n).unwrap();
            assert_eq!(parts.len(), n.min(MAX_PARTS));
            let mut all = Vec::new();
            for p in &mut parts {
                let (frames, end) = part_seen(p);
                assert_eq!(end, None, "each part ends cleanly");
                assert!(!frames.is_empty());
                all.extend(frames);
            }
            assert_eq!(all, whole.0, "{n} parts");
        }
        // What is no legacy pcap file is one part, read as a whole.
        let gz = dir.path().join("f.pcap.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, &std::fs::read(&path).unwrap()).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        let mut parts = CaptureReader::open_parts(&gz, 4).unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(part_seen(&mut parts[0]), whole);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_cut_that_is_no_record_start_ends_the_part_before_in_an_error() {
        // Frame 500's payload holds records of its own, which the guess takes for the file's.
        let fake: Vec<u8> = (0..20u32)
            .flat_map(|i| {
                let mut r = Vec::new();
                for v in [500, i, 10, 10] {
                    r.extend_from_slice(&u32::to_le_bytes(v));
                }
                r.extend_from_slice(&[0xab; 10]);
                r
            })
            .collect();
        let mut w = crate::capture::PcapWriter::new(Vec::new(), 1).unwrap();
        let mut at = 24;
        let mut fake_at = 0;
        for i in 0..1000u32 {
            let data = if i == 500 {
                fake_at = at + 16;
                fake.clone()
            } else {
                vec![i as u8; 200]
            };
            w.write_packet(Timestamp(i64::from(i) * 1_000_000), &data)
                .unwrap();
            at += 16 + data.len();
        }
        let bytes = w.into_inner();
        let layout = super::super::split::tests::LAYOUT;
        assert_eq!(
            super::super::split::record_start(&bytes, fake_at - 8, layout),
            Some(fake_at),
            "the guess is fooled"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pcap");
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let format = probe(&mut bytes.as_slice()).unwrap().0;
        let parts = vec![24..fake_at, fake_at..bytes.len()];
        let mut parts = CaptureReader::parts_at(&path, &file, &format, parts).unwrap();
        let (frames, end) = part_seen(&mut parts[0]);
        assert_eq!(frames.len(), 500, "the frames before the one cut off");
        assert!(
            end.as_ref().is_some_and(|e| e.contains("cut off")),
            "{end:?}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_opened_in_chunks_reads_on_through_its_map_from_the_start() {
        let mut w = crate::capture::PcapWriter::new(Vec::new(), 1).unwrap();
        for i in 0..3000u32 {
            let len = [60, 1514, 9000, 100][i as usize % 4];
            w.write_packet(Timestamp(i64::from(i)), &vec![i as u8; len])
                .unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pcap");
        std::fs::write(&path, w.into_inner()).unwrap();
        let mut chunks = CaptureReader::open_as(&path, FileAccess::Chunks).unwrap();
        let mut auto = CaptureReader::open_as(&path, FileAccess::Auto).unwrap();
        assert!(auto.is_chunked() && auto.may_map);
        let Records::Chunked(r) = &auto.rdr else {
            panic!("in chunks")
        };
        let map = Map::of(r.file()).unwrap();
        auto.read_mapped(map, 0);
        assert!(auto.is_mapped() && !auto.is_chunked());
        let want = seen(&mut chunks);
        assert_eq!(want.0.len(), 3000);
        assert_eq!(seen(&mut auto), want);
        assert_eq!(
            auto.input_bytes_read(),
            std::fs::metadata(&path).unwrap().len()
        );
        // Once a frame has been read, or when asked not to: no switch, and no look (which
        // would be asked only once).
        let mut late = CaptureReader::open_as(&path, FileAccess::Auto).unwrap();
        late.next_frame().unwrap().unwrap();
        assert!(!late.map_from_the_start());
        assert!(late.may_map, "not looked at after a frame");
        let mut chunks = CaptureReader::open_as(&path, FileAccess::Chunks).unwrap();
        assert!(!chunks.may_map);
        assert!(!chunks.map_from_the_start());
        assert!(chunks.is_chunked());
        // Asked before the first frame, the look is taken (here a file too small for one).
        let mut early = CaptureReader::open_as(&path, FileAccess::Auto).unwrap();
        assert!(!early.map_from_the_start());
        assert!(!early.may_map, "looked at once");
        assert!(early.is_chunked());
        // So for workers, and for a thread to spare that indexes a legacy pcap file's map; with
        // a helper reading chunks ahead, its trial decides (and looks if it stops it).
        for (reading, looked) in [
            (Reading::ForWorkers, true),
            (Reading::Ahead, true),
            (Reading::AheadInChunks, false),
            (Reading::Alone, true),
        ] {
            let mut r = CaptureReader::open_as(&path, FileAccess::Auto).unwrap();
            r.read_for(reading);
            assert_eq!(!r.may_map, looked, "{reading:?}");
            assert!(r.is_chunked());
            assert_eq!(seen(&mut r), want, "{reading:?}");
        }
    }

    /// A file read in chunks and then, from a record boundary in its middle, through its map
    /// (as after a helper's trial found reading alone cheaper): the frames of a file read in
    /// chunks throughout, legacy pcap and pcapng alike.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_read_in_chunks_reads_on_through_its_map_from_a_record_in_its_middle() {
        let mut pcap = crate::capture::PcapWriter::new(Vec::new(), 1).unwrap();
        let mut ng = crate::capture::PcapngWriter::new(Vec::new()).unwrap();
        let eth = ng.add_interface(1, 0, 6).unwrap();
        for (ts, f) in chunk_cut_frames() {
            pcap.write_packet(ts, &f).unwrap();
            ng.write_epb(eth, ts, &f, f.len() as u32).unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in [("f.pcap", pcap.into_inner()), ("f.pcapng", ng.into_inner())] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let want = seen(&mut CaptureReader::open_as(&path, FileAccess::Chunks).unwrap());
            assert_eq!(want.0.len(), 3000, "{name}");
            for after in [1, 999, 2500] {
                let mut r = CaptureReader::open_as(&path, FileAccess::Auto).unwrap();
                let mut got = seen_n(&mut r, after);
                // Where `fill` switches: the record before consumed.
                r.rdr.consume_noshift(r.pending);
                r.pending = 0;
                let Records::Chunked(chunks) = &r.rdr else {
                    panic!("in chunks")
                };
                let pos = chunks.consumed();
                let map = Map::of(chunks.file()).unwrap();
                r.read_mapped(map, pos);
                assert!(r.is_mapped());
                let rest = seen(&mut r);
                got.extend(rest.0);
                assert_eq!((got, rest.1), want, "{name}: after {after} frames");
                assert_eq!(
                    r.input_bytes_read(),
                    std::fs::metadata(&path).unwrap().len()
                );
            }
        }
    }

    /// A reader whose helper's trial wants the map looked at first (`chunks::map_first`, bulk
    /// traffic) where the look refuses it (a file under `access::LOOK_FROM`): the helper starts
    /// after all, at the next refill, and the frames are those of the file read in chunks.
    #[cfg(target_os = "linux")]
    #[test]
    fn where_the_map_does_not_pay_the_helper_starts_after_all() {
        let mut pcap = crate::capture::PcapWriter::new(Vec::new(), 1).unwrap();
        for (ts, f) in chunk_cut_frames() {
            pcap.write_packet(ts, &f).unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pcap");
        std::fs::write(&path, pcap.into_inner()).unwrap();
        let want = seen(&mut CaptureReader::open_as(&path, FileAccess::Auto).unwrap());
        assert_eq!(want.0.len(), 3000);
        let mut r = CaptureReader::open_as(&path, FileAccess::Auto).unwrap();
        r.read_for(Reading::Ahead);
        let mut got = seen_n(&mut r, 10);
        let Records::Chunked(chunks) = &mut r.rdr else {
            panic!("in chunks")
        };
        chunks.want_map_first();
        assert!(!chunks.helper_runs());
        got.extend(seen_n(&mut r, 1000));
        let Records::Chunked(chunks) = &r.rdr else {
            panic!("the look refused the map: still in chunks")
        };
        assert!(!chunks.wants_map_first(), "the map was looked at");
        assert!(chunks.helper_runs(), "the helper started after all");
        let rest = seen(&mut r);
        got.extend(rest.0);
        assert_eq!((got, rest.1), want);
    }

    /// 3,000 frames of 60 to 9,000 bytes, each filled with its number's low byte: about 8 MB,
    /// 32 chunks, records cut by chunks' ends on the way.
    #[cfg(target_os = "linux")]
    fn chunk_cut_frames() -> impl Iterator<Item = (Timestamp, Vec<u8>)> {
        let lens = [60usize, 1514, 9000, 3000, 100];
        (0..3000u32).map(move |i| {
            let len = lens[i as usize % lens.len()];
            (Timestamp(i64::from(i)), vec![i as u8; len])
        })
    }

    /// The first `n` frames, as [`seen`] gives them.
    #[cfg(target_os = "linux")]
    fn seen_n(r: &mut CaptureReader, n: usize) -> Vec<(u64, usize, u8)> {
        let mut out = Vec::new();
        while out.len() < n {
            let f = r.next_frame().unwrap().unwrap();
            out.push((f.number, f.data.len(), f.data[0]));
        }
        out
    }

    #[test]
    fn tsresol_decimal_and_binary() {
        assert_eq!(units_per_sec(6), Some(1_000_000));
        assert_eq!(units_per_sec(9), Some(1_000_000_000));
        assert_eq!(units_per_sec(0x80 | 10), Some(1024));
        assert_eq!(units_per_sec(20), None);
        assert_eq!(units_per_sec(0x80 | 64), None);
    }

    #[test]
    fn ng_timestamp_uses_resolution_and_offset() {
        let ifc = Interface::new(1, 0, 1024, 100);
        // 3.5 s in 1/1024 units, plus 100 s offset.
        assert_eq!(
            ng_timestamp(3 * 1024 + 512, &ifc),
            Timestamp(103_500_000_000)
        );
        // Microseconds, the default: 3.25 s.
        let us = Interface::new(1, 0, 1_000_000, 0);
        assert_eq!(ng_timestamp(3_250_000, &us), Timestamp(3_250_000_000));
    }

    #[test]
    fn the_multiplied_timestamp_is_the_divided_one() {
        // Every resolution if_tsresol can give, offsets either way and at the ends, units at
        // the ends and between: where the multiplication is taken it gives what the division
        // gives, and elsewhere the division is taken.
        let resolutions = (0..=19u8).chain((0..64u8).map(|e| 0x80 | e));
        let ends = [
            i64::MAX / 1_000_000_000,
            i64::MIN / 1_000_000_000,
            i64::MAX,
            i64::MIN,
        ];
        let offsets = [0, 100, -100, -2_000_000_000].into_iter().chain(ends);
        let mut units: Vec<u64> = vec![0, 1, 999, 1_000_000, u64::MAX, u64::MAX / 2, 1 << 63];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            units.push(x >> (x % 64));
        }
        let mut exact = 0;
        for per_sec in resolutions.filter_map(units_per_sec) {
            for offset in offsets.clone() {
                let ifc = Interface::new(1, 0, per_sec, offset);
                exact += usize::from(ifc.exact_ns.is_some());
                for &u in &units {
                    assert_eq!(
                        ng_timestamp(u, &ifc),
                        divided_timestamp(u, &ifc),
                        "{u} units of 1/{per_sec} s, offset {offset}"
                    );
                }
            }
        }
        assert!(exact >= 10 * 5, "{exact} interfaces with an exact unit");
    }
}
