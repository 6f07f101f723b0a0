//! Where record streams go (`dissect`, `export` rows): standard output or a file.
//!
//! - Live: when someone reads the records as they come — stdout is a pipe or a terminal, or the
//!   input is itself live (standard input) — each record is flushed as soon as it is written, so
//!   `tcpdump -w - | sqos dissect - | grep …` shows a message when it completes, not when a
//!   buffer fills. Into a file or /dev/null, records are buffered.
//! - Closed: the first write error ends the output; a pipe whose reader has gone (`| head -1`)
//!   is also noticed without writing, so the run stops at once instead of reading the rest of
//!   a large capture for nobody.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use rustix::event::{poll, PollFd, PollFlags, Timespec};

/// Calls of [`RecordOut::closed`] between two looks at the pipe (one `poll` each).
const CHECK_EVERY: u32 = 4096;

pub struct RecordOut {
    inner: BufWriter<Box<dyn Write + Send>>,
    live: bool,
    /// Standard output when it is a pipe: watched for its reader going away.
    pipe: bool,
    countdown: Cell<u32>,
    failed: bool,
}

impl RecordOut {
    /// Standard output; `live_input` when the capture itself arrives live (stdin).
    pub fn stdout(live_input: bool) -> Self {
        let stdout = io::stdout();
        let pipe = is_pipe(&stdout);
        let live = live_input || pipe || stdout.is_terminal();
        RecordOut {
            inner: BufWriter::new(Box::new(stdout)),
            live,
            pipe,
            countdown: Cell::new(0),
            failed: false,
        }
    }

    /// A file (`-o FILE`): buffered unless the input is live.
    pub fn file(path: &Path, live_input: bool) -> io::Result<Self> {
        Ok(RecordOut {
            inner: BufWriter::new(Box::new(File::create(path)?)),
            live: live_input,
            pipe: false,
            countdown: Cell::new(0),
            failed: false,
        })
    }

    pub fn is_live(&self) -> bool {
        self.live
    }

    /// The end of a record: flushed now when the output is live.
    pub fn end_record(&mut self) {
        if self.live && !self.failed && self.inner.flush().is_err() {
            self.failed = true;
        }
    }

    /// True once nobody can read what is written: a write failed, or the pipe's reader is gone.
    /// Cheap enough to ask after every frame: the pipe is looked at every [`CHECK_EVERY`] calls.
    pub fn closed(&self) -> bool {
        if self.failed {
            return true;
        }
        if !self.pipe {
            return false;
        }
        let n = self.countdown.get();
        if n > 0 {
            self.countdown.set(n - 1);
            return false;
        }
        self.countdown.set(CHECK_EVERY);
        reader_gone()
    }
}

impl Write for RecordOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf).inspect_err(|_| self.failed = true)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().inspect_err(|_| self.failed = true)
    }
}

fn is_pipe(stdout: &io::Stdout) -> bool {
    stdout
        .as_fd()
        .try_clone_to_owned()
        .map(File::from)
        .and_then(|f| f.metadata())
        .is_ok_and(|m| m.file_type().is_fifo())
}

/// A pipe's write end reports an error condition once its last reader has closed.
fn reader_gone() -> bool {
    let stdout = io::stdout();
    let mut fds = [PollFd::new(&stdout, PollFlags::OUT)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&now)) {
        Ok(_) => fds
            .first()
            .is_some_and(|f| f.revents().intersects(PollFlags::ERR | PollFlags::HUP)),
        Err(_) => false,
    }
}
