//! The thread to spare kept over the files of a run (rotated captures, read one after the
//! other), each file's map handed to it in turn ([`super::SharedMap::pager_on`]).
//!
//! A thread of each file's own was over before it ran for a file of a few MB: on this VM a new
//! thread runs milliseconds after it is asked for, and the reader reads 5 MB in half of one.
//! Kept, it spins for a moment after a file (the reader is then at its last steps, and the next
//! file comes within a millisecond) and takes the next at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};

use super::index::Waiting;
use super::SharedMap;

/// What the reading thread and the thread to spare share.
#[derive(Default)]
struct Shared {
    /// The map to work ahead of the reader on next.
    next: Mutex<Option<SharedMap>>,
    /// Set when the run is over: the thread ends.
    ends: AtomicBool,
}

/// The thread, as the reading thread holds it: it ends when this value drops.
pub(crate) struct Spare {
    shared: Arc<Shared>,
    thread: JoinHandle<()>,
}

impl Spare {
    /// Starts the thread. `None`: no thread could be started.
    pub(crate) fn start() -> Option<Spare> {
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("sqos-indexer".into())
            .spawn(move || work(&theirs))
            .ok()?;
        Some(Spare { shared, thread })
    }

    /// The thread, to wake it.
    pub(crate) fn thread(&self) -> &Thread {
        self.thread.thread()
    }

    /// Works ahead of the reader of `map` next: at once if the thread is waiting, else once it
    /// has left the map before (whose reader has ended).
    pub(crate) fn take_on(&self, map: SharedMap) {
        if let Ok(mut next) = self.shared.next.lock() {
            *next = Some(map);
        }
        self.thread().unpark();
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        self.shared.ends.store(true, Ordering::Release);
        self.thread().unpark();
    }
}

/// The thread's loop: each map it is given, worked on until its reader ends
/// ([`SharedMap::work_ahead`]) and dropped then (the map is unmapped when both are done with
/// it); between them, a wait that spins first.
fn work(shared: &Shared) {
    let mut waiting = Waiting::default();
    loop {
        let next = shared.next.lock().ok().and_then(|mut next| next.take());
        match next {
            Some(map) => {
                map.work_ahead();
                waiting.moved();
            }
            None if shared.ends.load(Ordering::Acquire) => return,
            None => waiting.wait(),
        }
    }
}
