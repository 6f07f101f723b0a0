//! Applying a filter while a capture is read.
//!
//! [`MessageSelect`] sits in front of a message sink and passes on only the SQOS messages the
//! filter keeps, reading flow fields from a flow analysis that follows the capture beside it (as
//! the flow stood when the message was seen: the stream is never read twice).
//! [`FlowSelect`] is a flow analysis whose result keeps only the matching flows: on their final
//! state, or — when the filter reads message fields or times — those with a matching message.

use std::collections::{BTreeSet, HashMap, HashSet};

use uuid::Uuid;

use super::{Filter, Subject};
use crate::analysis::{Analysis, Analyzer, FlowState};
use crate::capture::{CaptureFormat, Timestamp};
use crate::feed::{Feed, Tap};
use crate::pipeline::{
    CaptureNote, ChannelRecord, CloseRecord, IoRecord, OpenRecord, RecordSink, SqosBody, SqosRecord,
};
use crate::run::CaptureSink;

/// What receives the messages a [`MessageSelect`] keeps.
pub trait MessageSink: CaptureSink {
    /// Every message, kept or not, before the filter is applied.
    fn on_seen(&mut self, _rec: &SqosRecord) {}
    /// A kept message, with its flow as known then (when flows are followed).
    fn on_message(&mut self, rec: SqosRecord, _flow: Option<&FlowState>) {
        self.on_sqos(rec);
    }
}

/// What a [`MessageSelect`] does beside the flow analysis it follows: passes the SQOS messages
/// `filter` keeps to `inner`; opens, I/O and notes go through.
pub struct Selecting<S> {
    pub inner: S,
    filter: Option<Filter>,
    /// The flows as they ended, from a first pass over a file: read instead of the flows as
    /// they stood (so a message before the flow's name was sent still matches `--vm`).
    final_flows: HashMap<Uuid, FlowState>,
    start: Option<Timestamp>,
    /// The message being fed and its flow as known before the analysis took it.
    pending: Option<(SqosRecord, Option<Uuid>)>,
    /// SQOS messages seen, and passed on.
    pub seen: u64,
    pub kept: u64,
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
                start: None,
                pending: None,
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

impl<S: MessageSink> Selecting<S> {
    /// Give `rec` to the sink if the filter keeps it, with its flow `id` (None: looked up).
    fn pass_on(&mut self, analyzer: &mut Option<Analyzer>, rec: SqosRecord, id: Option<Uuid>) {
        let start = self.start.unwrap_or(rec.ts);
        let flow = match analyzer {
            Some(a) => {
                let id = id.or_else(|| a.flow_of(&rec));
                match id.and_then(|id| self.final_flows.get(&id)) {
                    Some(f) => Some(f),
                    None => id.and_then(|id| a.flow(&id)),
                }
            }
            None => None,
        };
        let keep = self
            .filter
            .as_ref()
            .is_none_or(|f| f.matches_message(&rec, flow, start));
        if keep {
            self.kept += 1;
            self.inner.on_message(rec, flow);
        }
    }
}

impl<S: MessageSink> Tap<Option<Analyzer>> for Selecting<S> {
    fn before(&mut self, analyzer: &mut Option<Analyzer>, rec: &SqosRecord) {
        self.seen += 1;
        self.inner.on_seen(rec);
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
            self.pass_on(analyzer, rec, id);
        }
    }
    fn after_untaken(&mut self, analyzer: &mut Option<Analyzer>, rec: SqosRecord) {
        self.pass_on(analyzer, rec, None);
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        self.inner.on_open(rec);
    }
    fn on_close(&mut self, rec: &CloseRecord) {
        self.inner.on_close(rec);
    }
    fn on_io(&mut self, rec: &IoRecord) {
        self.inner.on_io(rec);
    }
    fn on_channel(&mut self, rec: &ChannelRecord) {
        self.inner.on_channel(rec);
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.inner.on_note(note);
    }
    fn on_info(&mut self, note: &CaptureNote) {
        self.inner.on_info(note);
    }
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.start = Some(ts);
        self.inner.on_first_frame(ts);
    }
    fn on_format(&mut self, format: CaptureFormat) {
        self.inner.on_format(format);
    }
    fn done(&mut self) -> bool {
        self.inner.done()
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
            let list = match &rec.body {
                SqosBody::Request(d) => &d.findings[..],
                SqosBody::Response(d) => &d.findings[..],
                SqosBody::NoBuffer => &[],
            };
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
        if f.matches_message(&rec, analyzer.flow(&id), start) {
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
