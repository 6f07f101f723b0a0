//! Several captures read as one: rotated captures (`tcpdump -G/-C`, `dumpcap -b`) are one
//! timeline, so their frames are merged by timestamp (ties: the file named first) and numbered
//! in that order, as if they were one file. Each file is read as it would be alone (in chunks
//! or through its map for a regular file, streamed for gzip); only the file whose frame is
//! earliest advances.

use std::path::{Path, PathBuf};

use super::source::Carried;
use super::{CaptureError, CaptureReader, Frame, FrameRun, Reading, Timestamp};

/// The next frame of one file, as far as the merge knows.
#[derive(Clone, Copy)]
enum Head {
    /// Not looked at yet (or handed out).
    Unknown,
    Ready(Timestamp),
    Ended,
}

/// A file's reader, as far as the merge holds it: memory per file would grow with the number
/// of files (rotated captures come by the hundred), so only the files being read hold one.
enum Reader {
    Open(Box<CaptureReader>),
    /// A regular file whose first frame's time is known (`Head::Ready`) and that is opened
    /// again when that frame is the earliest: until then it holds neither buffers nor a map.
    Parked,
    /// Read to its end (or its damage): the bytes it read, for progress.
    Done(u64),
}

struct Input {
    path: PathBuf,
    reader: Reader,
    head: Head,
}

/// Frames of several captures in timestamp order.
#[derive(Default)]
pub struct MergedCaptures {
    inputs: Vec<Input>,
    frames: u64,
    /// The first file that ended in damage: the others are read to their end first, then it is
    /// reported (what every file held before its damage stands).
    damaged: Option<CaptureError>,
    /// How `run_capture` said the run reads ([`MergedCaptures::read_for`]): each file opened
    /// anew is read so.
    reading: Option<Reading>,
    /// What the last file to end left for the next file opened: one reading-ahead trial for
    /// the run, and the looks at short files' maps ([`Carried`]).
    carried: Carried,
}

impl MergedCaptures {
    /// Merge readers already opened, each with the path that names it in errors (see
    /// [`MergedCaptures::add`]).
    pub fn new(readers: Vec<(PathBuf, CaptureReader)>) -> Self {
        let mut merged = MergedCaptures::default();
        for (path, reader) in readers {
            merged.add(path, reader);
        }
        merged
    }

    /// Adds a file just opened, with the path that names it in errors. A regular file's first
    /// frame is peeked at now, and the file closed until that frame is the earliest (see
    /// [`Reader::Parked`]): open the files one at a time and add each at once, and only one
    /// file's buffers exist at a time.
    pub fn add(&mut self, path: PathBuf, reader: CaptureReader) {
        let parkable = reader.frames_read() == 0
            && path.as_os_str() != "-"
            && std::fs::metadata(&path).is_ok_and(|m| m.is_file());
        let mut input = Input {
            path,
            reader: Reader::Open(Box::new(reader)),
            head: Head::Unknown,
        };
        if parkable {
            peek(&mut input, &mut self.damaged, &mut self.carried);
            if let Head::Ready(_) = input.head {
                input.reader = Reader::Parked;
            }
        }
        self.inputs.push(input);
    }

    /// The next frame over all files, `Ok(None)` when every file has ended. A damaged file ends
    /// there; its error (naming the file) comes after the other files' frames.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        let i = loop {
            let mut earliest: Option<(Timestamp, usize)> = None;
            for (i, input) in self.inputs.iter_mut().enumerate() {
                if let Head::Unknown = input.head {
                    peek(input, &mut self.damaged, &mut self.carried);
                }
                if let Head::Ready(ts) = input.head {
                    if earliest.is_none_or(|(t, _)| ts < t) {
                        earliest = Some((ts, i));
                    }
                }
            }
            let Some((_, i)) = earliest else {
                return match self.damaged.take() {
                    Some(e) => Err(e),
                    None => Ok(None),
                };
            };
            if !matches!(
                self.inputs.get(i).map(|input| &input.reader),
                Some(Reader::Parked)
            ) {
                break i;
            }
            let reading = self.reading.map(|r| reading_of(r, &self.inputs, i));
            if let Some(input) = self.inputs.get_mut(i) {
                unpark(input, reading, &mut self.damaged, &mut self.carried);
            }
        };
        self.frames += 1;
        let number = self.frames;
        let Some(input) = self.inputs.get_mut(i) else {
            return Ok(None);
        };
        input.head = Head::Unknown;
        let path = &input.path;
        let Reader::Open(reader) = &mut input.reader else {
            return Ok(None);
        };
        match reader.next_frame() {
            Ok(Some(mut f)) => {
                f.number = number;
                Ok(Some(f))
            }
            // peek_ts said a frame was ready: the reader hands out that one.
            Ok(None) => Ok(None),
            Err(e) => Err(in_file(path, e)),
        }
    }

    /// [`CaptureReader::take_run`] over all files: the frames that come next from the file the
    /// last frame came from, while each comes before every other file's next frame (the order
    /// `next_frame` would give them in: by time, ties to the file named first) and `take` says
    /// yes. Rotated captures follow one another in time, so a run goes on as in one file.
    pub fn take_run<T: FnMut(&Frame<'_>) -> bool>(
        &mut self,
        max: u64,
        take: &mut T,
    ) -> Option<FrameRun> {
        // After `next_frame`, only the file it read from has its next frame not looked at.
        let mut from = None;
        let mut bound: Option<(Timestamp, usize)> = None;
        for (i, input) in self.inputs.iter().enumerate() {
            match input.head {
                Head::Unknown if from.is_none() => from = Some(i),
                Head::Unknown => return None,
                Head::Ready(ts) => {
                    if bound.is_none_or(|(t, _)| ts < t) {
                        bound = Some((ts, i));
                    }
                }
                Head::Ended => {}
            }
        }
        let from = from?;
        let base = self.frames;
        let mut number = base;
        let mut before_bound = |frame: &Frame<'_>| {
            let first = bound.is_none_or(|(t, j)| frame.ts < t || (frame.ts == t && from < j));
            number += 1;
            first && take(&Frame { number, ..*frame })
        };
        let Reader::Open(reader) = &mut self.inputs.get_mut(from)?.reader else {
            return None;
        };
        let mut run = reader.take_run(max, &mut before_bound)?;
        self.frames = base + run.frames;
        run.last.0 = self.frames;
        Some(run)
    }

    /// [`CaptureReader::read_for`] for every file, as it is opened: with a thread to spare,
    /// long pcap and pcapng files each have their records indexed ahead ([`reading_of`]), and
    /// files read in chunks each have a helper while they are read (each ends at its file's
    /// end, so rotated captures, read one after the other, have one at a time), under one
    /// trial that goes on from file to file; or each its look alone, short files the looks
    /// the files before them gathered ([`Carried`]).
    pub fn read_for(&mut self, reading: Reading) {
        self.reading = Some(reading);
        // Files read one after the other have their work ahead done on one thread kept over
        // the run (`capture::spare`): a helper's thread of its own started too late for a
        // file of a few MB (100 rotated files, `--threads 2`: 92.8 → 79.2 ms, `cat` 91.0). One
        // file alone starts its own (reading it in chunks on the kept thread was 10 % slower
        // where messages are held for a flow filter).
        #[cfg(target_os = "linux")]
        if self.inputs.len() > 1
            && matches!(reading, Reading::Ahead | Reading::AheadInChunks)
            && self.carried.spare.is_none()
        {
            self.carried.spare = super::spare::Spare::start();
        }
        for i in 0..self.inputs.len() {
            let reading = reading_of(reading, &self.inputs, i);
            if let Some(Input {
                reader: Reader::Open(reader),
                ..
            }) = self.inputs.get_mut(i)
            {
                reader.read_for(reading);
            }
        }
    }

    /// The memory maps of the files read through one now (see
    /// [`CaptureReader::shared_map`]): a file opened later is not among them, and worker
    /// threads get copies of its frames.
    pub fn shared_maps(&self) -> Vec<super::SharedMap> {
        self.inputs
            .iter()
            .filter_map(|i| match &i.reader {
                Reader::Open(r) => r.shared_map(),
                _ => None,
            })
            .collect()
    }

    /// Bytes read from all files so far.
    pub fn input_bytes_read(&self) -> u64 {
        self.inputs
            .iter()
            .map(|i| match &i.reader {
                Reader::Open(r) => r.input_bytes_read(),
                Reader::Parked => 0,
                Reader::Done(n) => *n,
            })
            .sum()
    }
}

/// How file `i` of the run is read, where the run reads as `reading`. With a thread to spare,
/// a file long enough for a look of its own (rotated captures of `tcpdump -C 100`, `dumpcap -b
/// filesize:100000`) has its records indexed ahead as one file alone does, each in turn on one
/// thread kept over the run (`capture::spare`), unless another file open now has it (captures
/// that overlap in time: no more threads than asked for). Shorter files have a helper read
/// chunks ahead: indexed, 100 rotated files of 5.4 MB were no quicker (each file's first 2 MiB
/// mapped by the reader itself, the thread not yet ahead) and took a fifth more CPU.
fn reading_of(reading: Reading, inputs: &[Input], i: usize) -> Reading {
    if reading != Reading::Ahead {
        return reading;
    }
    let long = inputs.len() == 1
        || inputs.get(i).is_some_and(|input| {
            std::fs::metadata(&input.path).is_ok_and(|m| m.len() >= super::access::LOOK_FROM as u64)
        });
    let other_indexing = inputs
        .iter()
        .enumerate()
        .any(|(j, input)| j != i && matches!(&input.reader, Reader::Open(r) if r.indexing()));
    if long && !other_indexing {
        Reading::Ahead
    } else {
        Reading::AheadInChunks
    }
}

/// Finds `input`'s next frame's time (its reader open), or its end: then the reader is
/// closed, its damage, if any, kept in `damaged` to report after the other files' frames.
fn peek(input: &mut Input, damaged: &mut Option<CaptureError>, carried: &mut Carried) {
    let Reader::Open(reader) = &mut input.reader else {
        return;
    };
    input.head = match reader.peek_ts() {
        Ok(Some(ts)) => Head::Ready(ts),
        Ok(None) => Head::Ended,
        Err(e) => {
            if damaged.is_none() {
                *damaged = Some(in_file(&input.path, e));
            }
            Head::Ended
        }
    };
    if let Head::Ended = input.head {
        let left = reader.take_carried();
        if left.trial.is_some() {
            carried.trial = left.trial;
        }
        carried.looks = carried.looks.later(left.looks);
        if left.lines.is_some() {
            carried.lines = left.lines;
        }
        #[cfg(target_os = "linux")]
        if left.spare.is_some() {
            carried.spare = left.spare;
        }
        input.reader = Reader::Done(reader.input_bytes_read());
    }
}

/// Opens a parked file again, read as `reading` says if the run said. Its first frame is
/// peeked at anew (the file may have changed since): the merge chooses again.
fn unpark(
    input: &mut Input,
    reading: Option<Reading>,
    damaged: &mut Option<CaptureError>,
    carried: &mut Carried,
) {
    let opened = match reading {
        Some(reading) => CaptureReader::open_after(&input.path, reading, std::mem::take(carried)),
        None => CaptureReader::open(&input.path),
    };
    match opened {
        Ok(reader) => {
            input.reader = Reader::Open(Box::new(reader));
            peek(input, damaged, carried);
        }
        Err(e) => {
            if damaged.is_none() {
                *damaged = Some(in_file(&input.path, e));
            }
            input.reader = Reader::Done(0);
            input.head = Head::Ended;
        }
    }
}

fn in_file(path: &Path, e: CaptureError) -> CaptureError {
    CaptureError::InFile {
        path: path.display().to_string(),
        source: Box::new(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::PcapWriter;

    /// A pcap file of frames at times `times` (µs), each frame's first byte its time.
    fn file(dir: &Path, name: &str, times: impl Iterator<Item = i64>) -> PathBuf {
        let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
        for t in times {
            w.write_packet(Timestamp(t * 1_000), &[t as u8; 60])
                .unwrap();
        }
        let path = dir.join(name);
        std::fs::write(&path, w.into_inner()).unwrap();
        path
    }

    /// With a thread to spare, a file of a run long enough for a look of its own has its
    /// records indexed ahead, as one file alone has, unless another file open now has an
    /// indexer; a shorter one has a helper read chunks ahead.
    #[cfg(target_os = "linux")]
    #[test]
    fn long_files_of_a_run_are_indexed_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let short = file(dir.path(), "a.pcap", 0..10);
        // Only its length is looked at: a sparse file.
        let long = dir.path().join("b.pcap");
        std::fs::File::create(&long)
            .unwrap()
            .set_len(super::super::access::LOOK_FROM as u64)
            .unwrap();
        let input = |path: &PathBuf| Input {
            path: path.clone(),
            reader: Reader::Parked,
            head: Head::Unknown,
        };
        let mut inputs = vec![input(&short), input(&long)];
        assert_eq!(
            reading_of(Reading::Ahead, &inputs, 0),
            Reading::AheadInChunks
        );
        assert_eq!(reading_of(Reading::Ahead, &inputs, 1), Reading::Ahead);
        assert_eq!(
            reading_of(Reading::Ahead, &inputs[..1], 0),
            Reading::Ahead,
            "alone"
        );
        for other in [Reading::Alone, Reading::ForWorkers, Reading::AheadInChunks] {
            assert_eq!(reading_of(other, &inputs, 1), other);
        }
        // The short file open, its records indexed (read through its map): the long one waits.
        let mut r = CaptureReader::open_as(&short, super::super::FileAccess::Map).unwrap();
        r.read_for(Reading::Ahead);
        assert!(r.indexing());
        inputs[0].reader = Reader::Open(Box::new(r));
        assert_eq!(
            reading_of(Reading::Ahead, &inputs, 1),
            Reading::AheadInChunks
        );
        assert_eq!(
            reading_of(Reading::Ahead, &inputs, 0),
            Reading::AheadInChunks
        );
        inputs[0].reader = Reader::Done(0);
        assert_eq!(reading_of(Reading::Ahead, &inputs, 1), Reading::Ahead);
    }

    fn merged(paths: &[PathBuf]) -> MergedCaptures {
        MergedCaptures::new(
            paths
                .iter()
                .map(|p| (p.clone(), CaptureReader::open(p).unwrap()))
                .collect(),
        )
    }

    fn open(m: &MergedCaptures) -> usize {
        let open = |i: &&Input| matches!(i.reader, Reader::Open(_));
        m.inputs.iter().filter(open).count()
    }

    /// Every frame's time (µs), and the most files open at once while reading. The frames
    /// are numbered 1, 2, 3… across the files.
    fn read(m: &mut MergedCaptures) -> (Vec<i64>, usize) {
        let (mut times, mut most) = (Vec::new(), 0);
        while let Some(f) = m.next_frame().unwrap() {
            times.push(f.ts.0 / 1_000);
            assert_eq!(f.number, times.len() as u64);
            most = most.max(open(m));
        }
        (times, most)
    }

    /// `files` files of `frames` frames of 1,500 bytes each, one after the other in time, as a
    /// rotating capture leaves them.
    fn ring(dir: &std::path::Path, files: i64, frames: i64) -> Vec<PathBuf> {
        (0..files)
            .map(|i| {
                let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
                for t in 0..frames {
                    w.write_packet(Timestamp((i * 10 * frames + t) * 1_000), &[7; 1_500])
                        .unwrap();
                }
                let path = dir.join(format!("ring_{i:02}.pcap"));
                std::fs::write(&path, w.into_inner()).unwrap();
                path
            })
            .collect()
    }

    /// A ring of files each too short for the reading-ahead trial (4 chunks, 1 MiB): the
    /// trial goes on from file to file, as over one file.
    #[test]
    fn one_trial_goes_on_over_a_ring_of_short_files() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ring(dir.path(), 64, 700);
        let mut m = merged(&paths);
        m.read_for(Reading::Ahead);
        let (times, most) = read(&mut m);
        assert_eq!(times.len(), 64 * 700);
        assert_eq!(most, 1, "one file open at a time");
        // Each file times a few of its chunks: alone, its trial would still be warming up. Past
        // reading alone is as far as the count goes; whether the helper's own chunks then
        // decide depends on how often it wins the race for a chunk.
        let trial = m.carried.trial.as_ref().expect("the last file's trial");
        assert!(trial.past_alone(), "the trial went on over the ring");
    }

    /// A ring of files each too short for a look at three places of its map, read by one
    /// thread: each of the first three is looked at in one place, and the three looks go on
    /// to decide for the files after them (whether the map pays is the machine's to say).
    #[cfg(target_os = "linux")]
    #[test]
    fn short_files_gather_their_looks_over_a_ring() {
        let dir = tempfile::tempdir().unwrap();
        // 1,400 frames of 1,516 bytes: 2 MiB, room for one place.
        let paths = ring(dir.path(), 5, 1_400);
        let mut m = merged(&paths);
        m.read_for(Reading::Alone);
        assert_eq!(read(&mut m).0.len(), 5 * 1_400);
        assert_eq!(
            m.carried.looks.gathered(),
            3,
            "three files looked at, then decided"
        );
        // Each file alone (its own run) only ever adds its own look.
        let mut one = merged(&paths[..1]);
        one.read_for(Reading::Alone);
        read(&mut one);
        assert_eq!(one.carried.looks.gathered(), 1);
    }

    /// Runs and single frames in turn, over files that overlap in time: every frame once, in
    /// time order, numbered 1, 2, 3… across the files as `next_frame` alone numbers them.
    #[test]
    fn runs_and_frames_in_turn_are_numbered_in_one_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let even = file(dir.path(), "even.pcap", (0..60).map(|t| t * 2));
        let odd = file(dir.path(), "odd.pcap", (10..40).map(|t| t * 2 + 1));
        let late = file(dir.path(), "late.pcap", 200..230);
        let mut m = merged(&[even, odd, late]);
        let mut seen: Vec<(u64, i64)> = Vec::new();
        let mut in_runs = 0;
        for turn in 0.. {
            if turn % 2 == 1 {
                let mut taken = Vec::new();
                let run = m.take_run(7, &mut |f| {
                    taken.push((f.number, f.ts.0 / 1_000));
                    true
                });
                if let Some(run) = run {
                    assert_eq!(run.frames, taken.len() as u64);
                    assert_eq!(Some(run.last.0), taken.last().map(|t| t.0));
                }
                in_runs += taken.len();
                seen.extend(taken);
            } else {
                match m.next_frame().unwrap() {
                    Some(f) => seen.push((f.number, f.ts.0 / 1_000)),
                    None => break,
                }
            }
        }
        let mut want: Vec<i64> = (0..60)
            .map(|t| t * 2)
            .chain((10..40).map(|t| t * 2 + 1))
            .chain(200..230)
            .collect();
        want.sort_unstable();
        let numbered: Vec<(u64, i64)> = (1..).zip(want).collect();
        assert_eq!(seen, numbered);
        // Runs were taken, not only single frames: the test is of the two in turn.
        assert!(in_runs > 30, "{in_runs} frames in runs");
    }

    #[test]
    fn rotated_files_are_open_one_at_a_time_and_closed_at_their_end() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = (0..20)
            .map(|k| file(dir.path(), &format!("r{k}.pcap"), k * 10..k * 10 + 10))
            .collect();
        let mut m = merged(&paths);
        assert_eq!(open(&m), 0, "all parked once their first frame is known");
        m.read_for(Reading::Ahead);
        let (times, most) = read(&mut m);
        assert_eq!(times, (0..200).collect::<Vec<_>>());
        assert_eq!(most, 1);
        assert_eq!(open(&m), 0);
        let len: u64 = paths.iter().map(|p| p.metadata().unwrap().len()).sum();
        assert_eq!(m.input_bytes_read(), len);
    }

    #[test]
    fn files_that_overlap_in_time_are_open_together() {
        let dir = tempfile::tempdir().unwrap();
        let even = file(dir.path(), "even.pcap", (0..100).map(|t| t * 2));
        let odd = file(dir.path(), "odd.pcap", (0..50).map(|t| t * 2 + 1));
        let late = file(dir.path(), "late.pcap", 500..510);
        let mut m = merged(&[late, even, odd]);
        let (times, most) = read(&mut m);
        let mut want: Vec<i64> = (0..100)
            .map(|t| t * 2)
            .chain((0..50).map(|t| t * 2 + 1))
            .collect();
        want.sort_unstable();
        want.extend(500..510);
        assert_eq!(times, want);
        assert_eq!(most, 2);
    }

    #[test]
    fn a_file_gone_before_its_turn_is_named_after_the_others_frames() {
        let dir = tempfile::tempdir().unwrap();
        let first = file(dir.path(), "a.pcap", 0..10);
        let second = file(dir.path(), "b.pcap", 10..20);
        let third = file(dir.path(), "c.pcap", 20..30);
        let mut m = merged(&[first, second.clone(), third]);
        std::fs::remove_file(&second).unwrap();
        let mut times = Vec::new();
        let err = loop {
            match m.next_frame() {
                Ok(Some(f)) => times.push(f.ts.0 / 1_000),
                Ok(None) => panic!("no error"),
                Err(e) => break e.to_string(),
            }
        };
        assert_eq!(times, (0..10).chain(20..30).collect::<Vec<_>>());
        assert!(err.contains("b.pcap"), "{err}");
    }
}
