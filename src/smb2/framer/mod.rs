//! Per-direction stream framer: reassembled TCP bytes in, SMB2 messages out.
//!
//! It walks NBSS messages and, inside them, the parts of compound chains, deciding for each part
//! from its header how much to keep (see `chain::keep_plan`): header and fixed body for everything,
//! whole buffers only for the IOCTLs whose control codes the configuration names (the pipeline
//! names FSCTL_STORAGE_QOS_CONTROL; SMB2 itself knows nothing of SQOS) and CREATE requests (the
//! file name). Everything else,
//! READ/WRITE data above all, is skipped by counting, so memory per direction is bounded by
//! `max_keep` whatever the traffic.
//!
//! A part's head is decided a phase at a time (protocol id, header, fixed body, whole part) as
//! its bytes arrive; when a one-part message's head and all it keeps are already at hand (most
//! READs and WRITEs, one segment holding them), `chain::part_head` decides the same at once.
//!
//! Lost bytes (`gap`) that fall inside a region being skipped anyway cost nothing: the framer
//! stays in step. Otherwise it drops what it cannot trust and scans for the next plausible
//! message start ([`plausible_message_start`]), as it also does when a stream is picked up
//! in the middle.

mod chain;
mod sealed;
mod squeezed;

use chain::InMessage;
pub use sealed::{SealOutcome, SealSpares, SealedInfo, STREAM_MIN};
use smallvec::SmallVec;
pub use squeezed::CompressOutcome;

use super::crypto::Decryptor;

use super::body::MAX_FIXED_BODY_LEN;
use super::error::Smb2Error;
use super::header::{Header, HEADER_LEN};
use super::names::Command;
use super::netbios::{
    parse_nbss_header, plausible_message_start, NbssType, MAX_CONTROL_LEN, MAX_MESSAGE_LEN,
    NBSS_HEADER_LEN, PROBE_LEN,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramerConfig {
    /// Most bytes kept of one message (all its parts together); beyond, parts are cut.
    pub max_keep: usize,
    /// Most compound parts kept per message; further parts are counted, not kept.
    pub max_parts: usize,
    /// IOCTL control codes whose input and output buffers are kept whole (up to `max_keep`);
    /// other IOCTLs keep their fixed part.
    pub keep_ioctls: &'static [u32],
}

impl Default for FramerConfig {
    /// Keeps no IOCTL buffers: the user of the framer says which it wants.
    fn default() -> Self {
        FramerConfig {
            max_keep: 1 << 20,
            max_parts: 64,
            keep_ioctls: &[],
        }
    }
}

/// A part's kept bytes: inline up to a header and the longest fixed body (what a READ or WRITE
/// keeps), on the heap beyond (a whole IOCTL, a CREATE's name).
pub type PartBytes = SmallVec<[u8; HEADER_LEN + MAX_FIXED_BODY_LEN]>;

/// One part of a compound chain (or the only part of a plain message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub header: Header,
    /// The kept bytes, starting at the header: header + fixed body, or the whole part.
    pub bytes: PartBytes,
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
    pub parts: SmallVec<[Part; 1]>,
    /// Parts beyond `max_parts`: commands counted, bytes not kept.
    pub overflow: Vec<(Command, bool)>,
    /// Bytes of the message that never arrived (gap).
    pub lost_bytes: u64,
    /// A structural problem that ended the walk of the chain early.
    pub malformed: Option<Smb2Error>,
    /// The message came out of an encrypted (0xFD) message.
    pub sealed: Option<SealedInfo>,
}

/// What the framer needs to open encrypted messages: the capture's decryption state, and
/// where the bytes come from.
pub struct SealCtx<'a> {
    /// None: no keys, encrypted messages are counted only.
    pub crypto: Option<&'a mut Decryptor>,
    /// The connection (its NEGOTIATE and SESSION_SETUP feed the preauth hash).
    pub conn: u32,
    /// The bytes travel to the server (client-to-server key).
    pub to_server: bool,
    /// Where encrypted messages' boxes and buffers are kept for the next ones (None: each
    /// message allocates its own).
    pub spares: Option<&'a mut SealSpares>,
}

impl SealCtx<'_> {
    /// No decryption.
    pub fn none() -> SealCtx<'static> {
        SealCtx {
            crypto: None,
            conn: 0,
            to_server: true,
            spares: None,
        }
    }
}

// Large on purpose: a message's parts are inline (no allocation per message). On one thread a
// message does not travel in this enum ([`FramerOut::message`]); a worker sends it in one.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FramerEvent {
    Message(Smb2Message),
    /// 0xFD transform header: an encrypted message, and what became of it. When decrypted,
    /// the SMB2 messages inside follow as `Message` events.
    Encrypted {
        len: u32,
        session_id: Option<u64>,
        outcome: SealOutcome,
    },
    /// 0xFC compression transform header (in clear, or inside an encrypted message), and
    /// what became of it. When decompressed, the SMB2 message inside follows as a `Message`.
    Compressed {
        len: u32,
        outcome: CompressOutcome,
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
    /// The stream ended (or a gap came) while scanning: `skipped` bytes were passed over
    /// without finding a message start (e.g. a NetBIOS length over `MAX_MESSAGE_LEN`).
    Unsynced {
        skipped: u64,
    },
    /// A gap of `bytes`; `in_step` when the framer kept its place (the bytes were being skipped).
    Gap {
        bytes: u64,
        in_step: bool,
    },
}

/// Where a framer's events go. A `Vec` collects them (a `--threads` worker sends them on); the
/// layer handles each as it is given (`pipeline::events`), a message by reference: it is then
/// never copied out of the walker that framed it.
pub trait FramerOut {
    /// Any event but a message.
    fn event(&mut self, ev: FramerEvent);
    /// A framed message. The receiver reads it or takes it (`std::mem::take`); the framer
    /// clears what is left before it frames the next one.
    fn message(&mut self, m: &mut Smb2Message);
}

impl FramerOut for Vec<FramerEvent> {
    fn event(&mut self, ev: FramerEvent) {
        self.push(ev);
    }

    fn message(&mut self, m: &mut Smb2Message) {
        self.push(FramerEvent::Message(std::mem::take(m)));
    }
}

#[derive(Debug)]
enum State {
    /// Looking for a message start; `carry` holds the tail that could still begin one.
    Scan {
        carry: Vec<u8>,
        skipped: u64,
    },
    NbHeader {
        buf: NbBytes,
    },
    /// An NBSS packet that is not a session message.
    SkipNbss {
        remaining: u64,
    },
    Message(Box<InMessage>),
}

/// The bytes of a fixed-size field as they arrive (one split across segments), held without an
/// allocation: an NBSS header (where a message's framing begins), an encrypted message's
/// transform header and first ciphertext bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Gathered<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Default for Gathered<N> {
    fn default() -> Self {
        Gathered {
            bytes: [0; N],
            len: 0,
        }
    }
}

impl<const N: usize> Gathered<N> {
    /// Takes what the first `want` bytes (at most `N`) still lack from the start of `data`;
    /// returns how many bytes.
    pub(super) fn fill_to(&mut self, want: usize, data: &[u8]) -> usize {
        // The whole field in one piece, as it mostly comes: a copy of known length.
        if self.len == 0 && want >= N {
            if let Some(whole) = data.first_chunk::<N>() {
                self.bytes = *whole;
                self.len = N;
                return N;
            }
        }
        let take = want.min(N).saturating_sub(self.len).min(data.len());
        self.bytes[self.len..self.len + take].copy_from_slice(&data[..take]);
        self.len += take;
        take
    }

    /// [`Gathered::fill_to`] all `N` bytes.
    pub(super) fn fill(&mut self, data: &[u8]) -> usize {
        self.fill_to(N, data)
    }

    /// All `N` bytes, once they are there.
    pub(super) fn whole(&self) -> Option<[u8; N]> {
        (self.len == N).then_some(self.bytes)
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    pub(super) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[..self.len]
    }
}

/// An NBSS header's bytes as they arrive.
type NbBytes = Gathered<NBSS_HEADER_LEN>;

impl State {
    fn nb_header() -> State {
        State::NbHeader {
            buf: NbBytes::default(),
        }
    }

    fn fresh_scan() -> State {
        State::Scan {
            carry: Vec::new(),
            skipped: 0,
        }
    }

    /// Scanning again after a false message start, its first byte skipped.
    fn rescan() -> State {
        State::Scan {
            carry: Vec::new(),
            skipped: 1,
        }
    }
}

/// Bytes a framer holds besides its message's kept bytes: itself and its boxed message walker
/// (in progress, or kept for the next message; the header being gathered and the message's
/// parts are inline in it), with the allocation's header. Part of a connection's entry cost
/// (`Kind::Connections`; checked by a test in `pipeline`).
#[cfg(test)]
pub(crate) const FRAMER_BYTES: usize =
    std::mem::size_of::<Framer>() + std::mem::size_of::<InMessage>() + 16;

/// Frames one direction of one connection.
#[derive(Debug)]
pub struct Framer {
    cfg: FramerConfig,
    state: State,
    /// Bytes handed back by a step (a false start) to be looked at again before new input.
    replay: Vec<u8>,
    giveback: Vec<u8>,
    /// The last message's walker, kept for the next: a message then costs no allocation for
    /// it (one per message before).
    spare: Option<Box<InMessage>>,
}

impl Framer {
    /// A framer for a stream whose first byte may or may not start a message. The first bytes
    /// are tried as an NBSS header (a stream captured from its start); if they are not one, the
    /// framer scans for a plausible message start (a stream picked up in the middle).
    pub fn new(cfg: FramerConfig) -> Self {
        Framer {
            cfg,
            state: State::nb_header(),
            replay: Vec::new(),
            giveback: Vec::new(),
            spare: None,
        }
    }

    /// Bytes currently held (for asserting the memory bound).
    pub fn buffered(&self) -> usize {
        let state = match &self.state {
            State::Scan { carry, .. } => carry.len(),
            State::NbHeader { buf } => buf.len(),
            State::SkipNbss { .. } => 0,
            State::Message(m) => m.buffered(),
        };
        state + self.replay.len()
    }

    /// True while a message has begun and not yet been handed out.
    pub fn in_message(&self) -> bool {
        !self.replay.is_empty()
            || match &self.state {
                State::Message(_) => true,
                State::NbHeader { buf } => buf.len() > 0,
                State::Scan { .. } | State::SkipNbss { .. } => false,
            }
    }

    /// Give back the bytes held for the message in progress (a memory bound over all framers was
    /// hit): its parts keep only header and fixed body and are marked cut. Returns bytes freed.
    pub fn shed(&mut self) -> usize {
        let before = self.buffered();
        if let State::Message(m) = &mut self.state {
            m.shed(&self.cfg);
        }
        before.saturating_sub(self.buffered())
    }

    /// Feed in-order stream bytes (encrypted messages are counted, not opened).
    pub fn push(&mut self, data: &[u8], out: &mut dyn FramerOut) {
        self.push_sealed(data, &mut SealCtx::none(), out);
    }

    /// Feed in-order stream bytes, opening encrypted messages with `ctx`.
    pub fn push_sealed(&mut self, data: &[u8], ctx: &mut SealCtx<'_>, out: &mut dyn FramerOut) {
        let mut data = data;
        loop {
            if !self.replay.is_empty() {
                let replay = std::mem::take(&mut self.replay);
                let n = self.step(&replay, ctx, out);
                let mut next = std::mem::take(&mut self.giveback);
                next.extend_from_slice(replay.get(n..).unwrap_or(&[]));
                self.replay = next;
                continue;
            }
            if data.is_empty() {
                break;
            }
            let n = self.step(data, ctx, out);
            data = data.get(n..).unwrap_or(&[]);
            if !self.giveback.is_empty() {
                self.replay = std::mem::take(&mut self.giveback);
            }
        }
    }

    /// Counts `len` in-order bytes off when they lie inside data the framer skips anyway (the
    /// middle of a READ or WRITE payload, of a part it does not keep, of an NBSS packet that is
    /// not a session message) and end before it: exactly what [`Framer::push`] would do with
    /// them, without looking at them. False (nothing done): they need `push`. Counting off
    /// `a` then `b` bytes is counting off `a + b`: the bulk lane counts a run off at once.
    pub fn skip_within(&mut self, len: usize) -> bool {
        let len = len as u64;
        if len == 0 || len > self.skip_room() {
            return false;
        }
        match &mut self.state {
            State::SkipNbss { remaining } => *remaining -= len,
            State::Message(m) => m.skip(len),
            _ => return false,
        }
        true
    }

    /// The most bytes [`Framer::skip_within`] would count off now (0: none).
    pub fn skip_room(&self) -> u64 {
        if !self.replay.is_empty() {
            return 0;
        }
        match &self.state {
            State::SkipNbss { remaining } => remaining.saturating_sub(1),
            State::Message(m) => m.skip_room(),
            _ => 0,
        }
    }

    /// `missing` bytes of the stream will never arrive; the next `push` continues after them.
    pub fn gap(&mut self, missing: u64, out: &mut dyn FramerOut) {
        self.gap_sealed(missing, &mut SealCtx::none(), out);
    }

    /// [`Framer::gap`] with decryption.
    pub fn gap_sealed(&mut self, missing: u64, ctx: &mut SealCtx<'_>, out: &mut dyn FramerOut) {
        // Bytes waiting for replay came before the gap: process them first.
        self.push_sealed(&[], ctx, out);
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
                let in_step = m.gap_inside(missing, &self.cfg, ctx, out);
                if m.remaining == 0 {
                    self.finish_keeping(m, out, ctx);
                    (State::nb_header(), in_step)
                } else {
                    (State::Message(m), in_step)
                }
            }
            State::Message(m) => {
                self.finish_short(m, out, ctx);
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
        out.event(FramerEvent::Gap {
            bytes: missing,
            in_step,
        });
    }

    /// `m` is done: its message handed out, its box kept for the next one (an empty walker,
    /// which allocates nothing, in its place until then).
    fn finish_keeping(
        &mut self,
        mut m: Box<InMessage>,
        out: &mut dyn FramerOut,
        ctx: &mut SealCtx<'_>,
    ) {
        m.finish(&self.cfg, out, ctx);
        // Kept for the next message without what it held (an encrypted or compressed
        // message's buffers are the framer's bytes only while it is in progress).
        m.part = chain::PartState::Rest;
        self.spare = Some(m);
    }

    /// `m` ends short of its length (a gap it cannot span, the end of the stream): the bytes it
    /// still lacked are counted lost, its part so far kept, and it is handed out.
    fn finish_short(
        &mut self,
        mut m: Box<InMessage>,
        out: &mut dyn FramerOut,
        ctx: &mut SealCtx<'_>,
    ) {
        m.msg.lost_bytes = m.msg.lost_bytes.saturating_add(m.remaining);
        m.remaining = 0;
        m.take_current_part(&self.cfg);
        self.finish_keeping(m, out, ctx);
    }

    /// Consume some of `data` (possibly none, when only the state changes); may hand bytes back
    /// through `self.giveback`. A message in progress is stepped where it is held (no move of
    /// the state out and back per step).
    fn step(&mut self, data: &[u8], ctx: &mut SealCtx<'_>, out: &mut dyn FramerOut) -> usize {
        if matches!(&self.state, State::NbHeader { buf } if buf.len() == 0) {
            if let Some(used) = self.frame_in_place(data, ctx, out) {
                return used;
            }
        }
        match &mut self.state {
            State::Message(m) => {
                let used = m.step(data, &self.cfg, out, &mut self.giveback, ctx);
                self.after_message_step(ctx, out);
                used
            }
            State::NbHeader { buf } => {
                let take = buf.fill(data);
                let buf = *buf;
                self.state = self.after_nb_bytes(buf, out);
                // The message goes on in this step (one round less through `push_sealed` a
                // message).
                match data.get(take..) {
                    Some(rest) if !rest.is_empty() && matches!(self.state, State::Message(_)) => {
                        take + self.step(rest, ctx, out)
                    }
                    _ => take,
                }
            }
            State::SkipNbss { remaining } => {
                let take = (*remaining).min(data.len() as u64);
                *remaining -= take;
                if *remaining == 0 {
                    self.state = State::nb_header();
                }
                take as usize
            }
            State::Scan { .. } => {
                let State::Scan { carry, skipped } =
                    std::mem::replace(&mut self.state, State::fresh_scan())
                else {
                    return 0;
                };
                let (next, used) = self.scan(carry, skipped, data, out);
                self.state = next;
                used
            }
        }
    }

    /// A message at the start of `data` framed where it lies, when [`chain::message_head`]
    /// finds its one part's head there; returns the bytes consumed (the NBSS header and the
    /// part's kept bytes).
    fn frame_in_place(
        &mut self,
        data: &[u8],
        ctx: &mut SealCtx<'_>,
        out: &mut dyn FramerOut,
    ) -> Option<usize> {
        let (nb, len, head) = chain::message_head(data, &self.cfg)?;
        let kept = data.get(NBSS_HEADER_LEN..NBSS_HEADER_LEN + head.keep)?;
        let mut m = match self.spare.take() {
            Some(mut spare) => {
                spare.reset_to(nb, len, chain::PartState::Rest);
                spare
            }
            None => Box::new(InMessage::new(nb, len)),
        };
        m.take_head(&head, kept, &self.cfg);
        if m.remaining == 0 {
            self.finish_keeping(m, out, ctx);
        } else {
            self.state = State::Message(m);
        }
        Some(NBSS_HEADER_LEN + head.keep)
    }

    /// After a step inside a message: a false start goes back to scanning, a message whose
    /// bytes are all there is handed out.
    fn after_message_step(&mut self, ctx: &mut SealCtx<'_>, out: &mut dyn FramerOut) {
        let State::Message(m) = &self.state else {
            return;
        };
        if m.desync {
            self.state = State::rescan();
        } else if m.remaining == 0 {
            if let State::Message(m) = std::mem::replace(&mut self.state, State::nb_header()) {
                self.finish_keeping(m, out, ctx);
            }
        }
    }

    fn after_nb_bytes(&mut self, buf: NbBytes, out: &mut dyn FramerOut) -> State {
        let Some(nb) = buf.whole() else {
            return State::NbHeader { buf };
        };
        match parse_nbss_header(nb) {
            Some(h) if h.kind == NbssType::SessionMessage => {
                if h.length > MAX_MESSAGE_LEN {
                    // Not a message we would follow: its first byte is skipped (and counted),
                    // the rest scanned for a message start.
                    self.giveback.extend_from_slice(&nb[1..]);
                    return State::rescan();
                }
                if h.length == 0 {
                    return State::nb_header();
                }
                State::Message(match self.spare.take() {
                    Some(mut spare) => {
                        spare.reset(nb, h.length);
                        spare
                    }
                    None => Box::new(InMessage::new(nb, h.length)),
                })
            }
            Some(h) if h.length <= MAX_CONTROL_LEN => {
                out.event(FramerEvent::SessionControl {
                    kind: h.kind,
                    len: h.length,
                });
                if h.length == 0 {
                    State::nb_header()
                } else {
                    State::SkipNbss {
                        remaining: u64::from(h.length),
                    }
                }
            }
            Some(_) | None => {
                self.giveback.extend_from_slice(&nb[1..]);
                State::rescan()
            }
        }
    }

    /// End of the stream: a message still being received is reported with what arrived.
    pub fn finish(&mut self, out: &mut dyn FramerOut) {
        self.finish_sealed(&mut SealCtx::none(), out);
    }

    /// [`Framer::finish`] with decryption.
    pub fn finish_sealed(&mut self, ctx: &mut SealCtx<'_>, out: &mut dyn FramerOut) {
        // Bytes handed back for another look are scanned before the end.
        self.push_sealed(&[], ctx, out);
        self.replay.clear();
        let state = std::mem::replace(&mut self.state, State::fresh_scan());
        match state {
            State::Message(m) => self.finish_short(m, out, ctx),
            State::Scan { carry, skipped } if skipped + carry.len() as u64 > 0 => {
                out.event(FramerEvent::Unsynced {
                    skipped: skipped + carry.len() as u64,
                });
            }
            _ => {}
        }
    }

    /// Scan for a message start. Returns the next state and the bytes of `data` consumed.
    fn scan(
        &mut self,
        mut carry: Vec<u8>,
        mut skipped: u64,
        data: &[u8],
        out: &mut dyn FramerOut,
    ) -> (State, usize) {
        let found = |skipped: u64, out: &mut dyn FramerOut| {
            if skipped > 0 {
                out.event(FramerEvent::Resynced { skipped });
            }
            State::nb_header()
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

#[cfg(test)]
mod tests {
    use super::Gathered;

    #[test]
    fn a_gathered_field_takes_what_it_lacks_from_each_piece_and_no_more() {
        let mut g = Gathered::<6>::default();
        assert_eq!(g.fill(&[1, 2]), 2);
        assert_eq!(g.whole(), None);
        // Wanting fewer than all: only up to that many.
        assert_eq!(g.fill_to(4, &[3, 4, 5]), 2);
        assert_eq!(g.as_slice(), [1, 2, 3, 4]);
        assert_eq!(g.fill_to(4, &[9]), 0);
        // More than N wanted is N; a piece longer than what is lacking is taken in part.
        assert_eq!(g.fill_to(100, &[5, 6, 7, 8]), 2);
        assert_eq!(g.whole(), Some([1, 2, 3, 4, 5, 6]));
        assert_eq!(g.fill(&[0]), 0);
        g.as_mut_slice()[0] = 0xff;
        assert_eq!((g.len(), g.as_slice()[0]), (6, 0xff));
    }
}
