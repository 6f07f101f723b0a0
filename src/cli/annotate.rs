//! `sqos annotate CAPTURE`: the analysis of each SQOS message, then the flows, as versioned JSON
//! lines (`output::annotate`): what the Wireshark plugin shows on the packets.

use std::io::{BufWriter, Write};

use clap::Args;

use sqos::analysis::Analyzer;
use sqos::capture::Timestamp;
use sqos::output::annotate::{closing_json, header_json, message_json};
use sqos::output::flows::dialect;
use sqos::output::json::record_json;
use sqos::pipeline::{
    CaptureNote, ChannelRecord, CloseRecord, IoRecord, OpenRecord, RecordSink, SqosBody, SqosRecord,
};
use sqos::run::{CaptureSink, Ending};

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

/// Feeds the analyzer and writes each message with what the analyzer made of it.
struct Annotate<W: Write> {
    analyzer: Analyzer,
    out: W,
    error: Option<std::io::Error>,
}

impl<W: Write> Annotate<W> {
    fn line(&mut self, v: &serde_json::Value) {
        if self.error.is_none() {
            if let Err(e) = writeln!(self.out, "{v}") {
                self.error = Some(e);
            }
        }
    }
}

impl<W: Write> RecordSink for Annotate<W> {
    fn on_sqos(&mut self, rec: SqosRecord) {
        let record = record_json(&rec);
        let version = match &rec.body {
            SqosBody::Request(d) => d.message.as_ref().map(|m| m.protocol_version),
            SqosBody::Response(d) => d.message.as_ref().map(|m| m.protocol_version),
            SqosBody::NoBuffer => None,
        };
        self.analyzer.on_sqos(rec);
        let view = self.analyzer.last_message();
        let flow = view.flow.and_then(|(id, _)| self.analyzer.flow(&id));
        let v = message_json(record, version.and_then(dialect), &view, flow);
        self.line(&v);
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        self.analyzer.on_open(rec);
    }
    fn on_close(&mut self, rec: &CloseRecord) {
        self.analyzer.on_close(rec);
    }
    fn on_io(&mut self, rec: &IoRecord) {
        self.analyzer.on_io(rec);
    }
    fn on_channel(&mut self, rec: &ChannelRecord) {
        self.analyzer.on_channel(rec);
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.analyzer.on_note(note);
    }
}

impl<W: Write> CaptureSink for Annotate<W> {
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.analyzer.on_first_frame(ts);
    }
}

pub fn run(a: &AnnotateArgs) -> i32 {
    let mut sink = Annotate {
        analyzer: Analyzer::default(),
        out: BufWriter::new(std::io::stdout().lock()),
        error: None,
    };
    sink.line(&header_json());
    let result = match super::read_capture(&a.input, &mut sink) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let error = match &result.ending {
        Ending::Clean | Ending::Stopped => None,
        Ending::Damaged(e) => Some(e.to_string()),
    };
    let analysis = sink.analyzer.finish();
    let mut out = sink.out;
    let mut failed = sink.error;
    for v in closing_json(&analysis, result.stats.frames, error) {
        if failed.is_none() {
            if let Err(e) = writeln!(out, "{v}") {
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
