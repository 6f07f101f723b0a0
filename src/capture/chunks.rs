//! A regular capture file read with `read()` in chunks of [`CHUNK`] bytes, into a few buffers
//! reused over and over, in which the records are parsed where they lie (pcap-parser's reader
//! interface, as [`super::map_reader`] gives it over a memory map).
//!
//! Why not the map (`SQOS_READ=map`): on the AMD EPYC of sessions 25–27 the kernel's mapping
//! of a file's pages cost more than their copy into a buffer that stays in the cache where
//! the page cache held the file in 4 KiB pages, and a walk over a mapped page waits for
//! memory where a buffer just written is in the cache (docs/performance.md). One thread
//! switches to the map where a look finds it much cheaper ([`super::access`]).
//!
//! With a thread to spare (`--threads 2` and more), [`ChunkReader::read_ahead`] starts a
//! helper that reads chunks ahead (up to [`AHEAD`] buffers) while the reading thread walks
//! one. Both take the next chunk nobody has taken yet: the reading thread reads one itself
//! whenever the chunk it wants is still being read, so the copying is shared between the two
//! threads as the reading thread's other work allows. Copying alone, the helper was slower
//! than `cat` (buffers written on one core and read on the other); shared, a run was as fast
//! as `cat` or faster where the two cores share a cache. Where they do not, the reading thread
//! spends longer on the helper's chunks than on reading its own: a [`Trial`] on the file's
//! first chunks decides whether the helper stays.
//!
//! A record that a chunk cuts is made whole in the next buffer: the part already read is
//! copied into the room left before the chunk's bytes ([`HEAD`]). A record longer than that
//! room (up to [`super::source::MAX_BLOCK_LEN`]) is put together in a buffer of its own.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use pcap_parser::nom::Needed;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{PcapBlockOwned, PcapError};

use super::input::{read_full, TapState};
use super::layout::{next_record, Layout};

/// Bytes read at a time: small enough that a chunk is still in the cache when it is walked.
#[cfg(not(fuzzing))]
const CHUNK: usize = 256 << 10;
/// Room before a chunk's bytes for the end of the record the chunk before cut: frames of up to
/// 64 KiB (segmentation offload) and their headers.
#[cfg(not(fuzzing))]
const HEAD: usize = 80 << 10;
/// Fuzzed inputs are small: chunks and room of a few bytes cut and join records everywhere.
#[cfg(fuzzing)]
const CHUNK: usize = 64;
#[cfg(fuzzing)]
const HEAD: usize = 40;
/// Buffers a read-ahead thread fills ahead of the reading thread.
const AHEAD: usize = 4;

/// Chunks timed on each side of the trial that decides whether a helper pays (see [`Trial`]):
/// the medians are compared.
#[cfg(not(fuzzing))]
const TRIAL_CHUNKS: u32 = 16;
#[cfg(fuzzing)]
const TRIAL_CHUNKS: u32 = 3;

/// How long a thread spins for the other's next chunk or buffer before it sleeps.
const SPIN_MICROS: u64 = 200;
/// One chunk's buffer: [`HEAD`] bytes of room, then the chunk. Dropped, it is kept in [`KEPT`]
/// for the next reader: rotated captures are read one file after the other, and each file's
/// reader and helper made their buffers anew, each page faulted in again (six files of the
/// small-I/O bench: 2,400 more page faults than one file, `--threads 2`).
struct Buffer(Box<[u8]>);

/// Buffers kept for the next reader: as many as a reader and its helper use at once. Bounded
/// (under 3 MiB) whatever the number of files; only bytes a read has written are ever looked
/// at, so a kept buffer's old bytes need no clearing.
static KEPT: Mutex<Vec<Box<[u8]>>> = Mutex::new(Vec::new());
const MAX_KEPT: usize = AHEAD + 4;

/// Frees the buffers kept: a reader of one file that switched to its map needs none, and kept
/// they count in the resident size for the whole run (two, 680 KiB, after the first chunk and a
/// look at the map).
pub(crate) fn free_kept() {
    if let Ok(mut kept) = KEPT.lock() {
        *kept = Vec::new();
    }
}

fn new_buffer() -> Buffer {
    let kept = KEPT.lock().ok().and_then(|mut k| k.pop());
    Buffer(kept.unwrap_or_else(|| vec![0u8; HEAD + CHUNK].into_boxed_slice()))
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let bytes = std::mem::take(&mut self.0);
        if let Ok(mut kept) = KEPT.lock() {
            if kept.len() < MAX_KEPT && bytes.len() == HEAD + CHUNK {
                kept.push(bytes);
            }
        }
    }
}

impl std::ops::Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// The file, and the next of its chunks (the one at `next * CHUNK`) that neither thread has
/// taken to read yet: the two read chunks as they find them untaken.
struct Chunks {
    file: File,
    next: AtomicUsize,
}

/// What a read-ahead thread sends: for each chunk it took, in the order it took them, the
/// chunk's number and its bytes after [`HEAD`] in its buffer (fewer than [`CHUNK`]: the
/// last it takes), or that the read failed (the error kept in the [`TapState`]).
type Filled = (usize, Result<(Buffer, usize), ()>);

/// The read-ahead thread, as the reading thread sees it.
struct Helper {
    full: Receiver<Filled>,
    empty: SyncSender<Buffer>,
}

/// Where the next chunks come from.
struct Source {
    chunks: Arc<Chunks>,
    /// The file offset of the next chunk the window needs: a multiple of [`CHUNK`] while a
    /// helper reads ahead.
    at: usize,
    spare: Option<Buffer>,
    /// A chunk this thread took and read while the helper was still reading the one needed
    /// before it (a failed read stands there until the window reaches it).
    own: Option<Filled>,
    helper: Option<Helper>,
}

/// Whether a helper pays, found out on the file itself. After a few chunks untimed, the
/// reading thread times what a chunk costs it reading alone (the copy and the work on the
/// chunk until it needs the next), then, the helper started, what the work on a chunk the
/// helper read costs it. Bytes another core has just written are not in this core's cache:
/// where the two cores share no cache (two core complexes of an AMD EPYC, a VM's cores placed
/// apart) the reading thread took longer over the helper's chunks than reading them itself
/// (small I/Os: 68 ms against 47), and then the helper is stopped. And where the work on a
/// chunk read alone is small beside its copy, the file's map is looked at before the helper
/// starts ([`map_first`]).
enum Trial {
    /// No helper asked for.
    Off,
    /// Decided: the helper pays, and runs.
    Kept,
    /// Decided: the helper's chunks cost this thread more than reading alone; it was stopped.
    Refused,
    /// Not decided, and no helper: the file was read to its end first, or the helper could not
    /// be started.
    Ended,
    /// Reading alone, untimed: the first chunks of a run cost more (caches, tables growing).
    Warming { chunks: u32 },
    /// Reading alone: the chunks timed, whole and their copies.
    Alone { times: Timings, copies: Timings },
    /// Reading alone, the work on a chunk under a third of its copy ([`map_first`]): the map
    /// is looked at before a helper is started. What a chunk cost alone.
    MapFirst { alone: u64 },
    /// The helper runs: what a chunk cost alone (the median), and the helper's chunks timed.
    Helped { alone: u64, times: Timings },
}

impl Trial {
    /// Still deciding: its chunks are timed.
    fn under_way(&self) -> bool {
        matches!(
            self,
            Trial::Warming { .. }
                | Trial::Alone { .. }
                | Trial::MapFirst { .. }
                | Trial::Helped { .. }
        )
    }
}

/// The [`Trial`] of a file read to its end, carried on to the next file of the same run:
/// rotated captures are read one after the other as one timeline, and a trial takes
/// `3 × TRIAL_CHUNKS` chunks (12 MiB) before it decides, so a ring of files shorter than that
/// (`tcpdump -C 10`, `dumpcap -b filesize:5000`) started a trial in every file and never
/// finished one, each file read without its helper. Carried, the trial goes on where it was
/// and a helper kept (or on trial) starts with the next file's first chunks.
pub(crate) struct TrialCarried(Trial);

impl TrialCarried {
    /// The trial has gone past reading alone: a helper is on trial or decided on, or the map
    /// is to be looked at first.
    #[cfg(test)]
    pub(crate) fn past_alone(&self) -> bool {
        !matches!(
            self.0,
            Trial::Off | Trial::Warming { .. } | Trial::Alone { .. }
        )
    }
}

/// Nanoseconds of [`TRIAL_CHUNKS`] chunks, of which the median is taken: one chunk that waited
/// for the core (another process, an interrupt) does not decide.
type Timings = super::samples::Samples<{ TRIAL_CHUNKS as usize }>;

/// Where the chunk a refill gave the window came from, for the [`Trial`].
#[derive(Clone, Copy)]
enum Came {
    /// Read here, in `copy` nanoseconds.
    Read { copy: u64 },
    /// Read by the helper.
    Helper,
    /// Read here ahead of the helper, or not timed.
    Other,
}

/// Whether the map is looked at before a helper is started: reading alone, a chunk cost `alone`
/// and its copy `copied`, and the work on it is under a third of the copy (bulk traffic from
/// disk, session 33: 3–4 µs against 12.5–16). A helper then takes little but the copy off this
/// thread, which the map does not make at all: through the map the plain capture took as long
/// as with the helper (23–26 ms) on half the CPU, and the helper's runs came in two modes, 24
/// or 42 ms, the two cores copying at once at half the speed of one each. Where the work is
/// larger the helper is tried first, as before: AES-sealed bulk traffic with its keys (5–6 µs
/// against 13: 25–27 ms with the helper, 29 through the map), small I/Os (9–10 against 12–14).
fn map_first(alone: u64, copied: u64) -> bool {
    alone.saturating_sub(copied).saturating_mul(3) < copied
}

/// Whether the helper pays: its chunks cost the reading thread less than reading alone.
fn helper_pays(alone: u64, helped: u64) -> bool {
    helped < alone
}

/// Where the bytes not consumed yet lie.
enum Window {
    /// In a chunk's buffer.
    Chunk(Buffer),
    /// In the buffer a record longer than [`HEAD`] was put together in.
    Joined(Vec<u8>),
}

impl Window {
    fn bytes(&self) -> &[u8] {
        match self {
            Window::Chunk(b) => b,
            Window::Joined(v) => v,
        }
    }
}

pub(crate) struct ChunkReader {
    layout: Layout,
    window: Window,
    /// The bytes not consumed: `window[pos..end]`.
    pos: usize,
    end: usize,
    /// The file offset of `window[pos]`.
    consumed: usize,
    source: Source,
    /// The last refill found the end of the file.
    exhausted: bool,
    /// Kept for the next record longer than [`HEAD`] once a window no longer needs it.
    joined: Vec<u8>,
    tap: Arc<TapState>,
    trial: Trial,
    /// The trial as the file's end found it, for the next file of the run ([`TrialCarried`]).
    ended: Option<TrialCarried>,
    /// While the trial runs: when the last refill ended, and where its chunk came from.
    since: Option<(Instant, Came)>,
    /// The run's thread to spare, which reads ahead where it is free.
    #[cfg(target_os = "linux")]
    spare: Option<super::spare::Spare>,
}

impl ChunkReader {
    /// Reads `file` from its start (the caller has probed its format: `layout`), the first
    /// chunk at once.
    pub(crate) fn new(file: File, layout: Layout, tap: Arc<TapState>) -> io::Result<Self> {
        let mut reader = ChunkReader {
            layout,
            window: Window::Chunk(new_buffer()),
            pos: HEAD,
            end: HEAD,
            consumed: 0,
            source: Source {
                chunks: Arc::new(Chunks {
                    file,
                    next: AtomicUsize::new(0),
                }),
                at: 0,
                spare: Some(new_buffer()),
                own: None,
                helper: None,
            },
            exhausted: false,
            joined: Vec::new(),
            tap,
            trial: Trial::Off,
            ended: None,
            since: None,
            #[cfg(target_os = "linux")]
            spare: None,
        };
        if reader.refill().is_err() {
            return Err(reader
                .tap
                .take_error()
                .unwrap_or_else(|| io::Error::other("read failed")));
        }
        Ok(reader)
    }

    /// The file read.
    #[cfg(test)]
    pub(crate) fn file(&self) -> &File {
        &self.source.chunks.file
    }

    /// The trial as [`map_first`] leaves it for bulk traffic, whatever the chunks cost here.
    #[cfg(test)]
    pub(crate) fn want_map_first(&mut self) {
        self.trial = Trial::MapFirst { alone: 1 };
    }

    /// A helper reads ahead.
    #[cfg(test)]
    pub(crate) fn helper_runs(&self) -> bool {
        self.source.helper.is_some()
    }

    /// The file read, and the bytes of the buffer not in use now, if one is (what a look at
    /// the file copies into, `super::access`: no buffer of its own made and faulted in).
    pub(crate) fn file_and_spare(&mut self) -> (&File, Option<&mut [u8]>) {
        let spare = self.source.spare.as_deref_mut();
        (&self.source.chunks.file, spare)
    }

    /// True once the trial has stopped the helper ([`Trial`]): this thread reads alone from
    /// here on, as a run of one thread does.
    pub(crate) fn helper_refused(&self) -> bool {
        matches!(self.trial, Trial::Refused)
    }

    /// Reads the file ahead on a thread of its own where that pays: each thread reads the
    /// next chunk that the other has not taken, so that the copying is shared between them as
    /// their other work allows (this thread walks the records too). The helper starts after
    /// [`TRIAL_CHUNKS`] chunks read alone (unless the work on them was small beside their copy
    /// and the file's map pays, [`map_first`]), and stops after as many of its own if they
    /// cost this thread more than those ([`Trial`]). With `before`, the trial of the file
    /// before in the same run goes on where that file's end left it ([`TrialCarried`]): a
    /// helper kept or on trial there starts here at once. False when asked already or the file
    /// has been read to its end.
    pub(crate) fn read_ahead(&mut self, before: Option<TrialCarried>) -> bool {
        if !matches!(self.trial, Trial::Off) || self.exhausted {
            return false;
        }
        self.trial = before.map_or(Trial::Warming { chunks: 0 }, |b| b.0);
        if matches!(self.trial, Trial::Kept | Trial::Helped { .. }) && !self.start_helper() {
            self.trial = Trial::Ended;
        }
        true
    }

    /// Reads ahead on `spare`, the run's thread to spare, where it is free when the helper
    /// starts.
    #[cfg(target_os = "linux")]
    pub(crate) fn read_ahead_on(&mut self, spare: super::spare::Spare) {
        self.spare = Some(spare);
    }

    /// The trial as this file's end left it, once (None when no helper was asked for, or
    /// the file has not ended).
    pub(crate) fn take_trial(&mut self) -> Option<TrialCarried> {
        self.ended.take()
    }

    /// Starts the helper. False when it could not be started (reading goes on here).
    fn start_helper(&mut self) -> bool {
        let src = &mut self.source;
        if src.helper.is_some() || src.at % CHUNK != 0 {
            return false;
        }
        src.chunks.next.store(src.at / CHUNK, Ordering::Relaxed);
        let (full_tx, full) = sync_channel::<Filled>(AHEAD);
        let (empty, empty_rx) = sync_channel::<Buffer>(AHEAD + 2);
        for _ in 0..AHEAD {
            // The channel has room for them all.
            let _ = empty.try_send(new_buffer());
        }
        let chunks = Arc::clone(&src.chunks);
        let tap = Arc::clone(&self.tap);
        let work = move || {
            // Ends at the file's end, at a failed read, and when the reader stops taking
            // (either channel closes).
            while let Ok(mut buffer) = wait(&empty_rx) {
                let number = chunks.next.fetch_add(1, Ordering::Relaxed);
                let read = read_chunk(&chunks.file, number * CHUNK, &mut buffer, &tap);
                let last = read.is_err() || read.is_ok_and(|n| n < CHUNK);
                if full_tx.send((number, read.map(|n| (buffer, n)))).is_err() || last {
                    return;
                }
            }
        };
        // On the run's thread to spare where it is free (a file of a ring: a thread of its
        // own started too late for a few MB), else on a thread of its own.
        #[cfg(target_os = "linux")]
        let work = match &self.spare {
            Some(spare) => spare.run(Box::new(work)).err(),
            None => Some(Box::new(work) as super::spare::Job),
        };
        #[cfg(not(target_os = "linux"))]
        let work = Some(work);
        if let Some(work) = work {
            let started = std::thread::Builder::new()
                .name("sqos-read-ahead".into())
                .spawn(work);
            if started.is_err() {
                return false;
            }
        }
        src.helper = Some(Helper { full, empty });
        true
    }

    /// The next chunk read: its buffer and length (0 at the end of the file) and where it
    /// came from, `Err` when a read failed.
    fn next_chunk(&mut self) -> Result<(Buffer, usize, Came), ()> {
        let src = &mut self.source;
        if src.helper.is_none() {
            let mut buffer = src.spare.take().unwrap_or_else(new_buffer);
            let start = matches!(self.trial, Trial::Alone { .. }).then(Instant::now);
            let n = read_chunk(&src.chunks.file, src.at, &mut buffer, &self.tap)?;
            src.at += n;
            let came = start.map_or(Came::Other, |t| Came::Read {
                copy: nanos(t.elapsed()),
            });
            return Ok((buffer, n, came));
        }
        let wanted = src.at / CHUNK;
        loop {
            let (ready, came) = match &src.own {
                // Read here ahead of the helper, and wanted now.
                Some((number, _)) if *number == wanted => (src.own.take(), Came::Other),
                _ => match src.helper.as_ref().map(|h| h.full.try_recv()) {
                    Some(Ok(filled)) => (Some(filled), Came::Helper),
                    Some(Err(TryRecvError::Empty)) => (None, Came::Helper),
                    Some(Err(TryRecvError::Disconnected)) | None => break,
                },
            };
            let filled = match ready {
                Some(filled) => filled,
                None if src.own.is_none() && src.spare.is_some() => {
                    // The helper is still reading the chunk wanted: read the next one nobody
                    // has taken meanwhile, instead of waiting.
                    let mut buffer = src.spare.take().unwrap_or_else(new_buffer);
                    let number = src.chunks.next.fetch_add(1, Ordering::Relaxed);
                    let read = read_chunk(&src.chunks.file, number * CHUNK, &mut buffer, &self.tap);
                    src.own = Some((number, read.map(|n| (buffer, n))));
                    continue;
                }
                None => match src.helper.as_ref().map(|h| wait(&h.full)) {
                    Some(Ok(filled)) => filled,
                    _ => break,
                },
            };
            return match filled {
                (number, Ok((buffer, n))) if number == wanted => {
                    let (buffer, n) = src.took(buffer, n);
                    Ok((buffer, n, came))
                }
                (number, Err(())) if number == wanted => {
                    src.stop_helper();
                    Err(())
                }
                // Not what the helper should send: read on here.
                _ => break,
            };
        }
        // The helper ended without the chunk wanted: read on here, from where the window is.
        src.stop_helper();
        self.next_chunk()
    }

    /// The [`Trial`]'s step: `work` nanoseconds spent on the last chunk, which came as `came`.
    fn time(&mut self, work: u64, came: Came) {
        match (&mut self.trial, came) {
            (Trial::Warming { chunks }, _) => {
                *chunks += 1;
                if *chunks >= TRIAL_CHUNKS {
                    self.trial = Trial::Alone {
                        times: Timings::default(),
                        copies: Timings::default(),
                    };
                }
            }
            (Trial::Alone { times, copies }, Came::Read { copy }) => {
                // Pushed together: both are full at once.
                let copied = copies.push(copy);
                if let (Some(alone), Some(copied)) = (times.push(work + copy), copied) {
                    self.trial = if map_first(alone, copied) {
                        Trial::MapFirst { alone }
                    } else {
                        self.helped(alone)
                    };
                }
            }
            (Trial::Helped { alone, times }, Came::Helper) => {
                if let Some(helped) = times.push(work) {
                    self.trial = if helper_pays(*alone, helped) {
                        Trial::Kept
                    } else {
                        self.source.stop_helper();
                        Trial::Refused
                    };
                }
            }
            _ => {}
        }
    }

    /// The helper started, the trial on: a chunk cost `alone` without it.
    fn helped(&mut self, alone: u64) -> Trial {
        if self.start_helper() {
            Trial::Helped {
                alone,
                times: Timings::default(),
            }
        } else {
            Trial::Ended
        }
    }

    /// True while the trial waits for a look at the file's map before it starts a helper
    /// ([`map_first`]): the reader reads on through the map where that pays, else calls
    /// [`Self::helper_after_all`].
    pub(crate) fn wants_map_first(&self) -> bool {
        matches!(self.trial, Trial::MapFirst { .. })
    }

    /// The map does not pay: the helper is started and its trial goes on.
    pub(crate) fn helper_after_all(&mut self) {
        if let Trial::MapFirst { alone } = self.trial {
            self.trial = self.helped(alone);
        }
    }

    /// A chunk's buffer is done with.
    fn give_back(&mut self, buffer: Buffer) {
        self.source.give_back(buffer);
    }

    /// Puts the bytes not consumed and the next chunk's `n` bytes (after [`HEAD`] in `next`)
    /// together in one window.
    fn join(&mut self, mut next: Buffer, n: usize) {
        let rest = self.end - self.pos;
        let chunk = next.get(HEAD..HEAD + n).unwrap_or_default();
        if rest <= HEAD {
            // The usual case: the start of a record (or nothing) before the chunk.
            let from = HEAD - rest;
            if let (Some(to), Some(part)) = (
                next.get_mut(from..HEAD),
                self.window.bytes().get(self.pos..self.end),
            ) {
                to.copy_from_slice(part);
            }
            match std::mem::replace(&mut self.window, Window::Chunk(next)) {
                Window::Chunk(old) => self.give_back(old),
                Window::Joined(old) => self.joined = old,
            }
            self.pos = from;
            self.end = HEAD + n;
            return;
        }
        // A record longer than the room before a chunk.
        let mut joined = match std::mem::replace(&mut self.window, Window::Joined(Vec::new())) {
            Window::Joined(mut v) => {
                v.copy_within(self.pos..self.end, 0);
                v.truncate(rest);
                v
            }
            Window::Chunk(old) => {
                let mut v = std::mem::take(&mut self.joined);
                v.clear();
                v.extend_from_slice(old.get(self.pos..self.end).unwrap_or_default());
                self.give_back(old);
                v
            }
        };
        joined.extend_from_slice(chunk);
        self.give_back(next);
        self.window = Window::Joined(joined);
        self.pos = 0;
        self.end = rest + n;
    }
}

impl Source {
    /// The chunk wanted, `n` bytes in `buffer`: the window moves on by as much. One shorter
    /// than [`CHUNK`] is the file's end for now: the helper has stopped there, and anything
    /// read beyond is dropped (the file may have grown since, from that very offset).
    fn took(&mut self, buffer: Buffer, n: usize) -> (Buffer, usize) {
        self.at += n;
        if n < CHUNK {
            self.stop_helper();
        }
        (buffer, n)
    }

    /// Reads on this thread only, from `at`.
    fn stop_helper(&mut self) {
        self.helper = None;
        if let Some((_, Ok((buffer, _)))) = self.own.take() {
            self.spare = Some(buffer);
        }
    }

    fn give_back(&mut self, buffer: Buffer) {
        if self.spare.is_none() {
            self.spare = Some(buffer);
        } else if let Some(helper) = &self.helper {
            // Room for every buffer there is; a helper that has ended takes none.
            let _ = helper.empty.try_send(buffer);
        }
    }
}

/// The next message on `rx`: spun for first (a chunk is read in tens of microseconds, and
/// a thread put to sleep may take longer than that to be woken), then waited for.
fn wait<T>(rx: &Receiver<T>) -> Result<T, std::sync::mpsc::RecvError> {
    let start = std::time::Instant::now();
    loop {
        for _ in 0..64 {
            match rx.try_recv() {
                Ok(v) => return Ok(v),
                Err(TryRecvError::Disconnected) => return Err(std::sync::mpsc::RecvError),
                Err(TryRecvError::Empty) => {}
            }
            std::hint::spin_loop();
        }
        if start.elapsed() > std::time::Duration::from_micros(SPIN_MICROS) {
            return rx.recv();
        }
    }
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A file read from `offset` on without moving the file's own offset (both threads read it).
struct ReadAt<'f> {
    file: &'f File,
    offset: usize,
}

impl io::Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        #[cfg(unix)]
        let n = std::os::unix::fs::FileExt::read_at(self.file, buf, self.offset as u64)?;
        #[cfg(windows)]
        let n = std::os::windows::fs::FileExt::seek_read(self.file, buf, self.offset as u64)?;
        self.offset += n;
        Ok(n)
    }
}

/// Reads the chunk at `offset` of `file` into `buffer` after its room: the bytes read (fewer
/// than [`CHUNK`] only at the end of the file), `Err` when a read failed (the error kept in
/// `tap`).
fn read_chunk(
    file: &File,
    offset: usize,
    buffer: &mut Buffer,
    tap: &TapState,
) -> Result<usize, ()> {
    let chunk = buffer.get_mut(HEAD..).unwrap_or_default();
    read_full(&mut ReadAt { file, offset }, chunk).map_err(|e| tap.keep_error(e))
}

impl PcapReaderIterator for ChunkReader {
    fn next(&mut self) -> Result<(usize, PcapBlockOwned<'_>), PcapError<&[u8]>> {
        let data = self
            .window
            .bytes()
            .get(self.pos..self.end)
            .unwrap_or_default();
        next_record(
            &mut self.layout,
            data,
            self.consumed,
            |needed| match needed {
                Needed::Size(n) => PcapError::Incomplete(n.get()),
                Needed::Unknown => PcapError::Incomplete(0),
            },
        )
    }

    fn consume(&mut self, offset: usize) {
        self.consume_noshift(offset);
    }

    fn consume_noshift(&mut self, offset: usize) {
        let offset = offset.min(self.end - self.pos);
        self.pos += offset;
        self.consumed += offset;
    }

    fn consumed(&self) -> usize {
        self.consumed
    }

    /// Reads the next chunk behind the bytes not consumed. At the end of the file, nothing
    /// changes and [`reader_exhausted`](PcapReaderIterator::reader_exhausted) says so (a later
    /// call reads again: the file may have grown).
    fn refill(&mut self) -> Result<(), PcapError<&[u8]>> {
        let worked = self
            .since
            .take()
            .map(|(t, came)| (nanos(t.elapsed()), came));
        match self.next_chunk() {
            Ok((next, 0, _)) => {
                self.give_back(next);
                self.exhausted = true;
                // A trial under way ends here, handed on as it was; a verdict stays.
                let carried = match self.trial {
                    Trial::Off => None,
                    Trial::Kept => Some(Trial::Kept),
                    Trial::Refused => Some(Trial::Refused),
                    Trial::Ended => Some(Trial::Ended),
                    _ => Some(std::mem::replace(&mut self.trial, Trial::Ended)),
                };
                if let Some(trial) = carried {
                    self.ended.get_or_insert(TrialCarried(trial));
                }
                Ok(())
            }
            Ok((next, n, came)) => {
                self.exhausted = false;
                self.join(next, n);
                if let Some((work, last)) = worked {
                    self.time(work, last);
                }
                if self.trial.under_way() {
                    self.since = Some((Instant::now(), came));
                }
                Ok(())
            }
            Err(()) => Err(PcapError::ReadError),
        }
    }

    fn position(&self) -> usize {
        self.consumed
    }

    /// Nothing to grow: a record longer than a buffer is put together by `refill`.
    fn grow(&mut self, _new_size: usize) -> bool {
        true
    }

    fn data(&self) -> &[u8] {
        self.window
            .bytes()
            .get(self.pos..self.end)
            .unwrap_or_default()
    }

    fn reader_exhausted(&self) -> bool {
        self.exhausted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buffers dropped are kept for the next reader up to `MAX_KEPT`, whatever the number
    /// dropped, and only those of a chunk's size. (Other tests take and drop buffers meanwhile:
    /// only what holds at every moment is asserted.)
    #[test]
    fn kept_buffers_are_bounded_and_of_a_chunks_size() {
        let many: Vec<Buffer> = (0..MAX_KEPT + 5).map(|_| new_buffer()).collect();
        drop(many);
        drop(Buffer(vec![0u8; 100].into_boxed_slice()));
        let kept = KEPT.lock().unwrap();
        assert!(kept.len() <= MAX_KEPT, "{} kept", kept.len());
        assert!(kept.iter().all(|b| b.len() == HEAD + CHUNK));
    }

    /// A reader of a file of three chunks of zeros, asked to read ahead.
    fn reader(dir: &tempfile::TempDir) -> ChunkReader {
        let mut r = zeros(dir, "zeros");
        assert!(r.read_ahead(None));
        assert!(!r.read_ahead(None), "asked once");
        r
    }

    /// A reader of a file of three chunks of zeros, `name` in `dir`.
    fn zeros(dir: &tempfile::TempDir, name: &str) -> ChunkReader {
        let path = dir.path().join(name);
        std::fs::write(&path, vec![0u8; 3 * CHUNK]).unwrap();
        let file = File::open(&path).unwrap();
        let layout = Layout::Pcap {
            big_endian: false,
            modified: false,
        };
        ChunkReader::new(file, layout, Arc::default()).unwrap()
    }

    /// Takes every byte, chunk after chunk, to the end of the file.
    fn read_to_end(r: &mut ChunkReader) {
        while !r.reader_exhausted() {
            let n = r.data().len();
            r.consume_noshift(n);
            r.refill().unwrap();
        }
    }

    /// A trial carried to the next file of a run goes on there where it was: the warm-up
    /// counted on, a helper kept starting with the next file, one refused staying refused.
    #[test]
    fn a_trial_goes_on_in_the_next_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = reader(&dir);
        for _ in 0..TRIAL_CHUNKS - 3 {
            first.time(1_000_000, Came::Read { copy: 1_000_000 });
        }
        assert!(first.take_trial().is_none(), "not before the file's end");
        // Its last chunk is timed too: one more.
        read_to_end(&mut first);
        let carried = first.take_trial().expect("the file ended during the trial");
        assert!(first.take_trial().is_none(), "taken once");
        let mut second = zeros(&dir, "second");
        assert!(second.read_ahead(Some(carried)));
        assert!(!second.read_ahead(None), "asked once");
        assert!(matches!(second.trial, Trial::Warming { chunks } if chunks == TRIAL_CHUNKS - 2));
        second.time(1_000_000, Came::Read { copy: 1_000_000 });
        second.time(1_000_000, Came::Read { copy: 1_000_000 });
        assert!(
            matches!(second.trial, Trial::Alone { .. }),
            "the warm-up's last chunk"
        );
        assert!(!second.helper_runs());

        for (helped, kept) in [(120, true), (340, false)] {
            let mut r = reader(&dir);
            assert_eq!(decide(&mut r, helped), kept);
            read_to_end(&mut r);
            let mut next = zeros(&dir, "next");
            assert!(next.read_ahead(r.take_trial()));
            assert!(matches!(next.trial, Trial::Kept | Trial::Refused));
            assert_eq!(next.helper_runs(), kept, "a helper kept starts at once");
            assert_eq!(next.helper_refused(), !kept);
            read_to_end(&mut next);
        }
    }

    /// The trial with chunks read alone costing 200 ns (100 copying, 100 working) and the
    /// helper's `helped`: whether the helper still runs at the end.
    fn helper_kept(helped: u64) -> bool {
        let dir = tempfile::tempdir().unwrap();
        decide(&mut reader(&dir), helped)
    }

    /// [`helper_kept`]'s trial on `r`.
    fn decide(r: &mut ChunkReader, helped: u64) -> bool {
        for _ in 0..TRIAL_CHUNKS {
            r.time(1_000_000, Came::Read { copy: 1_000_000 });
            assert!(!r.helper_runs(), "warming up alone");
        }
        for _ in 0..TRIAL_CHUNKS {
            // Chunks not read here alone do not count.
            r.time(5, Came::Other);
            r.time(100, Came::Read { copy: 100 });
        }
        assert!(r.helper_runs(), "the helper started");
        for _ in 0..TRIAL_CHUNKS {
            r.time(1, Came::Other);
            r.time(helped, Came::Helper);
        }
        assert!(matches!(r.trial, Trial::Kept | Trial::Refused), "decided");
        assert!(!r.read_ahead(None), "not asked again");
        assert_eq!(r.helper_refused(), !r.helper_runs());
        r.helper_runs()
    }

    /// Chunks read by the helper and by this thread (whichever takes a chunk first) come to
    /// the window in file order, each with its own bytes, to the end of the file.
    #[test]
    fn chunks_of_both_threads_come_in_file_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("words");
        // Each 4-byte word is its own offset: 60.5 chunks.
        let len = 60 * CHUNK + CHUNK / 2;
        let bytes: Vec<u8> = (0..len / 4)
            .flat_map(|w| (w as u32 * 4).to_le_bytes())
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        let layout = Layout::Pcap {
            big_endian: false,
            modified: false,
        };
        let mut r = ChunkReader::new(File::open(&path).unwrap(), layout, Arc::default()).unwrap();
        assert!(r.start_helper());
        // The helper takes its first chunks before this thread asks (on a busy machine it may
        // otherwise not run before this thread has taken them all).
        let started = Instant::now();
        while r.source.chunks.next.load(Ordering::Relaxed) < 1 + AHEAD {
            assert!(started.elapsed().as_secs() < 60, "the helper takes chunks");
            std::thread::yield_now();
        }
        let (mut at, mut from_helper) = (CHUNK, 0);
        loop {
            let (buffer, n, came) = r.next_chunk().unwrap();
            if n == 0 {
                r.give_back(buffer);
                break;
            }
            assert_eq!(
                &buffer[HEAD..HEAD + n],
                &bytes[at..at + n],
                "the chunk at {at}"
            );
            from_helper += usize::from(matches!(came, Came::Helper));
            at += n;
            r.give_back(buffer);
        }
        assert_eq!(at, len, "read to the end");
        assert!(from_helper >= AHEAD, "the helper read {from_helper}");
        assert!(!r.helper_runs(), "a short chunk stops the helper");
    }

    #[test]
    fn one_slow_chunk_does_not_decide_the_trial() {
        let mut t = Timings::default();
        for i in 1..TRIAL_CHUNKS {
            assert_eq!(
                t.push(if i == 1 {
                    1_000_000
                } else {
                    100 + u64::from(i)
                }),
                None
            );
        }
        // 50, 102 to 115 and 1,000,000: the ninth of sixteen.
        assert_eq!(t.push(50), Some(109));
        assert_eq!(t.push(1), None, "full");
    }

    /// Where the work on a chunk is under a third of its copy, no helper starts until the reader
    /// has looked at the map; where the map does not pay, the helper's trial goes on.
    #[test]
    fn little_work_on_a_chunk_looks_at_the_map_before_a_helper() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = reader(&dir);
        for _ in 0..2 * TRIAL_CHUNKS {
            // 30 ns of work, 100 of copy.
            r.time(30, Came::Read { copy: 100 });
        }
        assert!(r.wants_map_first());
        assert!(!r.helper_runs(), "no helper before the look");
        r.helper_after_all();
        assert!(!r.wants_map_first());
        assert!(r.helper_runs(), "the map did not pay: the helper started");
        for _ in 0..TRIAL_CHUNKS {
            r.time(10, Came::Helper);
        }
        assert!(matches!(r.trial, Trial::Kept | Trial::Refused), "decided");
        assert!(!r.helper_refused(), "10 against 130: kept");
    }

    #[test]
    fn the_map_comes_first_only_where_the_work_is_under_a_third_of_the_copy() {
        assert!(map_first(130, 100));
        assert!(map_first(100, 100));
        assert!(!map_first(134, 100));
        assert!(!map_first(200, 100));
    }

    #[test]
    fn the_helper_is_kept_only_where_its_chunks_cost_less_than_reading_alone() {
        assert!(helper_kept(120));
        assert!(!helper_kept(200));
        assert!(!helper_kept(340));
    }
}
