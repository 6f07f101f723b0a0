//! The export tables (`sqos export --what …`, the Python package's `read_*`): which rows each
//! table has and how a capture is driven into them. The writers (JSONL, CSV, Parquet, Arrow)
//! only format the rows, so every face exports the same analysis.

use std::ops::ControlFlow;

use serde::ser::{Serialize, Serializer};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::analysis::{Analyzer, AnalyzerConfig, FlowFinding, FlowState, IntervalRow};
use crate::capture::Timestamp;
use crate::feed::{forward_records, Feed, Tap};
use crate::filter::select::MessageSink;
use crate::filter::{Filter, FlowSelect, HoldMessages, MessageSelect, ReadAgain, Subject};
use crate::output::columns::{
    flow_finding_flat, flow_row, message_finding_flat, message_flat, Column, FINDING_COLUMNS,
    FLOW_COLUMNS, MESSAGE_COLUMNS, SERIES_COLUMNS,
};
use crate::output::flows::{flow_json, series_row_json, sorted_findings};
use crate::output::json::{record_json, RecordJson};
use crate::pipeline::{ChannelRecord, PipelineConfig, RecordSink, SqosRecord};
use crate::run::{run_capture, CaptureSink, FrameSource, Progress, RunResult};
use crate::sqos::Finding;

/// The tables a capture can be exported as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// One row per SQOS message (the `sqos dissect --format jsonl` records).
    Messages,
    /// One row per logical flow (the `sqos flows` table).
    Flows,
    /// One row per flow per update interval.
    Series,
    /// One row per finding: the messages' (`sqos.*`), then the flows' (`flow.*`).
    Findings,
}

impl Table {
    pub fn columns(self) -> &'static [Column] {
        match self {
            Table::Messages => MESSAGE_COLUMNS,
            Table::Flows => FLOW_COLUMNS,
            Table::Series => SERIES_COLUMNS,
            Table::Findings => FINDING_COLUMNS,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Table::Messages => "messages",
            Table::Flows => "flows",
            Table::Series => "series",
            Table::Findings => "findings",
        }
    }
}

/// One row of a table, borrowed from the analysis; a writer asks for the form it writes.
pub enum Row<'a> {
    Message(&'a SqosRecord),
    Flow(&'a FlowState),
    Series {
        flow: Uuid,
        initiator_name: Option<&'a str>,
        row: &'a IntervalRow,
    },
    MessageFinding(&'a SqosRecord, &'a Finding),
    FlowFinding(&'a FlowState, &'a FlowFinding),
}

impl Row<'_> {
    /// The object JSONL writes (for messages and flows the nested `dissect` / `flows` JSON).
    pub fn json(&self) -> Value {
        match self {
            Row::Message(rec) => record_json(rec),
            Row::Flow(f) => flow_json(f),
            Row::Series {
                flow,
                initiator_name,
                row,
            } => series_row_json(*flow, *initiator_name, row),
            Row::MessageFinding(..) | Row::FlowFinding(..) => Value::Object(self.flat()),
        }
    }

    /// The flat object whose keys are the table's columns (CSV, Arrow, Parquet).
    pub fn flat(&self) -> Map<String, Value> {
        match self {
            Row::Message(rec) => message_flat(rec),
            Row::Flow(f) => flow_row(f),
            Row::Series { .. } => match self.json() {
                Value::Object(m) => m,
                _ => Map::new(),
            },
            Row::MessageFinding(rec, f) => message_finding_flat(rec, f),
            Row::FlowFinding(flow, f) => flow_finding_flat(flow, f),
        }
    }
}

/// A row as JSONL writes it: a message straight from its record, the others through
/// [`Row::json`].
impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        match self {
            Row::Message(rec) => RecordJson(rec).serialize(ser),
            _ => self.json().serialize(ser),
        }
    }
}

/// Where a table's rows go.
pub trait RowSink {
    /// The capture's first frame was read (before any row).
    fn first_frame(&mut self, _ts: Timestamp) {}
    fn row(&mut self, row: Row<'_>);
    /// Nobody can read the rows any more (`sqos export … | head`): the run can stop.
    fn closed(&self) -> bool {
        false
    }
}

/// The capture sink that turns a run into one table's rows. Messages and series rows (and the
/// messages' findings) are written as they are decoded; flows and flow findings by
/// [`ExportSink::finish`], when the capture has been read. Give it to
/// [`run_capture`](crate::run::run_capture) (or [`export`]), then call `finish`.
pub struct ExportSink<'w, W: RowSink> {
    inner: Inner<'w, W>,
    /// The analysis's configuration (to start it again with a filter, before the run).
    cfg: AnalyzerConfig,
}

enum Inner<'w, W: RowSink> {
    /// The messages the filter keeps (it follows the flows when the filter reads them).
    Messages(Box<MessageSelect<MessageRows<'w, W>>>),
    /// Interval rows as the analysis finishes them, those the filter keeps.
    Series(Feed<Analyzer, SeriesRows<'w, W>>),
    /// The flows the filter keeps, at the end.
    Flows {
        select: Box<FlowSelect>,
        out: &'w mut W,
    },
    /// The messages' findings as they are decoded; the flows' findings at the end.
    Findings(Feed<Analyzer, FindingRows<'w, W>>),
}

/// Writes the interval rows the analysis has finished after each message.
struct SeriesRows<'w, W: RowSink> {
    out: &'w mut W,
    filter: Option<Filter>,
    start: Timestamp,
}

impl<W: RowSink> Tap<Analyzer> for SeriesRows<'_, W> {
    fn after(&mut self, analyzer: &mut Analyzer) {
        for (id, row) in analyzer.drain_rows() {
            let flow = analyzer.flow(&id);
            series_row(self.out, self.filter.as_ref(), id, flow, &row, self.start);
        }
    }
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.start = ts;
        self.out.first_frame(ts);
    }
    fn done(&mut self) -> bool {
        self.out.closed()
    }
}

/// Writes each message's findings before the analysis takes the message.
struct FindingRows<'w, W: RowSink>(&'w mut W);

impl<W: RowSink> Tap<Analyzer> for FindingRows<'_, W> {
    fn before(&mut self, _analyzer: &mut Analyzer, rec: &SqosRecord) {
        for f in rec.body.findings() {
            self.0.row(Row::MessageFinding(rec, f));
        }
    }
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.0.first_frame(ts);
    }
    fn done(&mut self) -> bool {
        self.0.closed()
    }
}

/// The message rows, behind the filter.
struct MessageRows<'w, W: RowSink>(&'w mut W);

impl<W: RowSink> RecordSink for MessageRows<'_, W> {
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.0.row(Row::Message(&rec));
    }
    // Message rows carry their connection; the channels are the flows' business.
    fn on_channel(&mut self, _rec: &ChannelRecord) {}
}

impl<W: RowSink> CaptureSink for MessageRows<'_, W> {
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.0.first_frame(ts);
    }
    fn done(&mut self) -> bool {
        self.0.closed()
    }
}

impl<W: RowSink> MessageSink for MessageRows<'_, W> {}

/// The message table's filter reads flow fields: its messages judged on the flows' final
/// state ([`HoldMessages`]); the other tables hold nothing.
impl<W: RowSink> HoldMessages for ExportSink<'_, W> {
    fn hold(&mut self, cfg: AnalyzerConfig, cap: usize) -> bool {
        match &mut self.inner {
            Inner::Messages(m) => m.hold(cfg, cap),
            _ => false,
        }
    }
    fn pass_held(&mut self) -> Result<(), ReadAgain> {
        match &mut self.inner {
            Inner::Messages(m) => m.pass_held(),
            _ => Err(ReadAgain::NothingHeld),
        }
    }
}

impl<'w, W: RowSink> ExportSink<'w, W> {
    /// `cfg` is the analysis's (its memory budget); series rows are streamed whatever it says.
    pub fn new(table: Table, cfg: AnalyzerConfig, out: &'w mut W) -> Self {
        let analysis = cfg.clone();
        let inner = match table {
            Table::Messages => {
                Inner::Messages(Box::new(MessageSelect::new(MessageRows(out), None, false)))
            }
            Table::Series => Inner::Series(Feed {
                analysis: Analyzer::new(AnalyzerConfig {
                    stream_rows: true,
                    ..cfg
                }),
                tap: SeriesRows {
                    out,
                    filter: None,
                    start: Timestamp::default(),
                },
            }),
            Table::Flows => Inner::Flows {
                select: Box::new(FlowSelect::new(Analyzer::new(cfg), None)),
                out,
            },
            Table::Findings => Inner::Findings(Feed {
                analysis: Analyzer::new(cfg),
                tap: FindingRows(out),
            }),
        };
        ExportSink {
            inner,
            cfg: analysis,
        }
    }

    /// Only the rows `filter` keeps (docs/filter.md): messages, flows and series rows; the
    /// findings table takes no filter (an error).
    pub fn with_filter(self, filter: Filter) -> Result<Self, &'static str> {
        let inner = match self.inner {
            Inner::Messages(m) => Inner::Messages(Box::new(MessageSelect::new(
                m.tap.inner,
                Some(filter),
                false,
            ))),
            Inner::Series(mut feed) => {
                feed.tap.filter = Some(filter);
                Inner::Series(feed)
            }
            Inner::Flows { out, .. } => Inner::Flows {
                select: Box::new(FlowSelect::new(
                    Analyzer::new(self.cfg.clone()),
                    Some(filter),
                )),
                out,
            },
            Inner::Findings(_) => return Err("the findings table takes no filter"),
        };
        Ok(ExportSink {
            inner,
            cfg: self.cfg,
        })
    }

    /// The rows known only at the end: the last series rows, the flows, the flows' findings.
    pub fn finish(self) {
        match self.inner {
            Inner::Messages(_) => {}
            Inner::Series(Feed { analysis, tap }) => {
                let analysis = analysis.finish();
                for (id, row) in &analysis.rows {
                    let flow = analysis.flows.iter().find(|f| f.id == *id);
                    series_row(tap.out, tap.filter.as_ref(), *id, flow, row, tap.start);
                }
            }
            Inner::Flows { select, out } => {
                for f in &select.finish().flows {
                    out.row(Row::Flow(f));
                }
            }
            Inner::Findings(Feed {
                analysis,
                tap: FindingRows(out),
            }) => {
                let analysis = analysis.finish();
                let mut all: Vec<(&FlowState, &FlowFinding)> = analysis
                    .flows
                    .iter()
                    .flat_map(|f| sorted_findings(f).into_iter().map(move |x| (f, x)))
                    .collect();
                all.sort_by_key(|(_, x)| (x.frame, x.code));
                for (f, x) in all {
                    out.row(Row::FlowFinding(f, x));
                }
            }
        }
    }

    /// Where the records go.
    fn records(&mut self) -> &mut dyn CaptureSink {
        match &mut self.inner {
            Inner::Messages(m) => m.as_mut(),
            Inner::Series(feed) => feed,
            Inner::Findings(feed) => feed,
            Inner::Flows { select, .. } => select.as_mut(),
        }
    }
}

/// One series row, if the filter keeps it.
fn series_row<W: RowSink>(
    out: &mut W,
    filter: Option<&Filter>,
    id: Uuid,
    flow: Option<&FlowState>,
    row: &IntervalRow,
    start: Timestamp,
) {
    let name = flow.and_then(|f| f.initiator_name.as_deref());
    if let Some(f) = filter {
        let kept = match series_row_json(id, name, row) {
            Value::Object(m) => f.matches(&Subject::row(&m, flow, start)),
            _ => false,
        };
        if !kept {
            return;
        }
    }
    out.row(Row::Series {
        flow: id,
        initiator_name: name,
        row,
    });
}

impl<W: RowSink> RecordSink for ExportSink<'_, W> {
    forward_records!(self => Some(self.records()));
}

impl<W: RowSink> CaptureSink for ExportSink<'_, W> {
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.records().on_first_frame(ts);
        // The message, series and finding rows hear it through their filter or tap.
        if let Inner::Flows { out, .. } = &mut self.inner {
            out.first_frame(ts);
        }
    }
    fn done(&mut self) -> bool {
        match &mut self.inner {
            Inner::Flows { out, .. } => out.closed(),
            _ => self.records().done(),
        }
    }
}

/// Reads every frame of `source` into one table's rows (an [`ExportSink`] run to its end).
pub fn export<F: FrameSource + ?Sized, W: RowSink>(
    table: Table,
    source: &mut F,
    cfg: PipelineConfig,
    analysis: AnalyzerConfig,
    progress: &mut dyn FnMut(&Progress<'_>) -> ControlFlow<()>,
    out: &mut W,
) -> RunResult {
    let mut sink = ExportSink::new(table, analysis, out);
    let result = run_capture(source, cfg, &mut sink, progress);
    sink.finish();
    result
}

/// How a capture below a directory of captures is labelled: its path relative to `root`
/// (capture_file) and the host it was taken on (capture_host) — the folder right below `root`
/// that holds it (`ROOT/HOST/…/file`, the layout of rotated captures collected from every
/// node); none for a file directly in `root`. A file outside `root` keeps its whole path.
/// Paths or URIs, `/`-separated.
pub fn label_below(root: &str, file: &str) -> (String, Option<String>) {
    let root = root.trim_end_matches('/');
    let Some(rest) = file.strip_prefix(root).and_then(|r| r.strip_prefix('/')) else {
        return (file.to_string(), None);
    };
    let host = rest
        .split_once('/')
        .filter(|(h, below)| !h.is_empty() && !below.is_empty())
        .map(|(h, _)| h.to_string());
    (rest.to_string(), host)
}

/// The UTC calendar date of a time, `YYYY-MM-DD` (the `date` partition).
pub fn utc_date(ts: Timestamp) -> String {
    // Days to civil date (Howard Hinnant's algorithm), for the proleptic Gregorian calendar.
    let z = ts.0.div_euclid(86_400_000_000_000) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_the_place_below_the_root() {
        let l = |r, f| label_below(r, f);
        assert_eq!(
            l("archive", "archive/HV01/a.pcapng"),
            ("HV01/a.pcapng".into(), Some("HV01".into()))
        );
        assert_eq!(
            l("s3a://b/archive/", "s3a://b/archive/HV02/2026/a.pcap"),
            ("HV02/2026/a.pcap".into(), Some("HV02".into()))
        );
        assert_eq!(l("archive", "archive/a.pcapng"), ("a.pcapng".into(), None));
        assert_eq!(
            l("archive", "other/HV01/a.pcapng"),
            ("other/HV01/a.pcapng".into(), None)
        );
        assert_eq!(
            l("arch", "archive/HV01/a.pcapng"),
            ("archive/HV01/a.pcapng".into(), None)
        );
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc_date(Timestamp(0)), "1970-01-01");
        // 2026-11-24 23:59:59.999 UTC and one millisecond later.
        let t = Timestamp::from_secs_nanos(1_795_564_799, 999_000_000);
        assert_eq!(utc_date(t), "2026-11-24");
        assert_eq!(utc_date(Timestamp(t.0 + 1_000_000)), "2026-11-25");
        assert_eq!(
            utc_date(Timestamp::from_secs_nanos(951_782_400, 0)),
            "2000-02-29"
        );
        assert_eq!(utc_date(Timestamp(-1)), "1969-12-31");
    }
}
