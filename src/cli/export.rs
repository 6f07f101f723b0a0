//! `sqos export CAPTURE --what messages|flows|series|findings --format jsonl|csv|parquet
//! [-o FILE]`: tables for spreadsheets, pandas, DuckDB and Spark. Which rows each table has is
//! `sqos::export`; this file picks the writer. Messages and series rows are written as they are
//! decoded. A directory of captures (or `--partition-by`) writes Hive-style partitioned Parquet:
//! see `partition.rs`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use sqos::capture::Timestamp;
use sqos::export::{ExportSink, Row, RowSink, Table};
use sqos::filter::{Context, Filter};
use sqos::output::arrow::{CaptureLabel, TableError};
use sqos::output::csv::CsvTable;
use sqos::output::json::write_json_line;
use sqos::output::parquet::ParquetTable;

use super::filter::FilterArgs;
use super::out::RecordOut;
use super::partition::{self, PartitionKey};
use super::InputArgs;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum What {
    /// One row per SQOS message (the `sqos dissect --format jsonl` records).
    Messages,
    /// One row per logical flow (the `sqos flows` table).
    Flows,
    /// One row per flow per update interval.
    Series,
    /// One row per finding: the messages' (sqos.*), then the flows' (flow.*).
    Findings,
}

impl What {
    pub fn table(self) -> Table {
        match self {
            What::Messages => Table::Messages,
            What::Flows => Table::Flows,
            What::Series => Table::Series,
            What::Findings => Table::Findings,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Jsonl,
    Csv,
    /// Typed columns plus capture_file, capture_host, capture_start.
    Parquet,
}

#[derive(Args)]
#[command(after_help = "\
Examples:
  sqos export captures/steady.pcap.gz --what messages --format csv -o messages.csv --dtypes messages.dtypes.json
  sqos export capture.pcap --what series --vm vm01 --format parquet -o vm01.parquet
  sqos export archive/ --what flows --format parquet --partition-by date,node -o flows/")]
pub struct ExportArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[arg(long, value_enum)]
    pub what: What,
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: ExportFormat,
    /// Output file (default: standard output); with a directory of captures or --partition-by,
    /// the output directory.
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Parquet into `KEY=VALUE/` folders, one file per capture (`date` of the capture's first
    /// frame in UTC, `node` = capture_host), e.g. `--partition-by date,node`.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "KEYS")]
    pub partition_by: Vec<PartitionKey>,
    /// The host the capture was taken on (the capture_host column). Default: for a directory of
    /// captures, the folder below it that holds the file (DIR/HOST/…); otherwise none.
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// CSV only: also write the columns' pandas dtypes to this JSON file (nullable `Int64` /
    /// `UInt64` for the integer columns that request or response rows leave empty), for
    /// `pd.read_csv(csv, dtype=json.load(open(FILE)))`.
    #[arg(long, value_name = "FILE")]
    pub dtypes: Option<PathBuf>,
}

impl ExportArgs {
    /// The filter of `-Y` and its shortcuts for this table, or exit code 2 after saying why.
    pub fn filter(&self) -> Result<Option<Filter>, i32> {
        let ctx = match self.what {
            What::Messages => Context::Messages,
            What::Flows => Context::Flows,
            What::Series => Context::Series,
            What::Findings => {
                // Every finding is exported; `flows --finding CODE` selects by them.
                return match self.filter.build(Context::Flows)? {
                    None => Ok(None),
                    Some(_) => {
                        eprintln!("sqos: --what findings takes no filter (-Y, --flow, --vm, --finding, --time)");
                        Err(2)
                    }
                };
            }
        };
        self.filter.build(ctx)
    }

    /// How `--separate` labels this command's rows; its files go to standard output.
    pub fn separate_rows(&self) -> Result<super::separate::Rows, String> {
        if self.output.is_some() || self.dtypes.is_some() {
            return Err("--separate writes to standard output: leave out -o and --dtypes".into());
        }
        Ok(match self.format {
            ExportFormat::Jsonl => super::separate::Rows::JsonLines,
            ExportFormat::Csv => super::separate::Rows::Csv,
            ExportFormat::Parquet => {
                return Err(
                    "--separate prints text rows: for Parquet of each capture on its own, \
                     give a directory of captures or --partition-by with -o DIR"
                        .into(),
                )
            }
        })
    }
}

/// Where rows go; the first write error stops further output.
enum Rows {
    Jsonl(RecordOut),
    Csv(Box<CsvTable<RecordOut>>),
    Parquet(Box<ParquetTable<RecordOut>>),
}

pub struct Sink {
    rows: Rows,
    /// Each JSONL / CSV row flushed as it is written (see [`RecordOut`]); Parquet is written
    /// by row groups whatever the output.
    live: bool,
    error: Option<TableError>,
}

impl Sink {
    pub fn new(
        out: RecordOut,
        format: ExportFormat,
        table: Table,
        label: CaptureLabel,
    ) -> Result<Self, TableError> {
        let live = out.is_live();
        let columns = table.columns();
        let rows = match format {
            ExportFormat::Jsonl => Rows::Jsonl(out),
            ExportFormat::Csv => Rows::Csv(Box::new(CsvTable::new(out, columns)?)),
            ExportFormat::Parquet => {
                Rows::Parquet(Box::new(ParquetTable::new(out, columns, label)?))
            }
        };
        Ok(Sink {
            rows,
            live,
            error: None,
        })
    }

    /// Ends the table; for CSV, writes the columns' pandas dtypes to `dtypes` if given.
    pub fn finish(self, dtypes: Option<&Path>) -> Result<(), TableError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        match self.rows {
            Rows::Jsonl(mut w) => w.flush()?,
            Rows::Csv(t) => {
                if let Some(path) = dtypes {
                    let json = serde_json::Value::Object(t.dtypes());
                    std::fs::write(path, format!("{json:#}\n")).map_err(|e| {
                        std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
                    })?;
                }
                t.finish()?
            }
            Rows::Parquet(t) => t.finish()?.flush()?,
        }
        Ok(())
    }
}

impl RowSink for Sink {
    fn first_frame(&mut self, ts: Timestamp) {
        if let Rows::Parquet(t) = &mut self.rows {
            t.set_start(ts);
        }
    }

    fn row(&mut self, row: Row<'_>) {
        if self.error.is_some() {
            return;
        }
        let live = self.live;
        let r = match &mut self.rows {
            Rows::Jsonl(w) => write_json_line(w, &row)
                .map(|()| w.end_record())
                .map_err(TableError::from),
            Rows::Csv(t) => t
                .row(&row.flat())
                .and_then(|()| if live { t.flush() } else { Ok(()) })
                .map_err(TableError::from),
            Rows::Parquet(t) => t.row(&row.flat()),
        };
        if let Err(e) = r {
            self.error = Some(e);
        }
    }

    fn closed(&self) -> bool {
        self.error.is_some()
            || match &self.rows {
                Rows::Jsonl(w) => w.closed(),
                Rows::Csv(t) => t.writer().closed(),
                Rows::Parquet(_) => false,
            }
    }
}

fn open_output(path: Option<&Path>, live_input: bool) -> std::io::Result<RecordOut> {
    match path {
        Some(p) => RecordOut::file(p, live_input),
        None => Ok(RecordOut::stdout(live_input)),
    }
}

/// Reads the input through `sink` into one table, the rows `filter` keeps; the table's last
/// rows are written at the end.
pub fn read_into<W: RowSink>(
    input: &InputArgs,
    table: Table,
    filter: Option<Filter>,
    sink: &mut W,
) -> Result<sqos::run::RunResult, i32> {
    let mut rows = ExportSink::new(table, input.analyzer_config(), sink);
    if let Some(f) = filter {
        rows = rows.with_filter(f).map_err(|e| {
            eprintln!("sqos: {e}");
            2
        })?;
    }
    let result = super::read_holding(input, input.pipeline_config(), &mut rows);
    rows.finish();
    result
}

pub fn run(a: &ExportArgs) -> i32 {
    let filter = match a.filter() {
        Ok(f) => f,
        Err(code) => return code,
    };
    if a.dtypes.is_some() && a.format != ExportFormat::Csv {
        eprintln!("sqos: --dtypes goes with --format csv");
        return 2;
    }
    if !a.partition_by.is_empty() || a.input.captures.iter().any(|c| c.is_dir()) {
        return partition::run(a);
    }
    if a.format == ExportFormat::Parquet && a.output.is_none() && std::io::stdout().is_terminal() {
        eprintln!("sqos: Parquet is binary: give -o FILE (or redirect standard output)");
        return 2;
    }
    let label = CaptureLabel {
        file: a
            .input
            .captures
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(","),
        host: a.host.clone(),
        start: None,
    };
    let mut sink = match open_output(a.output.as_deref(), a.input.is_live())
        .map_err(TableError::from)
        .and_then(|out| Sink::new(out, a.format, a.what.table(), label))
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
    let result = match read_into(&a.input, a.what.table(), filter, &mut sink) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let Err(e) = sink.finish(a.dtypes.as_deref()) {
        if !matches!(&e, TableError::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe) {
            eprintln!("sqos: writing the export: {e}");
            return 2;
        }
    }
    super::finish(&a.input, &result)
}
