//! `sqos plot CAPTURE -o iops.svg`: per-flow normalized IOPS over time with the limit lines.

use std::path::PathBuf;

use clap::Args;

use sqos::analysis::Analyzer;
use sqos::output::plot::{iops_svg, PlotOptions};
use sqos::run::run_capture;

use super::InputArgs;

#[derive(Args)]
pub struct PlotArgs {
    #[command(flatten)]
    input: InputArgs,
    /// The SVG file to write.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// Only this flow (GUID prefix or initiator name); repeat for several.
    #[arg(long = "flow", value_name = "FLOW")]
    flows: Vec<String>,
    /// At most this many flows, one panel each (flows with findings first, then the busiest).
    #[arg(long, default_value_t = 12)]
    max_flows: usize,
}

pub fn run(a: &PlotArgs) -> i32 {
    if a.output.extension().is_some_and(|e| e != "svg") {
        eprintln!(
            "sqos: {}: only SVG is written (convert with e.g. `rsvg-convert -o out.png out.svg`)",
            a.output.display()
        );
        return 2;
    }
    let mut analyzer = Analyzer::default();
    let result = match run_capture(
        &a.input.capture,
        a.input.pipeline_config(),
        &mut analyzer,
        !a.input.quiet,
    ) {
        Ok(r) => r,
        Err(e) => return super::unusable(&e),
    };
    let analysis = analyzer.finish();
    let svg = iops_svg(
        &analysis,
        &PlotOptions {
            select: a.flows.clone(),
            max_flows: a.max_flows,
            ..PlotOptions::default()
        },
    );
    if let Err(e) = std::fs::write(&a.output, svg) {
        eprintln!("sqos: {}: {e}", a.output.display());
        return 2;
    }
    super::finish(&a.input.capture, &result)
}
