use std::io::Write;

use clap::{Args, ValueEnum};

use sqos::output::stats::{stats_json, stats_text};
use sqos::pipeline::{ChannelRecord, RecordSink, SqosRecord};
use sqos::run::CaptureSink;

use super::InputArgs;

#[derive(Clone, Copy, ValueEnum)]
pub enum StatsFormat {
    Text,
    Json,
}

#[derive(Args)]
#[command(after_help = "\
Examples:
  sqos stats captures/steady.pcap.gz
  sqos stats capture.pcapng --format json | jq .srt
  tcpdump -r big.pcap -w - 'port 445' | sqos stats -")]
pub struct StatsArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[arg(long, value_enum, default_value = "text")]
    format: StatsFormat,
}

impl StatsArgs {
    /// How `--separate` labels this command's rows.
    pub fn separate_rows(&self) -> super::separate::Rows {
        match self.format {
            StatsFormat::Text => super::separate::Rows::Text,
            StatsFormat::Json => super::separate::Rows::Json,
        }
    }
}

struct Discard;
impl RecordSink for Discard {
    fn on_sqos(&mut self, _rec: SqosRecord) {}
    // The run's stats count sessions and channels themselves.
    fn on_channel(&mut self, _rec: &ChannelRecord) {}
}
impl CaptureSink for Discard {}

pub fn run(a: &StatsArgs) -> i32 {
    let result = match super::read_capture(&a.input, &mut Discard) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let text = match a.format {
        StatsFormat::Text => stats_text(&result.stats),
        StatsFormat::Json => format!("{:#}\n", stats_json(&result.stats)),
    };
    let _ = std::io::stdout().write_all(text.as_bytes());
    super::finish(&a.input, &result)
}
