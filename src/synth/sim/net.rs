//! What the actors share, and the channels they talk over: the cluster, the wire, the agenda,
//! the one random source (every choice drawn in event order), the records, and per host its
//! SMB session (ids and encryption) and its channels (TCP connections). Messages are queued
//! per channel during an event and sent together after it (so messages sent at once share
//! segments); a channel armed to fail fails at the request that strikes it.

use std::io::Write;

use super::records::{IoRec, MsgRec};
use super::{Agenda, Ev, SILENCE_DETECT_US};
use crate::smb2::crypto::Cipher;
use crate::synth::rng::Rng;
use crate::synth::scenario::{Cluster, DropKind};
use crate::synth::seal::Sealer;
use crate::synth::smb2::{self, FileId, Header};
use crate::synth::squeeze::Squeezer;
use crate::synth::wire::{Part, Side, Time, Wire};

/// What a client's request asks, as the simulation follows it.
pub(super) enum ReqKind {
    Negotiate,
    Session(u8),
    Tree,
    Interfaces,
    Create(Target),
    Close(Target, FileId),
    Io(usize),
    Ioctl(usize),
}

/// What a server's response answers.
pub(super) enum RespKind {
    Negotiate,
    Session(u8),
    Tree,
    Interfaces,
    Create(Target, FileId),
    Close(Target),
    Io(usize),
    Ioctl(usize),
}

/// The file a CREATE, CLOSE or IOCTL is about: a flow's disk, or the host's spare open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    Flow(usize),
    Spare,
}

pub(super) struct ReqItem {
    pub hdr: Header,
    pub kind: ReqKind,
}

pub(super) struct RespItem {
    pub status: u32,
    pub kind: RespKind,
}

pub(super) enum Item {
    Req(ReqItem),
    Resp(RespItem),
}

/// Messages to send after the event: (channel, from, time, messages with what they are).
type Outbox = Vec<(usize, Side, Time, Vec<(Vec<Part>, Item)>)>;

/// A host's SMB session, as both ends know it.
#[derive(Default)]
pub(super) struct SessionRt {
    pub session: u64,
    pub tree: u32,
    /// `--encrypt`: the session's keys and nonces.
    pub sealer: Option<Sealer>,
}

/// One channel: a TCP connection the host's session is used over.
pub(super) struct ChanRt {
    pub host: usize,
    /// Index among the host's channels (0 is the primary).
    pub index: usize,
    pub conn: u32,
    /// Its two ends, once connected.
    pub client: Option<std::net::SocketAddr>,
    pub server: Option<std::net::SocketAddr>,
    pub next_mid: u64,
    /// The session is bound to it: it may carry the session's I/O.
    pub ready: bool,
    /// It fails at its next request (a SQOS IOCTL for a reset, any for silence).
    pub armed: Option<DropKind>,
    /// It failed then (reset or silent); what it carries from then on is lost.
    pub dead_at: Option<Time>,
    /// The client knows it failed.
    pub known_dead: bool,
}

impl ChanRt {
    /// Channel `index` of host `h`, not connected yet.
    pub fn new(host: usize, index: usize) -> ChanRt {
        ChanRt {
            host,
            index,
            conn: u32::MAX,
            client: None,
            server: None,
            next_mid: 0,
            ready: false,
            armed: None,
            dead_at: None,
            known_dead: false,
        }
    }
}

pub(super) struct Ctx<'c, W: Write> {
    pub c: &'c Cluster,
    pub wire: Wire<W>,
    pub rng: Rng,
    pub agenda: Agenda,
    pub chans: Vec<ChanRt>,
    /// Per host.
    pub sessions: Vec<SessionRt>,
    outbox: Outbox,
    pub ios: Vec<IoRec>,
    pub msgs: Vec<MsgRec>,
    /// Channels that failed: (channel, how, when).
    pub drops: Vec<(usize, DropKind, Time)>,
    /// `--encrypt`: every session is encrypted with this cipher.
    pub encrypt: Option<Cipher>,
    /// `--compress`: every connection negotiates compression and compresses its messages.
    pub squeeze: Option<Squeezer>,
}

impl<'c, W: Write> Ctx<'c, W> {
    pub fn new(c: &'c Cluster, wire: Wire<W>, rng: Rng, chans: Vec<ChanRt>) -> Self {
        Ctx {
            c,
            wire,
            rng,
            agenda: Agenda::default(),
            chans,
            sessions: (0..c.hosts.len()).map(|_| SessionRt::default()).collect(),
            outbox: Vec::new(),
            ios: Vec::new(),
            msgs: Vec::new(),
            drops: Vec::new(),
            encrypt: None,
            squeeze: None,
        }
    }

    pub fn at(&mut self, t: Time, ev: Ev) {
        self.agenda.at(t, ev);
    }

    /// Channel `ch` has failed by time `t`.
    pub fn dead(&self, ch: usize, t: Time) -> bool {
        self.chans
            .get(ch)
            .is_none_or(|c| c.dead_at.is_some_and(|d| d <= t))
    }

    /// 32 random bytes (a preauth salt).
    pub fn salt(&mut self) -> [u8; 32] {
        let mut s = [0u8; 32];
        for c in s.chunks_mut(8) {
            c.copy_from_slice(&self.rng.next_u64().to_le_bytes());
        }
        s
    }

    /// `parts` of a `command` message on channel `ch` from the client (or server), sealed if
    /// the session is encrypted. On the primary channel NEGOTIATE and SESSION_SETUP go in clear
    /// and feed the preauth hash; on a further channel they go in clear (the binding
    /// SESSION_SETUP is signed, not encrypted: MS-SMB2 3.2.5.3.1) and do not touch the session's.
    fn sealed(
        &mut self,
        ch: usize,
        from_client: bool,
        command: u16,
        parts: Vec<Part>,
    ) -> Vec<Part> {
        let Some((h, primary)) = self.chans.get(ch).map(|c| (c.host, c.index == 0)) else {
            return parts;
        };
        // Compressed first when compression is on (MS-SMB2 3.1.4.3: compress, then encrypt).
        let parts = match (&self.squeeze, self.c.hosts.get(h)) {
            (Some(z), Some(spec)) if spec.smb_dialect == smb2::DIALECT_311 => {
                z.outgoing(parts, self.wire.filler())
            }
            _ => parts,
        };
        if !primary && matches!(command, smb2::NEGOTIATE | smb2::SESSION_SETUP) {
            return parts;
        }
        match self.sessions.get_mut(h).and_then(|x| x.sealer.as_mut()) {
            Some(s) => s.outgoing(from_client, parts, self.wire.filler()),
            None => parts,
        }
    }

    /// Queues a message (`body`, then `fill` bytes of filler) on channel `ch`, sealed as its
    /// session is.
    #[allow(clippy::too_many_arguments)]
    pub fn send(
        &mut self,
        ch: usize,
        side: Side,
        t: Time,
        hdr: Header,
        body: &[u8],
        fill: usize,
        item: Item,
    ) {
        let parts = smb2::message(&hdr, body, fill);
        let parts = self.sealed(ch, side == Side::Client, hdr.command, parts);
        if let Some(last) = self.outbox.last_mut() {
            if last.0 == ch && last.1 == side && last.2 == t {
                last.3.push((parts, item));
                return;
            }
        }
        self.outbox.push((ch, side, t, vec![(parts, item)]));
    }

    /// Sends what the event queued; each message's receiver gets it when the wire says.
    pub fn flush_outbox(&mut self) {
        let owd = self.wire.config().one_way_us;
        for (ch, side, t, batch) in std::mem::take(&mut self.outbox) {
            let Some(conn) = self.chans.get(ch).map(|x| x.conn) else {
                continue;
            };
            let (parts, items): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
            // An armed failure strikes when the server has the request that triggers it.
            let armed = self.chans.get(ch).and_then(|c| c.armed);
            let triggers = |it: &Item| match (armed, it) {
                (Some(DropKind::Rst), Item::Req(r)) => matches!(r.kind, ReqKind::Ioctl(_)),
                (Some(DropKind::Silence), Item::Req(r)) => {
                    matches!(r.kind, ReqKind::Ioctl(_) | ReqKind::Io(_))
                }
                _ => false,
            };
            let hits: Vec<bool> = items.iter().map(triggers).collect();
            let deliveries = self.wire.send(conn, side, t, parts);
            let strike = deliveries
                .iter()
                .zip(&hits)
                .filter(|(_, &h)| h)
                .map(|(d, _)| d.at)
                .max();
            let mut group: Option<(Time, Vec<Item>)> = None;
            for (d, item) in deliveries.into_iter().zip(items) {
                match &item {
                    Item::Req(r) => match r.kind {
                        ReqKind::Io(io) => {
                            if let Some(rec) = self.ios.get_mut(io) {
                                rec.req_tag = d.tag;
                                rec.req_done = d.at.saturating_sub(owd);
                            }
                        }
                        ReqKind::Ioctl(m) => {
                            if let Some(rec) = self.msgs.get_mut(m) {
                                rec.req_tag = Some(d.tag);
                                rec.first_req_tag.get_or_insert(d.tag);
                                rec.sends.push((ch, d.tag));
                            }
                        }
                        _ => {}
                    },
                    Item::Resp(r) => match r.kind {
                        RespKind::Io(io) => {
                            if let Some(rec) = self.ios.get_mut(io) {
                                rec.resp_tag = Some(d.tag);
                            }
                        }
                        RespKind::Ioctl(m) => {
                            if let Some(rec) = self.msgs.get_mut(m) {
                                rec.resp_tag = Some(d.tag);
                            }
                        }
                        _ => {}
                    },
                }
                match &mut group {
                    Some((gt, items)) if *gt == d.at => items.push(item),
                    _ => {
                        if let Some((gt, items)) = group.take() {
                            self.deliver(ch, gt, items);
                        }
                        group = Some((d.at, vec![item]));
                    }
                }
            }
            if let Some((gt, items)) = group {
                self.deliver(ch, gt, items);
            }
            if let (Side::Client, Some(at)) = (side, strike) {
                self.fail_channel(ch, at);
            }
        }
    }

    /// Channel `ch` fails at `at` as armed: the server resets it (the client sees the RST one
    /// way later) or its link goes silent (the client notices `SILENCE_DETECT_US` later).
    fn fail_channel(&mut self, ch: usize, at: Time) {
        let owd = self.wire.config().one_way_us;
        let Some(c) = self.chans.get_mut(ch) else {
            return;
        };
        let Some(how) = c.armed.take() else {
            return;
        };
        c.dead_at = Some(at);
        let conn = c.conn;
        self.drops.push((ch, how, at));
        match how {
            DropKind::Rst => {
                self.wire.kill(conn, at + owd, Some(Side::Server));
                self.at(at + owd, Ev::Detect(ch));
            }
            DropKind::Silence => {
                self.wire.kill(conn, at, None);
                self.at(at + SILENCE_DETECT_US, Ev::Detect(ch));
            }
        }
    }

    fn deliver(&mut self, ch: usize, t: Time, items: Vec<Item>) {
        let mut reqs = Vec::new();
        let mut resps = Vec::new();
        for it in items {
            match it {
                Item::Req(r) => reqs.push(r),
                Item::Resp(r) => resps.push(r),
            }
        }
        if !reqs.is_empty() {
            self.at(t, Ev::ToServer(ch, reqs));
        }
        if !resps.is_empty() {
            self.at(t, Ev::ToClient(ch, resps));
        }
    }
}
