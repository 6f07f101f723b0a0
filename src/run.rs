//! Drive one capture through the pipeline: open it, feed every frame, finish, and say how the
//! input ended. Shared by every face (dissect, stats, flows, tui, check).

use std::io::IsTerminal;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};

use crate::capture::{CaptureError, CaptureReader, Timestamp};
use crate::pipeline::{Pipeline, PipelineConfig, RecordSink, Stats};

/// A record sink that also wants to know when the capture starts (for relative times).
pub trait CaptureSink: RecordSink {
    fn on_first_frame(&mut self, _ts: Timestamp) {}
}

/// How reading a capture ended.
#[derive(Debug)]
pub enum Ending {
    /// Read to its clean end.
    Clean,
    /// Damaged part-way (cut off, corrupt): everything before it was decoded.
    Damaged(CaptureError),
}

/// The capture could not be used at all (missing file, not a capture).
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct Unusable {
    pub path: String,
    pub source: CaptureError,
}

pub struct RunResult {
    pub stats: Stats,
    pub ending: Ending,
}

/// Exit code of a command that read a capture: 0 ok, 1 damaged but read.
pub fn exit_code(ending: &Ending) -> i32 {
    match ending {
        Ending::Clean => 0,
        Ending::Damaged(_) => 1,
    }
}

/// Read `path` (`-` for stdin) through a fresh pipeline into `sink`.
/// A progress bar is drawn on stderr when it is a terminal and `progress` is set.
pub fn run_capture<S: CaptureSink>(
    path: &Path,
    cfg: PipelineConfig,
    sink: &mut S,
    progress: bool,
) -> Result<RunResult, Unusable> {
    let unusable = |source| Unusable {
        path: path.display().to_string(),
        source,
    };
    let reader = CaptureReader::open(path).map_err(unusable)?;
    let bar = progress_bar(path, progress);
    drive(&path.display().to_string(), reader, cfg, sink, bar)
}

/// Like `run_capture`, for a capture already open (bytes from memory, a socket, an object
/// store); `name` names it in errors.
pub fn run_reader<S: CaptureSink>(
    name: &str,
    reader: CaptureReader,
    cfg: PipelineConfig,
    sink: &mut S,
) -> Result<RunResult, Unusable> {
    drive(name, reader, cfg, sink, None)
}

fn drive<S: CaptureSink>(
    name: &str,
    mut reader: CaptureReader,
    cfg: PipelineConfig,
    sink: &mut S,
    bar: Option<ProgressBar>,
) -> Result<RunResult, Unusable> {
    let mut pipeline = Pipeline::new(cfg);
    let mut ending = Ending::Clean;
    loop {
        match reader.next_frame() {
            Ok(Some(frame)) => {
                if frame.number == 1 {
                    sink.on_first_frame(frame.ts);
                }
                pipeline.push_frame(&frame, sink)
            }
            Ok(None) => break,
            Err(e) => {
                // Nothing at all was read: the input is not a capture we can use.
                if reader.frames_read() == 0 && matches!(e, CaptureError::NotACapture { .. }) {
                    return Err(Unusable {
                        path: name.to_string(),
                        source: e,
                    });
                }
                ending = Ending::Damaged(e);
                break;
            }
        }
        if let Some(bar) = &bar {
            if reader.frames_read() % 4096 == 0 {
                bar.set_position(reader.input_bytes_read());
            }
        }
    }
    pipeline.finish(sink);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(RunResult {
        stats: pipeline.stats().clone(),
        ending,
    })
}

fn progress_bar(path: &Path, wanted: bool) -> Option<ProgressBar> {
    if !wanted || !std::io::stderr().is_terminal() || path == Path::new("-") {
        return None;
    }
    let len = std::fs::metadata(path).ok()?.len();
    // Small files finish before a bar is worth drawing. The position is in file bytes (before
    // decompression), so the file size is the total for gzip input too.
    if len < 64 << 20 {
        return None;
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    Some(bar)
}
