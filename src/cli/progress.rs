//! The progress bar on stderr while a large capture file is read (not for pipes, small files, or
//! when stderr is not a terminal).

use std::io::IsTerminal;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};

use sqos::run::Progress;

/// Files below this finish before a bar is worth drawing.
const MIN_SIZE: u64 = 64 << 20;

pub struct Bar(Option<ProgressBar>);

impl Bar {
    /// A bar for reading `paths` (one after the other or merged), when `wanted` and worth it.
    pub fn new(paths: &[PathBuf], wanted: bool) -> Self {
        Bar(make(paths, wanted))
    }

    /// The run's progress callback: moves the bar every 4096 frames.
    pub fn update(&mut self, p: &Progress<'_>) -> ControlFlow<()> {
        if let Some(bar) = &self.0 {
            if p.frames % 4096 == 0 {
                bar.set_position(p.input_bytes);
            }
        }
        ControlFlow::Continue(())
    }

    pub fn finish(self) {
        if let Some(bar) = self.0 {
            bar.finish_and_clear();
        }
    }
}

fn make(paths: &[PathBuf], wanted: bool) -> Option<ProgressBar> {
    if !wanted || !std::io::stderr().is_terminal() || paths.iter().any(|p| p == Path::new("-")) {
        return None;
    }
    // The position is in file bytes (before decompression), so the files' size is the total
    // for gzip input too.
    let mut len = 0;
    for p in paths {
        len += std::fs::metadata(p).ok()?.len();
    }
    if len < MIN_SIZE {
        return None;
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    Some(bar)
}
