use std::io::Write;

use clap::{Args, ValueEnum};

use sqos::capture::Timestamp;
use sqos::output::json::record_json;
use sqos::output::text::{detail_tree, hex_dump, summary_line};
use sqos::pipeline::{CaptureNote, ChannelRecord, RecordSink, SqosRecord};
use sqos::run::CaptureSink;

use super::out::RecordOut;
use super::InputArgs;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DissectFormat {
    Text,
    Jsonl,
    Json,
}

#[derive(Args)]
pub struct DissectArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Full field tree with findings, like `tshark -V`.
    #[arg(short = 'V', long = "verbose")]
    verbose: bool,
    /// Hex and ASCII of each SQOS buffer.
    #[arg(short = 'x', long = "hex")]
    hex: bool,
    #[arg(long, value_enum, default_value = "text")]
    format: DissectFormat,
}

/// Writes each record as it arrives (flushed when live, see [`RecordOut`]); a closed stdout
/// (`| head`) ends the output quietly and the run at once.
struct Printer {
    out: RecordOut,
    format: DissectFormat,
    verbose: bool,
    hex: bool,
    first: Timestamp,
    count: u64,
}

impl Printer {
    fn write(&mut self, s: &str) {
        if !self.out.closed() {
            let _ = self.out.write_all(s.as_bytes());
        }
    }
}

impl RecordSink for Printer {
    // One line per SQOS message; the channels show in `sqos flows` and `sqos stats`.
    fn on_channel(&mut self, _rec: &ChannelRecord) {}
    fn on_sqos(&mut self, rec: SqosRecord) {
        let text = match self.format {
            DissectFormat::Text => {
                let mut s = if self.verbose {
                    detail_tree(&rec, self.first)
                } else {
                    summary_line(&rec, self.first) + "\n"
                };
                if self.hex {
                    s.push_str(&hex_dump(&rec.buffer));
                }
                if self.verbose || self.hex {
                    s.push('\n');
                }
                s
            }
            DissectFormat::Jsonl => format!("{}\n", record_json(&rec)),
            DissectFormat::Json => {
                let sep = if self.count == 0 { "[\n" } else { ",\n" };
                format!("{sep}{:#}", record_json(&rec))
            }
        };
        self.count += 1;
        self.write(&text);
        self.out.end_record();
    }

    fn on_note(&mut self, note: &CaptureNote) {
        // Notes about incomplete data go to stderr so that JSON on stdout stays clean.
        eprintln!("note: frame {}: {}", note.frame, note.message);
    }
}

impl CaptureSink for Printer {
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.first = ts;
    }
    fn done(&mut self) -> bool {
        self.out.closed()
    }
}

pub fn run(a: &DissectArgs) -> i32 {
    let mut p = Printer {
        out: RecordOut::stdout(a.input.is_live()),
        format: a.format,
        verbose: a.verbose,
        hex: a.hex,
        first: Timestamp::default(),
        count: 0,
    };
    let result = match super::read_capture(&a.input, &mut p) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if p.format == DissectFormat::Json {
        let tail = if p.count == 0 { "[]\n" } else { "\n]\n" };
        p.write(tail);
    }
    let _ = p.out.flush();
    super::finish(&a.input, &result)
}
