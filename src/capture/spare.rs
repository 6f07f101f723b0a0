//! The thread to spare kept over the files of a run (rotated captures, read one after the
//! other): each file's work ahead of the reader is handed to it in turn — indexing a file's
//! records ([`super::SharedMap::pager_on`]) or reading its chunks ahead (`chunks`).
//!
//! A thread of each file's own was over before it ran for a file of a few MB: on this VM a new
//! thread runs milliseconds after it is asked for, and the reader reads 5 MB in half of one.
//! Kept, it spins for a moment after a file (the reader is then at its last steps, and the next
//! file comes within a millisecond) and takes the next at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::index::Waiting;

/// Work for the thread: it returns when its file's reader no longer needs it.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// How long a job waits for the thread to finish the one before (the last file's, whose
/// reader has just ended) before it goes to a thread of its own: a file that overlaps another
/// in time keeps the thread busy for as long as that one is read.
const WAIT_BUSY: Duration = Duration::from_millis(2);

/// What the reading threads and the thread to spare share.
#[derive(Default)]
struct Shared {
    /// The job to do next.
    next: Mutex<Option<Job>>,
    /// A job is queued or running.
    busy: AtomicBool,
    /// Set when the run is over: the thread ends.
    ends: AtomicBool,
}

/// The thread, as the readers hold it (a clone each): it ends when the last clone drops.
#[derive(Clone)]
pub(crate) struct Spare(Arc<Owner>);

struct Owner {
    shared: Arc<Shared>,
    thread: Thread,
}

impl Spare {
    /// Starts the thread. `None`: no thread could be started.
    pub(crate) fn start() -> Option<Spare> {
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("sqos-spare".into())
            .spawn(move || work(&theirs))
            .ok()?;
        let thread = thread.thread().clone();
        Some(Spare(Arc::new(Owner { shared, thread })))
    }

    /// The thread, to wake it.
    pub(crate) fn thread(&self) -> &Thread {
        &self.0.thread
    }

    /// Hands `job` to the thread once it is free, waiting for it at most [`WAIT_BUSY`].
    /// `Err(job)`: it is still busy; run the job elsewhere.
    pub(crate) fn run(&self, job: Job) -> Result<(), Job> {
        let shared = &self.0.shared;
        let since = Instant::now();
        while shared
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            if since.elapsed() > WAIT_BUSY {
                return Err(job);
            }
            std::hint::spin_loop();
            std::thread::yield_now();
        }
        match shared.next.lock() {
            Ok(mut next) => *next = Some(job),
            Err(_) => {
                shared.busy.store(false, Ordering::Release);
                return Err(job);
            }
        }
        self.thread().unpark();
        Ok(())
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.shared.ends.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// The thread's loop: each job done in turn; between them, a wait that spins first.
fn work(shared: &Shared) {
    let mut waiting = Waiting::default();
    loop {
        let next = shared.next.lock().ok().and_then(|mut next| next.take());
        match next {
            Some(job) => {
                job();
                shared.busy.store(false, Ordering::Release);
                waiting.moved();
            }
            None if shared.ends.load(Ordering::Acquire) => return,
            None => waiting.wait(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    /// Jobs handed in turn run one after the other on the one thread, not the caller's.
    #[test]
    fn jobs_run_in_turn_on_the_one_thread() {
        let spare = Spare::start().expect("a thread");
        let (tx, rx) = channel();
        for i in 0..3 {
            let tx = tx.clone();
            let job: Job = Box::new(move || {
                let _ = tx.send((i, std::thread::current().id()));
            });
            assert!(spare.run(job).is_ok(), "job {i}");
            let (done, thread) = rx.recv().unwrap();
            assert_eq!(done, i);
            assert_eq!(thread, spare.thread().id());
            assert_ne!(thread, std::thread::current().id());
        }
    }

    /// A job handed while the thread is still busy comes back (to run elsewhere) once the wait
    /// is over; handed once the thread is free, it runs there.
    #[test]
    fn a_busy_thread_gives_the_job_back() {
        let spare = Spare::start().expect("a thread");
        let (go, wait) = channel::<()>();
        assert!(spare
            .run(Box::new(move || {
                let _ = wait.recv();
            }))
            .is_ok());
        let (tx, rx) = channel();
        let tx2 = tx.clone();
        let since = Instant::now();
        let back = spare.run(Box::new(move || {
            let _ = tx2.send(1);
        }));
        assert!(back.is_err(), "busy");
        assert!(since.elapsed() >= WAIT_BUSY);
        go.send(()).unwrap();
        let mut ran = false;
        for _ in 0..500 {
            let tx = tx.clone();
            if spare
                .run(Box::new(move || {
                    let _ = tx.send(2);
                }))
                .is_ok()
            {
                ran = true;
                break;
            }
        }
        assert!(ran, "free again");
        assert_eq!(rx.recv().unwrap(), 2);
    }
}
