//! The ordered output of the pipeline, with SQOS requests held back until they are answered.
//!
//! Ordering rule: records reach the sink in the order they were produced, which is frame order
//! (frame = the frame that completed the message). An SQOS request is produced in its own frame's
//! place but *held*: it and everything produced after it wait until one of these releases it —
//! 1. its final response is matched (the request then carries `response_frame`/`response_time`);
//! 2. its connection closes;
//! 3. `hold_window` of capture time passes after the request (default 60 s);
//! 4. more than `max_queued` records wait behind held requests (oldest released first);
//! 5. the end of the capture ([`Outbox::release_all`]).
//!
//! Interim (STATUS_PENDING) responses do not release a request; they are queued after it.
//! Releases 2–5 are noted, so an SQOS request shown without a response is explained.

use std::collections::VecDeque;
use std::sync::Arc;

use super::{CaptureNote, CloseRecord, IoRecord, OpenRecord, RecordSink, SqosRecord};
use crate::capture::{FrameCopy, Timestamp};
use crate::net::ConnId;

#[derive(Clone, Debug)]
pub enum Out {
    Sqos(Box<SqosRecord>),
    Open(OpenRecord),
    Close(CloseRecord),
    Io(IoRecord),
    Note(CaptureNote),
    /// A note that loses no data ([`RecordSink::on_info`]).
    Info(CaptureNote),
}

#[derive(Debug)]
struct Slot {
    out: Out,
    /// Waiting for its response (SQOS requests only).
    held: bool,
}

/// Sequence number of a queued record, to find a held request again.
pub type Seq = u64;

#[derive(Debug)]
pub struct Outbox {
    queue: VecDeque<Slot>,
    /// Seq of `queue[0]`.
    base: Seq,
    hold_window_ns: i64,
    max_queued: usize,
    /// Notes produced by forced releases, delivered before the released record.
    released_early: u64,
}

impl Outbox {
    pub fn new(hold_window_secs: u32, max_queued: usize) -> Self {
        Outbox {
            queue: VecDeque::new(),
            base: 0,
            hold_window_ns: i64::from(hold_window_secs) * 1_000_000_000,
            max_queued: max_queued.max(1),
            released_early: 0,
        }
    }

    pub fn push(&mut self, out: Out) -> Seq {
        self.push_slot(out, false)
    }

    /// Queue an SQOS request to be held until [`Outbox::answer`].
    pub fn push_held(&mut self, rec: SqosRecord) -> Seq {
        self.push_slot(Out::Sqos(Box::new(rec)), true)
    }

    fn push_slot(&mut self, out: Out, held: bool) -> Seq {
        let seq = self.base + self.queue.len() as u64;
        self.queue.push_back(Slot { out, held });
        seq
    }

    /// The held request `seq` got its final response: let `fill` complete it and release it.
    /// Returns false if it had already been released (then nothing is changed).
    pub fn answer(&mut self, seq: Seq, fill: impl FnOnce(&mut SqosRecord)) -> bool {
        let Some(idx) = seq
            .checked_sub(self.base)
            .and_then(|i| usize::try_from(i).ok())
        else {
            return false;
        };
        match self.queue.get_mut(idx) {
            Some(Slot {
                out: Out::Sqos(rec),
                held: held @ true,
            }) => {
                fill(rec);
                *held = false;
                true
            }
            _ => false,
        }
    }

    /// The sequence number the next record will get.
    pub fn next_seq(&self) -> Seq {
        self.base + self.queue.len() as u64
    }

    /// Give the SQOS records queued from `since` on that frame `frame` completed a copy of it
    /// (made once, shared).
    pub fn attach_frame(&mut self, since: Seq, frame: u64, copy: impl FnOnce() -> Arc<FrameCopy>) {
        let skip = usize::try_from(since.saturating_sub(self.base)).unwrap_or(usize::MAX);
        let mut copy = Some(copy);
        let mut made: Option<Arc<FrameCopy>> = None;
        for slot in self.queue.iter_mut().skip(skip) {
            if let Out::Sqos(rec) = &mut slot.out {
                if rec.frame == frame {
                    if made.is_none() {
                        made = copy.take().map(|f| f());
                    }
                    rec.frame_copy = made.clone();
                }
            }
        }
    }

    /// Release the held requests of a closed connection.
    pub fn release_conn(&mut self, conn: ConnId, frame: u64) {
        let mut notes = Vec::new();
        for slot in self.queue.iter_mut() {
            if let (Out::Sqos(rec), true) = (&slot.out, slot.held) {
                if rec.conn == conn {
                    slot.held = false;
                    notes.push(CaptureNote {
                        frame,
                        message: format!(
                            "SQOS request in frame {} (msg id {}) got no response before its connection closed",
                            rec.frame, rec.msg_id
                        ),
                    });
                }
            }
        }
        for n in notes {
            self.push(Out::Info(n));
        }
    }

    /// Deliver what is ready, applying the time window and the queue bound.
    pub fn drain<S: RecordSink>(&mut self, now: Timestamp, sink: &mut S) {
        loop {
            self.deliver_ready(sink);
            let Some(front) = self.queue.front() else {
                return;
            };
            let too_old = match &front.out {
                Out::Sqos(rec) => now.0.saturating_sub(rec.ts.0) > self.hold_window_ns,
                _ => false,
            };
            let too_many = self.queue.len() > self.max_queued;
            if !(too_old || too_many) {
                return;
            }
            let why = if too_old {
                "no response within the hold window"
            } else {
                "too many records queued behind it"
            };
            self.release_front(sink, why);
        }
    }

    /// End of capture: deliver everything, releasing held requests unanswered.
    pub fn release_all<S: RecordSink>(&mut self, sink: &mut S) {
        while !self.queue.is_empty() {
            self.deliver_ready(sink);
            if !self.queue.is_empty() {
                self.release_front(sink, "no response before the end of the capture");
            }
        }
    }

    /// Requests released without their response so far.
    pub fn released_early(&self) -> u64 {
        self.released_early
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    fn release_front<S: RecordSink>(&mut self, sink: &mut S, why: &str) {
        if let Some(front) = self.queue.front_mut() {
            if let (Out::Sqos(rec), true) = (&front.out, front.held) {
                sink.on_info(&CaptureNote {
                    frame: rec.frame,
                    message: format!(
                        "SQOS request in frame {} (msg id {}) shown without its response: {why}",
                        rec.frame, rec.msg_id
                    ),
                });
                self.released_early += 1;
            }
            front.held = false;
        }
    }

    fn deliver_ready<S: RecordSink>(&mut self, sink: &mut S) {
        while self.queue.front().is_some_and(|s| !s.held) {
            let Some(slot) = self.queue.pop_front() else {
                return;
            };
            self.base += 1;
            match slot.out {
                Out::Sqos(rec) => sink.on_sqos(*rec),
                Out::Open(r) => sink.on_open(&r),
                Out::Close(r) => sink.on_close(&r),
                Out::Io(r) => sink.on_io(&r),
                Out::Note(n) => sink.on_note(&n),
                Out::Info(n) => sink.on_info(&n),
            }
        }
    }
}
