//! Drive a capture through the pipeline: feed every frame of a [`FrameSource`], finish, and say
//! how the input ended. Shared by every face (dissect, stats, flows, export, plot, check, tui);
//! each face brings its own sink and its own way of showing progress (a bar on a terminal, the
//! TUI's title bar) through the progress callback, which can also stop the run.

use std::ops::ControlFlow;
use std::path::Path;

use crate::capture::{
    CaptureError, CaptureFormat, CaptureReader, Frame, FrameRun, MergedCaptures, Reading,
    SharedMap, Timestamp,
};
use crate::net::ReassemblyStats;
use crate::pipeline::{Pipeline, PipelineConfig, RecordSink, Stats};

/// A record sink that also wants to know when the capture starts (for relative times), and can
/// say that it wants nothing more (its output was closed: `sqos dissect big.pcap | head -1`).
pub trait CaptureSink: RecordSink {
    fn on_first_frame(&mut self, _ts: Timestamp) {}
    /// The container format of a single capture file, once its header is read (`-w` says which
    /// format it writes).
    fn on_format(&mut self, _format: CaptureFormat) {}
    /// True to stop reading now; asked after every frame, so keep it cheap.
    fn done(&mut self) -> bool {
        false
    }
}

/// Where frames come from: a [`CaptureReader`] (file, pipe, gzip, growing file, interface).
pub trait FrameSource {
    /// The next frame, `Ok(None)` at the end; after an error, the frames before it stand.
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError>;
    /// Bytes read from the files or pipes so far (before decompression), for progress.
    fn input_bytes_read(&self) -> u64;
    /// The memory maps its frames lie in, if any: worker threads read them there.
    fn shared_maps(&self) -> Vec<SharedMap> {
        Vec::new()
    }
    /// Read as the run's threads do ([`CaptureReader::read_for`]).
    fn read_for(&mut self, _reading: Reading) {}
    /// The frames that come next, handed over as one run while `take` says yes to each, at
    /// most `max` ([`CaptureReader::take_run`]); `None`: not one taken, or a source that does
    /// not walk its records in place.
    fn take_run<T: FnMut(&Frame<'_>) -> bool>(
        &mut self,
        _max: u64,
        _take: &mut T,
    ) -> Option<FrameRun> {
        None
    }
}

impl FrameSource for CaptureReader {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        CaptureReader::next_frame(self)
    }
    fn input_bytes_read(&self) -> u64 {
        CaptureReader::input_bytes_read(self)
    }
    fn shared_maps(&self) -> Vec<SharedMap> {
        self.shared_map().into_iter().collect()
    }
    fn read_for(&mut self, reading: Reading) {
        CaptureReader::read_for(self, reading);
    }
    fn take_run<T: FnMut(&Frame<'_>) -> bool>(
        &mut self,
        max: u64,
        take: &mut T,
    ) -> Option<FrameRun> {
        CaptureReader::take_run(self, max, take)
    }
}

impl FrameSource for MergedCaptures {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        MergedCaptures::next_frame(self)
    }
    fn input_bytes_read(&self) -> u64 {
        MergedCaptures::input_bytes_read(self)
    }
    fn shared_maps(&self) -> Vec<SharedMap> {
        MergedCaptures::shared_maps(self)
    }
    fn read_for(&mut self, reading: Reading) {
        MergedCaptures::read_for(self, reading);
    }
    fn take_run<T: FnMut(&Frame<'_>) -> bool>(
        &mut self,
        max: u64,
        take: &mut T,
    ) -> Option<FrameRun> {
        MergedCaptures::take_run(self, max, take)
    }
}

/// Where a run stands, for the progress callback (called after every frame).
pub struct Progress<'a> {
    /// Frames read so far.
    pub frames: u64,
    /// Bytes read from the input so far (see [`FrameSource::input_bytes_read`]).
    pub input_bytes: u64,
    pub stats: &'a Stats,
}

/// The progress callback of a run that shows none.
pub fn no_progress(_: &Progress<'_>) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

/// How reading a capture ended.
#[derive(Debug)]
pub enum Ending {
    /// Read to its clean end.
    Clean,
    /// Damaged part-way (cut off, corrupt): everything before it was decoded.
    Damaged(CaptureError),
    /// Stopped before the end: the sink was done or the progress callback said stop. What was
    /// still incomplete is not reported.
    Stopped,
}

/// The capture could not be used at all (missing file, not a capture).
#[derive(Debug)]
pub struct Unusable {
    pub path: String,
    pub source: CaptureError,
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            // It names the path itself.
            CaptureError::Open { .. } => write!(f, "{}", self.source),
            other => write!(f, "{}: {other}", self.path),
        }
    }
}

impl std::error::Error for Unusable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

pub struct RunResult {
    pub stats: Stats,
    /// What reassembly on the reading thread counted (nothing with worker threads).
    pub reassembly: ReassemblyStats,
    pub ending: Ending,
}

/// Exit code of a command that read a capture: 0 ok, 1 damaged but read.
pub fn exit_code(ending: &Ending) -> i32 {
    match ending {
        Ending::Clean | Ending::Stopped => 0,
        Ending::Damaged(_) => 1,
    }
}

/// Open `path` (`-` for stdin) as a capture.
pub fn open(path: &Path) -> Result<CaptureReader, Unusable> {
    named(path, CaptureReader::open(path))
}

/// What opening `path` gave, an error naming it.
fn named(
    path: &Path,
    opened: Result<CaptureReader, CaptureError>,
) -> Result<CaptureReader, Unusable> {
    opened.map_err(|source| Unusable {
        path: path.display().to_string(),
        source,
    })
}

/// Most frames pushed as one run ([`Pipeline::push_run`]): the progress display and a closed
/// output are looked at between runs.
const MAX_RUN: u64 = 4096;

/// Read every frame of `source` through a fresh pipeline into `sink`. `progress` is called
/// after every frame (cheaply: it decides itself how often to draw).
pub fn run_capture<F, S>(
    source: &mut F,
    cfg: PipelineConfig,
    sink: &mut S,
    progress: &mut dyn FnMut(&Progress<'_>) -> ControlFlow<()>,
) -> RunResult
where
    F: FrameSource + ?Sized,
    S: CaptureSink,
{
    // Alone or for workers, through the file's map where that pays; with a thread to spare
    // and no workers, the file read ahead on it.
    source.read_for(cfg.reading());
    let mut pipeline = Pipeline::new(cfg);
    pipeline.share_maps(source.shared_maps());
    let mut frames = 0;
    // Whether to try a run before the next frame: not before the first (a run continues a
    // connection), nor right after a run that stopped short of `MAX_RUN`, at a frame the lane
    // refused or where the source's records stop, where a try would take nothing — that frame
    // is pushed alone, as a worker does (`pipeline::shard`).
    let mut try_run = false;
    let ending = loop {
        // A run of quiet frames taken in one go, else the next frame.
        let run = try_run
            .then(|| {
                pipeline.push_run(
                    |lane| source.take_run(MAX_RUN, &mut |frame| lane.take(frame)),
                    sink,
                )
            })
            .flatten();
        try_run = run.is_none_or(|n| n >= MAX_RUN);
        match run {
            Some(n) => frames += n,
            None => match source.next_frame() {
                Ok(Some(frame)) => {
                    frames += 1;
                    if frames == 1 {
                        sink.on_first_frame(frame.ts);
                    }
                    pipeline.push_frame(&frame, sink);
                }
                Ok(None) => break Ending::Clean,
                Err(e) => break Ending::Damaged(e),
            },
        }
        let at = Progress {
            frames,
            input_bytes: source.input_bytes_read(),
            stats: pipeline.stats(),
        };
        if sink.done() || progress(&at).is_break() {
            break Ending::Stopped;
        }
    };
    if !matches!(ending, Ending::Stopped) {
        pipeline.finish(sink);
    }
    RunResult {
        stats: pipeline.stats().clone(),
        reassembly: pipeline.reassembly_stats().clone(),
        ending,
    }
}

/// Open several captures to be read as one, merged by time: each opened for a look at its
/// first frame ([`CaptureReader::open_to_peek`]), and as [`open`] does when its turn comes.
pub fn open_merged(paths: &[std::path::PathBuf]) -> Result<MergedCaptures, Unusable> {
    let mut merged = MergedCaptures::default();
    for p in paths {
        merged.add(p.clone(), named(p, CaptureReader::open_to_peek(p))?);
    }
    Ok(merged)
}

/// [`open`] and [`run_capture`] without progress: for tests and library users with a file.
pub fn run_path<S: CaptureSink>(
    path: &Path,
    cfg: PipelineConfig,
    sink: &mut S,
) -> Result<RunResult, Unusable> {
    let mut reader = open(path)?;
    Ok(run_capture(&mut reader, cfg, sink, &mut no_progress))
}
