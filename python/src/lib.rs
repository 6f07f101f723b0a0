//! `sqos._sqos`: the compiled half of the Python package. It runs the library's own export
//! (`sqos::export`) and plot into Arrow batches and SVG; `python/sqos/__init__.py` is the
//! documented API around it. Tables reach pyarrow through the Arrow C data interface, so the
//! column buffers built here are handed over, not copied.

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_pyarrow::{IntoPyArrow, Table as PyTable, ToPyArrow};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use sqos::analysis::{Analyzer, AnalyzerConfig};
use sqos::budget::Budget;
use sqos::capture::{CaptureError, CaptureReader, Timestamp};
use sqos::export::{label_below, ExportSink, Row, RowSink, Table};
use sqos::output::arrow::{BatchBuilder, CaptureLabel, TableError, BATCH_ROWS};
use sqos::output::plot::{iops_svg, PlotOptions};
use sqos::pipeline::PipelineConfig;
use sqos::run::{no_progress, run_capture, CaptureSink, Ending, RunResult};
use sqos::smb2::crypto::KeyRing;

/// A capture given by path or as bytes.
enum Source {
    Path(PathBuf),
    Bytes { name: String, data: Vec<u8> },
}

/// What went wrong with a capture: (message, frame, offset). Frames are 1-based.
type Problem = (String, Option<u64>, Option<u64>);

fn problem(e: &CaptureError, name: &str) -> Problem {
    let (frame, offset) = match e {
        CaptureError::Open { .. } | CaptureError::Empty => (None, None),
        CaptureError::NotACapture { offset } | CaptureError::Io { offset, .. } => {
            (None, Some(*offset))
        }
        CaptureError::Truncated { frame, offset } | CaptureError::Corrupt { frame, offset, .. } => {
            (Some(*frame), Some(*offset))
        }
        // Not made here: one capture at a time.
        CaptureError::InFile { source, .. } => return problem(source, name),
    };
    let msg = match e {
        CaptureError::Open { .. } => e.to_string(),
        _ => format!("{name}: {e}"),
    };
    (msg, frame, offset)
}

/// How to read a capture: `sqos`'s `--keys` and `--port`, and the default memory budget.
struct Options {
    pipeline: PipelineConfig,
    analysis: AnalyzerConfig,
}

impl Options {
    fn new(keys: Vec<PathBuf>, ports: Vec<u16>) -> PyResult<Self> {
        let mut ring = KeyRing::default();
        for k in &keys {
            ring.load(k)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        let budget = Budget::default();
        Ok(Options {
            analysis: AnalyzerConfig::default().with_memory(&budget),
            pipeline: PipelineConfig {
                keys: Arc::new(ring),
                ..PipelineConfig::default()
            }
            .with_ports(&ports)
            .with_memory(budget),
        })
    }
}

fn table_of(name: &str) -> PyResult<Table> {
    Ok(match name {
        "messages" => Table::Messages,
        "flows" => Table::Flows,
        "series" => Table::Series,
        "findings" => Table::Findings,
        _ => return Err(PyValueError::new_err(format!("no table {name:?}"))),
    })
}

/// Collects rows into record batches.
struct Batches {
    builder: BatchBuilder,
    done: Vec<RecordBatch>,
    error: Option<TableError>,
}

impl Batches {
    fn flush(&mut self) {
        if self.builder.is_empty() || self.error.is_some() {
            return;
        }
        match self.builder.finish() {
            Ok(b) => self.done.push(b),
            Err(e) => self.error = Some(e),
        }
    }
}

impl RowSink for Batches {
    fn first_frame(&mut self, ts: Timestamp) {
        self.builder.set_start(ts);
    }
    fn row(&mut self, row: Row<'_>) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.builder.push(&row.flat()) {
            self.error = Some(e);
        } else if self.builder.len() >= BATCH_ROWS {
            self.flush();
        }
    }
}

/// Reads the source through `sink`; a capture that cannot be used at all is an error, a
/// damaged one a problem beside the result.
fn run_source<S: CaptureSink>(
    source: Source,
    cfg: PipelineConfig,
    sink: &mut S,
) -> Result<Option<Problem>, Problem> {
    let (name, reader) = match source {
        Source::Path(p) => {
            let name = p.display().to_string();
            let r = CaptureReader::open(&p);
            (name, r)
        }
        Source::Bytes { name, data } => {
            let r = CaptureReader::from_reader(Box::new(Cursor::new(data)));
            (name, r)
        }
    };
    let mut reader = reader.map_err(|e| problem(&e, &name))?;
    let RunResult { ending, .. } = run_capture(&mut reader, cfg, sink, &mut no_progress);
    match ending {
        Ending::Clean | Ending::Stopped => Ok(None),
        Ending::Damaged(e) if e.is_unusable() => Err(problem(&e, &name)),
        Ending::Damaged(e) => Ok(Some(problem(&e, &name))),
    }
}

fn source(path: Option<PathBuf>, data: Option<Vec<u8>>, name: Option<String>) -> PyResult<Source> {
    match (path, data) {
        (Some(p), None) => Ok(Source::Path(p)),
        (None, Some(d)) => Ok(Source::Bytes {
            name: name.unwrap_or_else(|| "<bytes>".into()),
            data: d,
        }),
        _ => Err(PyValueError::new_err("give a path or bytes")),
    }
}

/// `(table, problem)`, or raises `ValueError` with `(message, frame, offset)` when the capture
/// cannot be used at all. `problem` is `(message, frame, offset)` for a damaged capture whose
/// rows up to the damage are in the table.
#[pyfunction]
#[pyo3(signature = (table, path=None, data=None, file=None, host=None, keys=Vec::new(), ports=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn read_table<'py>(
    py: Python<'py>,
    table: &str,
    path: Option<PathBuf>,
    data: Option<&[u8]>,
    file: Option<String>,
    host: Option<String>,
    keys: Vec<PathBuf>,
    ports: Vec<u16>,
) -> PyResult<(Bound<'py, PyAny>, Option<Problem>)> {
    let table = table_of(table)?;
    let opts = Options::new(keys, ports)?;
    let src = source(path.clone(), data.map(<[u8]>::to_vec), file.clone())?;
    let label = CaptureLabel {
        file: file
            .or_else(|| path.map(|p| p.display().to_string()))
            .unwrap_or_else(|| "<bytes>".into()),
        host,
        start: None,
    };
    let mut sink = Batches {
        builder: BatchBuilder::new(table.columns(), label),
        done: Vec::new(),
        error: None,
    };
    let schema = sink.builder.schema();
    let run = py.detach(|| {
        let mut rows = ExportSink::new(table, opts.analysis, &mut sink);
        let r = run_source(src, opts.pipeline, &mut rows);
        rows.finish();
        r
    });
    let damage = run.map_err(PyValueError::new_err)?;
    sink.flush();
    if let Some(e) = sink.error {
        return Err(PyRuntimeError::new_err(e.to_string()));
    }
    let t =
        PyTable::try_new(sink.done, schema).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok((t.into_pyarrow(py)?, damage))
}

/// `(svg, problem)`: the `sqos plot` SVG of a capture, titled with its file name (or `file`).
#[pyfunction]
#[pyo3(signature = (path=None, data=None, file=None, flows=Vec::new(), max_flows=12, same_scale=false, keys=Vec::new(), ports=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn plot_svg(
    py: Python<'_>,
    path: Option<PathBuf>,
    data: Option<&[u8]>,
    file: Option<String>,
    flows: Vec<String>,
    max_flows: usize,
    same_scale: bool,
    keys: Vec<PathBuf>,
    ports: Vec<u16>,
) -> PyResult<(String, Option<Problem>)> {
    // As `sqos plot` names the capture under the title: the file's name.
    let capture = file.clone().or_else(|| {
        path.as_deref()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
    });
    let src = source(path, data.map(<[u8]>::to_vec), file)?;
    let opts = Options::new(keys, ports)?;
    let run = py.detach(|| -> Result<(String, Option<Problem>), Problem> {
        let mut analyzer = Analyzer::new(opts.analysis);
        let damage = run_source(src, opts.pipeline, &mut analyzer)?;
        let svg = iops_svg(
            &analyzer.finish(),
            &PlotOptions {
                select: flows,
                max_flows,
                capture,
                shared_scale: same_scale,
                ..PlotOptions::default()
            },
        );
        Ok((svg, damage))
    });
    run.map_err(PyValueError::new_err)
}

/// The SVG as PNG bytes (`scale` pixels per SVG unit), as `sqos plot -o x.png` renders it.
#[pyfunction]
fn svg_to_png(svg: &str, scale: f32) -> PyResult<Vec<u8>> {
    if !(scale > 0.0 && scale <= 8.0) {
        return Err(PyValueError::new_err("scale must be in (0, 8]"));
    }
    sqos::output::png::svg_to_png(svg, scale).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// `(capture_file, capture_host)` of a file below a directory of captures, as `sqos export DIR`
/// labels it.
#[pyfunction]
fn capture_label(root: &str, path: &str) -> (String, Option<String>) {
    label_below(root, path)
}

/// The schema of a table (its columns, then the capture columns).
#[pyfunction]
fn schema<'py>(py: Python<'py>, table: &str) -> PyResult<Bound<'py, PyAny>> {
    sqos::output::arrow::schema(table_of(table)?.columns())
        .as_ref()
        .to_pyarrow(py)
}

#[pymodule]
fn _sqos(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_table, m)?)?;
    m.add_function(wrap_pyfunction!(plot_svg, m)?)?;
    m.add_function(wrap_pyfunction!(svg_to_png, m)?)?;
    m.add_function(wrap_pyfunction!(capture_label, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
