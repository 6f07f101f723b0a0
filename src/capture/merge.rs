//! Several captures read as one: rotated captures (`tcpdump -G/-C`, `dumpcap -b`) are one
//! timeline, so their frames are merged by timestamp (ties: the file named first) and numbered
//! in that order, as if they were one file. Each file is read as it would be alone (in chunks
//! or through its map for a regular file, streamed for gzip); only the file whose frame is
//! earliest advances.

use std::path::{Path, PathBuf};

use super::{CaptureError, CaptureReader, Frame, FrameRun, Timestamp};

/// The next frame of one file, as far as the merge knows.
#[derive(Clone, Copy)]
enum Head {
    /// Not looked at yet (or handed out).
    Unknown,
    Ready(Timestamp),
    Ended,
}

struct Input {
    path: PathBuf,
    reader: CaptureReader,
    head: Head,
}

/// Frames of several captures in timestamp order.
pub struct MergedCaptures {
    inputs: Vec<Input>,
    frames: u64,
    /// The first file that ended in damage: the others are read to their end first, then it is
    /// reported (what every file held before its damage stands).
    damaged: Option<CaptureError>,
}

impl MergedCaptures {
    /// Merge readers already opened, each with the path that names it in errors.
    pub fn new(readers: Vec<(PathBuf, CaptureReader)>) -> Self {
        MergedCaptures {
            inputs: readers
                .into_iter()
                .map(|(path, reader)| Input {
                    path,
                    reader,
                    head: Head::Unknown,
                })
                .collect(),
            frames: 0,
            damaged: None,
        }
    }

    /// The next frame over all files, `Ok(None)` when every file has ended. A damaged file ends
    /// there; its error (naming the file) comes after the other files' frames.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        let mut earliest: Option<(Timestamp, usize)> = None;
        for (i, input) in self.inputs.iter_mut().enumerate() {
            if let Head::Unknown = input.head {
                input.head = match input.reader.peek_ts() {
                    Ok(Some(ts)) => Head::Ready(ts),
                    Ok(None) => Head::Ended,
                    Err(e) => {
                        if self.damaged.is_none() {
                            self.damaged = Some(in_file(&input.path, e));
                        }
                        Head::Ended
                    }
                };
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
        self.frames += 1;
        let number = self.frames;
        let Some(input) = self.inputs.get_mut(i) else {
            return Ok(None);
        };
        input.head = Head::Unknown;
        let path = &input.path;
        match input.reader.next_frame() {
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
        let mut run = self
            .inputs
            .get_mut(from)?
            .reader
            .take_run(max, &mut before_bound)?;
        self.frames = base + run.frames;
        run.last.0 = self.frames;
        Some(run)
    }

    /// [`CaptureReader::read_ahead`] for every file: each file read in chunks gets its own
    /// trial, and its helper while it is read (a helper ends at its file's end, so rotated
    /// captures, read one after the other, have one at a time).
    /// Returns how many files got a trial.
    pub fn read_ahead(&mut self) -> usize {
        let mut asked = 0;
        for input in &mut self.inputs {
            asked += usize::from(input.reader.read_ahead());
        }
        asked
    }

    /// [`CaptureReader::read_alone`] for every file: each through its map where that pays.
    /// Returns how many files are read through their map from here on.
    pub fn read_alone(&mut self) -> usize {
        let mut mapped = 0;
        for input in &mut self.inputs {
            mapped += usize::from(input.reader.read_alone());
        }
        mapped
    }

    /// The memory maps of the files read through one (see [`CaptureReader::shared_map`]).
    pub fn shared_maps(&self) -> Vec<super::SharedMap> {
        self.inputs
            .iter()
            .filter_map(|i| i.reader.shared_map())
            .collect()
    }

    /// Bytes read from all files so far.
    pub fn input_bytes_read(&self) -> u64 {
        self.inputs
            .iter()
            .map(|i| i.reader.input_bytes_read())
            .sum()
    }
}

fn in_file(path: &Path, e: CaptureError) -> CaptureError {
    CaptureError::InFile {
        path: path.display().to_string(),
        source: Box::new(e),
    }
}
