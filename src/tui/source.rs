//! The inputs `sqos tui` reads from: a capture file, standard input, a file still being written
//! (`--follow`), or a live interface (through `tcpdump`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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

/// The capture filter for SMB on port 445 and the extra ports.
pub fn bpf_filter(ports: &[u16]) -> String {
    let mut all = vec![445u16];
    for p in ports {
        if !all.contains(p) {
            all.push(*p);
        }
    }
    all.iter()
        .map(|p| format!("tcp port {p}"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Start `tcpdump` writing pcap to its stdout (unbuffered, full frames) for `iface`.
/// Needs tcpdump installed and root or CAP_NET_RAW + CAP_NET_ADMIN on tcpdump.
pub fn spawn_tcpdump(iface: &str, ports: &[u16]) -> std::io::Result<Child> {
    Command::new("tcpdump")
        .args(["-i", iface, "-w", "-", "-U", "-s", "0", "-n"])
        .arg(bpf_filter(ports))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

/// Why tcpdump produced no capture: its own last words (permissions, no such interface).
pub fn tcpdump_error(stderr: Option<std::process::ChildStderr>, fallback: &str) -> String {
    let mut buf = Vec::new();
    if let Some(err) = stderr {
        let _ = err.take(4096).read_to_end(&mut buf);
    }
    let said = String::from_utf8_lossy(&buf).trim().to_string();
    if said.is_empty() {
        format!("tcpdump: {fallback}")
    } else {
        format!("tcpdump: {said}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_has_445_once_and_the_extra_ports() {
        assert_eq!(bpf_filter(&[]), "tcp port 445");
        assert_eq!(bpf_filter(&[445, 8445]), "tcp port 445 or tcp port 8445");
    }

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
