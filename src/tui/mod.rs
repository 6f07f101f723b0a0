//! `sqos tui`: an interactive terminal UI over a capture — flows, flow detail with charts,
//! messages (list, field tree, hex) and findings — that fills in while the capture is read.
//!
//! A reader thread drives the pipeline and hands each record to the shared [`live::Live`]
//! state; the UI thread redraws about once a second and on every input, reading that state
//! under its lock. Memory stays bounded: messages are kept up to a cap (the oldest go first,
//! and the views say so), the flow state has its own bounds.

pub mod analyzed;
pub mod app;
pub mod lists;
pub mod live;
pub mod model;
pub mod source;
pub mod store;
pub mod theme;
pub mod view;

use std::io::IsTerminal;
use std::process::Child;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use ratatui::crossterm::execute;

use crate::analysis::AnalyzerConfig;
use crate::capture::live as tcpdump;
use crate::capture::CaptureReader;
use crate::pipeline::PipelineConfig;
use analyzed::Analyzed;
use app::App;
use live::{Live, Opener, ReadState, Shared};
use source::Input;
use store::MessageStore;
use theme::Theme;

/// How often the views are redrawn when nothing is typed.
const TICK: Duration = Duration::from_millis(1000);

pub struct TuiOptions {
    pub input: Input,
    pub pipeline: PipelineConfig,
    pub max_messages: usize,
    /// `-Y` and its shortcuts: the messages kept and the flows listed.
    pub selection: live::Selection,
}

/// The message for a run without a terminal.
pub const NO_TTY: &str = "sqos tui: standard output is not a terminal; \
use `sqos dissect FILE` for the messages or `sqos flows FILE` for the flow table";

/// The flow analysis the views show.
pub fn flow_source() -> Analyzed {
    flow_source_within(&crate::budget::Budget::default())
}

/// The flow analysis, bounded by the run's memory budget.
pub fn flow_source_within(budget: &crate::budget::Budget) -> Analyzed {
    Analyzed::new(AnalyzerConfig::default().with_memory(budget))
}

/// A prepared input: the reader (or how to open it), its size, and the tcpdump process behind a
/// live capture.
struct Prepared {
    opener: Opener,
    total: Option<u64>,
    child: Option<Child>,
}

fn prepare(input: &Input, stop: Arc<AtomicBool>) -> Result<Prepared, String> {
    match input {
        Input::File(path) => {
            let reader = crate::run::open(path).map_err(|e| e.to_string())?;
            Ok(Prepared {
                opener: Opener::Ready(Box::new(reader)),
                total: std::fs::metadata(path).ok().map(|m| m.len()),
                child: None,
            })
        }
        Input::Stdin => Ok(Prepared {
            opener: Opener::Deferred(Box::new(move || {
                CaptureReader::from_reader(Box::new(std::io::stdin()))
                    .map_err(|e| format!("stdin: {e}"))
            })),
            total: None,
            child: None,
        }),
        Input::Follow(path) => {
            let f =
                source::open_follow(path, stop).map_err(|e| format!("{}: {e}", path.display()))?;
            let label = path.display().to_string();
            Ok(Prepared {
                opener: Opener::Deferred(Box::new(move || {
                    CaptureReader::from_reader(Box::new(f)).map_err(|e| format!("{label}: {e}"))
                })),
                total: None,
                child: None,
            })
        }
        Input::Interface { name, ports } => {
            let mut child = tcpdump::spawn_tcpdump(name, ports)
                .map_err(|e| tcpdump::cannot_run(name, &e, "tui"))?;
            let out = child
                .stdout
                .take()
                .ok_or_else(|| "tcpdump gave no output pipe".to_string())?;
            let stderr = child.stderr.take();
            Ok(Prepared {
                opener: Opener::Deferred(Box::new(move || {
                    CaptureReader::from_reader(Box::new(out))
                        .map_err(|e| tcpdump::tcpdump_error(stderr, &e.to_string()))
                })),
                total: None,
                child: Some(child),
            })
        }
    }
}

/// A source being read: the state the views show, the reader thread filling it, and what to
/// stop when the UI ends.
pub struct Started {
    pub shared: Shared,
    /// Ends when the input does (for a file: at its end).
    pub reader: std::thread::JoinHandle<()>,
    stop: Arc<AtomicBool>,
    child: Option<Child>,
}

impl Started {
    /// Stop following a growing file and end the tcpdump behind a live capture.
    pub fn stop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Open the input and start reading it in the background into a new [`Live`] — what
/// `sqos tui` shows. Also used by the rendering tests, which join the reader to read a
/// capture to its end.
pub fn start(
    input: &Input,
    pipeline: PipelineConfig,
    max_messages: usize,
) -> Result<Started, String> {
    start_selected(input, pipeline, max_messages, live::Selection::default())
}

/// [`start`] with a `-Y` selection.
pub fn start_selected(
    input: &Input,
    pipeline: PipelineConfig,
    max_messages: usize,
    selection: live::Selection,
) -> Result<Started, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let prepared = prepare(input, stop.clone())?;
    let mut live = Live::new(
        input.label(),
        MessageStore::new(max_messages),
        flow_source_within(&pipeline.memory),
    );
    live.tap.selection = selection;
    live.tap.progress.total = prepared.total;
    let shared = Shared::new(live);
    let reader = live::spawn_reader(prepared.opener, pipeline, shared.clone(), stop.clone())
        .map_err(|e| format!("cannot start the reader: {e}"))?;
    Ok(Started {
        shared,
        reader,
        stop,
        child: prepared.child,
    })
}

/// Run the UI until the user quits. Returns the exit code: 0, 1 when the capture was damaged
/// (reported on stderr after the screen is restored), 2 when it could not be used.
pub fn run(opts: TuiOptions) -> i32 {
    if !std::io::stdout().is_terminal() {
        eprintln!("{NO_TTY}");
        return 2;
    }
    let mut started = match start_selected(
        &opts.input,
        opts.pipeline,
        opts.max_messages,
        opts.selection,
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sqos: {e}");
            return 2;
        }
    };
    let result = ui_loop(&started.shared);
    started.stop();
    if let Err(e) = result {
        eprintln!("sqos: terminal: {e}");
        return 2;
    }
    let state = started.shared.lock().tap.progress.state.clone();
    match state {
        ReadState::Damaged(e) => {
            eprintln!(
                "sqos: {}: {e} (everything before it was decoded)",
                opts.input.label()
            );
            1
        }
        ReadState::Failed(e) => {
            eprintln!("sqos: {e}");
            2
        }
        _ => 0,
    }
}

fn ui_loop(shared: &Shared) -> std::io::Result<()> {
    let mut terminal = ratatui::try_init()?;
    let _ = execute!(std::io::stdout(), EnableMouseCapture);
    let mut app = App::new(Theme::from_env());
    let mut idle = live::IdleWatch::new(TICK);
    let result = (|| -> std::io::Result<()> {
        loop {
            {
                let mut live = shared.lock();
                idle.tick(&mut live);
                terminal.draw(|f| view::draw(f, &mut app, &live))?;
            }
            let last = Instant::now();
            if app.quit {
                return Ok(());
            }
            // Wait for input until the next tick; then take everything already queued
            // before drawing again, so a burst of keys costs one redraw.
            if event::poll(TICK.saturating_sub(last.elapsed()))? {
                loop {
                    let ev = event::read()?;
                    let live = shared.lock();
                    match ev {
                        Event::Key(k) => app.on_key(k, &live),
                        Event::Mouse(m) => app.on_mouse(m, &live),
                        _ => {}
                    }
                    drop(live);
                    if app.quit || !event::poll(Duration::ZERO)? {
                        break;
                    }
                }
            }
        }
    })();
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::restore();
    result
}
