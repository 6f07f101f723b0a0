//! The ordered output of the pipeline, with SQOS requests held back until they are answered.
//!
//! Ordering rule: records reach the sink in the order they were produced, which is frame order
//! (frame = the frame that completed the message). An SQOS request is produced in its own frame's
//! place but *held*: it and everything produced after it wait until one of these releases it —
//! 1. its final response is matched (the request then carries `response_frame`/`response_time`);
//! 2. its connection closes;
//! 3. `hold_window` of capture time passes after the request (default 60 s);
//! 4. the queue behind held requests is over its bound — `Limits::max_queued` records, or the
//!    memory budget's queued share in bytes (oldest released first; counted in the share and
//!    reported once, not per request);
//! 5. the end of the capture ([`Outbox::release_all`]).
//!
//! Interim (STATUS_PENDING) responses do not release a request; they are queued after it.
//! Releases 2–5 are noted (2 by the exchange, which knows every request of the connection, 3
//! and 5 here), so an SQOS request shown without a response is explained.

use std::collections::{HashMap, VecDeque};

use foldhash::fast::FixedState;
use std::sync::Arc;

use super::{
    CaptureNote, ChannelRecord, CloseRecord, IoRecord, Limits, OpenRecord, RecordSink, SqosRecord,
};
use crate::budget::{Kind, MemoryUse, Share};
use crate::capture::{FrameCopy, Timestamp};
use crate::net::ConnId;

#[derive(Clone, Debug)]
pub enum Out {
    Sqos(Box<SqosRecord>),
    Open(OpenRecord),
    Close(CloseRecord),
    Io(IoRecord),
    /// Boxed: a channel record (two addresses) is twice an I/O record, and rare; unboxed it
    /// made every slot that large, copied (by `memcpy`) on every push and delivery. Its box
    /// counts in the queued share (`heap_bytes`).
    Channel(Box<ChannelRecord>),
    Note(CaptureNote),
    /// A note that loses no data ([`RecordSink::on_info`]).
    Info(CaptureNote),
}

impl Out {
    /// Bytes it holds beyond its queue slot (boxed record, buffer, names, message).
    fn heap_bytes(&self) -> usize {
        match self {
            Out::Sqos(r) => r.held_bytes(),
            Out::Open(r) => r.file_name.len(),
            Out::Note(n) | Out::Info(n) => n.message.len(),
            // Boxed (rare, and twice an I/O record): its box is heap beyond the slot.
            Out::Channel(_) => std::mem::size_of::<ChannelRecord>(),
            Out::Close(_) | Out::Io(_) => 0,
        }
    }
}

#[derive(Debug)]
struct Slot {
    out: Out,
    /// Waiting for its response (SQOS requests only).
    held: bool,
    bytes: usize,
}

/// Sequence number of a queued record, to find a held request again.
pub type Seq = u64;

/// What a note is about. Notes of one kind past [`MAX_NOTES_PER_KIND`] are counted, not
/// queued, and summarised once at the end: a hostile capture cannot flood the output (or the
/// queue) with one note per connection, gap or request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteKind {
    MidStream,
    Gap,
    Resync,
    Unframed,
    Malformed,
    BodyNotDecoded,
    SqosIncomplete,
    Unanswered,
    Replaced,
    Sealed,
    Compressed,
}

impl NoteKind {
    const COUNT: usize = 11;

    /// Whether data went missing (a gap, a cut body…); a request left unanswered loses none
    /// (its note goes to [`RecordSink::on_info`], and `sqos flows` does not count it as lost).
    pub fn loses_data(self) -> bool {
        self != NoteKind::Unanswered
    }

    fn describe(self) -> &'static str {
        match self {
            NoteKind::MidStream => "connections picked up mid-stream",
            NoteKind::Gap => "gaps (bytes missing)",
            NoteKind::Resync => "resynchronisations",
            NoteKind::Unframed => "streams with bytes that held no SMB2 message start",
            NoteKind::Malformed => "malformed SMB2 messages or compounds",
            NoteKind::BodyNotDecoded => "IOCTL bodies not decoded",
            NoteKind::SqosIncomplete => "incomplete SQOS buffers",
            NoteKind::Unanswered => "SQOS requests without a response",
            NoteKind::Replaced => "requests whose MessageId was used again",
            NoteKind::Sealed => "encrypted messages or sessions not decrypted",
            NoteKind::Compressed => "compressed messages not decompressed",
        }
    }
}

/// Notes of one kind given one by one; the rest are counted (`sqos stats` has the totals).
pub const MAX_NOTES_PER_KIND: u64 = 1000;

#[derive(Debug)]
pub struct Outbox {
    queue: VecDeque<Slot>,
    /// Seq of `queue[0]`.
    base: Seq,
    hold_window_ns: i64,
    max_queued: usize,
    /// What the queue holds (the budget's queued share); drops are requests released early
    /// because the queue was full.
    share: Share,
    /// Held requests by connection (some may have been answered since), so a closing
    /// connection releases its own without a walk of the whole queue.
    held_by_conn: HashMap<ConnId, Vec<Seq>, FixedState>,
    /// Notes produced by forced releases, delivered before the released record.
    released_early: u64,
    /// Notes per kind so far (given and not given).
    notes_by_kind: [u64; NoteKind::COUNT],
}

impl Outbox {
    pub fn new(limits: &Limits) -> Self {
        Outbox {
            queue: VecDeque::new(),
            base: 0,
            hold_window_ns: i64::from(limits.hold_window_secs) * 1_000_000_000,
            max_queued: limits.max_queued.max(1),
            share: Share::new(Kind::Queued, limits.max_queued_bytes),
            held_by_conn: HashMap::default(),
            released_early: 0,
            notes_by_kind: [0; NoteKind::COUNT],
        }
    }

    /// Queue a note of `kind`, unless [`MAX_NOTES_PER_KIND`] of that kind were given already
    /// (then it is only counted). `message` is only built when the note is given.
    pub fn note(&mut self, kind: NoteKind, frame: u64, message: impl FnOnce() -> String) {
        if self.count_note(kind) {
            let note = CaptureNote {
                frame,
                message: message(),
            };
            self.push(if kind.loses_data() {
                Out::Note(note)
            } else {
                Out::Info(note)
            });
        }
    }

    /// Count a note of `kind`; true if it is to be given (then [`Outbox::push`] it).
    pub fn count_note(&mut self, kind: NoteKind) -> bool {
        let n = &mut self.notes_by_kind[kind as usize];
        *n += 1;
        *n <= MAX_NOTES_PER_KIND
    }

    /// One note per kind whose notes were cut short: how many were not given.
    pub fn note_summaries(&mut self, frame: u64) {
        let kinds = [
            NoteKind::MidStream,
            NoteKind::Gap,
            NoteKind::Resync,
            NoteKind::Unframed,
            NoteKind::Malformed,
            NoteKind::BodyNotDecoded,
            NoteKind::SqosIncomplete,
            NoteKind::Unanswered,
            NoteKind::Replaced,
            NoteKind::Sealed,
            NoteKind::Compressed,
        ];
        for kind in kinds {
            let n = self.notes_by_kind[kind as usize];
            if n > MAX_NOTES_PER_KIND {
                let note = CaptureNote {
                    frame,
                    message: format!(
                        "{} more notes of {} not shown (the first {MAX_NOTES_PER_KIND} were; {n} in all)",
                        n - MAX_NOTES_PER_KIND,
                        kind.describe()
                    ),
                };
                self.push(if kind.loses_data() {
                    Out::Note(note)
                } else {
                    Out::Info(note)
                });
            }
        }
    }

    /// The queued share: peak, and requests released early because the queue was full.
    pub fn memory(&self) -> MemoryUse {
        self.share.usage()
    }

    pub fn push(&mut self, out: Out) -> Seq {
        self.push_slot(out, false)
    }

    /// Queue an SQOS request to be held until [`Outbox::answer`].
    pub fn push_held(&mut self, rec: SqosRecord) -> Seq {
        let conn = rec.conn;
        let seq = self.push_slot(Out::Sqos(Box::new(rec)), true);
        let seqs = self.held_by_conn.entry(conn).or_default();
        seqs.push(seq);
        // Answered requests stay listed until the list doubles: amortised, it stays
        // proportional to what is held.
        if seqs.len() >= 64 && seqs.len().is_power_of_two() {
            let (queue, base) = (&self.queue, self.base);
            seqs.retain(|&s| is_held(queue, base, s));
        }
        seq
    }

    /// Queue an I/O record (one per READ/WRITE answered): it holds no bytes beyond its slot,
    /// so they are not worked out.
    pub fn push_io(&mut self, rec: IoRecord) -> Seq {
        self.push_sized(Out::Io(rec), false, 0)
    }

    fn push_slot(&mut self, out: Out, held: bool) -> Seq {
        let bytes = out.heap_bytes();
        self.push_sized(out, held, bytes)
    }

    /// Queue `out`, holding `bytes` (its `heap_bytes`).
    #[inline]
    fn push_sized(&mut self, out: Out, held: bool, bytes: usize) -> Seq {
        let seq = self.base + self.queue.len() as u64;
        self.share.charge(1, bytes);
        self.queue.push_back(Slot { out, held, bytes });
        seq
    }

    /// The held request `seq` got its final response: let `fill` complete it and release it.
    /// Returns false if it had already been released (then nothing is changed).
    pub fn answer(&mut self, seq: Seq, fill: impl FnOnce(&mut SqosRecord)) -> bool {
        match slot_mut(&mut self.queue, self.base, seq) {
            Some(Slot {
                out: Out::Sqos(rec),
                held: held @ true,
                ..
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

    /// Release the held request `seq` without its response (it was sent again elsewhere).
    pub fn release(&mut self, seq: Seq) {
        if let Some(slot) = slot_mut(&mut self.queue, self.base, seq) {
            slot.held = false;
        }
    }

    /// Release the held requests of a closed connection (the exchange notes each of them:
    /// it knows every request of the connection, held or not).
    pub fn release_conn(&mut self, conn: ConnId) {
        let Some(seqs) = self.held_by_conn.remove(&conn) else {
            return;
        };
        for seq in seqs {
            let Some(slot) = slot_mut(&mut self.queue, self.base, seq) else {
                continue;
            };
            if let (Out::Sqos(rec), true) = (&slot.out, slot.held) {
                if rec.conn == conn {
                    slot.held = false;
                }
            }
        }
    }

    /// Deliver what is ready, applying the time window and the queue bound.
    #[inline]
    pub fn drain<S: RecordSink>(&mut self, now: Timestamp, sink: &mut S) {
        // Most frames make no record: nothing to do (checked inline, where every frame ends).
        if !self.queue.is_empty() {
            self.drain_queued(now, sink);
        }
    }

    fn drain_queued<S: RecordSink>(&mut self, now: Timestamp, sink: &mut S) {
        loop {
            self.deliver_ready(sink);
            let Some(front) = self.queue.front() else {
                return;
            };
            let too_old = match &front.out {
                Out::Sqos(rec) => now.0.saturating_sub(rec.ts.0) > self.hold_window_ns,
                _ => false,
            };
            let too_many = self.queue.len() > self.max_queued || self.share.over();
            if !(too_old || too_many) {
                return;
            }
            if too_old {
                self.release_front(sink, Some("no response within the hold window"));
            } else {
                // A bound, not the protocol: counted in the queued share, reported once.
                if let Some(Slot {
                    out: Out::Sqos(rec),
                    held: true,
                    ..
                }) = self.queue.front()
                {
                    self.share.dropped(1, 0, rec.frame);
                }
                self.release_front(sink, None);
            }
        }
    }

    /// End of capture: deliver everything, releasing held requests unanswered.
    pub fn release_all<S: RecordSink>(&mut self, sink: &mut S) {
        while !self.queue.is_empty() {
            self.deliver_ready(sink);
            if !self.queue.is_empty() {
                self.release_front(sink, Some("no response before the end of the capture"));
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

    /// Release the front request without its response; `why` is noted (None: counted only).
    fn release_front<S: RecordSink>(&mut self, sink: &mut S, why: Option<&str>) {
        let Some(front) = self.queue.front() else {
            return;
        };
        if let (Out::Sqos(rec), true) = (&front.out, front.held) {
            let (frame, msg_id) = (rec.frame, rec.msg_id);
            if let Some(why) = why {
                if self.count_note(NoteKind::Unanswered) {
                    sink.on_info(&CaptureNote {
                        frame,
                        message: format!(
                            "SQOS request in frame {frame} (msg id {msg_id}) shown without its response: {why}"
                        ),
                    });
                }
            }
            self.released_early += 1;
        }
        if let Some(front) = self.queue.front_mut() {
            front.held = false;
        }
    }

    fn deliver_ready<S: RecordSink>(&mut self, sink: &mut S) {
        while self.queue.front().is_some_and(|s| !s.held) {
            let Some(slot) = self.queue.pop_front() else {
                return;
            };
            self.base += 1;
            self.share.release(1, slot.bytes);
            match slot.out {
                Out::Sqos(rec) => sink.on_sqos(*rec),
                Out::Open(r) => sink.on_open(&r),
                Out::Close(r) => sink.on_close(&r),
                Out::Io(r) => sink.on_io(&r),
                Out::Channel(r) => sink.on_channel(&r),
                Out::Note(n) => sink.on_note(&n),
                Out::Info(n) => sink.on_info(&n),
            }
        }
    }
}

fn slot_mut(queue: &mut VecDeque<Slot>, base: Seq, seq: Seq) -> Option<&mut Slot> {
    let idx = usize::try_from(seq.checked_sub(base)?).ok()?;
    queue.get_mut(idx)
}

fn is_held(queue: &VecDeque<Slot>, base: Seq, seq: Seq) -> bool {
    seq.checked_sub(base)
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| queue.get(i))
        .is_some_and(|s| s.held)
}
