//! Per-message facts `check` judges (NT statuses, unanswered requests, requests per option,
//! message findings), collected from the pipeline's SQOS records while the same pass feeds the
//! flow analysis. Bounded: counters per distinct status / code, and a set of requests seen
//! without a response that only holds those the pipeline released unanswered.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::feed::{Feed, Tap};
use crate::net::ConnId;
use crate::pipeline::{CaptureNote, Direction, SqosBody, SqosRecord};
use crate::run::CaptureSink;
use crate::sqos::{Options, Severity};

/// How often something was seen and where first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tally {
    pub count: u64,
    pub first_frame: u64,
}

/// A kind of finding seen in the capture: its code, severity, and tally.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindingTally {
    pub severity: Severity,
    pub tally: Tally,
}

/// Unanswered requests kept by frame, to list the first few.
const UNANSWERED_LISTED: usize = 64;

/// A request released without its response: its frame, and what a replay of it on another
/// channel would repeat (session, FileId, the SQOS buffer).
#[derive(Clone, Debug)]
struct OpenRequest {
    frame: u64,
    session_id: u64,
    file_id: Option<crate::pipeline::FileId>,
    buffer: Vec<u8>,
}

/// What the SQOS messages of one capture showed.
#[derive(Clone, Debug, Default)]
pub struct MessageFacts {
    pub requests: u64,
    pub responses: u64,
    /// Requests whose Options has the flag, per flag name (a request counts once per flag).
    pub requests_by_option: BTreeMap<&'static str, u64>,
    /// Final (not interim) responses per NT status.
    pub nt_statuses: BTreeMap<u32, Tally>,
    /// Message findings per code.
    pub findings: BTreeMap<&'static str, FindingTally>,
    /// Requests released without a response whose response has not been seen since, keyed by
    /// connection and message id.
    open_requests: HashMap<(ConnId, u64), OpenRequest>,
    /// Their frames once the capture ended.
    unanswered: BTreeSet<u64>,
    unanswered_total: u64,
}

impl MessageFacts {
    pub fn record(&mut self, rec: &SqosRecord) {
        for f in rec.body.findings() {
            let slot = self.findings.entry(f.code.as_str());
            let e = slot.or_insert(FindingTally {
                severity: f.severity,
                tally: Tally {
                    count: 0,
                    first_frame: rec.frame,
                },
            });
            e.tally.count += 1;
        }
        match rec.direction {
            Direction::Request => self.on_request(rec),
            Direction::Response => self.on_response(rec),
        }
    }

    fn on_request(&mut self, rec: &SqosRecord) {
        self.requests += 1;
        if let SqosBody::Request(d) = &rec.body {
            if let Some(r) = &d.message {
                for name in r.options.names() {
                    *self.requests_by_option.entry(name).or_insert(0) += 1;
                }
                if r.options.unknown_bits() != 0 || r.options == Options::default() {
                    *self.requests_by_option.entry("OTHER").or_insert(0) += 1;
                }
            }
        }
        if rec.replay {
            // Sent again on another channel after its own failed: the replay's answer is the
            // original's.
            let original = self
                .open_requests
                .iter()
                .filter(|((c, _), o)| {
                    *c != rec.conn
                        && o.session_id == rec.session_id
                        && o.file_id == rec.file_id
                        && o.buffer == rec.buffer
                })
                .min_by_key(|(_, o)| o.frame)
                .map(|(k, _)| *k);
            if let Some(k) = original {
                self.open_requests.remove(&k);
            }
        }
        if rec.response_frame.is_none() {
            // Held back and released before its answer (or never answered): remember it
            // until a response names it.
            self.open_requests.insert(
                (rec.conn, rec.msg_id),
                OpenRequest {
                    frame: rec.frame,
                    session_id: rec.session_id,
                    file_id: rec.file_id,
                    buffer: rec.buffer.clone(),
                },
            );
        }
    }

    fn on_response(&mut self, rec: &SqosRecord) {
        if rec.interim {
            return;
        }
        self.responses += 1;
        if let Some(s) = rec.nt_status {
            self.nt_statuses
                .entry(s)
                .and_modify(|t| t.count += 1)
                .or_insert(Tally {
                    count: 1,
                    first_frame: rec.frame,
                });
        }
        self.open_requests.remove(&(rec.conn, rec.msg_id));
    }

    /// End of capture: whatever is still open was never answered.
    pub fn finish(&mut self) {
        self.unanswered_total += self.open_requests.len() as u64;
        for (_, o) in self.open_requests.drain() {
            self.unanswered.insert(o.frame);
            if self.unanswered.len() > UNANSWERED_LISTED {
                self.unanswered.pop_last();
            }
        }
    }

    /// Requests never answered (after [`MessageFacts::finish`]).
    pub fn unanswered_total(&self) -> u64 {
        self.unanswered_total
    }

    /// Frames of the first unanswered requests.
    pub fn unanswered_frames(&self) -> impl Iterator<Item = u64> + '_ {
        self.unanswered.iter().copied()
    }

    /// Builds facts for tests and tools that have no capture at hand.
    pub fn with_unanswered(mut self, frames: &[u64]) -> Self {
        self.unanswered_total += frames.len() as u64;
        self.unanswered.extend(frames.iter().copied());
        self
    }
}

/// A flow analysis fed in the same pass: any capture sink that hands over its analysis at the
/// end (the analyzer, or the filters' selection of its flows).
pub trait FlowAnalysis: CaptureSink {
    fn into_analysis(self) -> crate::analysis::Analysis;
}

/// Collects [`MessageFacts`] while [`Feed`] hands every record to the analysis.
#[derive(Debug, Default)]
pub struct FactsTap {
    pub facts: MessageFacts,
    pub notes: u64,
}

impl<A> Tap<A> for FactsTap {
    fn before(&mut self, _analysis: &mut A, rec: &SqosRecord) {
        self.facts.record(rec);
    }
    fn on_note(&mut self, _note: &CaptureNote) {
        self.notes += 1;
    }
}

/// The message facts and the flow analysis, fed in one pass.
pub type FactsSink<A> = Feed<A, FactsTap>;
