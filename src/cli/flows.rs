//! `sqos flows CAPTURE`: one row per logical flow, then the findings; or JSON / CSV.

use std::io::Write;

use clap::{Args, ValueEnum};

use sqos::analysis::Analyzer;
use sqos::filter::{Context, FlowSelect};
use sqos::output::csv::{flow_flat, CsvTable, FLOW_COLUMNS};
use sqos::output::flows::{flow_json, flows_json, flows_text};
use sqos::run::run_capture;

use super::filter::FilterArgs;
use super::InputArgs;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlowsFormat {
    Text,
    Json,
    Csv,
}

#[derive(Args)]
#[command(after_help = "\
Examples:
  sqos flows captures/noisy-neighbour.pcapng.gz
  sqos flows capture.pcap --vm 'vm0*' --format csv > flows.csv
  sqos flows capture.pcap -Y 'normalized_iops > maximum_io_rate or finding_codes'")]
pub struct FlowsArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    filter: FilterArgs,
    #[arg(long, value_enum, default_value = "text")]
    format: FlowsFormat,
}

pub fn run(a: &FlowsArgs) -> i32 {
    let filter = match a.filter.build(Context::Flows) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let mut analyzer = FlowSelect::new(Analyzer::default(), filter);
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
