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
}
