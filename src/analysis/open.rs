//! Per-open state: which logical flow an SMB2 open (connection + session + FileId) belongs to.

use std::sync::Arc;

use uuid::Uuid;

use crate::net::ConnId;
use crate::pipeline::FileId;

/// An SMB2 open as the server knows it: FileIds are only unique within a session of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpenKey {
    pub conn: ConnId,
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
}

impl OpenState {
    /// An open whose CREATE was seen: the server starts it unassociated (section 3.2.1.2).
    pub fn created(file_name: &str) -> Self {
        OpenState {
            file_name: Some(Arc::from(file_name)),
            association: Association::NotAssociated,
        }
    }
    /// An open first met in the middle of its life.
    pub fn met(file_name: Option<&str>) -> Self {
        OpenState {
            file_name: file_name.map(Arc::from),
            association: Association::Unknown,
        }
    }
}
