//! The SQOS messages the Messages view can show: the most recent ones, up to a cap, kept
//! compact ([`CompactRecord`]: the field list comes back when a message is shown).

use std::collections::VecDeque;

use uuid::Uuid;

use super::model::FindingRow;
use crate::capture::Timestamp;
use crate::pipeline::{CompactRecord, Direction, SqosBody, SqosRecord};

/// Default number of messages kept.
pub const DEFAULT_MAX_MESSAGES: usize = 50_000;
/// Message-level findings kept (they outlive the messages they point at).
const MAX_FINDINGS: usize = 10_000;

#[derive(Debug)]
pub struct MessageStore {
    cap: usize,
    msgs: VecDeque<CompactRecord>,
    dropped: u64,
    findings: VecDeque<FindingRow>,
    findings_dropped: u64,
    start: Option<Timestamp>,
}

/// The flow a message names in its buffer, if any.
pub fn message_flow(rec: &SqosRecord) -> Option<Uuid> {
    let id = match &rec.body {
        SqosBody::Request(d) => d.message.as_ref().map(|m| m.logical_flow_id),
        SqosBody::Response(d) => d.message.as_ref().map(|m| m.logical_flow_id),
        SqosBody::NoBuffer => None,
    };
    id.filter(|u| !u.is_nil())
}

impl MessageStore {
    pub fn new(cap: usize) -> Self {
        MessageStore {
            cap: cap.max(1),
            msgs: VecDeque::new(),
            dropped: 0,
            findings: VecDeque::new(),
            findings_dropped: 0,
            start: None,
        }
    }

    pub fn set_start(&mut self, ts: Timestamp) {
        self.start = Some(ts);
    }

    /// Time of the capture's first frame (or first message).
    pub fn start(&self) -> Timestamp {
        self.start
            .or_else(|| self.msgs.front().map(|m| m.record().ts))
            .unwrap_or_default()
    }

    pub fn push(&mut self, rec: SqosRecord) {
        if self.start.is_none() {
            self.start = Some(rec.ts);
        }
        let t = rec.ts.secs_since(self.start());
        let flow = message_flow(&rec);
        let compact = CompactRecord::new(rec);
        let rec = compact.record();
        for f in rec.body.findings() {
            if self.findings.len() >= MAX_FINDINGS {
                self.findings.pop_front();
                self.findings_dropped += 1;
            }
            self.findings.push_back(FindingRow {
                severity: f.severity,
                code: f.code.as_str().to_string(),
                message: crate::output::escape::text(&f.message).into_owned(),
                frame: rec.frame,
                t,
                flow,
                occurrences: 1,
            });
        }
        if self.msgs.len() >= self.cap {
            self.msgs.pop_front();
            self.dropped += 1;
        }
        self.msgs.push_back(compact);
    }

    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }

    /// Messages no longer kept because the cap was reached.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Message `i`, compact (its field list dropped: [`MessageStore::full`] has it).
    pub fn get(&self, i: usize) -> Option<&SqosRecord> {
        self.msgs.get(i).map(CompactRecord::record)
    }

    /// Message `i` with its field list, re-derived from the buffer.
    pub fn full(&self, i: usize) -> Option<SqosRecord> {
        self.msgs.get(i).map(CompactRecord::full)
    }

    pub fn iter(&self) -> impl Iterator<Item = &SqosRecord> {
        self.msgs.iter().map(CompactRecord::record)
    }

    /// Index of the first kept message completed in `frame`.
    pub fn index_of_frame(&self, frame: u64) -> Option<usize> {
        let i = self.msgs.partition_point(|m| m.record().frame < frame);
        match self.get(i) {
            Some(m) if m.frame == frame => Some(i),
            // Records are in frame order; fall back to a scan should one not be.
            _ => self.iter().position(|m| m.frame == frame),
        }
    }

    /// Index of the message at the other end of the exchange (request ↔ response).
    pub fn partner(&self, i: usize) -> Option<usize> {
        let m = self.get(i)?;
        let frame = match m.direction {
            Direction::Request => m.response_frame?,
            Direction::Response => m.request_frame?,
        };
        let want = match m.direction {
            Direction::Request => Direction::Response,
            Direction::Response => Direction::Request,
        };
        let start = self.msgs.partition_point(|x| x.record().frame < frame);
        self.iter()
            .enumerate()
            .skip(start)
            .take_while(|(_, x)| x.frame == frame)
            .chain(self.iter().enumerate())
            .find(|(_, x)| {
                x.frame == frame && x.direction == want && x.msg_id == m.msg_id && x.conn == m.conn
            })
            .map(|(j, _)| j)
    }

    pub fn findings(&self) -> impl Iterator<Item = &FindingRow> {
        self.findings.iter()
    }

    pub fn findings_dropped(&self) -> u64 {
        self.findings_dropped
    }
}
