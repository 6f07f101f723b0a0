//! What the simulation records as it goes: every READ/WRITE, every SQOS exchange, every
//! update with the I/O it reports and every policy a flow set — the raw material of the
//! ground truth.

use crate::sqos::{Request, Response};
use crate::synth::scenario::{PolicySpec, SetupStyle};
use crate::synth::smb2::{FileId, Header};
use crate::synth::wire::Time;

use super::net::Target;

/// The five counters of an update (section 3.1.4.1), or what some I/O adds up to.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counters {
    pub io: u64,
    pub norm: u64,
    pub latency: u64,
    pub lower: u64,
    pub bytes: u64,
}

impl Counters {
    /// The increments a set of completed I/Os adds up to (section 3.1.4.1).
    pub fn sum<'a>(ios: impl Iterator<Item = &'a IoRec>) -> Counters {
        let mut c = Counters::default();
        for io in ios {
            let done = io.resp_done.unwrap_or(io.req_done);
            c.io += 1;
            c.norm += io.norm;
            c.latency += done.saturating_sub(io.gen) * 10;
            c.lower += done.saturating_sub(io.req_done) * 10;
            c.bytes += u64::from(io.len);
        }
        c
    }
}

/// Why the client sent a SQOS request (what it does with the answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Purpose {
    SetFlowId(SetupStyle),
    SetPolicy { with_status: bool },
    Status,
    Raw,
}

/// One READ or WRITE.
pub(crate) struct IoRec {
    pub flow: usize,
    /// The channel its (latest) request went over.
    pub chan: usize,
    pub write: bool,
    pub offset: u64,
    pub len: u32,
    pub norm: u64,
    /// When the VM asked for it.
    pub gen: Time,
    pub req_tag: u32,
    pub req_done: Time,
    pub resp_tag: Option<u32>,
    pub resp_done: Option<Time>,
    /// The header the server answers with.
    pub hdr: Header,
}

/// One FSCTL_STORAGE_QOS_CONTROL exchange.
pub(crate) struct MsgRec {
    pub host: usize,
    /// The channel its (latest) request went over.
    pub chan: usize,
    pub flow: Option<usize>,
    pub target: Target,
    pub fid: FileId,
    pub file_name: Option<String>,
    pub req: Request,
    pub max_out: u32,
    pub purpose: Purpose,
    pub note: String,
    pub req_tag: Option<u32>,
    /// The tag of the first request (a replay's original); `req_tag` is the latest.
    pub first_req_tag: Option<u32>,
    /// Every time the request was sent: (channel, tag).
    pub sends: Vec<(usize, u32)>,
    /// The client has its answer.
    pub answered: bool,
    pub sent: Time,
    /// SMB2 MessageId of the IOCTL request.
    pub mid: u64,
    /// The server bug that struck it (index in `Cluster::faults`).
    pub fault: Option<usize>,
    pub resp_tag: Option<u32>,
    pub nt: Option<u32>,
    pub resp: Option<Response>,
}

/// One UPDATE_COUNTERS request and the I/O it reports.
pub(super) struct UpdRec {
    pub msg: usize,
    pub prev: Option<Time>,
    pub rate: u64,
    /// What the request reports.
    pub inc: Counters,
    /// What the I/O listed with it adds up to.
    pub actual: Counters,
    pub ios: Vec<usize>,
}

/// A policy a flow set, and the request that set it.
pub(super) struct PolRec {
    pub time: Time,
    pub msg: usize,
    pub policy: PolicySpec,
}
