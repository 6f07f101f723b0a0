//! The glue: frames in, typed records out (SQOS messages, opens, I/O), plus capture statistics.
//! STUB: owned by the smb2/pipeline work.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

use serde::Serialize;

use crate::capture::{Frame, Timestamp};
use crate::net::{ConnId, ReassemblyConfig};
use crate::sqos::{Dissection, Request, Response};

/// SMB2 FileId (persistent, volatile).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    pub persistent: u64,
    pub volatile: u64,
}

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}:{:016x}", self.persistent, self.volatile)
    }
}

/// Which end of an exchange a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Request,
    Response,
}

/// The decoded SQOS buffer of an IOCTL.
#[derive(Clone, Debug)]
pub enum SqosBody {
    Request(Dissection<Request>),
    Response(Dissection<Response>),
    /// A response without an SQOS buffer: an error response, or success with no output.
    NoBuffer,
}

/// One FSCTL_STORAGE_QOS_CONTROL request or response.
#[derive(Clone, Debug)]
pub struct SqosRecord {
    /// The frame that completed the message (1-based).
    pub frame: u64,
    pub ts: Timestamp,
    pub conn: ConnId,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub direction: Direction,
    pub msg_id: u64,
    pub session_id: u64,
    /// Sync header only.
    pub tree_id: Option<u32>,
    /// Async header only.
    pub async_id: Option<u64>,
    pub file_id: Option<FileId>,
    /// Name the FileId was opened with, when the CREATE was seen.
    pub file_name: Option<String>,
    /// Responses only.
    pub nt_status: Option<u32>,
    /// An interim STATUS_PENDING response.
    pub interim: bool,
    pub request_frame: Option<u64>,
    pub response_frame: Option<u64>,
    /// Seconds between the request and this response (responses), or its response (requests).
    pub response_time: Option<f64>,
    /// Requests: MaxOutputResponse of the IOCTL.
    pub max_output_response: Option<u32>,
    /// The raw SQOS buffer (IOCTL input for requests, output for responses).
    pub buffer: Vec<u8>,
    /// The buffer is shorter than the IOCTL said (snaplen, gap).
    pub buffer_truncated: bool,
    pub body: SqosBody,
}

/// An open seen in a CREATE response.
#[derive(Clone, Debug)]
pub struct OpenRecord {
    pub frame: u64,
    pub ts: Timestamp,
    pub conn: ConnId,
    pub session_id: u64,
    pub tree_id: Option<u32>,
    pub file_id: FileId,
    pub file_name: String,
}

/// A CLOSE response (the open ends).
#[derive(Clone, Debug)]
pub struct CloseRecord {
    pub frame: u64,
    pub ts: Timestamp,
    pub conn: ConnId,
    pub session_id: u64,
    pub file_id: FileId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoKind {
    Read,
    Write,
}

/// A completed READ or WRITE (request matched with its final response).
#[derive(Clone, Debug)]
pub struct IoRecord {
    pub request_frame: u64,
    pub response_frame: u64,
    pub request_ts: Timestamp,
    pub response_ts: Timestamp,
    pub conn: ConnId,
    pub session_id: u64,
    pub file_id: FileId,
    pub kind: IoKind,
    /// Bytes asked for (READ Length / WRITE Length).
    pub requested: u32,
    /// Bytes transferred (READ response DataLength; WRITE response Count).
    pub transferred: u32,
    pub nt_status: u32,
}

/// Something about the capture the user must be told (incomplete data, bounds hit, errors).
#[derive(Clone, Debug, Serialize)]
pub struct CaptureNote {
    pub frame: u64,
    pub message: String,
}

/// Receives the pipeline's output, in frame order.
pub trait RecordSink {
    fn on_sqos(&mut self, rec: SqosRecord);
    fn on_open(&mut self, _rec: &OpenRecord) {}
    fn on_close(&mut self, _rec: &CloseRecord) {}
    fn on_io(&mut self, _rec: &IoRecord) {}
    fn on_note(&mut self, _note: &CaptureNote) {}
}

#[derive(Clone, Debug, Default)]
pub struct PipelineConfig {
    pub reassembly: ReassemblyConfig,
}

/// Capture statistics (`sqos stats`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub frames: u64,
    pub connections: u64,
    pub smb2_messages: u64,
    /// Command name (e.g. "IOCTL") → messages, requests and responses, each compound part counted.
    pub by_command: BTreeMap<String, u64>,
    pub encrypted_messages: u64,
    pub compressed_messages: u64,
    pub smb1_messages: u64,
    pub gaps: u64,
    pub resyncs: u64,
    pub truncated_frames: u64,
    pub sqos_messages: u64,
}

pub struct Pipeline {
    _cfg: PipelineConfig,
    stats: Stats,
}

impl Pipeline {
    pub fn new(cfg: PipelineConfig) -> Self {
        Pipeline {
            _cfg: cfg,
            stats: Stats::default(),
        }
    }
    pub fn push_frame<S: RecordSink>(&mut self, frame: &Frame<'_>, sink: &mut S) {
        let _ = (frame, sink);
    }
    /// End of input: flush held records and report what stayed incomplete.
    pub fn finish<S: RecordSink>(&mut self, sink: &mut S) {
        let _ = sink;
    }
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
}
