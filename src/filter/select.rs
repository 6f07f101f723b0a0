//! Applying a filter while a capture is read.
//!
//! [`MessageSelect`] sits in front of a message sink and passes on only the SQOS messages the
//! filter keeps, reading flow fields from a flow analysis that follows the capture beside it (as
//! the flow stood when the message was seen: a stream is never read twice). Reading files, it
//! can judge them on each flow's final state instead, as `sqos flows` shows it (tshark's `-2`):
//! it holds the messages back until the capture has been read ([`HoldMessages::hold`]), and
//! only where more come than it may hold are the files read a second time.
//! [`FlowSelect`] is a flow analysis whose result keeps only the matching flows: on their final
//! state, or — when the filter reads message fields or times — those with a matching message.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::{Map, Value};
use uuid::Uuid;

use super::{Filter, Subject};
use crate::analysis::{Analysis, Analyzer, AnalyzerConfig, FlowState};
use crate::budget::human_bytes;
use crate::capture::{CaptureFormat, Timestamp};
use crate::feed::{Feed, Tap};
use crate::output::columns::flow_row;
use crate::pipeline::{
    CaptureNote, ChannelRecord, CloseRecord, HeldRecords, IoRecord, OpenRecord, RecordSink,
    SqosRecord,
};
use crate::run::CaptureSink;

/// Final flows whose flat rows [`Selecting`] keeps: more than a capture's VMs usually are,
/// and bounded whatever the capture (a row holds the flow's capped lists: a few KB).
const FLOW_ROWS: usize = 64;

/// What receives the messages a [`MessageSelect`] keeps.
pub trait MessageSink: CaptureSink {
    /// Every message, kept or not, before the filter is applied.
    fn on_seen(&mut self, _rec: &SqosRecord) {}
    /// A kept message, with its flow as known then (when flows are followed) and, where that
    /// is the flow's final state, its flat row (`columns::flow_row`) made once for all its
    /// messages (give it to [`Subject::with_flow_row`]).
    fn on_message(
        &mut self,
        rec: SqosRecord,
        _flow: Option<&FlowState>,
        _row: Option<&Map<String, Value>>,
    ) {
        self.on_sqos(rec);
    }
}

/// What a [`MessageSelect`] does beside the flow analysis it follows: passes the SQOS messages
/// `filter` keeps to `inner`; opens, I/O and notes go through.
pub struct Selecting<S> {
    pub inner: S,
    filter: Option<Filter>,
    /// The flows as they ended (a holding reading's, or a first pass's over a file): read
    /// instead of the flows as they stood (so a message before the flow's name was sent still
    /// matches `--vm`).
    final_flows: HashMap<Uuid, FlowState>,
    /// Flat rows of final flows, made once for all their messages (a flow field read for
    /// each message made its flow's row anew, ~100,000 instructions), at most [`FLOW_ROWS`]:
    /// the flows past them make theirs for each message as before.
    final_rows: HashMap<Uuid, Map<String, Value>>,
    start: Option<Timestamp>,
    /// The message being fed and its flow as known before the analysis took it.
    pending: Option<(SqosRecord, Option<Uuid>)>,
    /// Messages and notes held back until the flows are final ([`HoldMessages::hold`]).
    held: Option<Held>,
    /// SQOS messages seen, and passed on.
    pub seen: u64,
    pub kept: u64,
}

/// What a holding [`Selecting`] keeps, within `cap` bytes: the messages, each filed under its
/// flow as the analysis knew it once it had taken the message, and the notes between them.
struct Held {
    messages: HeldRecords,
    /// The flows the messages were filed under, each charged [`HELD_FLOW_BYTES`].
    flows: HashSet<Uuid>,
    /// Messages held so far.
    count: usize,
    /// Each note with the count of messages that came before it.
    notes: Vec<(usize, HeldNote)>,
    bytes: usize,
    cap: usize,
    /// More came than `cap` holds (at this frame, or at a note with none): everything was let
    /// go, and nothing more is held.
    over: Option<Option<u64>>,
}

/// What a flow id in [`Held::flows`] costs: its 16 bytes in a hash set's slot, the set's
/// control byte and the room its load factor leaves (up to half again).
const HELD_FLOW_BYTES: usize = 32;

enum HeldNote {
    Note(CaptureNote),
    Info(CaptureNote),
}

impl Held {
    fn new(cap: usize) -> Held {
        Held {
            messages: HeldRecords::default(),
            flows: HashSet::new(),
            count: 0,
            notes: Vec::new(),
            bytes: 0,
            cap,
            over: None,
        }
    }

    fn push_message(&mut self, rec: SqosRecord, flow: Option<Uuid>) {
        if self.over.is_some() {
            return;
        }
        let new_flow = flow.is_some_and(|f| self.flows.insert(f));
        self.count += 1;
        let frame = rec.frame;
        let bytes = self.messages.push(rec, flow) + usize::from(new_flow) * HELD_FLOW_BYTES;
        self.add(bytes, Some(frame));
    }

    fn push_note(&mut self, note: HeldNote) {
        if self.over.is_some() {
            return;
        }
        let (HeldNote::Note(n) | HeldNote::Info(n)) = &note;
        let bytes = std::mem::size_of::<(usize, HeldNote)>() + n.message.len();
        self.notes.push((self.count, note));
        self.add(bytes, None);
    }

    fn add(&mut self, bytes: usize, frame: Option<u64>) {
        self.bytes += bytes;
        if self.bytes > self.cap {
            self.over = Some(frame);
            self.messages = HeldRecords::default();
            self.flows = HashSet::new();
            self.notes = Vec::new();
        }
    }
}

/// Passes the SQOS messages a filter keeps to a message sink, reading flow fields from a flow
/// analysis (followed only when the filter or the sink reads flows).
pub type MessageSelect<S> = Feed<Option<Analyzer>, Selecting<S>>;

impl<S: MessageSink> MessageSelect<S> {
    /// `follow_flows`: follow the flows even if the filter does not read them (the sink does).
    pub fn new(inner: S, filter: Option<Filter>, follow_flows: bool) -> Self {
        let analyzer = (follow_flows || filter.as_ref().is_some_and(Filter::needs_flow))
            .then(Analyzer::default);
        Feed {
            analysis: analyzer,
            tap: Selecting {
                inner,
                filter,
                final_flows: HashMap::new(),
                final_rows: HashMap::new(),
                start: None,
                pending: None,
                held: None,
                seen: 0,
                kept: 0,
            },
        }
    }

    /// True when flows are followed (a first pass can then supply their final state).
    pub fn follows_flows(&self) -> bool {
        self.analysis.is_some()
    }

    /// Read these flows (a first pass's final analysis) instead of the flows as they stood.
    pub fn with_final_flows(mut self, flows: Vec<FlowState>) -> Self {
        self.tap.final_flows = flows.into_iter().map(|f| (f.id, f)).collect();
        self
    }
}

/// A sink that can judge the SQOS messages of files on their flows' final state in one
/// reading: [`MessageSelect`], and what wraps one.
pub trait HoldMessages {
    /// Judge the messages of the capture about to be read on their flows' final state: the
    /// flows are followed by an analysis configured as `cfg` (as `sqos flows` would), and
    /// the messages and notes are held back, up to `cap` bytes, until
    /// [`HoldMessages::pass_held`]. Meanwhile the sink gets no opens, closes, I/O or
    /// channels (the message faces take none) and is not asked whether it is done. False (and
    /// nothing changes) when no flows are followed.
    fn hold(&mut self, cfg: AnalyzerConfig, cap: usize) -> bool;

    /// The capture has been read holding ([`HoldMessages::hold`]): the flows are final. Passes
    /// on the held messages and notes, each message judged on its flow's final state. Else
    /// says why they could not be (nothing held, more than the cap, or a message whose flow
    /// the final analysis lacks): nothing was passed on, the select now reads the final
    /// flows, and the capture is to be read again through it.
    fn pass_held(&mut self) -> Result<(), ReadAgain>;
}

/// Why [`HoldMessages::pass_held`] passed nothing on: the capture is to be read again. Said on
/// stderr, since the run then takes about twice as long.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadAgain {
    #[error("no messages were held")]
    NothingHeld,
    #[error(
        "the messages held to judge the filter on each flow's final state passed their share \
         ({}, a fortieth of --memory){}: the captures are read a second time",
        human_bytes(*cap as u64),
        at.map(|f| format!(" at frame {f}")).unwrap_or_default()
    )]
    Over { cap: usize, at: Option<u64> },
    #[error(
        "a held message's flow is not among the final flows (the flows' share of --memory was \
         full): the captures are read a second time"
    )]
    FlowGone,
}

impl<S: MessageSink> HoldMessages for MessageSelect<S> {
    fn hold(&mut self, cfg: AnalyzerConfig, cap: usize) -> bool {
        if self.analysis.is_none() {
            return false;
        }
        self.analysis = Some(Analyzer::new(cfg));
        self.tap.held = Some(Held::new(cap));
        true
    }

    fn pass_held(&mut self) -> Result<(), ReadAgain> {
        let Some(held) = self.tap.held.take() else {
            return Err(ReadAgain::NothingHeld);
        };
        // A second reading, if there is one, follows the flows as they stand, as `new` does.
        let flows = self
            .analysis
            .replace(Analyzer::default())
            .map(|a| a.finish().flows)
            .unwrap_or_default();
        self.tap.final_flows = flows.into_iter().map(|f| (f.id, f)).collect();
        let known = held
            .flows
            .iter()
            .all(|id| self.tap.final_flows.contains_key(id));
        if let Some(at) = held.over {
            return Err(ReadAgain::Over { cap: held.cap, at });
        }
        if !known {
            return Err(ReadAgain::FlowGone);
        }
        let mut notes = held.notes.into_iter().peekable();
        let mut none = None;
        for (i, (rec, id)) in held.messages.into_iter().enumerate() {
            while let Some((_, note)) = notes.next_if(|(before, _)| *before <= i) {
                self.tap.pass_note(note);
            }
            if self.tap.inner.done() {
                return Ok(());
            }
            self.tap.seen += 1;
            self.tap.inner.on_seen(&rec);
            self.tap.pass_on(&mut none, rec, id);
        }
        for (_, note) in notes {
            self.tap.pass_note(note);
        }
        Ok(())
    }
}

/// The flow `rec` belongs to: `id` as known before the analysis took it, else as the
/// analysis knows it now.
fn flow_id(analyzer: Option<&Analyzer>, rec: &SqosRecord, id: Option<Uuid>) -> Option<Uuid> {
    id.or_else(|| analyzer?.flow_of(rec))
}

impl<S: MessageSink> Selecting<S> {
    fn pass_note(&mut self, note: HeldNote) {
        match note {
            HeldNote::Note(n) => self.inner.on_note(&n),
            HeldNote::Info(n) => self.inner.on_info(&n),
        }
    }

    /// Give `rec` to the sink if the filter keeps it, with its flow `id` (None: looked up).
    fn pass_on(&mut self, analyzer: &mut Option<Analyzer>, rec: SqosRecord, id: Option<Uuid>) {
        let start = self.start.unwrap_or(rec.ts);
        // Held messages come with their flow and no analysis: the final flows have it.
        let analyzer = analyzer.as_ref();
        let id = flow_id(analyzer, &rec, id);
        let final_flow = id.and_then(|id| Some((id, self.final_flows.get(&id)?)));
        let flow = match final_flow {
            Some((_, f)) => Some(f),
            None => id.and_then(|id| analyzer?.flow(&id)),
        };
        let row = final_flow.and_then(|(id, f)| {
            if self.final_rows.len() < FLOW_ROWS && !self.final_rows.contains_key(&id) {
                self.final_rows.insert(id, flow_row(f));
            }
            self.final_rows.get(&id)
        });
        let keep = self
            .filter
            .as_ref()
            .is_none_or(|f| f.matches_message(&rec, flow, row, start));
        if keep {
            self.kept += 1;
            self.inner.on_message(rec, flow, row);
        }
    }
}

impl<S: MessageSink> Tap<Option<Analyzer>> for Selecting<S> {
    fn before(&mut self, analyzer: &mut Option<Analyzer>, rec: &SqosRecord) {
        // Holding, the sink sees the message when it is passed on (`pass_held`).
        if self.held.is_none() {
            self.seen += 1;
            self.inner.on_seen(rec);
        }
        self.start.get_or_insert(rec.ts);
        // Without an analyzer the message itself comes to `after_untaken`: no copy (a thousand
        // instructions a message, and as many to drop it).
        if analyzer.takes_sqos() {
            let id = analyzer.as_ref().and_then(|a| a.flow_of(rec));
            self.pending = Some((rec.clone(), id));
        }
    }
    fn after(&mut self, analyzer: &mut Option<Analyzer>) {
        if let Some((rec, id)) = self.pending.take() {
            match &mut self.held {
                // Its flow as `pass_on` would find it now, the analysis having taken it.
                Some(held) => {
                    let id = flow_id(analyzer.as_ref(), &rec, id);
                    held.push_message(rec, id);
                }
                None => self.pass_on(analyzer, rec, id),
            }
        }
    }
    fn after_untaken(&mut self, analyzer: &mut Option<Analyzer>, rec: SqosRecord) {
        match &mut self.held {
            Some(held) => {
                let id = flow_id(analyzer.as_ref(), &rec, None);
                held.push_message(rec, id);
            }
            None => self.pass_on(analyzer, rec, None),
        }
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        if self.held.is_none() {
            self.inner.on_open(rec);
        }
    }
    fn on_close(&mut self, rec: &CloseRecord) {
        if self.held.is_none() {
            self.inner.on_close(rec);
        }
    }
    fn on_io(&mut self, rec: &IoRecord) {
        if self.held.is_none() {
            self.inner.on_io(rec);
        }
    }
    fn on_channel(&mut self, rec: &ChannelRecord) {
        if self.held.is_none() {
            self.inner.on_channel(rec);
        }
    }
    fn on_note(&mut self, note: &CaptureNote) {
        match &mut self.held {
            Some(held) => held.push_note(HeldNote::Note(note.clone())),
            None => self.inner.on_note(note),
        }
    }
    fn on_info(&mut self, note: &CaptureNote) {
        match &mut self.held {
            Some(held) => held.push_note(HeldNote::Info(note.clone())),
            None => self.inner.on_info(note),
        }
    }
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.start = Some(ts);
        self.inner.on_first_frame(ts);
    }
    fn on_format(&mut self, format: CaptureFormat) {
        self.inner.on_format(format);
    }
    fn done(&mut self) -> bool {
        // Holding, the flows are final only at the capture's end.
        self.held.is_none() && self.inner.done()
    }
}

/// What [`FlowSelect`] notes beside the analysis: the filter and the flows it matched.
pub struct FlowMarks {
    filter: Option<Filter>,
    start: Option<Timestamp>,
    /// Flows with a matching message (when the filter reads messages).
    marked: HashSet<Uuid>,
    /// Finding codes of each flow's messages (when the filter asks for findings).
    codes: HashMap<Uuid, BTreeSet<&'static str>>,
    /// The message being fed and its flow, when the filter reads messages: matched once the
    /// analyzer has taken it.
    pending: Option<(SqosRecord, Uuid, Timestamp)>,
}

/// The flow analysis of a capture, keeping the flows `filter` selects.
pub type FlowSelect = Feed<Analyzer, FlowMarks>;

impl FlowSelect {
    pub fn new(analyzer: Analyzer, filter: Option<Filter>) -> Self {
        Feed {
            analysis: analyzer,
            tap: FlowMarks {
                filter,
                start: None,
                marked: HashSet::new(),
                codes: HashMap::new(),
                pending: None,
            },
        }
    }

    /// The analysis, with only the selected flows.
    pub fn finish(self) -> Analysis {
        let mut a = self.analysis.finish();
        let m = self.tap;
        if let Some(f) = &m.filter {
            let start = m.start.or(a.start).unwrap_or_default();
            if f.needs_messages() {
                a.flows.retain(|fl| m.marked.contains(&fl.id));
            } else {
                a.flows
                    .retain(|fl| f.matches(&Subject::flow(fl, m.codes.get(&fl.id), start)));
            }
        }
        a
    }
}

impl Tap<Analyzer> for FlowMarks {
    fn before(&mut self, analyzer: &mut Analyzer, rec: &SqosRecord) {
        let Some(f) = &self.filter else {
            return;
        };
        let (messages, findings) = (f.needs_messages(), f.needs_message_findings());
        if !(messages || findings) {
            return;
        }
        // The catch-all flow (nil id) collects what belongs to no flow.
        let id = analyzer.flow_of(rec).unwrap_or(Uuid::nil());
        let start = *self.start.get_or_insert(rec.ts);
        if findings {
            let list = rec.body.findings();
            if !list.is_empty() {
                let set = self.codes.entry(id).or_default();
                set.extend(list.iter().map(|x| x.code.as_str()));
            }
        }
        if messages && !self.marked.contains(&id) {
            self.pending = Some((rec.clone(), id, start));
        }
    }
    fn after(&mut self, analyzer: &mut Analyzer) {
        let (Some((rec, id, start)), Some(f)) = (self.pending.take(), &self.filter) else {
            return;
        };
        if f.matches_message(&rec, analyzer.flow(&id), None, start) {
            self.marked.insert(id);
        }
    }
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.start = Some(ts);
    }
}

impl crate::check::facts::FlowAnalysis for FlowSelect {
    fn into_analysis(self) -> Analysis {
        self.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Context;
    use crate::pipeline::{Kept, SqosBody};

    /// A message face that notes the frames it was given, with their flow's name, and how
    /// many messages it saw.
    #[derive(Default)]
    struct Shown {
        kept: Vec<(u64, Option<String>)>,
        seen: usize,
        /// Kept messages whose decoded body came without its field list.
        without_fields: usize,
    }

    impl RecordSink for Shown {
        fn on_sqos(&mut self, rec: SqosRecord) {
            self.kept.push((rec.frame, None));
        }
        fn on_channel(&mut self, _rec: &ChannelRecord) {}
    }

    impl CaptureSink for Shown {}

    impl MessageSink for Shown {
        fn on_seen(&mut self, _rec: &SqosRecord) {
            self.seen += 1;
        }
        fn on_message(
            &mut self,
            rec: SqosRecord,
            flow: Option<&FlowState>,
            _row: Option<&Map<String, Value>>,
        ) {
            let decoded = match &rec.body {
                SqosBody::Request(d) => d.message.is_some(),
                SqosBody::Response(d) => d.message.is_some(),
                SqosBody::NoBuffer => false,
            };
            self.without_fields += usize::from(decoded && rec.body.fields().is_empty());
            self.kept
                .push((rec.frame, flow.and_then(|f| f.initiator_name.clone())));
        }
    }

    const CAPTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/captures/steady.pcap.gz");

    fn select() -> MessageSelect<Shown> {
        // vm01's first request names no VM: only its flow's final state has the name.
        let filter =
            Filter::parse("flow.initiator_name == \"vm01\"", Context::Messages).expect("parses");
        MessageSelect::new(Shown::default(), Some(filter), false)
    }

    fn read<S: CaptureSink>(sink: &mut S) {
        crate::run::run_path(CAPTURE.as_ref(), Default::default(), sink).expect("readable");
    }

    /// The frames a first reading for the flows and a second through the select keep.
    fn two_readings() -> Shown {
        let mut flows = Analyzer::default();
        read(&mut flows);
        let mut twice = select().with_final_flows(flows.finish().flows);
        read(&mut twice);
        twice.tap.inner
    }

    #[test]
    fn held_messages_are_judged_on_the_final_flows_in_one_reading() {
        let expected = two_readings();
        assert_eq!(expected.seen, 58);
        assert_eq!(
            expected.kept.first(),
            Some(&(14, Some("vm01".to_string()))),
            "the SET_LOGICAL_FLOW_ID before the name was sent"
        );
        assert_eq!(expected.kept.len(), 14);
        // As the flows stood, the first messages did not match yet.
        let mut stood = select();
        read(&mut stood);
        assert_eq!(stood.tap.inner.kept.len(), 11);

        let mut once = select();
        assert!(once.hold(AnalyzerConfig::default(), 1 << 20));
        read(&mut once);
        assert!(
            once.tap.inner.kept.is_empty() && once.tap.inner.seen == 0,
            "held"
        );
        assert_eq!(once.pass_held(), Ok(()));
        assert_eq!(once.tap.inner.kept, expected.kept);
        assert_eq!(once.tap.inner.without_fields, 0, "held lean, passed whole");
        assert_eq!((once.tap.inner.seen, once.tap.seen), (58, 58));
        assert_eq!(once.tap.kept, 14);
        // Each final flow's row made once, for all its messages.
        assert_eq!(once.tap.final_rows.len(), 4, "vm01 to vm04");
        let vm01 = once
            .tap
            .final_flows
            .values()
            .find(|f| f.initiator_name.as_deref() == Some("vm01"));
        let vm01 = vm01.expect("vm01's flow");
        assert_eq!(once.tap.final_rows.get(&vm01.id), Some(&flow_row(vm01)));
    }

    #[test]
    fn more_than_the_cap_lets_all_go_and_a_second_reading_judges_them_the_same() {
        let expected = two_readings();
        let mut over = select();
        // Room for some of the messages, not 58 (~220 bytes each).
        assert!(over.hold(AnalyzerConfig::default(), 8 << 10));
        read(&mut over);
        let again = over.pass_held().expect_err("over the cap");
        let ReadAgain::Over {
            cap: 8192,
            at: Some(at),
        } = again
        else {
            panic!("{again:?}");
        };
        assert_eq!(at, 4866, "the frame whose message passed the cap");
        assert_eq!(
            again.to_string(),
            format!(
                "the messages held to judge the filter on each flow's final state passed their \
                 share (8 KiB, a fortieth of --memory) at frame {at}: the captures are read a \
                 second time"
            )
        );
        assert!(
            over.tap.inner.kept.is_empty() && over.tap.seen == 0,
            "nothing passed on"
        );
        read(&mut over);
        assert_eq!(over.tap.inner.kept, expected.kept);
        assert_eq!(over.tap.inner.seen, 58);
    }

    /// A message face that notes what it sees, in order.
    #[derive(Default)]
    struct Events(Vec<String>);

    impl RecordSink for Events {
        fn on_sqos(&mut self, _rec: SqosRecord) {}
        fn on_channel(&mut self, _rec: &ChannelRecord) {}
        fn on_note(&mut self, note: &CaptureNote) {
            self.0.push(format!("note {}", note.message));
        }
        fn on_info(&mut self, note: &CaptureNote) {
            self.0.push(format!("info {}", note.message));
        }
    }

    impl CaptureSink for Events {}

    impl MessageSink for Events {
        fn on_seen(&mut self, rec: &SqosRecord) {
            self.0.push(format!("frame {}", rec.frame));
        }
    }

    #[test]
    fn held_notes_come_back_between_the_messages_they_came_between() {
        let mut kept = Kept::default();
        read(&mut kept);
        let messages = &kept.0[..3];
        let filter = Filter::parse("flow.limit > 0", Context::Messages).expect("parses");
        let mut held = MessageSelect::new(Events::default(), Some(filter), false);
        assert!(held.hold(AnalyzerConfig::default(), 1 << 20));
        let note = |message: &str| CaptureNote {
            frame: 1,
            message: message.into(),
        };
        held.on_info(&note("first"));
        for (i, rec) in messages.iter().enumerate() {
            held.on_sqos(rec.clone());
            if i == 1 {
                held.on_note(&note("second"));
                held.on_info(&note("third"));
            }
        }
        held.on_note(&note("last"));
        assert!(held.tap.inner.0.is_empty(), "held");
        assert_eq!(held.pass_held(), Ok(()));
        let frame = |i: usize| format!("frame {}", messages[i].frame);
        let expected = [
            "info first".to_string(),
            frame(0),
            frame(1),
            "note second".into(),
            "info third".into(),
            frame(2),
            "note last".into(),
        ];
        assert_eq!(held.tap.inner.0, expected);
    }

    #[test]
    fn a_select_that_follows_no_flows_holds_nothing() {
        let mut plain = MessageSelect::new(Shown::default(), None, false);
        assert!(!plain.hold(AnalyzerConfig::default(), 1 << 20));
        read(&mut plain);
        assert_eq!(plain.pass_held(), Err(ReadAgain::NothingHeld));
        assert_eq!(plain.tap.inner.kept.len(), 58);
    }
}
