//! Shared test helpers: run the library pipeline over a capture and collect what it emits;
//! locate captures; run tshark.
#![allow(dead_code)]

pub mod need;
pub mod plugin_summary;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use sqos::capture::Timestamp;
use sqos::pipeline::{
    CaptureNote, ChannelRecord, CloseRecord, IoRecord, OpenRecord, Pipeline, PipelineConfig,
    RecordSink, SqosRecord,
};
use sqos::run::{run_path, CaptureSink, RunResult};

/// Held by the tests that load both cores for minutes (python_package: a cargo build and a JVM)
/// and by the one that times out on a loaded machine (plugin_gui: the accessibility bus), so the
/// two never overlap. A test that panicked while holding it leaves it usable.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `f` on every item, on as many threads as there are cores, the results in the items' order.
/// For the tests that run tshark (or sqos) once or twice per capture: they wait on one process
/// at a time, so one capture after another left a core idle for minutes. A panic in `f` fails
/// the test naming its item (`{item:?}`), after the other items have run.
pub fn par_map<T, R, F>(items: &[T], f: F) -> Vec<R>
where
    T: std::fmt::Debug + Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
{
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(items.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, std::thread::Result<R>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break out };
                        out.push((i, catch_unwind(AssertUnwindSafe(|| f(item)))));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("par_map worker"))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    let mut failed = Vec::new();
    let results: Vec<R> = done
        .into_iter()
        .filter_map(|(i, r)| match r {
            Ok(r) => Some(r),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| p.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                failed.push(format!("{:?}: {msg}", items[i]));
                None
            }
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    results
}

/// A fresh directory under the system temp dir, removed when the value drops (also when the
/// test panics), so tests leave nothing behind in /tmp.
pub fn scratch(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("temp dir")
}

/// `sqos ARGS --quiet CAPTURES…` (the binary under test), run to its end.
pub fn sqos_on(args: &[&str], captures: &[PathBuf]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(args)
        .arg("--quiet")
        .args(captures)
        .output()
        .expect("sqos runs")
}

/// What a command printed on stdout, as text.
pub fn stdout_text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[derive(Default)]
pub struct Collected {
    pub sqos: Vec<SqosRecord>,
    pub opens: Vec<OpenRecord>,
    pub closes: Vec<CloseRecord>,
    pub io: Vec<IoRecord>,
    pub notes: Vec<CaptureNote>,
    pub first_ts: Option<Timestamp>,
}

impl RecordSink for Collected {
    // These tests look at messages, opens, I/O and notes, not channels.
    fn on_channel(&mut self, _rec: &sqos::pipeline::ChannelRecord) {}
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.sqos.push(rec);
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        self.opens.push(rec.clone());
    }
    fn on_close(&mut self, rec: &CloseRecord) {
        self.closes.push(rec.clone());
    }
    fn on_io(&mut self, rec: &IoRecord) {
        self.io.push(rec.clone());
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.notes.push(note.clone());
    }
}

impl CaptureSink for Collected {
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.first_ts = Some(ts);
    }
}

pub fn run(path: &Path) -> (Collected, RunResult) {
    run_with(path, PipelineConfig::default())
}

/// [`run`] with a pipeline configuration (keys, ports).
pub fn run_with(path: &Path, cfg: PipelineConfig) -> (Collected, RunResult) {
    let mut c = Collected::default();
    let r = match run_path(path, cfg, &mut c) {
        Ok(r) => r,
        Err(e) => panic!("{}: unusable: {e}", path.display()),
    };
    (c, r)
}

/// A pipeline configuration with the keys of `files` (Wireshark `smb2_seskey_list` files).
pub fn with_keys(files: &[&Path]) -> PipelineConfig {
    let mut ring = sqos::smb2::crypto::KeyRing::default();
    for f in files {
        ring.load(f).expect("key file");
    }
    PipelineConfig {
        keys: std::sync::Arc::new(ring),
        ..PipelineConfig::default()
    }
}

/// The key file beside a capture (`smb2_seskey_list` in its folder), if there is one.
pub fn key_file_beside(path: &Path) -> Option<PathBuf> {
    path.parent()
        .map(|d| d.join("smb2_seskey_list"))
        .filter(|k| k.is_file())
}

/// A pipeline configuration with the key file beside `path` (default without one).
pub fn keys_beside(path: &Path) -> PipelineConfig {
    match key_file_beside(path) {
        Some(k) => with_keys(&[&k]),
        None => PipelineConfig::default(),
    }
}

/// tshark options giving it the rows of the key file beside `path` (one `-o uat:` each).
pub fn tshark_key_opts(path: &Path) -> Vec<String> {
    let Some(k) = key_file_beside(path) else {
        return Vec::new();
    };
    std::fs::read_to_string(k)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .flat_map(|l| ["-o".to_string(), format!("uat:smb2_seskey_list:{l}")])
        .collect()
}

/// The key file committed beside the Samba captures.
pub fn real_keys() -> PathBuf {
    repo().join("captures/real/smb2_seskey_list")
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file in a directory with one of the capture extensions, sorted.
pub fn captures_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let n = p.to_string_lossy();
                    [".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz"]
                        .iter()
                        .any(|ext| n.ends_with(ext))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Run tshark with `-T fields` and the given fields; one Vec of column strings per frame line.
pub fn tshark_fields(path: &Path, filter: Option<&str>, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-n").arg("-r").arg(path);
    cmd.args(tshark_key_opts(path));
    cmd.args([
        "-o",
        "tcp.reassemble_out_of_order:TRUE",
        "-T",
        "fields",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=|",
        "-E",
        "separator=\t",
    ]);
    if let Some(f) = filter {
        cmd.arg("-Y").arg(f);
    }
    for f in fields {
        cmd.arg("-e").arg(f);
    }
    let out = cmd.output().expect("run tshark");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// SMB2 messages per command name as tshark counts them (each `smb2.cmd` occurrence).
pub fn tshark_smb2_counts(path: &Path) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for row in tshark_fields(path, Some("smb2"), &["smb2.cmd"]) {
        add_smb2_cmds(&mut m, &row[0]);
    }
    m
}

/// Counts one row's `smb2.cmd` cell (its occurrences joined by `|`) per command name.
pub fn add_smb2_cmds(m: &mut BTreeMap<String, u64>, cell: &str) {
    for v in cell.split('|').filter(|s| !s.is_empty()) {
        let name = v
            .parse::<u16>()
            .ok()
            .and_then(|c| sqos::smb2::Command(c).name())
            .map(str::to_string)
            .unwrap_or_else(|| format!("0x{v}"));
        *m.entry(name).or_insert(0) += 1;
    }
}

/// Every record, note and channel event, in the order given, as text.
#[derive(Default)]
pub struct Everything(pub Vec<String>);

impl CaptureSink for Everything {}

impl RecordSink for Everything {
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.0.push(format!("{rec:?}"));
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        self.0.push(format!("{rec:?}"));
    }
    fn on_close(&mut self, rec: &CloseRecord) {
        self.0.push(format!("{rec:?}"));
    }
    fn on_io(&mut self, rec: &IoRecord) {
        self.0.push(format!("{rec:?}"));
    }
    fn on_channel(&mut self, rec: &ChannelRecord) {
        self.0.push(format!("{rec:?}"));
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.0.push(format!("note {note:?}"));
    }
    fn on_info(&mut self, note: &CaptureNote) {
        self.0.push(format!("info {note:?}"));
    }
}

/// The library's pipeline on `threads`: how many workers it ran, what it gave, its statistics.
/// The workers read the frames where they lie in the file's memory map (when it is one) as
/// `sqos` does, or copies of them (`share`: false).
pub fn pipeline_on(path: &Path, cfg: PipelineConfig, share: bool) -> (usize, Vec<String>, String) {
    let mut reader = sqos::run::open(path).expect("capture opens");
    let mut p = Pipeline::new(cfg);
    if share {
        p.share_maps(reader.shared_map().into_iter().collect());
    }
    let workers = p.workers();
    let mut out = Everything::default();
    while let Some(frame) = reader.next_frame().expect("capture reads") {
        p.push_frame(&frame, &mut out);
    }
    p.finish(&mut out);
    let stats = serde_json::to_string(p.stats()).expect("stats serialise");
    (workers, out.0, stats)
}
