//! The state the views read, shared with the reader thread that fills it while the capture is
//! read (file, pipe, growing file or live interface), and that thread.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::analyzed::Analyzed;
use super::store::MessageStore;
use crate::capture::{CaptureReader, Timestamp};
use crate::feed::{forward_records, Feed, Tap};
use crate::filter::{Filter, Subject};
use crate::pipeline::{CaptureNote, PipelineConfig, RecordSink, SqosRecord, Stats};
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

/// `sqos tui -Y …`: which messages are kept and which flows listed.
#[derive(Default)]
pub struct Selection {
    /// The filter read in the Messages context: messages not matching are not kept.
    pub messages: Option<Filter>,
    /// The filter read in the Flows context: flows not matching are not listed.
    pub flows: Option<Filter>,
    /// Flows with a matching message (for a flow filter that reads message fields).
    pub marked: HashSet<Uuid>,
}

impl Selection {
    pub fn is_active(&self) -> bool {
        self.messages.is_some() || self.flows.is_some()
    }
}

/// Everything the views show beside the flow analysis.
pub struct Views {
    pub store: MessageStore,
    pub progress: Progress,
    pub stats: Stats,
    pub notes: Vec<String>,
    pub notes_total: u64,
    pub selection: Selection,
    /// The message being fed and its flow as known before the analysis took it.
    pending: Option<(SqosRecord, Option<Uuid>)>,
}

/// Everything the views show: the flow analysis ([`Analyzed`]) and what the views keep beside
/// it, fed through [`Feed`].
pub type Live = Feed<Analyzed, Views>;

impl Live {
    pub fn new(source: String, store: MessageStore, flows: Analyzed) -> Self {
        Feed {
            analysis: flows,
            tap: Views {
                store,
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
                selection: Selection::default(),
                pending: None,
            },
        }
    }

    /// Whether a flow is listed under the `-Y` selection.
    pub fn flow_selected(&self, id: &Uuid) -> bool {
        match &self.tap.selection.flows {
            None => true,
            Some(f) if f.needs_messages() => self.tap.selection.marked.contains(id),
            Some(f) => self
                .analysis
                .flow_state(id)
                .is_some_and(|fl| f.matches(&Subject::flow(fl, None, self.tap.store.start()))),
        }
    }

    /// Capture-relative seconds.
    pub fn rel(&self, ts: Timestamp) -> f64 {
        ts.secs_since(self.tap.store.start())
    }
}

impl Tap<Analyzed> for Views {
    fn before(&mut self, flows: &mut Analyzed, rec: &SqosRecord) {
        self.progress.sqos_messages += 1;
        let id = if self.selection.is_active() {
            flows.flow_of(rec)
        } else {
            None
        };
        self.pending = Some((rec.clone(), id));
    }
    fn after(&mut self, flows: &mut Analyzed) {
        let Some((rec, id)) = self.pending.take() else {
            return;
        };
        if !self.selection.is_active() {
            self.store.push(rec);
            return;
        }
        let id = id.or_else(|| flows.flow_of(&rec));
        let start = self.store.start();
        let flow = id.and_then(|id| flows.flow_state(&id));
        if let (Some(f), Some(id)) = (&self.selection.flows, id) {
            if f.needs_messages() && f.matches_message(&rec, flow, None, start) {
                self.selection.marked.insert(id);
            }
        }
        let keep = self
            .selection
            .messages
            .as_ref()
            .is_none_or(|f| f.matches_message(&rec, flow, None, start));
        if keep {
            self.store.push(rec);
        }
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.notes_total += 1;
        if self.notes.len() < MAX_NOTES {
            self.notes
                .push(crate::output::escape::text(&note.message).into_owned());
        }
    }
    fn on_info(&mut self, note: &CaptureNote) {
        self.notes_total += 1;
        if self.notes.len() < MAX_NOTES {
            self.notes.push(note.message.clone());
        }
    }
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.store.set_start(ts);
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
    forward_records!(self => Some(&mut *self.lock()));
}

/// Settles the flow views once the input has brought nothing new for a while but has not ended
/// (a followed file that is complete, a quiet interface): the last interval is then shown as
/// the end of input would show it (see [`Analyzed::settle`]), not one interval behind.
pub struct IdleWatch {
    after: Duration,
    frames: u64,
    since: Instant,
    settled: Option<u64>,
}

impl IdleWatch {
    pub fn new(after: Duration) -> Self {
        IdleWatch {
            after,
            frames: 0,
            since: Instant::now(),
            settled: None,
        }
    }

    /// Called before each redraw.
    pub fn tick(&mut self, live: &mut Live) {
        let frames = live.tap.progress.frames;
        if frames != self.frames {
            self.frames = frames;
            self.since = Instant::now();
            return;
        }
        let idle =
            live.tap.progress.state == ReadState::Reading && self.since.elapsed() >= self.after;
        if idle && frames > 0 && self.settled != Some(frames) {
            live.analysis.settle();
            self.settled = Some(frames);
        }
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
    Ready(Box<CaptureReader>),
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
        Opener::Ready(r) => *r,
        Opener::Deferred(open) => match open() {
            Ok(r) => r,
            Err(e) => {
                shared.lock().tap.progress.state = ReadState::Failed(e);
                return;
            }
        },
    };
    shared.lock().tap.progress.state = ReadState::Reading;
    let mut sink = shared.clone();
    let mut last_stats = Instant::now();
    let result = run_capture(&mut reader, cfg, &mut sink, &mut |p| {
        let mut live = shared.lock();
        live.tap.progress.frames = p.frames;
        live.tap.progress.bytes = p.input_bytes;
        if last_stats.elapsed() >= Duration::from_millis(500) {
            live.tap.stats = p.stats.clone();
            last_stats = Instant::now();
        }
        if stop.load(Ordering::Relaxed) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    let mut live = shared.lock();
    live.analysis.finish();
    live.tap.stats = result.stats;
    live.tap.progress.bytes = reader.input_bytes_read();
    live.tap.progress.state = match result.ending {
        Ending::Clean | Ending::Stopped => ReadState::Done,
        Ending::Damaged(e) => ReadState::Damaged(e.to_string()),
    };
}
