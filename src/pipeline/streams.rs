//! The SMB2 layer as a TCP stream sink: one framer per connection and direction, framer events
//! turned into statistics, notes and (through `Exchange`) records.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use super::exchange::{Chain, Exchange};
use super::outbox::{Out, Outbox};
use super::sqos_build::MsgCtx;
use super::{CaptureNote, Stats};
use crate::capture::Timestamp;
use crate::net::{CloseKind, ConnId, ConnKey, Dir, NetNote, StreamSink};
use crate::smb2::crypto::{Decryptor, KeyRing, KeySource};
use crate::smb2::framer::{SealCtx, SealOutcome};
use crate::smb2::{Framer, FramerConfig, FramerEvent, Smb2Message};

/// Most connections with SMB2 state at once. TCP reassembly forgets idle connections without
/// telling (its own bound); this bound makes sure their framers are dropped too.
pub const MAX_CONNECTIONS: usize = 200_000;

/// Most connections listed one by one in per-connection statistics.
pub const MAX_LISTED_CONNECTIONS: usize = 1000;
/// The key under which connections past [`MAX_LISTED_CONNECTIONS`] are counted.
pub const OTHER_CONNECTIONS: &str = "(other connections)";
/// The key under which sessions past [`MAX_LISTED_CONNECTIONS`] are counted.
pub const OTHER_SESSIONS: &str = "(other sessions)";

pub struct Smb2Layer {
    framer_cfg: FramerConfig,
    framers: HashMap<(ConnId, Dir), Framer>,
    /// Sum of `Framer::buffered` over `framers`.
    framer_total: usize,
    /// Most bytes held by all framers together (see `Limits::max_framer_bytes`).
    max_framer_bytes: usize,
    /// Connections whose framers may hold state, oldest (lowest id) first.
    conns: BTreeMap<ConnId, ConnKey>,
    events: Vec<FramerEvent>,
    /// Keys and per-session state for encrypted messages.
    crypto: Decryptor,
    /// Sessions already given a note about why their messages were not decrypted (bounded).
    sessions_noted: HashSet<u64>,
    pub exchange: Exchange,
    pub outbox: Outbox,
    pub stats: Stats,
    pub last_frame: u64,
}

impl Smb2Layer {
    pub fn new(
        framer_cfg: FramerConfig,
        max_framer_bytes: usize,
        outbox: Outbox,
        keys: Arc<KeyRing>,
    ) -> Self {
        Smb2Layer {
            framer_cfg,
            framers: HashMap::new(),
            framer_total: 0,
            max_framer_bytes,
            conns: BTreeMap::new(),
            events: Vec::new(),
            crypto: Decryptor::new(keys),
            sessions_noted: HashSet::new(),
            exchange: Exchange::new(),
            outbox,
            stats: Stats::default(),
            last_frame: 0,
        }
    }

    /// Bytes held by all framers (for tests of the memory bound).
    pub fn framer_bytes(&self) -> usize {
        self.framer_total
    }

    /// Run `f` on the framer of (conn, dir), keeping the total of held bytes up to date and
    /// within `max_framer_bytes`.
    fn with_framer(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        f: impl FnOnce(&mut Framer, &mut SealCtx<'_>, &mut Vec<FramerEvent>),
    ) {
        let cfg = self.framer_cfg;
        let framer = self
            .framers
            .entry((conn, dir))
            .or_insert_with(|| Framer::new(cfg));
        let before = framer.buffered();
        let mut ctx = SealCtx {
            crypto: Some(&mut self.crypto),
            conn: conn.0,
            to_server: dir == Dir::ToServer,
        };
        f(framer, &mut ctx, &mut self.events);
        let after = framer.buffered();
        self.framer_total = (self.framer_total + after).saturating_sub(before);
        while self.framer_total > self.max_framer_bytes {
            let Some((&key, biggest)) = self.framers.iter_mut().max_by_key(|(_, f)| f.buffered())
            else {
                break;
            };
            let freed = biggest.shed();
            if freed == 0 {
                break;
            }
            self.framer_total = self.framer_total.saturating_sub(freed);
            self.stats.framer_bytes_shed += freed as u64;
            let label = self.dir_label(key.0, key.1);
            self.note(
                frame,
                format!("{label}: SMB2 buffering bound hit, {freed} bytes of a message in progress dropped"),
            );
        }
    }

    fn note(&mut self, frame: u64, message: String) {
        self.outbox.push(Out::Note(CaptureNote { frame, message }));
    }

    fn endpoints(&self, conn: ConnId, dir: Dir) -> (SocketAddr, SocketAddr) {
        match self.conns.get(&conn) {
            Some(k) => k.endpoints(dir),
            None => {
                let unknown = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
                (unknown, unknown)
            }
        }
    }

    fn conn_label(&self, conn: ConnId) -> String {
        match self.conns.get(&conn) {
            Some(k) => format!("connection {} ({k})", conn.0),
            None => format!("connection {}", conn.0),
        }
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
            FramerEvent::Compressed { .. } => self.stats.compressed_messages += 1,
            FramerEvent::Smb1 { .. } => self.stats.smb1_messages += 1,
            FramerEvent::SessionControl { .. } => {}
            FramerEvent::Resynced { skipped } => {
                self.stats.resyncs += 1;
                self.stats.resync_skipped_bytes += skipped;
                let label = self.dir_label(conn, dir);
                self.note(
                    frame,
                    format!(
                        "{label}: resynchronised on an SMB2 header after skipping {skipped} bytes"
                    ),
                );
            }
            FramerEvent::Gap { bytes, in_step } => {
                self.stats.gap_bytes += bytes;
                let label = self.dir_label(conn, dir);
                let what = if *in_step {
                    "inside data that is skipped anyway; framing kept"
                } else {
                    "what they held is lost; framing resumes at the next message start"
                };
                self.note(frame, format!("{label}: {bytes} bytes missing ({what})"));
            }
        }
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
        let mut label = self.conn_label(conn);
        let map = &mut self.stats.encrypted_by_connection;
        // Bounded: past MAX_LISTED_CONNECTIONS entries, the rest are counted together.
        if !map.contains_key(&label) && map.len() >= MAX_LISTED_CONNECTIONS {
            label = OTHER_CONNECTIONS.to_string();
        }
        *map.entry(label).or_insert(0) += 1;
        let session = match session_id {
            Some(s) => format!("0x{s:016x}"),
            None => "(unknown)".to_string(),
        };
        if let SealOutcome::Decrypted { authenticated, .. } = outcome {
            self.stats.decrypted_messages += 1;
            if !authenticated {
                self.stats.decrypted_headers_only += 1;
            }
            return;
        }
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
                self.note(
                    frame,
                    format!(
                        "encrypted message of {len} bytes in session {session} incomplete \
                         (lost bytes or buffering bound): not decrypted"
                    ),
                );
                None
            }
            SealOutcome::Malformed(e) => {
                self.note(
                    frame,
                    format!("encrypted message in session {session}: {e}"),
                );
                None
            }
        };
        if let (Some(why), Some(sid)) = (why, session_id) {
            if self.sessions_noted.len() < MAX_LISTED_CONNECTIONS && self.sessions_noted.insert(sid)
            {
                self.note(frame, why);
            }
        }
    }

    fn on_message(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, m: &Smb2Message) {
        let (src, dst) = self.endpoints(conn, dir);
        let ctx = MsgCtx {
            conn,
            frame,
            ts,
            src,
            dst,
        };
        let mut chain = Chain::default();
        for part in &m.parts {
            self.stats.smb2_messages += 1;
            *self
                .stats
                .by_command
                .entry(part.header.command.to_string())
                .or_insert(0) += 1;
            self.exchange
                .on_part(&ctx, part, &mut chain, &mut self.outbox, &mut self.stats);
        }
        for (cmd, _) in &m.overflow {
            self.stats.smb2_messages += 1;
            *self.stats.by_command.entry(cmd.to_string()).or_insert(0) += 1;
        }
        if !m.overflow.is_empty() {
            self.note(
                frame,
                format!(
                    "compound of {} parts: parts after the first {} counted, not decoded",
                    m.parts.len() + m.overflow.len(),
                    m.parts.len()
                ),
            );
        }
        if let Some(e) = &m.malformed {
            self.stats.malformed_messages += 1;
            self.note(frame, format!("malformed SMB2 message: {e}"));
        }
    }

    /// Flush both framers of a connection (it ended) and forget it.
    fn end_conn(&mut self, conn: ConnId, frame: u64, ts: Timestamp) {
        for dir in [Dir::ToServer, Dir::ToClient] {
            if let Some(mut f) = self.framers.remove(&(conn, dir)) {
                self.framer_total = self.framer_total.saturating_sub(f.buffered());
                let mut ctx = SealCtx {
                    crypto: Some(&mut self.crypto),
                    conn: conn.0,
                    to_server: dir == Dir::ToServer,
                };
                f.finish_sealed(&mut ctx, &mut self.events);
                self.handle_events(conn, dir, frame, ts);
            }
        }
        self.crypto.forget_conn(conn.0);
        self.exchange
            .close_conn(conn, frame, &mut self.outbox, &mut self.stats);
        self.outbox.release_conn(conn, frame);
        self.conns.remove(&conn);
    }

    /// End of capture: flush every framer.
    pub fn finish(&mut self, ts: Timestamp) {
        let mut keys: Vec<(ConnId, Dir)> = self.framers.keys().copied().collect();
        keys.sort_by_key(|(c, d)| (c.0, *d == Dir::ToClient));
        for (conn, dir) in keys {
            if let Some(mut f) = self.framers.remove(&(conn, dir)) {
                self.framer_total = self.framer_total.saturating_sub(f.buffered());
                let mut ctx = SealCtx {
                    crypto: Some(&mut self.crypto),
                    conn: conn.0,
                    to_server: dir == Dir::ToServer,
                };
                f.finish_sealed(&mut ctx, &mut self.events);
                self.handle_events(conn, dir, self.last_frame, ts);
            }
        }
        self.exchange
            .finish(self.last_frame, &mut self.outbox, &mut self.stats);
    }
}

impl StreamSink for Smb2Layer {
    fn on_connection(&mut self, conn: ConnId, key: &ConnKey, frame: u64, ts: Timestamp) {
        self.stats.connections += 1;
        self.conns.insert(conn, *key);
        if self.conns.len() > MAX_CONNECTIONS {
            if let Some((&oldest, _)) = self.conns.iter().next() {
                let label = self.conn_label(oldest);
                self.note(
                    frame,
                    format!("{label}: SMB2 state dropped, too many connections at once"),
                );
                self.end_conn(oldest, frame, ts);
            }
        }
    }

    fn on_data(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, data: &[u8]) {
        self.last_frame = self.last_frame.max(frame);
        self.with_framer(conn, dir, frame, |f, ctx, ev| f.push_sealed(data, ctx, ev));
        self.handle_events(conn, dir, frame, ts);
    }

    fn on_gap(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, missing: u64) {
        self.last_frame = self.last_frame.max(frame);
        self.stats.gaps += 1;
        self.with_framer(conn, dir, frame, |f, ctx, ev| {
            f.gap_sealed(missing, ctx, ev)
        });
        self.handle_events(conn, dir, frame, ts);
    }

    fn on_close(&mut self, conn: ConnId, _how: CloseKind, frame: u64, ts: Timestamp) {
        self.end_conn(conn, frame, ts);
    }

    fn on_note(&mut self, conn: ConnId, frame: u64, note: NetNote) {
        let label = self.conn_label(conn);
        let message = match note {
            NetNote::BufferLimit { dir, bytes } => format!(
                "{label}: reassembly buffer bound hit, {bytes} out-of-order bytes dropped ({})",
                match dir {
                    Dir::ToServer => "to server",
                    Dir::ToClient => "to client",
                }
            ),
            NetNote::MidStream => format!("{label}: picked up mid-stream (start not captured)"),
        };
        self.note(frame, message);
    }
}
