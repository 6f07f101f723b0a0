//! The generator as a library: writes the `large` benchmark stream of a given size with
//! [`sqos::synth::run`] and a plain [`SynthConfig`], and says how fast that went.
//!
//!   cargo run --release --example synth -- 1GiB /tmp/large.pcap
//!
//! (`sqos synth` takes every option; this is the library call behind it.)

use sqos::synth::{parse_size, Scenario, SynthConfig};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(size), Some(output)) = (args.first(), args.get(1)) else {
        eprintln!("usage: synth SIZE OUTPUT   (e.g. synth 1GiB /tmp/large.pcap)");
        std::process::exit(2);
    };
    let size = match parse_size(size) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("synth: {e}");
            std::process::exit(2);
        }
    };
    let mut cfg = SynthConfig::new(Scenario::Large, output);
    cfg.size = Some(size);
    let started = std::time::Instant::now();
    match sqos::synth::run(&cfg) {
        Ok(s) => {
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "{output}: {} frames, {} bytes, {} I/Os, {} SQOS requests in {:.2} s ({:.0} MB/s)",
                s.frames,
                s.capture_bytes,
                s.ios,
                s.sqos_requests,
                secs,
                s.capture_bytes as f64 / secs / 1e6
            );
        }
        Err(e) => {
            eprintln!("synth: {e}");
            std::process::exit(1);
        }
    }
}
