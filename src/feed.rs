//! One adapter for the faces that feed the flow analysis while doing their own job (`annotate`,
//! `export`, `check`, the filters' message and flow selection, the TUI): [`Feed`] hands every
//! record to the analysis, and the face's [`Tap`] sees each SQOS message just before and just
//! after the analysis takes it, plus the other records, the notes, the first frame and whether
//! to stop. A record kind added to [`RecordSink`] is then forwarded in one place, not dropped by
//! one face of many. An analysis that is followed only sometimes is an `Option` (fed when `Some`).

use crate::capture::{CaptureFormat, Timestamp};
use crate::pipeline::{
    CaptureNote, ChannelRecord, CloseRecord, IoRecord, OpenRecord, RecordSink, SqosRecord,
};
use crate::run::CaptureSink;

/// What a face does beside feeding the analysis `A`. Every method has a default that does
/// nothing, so a tap says only what it adds.
pub trait Tap<A> {
    /// A SQOS message, before the analysis takes it.
    fn before(&mut self, _analysis: &mut A, _rec: &SqosRecord) {}
    /// The same message, after the analysis took it (its view of it is current).
    fn after(&mut self, _analysis: &mut A) {}
    /// The same message, when the analysis does not take it ([`RecordSink::takes_sqos`]): the
    /// tap may keep it rather than a copy made in [`Tap::before`]. By default, [`Tap::after`].
    fn after_untaken(&mut self, analysis: &mut A, _rec: SqosRecord) {
        self.after(analysis);
    }
    /// The records other than SQOS messages, before the analysis takes them.
    fn on_open(&mut self, _rec: &OpenRecord) {}
    fn on_close(&mut self, _rec: &CloseRecord) {}
    fn on_io(&mut self, _rec: &IoRecord) {}
    fn on_channel(&mut self, _rec: &ChannelRecord) {}
    /// A note (data lost or left out); also each info note unless [`Tap::on_info`] says else.
    fn on_note(&mut self, _note: &CaptureNote) {}
    fn on_info(&mut self, note: &CaptureNote) {
        self.on_note(note);
    }
    fn on_first_frame(&mut self, _ts: Timestamp) {}
    fn on_format(&mut self, _format: CaptureFormat) {}
    /// True to stop reading (the face's output was closed).
    fn done(&mut self) -> bool {
        false
    }
}

/// The analysis and the face's tap, as one pipeline sink.
pub struct Feed<A, T> {
    pub analysis: A,
    pub tap: T,
}

impl<A: CaptureSink, T: Tap<A>> RecordSink for Feed<A, T> {
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.tap.before(&mut self.analysis, &rec);
        if self.analysis.takes_sqos() {
            self.analysis.on_sqos(rec);
            self.tap.after(&mut self.analysis);
        } else {
            self.tap.after_untaken(&mut self.analysis, rec);
        }
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        self.tap.on_open(rec);
        self.analysis.on_open(rec);
    }
    fn on_close(&mut self, rec: &CloseRecord) {
        self.tap.on_close(rec);
        self.analysis.on_close(rec);
    }
    fn on_io(&mut self, rec: &IoRecord) {
        self.tap.on_io(rec);
        self.analysis.on_io(rec);
    }
    fn on_channel(&mut self, rec: &ChannelRecord) {
        self.tap.on_channel(rec);
        self.analysis.on_channel(rec);
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.tap.on_note(note);
        self.analysis.on_note(note);
    }
    fn on_info(&mut self, note: &CaptureNote) {
        self.tap.on_info(note);
        self.analysis.on_info(note);
    }
}

impl<A: CaptureSink, T: Tap<A>> CaptureSink for Feed<A, T> {
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.tap.on_first_frame(ts);
        self.analysis.on_first_frame(ts);
    }
    fn on_format(&mut self, format: CaptureFormat) {
        self.tap.on_format(format);
        self.analysis.on_format(format);
    }
    fn done(&mut self) -> bool {
        self.tap.done() || self.analysis.done()
    }
}

/// The [`RecordSink`] methods of a sink that passes every record on to another: `$target`, an
/// expression of `$self`, gives `Some` receiving sink (a lock's guard, a variant, an analysis
/// that may be absent) or `None` to drop the record. Written once, so no forwarder forgets a kind.
macro_rules! forward_records {
    ($self:ident => $target:expr) => {
        fn on_sqos(&mut $self, rec: $crate::pipeline::SqosRecord) {
            if let Some(t) = $target {
                t.on_sqos(rec);
            }
        }
        fn on_open(&mut $self, rec: &$crate::pipeline::OpenRecord) {
            if let Some(t) = $target {
                t.on_open(rec);
            }
        }
        fn on_close(&mut $self, rec: &$crate::pipeline::CloseRecord) {
            if let Some(t) = $target {
                t.on_close(rec);
            }
        }
        fn on_io(&mut $self, rec: &$crate::pipeline::IoRecord) {
            if let Some(t) = $target {
                t.on_io(rec);
            }
        }
        fn on_channel(&mut $self, rec: &$crate::pipeline::ChannelRecord) {
            if let Some(t) = $target {
                t.on_channel(rec);
            }
        }
        fn on_note(&mut $self, note: &$crate::pipeline::CaptureNote) {
            if let Some(t) = $target {
                t.on_note(note);
            }
        }
        fn on_info(&mut $self, note: &$crate::pipeline::CaptureNote) {
            if let Some(t) = $target {
                t.on_info(note);
            }
        }
    };
}
pub(crate) use forward_records;

/// An analysis followed only when it is there.
impl<A: RecordSink> RecordSink for Option<A> {
    forward_records!(self => self.as_mut());
    fn takes_sqos(&self) -> bool {
        self.as_ref().is_some_and(A::takes_sqos)
    }
}

impl<A: CaptureSink> CaptureSink for Option<A> {
    fn on_first_frame(&mut self, ts: Timestamp) {
        if let Some(a) = self {
            a.on_first_frame(ts);
        }
    }
    fn on_format(&mut self, format: CaptureFormat) {
        if let Some(a) = self {
            a.on_format(format);
        }
    }
    fn done(&mut self) -> bool {
        self.as_mut().is_some_and(CaptureSink::done)
    }
}
