//! End-to-end: the real `sqos tui` binary in a tmux pane, driven with keys, read back with
//! `tmux capture-pane`. Needs tmux: switched on by SQOS_EXTERNAL_TESTS=1 (tests/it/support/need.rs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn capture() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let p = root.join("captures/steady.pcap.gz");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: {} not there", p.display());
        None
    }
}

/// A detached tmux session running one shell command; killed when dropped.
struct Pane {
    name: String,
}

impl Pane {
    fn start(tag: &str, w: u16, h: u16, cmd: &str) -> Pane {
        let name = format!("sqos-e2e-{tag}-{}", std::process::id());
        let st = Command::new("tmux")
            .args(["new-session", "-d", "-s", &name, "-x"])
            .arg(w.to_string())
            .arg("-y")
            .arg(h.to_string())
            .arg(cmd)
            .env_remove("NO_COLOR")
            .env("TERM", "xterm-256color")
            .status()
            .expect("tmux new-session");
        assert!(st.success(), "tmux new-session failed");
        Pane { name }
    }

    fn text(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            let st = Command::new("tmux")
                .args(["send-keys", "-t", &self.name, k])
                .status()
                .expect("tmux send-keys");
            assert!(st.success());
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    /// Wait until the screen satisfies `ok` (or fail with the last screen).
    fn wait_for(&self, what: &str, secs: u64, ok: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            let t = self.text();
            if ok(&t) {
                return t;
            }
            if Instant::now() > end {
                panic!("timed out waiting for {what}; screen:\n{t}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

fn line<'a>(screen: &'a str, needle: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{screen}"))
}

#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tmux (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn navigate_flows_detail_chart_messages_and_filter() {
    crate::support::need::tmux();
    let Some(cap) = capture() else { return };
    let cmd = format!(
        // `-r` as in tshark.
        "{} tui -r {}; echo EXIT=$?; sleep 30",
        env!("CARGO_BIN_EXE_sqos"),
        cap.display()
    );
    let pane = Pane::start("nav", 80, 24, &cmd);
    let s = pane.wait_for("the flows read to the end", 20, |t| {
        t.contains("done ·") && t.contains("vm04")
    });
    assert!(line(&s, "Flows 4").contains("Flows 4"), "{s}");
    for vm in ["vm01", "vm02", "vm03", "vm04"] {
        let l = line(&s, vm);
        assert!(l.contains(" Ok "), "{vm} status Ok: {l}");
    }
    assert!(line(&s, "vm01").contains("120/30"), "{s}");
    assert!(line(&s, "vm04").contains("80/0"), "{s}");
    assert!(line(&s, "vm01").contains("HV01"), "{s}");
    assert!(line(&s, "vm04").contains("HV02"), "{s}");
    assert!(s.contains("q quit"), "{s}");

    // Sorted by name, the second flow → its detail with the chart and the server's limit lines.
    pane.keys(&["s", "j", "Enter"]);
    let s = pane.wait_for("the detail of vm02", 5, |t| t.contains("vm02 @ HV01"));
    assert!(line(&s, "server").contains("Ok  max 100"), "{s}");
    assert!(s.contains("Normalized IOPS over time"), "{s}");
    assert!(s.contains("MaximumIoRate"), "{s}");

    // Its messages: the list, the field tree, the hex.
    pane.keys(&["m"]);
    let s = pane.wait_for("the messages of vm02", 5, |t| t.contains("Fields · frame"));
    assert!(
        s.lines()
            .any(|l| l.contains(" Messages ") && l.contains("· flow ")),
        "scoped to the flow: {s}"
    );
    assert!(s.contains("STORAGE_QOS_CONTROL_REQUEST"), "{s}");
    assert!(s.contains("Hex · "), "{s}");
    assert!(s.contains("0000  01 01 00 00"), "{s}");

    // Back to the flows, filter by typing.
    pane.keys(&["1", "/", "v", "m", "0", "3", "Enter"]);
    let s = pane.wait_for("the filtered flows", 5, |t| t.contains("Flows 1 of 4"));
    assert!(s.contains("vm03"), "{s}");
    assert!(!s.contains("vm01"), "{s}");

    pane.keys(&["q"]);
    let s = pane.wait_for("the exit", 5, |t| t.contains("EXIT="));
    assert!(s.contains("EXIT=0"), "{s}");
}

#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tmux (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn a_slow_stdin_stream_fills_the_flows_before_it_ends() {
    crate::support::need::tmux();
    let Some(cap) = capture() else { return };
    let len = std::fs::metadata(&cap).unwrap().len();
    let half = len / 2;
    let cmd = format!(
        "(head -c {half} {f}; sleep 4; tail -c +{rest} {f}) | {bin} tui -; echo EXIT=$?; sleep 30",
        f = cap.display(),
        rest = half + 1,
        bin = env!("CARGO_BIN_EXE_sqos"),
    );
    let pane = Pane::start("slow", 100, 30, &cmd);
    // While the stream is paused half-way: flows shown, still reading.
    let s = pane.wait_for("flows from the first half", 4, |t| {
        t.contains("vm01") && t.contains("vm04")
    });
    assert!(line(&s, "sqos").contains("live "), "still reading: {s}");
    assert!(!s.contains("done ·"), "not at the end yet: {s}");
    let frames_then: u64 = frames(&s);
    assert!(frames_then > 0, "{s}");
    // Then the rest arrives and the stream ends.
    let s = pane.wait_for("the end of the stream", 15, |t| t.contains("done ·"));
    assert!(frames(&s) > frames_then, "{s}");
    pane.keys(&["q"]);
    let s = pane.wait_for("the exit", 5, |t| t.contains("EXIT="));
    assert!(s.contains("EXIT=0"), "{s}");
}

/// The frame count in the title bar.
fn frames(screen: &str) -> u64 {
    let l = line(screen, " frames ");
    let before = l.split(" frames").next().unwrap_or("");
    before
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no frame count in {l}"))
}

#[test]
fn without_a_terminal_it_refuses_and_points_to_dissect_and_flows() {
    let out = Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(["tui", "no-such.pcap"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a terminal"), "{err}");
    assert!(err.contains("sqos dissect"), "{err}");
    assert!(err.contains("sqos flows"), "{err}");
}
