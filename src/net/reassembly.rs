//! TCP stream reassembly. STUB: owned by the capture/net work.

use crate::capture::Timestamp;

use super::{ConnId, ConnKey, Dir, TcpSegment};

#[derive(Clone, Debug)]
pub struct ReassemblyConfig {
    /// Server ports (445 by default). Segments with neither port on this list are ignored.
    pub ports: Vec<u16>,
    /// Most out-of-order bytes held per direction before data is given up (noted).
    pub max_buffered_per_dir: usize,
    /// Most out-of-order bytes held over all connections.
    pub max_buffered_total: usize,
}

impl Default for ReassemblyConfig {
    fn default() -> Self {
        ReassemblyConfig {
            ports: vec![445],
            max_buffered_per_dir: 4 << 20,
            max_buffered_total: 64 << 20,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseKind {
    Fin,
    Rst,
}

/// Something the reassembler wants the user to know about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetNote {
    /// A buffering bound was hit and `bytes` of out-of-order data were dropped.
    BufferLimit { dir: Dir, bytes: u64 },
    /// The connection's start (SYN) was not captured.
    MidStream,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReassemblyStats {
    pub connections: u64,
    pub segments: u64,
    pub retransmissions: u64,
    pub out_of_order: u64,
    pub overlaps: u64,
    pub gaps: u64,
    pub gap_bytes: u64,
    pub dropped_bytes: u64,
}

/// Receives reassembled, in-order stream data.
pub trait StreamSink {
    fn on_connection(&mut self, _conn: ConnId, _key: &ConnKey, _frame: u64, _ts: Timestamp) {}
    /// In-order bytes of one direction. `frame` is the frame whose arrival made them deliverable.
    fn on_data(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, data: &[u8]);
    /// `missing` bytes of one direction will never arrive; data resumes after them.
    fn on_gap(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, missing: u64);
    fn on_close(&mut self, _conn: ConnId, _how: CloseKind, _frame: u64, _ts: Timestamp) {}
    fn on_note(&mut self, _conn: ConnId, _frame: u64, _note: NetNote) {}
}

pub struct Reassembler {
    _cfg: ReassemblyConfig,
    stats: ReassemblyStats,
}

impl Reassembler {
    pub fn new(cfg: ReassemblyConfig) -> Self {
        Reassembler {
            _cfg: cfg,
            stats: ReassemblyStats::default(),
        }
    }
    pub fn push<S: StreamSink>(
        &mut self,
        frame: u64,
        ts: Timestamp,
        seg: &TcpSegment<'_>,
        sink: &mut S,
    ) {
        let _ = (frame, ts, seg, sink);
    }
    /// End of capture: deliver what can be delivered, report what is missing.
    pub fn finish<S: StreamSink>(&mut self, sink: &mut S) {
        let _ = sink;
    }
    pub fn stats(&self) -> &ReassemblyStats {
        &self.stats
    }
    /// Connection endpoints by id.
    pub fn conn_key(&self, conn: ConnId) -> Option<&ConnKey> {
        let _ = conn;
        None
    }
}
