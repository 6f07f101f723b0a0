//! Per-direction stream framer: reassembled TCP bytes in, SMB2 messages out.
//!
//! It walks NBSS messages and, inside them, the parts of compound chains, deciding for each part
//! from its header how much to keep (see [`keep_plan`]): header and fixed body for everything,
//! whole buffers only for SQOS IOCTLs and CREATE requests (the file name). Everything else,
//! READ/WRITE data above all, is skipped by counting, so memory per direction is bounded by
//! `max_keep` whatever the traffic.
//!
//! Lost bytes (`gap`) that fall inside a region being skipped anyway cost nothing: the framer
//! stays in step. Otherwise it drops what it cannot trust and scans for the next plausible
//! message start ([`plausible_message_start`]), as it also does when a stream is picked up
//! in the middle.

use super::body::{fixed_body_len, peek_ctl_code};
use super::error::Smb2Error;
use super::header::{parse_header, Header, ProtocolId, HEADER_LEN};
use super::names::Command;
use super::netbios::{
    parse_nbss_header, plausible_message_start, NbssType, MAX_CONTROL_LEN, MAX_MESSAGE_LEN,
    NBSS_HEADER_LEN, PROBE_LEN,
};
use crate::sqos::FSCTL_STORAGE_QOS_CONTROL;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramerConfig {
    /// Most bytes kept of one message (all its parts together); beyond, parts are cut.
    pub max_keep: usize,
    /// Most compound parts kept per message; further parts are counted, not kept.
    pub max_parts: usize,
}

impl Default for FramerConfig {
    fn default() -> Self {
        FramerConfig {
            max_keep: 1 << 20,
            max_parts: 64,
        }
    }
}

/// One part of a compound chain (or the only part of a plain message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub header: Header,
    /// The kept bytes, starting at the header: header + fixed body, or the whole part.
    pub bytes: Vec<u8>,
    /// Length of the part on the wire (NextCommand, or the rest of the message).
    pub wire_len: u64,
    /// Fewer bytes were kept than wanted (bound hit, or lost to a gap).
    pub cut: bool,
}

/// A complete (or, after a gap, partial) NBSS session message holding SMB2.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Smb2Message {
    /// NBSS length.
    pub len: u32,
    pub parts: Vec<Part>,
    /// Parts beyond `max_parts`: commands counted, bytes not kept.
    pub overflow: Vec<(Command, bool)>,
    /// Bytes of the message that never arrived (gap).
    pub lost_bytes: u64,
    /// A structural problem that ended the walk of the chain early.
    pub malformed: Option<Smb2Error>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FramerEvent {
    Message(Smb2Message),
    /// 0xFD transform header: an encrypted message, not decoded.
    Encrypted {
        len: u32,
    },
    /// 0xFC compression transform header, not decoded.
    Compressed {
        len: u32,
    },
    /// An SMB1 message, skipped.
    Smb1 {
        len: u32,
    },
    /// An NBSS packet other than a session message (keep-alive, session request…).
    SessionControl {
        kind: NbssType,
        len: u32,
    },
    /// Scanning found a message start after skipping `skipped` bytes that could not be framed.
    Resynced {
        skipped: u64,
    },
    /// A gap of `bytes`; `in_step` when the framer kept its place (the bytes were being skipped).
    Gap {
        bytes: u64,
        in_step: bool,
    },
}

/// How much of a part to keep, decided in two steps: first the header and fixed body; once the
/// fixed body is there, maybe the whole part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Proto,
    Header,
    Fixed,
    Whole,
}

#[derive(Debug)]
enum PartState {
    Gather {
        buf: Vec<u8>,
        want: usize,
        phase: Phase,
        header: Option<Header>,
        /// Bytes of the part on the wire (the rest of the message until NextCommand is known).
        wire_len: u64,
        /// Another compound part follows this one.
        next: bool,
    },
    /// Skip `n` bytes, then a next part starts if `next` (compound), else the message must end.
    Skip { n: u64, next: bool },
    /// Skip the rest of the message.
    Rest,
}

#[derive(Debug)]
struct InMessage {
    nb: [u8; 4],
    msg: Smb2Message,
    /// Bytes of the message not yet consumed.
    remaining: u64,
    /// Kept bytes over all parts.
    kept: usize,
    /// The message is not SMB2 (encrypted, compressed, SMB1): no event at its end.
    opaque: bool,
    /// The bytes were not a message start after all: the framer must scan again.
    desync: bool,
    part: PartState,
}

#[derive(Debug)]
enum State {
    /// Looking for a message start; `carry` holds the tail that could still begin one.
    Scan {
        carry: Vec<u8>,
        skipped: u64,
    },
    NbHeader {
        buf: Vec<u8>,
    },
    /// An NBSS packet that is not a session message.
    SkipNbss {
        remaining: u64,
    },
    Message(Box<InMessage>),
}

impl State {
    fn fresh_scan() -> State {
        State::Scan {
            carry: Vec::new(),
            skipped: 0,
        }
    }
}

/// Frames one direction of one connection.
#[derive(Debug)]
pub struct Framer {
    cfg: FramerConfig,
    state: State,
    /// Bytes handed back by a step (a false start) to be looked at again before new input.
    replay: Vec<u8>,
    giveback: Vec<u8>,
}

impl Framer {
    /// A framer for a stream whose first byte may or may not start a message. The first bytes
    /// are tried as an NBSS header (a stream captured from its start); if they are not one, the
    /// framer scans for a plausible message start (a stream picked up in the middle).
    pub fn new(cfg: FramerConfig) -> Self {
        Framer {
            cfg,
            state: State::NbHeader { buf: Vec::new() },
            replay: Vec::new(),
            giveback: Vec::new(),
        }
    }

    /// Bytes currently held (for asserting the memory bound).
    pub fn buffered(&self) -> usize {
        let state = match &self.state {
            State::Scan { carry, .. } => carry.len(),
            State::NbHeader { buf } => buf.len(),
            State::SkipNbss { .. } => 0,
            State::Message(m) => {
                let parts: usize = m.msg.parts.iter().map(|p| p.bytes.len()).sum();
                let cur = match &m.part {
                    PartState::Gather { buf, .. } => buf.len(),
                    _ => 0,
                };
                parts + cur
            }
        };
        state + self.replay.len()
    }

    /// Feed in-order stream bytes.
    pub fn push(&mut self, data: &[u8], out: &mut Vec<FramerEvent>) {
        let mut data = data;
        loop {
            if !self.replay.is_empty() {
                let replay = std::mem::take(&mut self.replay);
                let n = self.step(&replay, out);
                let mut next = std::mem::take(&mut self.giveback);
                next.extend_from_slice(replay.get(n..).unwrap_or(&[]));
                self.replay = next;
                continue;
            }
            if data.is_empty() {
                break;
            }
            let n = self.step(data, out);
            data = data.get(n..).unwrap_or(&[]);
            self.replay = std::mem::take(&mut self.giveback);
        }
    }

    /// `missing` bytes of the stream will never arrive; the next `push` continues after them.
    pub fn gap(&mut self, missing: u64, out: &mut Vec<FramerEvent>) {
        // Bytes waiting for replay came before the gap: process them first.
        self.push(&[], out);
        let state = std::mem::replace(
            &mut self.state,
            State::Scan {
                carry: Vec::new(),
                skipped: 0,
            },
        );
        let (next, in_step) = match state {
            State::SkipNbss { remaining } if missing <= remaining => (
                State::SkipNbss {
                    remaining: remaining - missing,
                },
                true,
            ),
            State::Message(mut m) if missing <= m.remaining => {
                let in_step = m.gap_inside(missing, &self.cfg);
                if m.remaining == 0 {
                    m.finish(out);
                    (State::NbHeader { buf: Vec::new() }, in_step)
                } else {
                    (State::Message(m), in_step)
                }
            }
            State::Message(mut m) => {
                m.msg.lost_bytes = m.msg.lost_bytes.saturating_add(m.remaining);
                m.remaining = 0;
                m.take_current_part(&self.cfg);
                m.finish(out);
                (State::fresh_scan(), false)
            }
            State::Scan { skipped, .. } => (
                State::Scan {
                    carry: Vec::new(),
                    skipped,
                },
                false,
            ),
            State::NbHeader { .. } | State::SkipNbss { .. } => (State::fresh_scan(), false),
        };
        self.state = next;
        out.push(FramerEvent::Gap {
            bytes: missing,
            in_step,
        });
    }

    /// Consume some of `data` (possibly none, when only the state changes); may hand bytes back
    /// through `self.giveback`.
    fn step(&mut self, data: &[u8], out: &mut Vec<FramerEvent>) -> usize {
        let state = std::mem::replace(&mut self.state, State::fresh_scan());
        let (next, used) = match state {
            State::Scan { carry, skipped } => self.scan(carry, skipped, data, out),
            State::NbHeader { mut buf } => {
                let take = (NBSS_HEADER_LEN - buf.len()).min(data.len());
                buf.extend_from_slice(data.get(..take).unwrap_or(&[]));
                (self.after_nb_bytes(buf, out), take)
            }
            State::SkipNbss { remaining } => {
                let take = remaining.min(data.len() as u64);
                let left = remaining - take;
                let next = if left == 0 {
                    State::NbHeader { buf: Vec::new() }
                } else {
                    State::SkipNbss { remaining: left }
                };
                (next, take as usize)
            }
            State::Message(mut m) => {
                let used = m.step(data, &self.cfg, out, &mut self.giveback);
                if m.desync {
                    (
                        State::Scan {
                            carry: Vec::new(),
                            skipped: 1,
                        },
                        used,
                    )
                } else if m.remaining == 0 {
                    m.finish(out);
                    (State::NbHeader { buf: Vec::new() }, used)
                } else {
                    (State::Message(m), used)
                }
            }
        };
        self.state = next;
        used
    }

    fn after_nb_bytes(&mut self, buf: Vec<u8>, out: &mut Vec<FramerEvent>) -> State {
        let Ok(nb) = <[u8; 4]>::try_from(buf.as_slice()) else {
            return State::NbHeader { buf };
        };
        match parse_nbss_header(nb) {
            Some(h) if h.kind == NbssType::SessionMessage => {
                if h.length > MAX_MESSAGE_LEN {
                    self.giveback.extend_from_slice(&nb[1..]);
                    return State::fresh_scan();
                }
                if h.length == 0 {
                    return State::NbHeader { buf: Vec::new() };
                }
                State::Message(Box::new(InMessage {
                    nb,
                    msg: Smb2Message {
                        len: h.length,
                        ..Smb2Message::default()
                    },
                    remaining: u64::from(h.length),
                    kept: 0,
                    opaque: false,
                    desync: false,
                    part: PartState::Gather {
                        buf: Vec::new(),
                        want: 4,
                        phase: Phase::Proto,
                        header: None,
                        wire_len: u64::from(h.length),
                        next: false,
                    },
                }))
            }
            Some(h) if h.length <= MAX_CONTROL_LEN => {
                out.push(FramerEvent::SessionControl {
                    kind: h.kind,
                    len: h.length,
                });
                if h.length == 0 {
                    State::NbHeader { buf: Vec::new() }
                } else {
                    State::SkipNbss {
                        remaining: u64::from(h.length),
                    }
                }
            }
            Some(_) | None => {
                self.giveback.extend_from_slice(&nb[1..]);
                State::Scan {
                    carry: Vec::new(),
                    skipped: 1,
                }
            }
        }
    }

    /// End of the stream: a message still being received is reported with what arrived.
    pub fn finish(&mut self, out: &mut Vec<FramerEvent>) {
        self.replay.clear();
        let state = std::mem::replace(&mut self.state, State::fresh_scan());
        if let State::Message(mut m) = state {
            m.msg.lost_bytes = m.msg.lost_bytes.saturating_add(m.remaining);
            m.remaining = 0;
            m.take_current_part(&self.cfg);
            m.finish(out);
        }
    }

    /// Scan for a message start. Returns the next state and the bytes of `data` consumed.
    fn scan(
        &mut self,
        mut carry: Vec<u8>,
        mut skipped: u64,
        data: &[u8],
        out: &mut Vec<FramerEvent>,
    ) -> (State, usize) {
        let found = |skipped: u64, out: &mut Vec<FramerEvent>| {
            if skipped > 0 {
                out.push(FramerEvent::Resynced { skipped });
            }
            State::NbHeader { buf: Vec::new() }
        };
        // Candidates starting in the carried tail need the first bytes of `data` to be judged.
        if !carry.is_empty() {
            let head = data.get(..PROBE_LEN.min(data.len())).unwrap_or(&[]);
            let mut window = carry.clone();
            window.extend_from_slice(head);
            for p in 0..carry.len() {
                let cand = window.get(p..).unwrap_or(&[]);
                if cand.len() < PROBE_LEN {
                    break;
                }
                if plausible_message_start(cand) {
                    // The carried bytes from `p` on are the start of the message: replay them.
                    self.giveback = carry.split_off(p);
                    return (found(skipped + p as u64, out), 0);
                }
            }
        }
        let mut q = 0usize;
        while q + PROBE_LEN <= data.len() {
            if data.get(q..).is_some_and(plausible_message_start) {
                let skipped = skipped + carry.len() as u64 + q as u64;
                return (found(skipped, out), q);
            }
            q += 1;
        }
        // Keep the tail that could still start a message.
        carry.extend_from_slice(data);
        let keep = PROBE_LEN - 1;
        if carry.len() > keep {
            let drop = carry.len() - keep;
            skipped += drop as u64;
            carry.drain(..drop);
        }
        (State::Scan { carry, skipped }, data.len())
    }
}

impl InMessage {
    fn is_first_part(&self) -> bool {
        self.msg.parts.is_empty() && self.msg.overflow.is_empty()
    }

    /// Give up on framing: the bytes taken for an NBSS header were not one.
    fn desync(&mut self, buf: &[u8], giveback: &mut Vec<u8>) {
        giveback.extend_from_slice(&self.nb[1..]);
        giveback.extend_from_slice(buf);
        self.desync = true;
    }

    fn malformed(&mut self, e: Smb2Error) {
        self.msg.malformed = Some(e);
        self.part = PartState::Rest;
    }

    fn step(
        &mut self,
        data: &[u8],
        cfg: &FramerConfig,
        out: &mut Vec<FramerEvent>,
        giveback: &mut Vec<u8>,
    ) -> usize {
        let avail = (data.len() as u64).min(self.remaining);
        match &mut self.part {
            PartState::Skip { n, next } => {
                let take = (*n).min(avail);
                *n -= take;
                self.remaining -= take;
                if *n == 0 {
                    self.part = if *next {
                        PartState::Gather {
                            buf: Vec::new(),
                            want: 4,
                            phase: Phase::Proto,
                            header: None,
                            wire_len: self.remaining,
                            next: false,
                        }
                    } else {
                        PartState::Rest
                    };
                }
                take as usize
            }
            PartState::Rest => {
                self.remaining -= avail;
                avail as usize
            }
            PartState::Gather { buf, want, .. } => {
                let need = (*want).saturating_sub(buf.len()) as u64;
                let take = need.min(avail) as usize;
                buf.extend_from_slice(data.get(..take).unwrap_or(&[]));
                self.remaining -= take as u64;
                let (have, want) = (buf.len(), *want);
                if have >= want {
                    self.advance(cfg, out, giveback);
                } else if self.remaining == 0 && take == 0 {
                    // The message ended before the part's bytes: nothing more will come.
                    self.malformed(Smb2Error::Truncated {
                        what: "SMB2 message",
                        needed: want,
                        available: have,
                    });
                }
                take
            }
        }
    }

    /// The bytes wanted for the current phase are there: decide what comes next.
    fn advance(&mut self, cfg: &FramerConfig, out: &mut Vec<FramerEvent>, giveback: &mut Vec<u8>) {
        let first = self.is_first_part();
        let PartState::Gather {
            buf,
            want,
            phase,
            header,
            wire_len,
            next,
        } = &mut self.part
        else {
            return;
        };
        match *phase {
            Phase::Proto => {
                let proto = buf
                    .get(..4)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .and_then(ProtocolId::from_bytes);
                let len = self.msg.len;
                match (proto, first) {
                    (Some(ProtocolId::Smb2), _) => {
                        if *wire_len < HEADER_LEN as u64 {
                            let available = *wire_len as usize;
                            if first {
                                let b = std::mem::take(buf);
                                self.desync(&b, giveback);
                            } else {
                                self.malformed(Smb2Error::Truncated {
                                    what: "SMB2 header",
                                    needed: HEADER_LEN,
                                    available,
                                });
                            }
                            return;
                        }
                        *want = HEADER_LEN;
                        *phase = Phase::Header;
                    }
                    (Some(p), true) => {
                        out.push(match p {
                            ProtocolId::Transform => FramerEvent::Encrypted { len },
                            ProtocolId::Compressed => FramerEvent::Compressed { len },
                            _ => FramerEvent::Smb1 { len },
                        });
                        self.opaque = true;
                        self.part = PartState::Rest;
                    }
                    (None, true) => {
                        let b = std::mem::take(buf);
                        self.desync(&b, giveback);
                    }
                    (_, false) => {
                        let mut id = [0u8; 4];
                        for (d, s) in id.iter_mut().zip(buf.iter()) {
                            *d = *s;
                        }
                        self.malformed(Smb2Error::UnknownProtocol(id));
                    }
                }
            }
            Phase::Header => match parse_header(buf) {
                Ok(h) => {
                    let nc = u64::from(h.next_command);
                    if nc != 0 {
                        if nc % 8 == 0 && nc >= HEADER_LEN as u64 && nc <= *wire_len {
                            *next = nc < *wire_len;
                            *wire_len = nc;
                        } else {
                            // Keep this part, walk no further.
                            self.msg.malformed = Some(Smb2Error::OutOfBounds {
                                what: "NextCommand",
                                offset: nc as usize,
                                len: HEADER_LEN,
                                available: *wire_len as usize,
                            });
                        }
                    }
                    let fixed = HEADER_LEN + fixed_body_len(h.command, h.is_response());
                    *want = fixed.min(*wire_len as usize);
                    *header = Some(h);
                    *phase = Phase::Fixed;
                    if buf.len() >= *want {
                        self.advance(cfg, out, giveback);
                    }
                }
                Err(e) => {
                    if first {
                        let b = std::mem::take(buf);
                        self.desync(&b, giveback);
                    } else {
                        self.malformed(e);
                    }
                }
            },
            Phase::Fixed => {
                let Some(h) = header else {
                    return;
                };
                let whole = keep_plan(h, buf, *wire_len);
                let budget = cfg.max_keep.saturating_sub(self.kept);
                let allowed = whole.min(budget).max(buf.len());
                *want = allowed;
                *phase = Phase::Whole;
                if allowed > buf.len() {
                    return;
                }
                let cut = allowed < whole;
                self.finish_part(cfg, cut);
            }
            Phase::Whole => {
                let cut = match header {
                    Some(h) => keep_plan(h, buf, *wire_len) > buf.len(),
                    None => false,
                };
                self.finish_part(cfg, cut);
            }
        }
    }

    /// The current part has all the bytes it keeps: store it and skip the rest of it.
    fn finish_part(&mut self, cfg: &FramerConfig, cut: bool) {
        let part = std::mem::replace(&mut self.part, PartState::Rest);
        let PartState::Gather {
            buf,
            header: Some(header),
            wire_len,
            next,
            ..
        } = part
        else {
            return;
        };
        let have = buf.len() as u64;
        self.store(cfg, header, buf, wire_len, cut);
        self.part = PartState::Skip {
            n: wire_len.saturating_sub(have),
            next,
        };
    }

    fn store(
        &mut self,
        cfg: &FramerConfig,
        header: Header,
        buf: Vec<u8>,
        wire_len: u64,
        cut: bool,
    ) {
        if self.msg.parts.len() >= cfg.max_parts {
            self.msg
                .overflow
                .push((header.command, header.is_response()));
            return;
        }
        self.kept = self.kept.saturating_add(buf.len());
        self.msg.parts.push(Part {
            header,
            bytes: buf,
            wire_len,
            cut,
        });
    }

    /// Keep what arrived of the part being gathered (if its header is there), marked cut.
    fn take_current_part(&mut self, cfg: &FramerConfig) {
        let part = std::mem::replace(&mut self.part, PartState::Rest);
        if let PartState::Gather {
            buf,
            header: Some(header),
            wire_len,
            ..
        } = part
        {
            self.store(cfg, header, buf, wire_len, true);
        }
    }

    /// `missing` (≤ remaining) bytes of this message are lost. Returns true when nothing that
    /// was wanted is lost (the bytes were being skipped).
    fn gap_inside(&mut self, missing: u64, cfg: &FramerConfig) -> bool {
        self.remaining -= missing;
        let in_step = match &mut self.part {
            PartState::Skip { n, .. } if missing <= *n => {
                *n -= missing;
                if *n == 0 {
                    // Same transition as after skipping: advance with no data.
                    let next = matches!(self.part, PartState::Skip { next: true, .. });
                    self.part = if next {
                        PartState::Gather {
                            buf: Vec::new(),
                            want: 4,
                            phase: Phase::Proto,
                            header: None,
                            wire_len: self.remaining,
                            next: false,
                        }
                    } else {
                        PartState::Rest
                    };
                }
                true
            }
            PartState::Rest => true,
            PartState::Skip { .. } => {
                // The next part's header is in the hole: the rest of the chain is unknown.
                self.part = PartState::Rest;
                false
            }
            PartState::Gather {
                buf,
                header: Some(_),
                wire_len,
                next,
                ..
            } => {
                let have = buf.len() as u64;
                let after = wire_len.saturating_sub(have);
                let next = *next;
                let resume = (missing <= after).then(|| PartState::Skip {
                    n: after - missing,
                    next,
                });
                self.take_current_part(cfg);
                if let Some(p) = resume {
                    self.part = p;
                }
                false
            }
            PartState::Gather { header: None, .. } => {
                self.part = PartState::Rest;
                false
            }
        };
        if !in_step {
            self.msg.lost_bytes = self.msg.lost_bytes.saturating_add(missing);
        }
        in_step
    }

    /// The message is over: report it (unless opaque or nothing of it was understood).
    fn finish(self, out: &mut Vec<FramerEvent>) {
        if self.opaque {
            return;
        }
        if !self.msg.parts.is_empty() || !self.msg.overflow.is_empty() {
            out.push(FramerEvent::Message(self.msg));
        }
    }
}

/// How many bytes of a part to keep, given its header and fixed body: the whole part for SQOS
/// IOCTLs (the SQOS buffer), up to the end of the name for CREATE requests, else the fixed part.
fn keep_plan(h: &Header, fixed: &[u8], wire_len: u64) -> usize {
    let wire = usize::try_from(wire_len).unwrap_or(usize::MAX);
    let whole = match h.command {
        Command::IOCTL if peek_ctl_code(fixed) == Some(FSCTL_STORAGE_QOS_CONTROL) => wire,
        Command::CREATE if !h.is_response() => {
            let u16_at = |at: usize| {
                let b: [u8; 2] = fixed.get(at..at + 2)?.try_into().ok()?;
                Some(usize::from(u16::from_le_bytes(b)))
            };
            match (u16_at(HEADER_LEN + 44), u16_at(HEADER_LEN + 46)) {
                (Some(off), Some(len)) => off.saturating_add(len),
                _ => fixed.len(),
            }
        }
        _ => fixed.len(),
    };
    whole.min(wire).max(fixed.len())
}
