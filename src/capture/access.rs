//! How a regular, uncompressed capture file is read: copied in chunks with `read()`, or
//! walked where it lies through a memory map — and, by default, which of the two costs less
//! for this file as the page cache holds it now.
//!
//! What a map costs is the kernel's mapping of the file's pages, and that depends on how the
//! page cache holds them (sessions 25–27, AMD EPYC, Linux 6.18): a file read from disk sits in
//! large folios, mapped 2 MiB in one fault, and one thread through the map was 1.3–1.4× as
//! quick as through chunks; a file written in 4 KiB writes (what tcpdump or a copy leaves)
//! sits in 4 KiB pages, and the map took 1.5–1.7× as long. So a run on one thread, and one
//! with workers (which then read the frames where they lie instead of copies), looks at a few
//! places of the file before its first frame ([`map_pays`]); the short files of a run
//! (rotated captures) at one place each, the first three deciding for the rest
//! ([`ShortLooks`]). A run of the reading thread and a
//! helper reads in chunks ([`super::chunks`]), which beat the map with its pager in both
//! states ([`Reading`]).

// The look maps the file: only Linux reads through a map.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::fs::File;
use std::time::{Duration, Instant};

use super::samples::Samples;

/// How a regular, uncompressed capture file is read (pipes and gzip are streamed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FileAccess {
    /// In chunks; through the map instead where the run reads alone or for workers
    /// ([`Reading`]) and a look at the file finds its pages map for much less than they copy
    /// ([`map_pays`]).
    #[default]
    Auto,
    /// With `read()` in chunks, into buffers the records are parsed in where they lie; with a
    /// thread to spare, read ahead on it ([`super::CaptureReader::read_ahead`]).
    Chunks,
    /// Through a memory map (Linux; elsewhere, in chunks), the pages mapped ahead by a pager
    /// thread with a thread to spare.
    Map,
}

impl FileAccess {
    /// `SQOS_READ=map`, `SQOS_READ=chunks`, or else [`FileAccess::Auto`].
    pub fn from_env() -> FileAccess {
        match std::env::var_os("SQOS_READ") {
            Some(v) if v == "map" => FileAccess::Map,
            Some(v) if v == "chunks" => FileAccess::Chunks,
            _ => FileAccess::Auto,
        }
    }
}

/// How the threads of a run read a capture ([`super::CaptureReader::read_for`];
/// `PipelineConfig::reading` says which).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// The reading thread does all the work: through the file's map where that pays.
    Alone,
    /// A thread to spare works ahead of the reading thread: a pcap or pcapng file whose map
    /// pays (or that comes from disk) is read through it, the thread indexing its records ahead
    /// (`capture::index`); any other file as [`Reading::AheadInChunks`].
    Ahead,
    /// A helper reads chunks ahead of the reading thread, where its trial finds that pays: the
    /// short files of a run, one open while another has an indexer, and runs that hold
    /// messages back (`PipelineConfig::chunks_ahead`).
    AheadInChunks,
    /// Workers take the per-connection work: through the map where that pays (they read the
    /// frames where they lie), else ahead.
    ForWorkers,
}

/// Whether `map` (of `file`) is cheaper to walk than `file` to copy, from looks at three
/// places ([`places`]): only where all three are in the page cache (a file coming from disk is
/// read in chunks, with the kernel's readahead for `read()`, and nothing of it is read out of
/// turn), and not if the file shrank meanwhile. The pages touched are given back. The copies
/// go into `spare` where it is long enough (a chunk buffer not in use: the pages of a buffer
/// made for the look alone were faulted in for every file of a ring of captures).
///
/// A file too short for three places (a rotated capture of a few MB) is looked at in one
/// place, and `short` gathers those looks over the files of a run: once it holds three, they
/// decide for each file after them that the page cache holds whole (the first files are read
/// in chunks meanwhile).
#[cfg(target_os = "linux")]
pub(crate) fn mapping_pays(
    map: &super::mapped::Map,
    file: &File,
    spare: Option<&mut [u8]>,
    short: &mut ShortLooks,
) -> bool {
    let bytes = map.bytes();
    let (base, len) = (bytes.as_ptr() as usize, bytes.len());
    if let Some(pays) = short.decide(map) {
        return pays;
    }
    let (places, short_file) = match places(base, len) {
        Some(places) => (places.to_vec(), false),
        None => (place(base, len).into_iter().collect(), true),
    };
    if places.is_empty() || !places.iter().all(|&at| map.resident(looked(at))) {
        return false;
    }
    let mut own = Vec::new();
    let buf = match spare.filter(|s| s.len() >= MIN_PIECE) {
        Some(s) => s,
        None => {
            own.resize(SPAN, 0);
            &mut own[..]
        }
    };
    // Written before the timing, so that its pages exist.
    buf.fill(1);
    let mut looks = Vec::with_capacity(3);
    for &at in &places {
        looks.extend(look(bytes, at, file, buf, super::mapped::touch));
        map.forget(looked(at));
    }
    match <[_; 3]>::try_from(looks) {
        Ok(looks) => !map.shrunk() && map_pays(&looks),
        // A long file whose look failed somewhere: no.
        Err(_) if !short_file => false,
        // One place of a short file: it adds its look to the run's, which decide once three.
        Err(looks) => {
            looks.into_iter().for_each(|l| short.add(l));
            let pays = short.verdict() == Some(true);
            pays && map.resident_sampled(0..len) && !map.shrunk()
        }
    }
}

/// Whether `map`'s file comes from disk: a file long enough for a look, none of whose three
/// places is in the page cache.
#[cfg(target_os = "linux")]
pub(crate) fn cold(map: &super::mapped::Map) -> bool {
    let bytes = map.bytes();
    places(bytes.as_ptr() as usize, bytes.len())
        .is_some_and(|places| places.iter().all(|&at| !map.resident(looked(at))))
}

/// Looks at one place each of files too short for [`places`], gathered over the files of a
/// run (rotated captures, read one after the other, which the same writer left in the page
/// cache the same way): three decide as three places of one file do ([`map_pays`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ShortLooks {
    looks: [Look; 3],
    seen: usize,
    trial: MapTrial,
    pending: Option<Pending>,
}

/// Once the looks find that the map pays for a run's short files, the run's next
/// [`TRIAL_FILES`] short files are read through the map and in chunks in turn, each timed from
/// its opening to the next file's (its unmapping counts), and the way whose median time a byte
/// was the less reads the rest. The looks time the map's faults, not what the walk then pays
/// for the file's pages: a ring of 5 MB files read from disk lies in folios of 4–64 KiB (inside
/// readahead's ramp-up), mapped a page at a time, and the walk missed the TLB on each (session
/// 42, AMD EPYC: in chunks 8 % quicker than through the map; on the Intel Xeon of session 39
/// the map was 17 % quicker).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct MapTrial {
    /// Each way's files' times a byte, in picoseconds: through the map (0), in chunks (1).
    ways: [Samples<TRIAL_EACH>; 2],
    /// Files timed so far: their count says whose turn is next.
    files: u8,
}

/// Files a run's trial of the map against the chunks times each way.
const TRIAL_EACH: usize = 6;
/// Short files the trial times in all.
const TRIAL_FILES: u8 = 2 * TRIAL_EACH as u8;

impl MapTrial {
    fn on(&self) -> bool {
        self.files < TRIAL_FILES
    }

    /// Whether the next file goes through the map, the looks having found that it pays: in
    /// turn while the trial is on (the map first), then the way whose median time a byte was
    /// the less (the map where one way has no file: the looks' verdict).
    fn map_next(&self) -> bool {
        if self.on() {
            return self.files % 2 == 0;
        }
        match self.ways.map(|way| way.median()) {
            [Some(map), Some(chunks)] => map <= chunks,
            _ => true,
        }
    }

    fn add(&mut self, mapped: bool, elapsed: Duration, bytes: u64) {
        if !self.on() || bytes == 0 {
            return;
        }
        let pico = elapsed.as_nanos().saturating_mul(1_000) / u128::from(bytes);
        // A way's files past its share (map turns read in chunks) are not counted.
        let _ = self.ways[usize::from(!mapped)].push(u64::try_from(pico).unwrap_or(u64::MAX));
        self.files += 1;
    }
}

/// A short file the trial times, ended: its time runs until the next file opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pending {
    mapped: bool,
    opened: Instant,
    bytes: u64,
}

impl ShortLooks {
    fn add(&mut self, look: Look) {
        if let Some(slot) = self.looks.get_mut(self.seen) {
            *slot = look;
            self.seen += 1;
        }
    }

    /// The later of two states of the run's looks (looks and timed files are only ever
    /// added): a file opened without the run's looks ends with fewer.
    pub(crate) fn later(self, other: ShortLooks) -> ShortLooks {
        // As far on, the one that ended last (it may hold a file's time still running).
        if (other.seen, other.trial.files) >= (self.seen, self.trial.files) {
            other
        } else {
            self
        }
    }

    /// Whether `map` pays, where the run's looks decide for it: a file too short for a look
    /// of its own, once three looks are in, and only where the page cache holds it whole.
    /// `None`: they do not decide (yet).
    #[cfg(target_os = "linux")]
    pub(crate) fn decide(&self, map: &super::mapped::Map) -> Option<bool> {
        let bytes = map.bytes();
        let len = bytes.len();
        if places(bytes.as_ptr() as usize, len).is_some() {
            return None;
        }
        let pays = self.verdict()? && self.trial.map_next();
        Some(pays && map.resident_sampled(0..len) && !map.shrunk())
    }

    /// Whether a short file opened now is timed for the run's trial of the map against the
    /// chunks ([`MapTrial`]): the looks found that the map pays, and the trial is on.
    pub(crate) fn trying(&self) -> bool {
        self.verdict() == Some(true) && self.trial.on()
    }

    /// A file opened at `opened` while [`Self::trying`], read through the map (`mapped`) or in
    /// chunks, `bytes` long, ended: timed until the next file opens ([`Self::next_opened`]).
    /// Long files are not timed: the looks decide for them on their own.
    pub(crate) fn ended(&mut self, mapped: bool, opened: Instant, bytes: u64) {
        self.pending = (bytes > 0 && bytes < LOOK_FROM as u64).then_some(Pending {
            mapped,
            opened,
            bytes,
        });
    }

    /// The run's next file opens `now`: the file that ended before it is timed.
    pub(crate) fn next_opened(&mut self, now: Instant) {
        if let Some(p) = self.pending.take() {
            let elapsed = now.saturating_duration_since(p.opened);
            self.trial.add(p.mapped, elapsed, p.bytes);
        }
    }

    /// Three looks that decide `pays`: a run's after its first three short files.
    #[cfg(test)]
    pub(crate) fn decided(pays: bool) -> ShortLooks {
        let look = if pays {
            Look { map: 5, copy: 20 }
        } else {
            Look { map: 54, copy: 34 }
        };
        // The trial over, the map as quick as the chunks: `pays` decides.
        let mut ways = [Samples::default(); 2];
        for way in &mut ways {
            for _ in 0..TRIAL_EACH {
                let _ = way.push(1);
            }
        }
        let trial = MapTrial {
            ways,
            files: TRIAL_FILES,
        };
        ShortLooks {
            looks: [look; 3],
            seen: 3,
            trial,
            pending: None,
        }
    }

    /// Three looks that found that the map pays, and its trial against the chunks not begun.
    #[cfg(test)]
    pub(crate) fn paying_untried() -> ShortLooks {
        ShortLooks {
            trial: MapTrial::default(),
            ..ShortLooks::decided(true)
        }
    }

    /// Looks gathered so far (three at most).
    #[cfg(test)]
    pub(crate) fn gathered(&self) -> usize {
        self.seen
    }

    /// Whether the map pays, once three looks are in.
    fn verdict(&self) -> Option<bool> {
        (self.seen == self.looks.len()).then(|| map_pays(&self.looks))
    }
}

/// Files smaller than this are read in chunks without a look: the look costs about 0.1 ms,
/// and on a small file there is little to win.
pub(crate) const LOOK_FROM: usize = 32 << 20;
/// Bytes looked at in each place: 512 KiB took 4–5 µs to map where the file lay in large
/// folios, 52–57 µs where it lay in 4 KiB pages, and 20–40 µs to copy.
const SPAN: usize = 512 << 10;
const PAGE: usize = 4096;

/// What one place of the file cost, in nanoseconds: its pages mapped (one byte a page
/// touched), and as many bytes right after it copied with `read()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Look {
    map: u64,
    copy: u64,
}

/// Whether the map pays, from the looks at three places: the median map cost is under half
/// the median copy. Beyond the copy it saves, the map costs the walk more (its pages are not
/// in the cache as a buffer just written is, and more of them miss the TLB): where the look
/// found the map 4–5× cheaper, the whole run was 1.3× quicker, not the 2× the copy alone
/// would give.
fn map_pays(looks: &[Look; 3]) -> bool {
    let median = |f: fn(&Look) -> u64| {
        let mut v = looks.map(|l| f(&l));
        v.sort_unstable();
        v[1]
    };
    median(|l| l.map).saturating_mul(2) < median(|l| l.copy)
}

/// The three places looked at (a quarter, half and three quarters into the file), each at a
/// 2 MiB boundary of the map's addresses, where a large folio maps in one entry. `None`: the
/// file is too short for a look.
fn places(base: usize, len: usize) -> Option<[usize; 3]> {
    const ENTRY: usize = 2 << 20;
    if len < LOOK_FROM.max(4 * (ENTRY + 2 * SPAN)) {
        return None;
    }
    let at = |k: usize| {
        let want = base + len / 4 * k;
        (want & !(ENTRY - 1)).saturating_sub(base)
    };
    Some([at(1), at(2), at(3)])
}

/// The one place looked at in a file too short for [`places`]: the 2 MiB boundary of the
/// map's addresses at or before its middle (or its start), where the look's bytes fit in the
/// file. `None`: too short even for that.
fn place(base: usize, len: usize) -> Option<usize> {
    const ENTRY: usize = 2 << 20;
    let at = ((base + len / 2) & !(ENTRY - 1)).saturating_sub(base);
    (at + 2 * SPAN <= len).then_some(at)
}

/// The shortest buffer a look copies into: [`SPAN`] bytes are copied in pieces of its length.
const MIN_PIECE: usize = 64 << 10;

/// Looks at one place of the file: `bytes` is the whole map, `touch` reads one byte of it
/// (faulting its page in), and `buf` (at least [`MIN_PIECE`] bytes, written to before so that
/// its pages exist before the timing) takes the copy of [`SPAN`] bytes, in as many reads as
/// its length needs. `None` when the copy failed or came short.
fn look(bytes: &[u8], at: usize, file: &File, buf: &mut [u8], touch: fn(&u8)) -> Option<Look> {
    use std::os::unix::fs::FileExt;
    let mapped = bytes.get(at..at + SPAN)?;
    let piece = buf.len().min(SPAN);
    if piece < MIN_PIECE {
        return None;
    }
    let buf = buf.get_mut(..piece)?;
    let start = Instant::now();
    for page in mapped.iter().step_by(PAGE) {
        touch(page);
    }
    let map = nanos(start.elapsed());
    let start = Instant::now();
    let mut copied = 0;
    while copied < SPAN {
        let want = piece.min(SPAN - copied);
        let n = file
            .read_at(buf.get_mut(..want)?, (at + SPAN + copied) as u64)
            .ok()?;
        if n != want {
            return None;
        }
        copied += n;
    }
    let copy = nanos(start.elapsed());
    Some(Look { map, copy })
}

/// The bytes a look at `at` reads: [`SPAN`] mapped, then as many copied.
fn looked(at: usize) -> std::ops::Range<usize> {
    at..at + 2 * SPAN
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn looks(v: [(u64, u64); 3]) -> [Look; 3] {
        v.map(|(map, copy)| Look { map, copy })
    }

    #[test]
    fn the_trial_reads_the_rest_the_way_whose_median_byte_was_quicker() {
        // Each way's files take `pico` a byte; the files differ in length, and one file each
        // way is 10 times slower (a hiccup the median passes over).
        let run = |map_pico: u64, chunk_pico: u64| {
            let mut t = MapTrial::default();
            let mut ways = Vec::new();
            for i in 0..TRIAL_FILES {
                let map = t.map_next();
                ways.push(map);
                let bytes = 1_000_000 + 70_000 * u64::from(i);
                let slow = if i / 2 == u8::from(map) { 10 } else { 1 };
                let pico = slow * if map { map_pico } else { chunk_pico };
                t.add(map, Duration::from_nanos(bytes * pico / 1_000), bytes);
            }
            assert!(!t.on());
            (ways, t.map_next())
        };
        let turns = [true, false].repeat(TRIAL_EACH);
        assert_eq!(run(310, 290), (turns.clone(), false), "in chunks quicker");
        assert_eq!(
            run(290, 310),
            (turns.clone(), true),
            "through the map quicker"
        );
        assert_eq!(
            run(300, 300),
            (turns, true),
            "as quick: the map, as the looks found"
        );
        // A trial whose files all went one way (a map turn whose file was not in the page
        // cache whole is read in chunks) keeps the looks' verdict.
        let mut t = MapTrial::default();
        for _ in 0..TRIAL_FILES {
            t.add(false, Duration::from_millis(1), 1_000);
        }
        assert!(!t.on());
        assert!(t.map_next());
    }

    #[test]
    fn a_short_file_is_timed_from_its_opening_to_the_next_files() {
        let mut looks = ShortLooks::paying_untried();
        assert!(looks.trying());
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        for bytes in [LOOK_FROM as u64, 0] {
            looks.ended(true, t0, bytes);
            looks.next_opened(t0 + ms);
        }
        assert_eq!(
            looks.trial,
            MapTrial::default(),
            "a long file, an empty one"
        );
        looks.ended(false, t0, 1_000_000);
        assert_eq!(
            looks.trial,
            MapTrial::default(),
            "timed when the next one opens"
        );
        // As far on as the looks it was opened with: the later state is the one that ended.
        let before = ShortLooks::paying_untried();
        assert_eq!(before.later(looks), looks);
        looks.next_opened(t0 + 3 * ms);
        let medians = looks.trial.ways.map(|way| way.median());
        assert_eq!((looks.trial.files, medians[0]), (1, None));
        assert_eq!(medians[1], Some(3_000), "3 ms for 1 MB: 3,000 ps a byte");
        for i in 1..TRIAL_FILES {
            looks.ended(i % 2 == 0, t0, 5 << 20);
            looks.next_opened(t0 + ms);
        }
        assert!(!looks.trying());
        // Looks that do not find the map pays try nothing.
        assert!(!ShortLooks::default().trying());
        assert!(!ShortLooks::decided(false).trying());
    }

    #[test]
    fn the_map_is_chosen_only_where_it_costs_under_half_the_copy() {
        // Measured on a file read from disk (large folios), µs for 512 KiB.
        assert!(map_pays(&looks([(5, 20), (4, 24), (4, 22)])));
        // Written in 4 KiB writes.
        assert!(!map_pays(&looks([(54, 71), (57, 41), (54, 34)])));
        // Close: no.
        assert!(!map_pays(&looks([(10, 20), (10, 20), (10, 20)])));
    }

    #[test]
    fn one_slow_place_does_not_decide() {
        assert!(map_pays(&looks([(5, 20), (400, 24), (4, 22)])));
        assert!(!map_pays(&looks([(54, 71), (57, 1000), (54, 34)])));
    }

    /// A look copies [`SPAN`] bytes whatever its buffer's length (in pieces of it), and
    /// needs the file to hold them.
    #[test]
    fn a_look_copies_a_span_in_pieces_of_its_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 2 * SPAN]).unwrap();
        let file = File::open(&path).unwrap();
        let bytes = vec![7u8; 2 * SPAN];
        for len in [MIN_PIECE, MIN_PIECE + 1000, SPAN, 2 * SPAN] {
            let mut buf = vec![1u8; len];
            let l = look(&bytes, 0, &file, &mut buf, |_| ()).expect("a look");
            assert!(l.map > 0 || l.copy > 0, "{len}");
            // The last piece copied ends with the span: the file's bytes are in the buffer.
            assert_eq!(buf[0], 7, "{len}");
        }
        let mut short = vec![1u8; MIN_PIECE - 1];
        assert_eq!(look(&bytes, 0, &file, &mut short, |_| ()), None);
        // The copy of the span after `at` runs past the file's end (its first pieces do
        // not): no look.
        for len in [MIN_PIECE, SPAN] {
            let mut buf = vec![1u8; len];
            assert_eq!(
                look(&bytes, SPAN / 2, &file, &mut buf, |_| ()),
                None,
                "{len}"
            );
        }
    }

    #[test]
    fn three_short_files_decide_for_the_files_after_them() {
        let mut short = ShortLooks::default();
        assert_eq!(short.verdict(), None);
        short.add(Look { map: 5, copy: 20 });
        short.add(Look { map: 400, copy: 24 });
        assert_eq!(short.verdict(), None, "two looks do not decide");
        short.add(Look { map: 4, copy: 22 });
        assert_eq!(short.verdict(), Some(true));
        // A fourth changes nothing: the first three decided.
        short.add(Look { map: 900, copy: 1 });
        assert_eq!(short.verdict(), Some(true));
        let mut slow = ShortLooks::default();
        for l in looks([(54, 71), (57, 41), (54, 34)]) {
            slow.add(l);
        }
        assert_eq!(slow.verdict(), Some(false));
    }

    #[test]
    fn a_short_file_is_looked_at_in_one_place_inside_it() {
        let base = 0x7f00_0000_0000;
        // A rotated capture of 5 MB (`tcpdump -C 5`): at 2 MiB, the boundary before its middle.
        assert_eq!(place(base, 5_000_000), Some(2 << 20));
        // Under 4 MiB the middle's boundary is the start.
        assert_eq!(place(base, 3 << 20), Some(0));
        assert_eq!(place(base, 2 * SPAN), Some(0));
        assert_eq!(place(base, 2 * SPAN - 1), None);
        // A map that starts off a boundary: the place is inside it all the same.
        let off = base + 0x3000;
        let at = place(off, 5_000_000).unwrap();
        assert_eq!((off + at) % (2 << 20), 0);
        assert!(at + 2 * SPAN <= 5_000_000);
    }

    /// `bytes` in a new file, written out and dropped from the page cache: as a file that
    /// comes from disk. In the build's own directory: a file system that drops what it is
    /// asked to (tmpfs keeps it). Removed with the directory given back.
    #[cfg(target_os = "linux")]
    pub(crate) fn from_disk(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let target = concat!(env!("CARGO_MANIFEST_DIR"), "/target");
        std::fs::create_dir_all(target).unwrap();
        let dir = tempfile::tempdir_in(target).unwrap();
        let path = dir.path().join("f.pcap");
        std::fs::write(&path, bytes).unwrap();
        drop_from_cache(&path);
        (dir, path)
    }

    /// Drops the file at `path` from the page cache (written out first).
    #[cfg(target_os = "linux")]
    pub(crate) fn drop_from_cache(path: &std::path::Path) {
        use std::os::fd::AsRawFd;
        let file = File::open(path).unwrap();
        file.sync_all().unwrap();
        // SAFETY: an open descriptor; the advice changes no byte of the file.
        let dropped =
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(dropped, 0);
    }

    /// A file just dropped from the page cache is cold; read once, it is not.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_from_disk_is_cold_and_one_in_the_page_cache_is_not() {
        let (_dir, path) = from_disk(&vec![1u8; 40 << 20]);
        let file = File::open(&path).unwrap();
        let map = super::super::mapped::Map::of(&file).unwrap();
        assert!(cold(&map));
        assert_eq!(std::fs::read(&path).unwrap().len(), 40 << 20);
        assert!(!cold(&map));
        // A file too short for a look is never cold: read in chunks, as before.
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let short = File::open(&path).unwrap();
        assert!(!cold(&super::super::mapped::Map::of(&short).unwrap()));
    }

    /// A short file the page cache holds whole is resident as sampled; a hole where a sample
    /// falls, or at its last page, is found.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_hole_in_the_page_cache_is_found_by_the_sampled_lookup() {
        use std::os::fd::AsRawFd;
        let len = (5 << 20) + 1234;
        let (_dir, path) = from_disk(&vec![1u8; len]);
        let file = File::open(&path).unwrap();
        let map = super::super::mapped::Map::of(&file).unwrap();
        assert!(!map.resident_sampled(0..len));
        let cached = |from: usize| {
            let mut buf = vec![0u8; len];
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf[from..], from as u64)
                .unwrap();
        };
        cached(0);
        assert!(map.resident_sampled(0..len));
        assert!(!map.resident_sampled(len..len));
        let drop = |range: std::ops::Range<usize>| {
            // SAFETY: an open descriptor; the advice changes no byte of the file.
            let done = unsafe {
                libc::posix_fadvise(
                    file.as_raw_fd(),
                    range.start as i64,
                    range.len() as i64,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
            assert_eq!(done, 0);
        };
        // Whole 2 MiB steps: the page cache drops no part of a large folio. The samples from
        // 2 MiB, then the tail with the last page.
        drop((2 << 20)..(4 << 20));
        assert!(!map.resident_sampled(0..len));
        assert!(map.resident_sampled(0..(2 << 20)));
        cached(0);
        drop((4 << 20)..len);
        assert!(!map.resident_sampled(0..len));
        assert!(map.resident_sampled(0..(4 << 20)));
    }

    #[test]
    fn places_are_on_2_mib_boundaries_of_the_map_and_inside_the_file() {
        let base = 0x7f00_0012_3000;
        let len = 100 << 20;
        let p = places(base, len).unwrap();
        for at in p {
            assert_eq!((base + at) % (2 << 20), 0);
            assert!(at + 2 * SPAN <= len);
        }
        assert!(p[0] < p[1] && p[1] < p[2]);
        assert_eq!(places(base, LOOK_FROM - 1), None);
    }
}
