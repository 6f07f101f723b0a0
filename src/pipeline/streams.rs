//! The SMB2 layer as a TCP stream sink: one framer per connection and direction, framer events
//! turned into statistics, notes and (through `Exchange`) records.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use foldhash::fast::FixedState;

use super::exchange::{Chain, Exchange};
use super::outbox::{NoteKind, Out, Outbox};
use super::sqos_build::MsgCtx;
use super::{count_key, CaptureNote, ChannelEnd, Limits, Stats};
use crate::budget::{Kind, MemoryUse, Share};
use crate::capture::Timestamp;
use crate::net::{CloseKind, ConnId, ConnKey, ConnSlots, Dir, NetNote, StreamSink};
use crate::smb2::crypto::{Decryptor, KeyRing, KeySource};
use crate::smb2::framer::{CompressOutcome, SealCtx, SealOutcome};
use crate::smb2::{Framer, FramerConfig, FramerEvent, Smb2Message};

/// Most connections listed one by one in per-connection statistics.
pub const MAX_LISTED_CONNECTIONS: usize = 1000;
/// The key under which connections past [`MAX_LISTED_CONNECTIONS`] are counted.
pub const OTHER_CONNECTIONS: &str = "(other connections)";
/// The key under which sessions past [`MAX_LISTED_CONNECTIONS`] are counted.
pub const OTHER_SESSIONS: &str = "(other sessions)";

/// The SMB2 framers of every connection and direction, within one share of framer bytes. The
/// layer owns one; with `PipelineConfig::threads`, each worker owns one for its connections.
pub(super) struct Framers {
    cfg: FramerConfig,
    /// The framers, in slots reused once their connection ends.
    slots: Vec<Option<Framer>>,
    free: Vec<usize>,
    /// Slot by (connection, direction): hashed with foldhash, not SipHash (the keys are our own
    /// connection numbers, nothing an attacker chooses to collide).
    index: HashMap<(ConnId, Dir), usize, FixedState>,
    /// The last connection looked up in each direction and its slot: bulk transfers deliver
    /// chunk after chunk on one connection, its two directions in turn, which then costs no
    /// hashing.
    last: [Option<(ConnId, usize)>; 2],
    /// Bytes held by all framers (`Framer::buffered`), within `Limits::max_framer_bytes`.
    bytes: Share,
}

impl Framers {
    pub(super) fn new(cfg: FramerConfig, max_bytes: usize) -> Self {
        Framers {
            cfg,
            slots: Vec::new(),
            free: Vec::new(),
            index: HashMap::with_hasher(FixedState::default()),
            last: [None; 2],
            bytes: Share::new(Kind::Framers, max_bytes),
        }
    }

    pub(super) fn usage(&self) -> MemoryUse {
        self.bytes.usage()
    }

    /// Bytes held now and the peak since the last call (see `Share::take_peak`).
    pub(super) fn take_peak(&mut self) -> (usize, usize) {
        (self.bytes.used(), self.bytes.take_peak())
    }

    /// The slot of (conn, dir)'s framer, if it has one.
    fn slot(&mut self, conn: ConnId, dir: Dir) -> Option<usize> {
        let last = &mut self.last[dir.index()];
        match *last {
            Some((c, slot)) if c == conn => Some(slot),
            _ => {
                let slot = *self.index.get(&(conn, dir))?;
                *last = Some((conn, slot));
                Some(slot)
            }
        }
    }

    fn get_mut(&mut self, conn: ConnId, dir: Dir) -> Option<&mut Framer> {
        let slot = self.slot(conn, dir)?;
        self.slots.get_mut(slot)?.as_mut()
    }

    fn in_message(&self, conn: ConnId, dir: Dir) -> bool {
        self.index
            .get(&(conn, dir))
            .and_then(|&s| self.slots.get(s)?.as_ref())
            .is_some_and(Framer::in_message)
    }

    /// The framer of (conn, dir), made on first use.
    fn framer(&mut self, conn: ConnId, dir: Dir) -> &mut Framer {
        let slot = match self.slot(conn, dir) {
            Some(slot) => slot,
            None => {
                let framer = Some(Framer::new(self.cfg));
                let slot = match self.free.pop() {
                    Some(slot) => {
                        self.slots[slot] = framer;
                        slot
                    }
                    None => {
                        self.slots.push(framer);
                        self.slots.len() - 1
                    }
                };
                self.index.insert((conn, dir), slot);
                self.last[dir.index()] = Some((conn, slot));
                slot
            }
        };
        self.slots[slot].get_or_insert_with(|| Framer::new(self.cfg))
    }

    /// Counts `len` in-order bytes of (conn, dir) off when they lie inside data its framer
    /// skips anyway (the middle of a READ or WRITE payload: most of a bulk transfer): they
    /// change no held bytes and complete nothing, so there is nothing else to do. False: they
    /// need [`Framers::push`].
    pub(super) fn skip(&mut self, conn: ConnId, dir: Dir, len: usize) -> bool {
        // (Over the bound, `with` has framers give back: not skipped, whatever the bytes.)
        !self.bytes.over() && self.get_mut(conn, dir).is_some_and(|f| f.skip_within(len))
    }

    /// The most bytes [`Framers::skip`] would count off for (conn, dir) now.
    pub(super) fn skip_room(&mut self, conn: ConnId, dir: Dir) -> u64 {
        if self.bytes.over() {
            return 0;
        }
        self.get_mut(conn, dir).map_or(0, |f| f.skip_room())
    }

    /// Feed in-order stream bytes to the framer of (conn, dir) (see [`Framers::with`]).
    pub(super) fn push(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        data: &[u8],
        crypto: &mut Decryptor,
        events: &mut Vec<FramerEvent>,
    ) -> u64 {
        self.with(conn, dir, frame, crypto, events, |f, ctx, ev| {
            f.push_sealed(data, ctx, ev)
        })
    }

    /// `missing` bytes of (conn, dir) will never arrive (see [`Framers::with`]).
    pub(super) fn gap(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        missing: u64,
        crypto: &mut Decryptor,
        events: &mut Vec<FramerEvent>,
    ) -> u64 {
        self.with(conn, dir, frame, crypto, events, |f, ctx, ev| {
            f.gap_sealed(missing, ctx, ev)
        })
    }

    /// Run `f` on the framer of (conn, dir), keeping the total of held bytes up to date and
    /// within its bound. Returns the bytes of messages in progress given back to stay within.
    pub(super) fn with(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        crypto: &mut Decryptor,
        events: &mut Vec<FramerEvent>,
        f: impl FnOnce(&mut Framer, &mut SealCtx<'_>, &mut Vec<FramerEvent>),
    ) -> u64 {
        let framer = self.framer(conn, dir);
        let before = framer.buffered();
        crypto.at_frame(frame);
        let mut ctx = SealCtx {
            crypto: Some(crypto),
            conn: conn.0,
            to_server: dir == Dir::ToServer,
        };
        f(framer, &mut ctx, events);
        let after = framer.buffered();
        self.bytes.release(0, before);
        self.bytes.charge(0, after);
        if !self.bytes.over() {
            return 0;
        }
        // The fullest framers give back until the total is under seven eighths of the bound,
        // so this scan of every framer comes at most once per eighth of the bound newly held
        // (linear time whatever the capture).
        let slots = &self.slots;
        let mut fullest: Vec<(usize, (ConnId, Dir), usize)> = self
            .index
            .iter()
            .filter_map(|(k, &s)| Some((slots.get(s)?.as_ref()?.buffered(), *k, s)))
            .filter(|&(b, _, _)| b > 0)
            .collect();
        fullest
            .sort_unstable_by_key(|&(b, (c, d), _)| (std::cmp::Reverse(b), c, d == Dir::ToClient));
        let target = self.bytes.limit() / 8 * 7;
        let mut shed = 0;
        for (_, _, slot) in fullest {
            if self.bytes.used() <= target {
                break;
            }
            if let Some(framer) = self.slots.get_mut(slot).and_then(Option::as_mut) {
                let freed = framer.shed();
                if freed > 0 {
                    self.bytes.release(0, freed);
                    self.bytes.dropped(1, freed as u64, frame);
                    shed += freed as u64;
                }
            }
        }
        shed
    }

    /// Flush and forget the framer of (conn, dir) into `events`; false when it had none.
    pub(super) fn finish(
        &mut self,
        conn: ConnId,
        dir: Dir,
        crypto: &mut Decryptor,
        events: &mut Vec<FramerEvent>,
    ) -> bool {
        let Some(slot) = self.index.remove(&(conn, dir)) else {
            return false;
        };
        if self.last[dir.index()].is_some_and(|(_, s)| s == slot) {
            self.last[dir.index()] = None;
        }
        let Some(mut f) = self.slots.get_mut(slot).and_then(Option::take) else {
            return false;
        };
        self.free.push(slot);
        self.bytes.release(0, f.buffered());
        let mut ctx = SealCtx {
            crypto: Some(crypto),
            conn: conn.0,
            to_server: dir == Dir::ToServer,
        };
        f.finish_sealed(&mut ctx, events);
        true
    }

    /// The framers there are, by connection, to-server first: the order the end flushes them.
    pub(super) fn keys(&self) -> Vec<(ConnId, Dir)> {
        let mut keys: Vec<(ConnId, Dir)> = self.index.keys().copied().collect();
        keys.sort_by_key(|(c, d)| (c.0, *d == Dir::ToClient));
        keys
    }
}

/// "connection N (a ⇄ b)", as the statistics and notes name a connection.
fn conn_label(conns: &BTreeMap<ConnId, ConnKey>, conn: ConnId) -> String {
    match conns.get(&conn) {
        Some(k) => format!("connection {} ({k})", conn.0),
        None => format!("connection {}", conn.0),
    }
}

pub struct Smb2Layer {
    framers: Framers,
    /// Connections whose framers may hold state, oldest (lowest id) first. Reassembly tells
    /// when it forgets one; `Limits::max_connections` bounds them when fed directly.
    conns: BTreeMap<ConnId, ConnKey>,
    /// The recent ones of `conns`, found by index: every message looks up its endpoints.
    recent: ConnSlots<ConnKey>,
    max_connections: usize,
    conns_dropped: Share,
    events: Vec<FramerEvent>,
    /// Keys and per-session state for encrypted messages.
    crypto: Decryptor,
    /// Sessions already given a note about why their messages were not decrypted (bounded).
    sessions_noted: HashSet<u64>,
    /// The label of each connection listed in `Stats::encrypted_by_connection`.
    encrypted_labels: BTreeMap<ConnId, String>,
    pub exchange: Exchange,
    pub outbox: Outbox,
    pub stats: Stats,
    pub last_frame: u64,
    /// The frames messages begin in, followed for `PipelineConfig::keep_frames` only (see
    /// [`Smb2Layer::track_message_starts`]); `None`: not followed.
    starts: Option<MessageStarts>,
    /// The frame being pushed when the capture's snaplen cut it: (number, captured, on the wire).
    pub cut_frame: Option<(u64, usize, u32)>,
}

/// Where messages began (`Smb2Layer::starts`): one entry a stream with a message in
/// progress, so no more than the connections kept.
#[derive(Debug, Default)]
struct MessageStarts {
    /// The frame the message in progress on (conn, dir) began in.
    in_progress: HashMap<(ConnId, Dir), u64>,
    /// While one push is handled: the frame its next completed message began in.
    next: Option<u64>,
}

impl Smb2Layer {
    pub fn new(limits: Limits, keys: Arc<KeyRing>) -> Self {
        Smb2Layer {
            framers: Framers::new(limits.framer, limits.max_framer_bytes),
            conns: BTreeMap::new(),
            recent: ConnSlots::default(),
            max_connections: limits.max_connections.max(1),
            // Counts only what this layer drops itself (its entries are reassembly's).
            conns_dropped: Share::new(Kind::Connections, 0),
            events: Vec::new(),
            crypto: Decryptor::with_share(
                keys,
                Share::new(Kind::Sessions, limits.max_session_bytes),
            ),
            sessions_noted: HashSet::new(),
            encrypted_labels: BTreeMap::new(),
            exchange: Exchange::new(&limits),
            outbox: Outbox::new(&limits),
            stats: Stats::default(),
            last_frame: 0,
            starts: None,
            cut_frame: None,
        }
    }

    /// Follow the frame each message begins in (`SqosRecord::first_frame`, for `dissect
    /// -x`/`-w`). Untracked, nothing is looked up for it per message.
    pub fn track_message_starts(&mut self) {
        self.starts = Some(MessageStarts::default());
    }

    /// Before a push on (conn, dir) in `frame`: where its first completed message began.
    fn start_push(&mut self, conn: ConnId, dir: Dir, frame: u64) {
        if let Some(s) = &mut self.starts {
            s.next = Some(s.in_progress.get(&(conn, dir)).copied().unwrap_or(frame));
        }
    }

    /// After the push: remember where the message still in progress began.
    fn end_push(&mut self, conn: ConnId, dir: Dir) {
        let Some(s) = &mut self.starts else {
            return;
        };
        if let Some(start) = s.next.take() {
            if self.framers.in_message(conn, dir) {
                s.in_progress.insert((conn, dir), start);
            } else {
                s.in_progress.remove(&(conn, dir));
            }
        }
    }

    /// Bytes held by all framers (for tests of the memory bound).
    pub fn framer_bytes(&self) -> usize {
        self.framers.bytes.used()
    }

    /// This layer's memory shares: framers, opens, pending requests, queued records.
    pub fn memory(&self) -> Vec<MemoryUse> {
        let mut m = vec![self.framers.usage(), self.crypto.memory()];
        m.extend(self.session_memory());
        m
    }

    /// The shares of the session-wide stage (all but the framers' and decryption's, which
    /// `--threads` workers hold for their connections).
    pub(super) fn session_memory(&self) -> Vec<MemoryUse> {
        let mut m = vec![self.outbox.memory()];
        m.extend(self.exchange.memory());
        if self.conns_dropped.dropped_count() > 0 {
            m.push(self.conns_dropped.usage());
        }
        m
    }

    /// A note of `kind`, its message built only when it is given (see `NoteKind`).
    fn note(&mut self, kind: NoteKind, frame: u64, message: impl FnOnce(&Self) -> String) {
        if self.outbox.count_note(kind) {
            let message = message(self);
            self.outbox.push(Out::Note(CaptureNote { frame, message }));
        }
    }

    fn endpoints(&self, conn: ConnId, dir: Dir) -> (SocketAddr, SocketAddr) {
        match self.recent.get(conn).or_else(|| self.conns.get(&conn)) {
            Some(k) => k.endpoints(dir),
            None => {
                let unknown = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
                (unknown, unknown)
            }
        }
    }

    fn conn_label(&self, conn: ConnId) -> String {
        conn_label(&self.conns, conn)
    }

    /// "connection N, a → b": the direction the bytes travel.
    fn dir_label(&self, conn: ConnId, dir: Dir) -> String {
        match self.conns.get(&conn) {
            Some(k) => {
                let (src, dst) = k.endpoints(dir);
                format!("connection {}, {src} → {dst}", conn.0)
            }
            None => format!("connection {}", conn.0),
        }
    }

    fn handle_events(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp) {
        let events = std::mem::take(&mut self.events);
        for ev in &events {
            self.handle_event(conn, dir, frame, ts, ev);
        }
        self.events = events;
        self.events.clear();
    }

    fn handle_event(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        ts: Timestamp,
        ev: &FramerEvent,
    ) {
        match ev {
            FramerEvent::Message(m) => self.on_message(conn, dir, frame, ts, m),
            FramerEvent::Encrypted {
                len,
                session_id,
                outcome,
            } => self.on_encrypted(conn, frame, *len, *session_id, outcome),
            FramerEvent::Compressed { len, outcome } => {
                self.on_compressed(conn, dir, frame, *len, outcome)
            }
            FramerEvent::Smb1 { .. } => self.stats.smb1_messages += 1,
            FramerEvent::SessionControl { .. } => {}
            FramerEvent::Resynced { skipped } => {
                self.stats.resyncs += 1;
                self.stats.resync_skipped_bytes += skipped;
                self.note(NoteKind::Resync, frame, |s| {
                    format!(
                        "{}: resynchronised on an SMB2 header after skipping {skipped} bytes",
                        s.dir_label(conn, dir)
                    )
                });
            }
            FramerEvent::Unsynced { skipped } => {
                self.stats.resync_skipped_bytes += skipped;
                self.note(NoteKind::Unframed, frame, |s| {
                    format!(
                        "{}: {skipped} bytes passed over without an SMB2 message start (e.g. a NetBIOS length over 8 MiB)",
                        s.dir_label(conn, dir)
                    )
                });
            }
            FramerEvent::Gap { bytes, in_step } => {
                self.stats.gap_bytes += bytes;
                let what = if *in_step {
                    "inside data that is skipped anyway; framing kept"
                } else {
                    "what they held is lost; framing resumes at the next message start"
                };
                let cut = self.cut_frame.filter(|c| c.0 == frame);
                self.note(NoteKind::Gap, frame, |s| {
                    let label = s.dir_label(conn, dir);
                    match cut {
                        Some((_, captured, wire)) => format!(
                            "{label}: {bytes} bytes not in the capture: its snaplen cut frame {frame} to {captured} of {wire} bytes ({what})"
                        ),
                        None => format!("{label}: {bytes} bytes missing ({what})"),
                    }
                });
            }
        }
    }

    fn on_compressed(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        len: u32,
        outcome: &CompressOutcome,
    ) {
        self.stats.compressed_messages += 1;
        let why = match outcome {
            CompressOutcome::Decompressed {
                algorithms,
                chained,
                ..
            } => {
                self.stats.decompressed_messages += 1;
                for a in algorithms {
                    *self
                        .stats
                        .compressed_by_algorithm
                        .entry(a.to_string())
                        .or_insert(0) += 1;
                }
                if *chained {
                    self.stats.compressed_chained += 1;
                }
                return;
            }
            CompressOutcome::Failed(e) => e.to_string(),
            CompressOutcome::Incomplete => {
                "incomplete (lost bytes or the buffering bound)".to_string()
            }
        };
        self.stats.undecompressed_messages += 1;
        self.note(NoteKind::Compressed, frame, |s| {
            format!(
                "{}: compressed message of {len} bytes not decompressed: {why}",
                s.dir_label(conn, dir)
            )
        });
    }

    fn on_encrypted(
        &mut self,
        conn: ConnId,
        frame: u64,
        len: u32,
        session_id: Option<u64>,
        outcome: &SealOutcome,
    ) {
        self.stats.encrypted_messages += 1;
        self.stats.key_file_sessions = self.crypto.key_sessions() as u64;
        // Bounded: past MAX_LISTED_CONNECTIONS entries, the rest are counted together. A
        // connection's label is made once, when its entry is (`encrypted_labels` holds exactly
        // the connections listed), not for every message.
        let map = &mut self.stats.encrypted_by_connection;
        let label = match self.encrypted_labels.get(&conn) {
            Some(label) => label.as_str(),
            None if map.len() >= MAX_LISTED_CONNECTIONS => OTHER_CONNECTIONS,
            None => {
                let label = conn_label(&self.conns, conn);
                self.encrypted_labels.entry(conn).or_insert(label).as_str()
            }
        };
        count_key(map, label);
        if let SealOutcome::Decrypted { authenticated, .. } = outcome {
            self.stats.decrypted_messages += 1;
            if !authenticated {
                self.stats.decrypted_headers_only += 1;
            }
            return;
        }
        let session = match session_id {
            Some(s) => format!("0x{s:016x}"),
            None => "(unknown)".to_string(),
        };
        let map = &mut self.stats.undecrypted_by_session;
        let key = if !map.contains_key(&session) && map.len() >= MAX_LISTED_CONNECTIONS {
            OTHER_SESSIONS.to_string()
        } else {
            session.clone()
        };
        *map.entry(key.clone()).or_insert(0) += 1;
        let short = match outcome {
            SealOutcome::Decrypted { .. } | SealOutcome::NoKeys => "no key",
            SealOutcome::NeedDirectionKeys => "SMB 3.1.1 setup not captured: direction keys needed",
            SealOutcome::AuthFailed { .. } => "authentication failed",
            SealOutcome::Incomplete => "incomplete",
            SealOutcome::Malformed(_) => "malformed",
        };
        self.stats
            .undecrypted_why
            .entry(key)
            .or_insert_with(|| short.to_string());
        let why = match outcome {
            SealOutcome::Decrypted { .. } | SealOutcome::NoKeys => None,
            SealOutcome::NeedDirectionKeys => Some(format!(
                "session {session}: not decrypted: an SMB 3.1.1 session whose SESSION_SETUP is \
                 not in the capture, and the key file has only its session key; its keys derive \
                 from that setup, so the server-to-client and client-to-server keys are needed"
            )),
            SealOutcome::AuthFailed { tried } => {
                self.stats.auth_failed_messages += 1;
                let from_file = tried.contains(&KeySource::File);
                let guess_30 = tried.contains(&KeySource::Smb30Guess);
                let as_30 = guess_30 || tried.contains(&KeySource::Smb30);
                let as_311 = tried.contains(&KeySource::Smb311);
                let mut what = Vec::new();
                if from_file {
                    what.push("the direction keys of the key file");
                }
                if as_311 {
                    what.push("the keys derived from its session key (SMB 3.1.1)");
                }
                if as_30 {
                    what.push("the keys derived from its session key as SMB 3.0/3.0.2");
                }
                let hint = if guess_30 && !from_file {
                    "; if it is an SMB 3.1.1 session whose setup is not in the capture, its \
                     server-to-client and client-to-server keys are needed"
                } else {
                    " (wrong key for this session?)"
                };
                Some(format!(
                    "session {session}: authentication failed with {}{hint}",
                    what.join(" and ")
                ))
            }
            SealOutcome::Incomplete => {
                self.note(NoteKind::Sealed, frame, |_| {
                    format!(
                        "encrypted message of {len} bytes in session {session} incomplete \
                         (lost bytes or buffering bound): not decrypted"
                    )
                });
                None
            }
            SealOutcome::Malformed(e) => {
                self.note(NoteKind::Sealed, frame, |_| {
                    format!("encrypted message in session {session}: {e}")
                });
                None
            }
        };
        if let (Some(why), Some(sid)) = (why, session_id) {
            if self.sessions_noted.len() < MAX_LISTED_CONNECTIONS && self.sessions_noted.insert(sid)
            {
                self.note(NoteKind::Sealed, frame, |_| why);
            }
        }
    }

    fn on_message(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, m: &Smb2Message) {
        let (src, dst) = self.endpoints(conn, dir);
        // Later messages of the same push began in this frame.
        let first_frame = self.starts.as_mut().and_then(|s| s.next.replace(frame));
        let ctx = MsgCtx {
            conn,
            frame,
            first_frame,
            ts,
            src,
            dst,
        };
        let mut chain = Chain::default();
        for part in &m.parts {
            self.stats.smb2_messages += 1;
            self.stats.by_command.count(part.header.command);
            self.exchange
                .on_part(&ctx, part, &mut chain, &mut self.outbox, &mut self.stats);
        }
        for (cmd, _) in &m.overflow {
            self.stats.smb2_messages += 1;
            self.stats.by_command.count(*cmd);
        }
        if !m.overflow.is_empty() {
            self.note(NoteKind::Malformed, frame, |_| {
                format!(
                    "compound of {} parts: parts after the first {} counted, not decoded",
                    m.parts.len() + m.overflow.len(),
                    m.parts.len()
                )
            });
        }
        if let Some(e) = &m.malformed {
            self.stats.malformed_messages += 1;
            self.note(NoteKind::Malformed, frame, |_| {
                format!("malformed SMB2 message: {e}")
            });
        }
    }

    /// [`StreamSink::on_data`] of bytes the framer cannot count off unseen (or whose count-off
    /// is pushing them, which gives the same): the bulk lane, which knows they do not fit
    /// what the framer would count off, hands them here without asking again.
    pub(super) fn push_data(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        ts: Timestamp,
        data: &[u8],
    ) {
        self.last_frame = self.last_frame.max(frame);
        self.start_push(conn, dir, frame);
        self.stats.framer_bytes_shed +=
            self.framers
                .push(conn, dir, frame, data, &mut self.crypto, &mut self.events);
        self.handle_events(conn, dir, frame, ts);
        self.end_push(conn, dir);
    }

    /// Flush both framers of a connection (it ended, `how`) and forget it.
    fn end_conn(&mut self, conn: ConnId, how: ChannelEnd, frame: u64, ts: Timestamp) {
        for dir in [Dir::ToServer, Dir::ToClient] {
            self.flush_framer(conn, dir, frame, ts, None);
        }
        self.forget_conn(conn, how, frame, ts);
    }

    /// The connection's framers are flushed: forget its state.
    fn forget_conn(&mut self, conn: ConnId, how: ChannelEnd, frame: u64, ts: Timestamp) {
        self.crypto.forget_conn(conn.0);
        self.exchange
            .close_conn(conn, how, frame, ts, &mut self.outbox, &mut self.stats);
        self.outbox.release_conn(conn);
        self.conns.remove(&conn);
        self.recent.remove(conn);
    }

    /// Flush the framer of (conn, dir) and handle what it gives: its own (`given` None), or the
    /// events a `--threads` worker's framer gave.
    pub(super) fn flush_framer(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        ts: Timestamp,
        given: Option<Vec<FramerEvent>>,
    ) {
        self.start_push(conn, dir, frame);
        if let Some(s) = &mut self.starts {
            s.in_progress.remove(&(conn, dir));
        }
        let flushed = match given {
            Some(events) => {
                self.events = events;
                true
            }
            None => self
                .framers
                .finish(conn, dir, &mut self.crypto, &mut self.events),
        };
        if flushed {
            self.handle_events(conn, dir, frame, ts);
        }
        if let Some(s) = &mut self.starts {
            s.next = None;
        }
    }

    /// End of capture: flush every framer.
    pub fn finish(&mut self, ts: Timestamp) {
        for (conn, dir) in self.framers.keys() {
            self.flush_framer(conn, dir, self.last_frame, ts, None);
        }
        self.finish_exchange(ts);
    }

    /// End of capture, once the framers are flushed: what is still outstanding.
    pub(super) fn finish_exchange(&mut self, ts: Timestamp) {
        self.exchange
            .finish(self.last_frame, ts, &mut self.outbox, &mut self.stats);
    }

    /// Apply what a `--threads` worker's connection stage did in one frame (`conn` already the
    /// run's connection number): the same steps as the [`StreamSink`] calls below.
    pub(super) fn apply(&mut self, conn: ConnId, op: WorkerOp, frame: u64, ts: Timestamp) {
        match op {
            WorkerOp::Connection(key) => self.on_connection(conn, &key, frame, ts),
            WorkerOp::Events { dir, gap, events } => {
                self.last_frame = self.last_frame.max(frame);
                if gap {
                    self.stats.gaps += 1;
                }
                self.start_push(conn, dir, frame);
                self.events = events;
                self.handle_events(conn, dir, frame, ts);
                self.end_push(conn, dir);
            }
            WorkerOp::Close { how, events } => {
                let [to_server, to_client] = events;
                self.flush_framer(conn, Dir::ToServer, frame, ts, Some(to_server));
                self.flush_framer(conn, Dir::ToClient, frame, ts, Some(to_client));
                self.forget_conn(conn, channel_end(how), frame, ts);
            }
            WorkerOp::Note(note) => self.on_note(conn, frame, note),
            WorkerOp::Forget => {}
        }
    }
}

/// What a `--threads` worker's connection stage hands the session-wide stage, per connection.
#[derive(Debug)]
pub(super) enum WorkerOp {
    Connection(ConnKey),
    /// A push (or a gap, `gap`) on (conn, `dir`) completed these framer events.
    Events {
        dir: Dir,
        gap: bool,
        events: Vec<FramerEvent>,
    },
    /// The connection ended; its framers (to server, to client) flushed these.
    Close {
        how: CloseKind,
        events: [Vec<FramerEvent>; 2],
    },
    Note(NetNote),
    /// The connection left the worker's table: its number may not be looked up again (the
    /// workers' numbers are mapped to the run's by `shard`, which drops this op).
    Forget,
}

fn channel_end(how: CloseKind) -> ChannelEnd {
    match how {
        CloseKind::Fin => ChannelEnd::Fin,
        CloseKind::Rst => ChannelEnd::Rst,
        // Forgotten by the reassembler to make room: the channel's state is dropped.
        CloseKind::Forgotten => ChannelEnd::Dropped,
    }
}

impl StreamSink for Smb2Layer {
    fn on_connection(&mut self, conn: ConnId, key: &ConnKey, frame: u64, ts: Timestamp) {
        self.stats.connections += 1;
        self.conns.insert(conn, *key);
        self.recent.set(conn, *key);
        if self.conns.len() > self.max_connections {
            if let Some((&oldest, _)) = self.conns.iter().next() {
                self.conns_dropped.dropped(1, 0, frame);
                self.end_conn(oldest, ChannelEnd::Dropped, frame, ts);
            }
        }
    }

    fn skip_data(&mut self, conn: ConnId, dir: Dir, frame: u64, len: usize) -> bool {
        let skipped = self.framers.skip(conn, dir, len);
        if skipped {
            // As `on_data` does with the bytes.
            self.last_frame = self.last_frame.max(frame);
        }
        skipped
    }

    fn skip_room(&mut self, conn: ConnId, dir: Dir) -> u64 {
        self.framers.skip_room(conn, dir)
    }

    fn on_data(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, data: &[u8]) {
        if self.framers.skip(conn, dir, data.len()) {
            // Inside a message, which began where it began: nothing completes or starts.
            self.last_frame = self.last_frame.max(frame);
            return;
        }
        self.push_data(conn, dir, frame, ts, data);
    }

    fn on_gap(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, missing: u64) {
        self.last_frame = self.last_frame.max(frame);
        self.stats.gaps += 1;
        self.start_push(conn, dir, frame);
        self.stats.framer_bytes_shed += self.framers.gap(
            conn,
            dir,
            frame,
            missing,
            &mut self.crypto,
            &mut self.events,
        );
        self.handle_events(conn, dir, frame, ts);
        self.end_push(conn, dir);
    }

    fn on_close(&mut self, conn: ConnId, how: CloseKind, frame: u64, ts: Timestamp) {
        self.end_conn(conn, channel_end(how), frame, ts);
    }

    fn on_note(&mut self, conn: ConnId, frame: u64, note: NetNote) {
        match note {
            NetNote::MidStream => self.note(NoteKind::MidStream, frame, |s| {
                format!(
                    "{}: picked up mid-stream (start not captured)",
                    s.conn_label(conn)
                )
            }),
        }
    }
}
