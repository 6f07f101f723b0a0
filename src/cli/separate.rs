//! `--separate`: several captures, each analysed on its own and in parallel (up to one per
//! core), every row labelled with its file, the files written in the order given — the same
//! output whatever finishes first.
//!
//! Each file is read by a child `sqos` with the same arguments, told its one file through
//! [`PART_ENV`]. A process per file keeps the files apart: a damaged or hostile file cannot stop
//! the others, each has its own memory budget, and the commands need nothing new — their
//! ordinary output is labelled here, by its format ([`Rows`]).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use serde_json::Value;

/// Set in a child's environment: the one capture it reads (its other arguments are the
/// parent's).
pub const PART_ENV: &str = "SQOS_SEPARATE_PART";

/// The shape of a command's standard output, which says how a row carries its file.
pub enum Rows {
    /// Lines of text: each starts `FILE: ` (as `grep -H` prints).
    Text,
    /// `dissect -T fields`: the file is a first field; a header line is written once.
    Fields { separator: String, header: bool },
    /// JSON lines: each object gets a first key `"file"`.
    JsonLines,
    /// One JSON document per file: its object (or each object of its array) gets a key
    /// `"file"`, and all of them make one array.
    Json,
    /// CSV: a first column `file`; the header row is written once.
    Csv,
}

/// Run the current command once per file in `paths` and write what each printed, labelled,
/// in file order. The exit code is the worst of the files' (0 ok, 1 damaged, 2 unusable).
pub fn run(paths: &[PathBuf], rows: Rows) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("sqos: --separate: cannot find this program to run it per file: {e}");
            return 2;
        }
    };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(paths.len());
    let next = AtomicUsize::new(0);
    // Set when nobody reads our output any more (`| head`): no further file is started.
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<(usize, io::Result<Output>)>();
    std::thread::scope(|s| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (exe, args, next, stop) = (&exe, &args, &next, &stop);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = paths.get(i) else { break };
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let out = Command::new(exe)
                    .args(args)
                    .env(PART_ENV, path)
                    .stdin(Stdio::null())
                    .output();
                if tx.send((i, out)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let stdout = io::stdout();
        let mut out = Labeller::new(rows, BufWriter::new(stdout.lock()));
        let mut pending = BTreeMap::new();
        let mut at = 0;
        let mut code = 0;
        for (i, result) in rx {
            pending.insert(i, result);
            while let Some(result) = pending.remove(&at) {
                let path = &paths[at];
                at += 1;
                let c = match result {
                    Ok(o) => {
                        if out.file(path, &o.stdout).is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        relay_stderr(path, &o.stderr);
                        exit_code(path, o.status)
                    }
                    Err(e) => {
                        eprintln!("sqos: {}: cannot run sqos on it: {e}", path.display());
                        2
                    }
                };
                code = code.max(c);
            }
        }
        let _ = out.finish();
        code
    })
}

/// A child's exit status as ours: its own code, or 2 when it did not end normally (a crash is
/// a defect to report, and the other files' output still stands).
fn exit_code(path: &Path, status: std::process::ExitStatus) -> i32 {
    match status.code() {
        Some(c @ 0..=2) => c,
        _ => {
            eprintln!("sqos: {}: reading it failed ({status})", path.display());
            2
        }
    }
}

/// A child's messages, in file order; those that do not name the file are prefixed with it.
fn relay_stderr(path: &Path, stderr: &[u8]) {
    let label = path.display().to_string();
    let text = String::from_utf8_lossy(stderr);
    let mut err = io::stderr().lock();
    for line in text.lines() {
        let _ = if line.contains(&label) {
            writeln!(err, "{line}")
        } else {
            writeln!(err, "{label}: {line}")
        };
    }
}

/// Writes each file's output with its rows labelled.
pub struct Labeller<W: Write> {
    rows: Rows,
    out: W,
    /// The header row (CSV, fields) or the opening `[` (JSON) is written.
    started: bool,
}

impl<W: Write> Labeller<W> {
    pub fn new(rows: Rows, out: W) -> Self {
        Labeller {
            rows,
            out,
            started: false,
        }
    }

    /// What the command printed for the capture `path`, labelled; flushed.
    pub fn file(&mut self, path: &Path, output: &[u8]) -> io::Result<()> {
        let label = path.display().to_string();
        let text = String::from_utf8_lossy(output);
        match &self.rows {
            Rows::Text => {
                for line in text.lines() {
                    if line.is_empty() {
                        writeln!(self.out, "{label}:")?;
                    } else {
                        writeln!(self.out, "{label}: {line}")?;
                    }
                }
            }
            Rows::Fields { separator, header } => {
                let mut lines = text.lines();
                if *header {
                    let first = lines.next();
                    if let (Some(h), false) = (first, self.started) {
                        writeln!(self.out, "file{separator}{h}")?;
                        self.started = true;
                    }
                }
                for line in lines {
                    writeln!(self.out, "{label}{separator}{line}")?;
                }
            }
            Rows::JsonLines => {
                let key = format!("{{\"file\":{}", Value::from(label.as_str()));
                for line in text.lines() {
                    match line.strip_prefix('{') {
                        Some(rest) if rest.trim_start().starts_with('}') => {
                            writeln!(self.out, "{key}{rest}")?
                        }
                        Some(rest) => writeln!(self.out, "{key},{rest}")?,
                        None => writeln!(self.out, "{line}")?,
                    }
                }
            }
            Rows::Json => {
                if !text.trim().is_empty() {
                    let doc: Value = serde_json::from_str(&text).map_err(|e| {
                        io::Error::other(format!("{label}: the output is not JSON: {e}"))
                    })?;
                    let items = match doc {
                        Value::Array(items) => items,
                        one => vec![one],
                    };
                    for mut item in items {
                        if let Value::Object(m) = &mut item {
                            m.insert("file".into(), Value::from(label.as_str()));
                        }
                        let sep = if self.started { ",\n" } else { "[\n" };
                        write!(self.out, "{sep}{item:#}")?;
                        self.started = true;
                    }
                }
            }
            Rows::Csv => {
                let mut rows = csv::ReaderBuilder::new()
                    .has_headers(false)
                    .flexible(true)
                    .from_reader(text.as_bytes());
                let mut w = csv::Writer::from_writer(&mut self.out);
                for (n, row) in rows.records().enumerate() {
                    let row = row.map_err(io::Error::other)?;
                    if n == 0 {
                        if !self.started {
                            w.write_record(std::iter::once("file").chain(row.iter()))
                                .map_err(io::Error::other)?;
                            self.started = true;
                        }
                        continue;
                    }
                    w.write_record(std::iter::once(label.as_str()).chain(row.iter()))
                        .map_err(io::Error::other)?;
                }
                w.flush()?;
            }
        }
        self.out.flush()
    }

    /// Closes what spans the files (the JSON array).
    pub fn finish(mut self) -> io::Result<W> {
        if let Rows::Json = self.rows {
            let tail = if self.started { "\n]\n" } else { "[]\n" };
            self.out.write_all(tail.as_bytes())?;
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labelled(rows: Rows, files: &[(&str, &str)]) -> String {
        let mut l = Labeller::new(rows, Vec::new());
        for (path, out) in files {
            l.file(Path::new(path), out.as_bytes()).expect("labelled");
        }
        String::from_utf8(l.finish().expect("finished")).expect("utf-8")
    }

    #[test]
    fn text_lines_start_with_their_file() {
        assert_eq!(
            labelled(
                Rows::Text,
                &[("a.pcap", "one\n\ntwo\n"), ("b.pcap", "three")]
            ),
            "a.pcap: one\na.pcap:\na.pcap: two\nb.pcap: three\n"
        );
    }

    #[test]
    fn json_lines_get_a_first_key() {
        assert_eq!(
            labelled(
                Rows::JsonLines,
                &[
                    ("a\"b.pcap", "{\"frame\":1}\n{}\n"),
                    ("c.pcap", "{\"x\":[]}\n")
                ]
            ),
            "{\"file\":\"a\\\"b.pcap\",\"frame\":1}\n{\"file\":\"a\\\"b.pcap\"}\n\
             {\"file\":\"c.pcap\",\"x\":[]}\n"
        );
    }

    #[test]
    fn json_documents_make_one_array() {
        let out = labelled(
            Rows::Json,
            &[
                ("a.pcap", "[{\"frame\":1},{\"frame\":2}]"),
                ("b.pcap", "[]"),
                ("c.pcap", "{\"flows\":[]}"),
            ],
        );
        let v: Value = serde_json::from_str(&out).expect("one JSON document");
        assert_eq!(
            v,
            serde_json::json!([
                {"file": "a.pcap", "frame": 1},
                {"file": "a.pcap", "frame": 2},
                {"file": "c.pcap", "flows": []},
            ])
        );
        assert_eq!(labelled(Rows::Json, &[("a.pcap", "[]")]), "[]\n");
    }

    #[test]
    fn csv_gets_a_file_column_and_one_header() {
        assert_eq!(
            labelled(
                Rows::Csv,
                &[
                    ("a.pcap", "frame,name\n1,\"x,\ny\"\n"),
                    ("b,c.pcap", "frame,name\n2,z\n"),
                ]
            ),
            "file,frame,name\na.pcap,1,\"x,\ny\"\n\"b,c.pcap\",2,z\n"
        );
    }

    #[test]
    fn fields_get_a_first_field_and_one_header() {
        let rows = || Rows::Fields {
            separator: "\t".into(),
            header: true,
        };
        assert_eq!(
            labelled(
                rows(),
                &[("a.pcap", "frame\n1\n"), ("b.pcap", "frame\n2\n")]
            ),
            "file\tframe\na.pcap\t1\nb.pcap\t2\n"
        );
    }
}
