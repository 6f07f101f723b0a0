//! The SMB2 layer as a TCP stream sink: one framer per connection and direction, framer events
//! turned into statistics, notes and (through `Exchange`) records.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::exchange::{Chain, Exchange};
use super::outbox::{NoteKind, Out, Outbox};
use super::sqos_build::MsgCtx;
use super::{CaptureNote, Limits, Stats};
use crate::budget::{Kind, MemoryUse, Share};
use crate::capture::Timestamp;
use crate::net::{CloseKind, ConnId, ConnKey, Dir, NetNote, StreamSink};
use crate::smb2::{Framer, FramerConfig, FramerEvent, Smb2Message};

/// Most connections listed one by one in per-connection statistics.
pub const MAX_LISTED_CONNECTIONS: usize = 1000;
/// The key under which connections past [`MAX_LISTED_CONNECTIONS`] are counted.
pub const OTHER_CONNECTIONS: &str = "(other connections)";

pub struct Smb2Layer {
    framer_cfg: FramerConfig,
    framers: HashMap<(ConnId, Dir), Framer>,
    /// Bytes held by all framers (`Framer::buffered`), within `Limits::max_framer_bytes`.
    framer_bytes: Share,
    /// Connections whose framers may hold state, oldest (lowest id) first. Reassembly tells
    /// when it forgets one; `Limits::max_connections` bounds them when fed directly.
    conns: BTreeMap<ConnId, ConnKey>,
    max_connections: usize,
    conns_dropped: Share,
    events: Vec<FramerEvent>,
    pub exchange: Exchange,
    pub outbox: Outbox,
    pub stats: Stats,
    pub last_frame: u64,
}

impl Smb2Layer {
    pub fn new(limits: Limits) -> Self {
        Smb2Layer {
            framer_cfg: limits.framer,
            framers: HashMap::new(),
            framer_bytes: Share::new(Kind::Framers, limits.max_framer_bytes),
            conns: BTreeMap::new(),
            max_connections: limits.max_connections.max(1),
            // Counts only what this layer drops itself (its entries are reassembly's).
            conns_dropped: Share::new(Kind::Connections, 0),
            events: Vec::new(),
            exchange: Exchange::new(&limits),
            outbox: Outbox::new(&limits),
            stats: Stats::default(),
            last_frame: 0,
        }
    }

    /// Bytes held by all framers (for tests of the memory bound).
    pub fn framer_bytes(&self) -> usize {
        self.framer_bytes.used()
    }

    /// This layer's memory shares: framers, opens, pending requests, queued records.
    pub fn memory(&self) -> Vec<MemoryUse> {
        let mut m = vec![self.framer_bytes.usage(), self.outbox.memory()];
        m.extend(self.exchange.memory());
        if self.conns_dropped.dropped_count() > 0 {
            m.push(self.conns_dropped.usage());
        }
        m
    }

    /// Run `f` on the framer of (conn, dir), keeping the total of held bytes up to date and
    /// within `max_framer_bytes`.
    fn with_framer(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        f: impl FnOnce(&mut Framer, &mut Vec<FramerEvent>),
    ) {
        let cfg = self.framer_cfg;
        let framer = self
            .framers
            .entry((conn, dir))
            .or_insert_with(|| Framer::new(cfg));
        let before = framer.buffered();
        f(framer, &mut self.events);
        let after = framer.buffered();
        self.framer_bytes.release(0, before);
        self.framer_bytes.charge(0, after);
        if !self.framer_bytes.over() {
            return;
        }
        // The fullest framers give back until the total is under seven eighths of the bound,
        // so this scan of every framer comes at most once per eighth of the bound newly held
        // (linear time whatever the capture).
        let mut fullest: Vec<(usize, (ConnId, Dir))> = self
            .framers
            .iter()
            .map(|(k, f)| (f.buffered(), *k))
            .filter(|&(b, _)| b > 0)
            .collect();
        fullest.sort_unstable_by_key(|&(b, (c, d))| (std::cmp::Reverse(b), c, d == Dir::ToClient));
        let target = self.framer_bytes.limit() / 8 * 7;
        for (_, key) in fullest {
            if self.framer_bytes.used() <= target {
                break;
            }
            if let Some(framer) = self.framers.get_mut(&key) {
                let freed = framer.shed();
                Self::count_shed(&mut self.framer_bytes, &mut self.stats, freed, frame);
            }
        }
    }

    fn count_shed(share: &mut Share, stats: &mut Stats, freed: usize, frame: u64) {
        if freed > 0 {
            share.release(0, freed);
            share.dropped(1, freed as u64, frame);
            stats.framer_bytes_shed += freed as u64;
        }
    }

    /// A note of `kind`, its message built only when it is given (see `NoteKind`).
    fn note(&mut self, kind: NoteKind, frame: u64, message: impl FnOnce(&Self) -> String) {
        if self.outbox.count_note(kind) {
            let message = message(self);
            self.outbox.push(Out::Note(CaptureNote { frame, message }));
        }
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
            FramerEvent::Encrypted { .. } => {
                self.stats.encrypted_messages += 1;
                let mut label = self.conn_label(conn);
                let map = &mut self.stats.encrypted_by_connection;
                // Bounded: past MAX_LISTED_CONNECTIONS entries, the rest are counted together.
                if !map.contains_key(&label) && map.len() >= MAX_LISTED_CONNECTIONS {
                    label = OTHER_CONNECTIONS.to_string();
                }
                *map.entry(label).or_insert(0) += 1;
            }
            FramerEvent::Compressed { .. } => self.stats.compressed_messages += 1,
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
                self.note(NoteKind::Gap, frame, |s| {
                    format!("{}: {bytes} bytes missing ({what})", s.dir_label(conn, dir))
                });
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

    /// Flush both framers of a connection (it ended) and forget it.
    fn end_conn(&mut self, conn: ConnId, frame: u64, ts: Timestamp) {
        for dir in [Dir::ToServer, Dir::ToClient] {
            if let Some(mut f) = self.framers.remove(&(conn, dir)) {
                self.framer_bytes.release(0, f.buffered());
                f.finish(&mut self.events);
                self.handle_events(conn, dir, frame, ts);
            }
        }
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
                self.framer_bytes.release(0, f.buffered());
                f.finish(&mut self.events);
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
        if self.conns.len() > self.max_connections {
            if let Some((&oldest, _)) = self.conns.iter().next() {
                self.conns_dropped.dropped(1, 0, frame);
                self.end_conn(oldest, frame, ts);
            }
        }
    }

    fn on_data(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, data: &[u8]) {
        self.last_frame = self.last_frame.max(frame);
        self.with_framer(conn, dir, frame, |f, ev| f.push(data, ev));
        self.handle_events(conn, dir, frame, ts);
    }

    fn on_gap(&mut self, conn: ConnId, dir: Dir, frame: u64, ts: Timestamp, missing: u64) {
        self.last_frame = self.last_frame.max(frame);
        self.stats.gaps += 1;
        self.with_framer(conn, dir, frame, |f, ev| f.gap(missing, ev));
        self.handle_events(conn, dir, frame, ts);
    }

    fn on_close(&mut self, conn: ConnId, _how: CloseKind, frame: u64, ts: Timestamp) {
        self.end_conn(conn, frame, ts);
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
