//! `sqos flows CAPTURE`: one row per logical flow, then the findings; or JSON / CSV.

use std::io::Write;

use clap::{Args, ValueEnum};

use sqos::output::columns::{flow_row, FLOW_COLUMNS};
use sqos::output::csv::CsvTable;
use sqos::output::flows::{flows_json, flows_text};

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

impl FlowsArgs {
    /// How `--separate` labels this command's rows.
    pub fn separate_rows(&self) -> super::separate::Rows {
        match self.format {
            FlowsFormat::Text => super::separate::Rows::Text,
            FlowsFormat::Json => super::separate::Rows::Json,
            FlowsFormat::Csv => super::separate::Rows::Csv,
        }
    }
}

pub fn run(a: &FlowsArgs) -> i32 {
    let (analysis, result) = match super::analyze_flows(&a.input, &a.filter) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // What the memory budget dropped in the pipeline: after the table in text, on stderr
    // beside JSON and CSV (the analysis's own notes are in the text table).
    let dropped: Vec<String> = result
        .stats
        .memory
        .iter()
        .filter_map(|m| m.summary())
        .collect();
    // A closed stdout (`| head`) ends the output quietly.
    let _ = match a.format {
        FlowsFormat::Text => {
            let mut text = flows_text(&analysis);
            for d in &dropped {
                text.push_str(&format!("note: {d}\n"));
            }
            out.write_all(text.as_bytes())
        }
        FlowsFormat::Json => out.write_all(format!("{:#}\n", flows_json(&analysis)).as_bytes()),
        FlowsFormat::Csv => write_csv(&mut out, &analysis),
    };
    if !matches!(a.format, FlowsFormat::Text) {
        for d in dropped.iter().chain(&analysis.notes) {
            eprintln!("note: {}", sqos::output::escape::text(d));
        }
    }
    super::finish(&a.input, &result)
}

fn write_csv(out: &mut dyn Write, analysis: &sqos::analysis::Analysis) -> std::io::Result<()> {
    let mut t = CsvTable::new(out, FLOW_COLUMNS)?;
    for f in &analysis.flows {
        t.row(&flow_row(f))?;
    }
    t.finish()
}
