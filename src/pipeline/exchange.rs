//! SMB2 messages → records: request/response matching, opens (FileId ↔ name), sessions and
//! their channels and trees (`sessions`), related compound operations, and the SQOS / open /
//! close / I/O / channel records.

use std::sync::Arc;

use super::outbox::{NoteKind, Out, Outbox, Seq};
use super::sessions::{full_path, Sessions};
use super::sqos_build::{request_record, response_record, MsgCtx};
use super::{
    CaptureNote, ChannelEnd, ChannelJoin, CloseRecord, IoKind, IoRecord, Limits, OpenRecord,
    SessionSummary, Stats,
};
use crate::budget::MemoryUse;
use crate::capture::Timestamp;
use crate::net::ConnId;
use crate::smb2::header::UNSOLICITED_MESSAGE_ID;
use crate::smb2::{
    parse_body, Body, Command, Evicted, FileId, Header, OpenTable, Part, PendingTable,
};
use crate::sqos::{self, FSCTL_STORAGE_QOS_CONTROL};

/// What a request waits for, with what its response needs to make a record.
#[derive(Debug)]
enum Awaiting {
    Create {
        name: Option<Arc<str>>,
    },
    Close,
    Io {
        kind: IoKind,
        requested: u32,
    },
    Sqos {
        seq: Seq,
        request: Option<Box<sqos::Request>>,
    },
    SessionSetup {
        binding: bool,
    },
    TreeConnect {
        path: Option<Arc<str>>,
    },
    TreeDisconnect {
        tree: Option<u32>,
    },
    Other,
}

#[derive(Debug)]
struct PendingReq {
    session: u64,
    channel_sequence: u16,
    frame: u64,
    ts: Timestamp,
    command: Command,
    file_id: Option<FileId>,
    file_name: Option<Arc<str>>,
    awaiting: Awaiting,
}

impl PendingReq {
    /// Bytes a request with this file name and wait holds beyond its entry: names, and a
    /// decoded SQOS request.
    fn heap_bytes(file_name: &Option<Arc<str>>, awaiting: &Awaiting) -> usize {
        // Shared with the open table, but counted here as when each request held a copy.
        let name = |n: &Option<Arc<str>>| n.as_ref().map_or(0, |n| n.len());
        let awaiting = match awaiting {
            Awaiting::Create { name: n } => name(n),
            Awaiting::TreeConnect { path: Some(p) } => p.len(),
            Awaiting::Sqos {
                request: Some(r), ..
            } => {
                std::mem::size_of::<sqos::Request>()
                    + r.initiator_name.as_ref().map_or(0, String::len)
                    + r.initiator_node_name.as_ref().map_or(0, String::len)
            }
            _ => 0,
        };
        name(file_name) + awaiting
    }
}

/// The file a compound chain is working on, for related operations (FileId all ones).
#[derive(Clone, Debug, Default)]
pub struct Chain {
    file_id: Option<FileId>,
    name: Option<Arc<str>>,
    /// TreeId of the chain's last request with a real one (related requests carry 0xFFFFFFFF).
    tree_id: Option<u32>,
    /// Parts follow the one being handled (set by the caller for each part).
    pub(super) more: bool,
}

impl Chain {
    /// The chain works on `file_id` (`None`: a new file, whose FileId only the response
    /// gives), named `name`.
    fn working_on(&mut self, file_id: Option<FileId>, name: Option<Arc<str>>) {
        self.file_id = file_id;
        self.name = name;
    }
}

/// TreeId of a related request that takes the previous request's (MS-SMB2 3.2.4.1.4).
const RELATED_TREE_ID: u32 = 0xFFFF_FFFF;

pub struct Exchange {
    pending: PendingTable<PendingReq>,
    opens: OpenTable,
    pub sessions: Sessions,
    /// The channel of the previous message (most follow one on the same channel).
    last_channel: Option<(crate::net::ConnId, u64)>,
}

impl Exchange {
    pub fn new(limits: &Limits) -> Self {
        Exchange {
            pending: PendingTable::new(limits.max_pending_bytes),
            opens: OpenTable::new(limits.max_open_bytes),
            sessions: Sessions::new(limits.max_channel_bytes),
            last_channel: None,
        }
    }

    /// The pending, open and session tables' memory shares.
    pub fn memory(&self) -> [MemoryUse; 3] {
        [
            self.pending.share().usage(),
            self.opens.share().usage(),
            self.sessions.memory().usage(),
        ]
    }

    /// The session of `h` is used on this connection: a channel, the first time (its setup
    /// was not seen here). SESSION_SETUP and NEGOTIATE do not count: a session exists on a
    /// connection once its SESSION_SETUP succeeded.
    fn channel_seen(&mut self, ctx: &MsgCtx, h: &Header, outbox: &mut Outbox) {
        let session = h.session_id;
        if session == 0
            || h.command == Command::SESSION_SETUP
            || h.command == Command::NEGOTIATE
            || self.last_channel == Some((ctx.conn, session))
        {
            return;
        }
        // A known channel joins nothing (`join` would return None).
        if !self.sessions.knows(session, ctx.conn) {
            let (client, server) = ends(ctx, h);
            if let Some(rec) = self.sessions.join(
                session,
                ctx.conn,
                client,
                server,
                ChannelJoin::Seen,
                ctx.frame,
                ctx.ts,
            ) {
                outbox.push(Out::Channel(Box::new(rec)));
            }
        }
        self.last_channel = Some((ctx.conn, session));
    }

    /// The name an open gets: the share path of its tree before the CREATE name.
    fn open_name(&self, h: &Header, chain: &Chain, name: Option<&str>) -> Option<Arc<str>> {
        let name = name?;
        let tree = match h.tree_id() {
            Some(RELATED_TREE_ID) if h.flags.is_related() => chain.tree_id,
            t => t,
        };
        let dfs = h.flags.0 & crate::smb2::HeaderFlags::DFS_OPERATIONS != 0;
        Some(
            match tree.and_then(|t| self.sessions.share(h.session_id, t)) {
                Some(share) => Arc::from(full_path(share, name, dfs)),
                None => Arc::from(name),
            },
        )
    }

    /// The file a FileId names: related placeholders resolve to the chain's file.
    fn resolve(
        &self,
        h: &Header,
        fid: FileId,
        chain: &Chain,
    ) -> (Option<FileId>, Option<Arc<str>>) {
        self.file_of(h, fid, chain, true)
    }

    /// [`Exchange::resolve`] for a READ or WRITE request: its name only where a later part of
    /// its chain may take it. Its I/O record names the file by its id (the analysis knows the
    /// opens), so the name's lookup, and the count on it while it waits, are saved.
    fn resolve_io(
        &self,
        h: &Header,
        fid: FileId,
        chain: &Chain,
    ) -> (Option<FileId>, Option<Arc<str>>) {
        // `named` a constant on the common path, which then folds to the placeholder test.
        if chain.more {
            self.resolve(h, fid, chain)
        } else {
            self.file_of(h, fid, chain, false)
        }
    }

    /// The file a FileId names, and its name if `named`.
    #[inline(always)]
    fn file_of(
        &self,
        h: &Header,
        fid: FileId,
        chain: &Chain,
        named: bool,
    ) -> (Option<FileId>, Option<Arc<str>>) {
        let placeholder = fid.is_related_placeholder();
        match (placeholder, named) {
            // A READ or WRITE of an open file: most messages.
            (false, false) => (Some(fid), None),
            (false, true) => {
                let name = self
                    .opens
                    .name(h.session_id, fid)
                    .cloned()
                    .or_else(|| chain.name.clone().filter(|_| chain.file_id == Some(fid)));
                (Some(fid), name)
            }
            (true, _) if h.flags.is_related() => {
                let name = if named { chain.name.clone() } else { None };
                (chain.file_id, name)
            }
            (true, _) => (None, None),
        }
    }

    /// One part of a message (`chain` is shared by the parts of one message).
    pub fn on_part(
        &mut self,
        ctx: &MsgCtx,
        part: &Part,
        chain: &mut Chain,
        outbox: &mut Outbox,
        stats: &mut Stats,
    ) {
        let h = &part.header;
        self.channel_seen(ctx, h, outbox);
        if h.is_response() {
            self.sessions.server_spoke(ctx.conn, ctx.frame, ctx.ts);
        } else if let Some(t) = h.tree_id().filter(|&t| t != RELATED_TREE_ID) {
            chain.tree_id = Some(t);
        }
        // The body is lent, not moved: it was copied twice more on its way to its handler.
        let parsed = parse_body(h, &part.bytes);
        let body = match &parsed {
            Ok(b) => b,
            Err(e) => {
                body_not_decoded(ctx, h, e, outbox, stats);
                &NOT_DECODED
            }
        };
        if matches!(body, Body::Error(_)) {
            stats.error_bodies_by_command.count(h.command);
        }
        if h.is_response() {
            self.on_response(ctx, part, body, chain, outbox, stats);
        } else {
            self.on_request(ctx, part, body, chain, outbox, stats);
        }
    }

    fn on_request(
        &mut self,
        ctx: &MsgCtx,
        part: &Part,
        body: &Body,
        chain: &mut Chain,
        outbox: &mut Outbox,
        stats: &mut Stats,
    ) {
        let h = &part.header;
        let (file, awaiting) = match body {
            Body::ReadRequest(r) => (
                self.resolve_io(h, r.file_id, chain),
                Awaiting::Io {
                    kind: IoKind::Read,
                    requested: r.length,
                },
            ),
            Body::WriteRequest(w) => (
                self.resolve_io(h, w.file_id, chain),
                Awaiting::Io {
                    kind: IoKind::Write,
                    requested: w.length,
                },
            ),
            _ => self.request_other(ctx, part, body, chain, outbox, stats),
        };
        // The chain's file is for the parts after this one (none after most requests: their
        // name is then not shared once more for nothing).
        if let (Some(fid), false, true) = (
            file.0,
            matches!(awaiting, Awaiting::Create { .. }),
            chain.more,
        ) {
            chain.working_on(Some(fid), file.1.clone());
        }
        // CANCEL reuses the MessageId of the request it cancels: never a pending request.
        if h.command == Command::CANCEL || h.message_id == UNSOLICITED_MESSAGE_ID {
            return;
        }
        let (file_id, file_name) = file;
        let bytes = PendingReq::heap_bytes(&file_name, &awaiting);
        let req = || PendingReq {
            session: h.session_id,
            channel_sequence: h.channel_sequence(),
            frame: ctx.frame,
            ts: ctx.ts,
            command: h.command,
            file_id,
            file_name,
            awaiting,
        };
        let mut full = 0;
        let key = (ctx.conn, h.message_id);
        self.pending.insert(key, bytes, req, |(_, id), old, why| {
            stats.pending_evicted += 1;
            match why {
                Evicted::Full => full += 1,
                Evicted::Replaced => note_replaced(outbox, ctx.frame, id, &old),
            }
        });
        if full > 0 {
            // Counted in the pending share, reported once at the end.
            self.pending.share_mut().dropped(full, 0, ctx.frame);
        }
    }

    /// What a request other than READ and WRITE names and waits for: out of line, so that
    /// the per-message path keeps its registers for those two.
    #[inline(never)]
    fn request_other(
        &mut self,
        ctx: &MsgCtx,
        part: &Part,
        body: &Body,
        chain: &mut Chain,
        outbox: &mut Outbox,
        stats: &mut Stats,
    ) -> ((Option<FileId>, Option<Arc<str>>), Awaiting) {
        let h = &part.header;
        match body {
            Body::CreateRequest(c) => {
                let name = self.open_name(h, chain, c.name.as_deref());
                // A new chain file: its FileId is known only from the response.
                chain.working_on(None, name.clone());
                ((None, name.clone()), Awaiting::Create { name })
            }
            Body::CloseRequest(c) => (self.resolve(h, c.file_id, chain), Awaiting::Close),
            Body::IoctlRequest(io) => {
                let file = self.resolve(h, io.file_id, chain);
                if io.ctl_code == FSCTL_STORAGE_QOS_CONTROL {
                    let rec = request_record(ctx, part, io, file.clone());
                    stats.sqos_messages += 1;
                    let request = match &rec.body {
                        super::SqosBody::Request(d) => d.message.clone().map(Box::new),
                        _ => None,
                    };
                    if let (true, Some(r)) = (h.flags.is_replay(), request.as_deref()) {
                        self.replayed(ctx, h, file.0, r, outbox);
                    }
                    if rec.buffer_truncated {
                        outbox.note(NoteKind::SqosIncomplete, ctx.frame, || {
                            format!(
                                "SQOS request msg id {}: buffer incomplete ({} of {} bytes in the capture)",
                                h.message_id,
                                rec.buffer.len(),
                                io.input_count
                            )
                        });
                    }
                    let seq = outbox.push_held(rec);
                    (file, Awaiting::Sqos { seq, request })
                } else {
                    (file, Awaiting::Other)
                }
            }
            Body::SessionSetupRequest(r) => (
                (None, None),
                Awaiting::SessionSetup {
                    binding: r.is_binding(),
                },
            ),
            Body::TreeConnectRequest(r) => (
                (None, None),
                Awaiting::TreeConnect {
                    path: r.path.as_deref().map(Arc::from),
                },
            ),
            _ if h.command == Command::TREE_DISCONNECT => (
                (None, None),
                Awaiting::TreeDisconnect {
                    tree: h.tree_id().filter(|&t| t != RELATED_TREE_ID),
                },
            ),
            _ => ((None, None), Awaiting::Other),
        }
    }

    fn on_response(
        &mut self,
        ctx: &MsgCtx,
        part: &Part,
        body: &Body,
        chain: &mut Chain,
        outbox: &mut Outbox,
        stats: &mut Stats,
    ) {
        let h = &part.header;
        if h.command == Command::READ || h.command == Command::WRITE {
            // Interim responses leave the request waiting for its final response.
            if !h.is_interim() {
                self.io_response(ctx, h, body, outbox, stats);
            }
            return;
        }
        // Interim responses leave the request waiting for its final response.
        let mut req = if h.is_interim() {
            None
        } else {
            self.pending.remove(&(ctx.conn, h.message_id))
        };
        if let Some(r) = &req {
            super::srt::record(&mut stats.srt, h.command, ctx.ts.nanos_since(r.ts));
        }
        self.response_other(ctx, part, body, &mut req, chain, outbox, stats);
        // An I/O request answered by another command still makes its I/O record.
        if let (Some(r), false) = (&req, h.is_interim()) {
            io_record(ctx, h, body, r, outbox);
        }
    }

    /// A final READ or WRITE response (its body one of those, an ERROR or none): timed and
    /// made an I/O record with its request, read where it lies in the pending table.
    fn io_response(
        &mut self,
        ctx: &MsgCtx,
        h: &Header,
        body: &Body,
        outbox: &mut Outbox,
        stats: &mut Stats,
    ) {
        self.pending.remove_with(&(ctx.conn, h.message_id), |r| {
            super::srt::record(&mut stats.srt, h.command, ctx.ts.nanos_since(r.ts));
            io_record(ctx, h, body, r, outbox);
        });
    }

    /// The records of a response other than READ and WRITE (out of line, as
    /// `request_other`). An SQOS response takes its request out of `req`.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn response_other(
        &mut self,
        ctx: &MsgCtx,
        part: &Part,
        body: &Body,
        req: &mut Option<PendingReq>,
        chain: &mut Chain,
        outbox: &mut Outbox,
        stats: &mut Stats,
    ) {
        let h = &part.header;
        let key = (ctx.conn, h.message_id);
        let req_ref = match req.as_ref() {
            Some(r) => Some(r),
            None if h.is_interim() => self.pending.get(&key),
            None => None,
        };
        let was_sqos = matches!(req_ref.map(|r| &r.awaiting), Some(Awaiting::Sqos { .. }));
        let session = h.session_id;
        let status_ok = !h.status.is_error();
        match body {
            Body::CreateResponse(c) => {
                let name = match req_ref.map(|r| &r.awaiting) {
                    Some(Awaiting::Create { name }) => name.clone(),
                    _ => None,
                };
                chain.working_on(Some(c.file_id), name.clone());
                if let Some(name) = name {
                    let evicted = self.opens.open(session, c.file_id, name.clone());
                    if evicted > 0 {
                        stats.opens_evicted += evicted as u64;
                        self.opens.share_mut().dropped(evicted as u64, 0, ctx.frame);
                    }
                    outbox.push(Out::Open(OpenRecord {
                        frame: ctx.frame,
                        ts: ctx.ts,
                        conn: ctx.conn,
                        session_id: session,
                        tree_id: h.tree_id(),
                        file_id: c.file_id,
                        file_name: name.to_string(),
                    }));
                }
            }
            Body::CloseResponse(_) => {
                // A related CLOSE's request named no FileId: the response chain knows it.
                let fid = req_ref
                    .and_then(|r| r.file_id)
                    .or(chain.file_id.filter(|_| h.flags.is_related()));
                if let Some(fid) = fid {
                    self.opens.close(session, fid);
                    outbox.push(Out::Close(CloseRecord {
                        frame: ctx.frame,
                        ts: ctx.ts,
                        conn: ctx.conn,
                        session_id: session,
                        file_id: fid,
                    }));
                }
            }
            Body::IoctlResponse(io) if io.ctl_code == FSCTL_STORAGE_QOS_CONTROL || was_sqos => {
                let file = self.response_file(h, io.file_id, chain, req_ref);
                self.sqos_response(ctx, part, Some(io), file, req.take(), outbox, stats);
            }
            Body::Error(_) | Body::NotDecoded if was_sqos && h.command == Command::IOCTL => {
                let file = req_ref
                    .map(|r| (r.file_id, r.file_name.clone()))
                    .unwrap_or_default();
                self.sqos_response(ctx, part, None, file, req.take(), outbox, stats);
            }
            Body::SessionSetupResponse(_) if h.status.0 == 0 => {
                let joined = match req_ref.map(|r| &r.awaiting) {
                    Some(Awaiting::SessionSetup { binding: true }) => ChannelJoin::Binding,
                    Some(Awaiting::SessionSetup { binding: false }) => ChannelJoin::Setup,
                    _ => ChannelJoin::Seen,
                };
                let (client, server) = ends(ctx, h);
                if let Some(rec) = self
                    .sessions
                    .join(session, ctx.conn, client, server, joined, ctx.frame, ctx.ts)
                {
                    outbox.push(Out::Channel(Box::new(rec)));
                }
            }
            Body::TreeConnectResponse(_) if status_ok => {
                if let (Some(Awaiting::TreeConnect { path: Some(p) }), Some(t)) =
                    (req_ref.map(|r| &r.awaiting), h.tree_id())
                {
                    self.sessions
                        .tree_connected(session, t, p.clone(), ctx.frame);
                }
            }
            _ if h.command == Command::TREE_DISCONNECT && status_ok => {
                if let Some(Awaiting::TreeDisconnect { tree: Some(t) }) =
                    req_ref.map(|r| &r.awaiting)
                {
                    self.sessions.tree_disconnected(session, *t);
                }
            }
            _ if h.command == Command::LOGOFF && status_ok && !h.is_interim() => {
                for rec in self.sessions.logoff(session, ctx.frame, ctx.ts) {
                    outbox.push(Out::Channel(Box::new(rec)));
                }
                if self.last_channel.is_some_and(|(_, s)| s == session) {
                    self.last_channel = None;
                }
            }
            _ => {}
        }
    }

    /// An SQOS request replayed (SMB2_FLAGS_REPLAY_OPERATION) repeats one still waiting on
    /// another channel of the session (its channel failed): that one will not be answered;
    /// release it now rather than hold everything behind it for the hold window.
    fn replayed(
        &mut self,
        ctx: &MsgCtx,
        h: &Header,
        file_id: Option<FileId>,
        req: &sqos::Request,
        outbox: &mut Outbox,
    ) {
        let session = h.session_id;
        let original = self.pending.find(|(c, _), p| {
            *c != ctx.conn
                && p.session == session
                && p.file_id == file_id
                && matches!(&p.awaiting, Awaiting::Sqos { request: Some(q), .. } if **q == *req)
        });
        let Some(key) = original else {
            return;
        };
        if let Some(p) = self.pending.remove(&key) {
            if let Awaiting::Sqos { seq, .. } = p.awaiting {
                outbox.release(seq);
            }
            outbox.push(Out::Note(CaptureNote {
                frame: ctx.frame,
                message: format!(
                    "SQOS request in frame {} (msg id {}) sent again in frame {} on connection {} (SMB2_FLAGS_REPLAY_OPERATION): its channel failed",
                    p.frame, key.1, ctx.frame, ctx.conn.0
                ),
            }));
        }
    }

    /// The file of an SQOS response: its own FileId, or the chain's, or the request's.
    fn response_file(
        &self,
        h: &Header,
        fid: FileId,
        chain: &Chain,
        req: Option<&PendingReq>,
    ) -> (Option<FileId>, Option<Arc<str>>) {
        let (id, name) = self.resolve(h, fid, chain);
        let from_req = req.map(|r| (r.file_id, r.file_name.clone()));
        match (id, from_req) {
            (Some(id), Some((_, rn))) => (Some(id), name.or(rn)),
            (Some(id), None) => (Some(id), name),
            (None, Some((rid, rn))) => (rid, name.or(rn)),
            (None, None) => (None, name),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn sqos_response(
        &mut self,
        ctx: &MsgCtx,
        part: &Part,
        io: Option<&crate::smb2::body::IoctlResponse>,
        file: (Option<FileId>, Option<Arc<str>>),
        req: Option<PendingReq>,
        outbox: &mut Outbox,
        stats: &mut Stats,
    ) {
        let h = &part.header;
        let key = (ctx.conn, h.message_id);
        let pending = req.as_ref().or_else(|| self.pending.get(&key));
        let request = match pending.map(|r| &r.awaiting) {
            Some(Awaiting::Sqos { request, .. }) => request.as_deref(),
            _ => None,
        };
        let mut rec = response_record(ctx, part, io, file.clone(), request);
        if let Some(r) = pending {
            rec.request_frame = Some(r.frame);
            rec.response_time = Some(ctx.ts.secs_since(r.ts));
        }
        stats.sqos_messages += 1;
        if rec.buffer_truncated {
            outbox.note(NoteKind::SqosIncomplete, ctx.frame, || {
                format!(
                    "SQOS response msg id {}: buffer incomplete ({} bytes in the capture)",
                    h.message_id,
                    rec.buffer.len()
                )
            });
        }
        // A final response releases its held request, completing it.
        if let Some(PendingReq {
            ts,
            awaiting: Awaiting::Sqos { seq, .. },
            ..
        }) = &req
        {
            let (frame, now) = (ctx.frame, ctx.ts);
            let (fid, name) = file;
            outbox.answer(*seq, |q| {
                q.response_frame = Some(frame);
                q.response_time = Some(now.secs_since(*ts));
                if q.file_id.is_none() {
                    q.file_id = fid;
                }
                if q.file_name.is_none() {
                    q.file_name = name.map(|n| n.to_string());
                }
            });
        }
        outbox.push(Out::Sqos(Box::new(rec)));
    }

    /// A connection closed (`how`): its outstanding requests will never be answered, and its
    /// sessions lose that channel.
    pub fn close_conn(
        &mut self,
        conn: ConnId,
        how: ChannelEnd,
        frame: u64,
        ts: crate::capture::Timestamp,
        outbox: &mut Outbox,
        stats: &mut Stats,
    ) {
        let left = self.pending.remove_conn(conn);
        let pending: Vec<(u64, u64)> = left.iter().map(|(_, r)| (r.session, r.frame)).collect();
        for rec in self.sessions.end_conn(conn, how, (frame, ts), &pending) {
            outbox.push(Out::Channel(Box::new(rec)));
        }
        if self.last_channel.is_some_and(|(c, _)| c == conn) {
            self.last_channel = None;
        }
        for ((_, id), r) in left {
            stats.unanswered_requests += 1;
            stats.unanswered_by_command.count(r.command);
            if matches!(r.awaiting, Awaiting::Sqos { .. }) {
                outbox.note(NoteKind::Unanswered, frame, || {
                    format!(
                        "SQOS request in frame {} (msg id {id}) unanswered when its connection closed",
                        r.frame
                    )
                });
            }
        }
    }

    /// End of capture: report what stayed unanswered; every channel still open ends.
    pub fn finish(
        &mut self,
        last_frame: u64,
        ts: crate::capture::Timestamp,
        outbox: &mut Outbox,
        stats: &mut Stats,
    ) {
        let left = self.pending.drain();
        let pending: Vec<(ConnId, u64, u64)> = left
            .iter()
            .map(|((c, _), r)| (*c, r.session, r.frame))
            .collect();
        for rec in self.sessions.end_all((last_frame, ts), &pending) {
            outbox.push(Out::Channel(Box::new(rec)));
        }
        self.last_channel = None;
        stats.sessions = self
            .sessions
            .listed
            .values()
            .cloned()
            .collect::<Vec<SessionSummary>>();
        stats.sessions_unlisted = self.sessions.unlisted_sessions;
        for ((_, id), r) in &left {
            stats.unanswered_by_command.count(r.command);
            if matches!(r.awaiting, Awaiting::Sqos { .. }) {
                outbox.note(NoteKind::Unanswered, r.frame, || {
                    format!(
                        "SQOS request in frame {} (msg id {id}) unanswered at the end of the capture",
                        r.frame
                    )
                });
            }
        }
        stats.unanswered_requests += left.len() as u64;
        if !left.is_empty() {
            outbox.push(Out::Info(CaptureNote {
                frame: last_frame,
                message: if left.len() == 1 {
                    "1 SMB2 request had no response by the end of the capture".to_string()
                } else {
                    format!(
                        "{} SMB2 requests had no response by the end of the capture",
                        left.len()
                    )
                },
            }));
        }
    }
}

/// The I/O record of a final response to an I/O request `r` (none for other requests).
#[inline]
fn io_record(ctx: &MsgCtx, h: &Header, body: &Body, r: &PendingReq, outbox: &mut Outbox) {
    let Awaiting::Io { kind, requested } = r.awaiting else {
        return;
    };
    let transferred = match (body, !h.status.is_error()) {
        (Body::ReadResponse(rr), true) => rr.data_length,
        (Body::WriteResponse(wr), true) => wr.count,
        _ => 0,
    };
    outbox.push_io(IoRecord {
        request_frame: r.frame,
        response_frame: ctx.frame,
        request_ts: r.ts,
        response_ts: ctx.ts,
        conn: ctx.conn,
        session_id: h.session_id,
        file_id: r.file_id.unwrap_or_default(),
        kind,
        channel_sequence: r.channel_sequence,
        requested,
        transferred,
        nt_status: h.status.0,
    });
}

/// The body of a part that did not decode (`parse_body` failed).
static NOT_DECODED: Body = Body::NotDecoded;

/// A body that failed to decode: counted; an IOCTL's noted (out of line: rare).
#[inline(never)]
fn body_not_decoded(
    ctx: &MsgCtx,
    h: &Header,
    e: &crate::smb2::Smb2Error,
    outbox: &mut Outbox,
    stats: &mut Stats,
) {
    stats.malformed_bodies += 1;
    if h.command == Command::IOCTL {
        outbox.note(NoteKind::BodyNotDecoded, ctx.frame, || {
            format!(
                "IOCTL {} msg id {}: body not decoded: {e}",
                if h.is_response() {
                    "response"
                } else {
                    "request"
                },
                h.message_id
            )
        });
    }
}

/// A request forgotten because its MessageId was used again (out of line: rare).
#[inline(never)]
fn note_replaced(outbox: &mut Outbox, frame: u64, id: u64, old: &PendingReq) {
    outbox.note(NoteKind::Replaced, frame, || {
        format!(
            "{} request in frame {} (msg id {id}) forgotten unanswered: its MessageId was used again",
            old.command, old.frame,
        )
    });
}

/// (client, server) of a message's connection: requests travel client → server.
fn ends(ctx: &MsgCtx, h: &Header) -> (std::net::SocketAddr, std::net::SocketAddr) {
    if h.is_response() {
        (ctx.dst, ctx.src)
    } else {
        (ctx.src, ctx.dst)
    }
}

impl Default for Exchange {
    fn default() -> Self {
        Self::new(&Limits::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smb2::header::{HeaderFlags, HeaderForm, HEADER_LEN};
    use crate::smb2::NtStatus;

    /// A READ request header of session 7 (flags: related or not).
    fn read_header(related: bool) -> Header {
        let flags = if related {
            HeaderFlags::RELATED_OPERATIONS
        } else {
            0
        };
        Header {
            structure_size: HEADER_LEN as u16,
            credit_charge: 1,
            status: NtStatus(0),
            command: Command::READ,
            credits: 1,
            flags: HeaderFlags(flags),
            next_command: 0,
            message_id: 1,
            form: HeaderForm::Sync {
                process_id: 0,
                tree_id: 1,
            },
            session_id: 7,
            signature: [0; 16],
        }
    }

    /// A READ or WRITE waits for its response with its file's id, not its name (its I/O
    /// record has none), unless a later part of its chain may take the name.
    #[test]
    fn an_io_request_names_its_file_only_for_its_chain() {
        let mut ex = Exchange::default();
        let fid = FileId {
            persistent: 1,
            volatile: 2,
        };
        ex.opens.open(7, fid, "\\\\fs\\vms\\disk.vhdx");
        let h = read_header(false);
        let mut chain = Chain::default();
        assert_eq!(ex.resolve_io(&h, fid, &chain), (Some(fid), None));
        assert_eq!(
            ex.resolve(&h, fid, &chain).1.as_deref(),
            Some("\\\\fs\\vms\\disk.vhdx")
        );
        chain.more = true;
        assert_eq!(
            ex.resolve_io(&h, fid, &chain).1.as_deref(),
            Some("\\\\fs\\vms\\disk.vhdx")
        );
        // A related READ takes the chain's file; an unrelated placeholder names none.
        chain.more = false;
        chain.working_on(Some(fid), None);
        assert_eq!(
            ex.resolve_io(&read_header(true), FileId::RELATED, &chain),
            (Some(fid), None)
        );
        assert_eq!(ex.resolve_io(&h, FileId::RELATED, &chain), (None, None));
    }
}
