//! Live capture through `tcpdump` (`sqos dissect -i`, `sqos tui -i`): it writes pcap to a pipe,
//! unbuffered and with whole frames, filtered to the SMB ports; we read the pipe like any capture.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

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

/// What a command says when tcpdump cannot be started.
pub fn cannot_run(iface: &str, e: &std::io::Error, command: &str) -> String {
    format!(
        "cannot run tcpdump ({e}); install tcpdump, or capture yourself: \
         tcpdump -i {iface} -w - -U port 445 | sqos {command} -"
    )
}

/// Why tcpdump produced no capture: its own last words (permissions, no such interface).
pub fn tcpdump_error(stderr: Option<ChildStderr>, fallback: &str) -> String {
    let mut buf = Vec::new();
    if let Some(err) = stderr {
        let _ = err.take(4096).read_to_end(&mut buf);
    }
    said_or(&String::from_utf8_lossy(&buf), fallback)
}

fn said_or(said: &str, fallback: &str) -> String {
    let said = said.trim();
    if said.is_empty() {
        format!("tcpdump: {fallback}")
    } else {
        format!("tcpdump: {said}")
    }
}

/// tcpdump's stderr passed on line by line as "tcpdump: …" (its "listening on" line tells the
/// user capture has begun), the last lines kept to explain a failure.
pub struct Relay {
    thread: JoinHandle<()>,
    tail: Arc<Mutex<Vec<String>>>,
}

impl Relay {
    pub fn start(stderr: ChildStderr) -> Relay {
        let tail = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&tail);
        let thread = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                // tcpdump names itself in its errors, not in its "listening on" line.
                let line = line.strip_prefix("tcpdump: ").unwrap_or(&line).to_string();
                eprintln!("tcpdump: {line}");
                if let Ok(mut t) = kept.lock() {
                    if t.len() == 4 {
                        t.remove(0);
                    }
                    t.push(line);
                }
            }
        });
        Relay { thread, tail }
    }

    /// Wait for tcpdump's stderr to close; what it said first when things went wrong (its
    /// reason; later lines repeat it), or `fallback`.
    pub fn finish(self, fallback: &str) -> String {
        let _ = self.thread.join();
        let said = self
            .tail
            .lock()
            .ok()
            .and_then(|t| t.first().cloned())
            .unwrap_or_default();
        said_or(&said, fallback)
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

    #[test]
    fn error_prefers_what_tcpdump_said() {
        assert_eq!(said_or("  \n", "eof"), "tcpdump: eof");
        assert_eq!(
            said_or("lo0: No such device exists\n", "eof"),
            "tcpdump: lo0: No such device exists"
        );
    }
}
