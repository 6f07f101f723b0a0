//! Sessions, their channels and their trees, followed across the connections of a capture.
//!
//! SMB3 multichannel: one session (SessionId) is used over several TCP connections, its
//! *channels* (MS-SMB2 3.2.4.2.3, 3.3.5.5). A channel is recognised by a SESSION_SETUP with
//! SMB2_SESSION_FLAG_BINDING answered with success on a new connection, or — the capture began
//! after the setup — by the first message of the session seen on a connection. TreeIds belong to
//! the session, so a TREE_CONNECT on one channel names the share for every channel.
//!
//! Bounded by the memory budget (`Kind::Sessions`, this table's part of it): channels and trees
//! are charged an entry each (a tree its path's bytes too); past the bound the oldest is
//! forgotten and counted (a channel forgotten is seen again, as `ChannelJoin::Seen`, if it is
//! used later; a file on a forgotten tree shows no share). The session list `sqos stats`
//! prints takes at most a quarter of it; sessions and channels past that are counted, not listed.

use std::collections::{BTreeMap, HashMap, VecDeque};

use foldhash::fast::{FixedState, RandomState};
use std::net::SocketAddr;
use std::sync::Arc;

use serde::Serialize;

use super::{ChannelEnd, ChannelEvent, ChannelJoin, ChannelRecord, SessionSummary};
use crate::budget::{Kind, Share};
use crate::capture::Timestamp;
use crate::net::{ConnId, ConnSlots};

/// Sessions listed one by one in the statistics; channels listed per session.
pub const MAX_LISTED_SESSIONS: usize = 1000;
pub const MAX_LISTED_CHANNELS: usize = 64;

/// One channel of a session, as `sqos stats` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChannelStats {
    pub connection: u32,
    pub client: String,
    pub server: String,
    pub joined: ChannelJoin,
    pub frame: u64,
    pub ended_frame: Option<u64>,
    pub ended_by: Option<ChannelEnd>,
}

#[derive(Clone, Copy, Debug)]
struct Channel {
    client: SocketAddr,
    server: SocketAddr,
    /// Index in the session's listed channels, if listed.
    listed: Option<usize>,
}

/// Where the last message from the server on a connection was seen.
#[derive(Clone, Copy, Debug, Default)]
struct LastServer {
    frame: u64,
    ts: Timestamp,
}

/// What a listed session and a listed channel cost besides their strings (structs, the map's
/// slot, the allocator), charged to the share's bytes.
const LISTED_SESSION_COST: usize = std::mem::size_of::<SessionSummary>() + 64;
const LISTED_CHANNEL_COST: usize = std::mem::size_of::<ChannelStats>() + 64;

#[derive(Debug)]
pub struct Sessions {
    /// Looked up for every message: foldhash, seeded per run where a key holds the peers'
    /// SessionId, not SipHash.
    channels: HashMap<(u64, ConnId), Channel, RandomState>,
    /// Sessions on each connection (for the end of a connection).
    by_conn: HashMap<ConnId, Vec<u64>, FixedState>,
    /// Channels in the order they were added, for eviction.
    order: VecDeque<(u64, ConnId)>,
    last_server: HashMap<ConnId, LastServer, FixedState>,
    /// Where the server spoke last on recent connections, not yet written to `last_server`
    /// (one map write when a connection leaves its slot, not per message).
    spoke: ConnSlots<LastServer>,
    /// A session whose channel on the connection is in `channels` (cleared when it leaves):
    /// most messages follow others of their channel, which then costs no hashing.
    marks: ConnSlots<u64>,
    trees: HashMap<(u64, u32), Arc<str>, RandomState>,
    tree_order: VecDeque<(u64, u32)>,
    /// Listed sessions, by SessionId (`sqos stats`).
    pub listed: BTreeMap<u64, SessionSummary>,
    /// Sessions seen but not listed (past [`MAX_LISTED_SESSIONS`] or the list's memory).
    pub unlisted_sessions: u64,
    /// Channels and trees (entries), their paths and the list (bytes).
    share: Share,
    /// Bytes of the list, at most a quarter of the share.
    listed_bytes: usize,
}

impl Sessions {
    /// A table of at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Sessions {
            channels: HashMap::default(),
            by_conn: HashMap::default(),
            order: VecDeque::new(),
            last_server: HashMap::default(),
            spoke: ConnSlots::default(),
            marks: ConnSlots::default(),
            trees: HashMap::default(),
            tree_order: VecDeque::new(),
            listed: BTreeMap::new(),
            unlisted_sessions: 0,
            share: Share::new(Kind::Sessions, limit),
            listed_bytes: 0,
        }
    }

    /// The table's memory account (channels and trees dropped are counted there).
    pub fn memory(&self) -> &Share {
        &self.share
    }

    /// Is `session` known on `conn` (a channel in `channels`)? Its mark first (inlined: every
    /// message asks).
    #[inline]
    pub fn knows(&mut self, session: u64, conn: ConnId) -> bool {
        self.marks.get(conn) == Some(&session) || self.knows_unmarked(session, conn)
    }

    #[inline(never)]
    fn knows_unmarked(&mut self, session: u64, conn: ConnId) -> bool {
        let known = self.channels.contains_key(&(session, conn));
        if known {
            self.marks.set(conn, session);
        }
        known
    }

    /// The channel of `session` on `conn` left `channels`: its mark goes too.
    fn unmark(&mut self, session: u64, conn: ConnId) {
        if self.marks.get(conn) == Some(&session) {
            self.marks.remove(conn);
        }
    }

    /// A message from the server arrived on `conn` (inlined: every response says so).
    #[inline]
    pub fn server_spoke(&mut self, conn: ConnId, frame: u64, ts: Timestamp) {
        let now = LastServer { frame, ts };
        match self.spoke.get_mut(conn) {
            Some(last) => *last = now,
            None => self.spoke_anew(conn, now),
        }
    }

    /// `conn` takes its slot: the connection that held it is written to `last_server`.
    #[inline(never)]
    fn spoke_anew(&mut self, conn: ConnId, now: LastServer) {
        if let Some((c, last)) = self.spoke.set(conn, now) {
            self.last_server.insert(c, last);
        }
    }

    fn last_server(&self, conn: ConnId) -> Option<LastServer> {
        match self.spoke.get(conn) {
            Some(last) => Some(*last),
            None => self.last_server.get(&conn).copied(),
        }
    }

    /// `session` joined `conn`; returns the record to emit, or `None` if already known.
    #[allow(clippy::too_many_arguments)]
    pub fn join(
        &mut self,
        session: u64,
        conn: ConnId,
        client: SocketAddr,
        server: SocketAddr,
        joined: ChannelJoin,
        frame: u64,
        ts: Timestamp,
    ) -> Option<ChannelRecord> {
        if session == 0 || self.channels.contains_key(&(session, conn)) {
            return None;
        }
        while !self.share.fits(1, 0) {
            let Some((s, c)) = self.order.pop_front() else {
                break;
            };
            if self.channels.remove(&(s, c)).is_some() {
                self.unmark(s, c);
                self.share.release(1, 0);
                self.share.dropped(1, 0, frame);
                self.unlink(s, c);
            }
        }
        self.share.charge(1, 0);
        let listed = self.list(session, conn, client, server, joined, frame);
        self.channels.insert(
            (session, conn),
            Channel {
                client,
                server,
                listed,
            },
        );
        self.marks.set(conn, session);
        self.by_conn.entry(conn).or_default().push(session);
        self.order.push_back((session, conn));
        if self.order.len() > 2 * self.channels.len() + 64 {
            let ch = &self.channels;
            self.order.retain(|k| ch.contains_key(k));
        }
        Some(ChannelRecord {
            frame,
            ts,
            conn,
            client,
            server,
            session_id: session,
            event: ChannelEvent::Joined(joined),
        })
    }

    fn list(
        &mut self,
        session: u64,
        conn: ConnId,
        client: SocketAddr,
        server: SocketAddr,
        joined: ChannelJoin,
        frame: u64,
    ) -> Option<usize> {
        let client = client.to_string();
        let server = server.to_string();
        let channel_cost = LISTED_CHANNEL_COST + client.len() + server.len();
        let room = (self.share.limit() / 4).saturating_sub(self.listed_bytes);
        if !self.listed.contains_key(&session) {
            if self.listed.len() >= MAX_LISTED_SESSIONS || room < LISTED_SESSION_COST {
                self.unlisted_sessions += 1;
                return None;
            }
            self.listed_bytes += LISTED_SESSION_COST;
            self.share.charge(0, LISTED_SESSION_COST);
        }
        let room = (self.share.limit() / 4).saturating_sub(self.listed_bytes);
        let s = self
            .listed
            .entry(session)
            .or_insert_with(|| SessionSummary {
                session_id: session,
                ..SessionSummary::default()
            });
        s.channels_total += 1;
        if s.channels.len() >= MAX_LISTED_CHANNELS || room < channel_cost {
            return None;
        }
        self.listed_bytes += channel_cost;
        self.share.charge(0, channel_cost);
        s.channels.push(ChannelStats {
            connection: conn.0,
            client,
            server,
            joined,
            frame,
            ended_frame: None,
            ended_by: None,
        });
        Some(s.channels.len() - 1)
    }

    fn unlink(&mut self, session: u64, conn: ConnId) {
        if let Some(v) = self.by_conn.get_mut(&conn) {
            v.retain(|s| *s != session);
            if v.is_empty() {
                self.by_conn.remove(&conn);
            }
        }
    }

    /// The channel of `session` on `conn` ended; `pending` holds (session, frame) of the
    /// requests outstanding on the connection.
    fn end(
        &mut self,
        session: u64,
        conn: ConnId,
        by: ChannelEnd,
        (frame, ts): (u64, Timestamp),
        pending: &[(u64, u64)],
    ) -> Option<ChannelRecord> {
        let ch = self.channels.remove(&(session, conn))?;
        self.unmark(session, conn);
        self.share.release(1, 0);
        if let Some(i) = ch.listed {
            if let Some(c) = self
                .listed
                .get_mut(&session)
                .and_then(|s| s.channels.get_mut(i))
            {
                c.ended_frame = Some(frame);
                c.ended_by = Some(by);
            }
        }
        let last = self.last_server(conn);
        let after = match by {
            ChannelEnd::CaptureEnd => last.map_or(0, |l| l.frame),
            _ => 0,
        };
        let unanswered = pending
            .iter()
            .filter(|(s, f)| *s == session && *f > after)
            .count() as u64;
        Some(ChannelRecord {
            frame,
            ts,
            conn,
            client: ch.client,
            server: ch.server,
            session_id: session,
            event: ChannelEvent::Ended {
                by,
                last_server_frame: last.map(|l| l.frame),
                last_server_ts: last.map(|l| l.ts),
                unanswered,
            },
        })
    }

    /// The connection ended: every session on it loses that channel. `pending` holds
    /// (session, frame) of the requests outstanding on it.
    pub fn end_conn(
        &mut self,
        conn: ConnId,
        by: ChannelEnd,
        at: (u64, Timestamp),
        pending: &[(u64, u64)],
    ) -> Vec<ChannelRecord> {
        let sessions = self.by_conn.remove(&conn).unwrap_or_default();
        let out = sessions
            .into_iter()
            .filter_map(|s| self.end(s, conn, by, at, pending))
            .collect();
        self.last_server.remove(&conn);
        self.spoke.remove(conn);
        out
    }

    /// LOGOFF succeeded: the session ends on every channel.
    pub fn logoff(&mut self, session: u64, frame: u64, ts: Timestamp) -> Vec<ChannelRecord> {
        let conns: Vec<ConnId> = self
            .by_conn
            .iter()
            .filter(|(_, v)| v.contains(&session))
            .map(|(c, _)| *c)
            .collect();
        let mut conns = conns;
        conns.sort();
        let mut out = Vec::new();
        for c in conns {
            self.unlink(session, c);
            out.extend(self.end(session, c, ChannelEnd::Logoff, (frame, ts), &[]));
        }
        let share = &mut self.share;
        self.trees.retain(|(s, _), path| {
            let keep = *s != session;
            if !keep {
                share.release(1, path.len());
            }
            keep
        });
        out
    }

    /// End of capture: every channel still open. `pending` holds (connection, session,
    /// frame) of the requests outstanding.
    pub fn end_all(
        &mut self,
        at: (u64, Timestamp),
        pending: &[(ConnId, u64, u64)],
    ) -> Vec<ChannelRecord> {
        let mut by_conn: HashMap<ConnId, Vec<(u64, u64)>> = HashMap::new();
        for &(c, s, f) in pending {
            by_conn.entry(c).or_default().push((s, f));
        }
        let mut conns: Vec<ConnId> = self.by_conn.keys().copied().collect();
        conns.sort();
        let mut out = Vec::new();
        for c in conns {
            let mine = by_conn.get(&c).map_or(&[][..], Vec::as_slice);
            out.extend(self.end_conn(c, ChannelEnd::CaptureEnd, at, mine));
        }
        out
    }

    /// A TREE_CONNECT succeeded (in `frame`): `tree` of `session` is `path` (`\\server\share`).
    pub fn tree_connected(&mut self, session: u64, tree: u32, path: Arc<str>, frame: u64) {
        self.tree_disconnected(session, tree);
        while !self.share.fits(1, path.len()) {
            let Some(k) = self.tree_order.pop_front() else {
                break;
            };
            if let Some(old) = self.trees.remove(&k) {
                self.share.release(1, old.len());
                self.share.dropped(1, old.len() as u64, frame);
            }
        }
        self.share.charge(1, path.len());
        self.trees.insert((session, tree), path);
        self.tree_order.push_back((session, tree));
        if self.tree_order.len() > 2 * self.trees.len() + 64 {
            let t = &self.trees;
            self.tree_order.retain(|k| t.contains_key(k));
        }
    }

    pub fn tree_disconnected(&mut self, session: u64, tree: u32) {
        if let Some(old) = self.trees.remove(&(session, tree)) {
            self.share.release(1, old.len());
        }
    }

    /// The share path of a tree, if its TREE_CONNECT was seen.
    pub fn share(&self, session: u64, tree: u32) -> Option<&Arc<str>> {
        self.trees.get(&(session, tree))
    }
}

/// The full path of a file opened in a share: `\\server\share\name`. With DFS operations the
/// CREATE name already begins with `server\share`; it is not repeated.
pub fn full_path(share: &str, name: &str, dfs: bool) -> String {
    let name = name.trim_start_matches('\\');
    if name.is_empty() {
        return share.to_string();
    }
    let root = share.trim_start_matches('\\');
    if dfs
        && name.len() > root.len()
        && name.is_char_boundary(root.len())
        && name[..root.len()].eq_ignore_ascii_case(root)
        && name[root.len()..].starts_with('\\')
    {
        return format!("\\\\{name}");
    }
    format!("{}\\{name}", share.trim_end_matches('\\'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn full_paths() {
        assert_eq!(
            full_path("\\\\sofs\\vms", "vm01\\disk0.vhdx", false),
            "\\\\sofs\\vms\\vm01\\disk0.vhdx"
        );
        assert_eq!(full_path("\\\\sofs\\vms", "", false), "\\\\sofs\\vms");
        assert_eq!(
            full_path("\\\\sofs\\vms", "SOFS\\vms\\vm01\\a.vhdx", true),
            "\\\\SOFS\\vms\\vm01\\a.vhdx"
        );
        assert_eq!(
            full_path("\\\\sofs\\vms", "vm01\\a.vhdx", true),
            "\\\\sofs\\vms\\vm01\\a.vhdx"
        );
    }

    #[test]
    fn channels_join_once_and_end_with_their_connection() {
        let mut s = Sessions::new(crate::budget::Budget::default().limit(Kind::Sessions));
        let (c, v) = (addr("10.0.0.1:50000"), addr("10.0.0.100:445"));
        let t = Timestamp(0);
        assert!(s
            .join(7, ConnId(0), c, v, ChannelJoin::Setup, 5, t)
            .is_some());
        assert!(s
            .join(7, ConnId(0), c, v, ChannelJoin::Seen, 6, t)
            .is_none());
        let r = s
            .join(7, ConnId(1), c, v, ChannelJoin::Binding, 9, t)
            .unwrap();
        assert_eq!(r.event, ChannelEvent::Joined(ChannelJoin::Binding));
        assert!(s
            .join(0, ConnId(2), c, v, ChannelJoin::Seen, 9, t)
            .is_none());
        s.server_spoke(ConnId(1), 10, Timestamp(3));
        let ended = s.end_conn(ConnId(1), ChannelEnd::Rst, (12, t), &[(7, 11), (8, 11)]);
        assert_eq!(ended.len(), 1);
        assert_eq!(
            ended[0].event,
            ChannelEvent::Ended {
                by: ChannelEnd::Rst,
                last_server_frame: Some(10),
                last_server_ts: Some(Timestamp(3)),
                unanswered: 1,
            }
        );
        let listed = &s.listed[&7];
        assert_eq!(listed.channels_total, 2);
        assert_eq!(listed.channels[1].ended_by, Some(ChannelEnd::Rst));
        s.server_spoke(ConnId(0), 15, Timestamp(4));
        let at_end = s.end_all((20, t), &[(ConnId(0), 7, 14), (ConnId(0), 7, 16)]);
        assert_eq!(at_end.len(), 1);
        // Only the request sent after the server's last message counts at the end.
        assert!(matches!(
            at_end[0].event,
            ChannelEvent::Ended { unanswered: 1, .. }
        ));
    }

    #[test]
    fn marks_follow_the_channels_known() {
        // Room for two channels and the first session's summary (listed, and charged).
        let mut s = Sessions::new(3 * Kind::Sessions.entry_cost());
        let (c, v) = (addr("10.0.0.1:50000"), addr("10.0.0.100:445"));
        let t = Timestamp(0);
        assert!(!s.knows(1, ConnId(0)));
        assert!(s
            .join(1, ConnId(0), c, v, ChannelJoin::Seen, 1, t)
            .is_some());
        assert!(s.knows(1, ConnId(0)));
        assert!(!s.knows(2, ConnId(0)), "another session on the connection");
        assert!(s
            .join(2, ConnId(1), c, v, ChannelJoin::Seen, 2, t)
            .is_some());
        // Full: the oldest channel, (1, 0), is forgotten, and its mark with it.
        assert!(s
            .join(3, ConnId(2), c, v, ChannelJoin::Seen, 3, t)
            .is_some());
        assert!(!s.knows(1, ConnId(0)));
        assert_eq!(s.channels.len(), 2);
        assert!(s.knows(2, ConnId(1)) && s.knows(3, ConnId(2)));
        // A connection 64 further falls in connection 2's slot, not in its channel.
        let far = ConnId(2 + crate::net::CONN_SLOTS as u32);
        assert!(!s.knows(3, far));
        assert!(s.knows(3, ConnId(2)), "found in the map again");
        assert_eq!(s.logoff(3, 4, t).len(), 1);
        assert!(!s.knows(3, ConnId(2)));
        assert!(s
            .join(1, ConnId(0), c, v, ChannelJoin::Seen, 5, t)
            .is_some());
    }

    #[test]
    fn server_times_outlast_their_slot_being_taken() {
        let mut s = Sessions::new(crate::budget::Budget::default().limit(Kind::Sessions));
        let (c, v) = (addr("10.0.0.1:50000"), addr("10.0.0.100:445"));
        let t = Timestamp(0);
        let (a, b) = (ConnId(1), ConnId(1 + crate::net::CONN_SLOTS as u32));
        s.join(5, a, c, v, ChannelJoin::Seen, 1, t);
        s.join(6, b, c, v, ChannelJoin::Seen, 2, t);
        s.server_spoke(a, 10, Timestamp(1));
        s.server_spoke(b, 20, Timestamp(2));
        s.server_spoke(a, 30, Timestamp(3));
        let last = |r: &[ChannelRecord]| match r.first().map(|r| &r.event) {
            Some(ChannelEvent::Ended {
                last_server_frame,
                last_server_ts,
                ..
            }) => (*last_server_frame, *last_server_ts),
            _ => (None, None),
        };
        let ended = s.end_conn(b, ChannelEnd::Fin, (40, t), &[]);
        assert_eq!(last(&ended), (Some(20), Some(Timestamp(2))));
        let ended = s.end_conn(a, ChannelEnd::Fin, (41, t), &[]);
        assert_eq!(last(&ended), (Some(30), Some(Timestamp(3))));
    }
}
