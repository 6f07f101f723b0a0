//! What the SMB2 layer makes of its framers' events: messages through the exchange into
//! records, everything else into statistics and notes. The framers hand each event over the
//! moment they give it, while they hold the decryptor; this stage holds the rest of the layer.

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::by_label::LabelSlot;
use super::exchange::{Chain, Exchange};
use super::outbox::{NoteKind, Out, Outbox};
use super::sqos_build::MsgCtx;
use super::streams::{MessageStarts, MAX_LISTED_CONNECTIONS, OTHER_CONNECTIONS, OTHER_SESSIONS};
use super::{CaptureNote, Stats};
use crate::capture::Timestamp;
use crate::net::{ConnId, ConnKey, ConnSlots, Dir};
use crate::smb2::crypto::KeySource;
use crate::smb2::framer::{CompressOutcome, SealOutcome};
use crate::smb2::{FramerEvent, FramerOut, Smb2Message};

/// The layer's connections: their map, with the recent ones in slots in front of it.
#[derive(Clone, Copy)]
pub(super) struct Conns<'a> {
    pub(super) map: &'a BTreeMap<ConnId, ConnKey>,
    pub(super) recent: &'a ConnSlots<ConnKey>,
}

impl Conns<'_> {
    fn get(&self, conn: ConnId) -> Option<&ConnKey> {
        self.recent.get(conn).or_else(|| self.map.get(&conn))
    }
}

/// The parts of the layer a framer event goes to (all but the framers and the decryptor).
pub(super) struct EventStage<'a> {
    pub(super) conns: Conns<'a>,
    pub(super) starts: &'a mut Option<MessageStarts>,
    pub(super) exchange: &'a mut Exchange,
    pub(super) outbox: &'a mut Outbox,
    pub(super) stats: &'a mut Stats,
    pub(super) encrypted_labels: &'a mut BTreeMap<ConnId, LabelSlot>,
    pub(super) sessions_noted: &'a mut HashSet<u64>,
    /// The frame being pushed when the capture's snaplen cut it (see `Smb2Layer::cut_frame`).
    pub(super) cut_frame: Option<(u64, usize, u32)>,
    /// Sessions in the key files.
    pub(super) key_sessions: u64,
}

impl EventStage<'_> {
    /// One framer event of (conn, dir), framed in `frame` at `ts`.
    pub(super) fn event(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        ts: Timestamp,
        ev: &FramerEvent,
    ) {
        match ev {
            FramerEvent::Message(m) => self.message(conn, dir, frame, ts, m),
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
        self.stats.key_file_sessions = self.key_sessions;
        // Bounded: past MAX_LISTED_CONNECTIONS labels, the rest are counted together. A
        // connection's label is made and found once, when its entry is (`encrypted_labels`
        // holds exactly the connections listed), not for every message.
        let map = &mut self.stats.encrypted_by_connection;
        let slot = match self.encrypted_labels.get(&conn) {
            Some(&slot) => slot,
            None if map.len() >= MAX_LISTED_CONNECTIONS => map.slot(OTHER_CONNECTIONS),
            None => {
                let slot = map.slot(&conn_label(self.conns, conn));
                *self.encrypted_labels.entry(conn).or_insert(slot)
            }
        };
        map.add_one(slot);
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

    /// A framed message of (conn, dir), completed in `frame` at `ts`.
    pub(super) fn message(
        &mut self,
        conn: ConnId,
        dir: Dir,
        frame: u64,
        ts: Timestamp,
        m: &Smb2Message,
    ) {
        // Later messages of the same push began in this frame.
        let first_frame = self.starts.as_mut().and_then(|s| s.next.replace(frame));
        // One constructor, called in each arm: a context built after the match copied the
        // endpoints twice more (0.24 M instructions on the small-I/O prefix).
        let make = |src, dst| MsgCtx {
            conn,
            frame,
            first_frame,
            ts,
            src,
            dst,
        };
        let ctx = match self.conns.get(conn) {
            Some(k) => {
                let (src, dst) = k.endpoints(dir);
                make(src, dst)
            }
            None => {
                let unknown = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
                make(unknown, unknown)
            }
        };
        let mut chain = Chain::default();
        for (i, part) in m.parts.iter().enumerate() {
            chain.more = i + 1 < m.parts.len();
            self.stats.smb2_messages += 1;
            self.stats.by_command.count(part.header.command);
            self.exchange
                .on_part(&ctx, part, &mut chain, self.outbox, self.stats);
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

    /// A note of `kind`, its message built only when it is given (see `NoteKind`).
    pub(super) fn note(
        &mut self,
        kind: NoteKind,
        frame: u64,
        message: impl FnOnce(&Self) -> String,
    ) {
        if self.outbox.count_note(kind) {
            let message = message(self);
            self.outbox.push(Out::Note(CaptureNote { frame, message }));
        }
    }

    pub(super) fn conn_label(&self, conn: ConnId) -> String {
        conn_label(self.conns, conn)
    }

    /// "connection N, a → b": the direction the bytes travel.
    fn dir_label(&self, conn: ConnId, dir: Dir) -> String {
        match self.conns.get(conn) {
            Some(k) => {
                let (src, dst) = k.endpoints(dir);
                format!("connection {}, {src} → {dst}", conn.0)
            }
            None => format!("connection {}", conn.0),
        }
    }
}

/// "connection N (a ⇄ b)", as the statistics and notes name a connection.
fn conn_label(conns: Conns<'_>, conn: ConnId) -> String {
    match conns.get(conn) {
        Some(k) => format!("connection {} ({k})", conn.0),
        None => format!("connection {}", conn.0),
    }
}

/// The stage as a framer's receiver during one push on (conn, dir): each event handled as it
/// is given, a message where it lies (without a copy).
pub(super) struct Direct<'a> {
    pub(super) stage: EventStage<'a>,
    /// The push: connection, direction, frame, time.
    pub(super) at: (ConnId, Dir, u64, Timestamp),
}

impl FramerOut for Direct<'_> {
    fn event(&mut self, ev: FramerEvent) {
        let (conn, dir, frame, ts) = self.at;
        self.stage.event(conn, dir, frame, ts, &ev);
    }

    fn message(&mut self, m: &mut Smb2Message) {
        let (conn, dir, frame, ts) = self.at;
        self.stage.message(conn, dir, frame, ts, m);
    }
}
