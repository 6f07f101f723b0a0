//! Where a mapped capture file's next records begin (a legacy pcap file's records, a pcapng
//! file's blocks), found ahead of the reading thread by
//! a thread of its own, so that the reading thread asks for exactly the lines it will read.
//!
//! A record begins where the last one's length says, so one core's walk is a chain of loads,
//! each waiting for the one before (README, Performance, session 39): the walk alone took 40–44
//! ms on the bench's 541 MB of small I/Os, and a one-thread run 55–58, however its lines were
//! asked for ahead (`capture::ahead`'s guesses miss where frames of many lengths mix). Knowing
//! every record's place in advance, the same run took 39 ms.
//!
//! So with a second core (`--threads 2`, the map's [`super::Pager`] slot), an indexer walks the
//! stretch of the file ahead of the reader — cut into [`CHAINS`] parts at guessed record starts
//! (`split::record_start`), walked all at once so that their loads overlap — and puts the
//! records' addresses, in order, in a ring the reading thread reads from ([`RecordIndex::ask`]).
//! A part's walk that does not end exactly where the next part starts shows that the next
//! guess was wrong: only the parts before it are published, and the next stretch starts at the
//! true record start. The index is only ever a hint: a wrong entry costs a useless request,
//! never a wrong frame (the reader walks and checks every record itself).
//!
//! It walks one step of the address space (2 MiB, where the reader gives pages back) at a
//! time, and never past the step after the reader's: the pages it touches are the reader's
//! next ones, mapped for it (as the pager maps them), and count in the resident size only until
//! the reader gives them back. Further ahead was quicker only past the resident bound (below).
//! Where the reader passes it (the thread started late: on this VM a new thread's core often
//! wakes milliseconds later), it starts again from a guessed record start in the step after the
//! reader's, and gives back what it walked behind the reader. At a record that is not sane (the
//! end of what it can read, a damaged file, a file that shrank: zeros) it stops: the reader asks
//! for its lines its usual way, and the thread maps the pages ahead as the pager does.
//!
//! Measured on the bench's 541 MB of small I/Os in the page cache, `--threads 2`, `inturn.sh
//! 5` (session 40): 38.5–40.4 ms against 54.6–55.7 with the chunk reader's helper, peak RSS
//! 13.8–15.0 MB. Up to three steps ahead: 39.2 ms, 16.5 MB; eight, the pages it walked given
//! back behind it (the reader maps them again): 43–44 ms, 16.2–16.9 MB; eight, not given back:
//! 36–37 ms, 29–31 MB. Napping at once instead of spinning first: 41–55 ms.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::mapped::{prefetch_address, Map, TO_L1};
use super::split::{record_start, RecordLayout};

/// Record addresses the ring holds (a power of two): the indexer waits when the reader has
/// not taken the oldest.
const RING: usize = 1 << 14;
/// Parts a stretch is cut into, walked at once: a C walk of the small I/Os took 47–52 ms with
/// one chain, 24 with 4 and 16 with 8.
const CHAINS: usize = 8;
/// Entries made known to the other side at a time.
const PUBLISH: usize = 64;
/// How long the indexer spins waiting for the reader before it naps, and how long it naps at a
/// time ([`Waiting`]).
const SPIN: Duration = Duration::from_millis(1);
const NAP: Duration = Duration::from_millis(1);
/// How many records ahead of the one it walks the reader asks for: 12 took the run on small
/// I/Os to 39 ms with the whole index known.
const ASK_AHEAD: usize = 12;
/// Entries the reader skips, at most, looking for the next record's (records it read another
/// way); past them it asks its usual way and looks again at the next record.
const SKIP_MOST: usize = 64;

/// The ring of record addresses an indexer fills and the reading thread takes from.
pub(crate) struct RecordIndex {
    ring: Box<[AtomicUsize]>,
    /// Entries put in the ring so far (entry `n` lies in slot `n % RING`).
    written: AtomicUsize,
    /// Entries the reader is past: the indexer may fill their slots again.
    read: AtomicUsize,
}

impl RecordIndex {
    pub(crate) fn new() -> RecordIndex {
        RecordIndex {
            ring: (0..RING).map(|_| AtomicUsize::new(0)).collect(),
            written: AtomicUsize::new(0),
            read: AtomicUsize::new(0),
        }
    }

    /// Entries put in the ring so far.
    pub(crate) fn written(&self) -> usize {
        self.written.load(Ordering::Acquire)
    }

    /// The reader walked to the record at address `next`: asks for the lines of the record
    /// [`ASK_AHEAD`] after it, as the index has it, and moves `cursor` (the reader's place in
    /// the index) past it. False where the index does not have `next` (not yet, or the reader
    /// came by another way): the reader asks its usual way.
    #[inline]
    pub(crate) fn ask(&self, cursor: &mut usize, next: usize) -> bool {
        let written = self.written.load(Ordering::Acquire);
        let from = *cursor;
        let mut at = from;
        let last = at.saturating_add(SKIP_MOST).min(written);
        let mut found = false;
        while at < last {
            let a = self.ring[at % RING].load(Ordering::Relaxed);
            if a == next {
                found = true;
                if let Some(ahead) = at.checked_add(ASK_AHEAD).filter(|&a| a < written) {
                    let a = self.ring[ahead % RING].load(Ordering::Relaxed);
                    prefetch_address::<TO_L1>(a);
                    prefetch_address::<TO_L1>(a.wrapping_add(64));
                }
                at += 1;
                break;
            }
            if a > next {
                // Records the reader has not reached (the indexer started again further on).
                break;
            }
            // A record the reader passed without asking here.
            at += 1;
        }
        *cursor = at;
        // Told now and then, not at every record: the indexer reads it only when the ring
        // looks full, and a line written by both cores at every record would go back and forth
        // between them. Told whether or not the record was found: entries skipped are taken.
        if at / PUBLISH != from / PUBLISH {
            self.read.store(at, Ordering::Release);
        }
        found
    }

    /// Puts the records at `offsets` of `base` in the ring, in order, waiting while the reader
    /// has not taken the slots' last entries; made known [`PUBLISH`] at a time. False when the
    /// indexer is to end meanwhile.
    fn put(
        &self,
        base: usize,
        offsets: &[usize],
        ends: &dyn Fn() -> bool,
        waiting: &mut Waiting,
    ) -> bool {
        let mut n = self.written.load(Ordering::Relaxed);
        let mut room = 0;
        for &offset in offsets {
            while room == 0 {
                // The reader tells where it is only now and then: a margin of PUBLISH.
                let read = self.read.load(Ordering::Acquire);
                room = (read + RING).saturating_sub(n + PUBLISH);
                if room == 0 {
                    self.written.store(n, Ordering::Release);
                    if ends() {
                        return false;
                    }
                    waiting.wait();
                }
            }
            waiting.moved();
            self.ring[n % RING].store(base + offset, Ordering::Relaxed);
            n += 1;
            room -= 1;
            if n % PUBLISH == 0 {
                self.written.store(n, Ordering::Release);
            }
        }
        self.written.store(n, Ordering::Release);
        true
    }
}

/// The indexer's loop over `map` (a capture file laid out as `layout`, its first record at
/// `first`): step after step, each as soon as the reader is in the step before it, until the
/// end, a record that is not sane, or `ends()`. True when it indexed the records to the end
/// (or `ends()`): nothing is left to map ahead.
pub(crate) fn index_ahead(
    map: &Map,
    index: &RecordIndex,
    layout: RecordLayout,
    first: usize,
    ends: &dyn Fn() -> bool,
) -> bool {
    let bytes = map.bytes();
    let base = bytes.as_ptr() as usize;
    let mut waiting = Waiting::default();
    let mut parts: Vec<Vec<usize>> = (0..CHAINS).map(|_| Vec::new()).collect();
    let mut at = first;
    while at < bytes.len() && !ends() {
        let released = map.released();
        if at < released {
            // The reader passed it: on from a record start in the step after the reader's.
            let from = map.step_after(released);
            let start = record_start(bytes, from, layout);
            // The reader may have passed those pages too meanwhile.
            map.give_back_behind(from);
            match start {
                Some(start) => at = start,
                None => return false,
            }
            continue;
        }
        let end = map.step_after(at);
        if end > map.step_after(map.step_after(released)) {
            waiting.wait();
            continue;
        }
        waiting.moved();
        let next = index_stretch(bytes, at, end, layout, &mut parts);
        for part in &parts {
            if !index.put(base, part, ends, &mut waiting) {
                return true;
            }
        }
        // Pages the reader gave back before this walk touched them again: nothing else gives
        // them back.
        map.give_back_behind(at);
        match next {
            Some(next) => at = next,
            None => return false,
        }
    }
    true
}

/// How the indexer waits for the reader to move on: it spins for [`SPIN`], then naps for
/// [`NAP`] at a time (or until the reader wakes it, giving pages back). Napping at once was
/// slower and uneven (41–55 ms against 38.5–39.3 on small I/Os): on this VM a napping thread's
/// core often wakes late. Spinning for ever would keep a core busy while the reader waits for
/// a reader of its own output (`sqos dissect | less`).
#[derive(Default)]
pub(crate) struct Waiting {
    since: Option<Instant>,
}

impl Waiting {
    pub(crate) fn wait(&mut self) {
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() < SPIN {
            std::hint::spin_loop();
            std::thread::yield_now();
        } else {
            std::thread::park_timeout(NAP);
        }
    }

    /// The reader moved on: the next wait spins again.
    pub(crate) fn moved(&mut self) {
        self.since = None;
    }
}

/// Walks `bytes[at..end]` (`at` a record start) in [`CHAINS`] parts at once, into `parts`
/// (record offsets, in order over the parts; only the parts found right are left). Returns
/// where the next stretch starts (the first record past `end`, or where a wrong guess was
/// found out); `None` at a record that is not sane (the records before it kept).
fn index_stretch(
    bytes: &[u8],
    at: usize,
    end: usize,
    layout: RecordLayout,
    parts: &mut [Vec<usize>],
) -> Option<usize> {
    let mut starts = [0usize; CHAINS];
    starts[0] = at;
    let mut n = 1;
    for k in 1..CHAINS {
        let from = at + (end - at) * k / CHAINS;
        let guess = record_start(bytes.get(..end)?, from, layout);
        if let Some(g) = guess.filter(|&g| g > starts[n - 1] && g < end) {
            starts[n] = g;
            n += 1;
        }
    }
    // Each part ends where the next one starts, the last at `end`.
    let mut limits = [end; CHAINS];
    limits[..n - 1].copy_from_slice(&starts[1..n]);
    let mut pos = starts;
    let mut broken = [false; CHAINS];
    parts.iter_mut().for_each(Vec::clear);
    let mut walking = n;
    while walking > 0 {
        walking = 0;
        for k in 0..n {
            if broken[k] || pos[k] >= limits[k] {
                continue;
            }
            match layout.record_len(bytes, pos[k]) {
                Some(len) => {
                    parts[k].push(pos[k]);
                    pos[k] += len;
                    walking += 1;
                }
                None => broken[k] = true,
            }
        }
    }
    // A part is right when the one before it ended exactly at its start.
    // Part k is reached only when part k - 1 ended at its start, so its start is a record's,
    // and a record in it that is not sane is the file's.
    for k in 0..n {
        if broken[k] {
            parts[k + 1..].iter_mut().for_each(Vec::clear);
            return None;
        }
        if k + 1 < n && pos[k] != starts[k + 1] {
            parts[k + 1..].iter_mut().for_each(Vec::clear);
            return Some(pos[k]);
        }
    }
    Some(pos[n - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::split::tests::{capture, LAYOUT};
    use crate::capture::{PcapWriter, Timestamp};

    /// The record offsets `index_stretch` found, in order.
    fn found(parts: &[Vec<usize>]) -> Vec<usize> {
        parts.iter().flatten().copied().collect()
    }

    /// Walks `stretch` of `bytes` in parts: the records of `starts` in it are found in order,
    /// and the walk ends at the first record past it (or the file's end). Returns how many
    /// parts found records.
    fn walks_in_order(
        bytes: &[u8],
        starts: &[usize],
        stretch: std::ops::Range<usize>,
        layout: RecordLayout,
        parts: &mut [Vec<usize>],
    ) -> usize {
        let (at, end) = (stretch.start, stretch.end);
        let next = index_stretch(bytes, at, end, layout, parts);
        let want: Vec<usize> = starts
            .iter()
            .copied()
            .filter(|s| stretch.contains(s))
            .collect();
        assert_eq!(found(parts), want, "{stretch:?}, {layout:?}");
        let after = starts.iter().copied().find(|&s| s >= end);
        assert_eq!(next, Some(after.unwrap_or(bytes.len())), "{stretch:?}");
        parts.iter().filter(|p| !p.is_empty()).count()
    }

    #[test]
    fn a_stretch_walked_in_parts_finds_every_record_in_order() {
        let (bytes, starts) = capture(3_000);
        let mut parts: Vec<Vec<usize>> = (0..CHAINS).map(|_| Vec::new()).collect();
        // The whole file, and stretches starting at records, ending anywhere.
        for (at, end) in [
            (24, bytes.len()),
            (starts[100], 700_000),
            (starts[7], 20_000),
        ] {
            let walked = walks_in_order(&bytes, &starts, at..end, LAYOUT, &mut parts);
            assert!(
                walked > 4 || end - at < 100_000,
                "{at}..{end}: {walked} parts"
            );
        }
    }

    /// A pcapng file's blocks (packets, headers, custom blocks) are found in order too, in
    /// either byte order.
    #[test]
    fn a_pcapng_stretch_walked_in_parts_finds_every_block_in_order() {
        use crate::capture::split::tests::capture_ng;
        use crate::capture::split::RecordKind;
        let mut parts: Vec<Vec<usize>> = (0..CHAINS).map(|_| Vec::new()).collect();
        for big_endian in [false, true] {
            let (bytes, starts) = capture_ng(3_000, big_endian);
            let layout = RecordLayout {
                big_endian,
                kind: RecordKind::PcapNg,
            };
            for (at, end) in [(0, bytes.len()), (starts[100], 700_000)] {
                let walked = walks_in_order(&bytes, &starts, at..end, layout, &mut parts);
                assert!(walked > 4, "{at}..{end}, big endian {big_endian}");
            }
        }
    }

    /// A frame whose payload holds records of its own fools every guess inside it: only the
    /// records before them are kept, and the next stretch starts after the frame.
    #[test]
    fn a_part_started_at_a_wrong_guess_is_dropped() {
        let mut inner = PcapWriter::new(Vec::new(), 1).unwrap();
        for i in 0..60 {
            inner
                .write_packet(Timestamp(i * 1_000), &[7u8; 100])
                .unwrap();
        }
        let inner = inner.into_inner()[24..].to_vec();
        let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
        w.write_packet(Timestamp(0), &[1u8; 60]).unwrap();
        w.write_packet(Timestamp(1), &inner).unwrap();
        for i in 0..3 {
            w.write_packet(Timestamp(2 + i), &[2u8; 60]).unwrap();
        }
        let bytes = w.into_inner();
        let big = 24 + 16 + 60;
        let mut parts: Vec<Vec<usize>> = (0..CHAINS).map(|_| Vec::new()).collect();
        let next = index_stretch(&bytes, 24, bytes.len(), LAYOUT, &mut parts);
        assert_eq!(found(&parts), vec![24, big]);
        assert_eq!(next, Some(big + 16 + inner.len()));
    }

    #[test]
    fn the_reader_takes_the_records_in_order_and_skips_those_it_passed() {
        let index = RecordIndex::new();
        let offsets: Vec<usize> = (0..1_000).map(|i| i * 100).collect();
        assert!(index.put(1 << 20, &offsets, &|| false, &mut Waiting::default()));
        let mut cursor = 0;
        assert!(index.ask(&mut cursor, 1 << 20));
        assert!(index.ask(&mut cursor, (1 << 20) + 100));
        // Ahead of the reader: not there yet, nothing taken.
        assert!(!index.ask(&mut cursor, (1 << 20) + 150));
        assert_eq!(cursor, 2);
        // Ten records passed another way: skipped.
        assert!(index.ask(&mut cursor, (1 << 20) + 1_200));
        assert_eq!(cursor, 13);
        // Told only as the reader passes a multiple of PUBLISH.
        assert_eq!(index.read.load(Ordering::Relaxed), 0);
        assert!(index.ask(&mut cursor, (1 << 20) + 6_400));
        assert_eq!(cursor, PUBLISH + 1);
        assert_eq!(index.read.load(Ordering::Relaxed), PUBLISH + 1);
    }

    /// A reader that passed the records in the ring (the indexer fell behind) takes them as it
    /// skips them: the indexer, waiting for room, goes on. (Taken only where one was found,
    /// the ring stayed full, and the indexer waited until the end of the run.)
    #[test]
    fn records_the_reader_passed_make_room_in_the_ring() {
        let index = RecordIndex::new();
        let full: Vec<usize> = (0..RING - PUBLISH).map(|i| i * 100).collect();
        let never = || true;
        assert!(index.put(0, &full, &never, &mut Waiting::default()));
        assert!(
            !index.put(0, &[RING * 100], &never, &mut Waiting::default()),
            "full"
        );
        let mut cursor = 0;
        for _ in 0..(RING / SKIP_MOST) {
            assert!(!index.ask(&mut cursor, usize::MAX / 2));
        }
        assert_eq!(cursor, RING - PUBLISH);
        assert!(index.put(0, &[RING * 100], &never, &mut Waiting::default()));
    }

    /// Which pages of `len` bytes at `address` are mapped (`/proc/self/pagemap`).
    fn mapped_pages(address: usize, len: usize) -> usize {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open("/proc/self/pagemap").unwrap();
        (address / 4096..(address + len).div_ceil(4096))
            .filter(|page| {
                let mut entry = [0u8; 8];
                f.seek(SeekFrom::Start(*page as u64 * 8)).unwrap();
                f.read_exact(&mut entry).unwrap();
                u64::from_le_bytes(entry) >> 63 == 1
            })
            .count()
    }

    /// Pages an indexer walked behind the reader are given back from the start of the step it
    /// began in: the kernel maps pages around a touch too, before it.
    #[test]
    fn pages_walked_behind_the_reader_are_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pcap");
        // Written 4 KiB at a time, as a capture tool writes: the page cache holds it in small
        // folios, mapped a page (and those around it) at a time, not a whole step.
        let mut file = std::fs::File::create(&path).unwrap();
        for _ in 0..(12 << 20) / 4096 {
            std::io::Write::write_all(&mut file, &[1u8; 4096]).unwrap();
        }
        drop(file);
        let map = Map::of(&std::fs::File::open(&path).unwrap()).unwrap();
        let bytes = map.bytes();
        let base = bytes.as_ptr() as usize;
        let touch = |range: std::ops::Range<usize>| {
            range
                .step_by(4096)
                .map(|at| usize::from(bytes[at]))
                .sum::<usize>()
        };
        // The reader read the first 9 MiB and gave back what lies before its step.
        assert!(touch(0..9 << 20) > 0);
        map.release_before(9 << 20);
        let released = map.released();
        assert!(released >= 6 << 20, "{released}");
        assert_eq!(mapped_pages(base, released), 0);
        // An indexer walks again pages behind it, from half a MiB into a step on.
        let step = map.step_after(1 << 20) - (2 << 20);
        touch(step + (512 << 10)..released);
        assert!(mapped_pages(base, released) > 0);
        map.give_back_behind(step + (1 << 20));
        assert_eq!(mapped_pages(base, released), 0);
        // The reader's pages stay.
        assert!(mapped_pages(base + released, 1 << 20) > 0);
    }
}
