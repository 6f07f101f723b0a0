//! `--separate`: several captures, each analysed on its own and in parallel (up to one per
//! core), every row labelled with its file, the files written in the order given — the same
//! output whatever finishes first.
//!
//! Each file is read by a child `sqos` with the same arguments, told its one file through
//! [`PART_ENV`]. A process per file keeps the files apart: a damaged or hostile file cannot stop
//! the others, each has its own memory budget, and the commands need nothing new — their
//! ordinary output is labelled here, by its format ([`Rows`]). A file's output waits for the
//! files before it in a [`Spool`]: in memory up to [`SPOOL_MEMORY`], then in a scratch file.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Cursor, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use serde::de::{Deserializer as _, Error as _, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// Output of one file held in memory while it waits for its turn; beyond, it goes to a
/// scratch file (with one file per core running, memory stays bounded whatever the outputs).
pub const SPOOL_MEMORY: usize = 4 << 20;

/// Set in a child's environment: the one capture it reads (its other arguments are the
/// parent's).
pub const PART_ENV: &str = "SQOS_SEPARATE_PART";

/// Set in a child's environment: its threads, its share of the run's (see [`super::threads`]).
pub const THREADS_ENV: &str = "SQOS_SEPARATE_THREADS";

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
/// in file order, `share.parallel` files at a time on `share.per_capture` threads each. The
/// exit code is the worst of the files' (0 ok, 1 damaged, 2 unusable).
pub fn run(paths: &[PathBuf], rows: Rows, share: super::threads::Share) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("sqos: --separate: cannot find this program to run it per file: {e}");
            return 2;
        }
    };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let workers = share.parallel;
    let threads = share.per_capture.to_string();
    let next = AtomicUsize::new(0);
    // Set when nobody reads our output any more (`| head`): no further file is started.
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<(usize, io::Result<ChildRun>)>();
    std::thread::scope(|s| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (exe, args, next, stop, threads) = (&exe, &args, &next, &stop, &threads);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = paths.get(i) else { break };
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let out = run_child(exe, args, path, threads);
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
                        let written = o.stdout.reader().and_then(|r| out.file(path, r));
                        if written.is_err() {
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

/// What a child printed and how it ended.
struct ChildRun {
    stdout: Spool,
    stderr: Vec<u8>,
    status: ExitStatus,
}

/// Run this program on one file; its stdout spooled, its stderr kept (messages: small).
fn run_child(exe: &Path, args: &[OsString], path: &Path, threads: &str) -> io::Result<ChildRun> {
    let mut child = Command::new(exe)
        .args(args)
        .env(PART_ENV, path)
        .env(THREADS_ENV, threads)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (spooled, stderr) = std::thread::scope(|s| {
        let err = s.spawn(move || {
            let mut v = Vec::new();
            if let Some(mut e) = stderr {
                let _ = e.read_to_end(&mut v);
            }
            v
        });
        let mut spool = Spool::new(SPOOL_MEMORY);
        let copied = match stdout {
            Some(mut o) => io::copy(&mut o, &mut spool).map(|_| spool),
            None => Ok(spool),
        };
        (copied, err.join().unwrap_or_default())
    });
    if spooled.is_err() {
        // The scratch file failed (disk full): the child must not wait on a full pipe.
        let _ = child.kill();
    }
    let status = child.wait()?;
    Ok(ChildRun {
        stdout: spooled?,
        stderr,
        status,
    })
}

/// Bytes kept in memory up to a limit, then in an unnamed scratch file (the system removes it
/// when it is closed, also when we crash).
pub struct Spool {
    limit: usize,
    memory: Vec<u8>,
    file: Option<File>,
}

impl Spool {
    pub fn new(limit: usize) -> Self {
        Spool {
            limit,
            memory: Vec::new(),
            file: None,
        }
    }

    /// The bytes went to a scratch file.
    #[cfg(test)]
    pub fn spilled(&self) -> bool {
        self.file.is_some()
    }

    /// Everything written, from the start.
    pub fn reader(self) -> io::Result<Box<dyn BufRead>> {
        match self.file {
            Some(mut f) => {
                f.flush()?;
                f.seek(SeekFrom::Start(0))?;
                Ok(Box::new(BufReader::new(f)))
            }
            None => Ok(Box::new(Cursor::new(self.memory))),
        }
    }
}

impl Write for Spool {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.file.is_none() && self.memory.len().saturating_add(buf.len()) > self.limit {
            let mut f = tempfile::tempfile()?;
            f.write_all(&self.memory)?;
            self.memory = Vec::new();
            self.file = Some(f);
        }
        match &mut self.file {
            Some(f) => f.write(buf),
            None => {
                self.memory.extend_from_slice(buf);
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

/// Each line of `r` (without its end of line, `\r\n` too; invalid UTF-8 replaced), to `f`.
fn each_line(mut r: impl BufRead, mut f: impl FnMut(&str) -> io::Result<()>) -> io::Result<()> {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if r.read_until(b'\n', &mut buf)? == 0 {
            return Ok(());
        }
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        f(&String::from_utf8_lossy(line))?;
    }
}

/// Passes over white space; false when nothing else follows.
fn skip_blank(r: &mut impl BufRead) -> io::Result<bool> {
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(false);
        }
        let blank = buf.iter().take_while(|b| b.is_ascii_whitespace()).count();
        let more = blank < buf.len();
        r.consume(blank);
        if more {
            return Ok(true);
        }
    }
}

/// A JSON document read item by item: each element of a top-level array (or the one
/// object) goes to the function as it is parsed, so an array is never held whole.
struct EachItem<F>(F);

impl<'de, F: FnMut(Value) -> io::Result<()>> Visitor<'de> for EachItem<F> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON array or object")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<Value>()? {
            (self.0)(item).map_err(A::Error::custom)?;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, map: A) -> Result<(), A::Error> {
        let one = Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        (self.0)(one).map_err(A::Error::custom)
    }
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

    /// What the command printed for the capture `path`, labelled; flushed. Read as it is
    /// written: a file's output is never held whole (a JSON array item by item).
    pub fn file(&mut self, path: &Path, mut output: impl BufRead) -> io::Result<()> {
        let label = path.display().to_string();
        match &self.rows {
            Rows::Text => each_line(output, |line| {
                if line.is_empty() {
                    writeln!(self.out, "{label}:")
                } else {
                    writeln!(self.out, "{label}: {line}")
                }
            })?,
            Rows::Fields { separator, header } => {
                let (separator, mut header) = (separator.clone(), *header);
                each_line(output, |line| {
                    if std::mem::take(&mut header) {
                        if !self.started {
                            self.started = true;
                            writeln!(self.out, "file{separator}{line}")?;
                        }
                        return Ok(());
                    }
                    writeln!(self.out, "{label}{separator}{line}")
                })?;
            }
            Rows::JsonLines => {
                let key = format!("{{\"file\":{}", Value::from(label.as_str()));
                each_line(output, |line| match line.strip_prefix('{') {
                    Some(rest) if rest.trim_start().starts_with('}') => {
                        writeln!(self.out, "{key}{rest}")
                    }
                    Some(rest) => writeln!(self.out, "{key},{rest}"),
                    None => writeln!(self.out, "{line}"),
                })?;
            }
            Rows::Json => {
                if skip_blank(&mut output)? {
                    let not_json = |e: serde_json::Error| {
                        io::Error::other(format!("{label}: the output is not JSON: {e}"))
                    };
                    let mut doc = serde_json::Deserializer::from_reader(output);
                    let (out, started) = (&mut self.out, &mut self.started);
                    doc.deserialize_any(EachItem(|mut item: Value| {
                        if let Value::Object(m) = &mut item {
                            m.insert("file".into(), Value::from(label.as_str()));
                        }
                        let sep = if *started { ",\n" } else { "[\n" };
                        *started = true;
                        write!(out, "{sep}{item:#}")
                    }))
                    .map_err(not_json)?;
                    doc.end().map_err(not_json)?;
                }
            }
            Rows::Csv => {
                let mut rows = csv::ReaderBuilder::new()
                    .has_headers(false)
                    .flexible(true)
                    .from_reader(output);
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
    fn output_over_the_memory_limit_waits_in_a_scratch_file() {
        let lines: String = (0..2000).map(|i| format!("{{\"frame\":{i}}}\n")).collect();
        let mut small = Spool::new(1 << 20);
        small.write_all(lines.as_bytes()).expect("written");
        assert!(!small.spilled());
        let mut spool = Spool::new(1000);
        for chunk in lines.as_bytes().chunks(700) {
            spool.write_all(chunk).expect("written");
        }
        assert!(spool.spilled());
        let mut back = String::new();
        spool
            .reader()
            .expect("reader")
            .read_to_string(&mut back)
            .expect("read back");
        assert_eq!(back, lines);
        // Labelled from the scratch file, the rows are those of the same output in memory.
        let mut spilled = Spool::new(1000);
        spilled.write_all(lines.as_bytes()).expect("written");
        let mut l = Labeller::new(Rows::JsonLines, Vec::new());
        l.file(Path::new("a.pcap"), spilled.reader().expect("reader"))
            .expect("labelled");
        let from_file = String::from_utf8(l.finish().expect("finished")).expect("utf-8");
        assert_eq!(from_file, labelled(Rows::JsonLines, &[("a.pcap", &lines)]));
        assert_eq!(from_file.lines().count(), 2000);
        assert!(from_file.ends_with("{\"file\":\"a.pcap\",\"frame\":1999}\n"));
    }

    #[test]
    fn a_json_array_is_labelled_item_by_item_and_bad_json_named() {
        let mut l = Labeller::new(Rows::Json, Vec::new());
        let err = l
            .file(Path::new("x.pcap"), &b"[{\"a\":1} trailing"[..])
            .expect_err("not JSON");
        assert!(
            err.to_string()
                .starts_with("x.pcap: the output is not JSON"),
            "{err}"
        );
        assert_eq!(labelled(Rows::Json, &[("a.pcap", "  \n ")]), "[]\n");
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
