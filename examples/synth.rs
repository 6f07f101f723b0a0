//! Runs the generator outside the main CLI: `cargo run --release --example synth -- --scenario
//! large --size 1GiB -o /tmp/large.pcap` (same options as `sqos synth`).

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: sqos::synth::SynthArgs,
}

fn main() {
    let cli = Cli::parse();
    let started = std::time::Instant::now();
    match sqos::synth::run(&cli.args) {
        Ok(s) => {
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "{}: {} frames, {} bytes, {} I/Os, {} SQOS requests in {:.2} s ({:.0} MB/s)",
                cli.args.output.display(),
                s.frames,
                s.capture_bytes,
                s.ios,
                s.sqos_requests,
                secs,
                s.capture_bytes as f64 / secs / 1e6
            );
        }
        Err(e) => {
            eprintln!("sqos synth: {e}");
            std::process::exit(1);
        }
    }
}
