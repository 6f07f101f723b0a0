//! `sqos export CAPTURE --what messages|flows|series --format jsonl|csv [-o FILE]`: tables for
//! spreadsheets, pandas and DuckDB. Messages and series rows are written as they are decoded.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use sqos::analysis::{Analyzer, AnalyzerConfig, FlowState};
use sqos::capture::Timestamp;
use sqos::feed::{Feed, Tap};
use sqos::filter::select::MessageSink;
use sqos::filter::{Context, Filter, FlowSelect, MessageSelect, Subject};
use sqos::output::csv::{
    flow_flat, message_flat, CsvTable, FLOW_COLUMNS, MESSAGE_COLUMNS, SERIES_COLUMNS,
};
use sqos::output::flows::{flow_json, series_row_json};
use sqos::output::json::record_json;
use sqos::pipeline::{ChannelRecord, RecordSink, SqosRecord};
use sqos::run::CaptureSink;

use super::filter::FilterArgs;
use super::out::RecordOut;
use super::InputArgs;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum What {
    /// One row per SQOS message (the `sqos dissect --format jsonl` records).
    Messages,
    /// One row per logical flow (the `sqos flows` table).
    Flows,
    /// One row per flow per update interval.
    Series,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Jsonl,
    Csv,
}

#[derive(Args)]
#[command(after_help = "\
Examples:
  sqos export captures/steady.pcap.gz --what messages --format csv -o messages.csv --dtypes messages.dtypes.json
  sqos export capture.pcap --what series --vm vm01 --format csv -o vm01.csv
  sqos export capture.pcap --what flows -Y 'finding_codes' --format jsonl")]
pub struct ExportArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    filter: FilterArgs,
    #[arg(long, value_enum)]
    what: What,
    #[arg(long, value_enum, default_value = "jsonl")]
    format: ExportFormat,
    /// Output file (default: standard output).
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// CSV only: also write the columns' pandas dtypes to this JSON file (nullable `Int64` for
    /// the integer columns that request or response rows leave empty), for
    /// `pd.read_csv(csv, dtype=json.load(open(FILE)))`.
    #[arg(long, value_name = "FILE")]
    dtypes: Option<PathBuf>,
}

impl ExportArgs {
    /// How `--separate` labels this command's rows; its files go to standard output.
    pub fn separate_rows(&self) -> Result<super::separate::Rows, String> {
        if self.output.is_some() || self.dtypes.is_some() {
            return Err("--separate writes to standard output: leave out -o and --dtypes".into());
        }
        Ok(match self.format {
            ExportFormat::Jsonl => super::separate::Rows::JsonLines,
            ExportFormat::Csv => super::separate::Rows::Csv,
        })
    }
}

/// Where rows go: JSON lines or a CSV table; the first write error stops further output.
enum Rows {
    Jsonl(RecordOut),
    Csv(Box<CsvTable<RecordOut>>),
}

struct Sink {
    rows: Rows,
    /// Each row flushed as it is written (see [`RecordOut`]).
    live: bool,
    error: Option<std::io::Error>,
}

impl Sink {
    fn new(
        out: RecordOut,
        format: ExportFormat,
        columns: &'static [&'static str],
    ) -> std::io::Result<Self> {
        let live = out.is_live();
        let rows = match format {
            ExportFormat::Jsonl => Rows::Jsonl(out),
            ExportFormat::Csv => Rows::Csv(Box::new(CsvTable::new(out, columns)?)),
        };
        Ok(Sink {
            rows,
            live,
            error: None,
        })
    }

    /// Nobody can read the rows any more (`| head`): the run can stop.
    fn closed(&self) -> bool {
        self.error.is_some()
            || match &self.rows {
                Rows::Jsonl(w) => w.closed(),
                Rows::Csv(t) => t.writer().closed(),
            }
    }

    fn write(
        &mut self,
        json: impl FnOnce() -> serde_json::Value,
        flat: impl FnOnce() -> serde_json::Map<String, serde_json::Value>,
    ) {
        if self.error.is_some() {
            return;
        }
        let live = self.live;
        let r = match &mut self.rows {
            Rows::Jsonl(w) => writeln!(w, "{}", json()).map(|()| w.end_record()),
            Rows::Csv(t) => t
                .row(&flat())
                .and_then(|()| if live { t.flush() } else { Ok(()) }),
        };
        if let Err(e) = r {
            self.error = Some(e);
        }
    }

    fn finish(self, dtypes: Option<&PathBuf>) -> std::io::Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        match self.rows {
            Rows::Jsonl(mut w) => w.flush(),
            Rows::Csv(t) => {
                if let Some(path) = dtypes {
                    let json = serde_json::Value::Object(t.dtypes());
                    std::fs::write(path, format!("{json:#}\n")).map_err(|e| {
                        std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
                    })?;
                }
                t.finish()
            }
        }
    }
}

fn flat_of(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match v {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// Messages: written as they arrive.
struct Messages(Sink);

impl RecordSink for Messages {
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.0.write(|| record_json(&rec), || message_flat(&rec));
    }
    // Message rows carry their connection; the channels are the flows' business.
    fn on_channel(&mut self, _rec: &ChannelRecord) {}
}
impl CaptureSink for Messages {
    fn done(&mut self) -> bool {
        self.0.closed()
    }
}
impl MessageSink for Messages {}

/// Series: the analyzer (fed by [`Feed`]) streams each finished interval row.
struct Series {
    sink: Sink,
    filter: Option<Filter>,
    start: Timestamp,
}

impl Tap<Analyzer> for Series {
    fn after(&mut self, analyzer: &mut Analyzer) {
        for (id, row) in analyzer.drain_rows() {
            let flow = analyzer.flow(&id);
            let name = flow.and_then(|f| f.initiator_name.clone());
            let v = series_row_json(id, name.as_deref(), &row);
            if row_kept(self.filter.as_ref(), &v, flow, self.start) {
                let v2 = v.clone();
                self.sink.write(|| v, || flat_of(v2));
            }
        }
    }
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.start = ts;
    }
    fn done(&mut self) -> bool {
        self.sink.closed()
    }
}

fn row_kept(
    filter: Option<&Filter>,
    row: &serde_json::Value,
    flow: Option<&FlowState>,
    start: Timestamp,
) -> bool {
    match (filter, row) {
        (None, _) => true,
        (Some(f), serde_json::Value::Object(m)) => f.matches(&Subject::row(m, flow, start)),
        (Some(_), _) => false,
    }
}

fn open_output(path: &Option<PathBuf>, live_input: bool) -> std::io::Result<RecordOut> {
    match path {
        Some(p) => RecordOut::file(p, live_input),
        None => Ok(RecordOut::stdout(live_input)),
    }
}

pub fn run(a: &ExportArgs) -> i32 {
    let ctx = match a.what {
        What::Messages => Context::Messages,
        What::Flows => Context::Flows,
        What::Series => Context::Series,
    };
    let filter = match a.filter.build(ctx) {
        Ok(f) => f,
        Err(code) => return code,
    };
    if a.dtypes.is_some() && a.format != ExportFormat::Csv {
        eprintln!("sqos: --dtypes goes with --format csv");
        return 2;
    }
    let columns = match a.what {
        What::Messages => MESSAGE_COLUMNS,
        What::Flows => FLOW_COLUMNS,
        What::Series => SERIES_COLUMNS,
    };
    let sink = match open_output(&a.output, a.input.is_live())
        .and_then(|out| Sink::new(out, a.format, columns))
    {
        Ok(s) => s,
        Err(e) => {
            let name = a
                .output
                .as_ref()
                .map_or_else(|| "stdout".into(), |p| p.display().to_string());
            eprintln!("sqos: {name}: {e}");
            return 2;
        }
    };
    let (result, sink) = match a.what {
        What::Messages => {
            let mut m = MessageSelect::new(Messages(sink), filter, false);
            if m.follows_flows() {
                if let Some(flows) = super::final_flows(&a.input) {
                    m = m.with_final_flows(flows);
                }
            }
            (super::read_capture(&a.input, &mut m), m.inner.0)
        }
        What::Series => {
            let mut feed = Feed {
                analysis: Analyzer::new(AnalyzerConfig {
                    stream_rows: true,
                    ..a.input.analyzer_config()
                }),
                tap: Series {
                    sink,
                    filter,
                    start: Timestamp::default(),
                },
            };
            let r = super::read_capture(&a.input, &mut feed);
            let analysis = feed.analysis.finish();
            let s = feed.tap;
            let mut sink = s.sink;
            for (id, row) in &analysis.rows {
                let flow = analysis.flows.iter().find(|f| f.id == *id);
                let name = flow.and_then(|f| f.initiator_name.clone());
                let v = series_row_json(*id, name.as_deref(), row);
                if row_kept(s.filter.as_ref(), &v, flow, s.start) {
                    let v2 = v.clone();
                    sink.write(|| v, || flat_of(v2));
                }
            }
            (r, sink)
        }
        What::Flows => {
            let mut analyzer = FlowSelect::new(Analyzer::new(a.input.analyzer_config()), filter);
            let r = super::read_capture(&a.input, &mut analyzer);
            let analysis = analyzer.finish();
            let mut sink = sink;
            for f in &analysis.flows {
                let v = flow_json(f);
                let flat = flow_flat(&v);
                sink.write(|| v, || flat);
            }
            (r, sink)
        }
    };
    let result = match result {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let Err(e) = sink.finish(a.dtypes.as_ref()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("sqos: writing the export: {e}");
            return 2;
        }
    }
    super::finish(&a.input, &result)
}
