//! `sqos flows CAPTURE`: one row per logical flow, then the findings; or JSON / CSV.

use std::io::Write;

use clap::{Args, ValueEnum};

use sqos::analysis::Analyzer;
use sqos::output::columns::{flow_flat, FLOW_COLUMNS};
use sqos::output::csv::CsvTable;
use sqos::output::flows::{flow_json, flows_json, flows_text};
use sqos::run::run_capture;

use super::InputArgs;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlowsFormat {
    Text,
    Json,
    Csv,
}

#[derive(Args)]
pub struct FlowsArgs {
    #[command(flatten)]
    input: InputArgs,
    #[arg(long, value_enum, default_value = "text")]
    format: FlowsFormat,
}

pub fn run(a: &FlowsArgs) -> i32 {
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
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // A closed stdout (`| head`) ends the output quietly.
    let _ = match a.format {
        FlowsFormat::Text => out.write_all(flows_text(&analysis).as_bytes()),
        FlowsFormat::Json => out.write_all(format!("{:#}\n", flows_json(&analysis)).as_bytes()),
        FlowsFormat::Csv => write_csv(&mut out, &analysis),
    };
    super::finish(&a.input.capture, &result)
}

fn write_csv(out: &mut dyn Write, analysis: &sqos::analysis::Analysis) -> std::io::Result<()> {
    let mut t = CsvTable::new(out, FLOW_COLUMNS)?;
    for f in &analysis.flows {
        t.row(&flow_flat(&flow_json(f)))?;
    }
    t.finish()
}
