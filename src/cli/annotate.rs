//! `sqos annotate CAPTURE`: the analysis of each SQOS message, then the flows, as versioned JSON
//! lines (`output::annotate`): what the Wireshark plugin shows on the packets.

use std::io::{BufWriter, Write};

use clap::Args;

use sqos::analysis::Analyzer;
use sqos::feed::{Feed, Tap};
use sqos::output::annotate::{closing_json, header_json, MessageLine};
use sqos::output::flows::dialect;
use sqos::output::json::write_json_line;
use sqos::pipeline::{SqosBody, SqosRecord};
use sqos::run::Ending;

use super::InputArgs;

#[derive(Args)]
#[command(after_help = "\
Examples:
  sqos annotate captures/steady.pcap.gz | head -3
  sqos annotate capture.pcapng | jq -c 'select(.type == \"message\") | .interval'")]
pub struct AnnotateArgs {
    #[command(flatten)]
    pub input: InputArgs,
}

/// Writes each message with what the analyzer made of it (the analyzer is fed by [`Feed`]).
struct Lines<W: Write> {
    out: W,
    error: Option<std::io::Error>,
    /// The message being fed, copied before the analyzer takes it.
    pending: Option<SqosRecord>,
}

impl<W: Write> Lines<W> {
    fn line(&mut self, v: &impl serde::Serialize) {
        if self.error.is_none() {
            if let Err(e) = write_json_line(&mut self.out, v) {
                self.error = Some(e);
            }
        }
    }
}

impl<W: Write> Tap<Analyzer> for Lines<W> {
    fn before(&mut self, _analyzer: &mut Analyzer, rec: &SqosRecord) {
        self.pending = Some(rec.clone());
    }
    fn after(&mut self, analyzer: &mut Analyzer) {
        let Some(record) = self.pending.take() else {
            return;
        };
        let version = match &record.body {
            SqosBody::Request(d) => d.message.as_ref().map(|m| m.protocol_version),
            SqosBody::Response(d) => d.message.as_ref().map(|m| m.protocol_version),
            SqosBody::NoBuffer => None,
        };
        let view = analyzer.last_message();
        let line = MessageLine {
            record: &record,
            dialect: version.and_then(dialect),
            view: &view,
            flow: view.flow.and_then(|(id, _)| analyzer.flow(&id)),
        };
        self.line(&line);
    }
}

pub fn run(a: &AnnotateArgs) -> i32 {
    let mut sink = Feed {
        analysis: Analyzer::default(),
        tap: Lines {
            out: BufWriter::new(std::io::stdout().lock()),
            error: None,
            pending: None,
        },
    };
    sink.tap.line(&header_json());
    let result = match super::read_capture(&a.input, &mut sink) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let error = match &result.ending {
        Ending::Clean | Ending::Stopped => None,
        Ending::Damaged(e) => Some(e.to_string()),
    };
    let analysis = sink.analysis.finish();
    let mut out = sink.tap.out;
    let mut failed = sink.tap.error;
    for v in closing_json(&analysis, result.stats.frames, error) {
        if failed.is_none() {
            if let Err(e) = write_json_line(&mut out, &v) {
                failed = Some(e);
            }
        }
    }
    if let Some(e) = failed.or_else(|| out.flush().err()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("sqos: writing the annotations: {e}");
            return 2;
        }
    }
    super::finish(&a.input, &result)
}
