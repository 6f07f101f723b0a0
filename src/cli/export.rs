//! `sqos export CAPTURE --what messages|flows|series|findings --format jsonl|csv|parquet
//! [-o FILE]`: tables for spreadsheets, pandas, DuckDB and Spark. Which rows each table has is
//! `sqos::export`; this file picks the writer. Messages and series rows are written as they are
//! decoded. A directory of captures (or `--partition-by`) writes Hive-style partitioned Parquet:
//! see `partition.rs`.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use sqos::capture::Timestamp;
use sqos::export::{export, Input, Row, RowSink, Table};
use sqos::output::arrow::{CaptureLabel, TableError};
use sqos::output::csv::CsvTable;
use sqos::output::parquet::ParquetTable;

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
pub struct ExportArgs {
    #[command(flatten)]
    pub input: InputArgs,
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
}

/// Where rows go; the first write error stops further output.
enum Rows {
    Jsonl(Box<dyn Write + Send>),
    Csv(Box<CsvTable<Box<dyn Write + Send>>>),
    Parquet(Box<ParquetTable<Box<dyn Write + Send>>>),
}

pub struct Sink {
    rows: Rows,
    error: Option<TableError>,
}

impl Sink {
    fn new(
        out: Box<dyn Write + Send>,
        a: &ExportArgs,
        label: CaptureLabel,
    ) -> Result<Self, TableError> {
        let columns = a.what.table().columns();
        let rows = match a.format {
            ExportFormat::Jsonl => Rows::Jsonl(out),
            ExportFormat::Csv => Rows::Csv(Box::new(CsvTable::new(out, columns)?)),
            ExportFormat::Parquet => {
                Rows::Parquet(Box::new(ParquetTable::new(out, columns, label)?))
            }
        };
        Ok(Sink { rows, error: None })
    }

    /// A Parquet sink (partitioned output).
    pub fn parquet(out: File, table: Table, label: CaptureLabel) -> Result<Self, TableError> {
        let out: Box<dyn Write + Send> = Box::new(BufWriter::new(out));
        let rows = Rows::Parquet(Box::new(ParquetTable::new(out, table.columns(), label)?));
        Ok(Sink { rows, error: None })
    }

    pub fn finish(self) -> Result<(), TableError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        match self.rows {
            Rows::Jsonl(mut w) => w.flush()?,
            Rows::Csv(t) => t.finish()?,
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
        let r = match &mut self.rows {
            Rows::Jsonl(w) => writeln!(w, "{}", row.json()).map_err(TableError::from),
            Rows::Csv(t) => t.row(&row.flat()).map_err(TableError::from),
            Rows::Parquet(t) => t.row(&row.flat()),
        };
        if let Err(e) = r {
            self.error = Some(e);
        }
    }
}

fn open_output(path: &Option<PathBuf>) -> std::io::Result<Box<dyn Write + Send>> {
    Ok(match path {
        Some(p) => Box::new(BufWriter::new(File::create(p)?)),
        None => Box::new(BufWriter::new(std::io::stdout())),
    })
}

pub fn run(a: &ExportArgs) -> i32 {
    let path = &a.input.capture;
    if path.is_dir() || !a.partition_by.is_empty() {
        return partition::run(a);
    }
    if a.format == ExportFormat::Parquet && a.output.is_none() && std::io::stdout().is_terminal() {
        eprintln!("sqos: Parquet is binary: give -o FILE (or redirect standard output)");
        return 2;
    }
    let label = CaptureLabel {
        file: path.display().to_string(),
        host: a.host.clone(),
        start: None,
    };
    let mut sink = match open_output(&a.output)
        .map_err(TableError::from)
        .and_then(|out| Sink::new(out, a, label))
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
    let result = match export(
        a.what.table(),
        Input::Path(path),
        a.input.pipeline_config(),
        !a.input.quiet,
        &mut sink,
    ) {
        Ok(r) => r,
        Err(e) => return super::unusable(&e),
    };
    if let Err(e) = sink.finish() {
        if !matches!(&e, TableError::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe) {
            eprintln!("sqos: writing the export: {e}");
            return 2;
        }
    }
    super::finish(path, &result)
}
