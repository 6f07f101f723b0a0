//! Switches on the tests that need what a plain clone lacks (tshark, tmux, Wireshark,
//! `../shared/real-captures`): `SQOS_EXTERNAL_TESTS=1` or `CI=true` sets `cfg(sqos_external_tests)`.
//! Without it those tests are compiled as ignored, with the reason shown by `cargo test`.

fn main() {
    println!("cargo::rerun-if-env-changed=SQOS_EXTERNAL_TESTS");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rustc-check-cfg=cfg(sqos_external_tests)");
    // cargo-fuzz builds with `--cfg fuzzing` (the chunked reader's chunks are tiny there).
    println!("cargo::rustc-check-cfg=cfg(fuzzing)");
    let on = std::env::var("SQOS_EXTERNAL_TESTS").is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| v == "true");
    if on {
        println!("cargo::rustc-cfg=sqos_external_tests");
    }
    // `sqos --version` names how the binary was optimised (benches/pgo-build.sh), so that a
    // bench row or a bug report says which build it was. Cargo gives a build script the flags
    // in CARGO_ENCODED_RUSTFLAGS but reruns it only when an environment variable it names
    // changes: RUSTFLAGS, as the script passes them.
    println!("cargo::rerun-if-env-changed=RUSTFLAGS");
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    println!("cargo::rustc-env=SQOS_BUILD={}", build_kind(&flags));
}

/// " (PGO build)", " (PGO build, this CPU only)", " (x86-64-v3 CPUs)", " (instrumented for
/// PGO)" or "" from the rustc flags (separated by 0x1f; `-Cx=y` or `-C` then `x=y`).
fn build_kind(flags: &str) -> String {
    let flags: Vec<&str> = flags.split('\x1f').collect();
    let has = |what: &str| flags.iter().any(|f| f.contains(what));
    let mut kind = Vec::new();
    if has("profile-use=") {
        kind.push("PGO build".to_string());
    } else if has("profile-generate") {
        kind.push("instrumented for PGO".to_string());
    }
    // The last one given is the one rustc takes.
    let cpu = flags
        .iter()
        .filter_map(|f| f.split_once("target-cpu="))
        .map(|(_, cpu)| cpu)
        .next_back();
    match cpu {
        Some("native") => kind.push("this CPU only".to_string()),
        Some(cpu) => kind.push(format!("{cpu} CPUs")),
        None => {}
    }
    if kind.is_empty() {
        String::new()
    } else {
        format!(" ({})", kind.join(", "))
    }
}
