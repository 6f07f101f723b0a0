//! The inputs `sqos tui` reads from: a capture file, standard input, a file still being written
//! (`--follow`), or a live interface (through `tcpdump`, [`crate::capture::live`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where the capture comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    File(PathBuf),
    Stdin,
    Follow(PathBuf),
    /// Live capture on an interface; extra SMB ports beside 445.
    Interface {
        name: String,
        ports: Vec<u16>,
    },
}

impl Input {
    pub fn label(&self) -> String {
        match self {
            Input::File(p) => p.display().to_string(),
            Input::Stdin => "stdin".into(),
            Input::Follow(p) => format!("{} (following)", p.display()),
            Input::Interface { name, .. } => format!("live: {name}"),
        }
    }
}

/// Waits and reads again at the end of a file that is still being written, like `tail -f`.
pub struct FollowReader<R> {
    inner: R,
    stop: Arc<AtomicBool>,
    poll: Duration,
}

impl<R> FollowReader<R> {
    pub fn new(inner: R, stop: Arc<AtomicBool>, poll: Duration) -> Self {
        FollowReader { inner, stop, poll }
    }
}

impl<R: Read> Read for FollowReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.inner.read(buf)?;
            if n > 0 || buf.is_empty() || self.stop.load(Ordering::Relaxed) {
                return Ok(n);
            }
            std::thread::sleep(self.poll);
        }
    }
}

/// Open a file for following; it must exist (it may still be empty).
pub fn open_follow(path: &Path, stop: Arc<AtomicBool>) -> std::io::Result<impl Read + Send> {
    let f = std::fs::File::open(path)?;
    Ok(FollowReader::new(f, stop, Duration::from_millis(200)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that returns its chunks one per call, then "EOF" until more are appended.
    struct Growing {
        chunks: std::collections::VecDeque<Vec<u8>>,
        eofs: usize,
    }
    impl Read for Growing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.eofs > 0 {
                self.eofs -= 1;
                return Ok(0);
            }
            self.eofs = 2;
            match self.chunks.pop_front() {
                Some(c) => {
                    let n = c.len().min(buf.len());
                    buf[..n].copy_from_slice(&c[..n]);
                    Ok(n)
                }
                None => Ok(0),
            }
        }
    }

    #[test]
    fn follow_reader_waits_through_eof_until_data_or_stop() {
        let stop = Arc::new(AtomicBool::new(false));
        let g = Growing {
            chunks: vec![b"ab".to_vec(), b"cd".to_vec()].into(),
            eofs: 0,
        };
        let mut r = FollowReader::new(g, stop.clone(), Duration::from_millis(1));
        let mut buf = [0u8; 8];
        assert_eq!(r.read(&mut buf).unwrap(), 2);
        // Two EOFs come before "cd": the follower waits through them.
        assert_eq!(r.read(&mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"cd");
        stop.store(true, Ordering::Relaxed);
        assert_eq!(r.read(&mut buf).unwrap(), 0);
    }
}
