//! Subcommands. Exit codes: 0 ok, 1 capture damaged but read (or, for checks, a check failed),
//! 2 unusable input or usage error.

mod annotate;
mod check;
mod dissect;
mod docs;
mod export;
mod filter;
mod flows;
mod out;
mod partition;
mod plot;
mod progress;
mod separate;
mod stats;
mod synth;
mod threads;
mod tui;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use sqos::analysis::AnalyzerConfig;
use sqos::budget::Budget;
use sqos::pipeline::PipelineConfig;
use sqos::smb2::crypto::KeyRing;

#[derive(Parser)]
#[command(
    name = "sqos",
    // build.rs: " (PGO build)" and the like, or nothing for a plain build.
    version = concat!(env!("CARGO_PKG_VERSION"), env!("SQOS_BUILD")),
    about = "Dissect and analyze MS-SQOS (Storage QoS over SMB3) in pcap/pcapng captures",
    after_help = "\
Examples:
  sqos dissect captures/steady.pcap.gz
  sqos flows capture.pcapng --vm vm03
  sqos tui capture.pcapng
See `sqos COMMAND --help`, and docs/ in the repository (filter.md, analysis.md, check.md)."
)]
pub struct Cli {
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
    Synth(synth::SynthArgs),
    /// Interactive terminal UI: flows, charts, messages with field tree and hex, findings.
    Tui(tui::TuiArgs),
    /// Each SQOS message with its flow and figures, then the flows, as versioned JSON lines
    /// (what the Wireshark plugin shows, plugin/README.md).
    Annotate(annotate::AnnotateArgs),
    /// Shell completion script for bash, zsh, fish, elvish or PowerShell.
    Completions(docs::CompletionsArgs),
    /// The manual page (roff), generated from this command line.
    Man(docs::ManArgs),
}

impl Command {
    /// The capture options of the commands that read one capture.
    fn input_mut(&mut self) -> Option<&mut InputArgs> {
        match self {
            // A live capture names no file.
            Command::Dissect(a) if a.interface.is_some() => None,
            Command::Dissect(a) => Some(&mut a.input),
            Command::Stats(a) => Some(&mut a.input),
            Command::Flows(a) => Some(&mut a.input),
            Command::Export(a) => Some(&mut a.input),
            Command::Plot(a) => Some(&mut a.input),
            Command::Annotate(a) => Some(&mut a.input),
            Command::Check(_)
            | Command::Synth(_)
            | Command::Tui(_)
            | Command::Completions(_)
            | Command::Man(_) => None,
        }
    }
}

impl Command {
    /// `--separate` with several files: each file run on its own ([`separate::run`]); `None`
    /// when the command reads its captures itself.
    fn separate(&mut self) -> Option<i32> {
        let input = self.input_mut()?;
        if !input.separate {
            return None;
        }
        let paths = match input.capture_paths() {
            Ok(p) => p,
            Err(e) => {
                eprintln!("sqos: {e}");
                return Some(2);
            }
        };
        if paths.len() < 2 {
            return None;
        }
        let share = threads::share(input.threads, paths.len(), threads::cores());
        if paths.iter().any(|p| p.as_os_str() == "-") {
            eprintln!("sqos: --separate reads files, not standard input (`-`)");
            return Some(2);
        }
        let rows = match self {
            Command::Dissect(a) => a.separate_rows(),
            Command::Stats(a) => Ok(a.separate_rows()),
            Command::Flows(a) => Ok(a.separate_rows()),
            Command::Export(a) => a.separate_rows(),
            Command::Annotate(_) => Ok(separate::Rows::JsonLines),
            _ => Err(
                "--separate is for commands that print rows (dissect, stats, flows, \
                      export, annotate)"
                    .to_string(),
            ),
        };
        Some(match rows {
            Ok(rows) => separate::run(&paths, rows, share),
            Err(e) => {
                eprintln!("sqos: {e}");
                2
            }
        })
    }
}

/// Options every command that reads a capture shares.
#[derive(Args, Clone)]
pub struct InputArgs {
    /// pcap or pcapng file (gzip allowed); `-` reads standard input. Several files (or quoted
    /// globs, e.g. 'rotated-*.pcap') are one capture, their frames merged by time: rotated
    /// captures (`tcpdump -G/-C`, `dumpcap -b`) read as if they were one file.
    #[arg(num_args = 1.., value_name = "CAPTURE")]
    pub captures: Vec<PathBuf>,
    /// The capture to read, as tshark takes it (instead of CAPTURE).
    #[arg(short = 'r', long = "read-file", value_name = "FILE")]
    pub read_file: Option<PathBuf>,
    /// Extra TCP ports to treat as SMB (445 and 139 always are).
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,
    /// No progress bar on stderr.
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub memory: MemoryArg,
    /// SMB3 keys to decrypt encrypted sessions: Wireshark's "SMB2 Secret Keys" file
    /// (`smb2_seskey_list`; one session a line: session id, session key, server-to-client key,
    /// client-to-server key, in hex). Repeatable.
    #[arg(long = "keys", value_name = "FILE", value_parser = load_key_file_arg)]
    pub keys: Vec<KeyFileArg>,
    /// With several captures: analyse each file on its own instead of as one timeline, in
    /// parallel (up to one file per core); every row is labelled with its file, and the files
    /// are written in the order given.
    #[arg(long)]
    pub separate: bool,
    /// Threads for one capture: 2 is the reading thread and one that reads the file ahead of
    /// it, the two sharing the copying (bulk traffic in a file whose pages map cheaply: read
    /// through the map, alone); N > 2 adds N - 2 workers its connections are shared
    /// out among (not with `--keys` or `dissect -x`/`-w`). The output is the same whatever N.
    /// Default: 2 where the machine has a second core, else 1; workers only when asked, since
    /// on the machines measured they were slower than one thread (docs/performance.md).
    /// Captures that are not regular files (stdin, pipes) use one. With `--separate`, N is the
    /// run's budget: files in parallel times threads per file. With one thread, or with
    /// workers, a regular file is read through its memory map where a look at it finds that
    /// cheaper than copying it.
    /// `SQOS_READ=map` always reads through the map (the second thread maps its pages ahead),
    /// `SQOS_READ=chunks` never.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
}

/// `--memory`: the run's memory budget (docs/robustness.md).
#[derive(Args, Clone, Copy, Debug)]
pub struct MemoryArg {
    /// Memory budget for the state sqos keeps (connections, reassembly, pending requests,
    /// opens, flows): `64M`, `1G`… When a share is full, what it drops is counted and reported.
    #[arg(long = "memory", value_name = "SIZE", default_value = "64M", value_parser = sqos::budget::parse_size)]
    pub bytes: usize,
}

impl MemoryArg {
    pub fn budget(&self) -> Budget {
        Budget::new(self.bytes)
    }

    pub fn analyzer_config(&self) -> AnalyzerConfig {
        AnalyzerConfig::default().with_memory(&self.budget())
    }
}

impl InputArgs {
    /// Settle `-r FILE` against the positional CAPTURE: exactly one of them names the input.
    pub fn resolve(&mut self) -> Result<(), String> {
        let positional = !self.captures.is_empty();
        match self.read_file.take() {
            Some(_) if positional => Err("give the capture once: as CAPTURE or with -r".into()),
            Some(f) => {
                self.captures = vec![f];
                Ok(())
            }
            None if positional => Ok(()),
            None => Err(
                "no capture given: sqos COMMAND CAPTURE (or -r CAPTURE; `-` reads standard input)"
                    .into(),
            ),
        }
    }

    /// The capture arrives as it is made (standard input): show each record as it completes.
    pub fn is_live(&self) -> bool {
        self.captures.iter().any(|c| c.as_os_str() == "-")
    }

    /// The capture files, globs expanded (in name order). A glob that matches nothing is an
    /// error naming it; a name without glob characters is kept as it is (opening it says
    /// whether it exists).
    pub fn capture_paths(&self) -> Result<Vec<PathBuf>, String> {
        let mut paths = Vec::new();
        for c in &self.captures {
            let text = c.to_string_lossy();
            if c.exists() || !text.contains(['*', '?', '[']) {
                paths.push(c.clone());
                continue;
            }
            let matches = glob::glob(&text).map_err(|e| format!("{text}: {e}"))?;
            let before = paths.len();
            for m in matches {
                paths.push(m.map_err(|e| e.to_string())?);
            }
            if paths.len() == before {
                return Err(format!("{text}: no capture matches"));
            }
        }
        Ok(paths)
    }

    /// How the input is named in messages: its file, or how many files were merged.
    pub fn label(&self) -> String {
        match self.captures.as_slice() {
            [one] => one.display().to_string(),
            many => format!("{} captures", many.len()),
        }
    }

    pub fn pipeline_config(&self) -> PipelineConfig {
        PipelineConfig {
            keys: key_ring(&self.keys),
            threads: self.threads(),
            ..PipelineConfig::default()
        }
        .with_ports(&self.ports)
        .with_memory(self.memory.budget())
    }

    /// `--threads`, or the default ([`threads::share`]); 1 unless every capture is a regular
    /// file (input that arrives live is written record by record, not in batches).
    fn threads(&self) -> usize {
        let files = self
            .capture_paths()
            .is_ok_and(|p| !p.is_empty() && p.iter().all(|p| p.is_file()));
        if !files {
            return 1;
        }
        threads::share(self.threads, 1, threads::cores()).per_capture
    }

    /// The analysis configured for this run's memory budget.
    pub fn analyzer_config(&self) -> AnalyzerConfig {
        self.memory.analyzer_config()
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
    let mut cli = cli;
    if let Some(input) = cli.command.input_mut() {
        if let Err(e) = input.resolve() {
            eprintln!("sqos: {e}");
            return 2;
        }
        // A `--separate` child: its one file (see `separate`).
        if let Some(part) = std::env::var_os(separate::PART_ENV) {
            input.captures = vec![part.into()];
            input.quiet = true;
            input.separate = false;
            // Its share of the parent's threads.
            if let Some(n) = std::env::var(separate::THREADS_ENV)
                .ok()
                .and_then(|v| v.parse().ok())
            {
                input.threads = Some(n);
            }
        }
    }
    if let Some(code) = cli.command.separate() {
        return code;
    }
    match cli.command {
        Command::Dissect(a) => dissect::run(&a),
        Command::Stats(a) => stats::run(&a),
        Command::Flows(a) => flows::run(&a),
        Command::Export(a) => export::run(&a),
        Command::Plot(a) => plot::run(&a),
        Command::Check(a) => check::run(&a),
        Command::Synth(a) => synth::run(&a),
        Command::Tui(a) => tui::run_tui(&a),
        Command::Annotate(a) => annotate::run(&a),
        Command::Completions(a) => docs::completions(&a),
        Command::Man(a) => docs::man(&a),
    }
}

/// The analysis of the flows `filter` keeps (`sqos flows`, `sqos plot`), with what the run
/// read; an unusable capture or a bad filter is reported on stderr and gives the exit code.
pub fn analyze_flows(
    input: &InputArgs,
    filter: &filter::FilterArgs,
) -> Result<(sqos::analysis::Analysis, sqos::run::RunResult), i32> {
    let filter = filter.build(sqos::filter::Context::Flows)?;
    let mut analyzer = sqos::filter::FlowSelect::new(
        sqos::analysis::Analyzer::new(input.analyzer_config()),
        filter,
    );
    let result = read_capture(input, &mut analyzer)?;
    Ok((analyzer.finish(), result))
}

/// Open the capture (or the captures, merged by time) and read it through `sink`, with a
/// progress bar unless `--quiet`. An unusable capture is reported on stderr and gives exit code 2
/// as the error.
pub fn read_capture<S: sqos::run::CaptureSink>(
    input: &InputArgs,
    sink: &mut S,
) -> Result<sqos::run::RunResult, i32> {
    read_capture_with(input, input.pipeline_config(), sink)
}

/// [`read_capture`] with a pipeline configuration of the command's own (`dissect -x` keeps
/// frames).
pub fn read_capture_with<S: sqos::run::CaptureSink>(
    input: &InputArgs,
    cfg: sqos::pipeline::PipelineConfig,
    sink: &mut S,
) -> Result<sqos::run::RunResult, i32> {
    read_paths_or_exit(input, &capture_paths_or_exit(input)?, cfg, sink)
}

/// The input's capture paths, globs expanded; a bad one is said on stderr, exit code 2.
fn capture_paths_or_exit(input: &InputArgs) -> Result<Vec<PathBuf>, i32> {
    input.capture_paths().map_err(|e| {
        eprintln!("sqos: {e}");
        2
    })
}

/// [`read_paths`], an unusable capture said on stderr (exit code 2).
fn read_paths_or_exit<S: sqos::run::CaptureSink>(
    input: &InputArgs,
    paths: &[PathBuf],
    cfg: sqos::pipeline::PipelineConfig,
    sink: &mut S,
) -> Result<sqos::run::RunResult, i32> {
    read_paths(input, paths, cfg, sink).map_err(|e| unusable(&e))
}

/// [`read_capture`] of paths already expanded, the unusable capture left to the caller.
fn read_paths<S: sqos::run::CaptureSink>(
    input: &InputArgs,
    paths: &[PathBuf],
    cfg: sqos::pipeline::PipelineConfig,
    sink: &mut S,
) -> Result<sqos::run::RunResult, sqos::run::Unusable> {
    let mut bar = progress::Bar::new(paths, !input.quiet);
    let result = if let [one] = paths {
        let mut reader = sqos::run::open(one)?;
        sink.on_format(reader.format());
        sqos::run::run_capture(&mut reader, cfg, sink, &mut |p| bar.update(p))
    } else {
        let mut merged = sqos::run::open_merged(paths)?;
        sqos::run::run_capture(&mut merged, cfg, sink, &mut |p| bar.update(p))
    };
    bar.finish();
    Ok(result)
}

/// The part of the memory budget a reading may hold messages back in ([`read_holding`]): out of
/// the quarter the budget leaves for the program (docs/robustness.md). A fortieth, 1.6 MiB by
/// default: ~7,000 messages (`pipeline::HeldRecords`, ~200 bytes each with their buffer), which
/// cost about their estimate in heap on top of the run's own peak. At `--threads 1` (GNU time),
/// a capture whose 6,833 messages hold 1.59 MB peaked at 14.4-14.7 MB, and the 456 MB one's
/// 4,202 (1.07 MB) at 14.7-15.3, which the cap full would take ~0.6 MB higher: within issue
/// 14's 16 MiB, where a sixteenth (4 MiB) would reach ~18 MB. Past the cap, reading twice peaks
/// at 15.1-15.9 MB on those captures whatever the cap (the second reading's analysis and pages
/// take the room the held messages left): a larger share would only cost more.
const HELD_SHARE: usize = 40;

/// Reads the input through `sink`, whose messages are judged on their flows' final state
/// where it reads flow fields and the input is files, as `sqos flows` shows them (tshark's
/// `-2`): held back until the files have been read, and passed on then; where more come than a
/// fortieth of the memory budget holds ([`HELD_SHARE`]), the files are read a second time.
/// Standard input and pipes are read once: their messages are judged on the flow as it stood
/// then.
pub fn read_holding<S: sqos::run::CaptureSink + sqos::filter::HoldMessages>(
    input: &InputArgs,
    cfg: sqos::pipeline::PipelineConfig,
    sink: &mut S,
) -> Result<sqos::run::RunResult, i32> {
    let paths = capture_paths_or_exit(input)?;
    let files = paths.iter().all(|p| p.is_file());
    let cap = input.memory.budget().total() / HELD_SHARE;
    if files && sink.hold(input.analyzer_config(), cap) {
        // Read in chunks ahead, not indexed through the map, both times: the held messages'
        // memory stays with the process, and the map's pages came on top (4,202 messages held,
        // `--threads 2`: peak RSS 12.9-13.3 MB, indexed 14.5-14.6).
        let cfg = sqos::pipeline::PipelineConfig {
            chunks_ahead: true,
            ..cfg
        };
        let result = read_paths_or_exit(input, &paths, cfg.clone(), sink)?;
        match sink.pass_held() {
            Ok(()) => return Ok(result),
            Err(again) => eprintln!("sqos: {}: {again}", input.label()),
        }
        return read_paths_or_exit(input, &paths, cfg, sink);
    }
    read_paths_or_exit(input, &paths, cfg, sink)
}

/// Report how the input ended on stderr and turn it into the exit code. Encrypted messages
/// left closed are said once here, whatever the command.
pub fn finish(input: &InputArgs, result: &sqos::run::RunResult) -> i32 {
    finish_as(&input.label(), result)
}

/// [`finish`] of an input named `label` (a live capture's interface).
pub fn finish_as(label: &str, result: &sqos::run::RunResult) -> i32 {
    if let Some(s) = result.stats.undecrypted_summary() {
        eprintln!("sqos: {label}: {s}");
    }
    match &result.ending {
        // The error names the file itself.
        sqos::run::Ending::Damaged(e @ sqos::capture::CaptureError::InFile { .. }) => {
            eprintln!("sqos: {e} (everything before it was decoded)")
        }
        sqos::run::Ending::Damaged(e) => {
            eprintln!("sqos: {label}: {e} (everything before it was decoded)")
        }
        _ => {}
    }
    sqos::run::exit_code(&result.ending)
}

/// Print the unusable-input error and return exit code 2.
pub fn unusable(e: &sqos::run::Unusable) -> i32 {
    eprintln!("sqos: {e}");
    2
}
