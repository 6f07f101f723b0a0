//! `sqos export DIR -o OUT --format parquet [--partition-by date,node]`: a directory of captures
//! (read recursively) as Hive-style partitioned Parquet, one file per capture under
//! `OUT/date=YYYY-MM-DD/node=HOST/`, named after the capture so a rerun replaces it. Each capture
//! is analysed on its own; its rows carry capture_file, capture_host and capture_start, so the
//! partitions union into one table in Spark, DuckDB or pandas.

use std::path::{Path, PathBuf};

use clap::ValueEnum;

use sqos::capture::Timestamp;
use sqos::export::{label_below, utc_date, Row, RowSink};
use sqos::output::arrow::CaptureLabel;

use super::export::{read_into, ExportArgs, ExportFormat, Sink};
use super::out::RecordOut;
use super::InputArgs;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PartitionKey {
    /// The UTC date of the capture's first frame.
    Date,
    /// The host it was captured on (capture_host).
    Node,
}

/// Hive's name for the partition of a null value (Spark reads it back as null).
const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// Capture files by their names: what tcpdump, dumpcap and editcap write, gzip-compressed too.
fn is_capture(p: &Path) -> bool {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    [".pcap", ".pcapng", ".cap", ".ntar"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

/// The captures below `dir`, in name order.
fn captures_in(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            captures_in(&p, out)?;
        } else if is_capture(&p) {
            out.push(p);
        }
    }
    Ok(())
}

/// A partition value as a folder name: characters other than letters, digits, `.`, `-` and `_`
/// percent-encoded, as Hive and Spark escape them.
fn escape(v: &str) -> String {
    let mut s = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_') {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// The folder below OUT for a capture.
fn partition_dir(keys: &[PartitionKey], start: Option<Timestamp>, host: Option<&str>) -> PathBuf {
    let mut dir = PathBuf::new();
    for k in keys {
        let (name, value) = match k {
            PartitionKey::Date => ("date", start.map(utc_date)),
            PartitionKey::Node => ("node", host.map(escape)),
        };
        dir.push(format!(
            "{name}={}",
            value.as_deref().unwrap_or(NULL_PARTITION)
        ));
    }
    dir
}

/// Keeps the first frame's time for the partition path.
struct Tracked {
    sink: Sink,
    start: Option<Timestamp>,
}

impl RowSink for Tracked {
    fn first_frame(&mut self, ts: Timestamp) {
        self.start = Some(ts);
        self.sink.first_frame(ts);
    }
    fn row(&mut self, row: Row<'_>) {
        self.sink.row(row);
    }
    fn closed(&self) -> bool {
        self.sink.closed()
    }
}

pub fn run(a: &ExportArgs) -> i32 {
    if a.format != ExportFormat::Parquet {
        eprintln!(
            "sqos: a directory of captures or --partition-by writes Parquet: add --format parquet"
        );
        return 2;
    }
    let Some(out_dir) = &a.output else {
        eprintln!("sqos: a directory of captures or --partition-by needs -o DIR");
        return 2;
    };
    let paths = match a.input.capture_paths() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("sqos: {e}");
            return 2;
        }
    };
    // Each capture with its label: below a directory, its path there and the host folder.
    let mut files: Vec<(PathBuf, String, Option<String>)> = Vec::new();
    for root in &paths {
        if !root.is_dir() {
            files.push((root.clone(), root.display().to_string(), None));
            continue;
        }
        let mut found = Vec::new();
        if let Err(e) = captures_in(root, &mut found) {
            eprintln!("sqos: {}: {e}", root.display());
            return 2;
        }
        if found.is_empty() {
            eprintln!(
                "sqos: {}: no captures (*.pcap, *.pcapng, *.cap, *.ntar, and their .gz)",
                root.display()
            );
            return 2;
        }
        let root_str = root.to_string_lossy();
        for f in found {
            let (name, host) = label_below(&root_str, &f.to_string_lossy());
            files.push((f, name, host));
        }
    }
    if let Err(e) = std::fs::create_dir_all(out_dir) {
        eprintln!("sqos: {}: {e}", out_dir.display());
        return 2;
    }
    let table = a.what.table();
    let mut code = 0;
    for (file, name, dir_host) in files {
        let host = a.host.clone().or(dir_host);
        let label = CaptureLabel {
            file: name.clone(),
            host: host.clone(),
            start: None,
        };
        let tmp = out_dir.join(format!(".sqos-export-{}.parquet.tmp", std::process::id()));
        let sink = match RecordOut::file(&tmp, false)
            .map_err(Into::into)
            .and_then(|out| Sink::new(out, ExportFormat::Parquet, table, label))
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!("sqos: {}: {e}", tmp.display());
                return 2;
            }
        };
        let mut t = Tracked { sink, start: None };
        // This capture on its own, with the command's other options.
        let input = InputArgs {
            captures: vec![file],
            ..a.input.clone()
        };
        let filter = match a.filter() {
            Ok(f) => f,
            Err(c) => return c,
        };
        let result = match read_into(&input, table, filter, &mut t) {
            Ok(r) => r,
            Err(c) => {
                let _ = std::fs::remove_file(&tmp);
                code = code.max(c);
                continue;
            }
        };
        if let Err(e) = t.sink.finish(None) {
            eprintln!("sqos: writing {}: {e}", tmp.display());
            let _ = std::fs::remove_file(&tmp);
            return 2;
        }
        let dir = out_dir.join(partition_dir(&a.partition_by, t.start, host.as_deref()));
        let dest = dir.join(format!("{}.parquet", name.replace(['/', '\\'], "_")));
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::rename(&tmp, &dest)) {
            eprintln!("sqos: {}: {e}", dest.display());
            let _ = std::fs::remove_file(&tmp);
            return 2;
        }
        code = code.max(super::finish(&input, &result));
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_folders_are_hive_style() {
        let t = Timestamp::from_secs_nanos(1_795_564_799, 0);
        let keys = [PartitionKey::Date, PartitionKey::Node];
        assert_eq!(
            partition_dir(&keys, Some(t), Some("HV01.contoso.local")),
            PathBuf::from("date=2026-11-24/node=HV01.contoso.local")
        );
        assert_eq!(
            partition_dir(&keys[1..], None, Some("a b/c")),
            PathBuf::from("node=a%20b%2Fc")
        );
        assert_eq!(
            partition_dir(&keys, None, None),
            PathBuf::from("date=__HIVE_DEFAULT_PARTITION__/node=__HIVE_DEFAULT_PARTITION__")
        );
    }

    #[test]
    fn captures_are_known_by_their_names() {
        for n in [
            "a.pcap",
            "b.PCAPNG",
            "c.pcap.gz",
            "d_00001_20261124.pcapng",
            "e.cap",
        ] {
            assert!(is_capture(Path::new(n)), "{n}");
        }
        for n in ["README.md", "a.pcap.txt", "x.gz"] {
            assert!(!is_capture(Path::new(n)), "{n}");
        }
    }
}
