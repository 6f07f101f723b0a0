//! The state the views read, shared with the reader thread that fills it while the capture is
//! read (file, pipe, growing file or live interface), and that thread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::flows::FlowSource;
use super::store::MessageStore;
use crate::capture::{CaptureReader, Timestamp};
use crate::pipeline::{
    CaptureNote, CloseRecord, IoRecord, OpenRecord, Pipeline, PipelineConfig, RecordSink,
    SqosRecord, Stats,
};

/// Capture notes kept for display (the rest are counted).
const MAX_NOTES: usize = 50;

/// Where reading stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadState {
    /// Opening the source (waiting for the capture header on a pipe or interface).
    Opening,
    Reading,
    /// Read to its clean end.
    Done,
    /// Damaged part-way: everything before it was decoded.
    Damaged(String),
    /// The source could not be used at all.
    Failed(String),
}

#[derive(Clone, Debug)]
pub struct Progress {
    /// What is being read, for the title bar.
    pub source: String,
    pub state: ReadState,
    /// Input bytes read so far and the input's size when known (regular files).
    pub bytes: u64,
    pub total: Option<u64>,
    pub frames: u64,
    pub sqos_messages: u64,
}

/// Everything the views show.
pub struct Live {
    pub store: MessageStore,
    pub flows: Box<dyn FlowSource>,
    pub progress: Progress,
    pub stats: Stats,
    pub notes: Vec<String>,
    pub notes_total: u64,
}

impl Live {
    pub fn new(source: String, store: MessageStore, flows: Box<dyn FlowSource>) -> Self {
        Live {
            store,
            flows,
            progress: Progress {
                source,
                state: ReadState::Opening,
                bytes: 0,
                total: None,
                frames: 0,
                sqos_messages: 0,
            },
            stats: Stats::default(),
            notes: Vec::new(),
            notes_total: 0,
        }
    }

    pub fn on_first_frame(&mut self, ts: Timestamp) {
        self.store.set_start(ts);
        self.flows.on_first_frame(ts);
    }

    /// Capture-relative seconds.
    pub fn rel(&self, ts: Timestamp) -> f64 {
        ts.secs_since(self.store.start())
    }
}

impl RecordSink for Live {
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.progress.sqos_messages += 1;
        self.flows.on_sqos(rec.clone());
        self.store.push(rec);
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        self.flows.on_open(rec);
    }
    fn on_close(&mut self, rec: &CloseRecord) {
        self.flows.on_close(rec);
    }
    fn on_io(&mut self, rec: &IoRecord) {
        self.flows.on_io(rec);
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.notes_total += 1;
        if self.notes.len() < MAX_NOTES {
            self.notes
                .push(crate::output::escape::text(&note.message).into_owned());
        }
        self.flows.on_note(note);
    }
}

/// `Live` behind its lock, as the pipeline's sink: each record is handed over as it comes, so
/// the views see it even when the input then stalls (a slow pipe, an idle interface).
#[derive(Clone)]
pub struct Shared(pub Arc<Mutex<Live>>);

impl Shared {
    pub fn new(live: Live) -> Self {
        Shared(Arc::new(Mutex::new(live)))
    }
    /// The state; a reader thread that panicked leaves it usable as it was.
    pub fn lock(&self) -> MutexGuard<'_, Live> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RecordSink for Shared {
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.lock().on_sqos(rec);
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        self.lock().on_open(rec);
    }
    fn on_close(&mut self, rec: &CloseRecord) {
        self.lock().on_close(rec);
    }
    fn on_io(&mut self, rec: &IoRecord) {
        self.lock().on_io(rec);
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.lock().on_note(note);
    }
}

/// Counts the bytes read from the input, for progress.
pub struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R> Counting<R> {
    pub fn new(inner: R) -> (Self, Arc<AtomicU64>) {
        let count = Arc::new(AtomicU64::new(0));
        (
            Counting {
                inner,
                count: count.clone(),
            },
            count,
        )
    }
}

impl<R: std::io::Read> std::io::Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// How the reader thread gets its capture: already open, or opened in the thread (pipes and
/// interfaces, whose header may take a while to arrive).
pub enum Opener {
    Ready(CaptureReader),
    Deferred(Box<dyn FnOnce() -> Result<CaptureReader, String> + Send>),
}

/// Start the reader thread: frames → pipeline → `shared`, until the input ends.
pub fn spawn_reader(
    opener: Opener,
    cfg: PipelineConfig,
    shared: Shared,
    bytes: Arc<AtomicU64>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sqos-reader".into())
        .spawn(move || read_all(opener, cfg, shared, bytes))
}

fn read_all(opener: Opener, cfg: PipelineConfig, shared: Shared, bytes: Arc<AtomicU64>) {
    let mut reader = match opener {
        Opener::Ready(r) => r,
        Opener::Deferred(open) => match open() {
            Ok(r) => r,
            Err(e) => {
                shared.lock().progress.state = ReadState::Failed(e);
                return;
            }
        },
    };
    shared.lock().progress.state = ReadState::Reading;
    let mut sink = shared.clone();
    let mut pipeline = Pipeline::new(cfg);
    let mut last_stats = Instant::now();
    let state = loop {
        match reader.next_frame() {
            Ok(Some(frame)) => {
                if frame.number == 1 {
                    shared.lock().on_first_frame(frame.ts);
                }
                pipeline.push_frame(&frame, &mut sink);
                let mut live = shared.lock();
                live.progress.frames = frame.number;
                live.progress.bytes = bytes.load(Ordering::Relaxed);
                if last_stats.elapsed() >= Duration::from_millis(500) {
                    live.stats = pipeline.stats().clone();
                    last_stats = Instant::now();
                }
            }
            Ok(None) => break ReadState::Done,
            Err(e) => break ReadState::Damaged(e.to_string()),
        }
    };
    pipeline.finish(&mut sink);
    let mut live = shared.lock();
    live.flows.finish();
    live.stats = pipeline.stats().clone();
    live.progress.bytes = bytes.load(Ordering::Relaxed);
    live.progress.state = state;
}
