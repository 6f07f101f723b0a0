//! The state the views read, shared with the reader thread that fills it while the capture is
//! read (file, pipe, growing file or live interface), and that thread.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::flows::FlowSource;
use super::store::MessageStore;
use crate::capture::{CaptureReader, Timestamp};
use crate::pipeline::{
    CaptureNote, ChannelRecord, CloseRecord, IoRecord, OpenRecord, PipelineConfig, RecordSink,
    SqosRecord, Stats,
};
use crate::run::{run_capture, CaptureSink, Ending};

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
    fn on_channel(&mut self, rec: &ChannelRecord) {
        self.flows.on_channel(rec);
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.notes_total += 1;
        if self.notes.len() < MAX_NOTES {
            self.notes.push(note.message.clone());
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
    fn on_channel(&mut self, rec: &ChannelRecord) {
        self.lock().on_channel(rec);
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.lock().on_note(note);
    }
}

impl CaptureSink for Shared {
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.lock().on_first_frame(ts);
    }
}

/// How the reader thread gets its capture: already open, or opened in the thread (pipes and
/// interfaces, whose header may take a while to arrive).
pub enum Opener {
    Ready(CaptureReader),
    Deferred(Box<dyn FnOnce() -> Result<CaptureReader, String> + Send>),
}

/// Start the reader thread: the capture through [`run_capture`] into `shared`, until the input
/// ends or `stop` is set.
pub fn spawn_reader(
    opener: Opener,
    cfg: PipelineConfig,
    shared: Shared,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sqos-reader".into())
        .spawn(move || read_all(opener, cfg, shared, &stop))
}

fn read_all(opener: Opener, cfg: PipelineConfig, shared: Shared, stop: &AtomicBool) {
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
    let mut last_stats = Instant::now();
    let result = run_capture(&mut reader, cfg, &mut sink, &mut |p| {
        let mut live = shared.lock();
        live.progress.frames = p.frames;
        live.progress.bytes = p.input_bytes;
        if last_stats.elapsed() >= Duration::from_millis(500) {
            live.stats = p.stats.clone();
            last_stats = Instant::now();
        }
        if stop.load(Ordering::Relaxed) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    let mut live = shared.lock();
    live.flows.finish();
    live.stats = result.stats;
    live.progress.bytes = reader.input_bytes_read();
    live.progress.state = match result.ending {
        Ending::Clean | Ending::Stopped => ReadState::Done,
        Ending::Damaged(e) => ReadState::Damaged(e.to_string()),
    };
}
