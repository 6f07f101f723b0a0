//! Channels: the connections a session is used over (SMB3 multichannel), as the analysis sees
//! them — per channel, how it joined and ended; per flow, the channels its opens' messages and
//! I/O went over.
//!
//! Opens are keyed by session and FileId, not by connection ([`super::OpenKey`]): an open
//! created on one channel is used on all of them. Requests and responses are still matched per
//! connection (MessageIds belong to a connection).

use std::net::SocketAddr;

use serde::Serialize;
use uuid::Uuid;

use crate::capture::Timestamp;
use crate::net::ConnId;
use crate::pipeline::{ChannelEnd, ChannelJoin};

/// Most flows a channel remembers (to tell them when it ends); further flows are not told.
pub const MAX_FLOWS_PER_CHANNEL: usize = 256;
/// Most channels a flow lists; further ones are counted.
pub const MAX_CHANNELS_PER_FLOW: usize = 16;

/// What a flow did on a channel (for its per-channel counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelUse {
    Io,
    SqosRequest,
    Other,
}

/// How a channel ended, as the analysis judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelEnding {
    Fin,
    Rst,
    Logoff,
    Dropped,
    /// Open at the end of the capture, but the server said nothing on it after requests that
    /// stayed unanswered (a link or NIC that failed without a FIN or RST).
    Silence,
}

impl ChannelEnding {
    pub fn from_pipeline(e: ChannelEnd) -> Option<ChannelEnding> {
        match e {
            ChannelEnd::Fin => Some(ChannelEnding::Fin),
            ChannelEnd::Rst => Some(ChannelEnding::Rst),
            ChannelEnd::Logoff => Some(ChannelEnding::Logoff),
            ChannelEnd::Dropped => Some(ChannelEnding::Dropped),
            ChannelEnd::CaptureEnd => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ChannelEnding::Fin => "fin",
            ChannelEnding::Rst => "rst",
            ChannelEnding::Logoff => "logoff",
            ChannelEnding::Dropped => "dropped",
            ChannelEnding::Silence => "silence",
        }
    }
}

/// A channel as the analyzer follows it.
#[derive(Clone, Debug)]
pub struct ChannelInfo {
    pub client: SocketAddr,
    pub server: SocketAddr,
    pub joined: ChannelJoin,
    pub frame: u64,
    pub ts: Timestamp,
    /// Flows seen on it (to tell them when it ends), at most [`MAX_FLOWS_PER_CHANNEL`].
    pub flows: Vec<Uuid>,
}

/// One channel a flow was seen on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowChannel {
    pub conn: ConnId,
    pub session_id: u64,
    /// Unknown when the channel was not followed (its record was dropped by a bound).
    pub client: Option<SocketAddr>,
    pub server: Option<SocketAddr>,
    pub joined: Option<ChannelJoin>,
    /// First and last frame of the flow's messages and I/O on this channel.
    pub first_frame: u64,
    pub last_frame: u64,
    /// READ/WRITE completed on it.
    pub io_count: u64,
    /// SQOS requests sent on it.
    pub sqos_requests: u64,
    pub ended: Option<ChannelEnding>,
    /// Frame (and time) of the FIN/RST/LOGOFF that ended it, or for `Silence` of the server's
    /// last message.
    pub ended_frame: Option<u64>,
    pub ended_ts: Option<Timestamp>,
    /// The flow's SQOS requests that got no answer because the channel ended (or went silent).
    pub lost_requests: u64,
    /// Of those, the ones the client sent again on another channel (SMB2_FLAGS_REPLAY_OPERATION).
    pub replayed_requests: u64,
}

impl FlowChannel {
    /// The flow used the channel at `frame`.
    pub fn used(&mut self, frame: u64, used: ChannelUse) {
        self.first_frame = self.first_frame.min(frame);
        self.last_frame = self.last_frame.max(frame);
        match used {
            ChannelUse::Io => self.io_count += 1,
            ChannelUse::SqosRequest => self.sqos_requests += 1,
            ChannelUse::Other => {}
        }
    }

    pub fn new(conn: ConnId, session_id: u64, info: Option<&ChannelInfo>, frame: u64) -> Self {
        FlowChannel {
            conn,
            session_id,
            client: info.map(|i| i.client),
            server: info.map(|i| i.server),
            joined: info.map(|i| i.joined),
            first_frame: frame,
            last_frame: frame,
            io_count: 0,
            sqos_requests: 0,
            ended: None,
            ended_frame: None,
            ended_ts: None,
            lost_requests: 0,
            replayed_requests: 0,
        }
    }

    /// `client → server`, or the connection number when the addresses are unknown.
    pub fn label(&self) -> String {
        match (self.client, self.server) {
            (Some(c), Some(s)) => format!("{c} → {s}"),
            _ => format!("connection {}", self.conn.0),
        }
    }
}
