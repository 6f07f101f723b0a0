//! The glue: frames in, typed records out (SQOS messages, opens, I/O), plus capture statistics.
//!
//! Frame → `decode_link` → `decode_tcp` → [`Reassembler`] → [`streams::Smb2Layer`] (a stream
//! sink: one [`crate::smb2::Framer`] per connection and direction) → `exchange` (matching by
//! connection and MessageId, opens, related compound operations; SQOS IOCTLs through the codec
//! in `sqos_build`) → [`outbox::Outbox`] (frame order, SQOS requests held back until answered)
//! → the [`RecordSink`].
//!
//! Memory is bounded by the run's [`Budget`] (`--memory`): framers keep headers and fixed bodies
//! (whole parts only for SQOS IOCTLs and CREATE names, at most `Limits::framer.max_keep` per
//! message); connections, out-of-order data, framer bytes, outstanding requests, opens and the
//! held-back queue each have a share of it. What a full share drops is counted and reported
//! once per kind at the end (a note, and `Stats::memory`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use serde::Serialize;

pub mod by_command;
pub mod by_label;
mod compact;
mod events;
mod exchange;
mod held;
pub mod outbox;
pub mod sessions;
mod shard;
mod sqos_build;
pub mod srt;
pub mod streams;

pub use by_command::ByCommand;
#[cfg(test)]
pub(crate) use compact::tests::Kept;
pub use compact::CompactRecord;
pub use held::HeldRecords;
use streams::Smb2Layer;

use crate::budget::{merged, Budget, Kind, MemoryUse};
use crate::capture::{
    decode_link, Frame, FrameCopy, FrameRun, LinkError, Reading, SharedMap, Timestamp,
};
use crate::net::reassembly::Taken;
use crate::net::{ConnId, Dir, Reassembler, ReassemblyConfig, ReassemblyStats};
use crate::smb2::crypto::KeyRing;
use crate::smb2::FramerConfig;
use crate::sqos::{Dissection, Field, Finding, Request, Response, FSCTL_STORAGE_QOS_CONTROL};

pub use crate::smb2::FileId;
/// How a record's SQOS buffer is decoded and checked (the `render` fuzz target builds records
/// with them).
pub use sqos_build::{decode_request, decode_response};

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

impl SqosBody {
    /// The fields the decoder read (none without a buffer, and none in a [`CompactRecord`]).
    pub fn fields(&self) -> &[Field] {
        match self {
            SqosBody::Request(d) => &d.fields,
            SqosBody::Response(d) => &d.fields,
            SqosBody::NoBuffer => &[],
        }
    }

    /// What the decoder and the checks against the IOCTL and the matched request found.
    pub fn findings(&self) -> &[Finding] {
        match self {
            SqosBody::Request(d) => &d.findings,
            SqosBody::Response(d) => &d.findings,
            SqosBody::NoBuffer => &[],
        }
    }

    /// Heap bytes of its field list and findings ([`Dissection::heap_bytes`]).
    pub fn heap_bytes(&self) -> usize {
        match self {
            SqosBody::Request(d) => d.heap_bytes(),
            SqosBody::Response(d) => d.heap_bytes(),
            SqosBody::NoBuffer => 0,
        }
    }
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
    /// The request is a replay (SMB2_FLAGS_REPLAY_OPERATION): the client sent it again,
    /// typically on another channel after the one it was outstanding on failed.
    pub replay: bool,
    /// Requests (SMB 3.x): the header's ChannelSequence, which the client raises for its opens
    /// when a channel fails.
    pub channel_sequence: Option<u16>,
    /// Sync header only.
    pub tree_id: Option<u32>,
    /// Async header only.
    pub async_id: Option<u64>,
    pub file_id: Option<FileId>,
    /// Name the FileId was opened with, when the CREATE was seen: `\\server\share\path` when
    /// the TREE_CONNECT of its tree was seen too, else the path within the share.
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
    /// With [`PipelineConfig::keep_frames`]: the frame in which the message began (earlier than
    /// `frame` when it spans several segments).
    pub first_frame: Option<u64>,
    /// With [`PipelineConfig::keep_frames`]: a copy of frame `frame` (shared by the messages it
    /// completes).
    pub frame_copy: Option<Arc<FrameCopy>>,
}

impl SqosRecord {
    /// Bytes holding the record costs beyond a slot for it: the struct (boxed where it is
    /// held), its buffer, its file name, its decoded fields and findings, and the frame copy
    /// it carries with `keep_frames` (shared by the messages of one frame: counted for each,
    /// on the safe side). An estimate for budgets (allocator overhead aside).
    pub fn held_bytes(&self) -> usize {
        std::mem::size_of::<SqosRecord>()
            + self.buffer.capacity()
            + self.file_name.as_ref().map_or(0, String::len)
            + self.body.heap_bytes()
            + self.frame_copy.as_ref().map_or(0, |f| f.data.len())
    }

    /// The LogicalFlowID the message itself names (a decoded request's or response's), and the
    /// initiator name (requests that carry one).
    pub fn named_flow(&self) -> (Option<uuid::Uuid>, Option<&str>) {
        match &self.body {
            SqosBody::Request(d) => match &d.message {
                Some(m) => (Some(m.logical_flow_id), m.initiator_name.as_deref()),
                None => (None, None),
            },
            SqosBody::Response(d) => (d.message.as_ref().map(|m| m.logical_flow_id), None),
            SqosBody::NoBuffer => (None, None),
        }
    }
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
    /// The request header's ChannelSequence (SMB 3.x; raised when a channel failed).
    pub channel_sequence: u16,
    /// Bytes asked for (READ Length / WRITE Length).
    pub requested: u32,
    /// Bytes transferred (READ response DataLength; WRITE response Count).
    pub transferred: u32,
    pub nt_status: u32,
}

/// How a session came to be seen on a connection (a channel of the session).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelJoin {
    /// SESSION_SETUP answered with success, without the binding flag: the session's first
    /// channel (a new authentication).
    Setup,
    /// SESSION_SETUP with SMB2_SESSION_FLAG_BINDING answered with success: a further channel of
    /// an existing session (SMB3 multichannel).
    Binding,
    /// The session's setup was not seen on this connection (the capture began later): its
    /// first message there.
    Seen,
}

impl ChannelJoin {
    /// The name JSON uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelJoin::Setup => "setup",
            ChannelJoin::Binding => "binding",
            ChannelJoin::Seen => "seen",
        }
    }
}

/// How a channel ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelEnd {
    /// The TCP connection closed with FIN in both directions.
    Fin,
    /// The TCP connection was reset.
    Rst,
    /// LOGOFF ended the session.
    Logoff,
    /// Its state was dropped (too many connections at once).
    Dropped,
    /// Still open when the capture ended.
    CaptureEnd,
}

impl ChannelEnd {
    /// The name JSON uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelEnd::Fin => "fin",
            ChannelEnd::Rst => "rst",
            ChannelEnd::Logoff => "logoff",
            ChannelEnd::Dropped => "dropped",
            ChannelEnd::CaptureEnd => "capture_end",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelEvent {
    Joined(ChannelJoin),
    /// The channel ended; the last message from the server on its connection (a channel that
    /// went silent has none after its last requests).
    Ended {
        by: ChannelEnd,
        last_server_frame: Option<u64>,
        last_server_ts: Option<Timestamp>,
        /// Requests of the session outstanding on the connection when it ended; at the end of
        /// the capture, only those sent after the server's last message there.
        unanswered: u64,
    },
}

/// A session joined or left a connection (one channel of the session).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelRecord {
    pub frame: u64,
    pub ts: Timestamp,
    pub conn: ConnId,
    pub client: SocketAddr,
    pub server: SocketAddr,
    pub session_id: u64,
    pub event: ChannelEvent,
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
    /// Whether [`RecordSink::on_sqos`] does anything with a message: not for an analysis that
    /// is absent, so a [`crate::feed::Feed`] hands the message to its tap instead, which then
    /// needs no copy of it.
    fn takes_sqos(&self) -> bool {
        true
    }
    fn on_open(&mut self, _rec: &OpenRecord) {}
    fn on_close(&mut self, _rec: &CloseRecord) {}
    fn on_io(&mut self, _rec: &IoRecord) {}
    /// No default: five faces once forwarded everything else to the analyzer and silently
    /// dropped the channels; each sink now says what it does with them.
    fn on_channel(&mut self, rec: &ChannelRecord);
    fn on_note(&mut self, _note: &CaptureNote) {}
    /// A note that loses no data (requests left unanswered at the end, a request shown before
    /// its answer): worth telling, but the flow analysis does not treat it as a hole. By
    /// default it is a note like the others.
    fn on_info(&mut self, note: &CaptureNote) {
        self.on_note(note);
    }
}

#[derive(Clone, Debug, Default)]
pub struct PipelineConfig {
    pub reassembly: ReassemblyConfig,
    /// Keep a copy of the frame that completes each SQOS message, and where the message began
    /// (`sqos dissect -x` / `-w`). Off by default: it costs a copy per SQOS frame.
    pub keep_frames: bool,
    /// The run's memory budget: the pipeline's bounds are its shares.
    pub memory: Budget,
    /// Keys for encrypted SMB3 sessions (`--keys`); empty: encrypted messages are counted.
    pub keys: Arc<KeyRing>,
    /// Threads for the capture (`--threads`), the calling thread included: 0 or 1, all on the
    /// calling thread (through the file's map where that pays,
    /// [`crate::capture::CaptureReader::map_from_the_start`]); 2, the calling thread and a
    /// thread that works ahead of it: for one pcap or pcapng file whose map pays or that comes
    /// from disk, indexing its records through the map (`capture::index`); else reading the
    /// file ahead ([`crate::capture::CaptureReader::read_ahead`], started by
    /// `run::run_capture`, unless the calling thread's work is small beside the file's copy and
    /// the map pays; with `SQOS_READ=map`, a pager mapping the file's pages ahead of it,
    /// [`SharedMap::pager`]);
    /// N > 2, those and N - 2 workers for the per-connection work
    /// (`shard`; the calling thread reads and runs the session-wide stage). The output is the
    /// same either way. Runs with `keys` (a session's keys can come from another of its
    /// connections) or `keep_frames` have no workers.
    pub threads: usize,
    /// With a thread to spare, read chunks ahead even where the file's records could be
    /// indexed ahead through its map ([`Reading::AheadInChunks`]): a run that holds messages
    /// back for a flow filter keeps the chunks' smaller resident size (the map and the index
    /// ahead took its peak 1.4 MB higher: 14.5-14.6 MB against 12.9-13.3, 4,202 messages held).
    pub chunks_ahead: bool,
}

impl PipelineConfig {
    /// This configuration with the bounds of `budget` (reassembly's included).
    pub fn with_memory(mut self, budget: Budget) -> Self {
        self.reassembly.set_budget(&budget);
        self.memory = budget;
        self
    }

    /// This configuration with `ports` also taken as SMB (`--port`; 445 and 139 always are).
    pub fn with_ports(mut self, ports: &[u16]) -> Self {
        for p in ports {
            if !self.reassembly.ports.contains(p) {
                self.reassembly.ports.push(*p);
            }
        }
        self
    }

    /// The workers this configuration runs: `threads` − 2 above 2, none with `keys` or
    /// `keep_frames` (see [`PipelineConfig::threads`]).
    pub fn workers(&self) -> usize {
        if self.keys.is_empty() && !self.keep_frames {
            self.threads.saturating_sub(2)
        } else {
            0
        }
    }

    /// How the capture is read ([`crate::capture::CaptureReader::read_for`]): for the
    /// workers, if any run; else ahead with a second thread, alone with one. (A run with keys
    /// and `--threads 3` has no workers: the reading thread does all the work, and a helper's
    /// chunks beat the map there.)
    pub fn reading(&self) -> Reading {
        match (self.workers(), self.threads) {
            (0, 0 | 1) => Reading::Alone,
            (0, _) if self.chunks_ahead => Reading::AheadInChunks,
            (0, _) => Reading::Ahead,
            _ => Reading::ForWorkers,
        }
    }
}

/// Capture statistics (`sqos stats`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub frames: u64,
    pub connections: u64,
    pub smb2_messages: u64,
    /// Command name (e.g. "IOCTL") → messages, requests and responses, each compound part counted.
    pub by_command: ByCommand<u64>,
    pub encrypted_messages: u64,
    /// Compressed (0xFC) messages, in clear or inside encrypted ones.
    pub compressed_messages: u64,
    /// Of those, decompressed (their SMB2 messages are in `by_command`).
    pub decompressed_messages: u64,
    /// Of those, in the chained form.
    pub compressed_chained: u64,
    /// Compressed messages that could not be decompressed (each is noted with why).
    pub undecompressed_messages: u64,
    /// Decompressed messages per algorithm used ("LZ77", "Pattern_V1", "NONE"…).
    pub compressed_by_algorithm: BTreeMap<String, u64>,
    pub smb1_messages: u64,
    pub gaps: u64,
    pub resyncs: u64,
    pub truncated_frames: u64,
    pub sqos_messages: u64,
    /// Responses with the SMB2 ERROR body (StructureSize 9: failures and interim responses), per
    /// command. `by_command` minus these is what Wireshark shows with a command body
    /// (e.g. `smb2.ioctl.function` occurrences for IOCTL).
    pub error_bodies_by_command: ByCommand<u64>,
    /// Encrypted (0xFD) messages per connection.
    pub encrypted_by_connection: by_label::ByLabel,
    /// Encrypted messages decrypted (their SMB2 messages are in `by_command`).
    pub decrypted_messages: u64,
    /// Of those, bulk READ/WRITE read through the keystream without the tag check (only their
    /// headers are used).
    pub decrypted_headers_only: u64,
    /// Encrypted messages whose tag did not verify under any key tried (wrong key).
    pub auth_failed_messages: u64,
    /// Encrypted messages not decrypted, per session ("0x…" SessionId).
    pub undecrypted_by_session: BTreeMap<String, u64>,
    /// Why, per session (the first reason seen): "no key", "authentication failed", …
    pub undecrypted_why: BTreeMap<String, String>,
    /// Sessions in the `--keys` files (0: none given).
    pub key_file_sessions: u64,
    /// Stream bytes reported missing by TCP reassembly.
    pub gap_bytes: u64,
    /// Bytes skipped while looking for a message start (mid-stream start, after gaps).
    pub resync_skipped_bytes: u64,
    /// Frames whose link/IP/TCP headers could not be decoded.
    pub undecoded_frames: u64,
    /// SMB2 messages whose compound chain or header was inconsistent.
    pub malformed_messages: u64,
    /// SMB2 parts whose body did not decode (often cut by a gap or snaplen).
    pub malformed_bodies: u64,
    /// Requests without a response: connection closed or capture ended.
    pub unanswered_requests: u64,
    /// The same, per command name.
    pub unanswered_by_command: ByCommand<u64>,
    /// SMB2 service response time per command name (tshark's `-z smb2,srt`).
    pub srt: ByCommand<srt::Srt>,
    /// Requests forgotten because the table of outstanding requests was full or an id reused.
    pub pending_evicted: u64,
    /// Opens forgotten because the open table was full.
    pub opens_evicted: u64,
    /// Bytes of messages in progress dropped because all framers together held too much.
    pub framer_bytes_shed: u64,
    /// Sessions and their channels (connections), in SessionId order; filled at the end of
    /// the capture, at most `sessions::MAX_LISTED_SESSIONS`.
    pub sessions: Vec<SessionSummary>,
    /// Sessions seen beyond the listed ones.
    pub sessions_unlisted: u64,
    /// The memory budget's shares: limit, peak and what each dropped (filled at the end).
    pub memory: Vec<MemoryUse>,
}

/// A session and the channels it was seen on (`sqos stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SessionSummary {
    pub session_id: u64,
    /// Channels seen (listed or not).
    pub channels_total: u64,
    pub channels: Vec<sessions::ChannelStats>,
}

impl Stats {
    /// Encrypted messages that were not decrypted.
    pub fn undecrypted(&self) -> u64 {
        self.undecrypted_by_session.values().sum()
    }

    /// What to tell the user once about encrypted messages left closed (None: nothing).
    pub fn undecrypted_summary(&self) -> Option<String> {
        let n = self.undecrypted();
        if n == 0 {
            return None;
        }
        let mut sessions: Vec<String> = self
            .undecrypted_by_session
            .iter()
            .map(|(s, k)| match self.undecrypted_why.get(s) {
                Some(why) => format!("session {s} ({k}, {why})"),
                None => format!("session {s} ({k})"),
            })
            .collect();
        if sessions.len() > 8 {
            let more = sessions.len() - 8;
            sessions.truncate(8);
            sessions.push(format!("{more} more sessions"));
        }
        let advice = if self.key_file_sessions == 0 {
            "--keys FILE (Wireshark's SMB2 secret keys: session id, session key, server-to-client \
             and client-to-server keys) would reveal them"
        } else {
            "the key files have no key that opens them"
        };
        Some(format!(
            "{n} encrypted SMB3 message{} not decrypted: {}; {advice}",
            if n == 1 { "" } else { "s" },
            sessions.join(", ")
        ))
    }
}

/// Bounds of the pipeline's own state (memory stays bounded whatever the capture). The
/// defaults are the shares of a [`Budget`] ([`Limits::from_budget`]); tests set them smaller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub framer: FramerConfig,
    /// Capture seconds an SQOS request is held back waiting for its response.
    pub hold_window_secs: u32,
    /// Most records queued behind held SQOS requests (also bounded in bytes by the queued share).
    pub max_queued: usize,
    /// Most bytes held by all SMB2 framers together. Each framer is bounded by
    /// `framer.max_keep`, but many connections each in the middle of a large SQOS IOCTL could add
    /// up; beyond this bound framers give their bytes back (their parts are cut, and that is
    /// counted).
    pub max_framer_bytes: usize,
    /// Most SMB2 requests waiting for a response, and opens remembered (bytes, at their
    /// entries' cost plus names).
    pub max_pending_bytes: usize,
    pub max_open_bytes: usize,
    /// Bytes of records and notes queued behind held SQOS requests.
    pub max_queued_bytes: usize,
    /// Most connections with SMB2 state (reassembly forgets connections first; this bound is
    /// for the SMB2 layer fed directly).
    pub max_connections: usize,
    /// Bytes of SMB3 session state (sessions with keys, setups in progress, derived keys).
    pub max_session_bytes: usize,
    /// Bytes of the sessions' channels and tree connects (and the session list of `stats`).
    pub max_channel_bytes: usize,
}

impl Limits {
    pub fn from_budget(b: &Budget) -> Self {
        let queued = b.share(Kind::Queued);
        let framer = FramerConfig::default();
        Limits {
            // One message may keep at most a quarter of the framers' share.
            framer: FramerConfig {
                max_keep: framer.max_keep.min(b.limit(Kind::Framers) / 4),
                keep_ioctls: &[FSCTL_STORAGE_QOS_CONTROL],
                ..framer
            },
            hold_window_secs: 60,
            max_queued: queued.max_entries(),
            max_framer_bytes: b.limit(Kind::Framers),
            max_pending_bytes: b.limit(Kind::Pending),
            max_open_bytes: b.limit(Kind::Opens),
            max_queued_bytes: queued.limit(),
            max_connections: b.share(Kind::Connections).max_entries(),
            // The sessions share: half for decryption's state, half for channels and trees.
            max_session_bytes: b.limit(Kind::Sessions) / 2,
            max_channel_bytes: b.limit(Kind::Sessions) - b.limit(Kind::Sessions) / 2,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::from_budget(&Budget::default())
    }
}

/// Most frames pushed one by one after a try of the bulk lane that took none or a short run:
/// small I/Os on interleaved connections give runs of a few frames between messages' first
/// segments, still worth taking (callgrind, small-I/O bench prefix: 64 frames 77.3 M, 16
/// 75.4 M, 8 74.9 M, 4 74.7 M, 2 74.7 M; the one-connection capture the same with each).
const MAX_LANE_PAUSE: u32 = 4;
/// The shortest run of the bulk lane that pays for its try.
const MIN_LANE_RUN: u64 = 4;
/// Most connections one try of the bulk lane goes on to (see [`Pipeline::push_run`]): the
/// progress display and a closed output are looked at between tries.
const MAX_LANE_MOVES: u32 = 16;

/// When to try the bulk lane (on one thread, and on each worker): a try that took nothing
/// walked a record for nothing, and a run of a frame or two costs more than pushing them
/// (traffic the framer cannot count off, such as sealed messages it decrypts, leaves only the
/// ACKs between them): after a second short try in a row wait 1, 2, then 4 frames before the
/// next, until one takes a longer run. Which path a frame takes changes no result, only the time.
#[derive(Default)]
struct LaneBackoff {
    /// Frames to push one by one before the lane is tried again.
    pause: u32,
    /// What the next failed try adds.
    backoff: u32,
}

impl LaneBackoff {
    /// Whether to try the lane now (else one frame of the pause is spent).
    #[inline]
    fn ready(&mut self) -> bool {
        if self.pause > 0 {
            self.pause -= 1;
            return false;
        }
        true
    }

    /// A try took `frames` frames.
    #[inline]
    fn tried(&mut self, frames: u64) {
        if frames >= MIN_LANE_RUN {
            self.backoff = 0;
        } else {
            // The first short try after a run waits for nothing: the frame it stopped at (a
            // message's first segment, usually) is pushed, and the frames after it are the
            // next message's body, which the lane takes.
            self.pause = self.backoff;
            self.backoff = (self.backoff * 2).clamp(1, MAX_LANE_PAUSE);
        }
    }
}

/// The bulk lane lent for a run, with the SMB2 layer that counts off its bytes and the sink
/// its records go to: what [`Pipeline::push_run`] hands the walk of the records. A concrete
/// type, so that the walk's loop calls `take` directly (a quiet frame costs a few hundred
/// instructions: a call through a `dyn FnMut` and the link layer out of line were a tenth of
/// them).
pub struct LaneTake<'p, S> {
    lane: crate::net::reassembly::BulkLane<'p>,
    layer: &'p mut Smb2Layer,
    sink: &'p mut S,
    /// The latest capture time of the frames taken since the run began or since the last
    /// frame whose bytes went to the layer ([`NO_FRAME`]: none): where delivering after each
    /// of them would have got to.
    latest: Timestamp,
}

/// [`LaneTake::latest`] of no frame: before every capture time. (An `Option` cost the run's
/// loop 0.27 M instructions on the plain and the small-I/O prefixes.)
const NO_FRAME: Timestamp = Timestamp(i64::MIN);

impl<S: RecordSink> LaneTake<'_, S> {
    /// Whether the lane takes `frame`: a frame the bulk path would take whose bytes change
    /// nothing but counts, or that holds bytes of the lane's connection for the layer, in
    /// order (a message's first or last segment, see
    /// [`crate::net::reassembly::BulkLane::take_or_hand`]), which it gets as `push_frame`
    /// would give them.
    #[inline]
    pub fn take(&mut self, frame: &Frame<'_>) -> bool {
        let taken = self.lane.take_or_hand::<true, _>(
            frame.link_type,
            frame.data,
            frame.orig_len,
            frame.number,
            self.layer,
        );
        match taken {
            None => false,
            Some(Taken::Quiet) => {
                self.latest = self.latest.max(frame.ts);
                true
            }
            Some(Taken::Data(dir, bytes)) => {
                self.hand(frame, dir, bytes);
                true
            }
        }
    }

    /// `push_frame` of a frame whose bytes go to the layer: the records of the frames before
    /// it delivered as each of theirs would have been (at the latest of their times: they
    /// queued nothing), its bytes given, its records delivered at its time.
    #[inline(never)]
    fn hand(&mut self, frame: &Frame<'_>, dir: Dir, bytes: &[u8]) {
        let lane = self.lane.conn_id();
        if self.latest != NO_FRAME {
            self.layer.outbox.drain(self.latest, self.sink);
        }
        self.layer
            .push_data(lane, dir, frame.number, frame.ts, bytes);
        self.layer.outbox.drain(frame.ts, self.sink);
        self.latest = NO_FRAME;
    }

    /// The run's frames were taken: see [`crate::net::reassembly::BulkLane::close`]. Returns
    /// the time to deliver the records at, if frames came after the last one `hand` delivered.
    fn close(self, run: &FrameRun) -> Option<Timestamp> {
        self.lane.close(run, self.layer);
        (self.latest != NO_FRAME).then_some(self.latest)
    }
}

/// Frames in, records out: link → IP/TCP → reassembly → SMB2 framing → matching → records.
///
/// Records reach the sink in frame order; SQOS requests are held back until answered (see
/// [`outbox`] for the exact rule), so a request record carries its response frame and time.
pub struct Pipeline {
    reassembler: Reassembler,
    layer: Smb2Layer,
    link_errors_noted: bool,
    last_ts: Timestamp,
    keep_frames: bool,
    /// With `PipelineConfig::threads`: the workers that do the per-connection work (then
    /// `reassembler` and the layer's framers stay unused).
    /// (Boxed: it is taken out and put back for every frame, see `push_frame`.)
    shards: Option<Box<shard::Shards>>,
    /// When to try the bulk lane (see `push_run`).
    lane_backoff: LaneBackoff,
    /// A thread to spare for a pager (`PipelineConfig::threads` > 1).
    page_ahead: bool,
    /// With two threads or more, the thread that maps a file's pages ahead of the reader
    /// ([`SharedMap::pager`]); it ends when the pipeline drops.
    pager: Option<crate::capture::Pager>,
}

impl Pipeline {
    pub fn new(cfg: PipelineConfig) -> Self {
        let limits = Limits::from_budget(&cfg.memory);
        Self::with_limits(cfg, limits)
    }

    pub fn with_limits(cfg: PipelineConfig, limits: Limits) -> Self {
        // N threads: the reading thread, one reading ahead (or a pager, `share_maps`) and N - 2
        // workers.
        let shards = match cfg.workers() {
            0 => None,
            workers => {
                shard::Shards::start(workers, &cfg.reassembly, &limits, &cfg.keys).map(Box::new)
            }
        };
        let mut layer = Smb2Layer::new(limits, cfg.keys);
        if cfg.keep_frames {
            layer.track_message_starts();
        }
        Pipeline {
            reassembler: Reassembler::new(cfg.reassembly),
            layer,
            link_errors_noted: false,
            last_ts: Timestamp::default(),
            keep_frames: cfg.keep_frames,
            shards,
            lane_backoff: LaneBackoff::default(),
            page_ahead: cfg.threads > 1,
            pager: None,
        }
    }

    /// The memory maps the frames to come lie in ([`crate::capture::CaptureReader::shared_map`]):
    /// with worker threads, frames found in one of them reach their worker where they lie
    /// instead of copied. Before the first frame; later calls change nothing.
    pub fn share_maps(&mut self, maps: Vec<SharedMap>) {
        // One file's map: a pager per file of several merged would map each file's first
        // pages at once, and more threads than asked for.
        if let [map] = &maps[..] {
            if self.page_ahead && self.pager.is_none() {
                self.pager = map.pager();
            }
        }
        if let Some(shards) = &mut self.shards {
            shards.share_maps(maps);
        }
    }

    pub fn push_frame<S: RecordSink>(&mut self, frame: &Frame<'_>, sink: &mut S) {
        if let Some(mut shards) = self.shards.take() {
            shards.push(frame);
            while shards.must_merge() {
                match shards.next() {
                    Some(m) => {
                        let spent = shards.spent_events(m.worker());
                        let ops = self.merge(m, sink, spent);
                        shards.give_back(ops);
                    }
                    None => break,
                }
            }
            self.shards = Some(shards);
            return;
        }
        let cut = frame
            .is_truncated()
            .then_some((frame.number, frame.data.len(), frame.orig_len));
        let queued = self.begin_frame(frame.number, frame.ts, cut);
        match decode_link(frame.link_type, frame.data) {
            Ok(l3) => {
                let pushed =
                    self.reassembler
                        .push_packet(frame.number, frame.ts, l3, &mut self.layer);
                if pushed.is_err() {
                    self.layer.stats.undecoded_frames += 1;
                }
            }
            Err(e) => self.link_error(frame.number, &e, sink),
        }
        if self.keep_frames {
            self.layer
                .outbox
                .attach_frame(queued, frame.number, || Arc::new(frame.to_copy()));
        }
        self.layer.outbox.drain(frame.ts, sink);
    }

    /// A run of the frames that come next, taken in one go when they are plain in-order
    /// segments of the last segment's connection (the bulk lane,
    /// [`crate::net::reassembly::BulkLane`]): those that change nothing but counts, and those
    /// whose bytes go to the SMB2 layer as they would from `push_frame` (see
    /// [`LaneTake::take`]); at a plain segment of another recent connection the run goes on
    /// with that one. `take_run` walks the frames where they lie and asks the lane about each
    /// (as [`crate::capture::CaptureReader::take_run`] does). The result is what
    /// [`Pipeline::push_frame`] of each would give. `None`: not one was taken; push the next
    /// frame. Not with workers: they take their own frames in runs (`shard`).
    pub fn push_run<S: RecordSink>(
        &mut self,
        mut take_run: impl FnMut(&mut LaneTake<'_, S>) -> Option<FrameRun>,
        sink: &mut S,
    ) -> Option<u64> {
        if self.shards.is_some() || self.keep_frames {
            return None;
        }
        if !self.lane_backoff.ready() {
            return None;
        }
        let mut taken = 0;
        // A run that stops at a plain segment of another recent connection goes on with that
        // connection's lane (hosts' channels interleave): the segment is taken there as
        // `push_frame` would take it, and not walked and pushed alone.
        for _ in 0..MAX_LANE_MOVES {
            let Some(lane) = self.reassembler.bulk_lane() else {
                break;
            };
            let mut lane = LaneTake {
                lane,
                layer: &mut self.layer,
                sink: &mut *sink,
                latest: NO_FRAME,
            };
            let run = take_run(&mut lane);
            let other = lane.lane.other();
            if let Some(run) = run {
                let deliver_at = lane.close(&run);
                self.ran(&run, deliver_at, sink);
                taken += run.frames;
            }
            match other {
                Some(other) if self.reassembler.lane_to(other) => {}
                _ => break,
            }
        }
        self.lane_backoff.tried(taken);
        (taken > 0).then_some(taken)
    }

    /// A run's frames were taken: what `begin_frame` and the delivery after each of them come
    /// to (frames whose bytes went to the layer delivered theirs as they came, see
    /// [`LaneTake::take`]). The frames after the last of those queued nothing, so delivering
    /// once at the latest of their times (`deliver_at`) delivers what delivering after each
    /// would.
    fn ran<S: RecordSink>(&mut self, run: &FrameRun, deliver_at: Option<Timestamp>, sink: &mut S) {
        self.layer.stats.frames += run.frames;
        self.layer.cut_frame = None;
        self.layer.last_frame = run.last.0;
        self.last_ts = run.last.1;
        if let Some(at) = deliver_at {
            self.layer.outbox.drain(at, sink);
        }
    }

    /// A frame begins (`cut`: the snaplen cut it). Returns the outbox position of its records.
    fn begin_frame(&mut self, number: u64, ts: Timestamp, cut: Option<(u64, usize, u32)>) -> u64 {
        let stats = &mut self.layer.stats;
        stats.frames += 1;
        if cut.is_some() {
            stats.truncated_frames += 1;
        }
        self.layer.cut_frame = cut;
        self.layer.last_frame = number;
        self.last_ts = ts;
        self.layer.outbox.next_seq()
    }

    fn link_error<S: RecordSink>(&mut self, frame: u64, e: &LinkError, sink: &mut S) {
        self.layer.stats.undecoded_frames += 1;
        if !self.link_errors_noted {
            // Once: a capture of an unsupported link type would repeat it every frame.
            self.link_errors_noted = true;
            sink.on_note(&CaptureNote {
                frame,
                message: format!("frame {frame}: {e}"),
            });
        }
    }

    /// The workers' results, in frame order: what `push_frame` does on one thread. Gives the
    /// frame's list of ops back emptied (see [`shard::Shards::give_back`]), and its lists of
    /// framer events to `spent`, its worker's (see [`shard::Shards::spent_events`]).
    fn merge<S: RecordSink>(
        &mut self,
        step: shard::Step,
        sink: &mut S,
        mut spent: Option<&mut Vec<Vec<crate::smb2::FramerEvent>>>,
    ) -> Vec<(ConnId, streams::WorkerOp)> {
        let mut m = match step {
            shard::Step::Frame(m) => m,
            shard::Step::Quiet(q) => {
                self.ran(&q, Some(q.latest), sink);
                return Vec::new();
            }
        };
        self.begin_frame(m.number, m.ts, m.cut);
        if m.undecoded {
            self.layer.stats.undecoded_frames += 1;
        }
        if let Some(e) = &m.link_error {
            self.link_error(m.number, e, sink);
        }
        for (conn, op) in m.ops.drain(..) {
            let events = self.layer.apply(conn, op, m.number, m.ts);
            if let (Some(events), Some(spent)) = (events, spent.as_deref_mut()) {
                shard::keep_spent(spent, events);
            }
        }
        self.layer.outbox.drain(m.ts, sink);
        m.ops
    }

    /// End of input: flush held records and report what stayed incomplete, and once per
    /// memory share what it dropped.
    pub fn finish<S: RecordSink>(&mut self, sink: &mut S) {
        let memory = match self.shards.take() {
            Some(shards) => self.finish_shards(shards, sink),
            None => {
                let ts = self.last_ts;
                // Connection by connection, delivering as it goes: what the end of the capture
                // flushes (gaps, incomplete messages) is not queued all at once.
                while self.reassembler.finish_one(&mut self.layer) {
                    self.layer.outbox.drain(ts, sink);
                }
                self.layer.finish(ts);
                merged(
                    self.reassembler
                        .memory()
                        .into_iter()
                        .chain(self.layer.memory()),
                )
            }
        };
        let frame = self.layer.last_frame;
        self.layer.outbox.note_summaries(frame);
        for m in &memory {
            if let Some(message) = m.summary() {
                self.layer
                    .outbox
                    .push(outbox::Out::Note(CaptureNote { frame, message }));
            }
        }
        self.layer.stats.memory = memory;
        self.layer.outbox.release_all(sink);
    }

    /// [`Pipeline::finish`] with workers: every frame merged, then the workers' ends in the
    /// single thread's order. Returns the memory shares, the workers' and the session stage's.
    fn finish_shards<S: RecordSink>(
        &mut self,
        mut shards: Box<shard::Shards>,
        sink: &mut S,
    ) -> Vec<MemoryUse> {
        while let Some(m) = shards.next() {
            let spent = shards.spent_events(m.worker());
            let ops = self.merge(m, sink, spent);
            shards.give_back(ops);
        }
        let end = (*shards).finish();
        let ts = self.last_ts;
        let (last_frame, last_ts) = end.last;
        for ops in end.conns {
            for (conn, op) in ops {
                self.layer.apply(conn, op, last_frame, last_ts);
            }
            self.layer.outbox.drain(ts, sink);
        }
        for (conn, dir, events) in end.framers {
            let frame = self.layer.last_frame;
            self.layer.flush_framer(conn, dir, frame, ts, Some(events));
        }
        self.layer.finish_exchange(ts);
        self.layer.stats.framer_bytes_shed += end.shed;
        merged(end.memory.into_iter().chain(self.layer.session_memory()))
    }

    pub fn stats(&self) -> &Stats {
        &self.layer.stats
    }

    /// What reassembly on the calling thread counted (nothing with worker threads, whose
    /// reassemblers count their own).
    pub fn reassembly_stats(&self) -> &ReassemblyStats {
        self.reassembler.stats()
    }

    /// Worker threads doing the per-connection work (0: all on the calling thread; see
    /// [`PipelineConfig::threads`]).
    pub fn workers(&self) -> usize {
        self.shards.as_ref().map_or(0, |s| s.workers())
    }

    /// The memory shares now (the same as `stats().memory` after `finish`).
    pub fn memory(&self) -> Vec<MemoryUse> {
        merged(
            self.reassembler
                .memory()
                .into_iter()
                .chain(self.layer.memory()),
        )
    }

    /// The SMB2 layer as a [`crate::net::StreamSink`]: feed reassembled stream events directly
    /// (tests; sources that already have TCP streams). Call [`Pipeline::deliver`] after.
    pub fn stream_sink(&mut self) -> &mut Smb2Layer {
        &mut self.layer
    }

    /// Deliver the records that are ready, applying the hold-back rule at capture time `now`.
    pub fn deliver<S: RecordSink>(&mut self, now: Timestamp, sink: &mut S) {
        self.last_ts = self.last_ts.max(now);
        self.layer.outbox.drain(now, sink);
    }

    /// Bytes held by the SMB2 framers right now.
    pub fn framer_bytes(&self) -> usize {
        self.layer.framer_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a connection costs the budget covers what it holds: its reassembly state and two
    /// framers with their message walkers, and room for its index entries and the layer's
    /// endpoints (an inline buffer grown in a framer must be charged here).
    #[test]
    fn a_connections_entry_cost_covers_its_structs() {
        let held = crate::net::reassembly::CONN_BYTES + 2 * crate::smb2::framer::FRAMER_BYTES;
        assert!(
            held + 192 <= Kind::Connections.entry_cost(),
            "{held} + 192 > {}",
            Kind::Connections.entry_cost()
        );
    }

    /// The frames `backoff` pauses for before its next try.
    fn pause_after(backoff: &mut LaneBackoff) -> u32 {
        let mut pause = 0;
        while !backoff.ready() {
            pause += 1;
        }
        pause
    }

    /// Workers run above 2 threads, unless keys or kept frames keep the run on one; a run
    /// without workers reads as 2 threads at most (a helper, not the workers' map).
    #[test]
    fn workers_and_reading_follow_the_threads_keys_and_kept_frames() {
        let of = |threads, keys: bool, keep_frames| {
            let mut cfg = PipelineConfig {
                threads,
                keep_frames,
                ..Default::default()
            };
            if keys {
                let mut ring = KeyRing::default();
                ring.insert(crate::smb2::crypto::SessionKeys {
                    session_id: 7,
                    session_key: vec![0xab; 16],
                    server_to_client: Vec::new(),
                    client_to_server: Vec::new(),
                });
                cfg.keys = Arc::new(ring);
            }
            (cfg.workers(), cfg.reading())
        };
        assert_eq!(of(0, false, false), (0, Reading::Alone));
        assert_eq!(of(1, false, false), (0, Reading::Alone));
        assert_eq!(of(2, false, false), (0, Reading::Ahead));
        assert_eq!(of(3, false, false), (1, Reading::ForWorkers));
        assert_eq!(of(16, false, false), (14, Reading::ForWorkers));
        assert_eq!(of(4, true, false), (0, Reading::Ahead));
        assert_eq!(of(4, false, true), (0, Reading::Ahead));
        assert_eq!(of(1, true, true), (0, Reading::Alone));
        // A run that holds messages back reads chunks ahead, not indexed through the map.
        let holding = |threads| PipelineConfig {
            threads,
            chunks_ahead: true,
            ..Default::default()
        };
        assert_eq!(holding(2).reading(), Reading::AheadInChunks);
        assert_eq!(holding(1).reading(), Reading::Alone);
        assert_eq!(holding(3).reading(), Reading::ForWorkers);
    }

    #[test]
    fn the_lane_is_tried_again_at_once_after_one_short_try_then_after_1_2_then_4_frames() {
        let mut backoff = LaneBackoff::default();
        backoff.tried(MIN_LANE_RUN);
        let mut pauses = Vec::new();
        for _ in 0..9 {
            backoff.tried(1);
            pauses.push(pause_after(&mut backoff));
        }
        assert_eq!(pauses, [0, 1, 2, 4, 4, 4, 4, 4, 4]);
        // A run that pays for its try starts the count again.
        backoff.tried(MIN_LANE_RUN);
        backoff.tried(0);
        assert_eq!(pause_after(&mut backoff), 0);
        backoff.tried(0);
        assert_eq!(pause_after(&mut backoff), 1);
    }
}
