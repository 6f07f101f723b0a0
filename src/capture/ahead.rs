//! How the record walk asks for a map's lines before it reaches them.
//!
//! Where a record begins is known only from the header before it, so walking a map's records
//! is a chain of waits for memory unless lines are asked for ahead. There are two ways, and
//! which pays depends on the machine and on the work done on the frames (the README's
//! Performance section, session 35):
//! - **stream**: every line up to [`STREAM_AHEAD`] bytes past the walk; the file streams in as
//!   a copy does, every byte crossing whether or not it is read. Best on the AMD EPYC of
//!   sessions 25–34, and on the Xeon of session 35 where the work reads every byte
//!   (decrypting small messages: 5–10 % quicker than guessing).
//! - **guess**: the two lines where the record [`GUESS_RECORDS`] on begins if the next
//!   records take as many bytes as the last as many did; only the headers' lines cross. On
//!   that Xeon, a quarter to a third quicker on one thread on the bench's plain captures,
//!   whose payloads are skipped; on the AMD EPYC, small I/Os took 94.7 ms against
//!   streaming's 68.9.
//!
//! So the walk measures both as it goes: every [`CYCLE`] windows of [`WINDOW`] bytes it times
//! four windows each way ([`TRIAL`]'s order: a drift in the traffic or the machine's pace
//! weighs on both alike) and keeps the quicker until the next trial. What the
//! walk reads is the same either way: the asking is only a hint to the CPU. `SQOS_AHEAD=stream`
//! or `SQOS_AHEAD=guess` fixes the way, with no trial ([`LinesAhead::from_env`]).

use std::time::{Duration, Instant};

use super::mapped::{prefetch_address, MapView, TO_L1, TO_L2};

/// A CPU cache line (64 bytes where this runs): a record's headers may reach into the next.
const CACHE_LINE: usize = 64;

/// How far past the record it walks the stream asks for the file's lines. A C walk of the
/// records of the bench's small-I/O capture (541 MB, AMD EPYC): 32–36 ms at 4 KiB, 32–34 at 8,
/// 36–40 at 16, against 55–56 for the lines of the record 4 ahead, guessed from the last
/// lengths (the rule before, session 20); on the bulk capture 54.7 at 4 KiB against 58.9.
///
/// The stream asks for the lines into the second-level cache only (`prefetcht1`): asking into
/// the first level holds one of its few fill buffers per line until the line arrives, and where
/// memory is slow the walk waited on them (a C walk of the small-I/O capture on the Xeon of
/// session 36, in a slow minute: 61 ms against 79; in turn, `dissect -t1` 98.5 → 90.7 and
/// 98.8 → 94.2 ms, small AES 124.8 → 121.5, bulk and 16 connections unchanged).
const STREAM_AHEAD: usize = 4 << 10;

/// How many records ahead a guess asks for, guessed from as many records behind. Data
/// segments and ACKs alternate (1,514 and 66 bytes on the bench's bulk capture, 3:1 or 2:1),
/// so the last record's length alone guesses wrong for every few records. A C walk of the
/// bench's captures (Xeon, session 36, median of five, ms): the last 8 records' bytes 26.4
/// on bulk, 26.5 on 16 connections, 38.5 on small I/Os, against 29.7, 32.0, 37.0 for 4 times
/// the last record's length (the guess of session 35); the last 4 or 16 records' bytes did
/// worse than 8.
const GUESS_RECORDS: usize = 8;

/// The stretch of the walk timed as one: long enough that a timer read (~25 ns) is lost in
/// it, short enough that a trial costs little (~0.1 ms a window at 10 GB/s).
const WINDOW: usize = 1 << 20;

/// Windows from one trial to the next: one to settle, the trial's, the rest the quicker way.
const CYCLE: u32 = 128;

/// The ways of a trial's timed windows, after the first window of a cycle: four each, in an
/// order that gives a drift within the trial to both alike. A window's time varies by a
/// third either way (the work in it, the kernel's faults); four each chose the way that was
/// quicker over the whole run in 64 of 68 trials on the bench's bulk capture, two each in
/// 121 of 137.
const TRIAL: [Way; 8] = {
    use Way::*;
    [Stream, Guess, Guess, Stream, Guess, Stream, Stream, Guess]
};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Way {
    #[default]
    Stream,
    Guess,
}

/// Where the walk asks for lines, and its trial of the two ways.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LinesAhead {
    /// The next line the stream has not asked for yet, as an address: the stream asks for
    /// each line once, in order.
    next: usize,
    way: Way,
    /// The window being timed: its first address and when the walk entered it (`None`:
    /// no window yet, or the walk came from elsewhere).
    window: usize,
    entered: Option<Instant>,
    /// Windows into the cycle.
    step: u32,
    /// Time the trial's windows took, streaming and guessing.
    spent: [Duration; 2],
    /// The one way to ask (`SQOS_AHEAD`), else `None`: the trial's.
    fixed: Option<Way>,
    /// The window being timed is a carried-on file's first ([`Self::carried_on`]): it also
    /// pays for opening the file, so it is not counted and the cycle does not move on.
    settling: bool,
    /// The lengths of the last [`GUESS_RECORDS`] records (a ring, `last` the next slot) and
    /// their sum: the guess's distance.
    lengths: [usize; GUESS_RECORDS],
    last: usize,
    behind: usize,
    /// The walk's place in the map's record index, where a thread fills one
    /// ([`super::index::RecordIndex::ask`]).
    cursor: usize,
}

impl LinesAhead {
    /// `SQOS_AHEAD=stream` or `SQOS_AHEAD=guess`: that way only, no trial; else the trial's.
    /// For measuring: a timed trial takes one way or the other from run to run, which moves
    /// an instruction count (callgrind) by several per cent, and for comparing the ways.
    pub(crate) fn from_env() -> LinesAhead {
        let fixed = match std::env::var_os("SQOS_AHEAD") {
            Some(v) if v == "stream" => Some(Way::Stream),
            Some(v) if v == "guess" => Some(Way::Guess),
            _ => None,
        };
        LinesAhead::fixed(fixed)
    }

    /// This walk's state for the next file of a run (rotated captures): its trial goes on
    /// where this file left it, so that a ring of files shorter than a cycle (5 MB files
    /// against 128 windows of 1 MiB) still ends its trials and keeps the quicker way; what
    /// belongs to this file's map (the window being timed, the stream's place, the index's
    /// cursor) starts anew.
    pub(crate) fn carried_on(self) -> LinesAhead {
        LinesAhead {
            next: 0,
            window: 0,
            entered: None,
            cursor: 0,
            settling: true,
            ..self
        }
    }

    fn fixed(fixed: Option<Way>) -> LinesAhead {
        LinesAhead {
            fixed,
            way: fixed.unwrap_or_default(),
            ..LinesAhead::default()
        }
    }

    /// The walk has found a record of `len` bytes at `at` of `map`: ask for lines ahead of
    /// the next, the current way.
    #[inline(always)]
    pub(crate) fn ask(&mut self, map: MapView<'_>, at: usize, len: usize) {
        let next = map.address(at + len);
        // Where a thread indexes the records ahead, the lines of the one a few ahead are
        // known: no guess, no stream.
        if let Some(index) = map.index {
            if index.ask(&mut self.cursor, next) {
                return;
            }
        }
        if next.wrapping_sub(self.window) >= WINDOW {
            self.turn(next, Instant::now());
        }
        let behind = self.behind(len);
        match self.way {
            Way::Stream => {
                self.stream(map, at + len);
            }
            Way::Guess => {
                let guess = next.wrapping_add(behind);
                prefetch_address::<TO_L1>(guess);
                prefetch_address::<TO_L1>(guess.wrapping_add(CACHE_LINE));
            }
        }
    }

    /// The walk left its window at `here` (time `now`): the window's time counted if it was
    /// one of a trial's, the next window's way chosen. A walk that jumped within a file (a
    /// record longer than a window) starts a new cycle, its window not counted; a file goes
    /// on with the cycle the run's last file left ([`Self::carried_on`]: none before, so the
    /// run's first file starts one), its first window not counted.
    #[cold]
    #[inline(never)]
    fn turn(&mut self, here: usize, now: Instant) {
        let onward = here.wrapping_sub(self.window) < 2 * WINDOW;
        match self.entered {
            Some(_) if onward && self.settling => {}
            Some(t) if onward => {
                if (1..=TRIAL.len() as u32).contains(&self.step) {
                    self.spent[self.way as usize] += now.saturating_duration_since(t);
                }
                self.step = (self.step + 1) % CYCLE;
            }
            Some(_) => self.step = 0,
            None => {}
        }
        self.settling = self.entered.is_none() && self.settling;
        self.way = match self.step {
            0 => {
                self.spent = [Duration::ZERO; 2];
                Way::Stream
            }
            s if s as usize <= TRIAL.len() => TRIAL[s as usize - 1],
            s if s as usize == TRIAL.len() + 1 => {
                if self.spent[Way::Guess as usize] < self.spent[Way::Stream as usize] {
                    Way::Guess
                } else {
                    Way::Stream
                }
            }
            _ => self.way,
        };
        if let Some(way) = self.fixed {
            self.way = way;
        }
        self.window = here;
        self.entered = Some(now);
    }

    /// A record of `len` bytes walked: the bytes of the last [`GUESS_RECORDS`] records.
    /// Kept whichever way is asked, so that a trial's first guess has it.
    #[inline(always)]
    fn behind(&mut self, len: usize) -> usize {
        let slot = &mut self.lengths[self.last % GUESS_RECORDS];
        // Wrapping: a record's length is bounded by the map's, so the sum of a few is too.
        self.behind = self.behind.wrapping_sub(*slot).wrapping_add(len);
        *slot = len;
        self.last = self.last.wrapping_add(1);
        self.behind
    }

    /// The walk is at `at` of `map`: ask for the lines up to `STREAM_AHEAD` past it. Returns
    /// how many it asked for.
    #[inline(always)]
    fn stream(&mut self, map: MapView<'_>, at: usize) -> usize {
        let here = map.address(at);
        let end = here.wrapping_add(STREAM_AHEAD);
        // Asked up to the line that holds `end` at most, whatever the records' lengths (a
        // record shorter than a line, as a snaplen cut makes them, moves `end` less than a
        // line). Behind the walk or further ahead than that: first, or another map; start
        // where the walk is.
        let mut line = if self.next < here || self.next > end + CACHE_LINE {
            here & !(CACHE_LINE - 1)
        } else {
            self.next
        };
        let from = line;
        while line < end {
            prefetch_address::<TO_L2>(line);
            line += CACHE_LINE;
        }
        self.next = line;
        (line - from) / CACHE_LINE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_asks_for_each_line_once_ahead_and_starts_again_elsewhere() {
        let bytes = vec![0u8; 64 << 10];
        let view = MapView::of_buffer(&bytes);
        let base = view.address(0);
        let lines = STREAM_AHEAD / CACHE_LINE;
        let mut ahead = LinesAhead::default();
        // First: the window ahead of the walk, from the line the walk is in.
        let asked = ahead.stream(view, 100);
        let first = ahead.next;
        assert!((lines..=lines + 1).contains(&asked), "{asked}");
        assert_eq!(first % CACHE_LINE, 0);
        assert!(
            first >= base + 100 + STREAM_AHEAD && first < base + 100 + STREAM_AHEAD + CACHE_LINE
        );
        // A little further on: only the new lines.
        let asked = ahead.stream(view, 1600);
        assert_eq!(asked, (ahead.next - first) / CACHE_LINE);
        assert!(
            (1500 / CACHE_LINE..=1500 / CACHE_LINE + 1).contains(&asked),
            "{asked}"
        );
        assert!(ahead.next >= base + 1600 + STREAM_AHEAD);
        // Not further: nothing asked, the cursor stays.
        let held = ahead.next;
        assert_eq!(ahead.stream(view, 1600), 0);
        assert_eq!(ahead.next, held);
        // Records shorter than a line (a snaplen cut): each line still asked for once.
        let asked: usize = (1..=100).map(|i| ahead.stream(view, 1600 + 40 * i)).sum();
        assert!(
            asked <= 4000 / CACHE_LINE + 1,
            "{asked} lines for 4,000 bytes"
        );
        // Another map (its bytes below or far above what was asked for): from where the
        // walk is.
        let other = vec![0u8; 64 << 10];
        let moved = MapView::of_buffer(&other);
        let asked = ahead.stream(moved, 0);
        let at = moved.address(0);
        assert!((lines..=lines + 1).contains(&asked), "{asked}");
        assert!(ahead.next >= at + STREAM_AHEAD && ahead.next < at + STREAM_AHEAD + CACHE_LINE);
    }

    /// Walks `windows` windows on from `ahead`'s, each taking `took(way)` microseconds;
    /// returns the way of each window entered.
    fn walk(
        ahead: &mut LinesAhead,
        clock: &mut Instant,
        windows: u32,
        took: impl Fn(Way) -> u64,
    ) -> Vec<Way> {
        (0..windows)
            .map(|_| {
                *clock += Duration::from_micros(took(ahead.way));
                let here = ahead.window + WINDOW;
                ahead.turn(here, *clock);
                ahead.way
            })
            .collect()
    }

    #[test]
    fn a_trial_times_both_ways_and_keeps_the_quicker_until_the_next() {
        use Way::*;
        let n = TRIAL.len();
        let mut clock = Instant::now();
        let mut ahead = LinesAhead::default();
        ahead.turn(1 << 30, clock);
        assert_eq!(
            (ahead.step, ahead.way),
            (0, Stream),
            "a cycle begins by settling"
        );
        // Guessing quicker: after the trial's windows, guessing to the cycle's end.
        let ways = walk(&mut ahead, &mut clock, CYCLE - 1, |w| match w {
            Stream => 120,
            Guess => 100,
        });
        assert_eq!(ways[..n], TRIAL);
        assert_eq!(TRIAL.iter().filter(|w| **w == Guess).count(), n / 2);
        assert!(ways[n..].iter().all(|w| *w == Guess));
        let each = n as u64 / 2;
        assert_eq!(
            ahead.spent,
            [
                Duration::from_micros(120 * each),
                Duration::from_micros(100 * each)
            ]
        );
        // The next cycle settles streaming, times again, and now streaming is quicker.
        let ways = walk(&mut ahead, &mut clock, CYCLE, |w| match w {
            Stream => 90,
            Guess => 100,
        });
        assert_eq!(ways[0], Stream);
        assert_eq!(ways[1..=n], TRIAL);
        assert!(ways[n + 1..].iter().all(|w| *w == Stream));
        // A tie keeps streaming.
        let mut tied = LinesAhead::default();
        tied.turn(1 << 30, clock);
        let ways = walk(&mut tied, &mut clock, n as u32 + 4, |_| 100);
        assert_eq!(ways[n..], [Stream; 4]);
    }

    #[test]
    fn a_fixed_way_is_kept_through_the_trial() {
        for way in [Way::Stream, Way::Guess] {
            let mut clock = Instant::now();
            let mut ahead = LinesAhead::fixed(Some(way));
            assert_eq!(ahead.way, way);
            ahead.turn(1 << 30, clock);
            // The other way quicker: still this one, through a whole cycle and the next.
            let ways = walk(&mut ahead, &mut clock, 2 * CYCLE, |w| {
                if w == way {
                    200
                } else {
                    1
                }
            });
            assert!(ways.iter().all(|w| *w == way), "{way:?}");
        }
    }

    #[test]
    fn a_guess_is_as_far_ahead_as_the_last_records_took() {
        let mut ahead = LinesAhead::default();
        // Fewer records than the guess spans: their sum.
        assert_eq!(ahead.behind(1530), 1530);
        assert_eq!(ahead.behind(82), 1612);
        // Data segments and ACKs, 3:1: once the ring is full, the last GUESS_RECORDS' bytes.
        let lengths = [1530, 1530, 1530, 82].repeat(4);
        let mut last = 0;
        for &len in &lengths {
            last = ahead.behind(len);
        }
        let expect: usize = lengths[lengths.len() - GUESS_RECORDS..].iter().sum();
        assert_eq!(last, expect);
        assert_eq!(last, 2 * (3 * 1530 + 82));
    }

    /// Rotated files shorter than a trial: carried from file to file, the trial goes on
    /// over them and the run keeps the quicker way. Neither a file's first window (which pays
    /// for opening it) nor its last, cut short, is counted.
    #[test]
    fn a_trial_goes_on_over_the_files_of_a_run() {
        use Way::*;
        let mut clock = Instant::now();
        let mut ahead = LinesAhead::default();
        let mut last = Vec::new();
        for file in 0..8 {
            // Each file mapped at the same address: only the carry tells them apart.
            ahead.turn(1 << 30, clock);
            if file == 0 {
                assert_eq!((ahead.step, ahead.way), (0, Stream), "the run's first");
            }
            clock += Duration::from_secs(1);
            // Three windows, then the file ends in a fourth, cut short.
            last = walk(&mut ahead, &mut clock, 3, |w| match w {
                Stream => 120,
                Guess => 100,
            });
            clock += Duration::from_secs(5);
            ahead = ahead.carried_on();
        }
        // The first file's windows move the cycle on by three, each later file's by two.
        assert_eq!(ahead.step, 3 + 7 * 2);
        assert_eq!(last, [Guess; 3]);
        let each = TRIAL.len() as u64 / 2;
        assert_eq!(
            ahead.spent,
            [
                Duration::from_micros(120 * each),
                Duration::from_micros(100 * each)
            ]
        );
    }

    #[test]
    fn a_walk_that_jumps_starts_a_cycle_and_counts_no_window_across_the_jump() {
        let mut clock = Instant::now();
        let mut ahead = LinesAhead::default();
        ahead.turn(1 << 30, clock);
        walk(&mut ahead, &mut clock, 2, |_| 100);
        assert_eq!((ahead.step, ahead.way), (2, TRIAL[1]));
        // Another map, far away: a new cycle; its first window settles, not timed.
        clock += Duration::from_secs(5);
        ahead.turn(1 << 40, clock);
        assert_eq!((ahead.step, ahead.way), (0, Way::Stream));
        assert_eq!(ahead.spent, [Duration::ZERO; 2]);
        // Back to before the window (a map below): the same.
        walk(&mut ahead, &mut clock, 3, |_| 100);
        ahead.turn(1 << 20, clock);
        assert_eq!(ahead.step, 0);
    }
}
