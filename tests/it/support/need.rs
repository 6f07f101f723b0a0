//! What a plain clone lacks: tshark, tmux, the Wireshark GUI stack, `../shared/real-captures`.
//!
//! Tests that need one of them carry
//! `#[cfg_attr(not(sqos_external_tests), ignore = "needs …")]`: without the switch they are
//! listed as ignored with the reason (visible in `cargo test`'s output, never a silent pass).
//! The switch is `SQOS_EXTERNAL_TESTS=1` (or `CI=true`), read by build.rs; `.ci/run` sets it.
//! When it is on, these functions fail the test if the thing is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn missing(what: &str, install: &str) -> ! {
    panic!(
        "{what} is missing, and the tests that need it are switched on \
         (SQOS_EXTERNAL_TESTS=1 or CI=true): {install}"
    )
}

pub fn tshark() {
    if !runs("tshark", &["--version"]) {
        missing("tshark", "apt-get install tshark (.ci/run does)");
    }
}

/// tcpdump, and the right to capture on the loopback interface (root or CAP_NET_RAW).
pub fn tcpdump() {
    if !runs("tcpdump", &["--version"]) {
        missing("tcpdump", "apt-get install tcpdump (.ci/run does)");
    }
    if !runs("tcpdump", &["-i", "lo", "-d"]) {
        missing(
            "the right to capture on lo",
            "run the tests as root, or give tcpdump CAP_NET_RAW and CAP_NET_ADMIN",
        );
    }
}

pub fn tmux() {
    if !runs("tmux", &["-V"]) {
        missing("tmux", "apt-get install tmux (.ci/run does)");
    }
}

/// `shared/real-captures` beside the repository (CI puts `shared/` next to the clone); from a git
/// worktree deeper down, the nearest ancestor that has it.
pub fn real_captures() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    match repo
        .ancestors()
        .skip(1)
        .map(|a| a.join("shared/real-captures"))
        .find(|p| p.is_dir())
    {
        Some(dir) => dir,
        None => missing(
            "../shared/real-captures",
            "check out the shared folder beside the repository (CI does)",
        ),
    }
}

/// One capture of `shared/real-captures`.
pub fn real_capture(name: &str) -> PathBuf {
    let p = real_captures().join(name);
    if !p.is_file() {
        missing(&p.display().to_string(), "the shared folder is incomplete");
    }
    p
}

/// The Wireshark GUI test's tools: wireshark, tshark, Xvfb, xdotool, dbus, AT-SPI, pyatspi.
pub fn gui_tools(python: &str) {
    let checks: [(&str, &str, &[&str]); 6] = [
        ("wireshark (apt: wireshark-qt)", "wireshark", &["--version"]),
        ("tshark", "tshark", &["--version"]),
        ("Xvfb (apt: xvfb)", "sh", &["-c", "command -v Xvfb"]),
        ("xdotool", "sh", &["-c", "command -v xdotool"]),
        (
            "dbus-run-session (apt: dbus)",
            "sh",
            &["-c", "command -v dbus-run-session"],
        ),
        (
            "pyatspi (apt: python3-pyatspi)",
            python,
            &["-c", "import pyatspi"],
        ),
    ];
    let mut absent: Vec<&str> = checks
        .iter()
        .filter(|(_, program, args)| !runs(program, args))
        .map(|(name, _, _)| *name)
        .collect();
    if [
        "/usr/libexec/at-spi-bus-launcher",
        "/usr/libexec/at-spi2-registryd",
    ]
    .iter()
    .any(|p| !Path::new(p).exists())
    {
        absent.push("at-spi2-core");
    }
    if !absent.is_empty() {
        missing(
            &absent.join(", "),
            "apt-get install --no-install-recommends wireshark-qt xvfb xdotool dbus \
             python3-pyatspi at-spi2-core (.ci/run does)",
        );
    }
}
