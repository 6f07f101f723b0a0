//! Subcommands. Exit codes: 0 ok, 1 capture damaged but read (or, for checks, a check failed),
//! 2 unusable input or usage error.

mod check;
mod dissect;
mod export;
mod flows;
mod partition;
mod plot;
mod stats;
mod synth;
mod tui;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use sqos::net::ReassemblyConfig;
use sqos::pipeline::PipelineConfig;
use sqos::smb2::crypto::KeyRing;

#[derive(Parser)]
#[command(
    name = "sqos",
    version,
    about = "Dissect and analyze MS-SQOS (Storage QoS over SMB3) in pcap/pcapng captures"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One line per SQOS message (tshark-like), or the full tree (-V), hex (-x), JSON.
    Dissect(dissect::DissectArgs),
    /// Connections, SMB2 messages per command, encrypted, gaps, resyncs, SQOS messages.
    Stats(stats::StatsArgs),
    /// One row per logical flow (VM disk): policy, IOPS reported and observed, findings.
    Flows(flows::FlowsArgs),
    /// Messages, flows, per-interval series or findings as JSON lines, CSV or Parquet.
    Export(export::ExportArgs),
    /// Per-flow IOPS over time with MaximumIoRate / MinimumIoRate, as SVG or PNG.
    Plot(plot::PlotArgs),
    /// Judge captures against a rules file and/or a saved flow table, for CI (exit 0/1/2).
    Check(check::CheckArgs),
    /// Generate Hyper-V ↔ Scale-Out File Server traffic with SQOS (deterministic with --seed).
    Synth(sqos::synth::SynthArgs),
    /// Interactive terminal UI: flows, charts, messages with field tree and hex, findings.
    Tui(tui::TuiArgs),
}

/// Options every command that reads a capture shares.
#[derive(Args, Clone)]
pub struct InputArgs {
    /// pcap or pcapng file (gzip allowed); `-` reads standard input.
    pub capture: PathBuf,
    /// Extra TCP ports to treat as SMB (445 and 139 always are).
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,
    /// No progress bar on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// SMB3 keys to decrypt encrypted sessions: Wireshark's "SMB2 Secret Keys" file
    /// (`smb2_seskey_list`; one session a line: session id, session key, server-to-client key,
    /// client-to-server key, in hex). Repeatable.
    #[arg(long = "keys", value_name = "FILE", value_parser = load_key_file_arg)]
    pub keys: Vec<KeyFileArg>,
}

impl InputArgs {
    pub fn pipeline_config(&self) -> PipelineConfig {
        let mut reassembly = ReassemblyConfig::default();
        for p in &self.ports {
            if !reassembly.ports.contains(p) {
                reassembly.ports.push(*p);
            }
        }
        PipelineConfig {
            reassembly,
            keys: key_ring(&self.keys),
        }
    }
}

/// A `--keys` file, read when the arguments are parsed (a bad file is a usage error, exit 2).
#[derive(Clone, Debug)]
pub struct KeyFileArg(Arc<KeyRing>);

fn load_key_file(s: &str) -> Result<KeyFileArg, String> {
    let mut ring = KeyRing::default();
    ring.load(Path::new(s)).map_err(|e| e.to_string())?;
    Ok(KeyFileArg(Arc::new(ring)))
}

/// The `--keys` value parser, for commands with their own arguments.
pub fn load_key_file_arg(s: &str) -> Result<KeyFileArg, String> {
    load_key_file(s)
}

/// All `--keys` files together.
pub fn key_ring(files: &[KeyFileArg]) -> Arc<KeyRing> {
    match files {
        [] => Arc::default(),
        [one] => Arc::clone(&one.0),
        many => {
            let mut ring = KeyRing::default();
            for f in many {
                ring.extend(&f.0);
            }
            Arc::new(ring)
        }
    }
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    match cli.command {
        Command::Dissect(a) => dissect::run(&a),
        Command::Stats(a) => stats::run(&a),
        Command::Flows(a) => flows::run(&a),
        Command::Export(a) => export::run(&a),
        Command::Plot(a) => plot::run(&a),
        Command::Check(a) => check::run(&a),
        Command::Synth(a) => synth::run(&a),
        Command::Tui(a) => tui::run_tui(&a),
    }
}

/// Report how the input ended on stderr and turn it into the exit code. Encrypted messages
/// left closed are said once here, whatever the command.
pub fn finish(path: &std::path::Path, result: &sqos::run::RunResult) -> i32 {
    if let Some(s) = result.stats.undecrypted_summary() {
        eprintln!("sqos: {}: {s}", path.display());
    }
    if let sqos::run::Ending::Damaged(e) = &result.ending {
        eprintln!(
            "sqos: {}: {e} (everything before it was decoded)",
            path.display()
        );
    }
    sqos::run::exit_code(&result.ending)
}

/// Print the unusable-input error and return exit code 2.
pub fn unusable(e: &sqos::run::Unusable) -> i32 {
    eprintln!("sqos: {e}");
    2
}
