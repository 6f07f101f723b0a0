//! Per-open state: which logical flow an SMB2 open (session + FileId) belongs to.

use std::sync::Arc;

use uuid::Uuid;

use crate::pipeline::FileId;

/// An SMB2 open as the server knows it: a FileId is unique within its session, and the session
/// is used over every one of its channels (SMB3 multichannel), so the connection is no part of
/// the key: READ/WRITE/IOCTL on any channel reach the same open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpenKey {
    pub session_id: u64,
    pub file_id: FileId,
}

/// What we know of an open's logical flow (the server's Open.LogicalFlowID, section 3.2.1.2).
/// `Unknown` is a real state: an open whose CREATE or association happened before the capture
/// started may be associated or not, and no rule that depends on it may be judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Association {
    Unknown,
    NotAssociated,
    Flow(Uuid),
}

impl Association {
    pub fn flow(self) -> Option<Uuid> {
        match self {
            Association::Flow(id) => Some(id),
            _ => None,
        }
    }
}

/// How an open came to be associated with a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AssociatedBy {
    SetLogicalFlowId,
    ProbePolicy,
    /// Not seen: a successful request or a GET_STATUS response showed it (capture began later).
    Inferred,
}

#[derive(Clone, Debug)]
pub struct OpenState {
    pub file_name: Option<Arc<str>>,
    pub association: Association,
    /// Highest ChannelSequence seen in its requests (SMB 3.x): the client raises it when a
    /// channel of the session failed.
    pub channel_sequence: Option<u16>,
}

impl OpenState {
    /// A request on the open carried `seq`: true when it is newer than any seen before (a
    /// channel failed since), in 16-bit serial arithmetic as the server compares it.
    pub fn raise_channel_sequence(&mut self, seq: u16) -> bool {
        match self.channel_sequence {
            None => {
                self.channel_sequence = Some(seq);
                false
            }
            Some(prev) => {
                let ahead = seq.wrapping_sub(prev);
                if ahead != 0 && ahead <= 0x7FFF {
                    self.channel_sequence = Some(seq);
                    true
                } else {
                    false
                }
            }
        }
    }
}

impl OpenState {
    /// An open whose CREATE was seen: the server starts it unassociated (section 3.2.1.2).
    pub fn created(file_name: &str) -> Self {
        OpenState {
            file_name: Some(Arc::from(file_name)),
            association: Association::NotAssociated,
            channel_sequence: None,
        }
    }
    /// An open first met in the middle of its life.
    pub fn met(file_name: Option<&str>) -> Self {
        OpenState {
            file_name: file_name.map(Arc::from),
            association: Association::Unknown,
            channel_sequence: None,
        }
    }
}
