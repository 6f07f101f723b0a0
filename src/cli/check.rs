//! `sqos check`: judge captures against a rules file and/or a baseline flow table, for CI.
//! Exit codes: 0 every rule passed, 1 some rule failed, 2 cannot run.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use clap::Args;

use sqos::check::judge::{judge_capture, load_baseline, Plan};
use sqos::check::junit::junit_xml;
use sqos::check::outcome::{exit_code, CaptureVerdict};
use sqos::check::report::{capture_text, total_line};
use sqos::check::rules::Tolerance;
use sqos::check::rules::{BaselineTolerances, Rules};
use sqos::check::source::flow_analysis;
use sqos::filter::{Context, FlowSelect};

use super::InputArgs;

/// The baseline tolerance of the rate figures when neither the rules file nor `--tolerance`
/// sets `default` (docs/check.md): 5 % of the baseline value.
pub const DEFAULT_RATE_TOLERANCE: Tolerance = Tolerance {
    relative: 0.05,
    absolute: 0.0,
};

#[derive(Args)]
#[command(after_help = "\
Examples:
  sqos check captures/steady.pcap.gz --rules captures/steady.rules.toml
  sqos check new-build.pcapng --baseline steady.baseline.json --tolerance iops=10%
  sqos check *.pcapng --rules limits.toml --vm 'vm0*' --junit results.xml")]
pub struct CheckArgs {
    /// Captures (pcap, pcapng, gzip), each judged on its own.
    #[arg(required = true, value_name = "CAPTURE")]
    captures: Vec<PathBuf>,
    /// Rules file (TOML; see docs/check.md).
    #[arg(long, value_name = "RULES.toml")]
    rules: Option<PathBuf>,
    /// Flow table saved earlier with `sqos flows --format json`; differences fail.
    #[arg(long, value_name = "BASELINE.json")]
    baseline: Option<PathBuf>,
    /// Baseline tolerance of a figure (or `default`): `iops=10%`, `avg_latency_ms=0.5`,
    /// `default=5%+1`. Overrides the rules file's [baseline.tolerance]. Repeatable.
    #[arg(long = "tolerance", value_name = "FIGURE=TOL")]
    tolerances: Vec<String>,
    /// Also write the results as JUnit XML (one testsuite per capture, one testcase per rule).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Extra TCP ports to treat as SMB (445 and 139 always are).
    #[arg(long = "port", value_name = "PORT")]
    ports: Vec<u16>,
    /// No progress bar on stderr.
    #[arg(long)]
    quiet: bool,
    /// Threads for the run: captures judged at the same time times worker threads per capture
    /// (see `sqos dissect --threads`); default: the cores, one thread per capture.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    #[command(flatten)]
    filter: super::filter::FilterArgs,
    #[command(flatten)]
    memory: super::MemoryArg,
    /// SMB3 keys for encrypted sessions (Wireshark's `smb2_seskey_list` file). Repeatable.
    #[arg(long = "keys", value_name = "FILE", value_parser = super::load_key_file_arg)]
    keys: Vec<super::KeyFileArg>,
}

/// Judge one capture; with a progress bar when it is read alone (`bar`).
fn judge_one(
    a: &CheckArgs,
    capture: &std::path::Path,
    plan: &Plan,
    filter: &Option<sqos::filter::Filter>,
    bar: bool,
    threads: usize,
) -> CaptureVerdict {
    let input = InputArgs {
        captures: vec![capture.to_path_buf()],
        read_file: None,
        ports: a.ports.clone(),
        quiet: a.quiet,
        memory: a.memory,
        keys: a.keys.clone(),
        separate: false,
        threads: u16::try_from(threads).ok(),
    };
    let mut bar = super::progress::Bar::new(&input.captures, bar && !a.quiet);
    let v = judge_capture(
        capture,
        input.pipeline_config(),
        plan,
        FlowSelect::new(flow_analysis(input.analyzer_config()), filter.clone()),
        &mut |p| bar.update(p),
    );
    bar.finish();
    v
}

fn cannot_run(msg: impl std::fmt::Display) -> i32 {
    eprintln!("sqos check: {msg}");
    2
}

fn plan(a: &CheckArgs) -> Result<Plan, String> {
    if a.rules.is_none() && a.baseline.is_none() {
        return Err("nothing to check against: give --rules and/or --baseline".into());
    }
    let rules = match &a.rules {
        Some(p) => Rules::load(p).map_err(|e| e.to_string())?,
        None => Rules::default(),
    };
    if let (Some(p), true, None) = (&a.rules, rules.rules.is_empty(), &a.baseline) {
        return Err(format!(
            "{}: no rules in the file: nothing to check",
            p.display()
        ));
    }
    let mut cli = BaselineTolerances::default();
    for t in &a.tolerances {
        cli.add_cli(t).map_err(|e| format!("--tolerance {e}"))?;
    }
    let baseline = match &a.baseline {
        Some(p) => Some(load_baseline(p).map_err(|e| e.to_string())?),
        None => None,
    };
    let mut tolerances = rules.baseline.overridden_by(&cli);
    tolerances.default.get_or_insert(DEFAULT_RATE_TOLERANCE);
    Ok(Plan {
        rules: rules.rules,
        baseline,
        tolerances,
        filter: None,
    })
}

pub fn run(a: &CheckArgs) -> i32 {
    let filter = match a.filter.build(Context::Flows) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let mut plan = match plan(a) {
        Ok(p) => p,
        Err(e) => return cannot_run(e),
    };
    plan.filter = filter.clone();
    // Each capture is judged on its own: in parallel, up to one per core, and reported in the
    // order given as soon as the captures before it are done.
    let share = super::threads::share(a.threads, a.captures.len(), super::threads::cores());
    let workers = share.parallel;
    let next = AtomicUsize::new(0);
    let mut verdicts: Vec<CaptureVerdict> = Vec::new();
    let mut out = std::io::stdout().lock();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(usize, CaptureVerdict)>();
        for _ in 0..workers {
            let (tx, next, plan, filter) = (tx.clone(), &next, &plan, &filter);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(capture) = a.captures.get(i) else {
                    break;
                };
                let v = judge_one(a, capture, plan, filter, workers == 1, share.per_capture);
                if tx.send((i, v)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut pending = BTreeMap::new();
        for (i, v) in rx {
            pending.insert(i, v);
            while let Some(v) = pending.remove(&verdicts.len()) {
                if let Some(e) = &v.error {
                    eprintln!("sqos check: {}: {e}", v.capture);
                }
                if !verdicts.is_empty() {
                    let _ = writeln!(out);
                }
                let _ = out.write_all(capture_text(&v).as_bytes());
                let _ = out.flush();
                verdicts.push(v);
            }
        }
    });
    if let Some(total) = total_line(&verdicts) {
        let _ = write!(out, "\n{total}");
    }
    let _ = out.flush();
    if let Some(path) = &a.junit {
        let written = junit_xml(&verdicts).and_then(|xml| std::fs::write(path, xml));
        if let Err(e) = written {
            return cannot_run(format!("{}: {e}", path.display()));
        }
    }
    exit_code(&verdicts)
}
