//! A regular capture file read through a memory map instead of `read()` into a buffer: the
//! kernel's copy of every byte was the largest cost of reading a file (issue 14). This is the
//! crate's only `unsafe` code, kept here with its reasoning.
//!
//! Why it is sound:
//! - The map is private and read-only; the bytes are only ever read, as `&[u8]` borrowed from
//!   the [`Map`], which unmaps on drop — so no slice outlives the mapping.
//! - Another process may change the file while it is mapped. Changed bytes are just other input
//!   (the parsers take any bytes). A file that *shrinks* is the danger: touching a page past the
//!   new end raises SIGBUS, which would kill the process. A SIGBUS handler, installed once, looks
//!   the faulting address up among the live maps; inside one, it maps zero-filled pages over the
//!   rest of that map (the access then reads zeros) and notes where the zeros begin. The
//!   capture reader touches the last byte of every packet and then asks whether it lies past
//!   that ([`MapView::cut_at`]), and reports the file cut there, so the zeros are not taken for
//!   data. (Past it, not merely "after a fault": a thread indexing the records ahead may fault
//!   further on first, and the reader's bytes before its fault are still the file's. Only
//!   whole pages fault: bytes between the new end and the end of its page read as zeros
//!   without a fault, so a cut is noticed at the next page boundary.) A fault outside every map restores the previous
//!   handler and returns: the access faults again and gets the behaviour it had without us.
//! - The handler only reads atomics and calls `mmap`/`sigaction` (system calls, safe in a
//!   signal handler on Linux); it allocates nothing and takes no lock.
//!
//! Memory: the pages of a map count in the process's resident size once touched, so pages
//! behind the reader are given back every [`RELEASE_STEP`] bytes (`MADV_DONTNEED`; the file
//! stays in the page cache) and the resident size stays flat whatever the file's size.
//!
//! Paging ahead (`--threads 2` and more): a [`Pager`] thread asks the kernel to map the pages
//! ahead of the reader (`MADV_POPULATE_READ`), which only maps the file's pages and changes no
//! byte; past a shrunk file's end the call fails instead of faulting, and the reader's own touch
//! still finds the cut (the kernel unmaps cut pages from every mapping). It keeps at most
//! [`PAGE_AHEAD`] mapped past the pages given back: a MB or two more resident. Pages the reader
//! passed while the pager was mapping them (the kernel reading them from disk) are given back
//! by the pager.
//!
//! Threads: a [`SharedMap`] hands the map to worker threads (`--threads`), which read frames
//! where they lie instead of a copy. The map lives as long as its last holder. Pages the
//! workers have still to read are kept ([`SharedMap::keep_from`]): given back early, they would
//! be read in again and then never given back.

use std::fs::File;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};

/// Bytes read past before the pages behind the reader are given back: about what they add to
/// the peak RSS. 2 MiB took 2 MB off it against 4 MiB, at no time measured (docs/performance.md).
const RELEASE_STEP: usize = 2 << 20;

/// How far apart [`Map::resident_sampled`] asks the page cache: 22 pages of a 5 MB file.
const RESIDENT_SAMPLE: usize = 256 << 10;
/// Maps alive at once (one per capture being read); past it, files are read, not mapped.
const SLOTS: usize = 64;
/// How far past the pages given back a [`Pager`] keeps the file's pages mapped: the reader
/// reads within the first [`RELEASE_STEP`] of it. Twice the step took the pager's peak RSS to
/// 14.7-18.4 MB on the bench's captures (one thread's 13.4-13.9 with the same binary), one
/// and a half to 13.2-15.4, at the same speed (session 25).
const PAGE_AHEAD: usize = RELEASE_STEP + RELEASE_STEP / 2;

/// One live map, as the SIGBUS handler sees it: its address range (0..0 when free) and the
/// address from which it has been patched with zero pages because the file shrank (`NOT_CUT`:
/// nowhere).
struct Slot {
    used: AtomicBool,
    start: AtomicUsize,
    end: AtomicUsize,
    cut: AtomicUsize,
}

/// A [`Slot`]'s `cut` where its map was never patched.
const NOT_CUT: usize = usize::MAX;

#[allow(clippy::declare_interior_mutable_const)] // only used to initialise the array
const FREE: Slot = Slot {
    used: AtomicBool::new(false),
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    cut: AtomicUsize::new(NOT_CUT),
};
static SLOTS_IN_USE: [Slot; SLOTS] = [FREE; SLOTS];
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// The SIGBUS action before ours (restored for faults that are not ours); set once.
static PREVIOUS: OnceLock<Option<libc::sigaction>> = OnceLock::new();

/// A read-only private map of a whole regular file.
pub(crate) struct Map {
    ptr: *mut libc::c_void,
    len: usize,
    slot: &'static Slot,
    /// Bytes before this offset have been given back to the kernel (only the reader moves it).
    released: AtomicUsize,
    /// Bytes from this offset on are still to be read by other threads: not given back
    /// (`usize::MAX`: no other thread reads the map).
    kept_from: AtomicUsize,
    /// The [`Pager`]'s thread, woken when the reader gives pages back (it has moved on).
    pager: OnceLock<Thread>,
    /// Set by the first [`SharedMap::pager`]: one pager a map.
    pager_started: AtomicBool,
    /// Set when the pager is to end.
    pager_ends: AtomicBool,
    /// How a capture file's records lie, and where the first is: set by the reader, so
    /// that the thread to spare indexes the records ahead instead of paging
    /// ([`super::index`]).
    records: OnceLock<(super::split::RecordLayout, usize)>,
    /// The index that thread fills, once it runs.
    index: OnceLock<super::index::RecordIndex>,
}

// The map is plain memory owned by this value, only ever read; the rest is atomics. Giving
// pages back (`release_before`) does not change what a read sees (see there).
unsafe impl Send for Map {}
unsafe impl Sync for Map {}

impl Map {
    /// Maps `file` when it is a regular, non-empty file; `None` means "read it instead"
    /// (pipes, devices, empty files, a failed map, too many maps at once).
    pub(crate) fn of(file: &File) -> Option<Map> {
        Self::of_first(file, usize::MAX)
    }

    /// [`Map::of`] the first `len` bytes of `file` (all of it if shorter): the map of a part
    /// of the file read on its own, which ends where the part does.
    pub(crate) fn of_first(file: &File, len: usize) -> Option<Map> {
        let meta = file.metadata().ok()?;
        let len = usize::try_from(meta.len()).ok()?.min(len);
        if !meta.file_type().is_file() || len == 0 {
            return None;
        }
        if !install_handler() {
            return None;
        }
        let slot = SLOTS_IN_USE.iter().find(|s| {
            s.used
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })?;
        // SAFETY: a fresh mapping chosen by the kernel (no address given), of a file we hold
        // open; the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            slot.used.store(false, Ordering::Release);
            return None;
        }
        slot.cut.store(NOT_CUT, Ordering::Relaxed);
        slot.end.store(ptr as usize + len, Ordering::Release);
        slot.start.store(ptr as usize, Ordering::Release);
        Some(Map {
            ptr,
            len,
            slot,
            released: AtomicUsize::new(0),
            kept_from: AtomicUsize::new(usize::MAX),
            pager: OnceLock::new(),
            pager_started: AtomicBool::new(false),
            pager_ends: AtomicBool::new(false),
            records: OnceLock::new(),
            index: OnceLock::new(),
        })
    }

    /// The file's bytes as they were when mapped (zeros past the end if it shrank since:
    /// see [`Map::shrunk`]).
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` is mapped readable for as long as `self` lives (the handler
        // keeps it mapped, with zero pages, if the file shrinks), and nothing writes to it.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }

    /// True once a read touched a page past the file's end because the file shrank while
    /// mapped: bytes read since may be zeros instead of the capture.
    pub(crate) fn shrunk(&self) -> bool {
        self.slot.cut.load(Ordering::Acquire) != NOT_CUT
    }

    /// Whether `byte` (of this map) lies where the file shrank under it ([`MapView::cut_at`]).
    pub(crate) fn cut_at(&self, byte: &u8) -> bool {
        self.view().cut_at(byte)
    }

    /// Asks the CPU to bring the cache line of byte `at` into its cache ahead of its use (a
    /// hint: past the end it is ignored, and what it does changes no byte read). A reader of
    /// frames where they lie touches a couple of cache lines a frame, too far apart for the
    /// CPU's own prefetchers to follow: unasked, each frame waited for memory.
    #[inline]
    pub(crate) fn prefetch(&self, at: usize) {
        self.view().prefetch(at)
    }

    /// What a walk over the map reads on every record, loaded once for a run of them (the
    /// map's fields sit behind an `Arc`, whose atomics make the compiler load them anew after
    /// every call it cannot see into).
    #[inline]
    pub(crate) fn view(&self) -> MapView<'_> {
        MapView {
            bytes: self.bytes(),
            cut: &self.slot.cut,
            index: self.index.get(),
        }
    }

    /// The records are a capture file's, laid out as `layout`, the first at `first`: a
    /// thread to spare indexes them ahead of the reader ([`SharedMap::pager`]).
    pub(crate) fn set_records(&self, layout: super::split::RecordLayout, first: usize) {
        let _ = self.records.set((layout, first));
    }

    /// Where the reader last gave pages back: it reads at or past it.
    pub(crate) fn released(&self) -> usize {
        self.released.load(Ordering::Acquire)
    }

    /// The reader has moved on to `offset`: give the pages before it back (every
    /// [`RELEASE_STEP`] bytes, and not those other threads have still to read), so that
    /// resident memory does not grow with the file.
    #[inline]
    pub(crate) fn release_before(&self, offset: usize) {
        let offset = offset.min(self.kept_from.load(Ordering::Acquire));
        let released = self.released.load(Ordering::Relaxed);
        // Called for every record: the usual answer, "not yet", without a call.
        if offset < released + RELEASE_STEP {
            return;
        }
        self.release(offset, released);
    }

    /// The least offset at which `release_before` gives pages back (it may give none there
    /// when other threads still read them).
    #[inline]
    pub(crate) fn next_release(&self) -> usize {
        self.released.load(Ordering::Relaxed) + RELEASE_STEP
    }

    /// True when every page of `range` is in the page cache (`mincore`): touching them
    /// waits for no disk.
    pub(crate) fn resident(&self, range: Range<usize>) -> bool {
        let page = PAGE.load(Ordering::Relaxed);
        let (start, end) = (range.start / page * page, range.end.min(self.len));
        if start >= end {
            return false;
        }
        let mut pages = vec![0u8; (end - start).div_ceil(page)];
        // SAFETY: a page-aligned range inside our own map, and a vector of one byte per page
        // for the kernel to fill.
        let ok = unsafe {
            libc::mincore(
                (self.ptr as *mut u8).add(start) as *mut libc::c_void,
                end - start,
                pages.as_mut_ptr(),
            )
        } == 0;
        ok && pages.iter().all(|p| p & 1 == 1)
    }

    /// True when the page cache holds `range` throughout, as far as one page in every
    /// [`RESIDENT_SAMPLE`] bytes and the last page tell: a file from disk, or read from it in
    /// part, shows its holes there. Whole ranges of files looked up page by page cost 68 ns a
    /// page: 9 % of a one-thread run of 100 rotated 5 MB files (perf, session 41).
    pub(crate) fn resident_sampled(&self, range: Range<usize>) -> bool {
        let page = PAGE.load(Ordering::Relaxed);
        let end = range.end.min(self.len);
        if range.start >= end {
            return false;
        }
        let last = (end - 1) / page * page;
        (range.start..end)
            .step_by(RESIDENT_SAMPLE)
            .chain(std::iter::once(last))
            .all(|at| self.resident(at..at + 1))
    }

    /// Gives back the pages of `range` and the rest of the [`RELEASE_STEP`] (2 MiB) of the
    /// address space it starts in: touched for a look ahead of the reader, they would stay
    /// resident until it gets there.
    pub(crate) fn forget(&self, range: Range<usize>) {
        let base = self.ptr as usize;
        let start = ((base + range.start) & !(RELEASE_STEP - 1)).max(base) - base;
        let end = (((base + range.end).next_multiple_of(RELEASE_STEP)) - base).min(self.len);
        if start >= end {
            return;
        }
        self.give_back(start..end);
    }

    /// Gives back the pages from the [`RELEASE_STEP`] that `from` is in up to where the reader
    /// last gave pages back: another thread walked them after the reader had
    /// (`capture::index`), and mapped them again. From the step's start, not `from`'s page:
    /// the kernel maps the pages around a touch too (up to 64 KiB of small folios, a large
    /// folio's whole step).
    pub(crate) fn give_back_behind(&self, from: usize) {
        let base = self.ptr as usize;
        let released = self.released();
        let start = ((base + from) & !(RELEASE_STEP - 1)).max(base) - base;
        if start < released {
            self.give_back(start..released);
        }
    }

    /// The offset of the first [`RELEASE_STEP`] boundary of the address space after `at`.
    pub(crate) fn step_after(&self, at: usize) -> usize {
        let base = self.ptr as usize;
        ((base + at + 1).next_multiple_of(RELEASE_STEP) - base).min(self.len)
    }

    /// Unmaps the pages of `range` (page-aligned start, inside the map): the file stays in the
    /// page cache, and a later touch maps its pages again (or zeros, past a shrunk end).
    fn give_back(&self, range: Range<usize>) {
        let page = PAGE.load(Ordering::Relaxed);
        if range.start % page != 0 || range.start >= range.end || range.end > self.len {
            return;
        }
        // SAFETY: a page-aligned range inside our own private read-only map; after
        // MADV_DONTNEED the pages read back from the file (or zeros) when touched again, so
        // nothing borrowed from `bytes()` becomes invalid.
        unsafe {
            libc::madvise(
                (self.ptr as *mut u8).add(range.start) as *mut libc::c_void,
                range.end - range.start,
                libc::MADV_DONTNEED,
            );
        }
    }

    /// `release_before`'s work: the pages from `released` up to the last `RELEASE_STEP`
    /// boundary (in the address space) at or before `offset`.
    fn release(&self, offset: usize, released: usize) {
        // Up to a multiple of `RELEASE_STEP` in the address space, not just a page: where the
        // kernel maps a large page-cache folio in one 2 MiB entry, giving back part of it unmaps
        // all of it (the reader then faults its pages in again), and a pager's ranges, which
        // follow these, keep to whole entries too (with page-aligned steps the pager's peak
        // RSS reached 19-23 MB on the bench's 16-connection capture; one thread's, 12 MB).
        let base = self.ptr as usize;
        let upto = ((base + offset.min(self.len)) & !(RELEASE_STEP - 1)).saturating_sub(base);
        if upto <= released {
            return;
        }
        // Said before the pages are given back, not after: a thread that maps some of them
        // again after they are given back (the pager, the indexer) then sees that the reader
        // passed them when it looks next, and gives them back itself. Said after, it could
        // look in between and keep them mapped for good (2 MiB each time, measured).
        self.released.store(upto, Ordering::Release);
        self.give_back(released..upto);
        if let Some(pager) = self.pager.get() {
            pager.unpark();
        }
    }
}

/// A [`Map`] as a walk over its records uses it: its bytes and where a shrunk file's zeros begin.
#[derive(Clone, Copy)]
pub(crate) struct MapView<'m> {
    pub(crate) bytes: &'m [u8],
    cut: &'m AtomicUsize,
    /// Where the next records begin, where a thread indexes them ahead.
    pub(crate) index: Option<&'m super::index::RecordIndex>,
}

/// The cut of a buffer that is no map: it never shrinks under its reader.
static NEVER_CUT: AtomicUsize = AtomicUsize::new(NOT_CUT);

impl<'m> MapView<'m> {
    /// A stream's buffer, walked as a map is.
    pub(crate) fn of_buffer(bytes: &'m [u8]) -> MapView<'m> {
        MapView {
            bytes,
            cut: &NEVER_CUT,
            index: None,
        }
    }

    /// The bytes from `pos` on (none past the end).
    #[inline]
    pub(crate) fn from(self, pos: usize) -> MapView<'m> {
        MapView {
            bytes: self.bytes.get(pos..).unwrap_or_default(),
            cut: self.cut,
            index: self.index,
        }
    }

    /// Whether `byte` (of the map) lies where the file shrank under the map, and reads as a zero
    /// the handler put there instead of the capture. Asked of a record's last byte after it was
    /// touched: where another thread (the indexer) faulted first further on, the bytes before
    /// its fault are still the file's.
    #[inline]
    pub(crate) fn cut_at(&self, byte: &u8) -> bool {
        byte as *const u8 as usize >= self.cut.load(Ordering::Acquire)
    }

    /// The address of byte `at` (or past the end: only computed, for [`prefetch_address`]).
    #[inline]
    pub(crate) fn address(&self, at: usize) -> usize {
        self.bytes.as_ptr().wrapping_add(at) as usize
    }

    /// A stream's buffer, not a map: its bytes were just copied in by `read()`, so they are in
    /// the cache already.
    #[inline]
    pub(crate) fn is_buffer(&self) -> bool {
        std::ptr::eq(self.cut, &NEVER_CUT)
    }

    /// See [`Map::prefetch`]. Not bounds-checked (two instructions on every call of a frame's
    /// walk): the address is only computed, never dereferenced.
    #[inline]
    pub(crate) fn prefetch(&self, at: usize) {
        prefetch_address::<TO_L1>(self.address(at));
    }
}

/// Which caches a prefetch fills: the hint's value as x86's `_mm_prefetch` takes it.
pub(crate) const TO_L1: i32 = 3; // _MM_HINT_T0
/// The second-level cache (and below) only.
pub(crate) const TO_L2: i32 = 2; // _MM_HINT_T1
#[cfg(target_arch = "x86_64")]
const _: () =
    assert!(TO_L1 == std::arch::x86_64::_MM_HINT_T0 && TO_L2 == std::arch::x86_64::_MM_HINT_T1);

/// Asks the CPU for the cache line at `address`, which need not be mapped, into the caches
/// `TO` says ([`TO_L1`], [`TO_L2`]).
#[inline(always)]
pub(crate) fn prefetch_address<const TO: i32>(address: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing into the program and cannot fault, wherever it points.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<TO>(address as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Reads `byte` for the read's sake: a byte of a map past the end of a file that shrank
/// faults there, which sets the map's `shrunk` flag (its value is not wanted; `black_box`
/// kept the read too, but through a store to the stack on every record).
#[inline]
pub(crate) fn touch(byte: &u8) {
    // SAFETY: a reference's byte, read as it is.
    unsafe { std::ptr::read_volatile(byte) };
}

/// A capture file's memory map, shared by the reader with the threads that read its frames
/// where they lie (`--threads`): no frame is copied to reach them.
#[derive(Clone)]
pub struct SharedMap(Arc<Map>);

impl SharedMap {
    pub(crate) fn new(map: Map) -> Self {
        SharedMap(Arc::new(map))
    }

    pub(crate) fn map(&self) -> &Map {
        &self.0
    }

    /// See [`Map::prefetch`]: a worker brings the lines of the frames it reads next.
    #[inline]
    pub(crate) fn prefetch(&self, at: usize) {
        self.0.prefetch(at)
    }

    /// The file's bytes (see [`Map::bytes`]).
    pub(crate) fn bytes(&self) -> &[u8] {
        self.0.bytes()
    }

    /// Where `data` lies in the map, if it is a slice of it (a frame the reader handed out).
    pub(crate) fn range_of(&self, data: &[u8]) -> Option<Range<usize>> {
        let start = (data.as_ptr() as usize).checked_sub(self.0.ptr as usize)?;
        let end = start.checked_add(data.len())?;
        (end <= self.0.len).then_some(start..end)
    }

    /// Other threads have still to read the bytes from `offset` on: the reader keeps their
    /// pages. `usize::MAX`: they read nothing more.
    pub(crate) fn keep_from(&self, offset: usize) {
        self.0.kept_from.store(offset, Ordering::Release);
    }

    /// How many record places the thread to spare has put in its index so far (none where it
    /// pages instead, [`SharedMap::pager`]): for tests.
    #[doc(hidden)]
    pub fn records_indexed(&self) -> usize {
        self.0.index.get().map_or(0, |i| i.written())
    }

    /// A thread that maps the file's pages ahead of the reader, so that the reader does not
    /// stop at a page fault every 16 pages: the kernel's mapping of the file was a sixth of a
    /// one-thread run, and on a second core it is done beside the reading. Where the reader
    /// said how a capture file's records lie (`Map::set_records`), the thread indexes them
    /// ahead instead, which maps the pages as it goes (`capture::index`), and pages ahead only
    /// where it stopped. `None`: a pager runs already, or no thread could be started.
    pub fn pager(&self) -> Option<Pager> {
        if self.0.pager_started.swap(true, Ordering::AcqRel) {
            return None;
        }
        self.own_pager()
    }

    /// [`SharedMap::pager`] on a thread of the map's own, once the pager is claimed.
    fn own_pager(&self) -> Option<Pager> {
        let map = self.clone();
        let name = if self.indexes() {
            "sqos-indexer"
        } else {
            "sqos-pager"
        };
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                map.work_ahead();
            })
            .ok()?;
        // Woken from here on; until then it maps the first pages unasked.
        let _ = self.0.pager.set(thread.thread().clone());
        Some(Pager {
            map: self.clone(),
            thread: Some(thread),
        })
    }

    /// [`SharedMap::pager`] on `spare`, a thread kept over the files of a run, instead of a
    /// thread of the map's own (as [`SharedMap::pager`], where the thread is still busy with
    /// another file's work). `None`: a pager runs already.
    pub(crate) fn pager_on(&self, spare: &super::spare::Spare) -> Option<Pager> {
        if self.0.pager_started.swap(true, Ordering::AcqRel) {
            return None;
        }
        self.indexes();
        let map = self.clone();
        if spare.run(Box::new(move || map.work_ahead())).is_err() {
            return self.own_pager();
        }
        let _ = self.0.pager.set(spare.thread().clone());
        Some(Pager {
            map: self.clone(),
            thread: None,
        })
    }

    /// True where the thread to spare is to index the records ahead (the reader said how a
    /// capture file's records lie), the index made then; else it pages ahead.
    fn indexes(&self) -> bool {
        let indexes = self.0.records.get().is_some();
        if indexes {
            self.0.index.get_or_init(super::index::RecordIndex::new);
        }
        indexes
    }

    /// The thread to spare's work on this map, until its reader's [`Pager`] drops: the
    /// records indexed ahead where the reader said how they lie (which maps their pages too),
    /// then, where that stopped before the end (a record that is not sane), the pages mapped
    /// ahead; without records, the pages mapped ahead.
    pub(crate) fn work_ahead(&self) {
        let m = self.map();
        if let (Some(&(layout, first)), Some(index)) = (m.records.get(), m.index.get()) {
            let ends = || m.pager_ends.load(Ordering::Acquire);
            if super::index::index_ahead(m, index, layout, first, &ends) {
                return;
            }
        }
        page_ahead(m);
    }
}

/// See [`SharedMap::pager`]: the thread's work on the map ends when this value drops (a thread
/// of the map's own ends then; one kept over a run goes on to the next file).
pub struct Pager {
    map: SharedMap,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Pager {
    fn drop(&mut self) {
        self.map.0.pager_ends.store(true, Ordering::Release);
        if let Some(thread) = self.map.0.pager.get() {
            thread.unpark();
        }
        // A thread kept over a run's files leaves the map on its own, and drops it then.
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The pager's loop: keeps `released..released + PAGE_AHEAD` mapped, parked in between.
fn page_ahead(map: &Map) {
    let page = PAGE.load(Ordering::Relaxed);
    let mut mapped = 0;
    while !map.pager_ends.load(Ordering::Acquire) {
        let released = map.released.load(Ordering::Acquire);
        let from = mapped.max(released);
        let upto = released
            .saturating_add(PAGE_AHEAD)
            .min(map.len)
            .div_ceil(page)
            * page;
        if from < upto {
            // SAFETY: a page-aligned range inside the map, which `map` keeps alive; populating
            // maps the file's pages and changes no byte. Past a shrunk file's end it fails
            // (no signal), and the reader's own touch finds the cut.
            unsafe {
                libc::madvise(
                    (map.ptr as *mut u8).add(from) as *mut libc::c_void,
                    upto - from,
                    libc::MADV_POPULATE_READ,
                );
            }
            mapped = upto;
            // The reader may have passed some of these pages while they were being mapped
            // (the kernel reading them from disk) and given them back: mapped again after
            // that, nothing would give them back until the map is dropped.
            let passed = map.released.load(Ordering::Acquire).min(upto);
            if passed > from {
                // Pages the reader has given back already (it never reads behind `released`):
                // unmapping them again is what the reader did.
                map.give_back(from..passed);
            }
        } else if upto >= map.len {
            return;
        } else {
            std::thread::park();
        }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // Unregister first: a fault in this range from now on is not ours (and cannot happen:
        // nothing borrows the map any more).
        self.slot.start.store(0, Ordering::Release);
        self.slot.end.store(0, Ordering::Release);
        // SAFETY: the range is the mapping made in `of`, and no slice of it outlives `self`.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
        self.slot.used.store(false, Ordering::Release);
    }
}

/// Installs the SIGBUS handler once. False if it could not be (then files are read instead).
fn install_handler() -> bool {
    PREVIOUS
        .get_or_init(|| {
            // SAFETY: sysconf and sigaction with valid arguments; the handler is an
            // `extern "C"` function with the SA_SIGINFO signature.
            unsafe {
                let page = libc::sysconf(libc::_SC_PAGESIZE);
                if page > 0 {
                    PAGE.store(page as usize, Ordering::Relaxed);
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_sigbus as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let mut previous: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, &action, &mut previous) == 0 {
                    Some(previous)
                } else {
                    None
                }
            }
        })
        .is_some()
}

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for slot in &SLOTS_IN_USE {
        let start = slot.start.load(Ordering::Acquire);
        let end = slot.end.load(Ordering::Acquire);
        if start == 0 || addr < start || addr >= end {
            continue;
        }
        let from = addr / page * page;
        // SAFETY: replaces, in place, the rest of a map this module owns (`from..end` lies
        // inside it) with private zero pages, so the faulting read and every later one succeed.
        let patched = unsafe {
            libc::mmap(
                from as *mut libc::c_void,
                end - from,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if patched != libc::MAP_FAILED {
            slot.cut.fetch_min(from, Ordering::AcqRel);
            return;
        }
        break;
    }
    // Not ours (or the patch failed): the fault repeats under the previous action.
    if let Some(Some(previous)) = PREVIOUS.get() {
        // SAFETY: restoring the action the kernel gave us.
        unsafe {
            libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut());
        }
    }
}
