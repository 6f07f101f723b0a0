//! Walking one NBSS session message: its compound parts, how much of each to keep, what a gap
//! inside it costs.

use super::sealed::{Sealed, SealedInfo};
use super::squeezed::Squeezed;
use super::{FramerConfig, FramerEvent, FramerOut, Part, PartBytes, SealCtx, Smb2Message};
use crate::smb2::body::{fixed_body_len, peek_ctl_code};
use crate::smb2::error::Smb2Error;
use crate::smb2::header::{parse_header, Header, ProtocolId, HEADER_LEN};
use crate::smb2::names::Command;
use crate::smb2::netbios::{parse_nbss_header, NbssType, MAX_MESSAGE_LEN, NBSS_HEADER_LEN};

/// How much of a part to keep, decided in two steps: first the header and fixed body; once the
/// fixed body is there, maybe the whole part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Proto,
    Header,
    Fixed,
    Whole,
}

// Large on purpose: the header being gathered is held inline (`PartBytes`), so that a message
// costs no allocation; the state lives in a message box the framer reuses.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum PartState {
    Gather {
        buf: PartBytes,
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
    /// An encrypted message: its transform header, keys and plaintext (see `sealed`).
    Sealed(Box<Sealed>),
    /// A compressed message: its bytes, decompressed at its end (see `squeezed`).
    Compressed(Box<Squeezed>),
}

#[derive(Debug)]
pub(super) struct InMessage {
    pub(super) nb: [u8; 4],
    pub(super) msg: Smb2Message,
    /// Bytes of the message not yet consumed.
    pub(super) remaining: u64,
    /// Kept bytes over all parts (a running count: `buffered` is asked twice per chunk of
    /// stream data, so it must not sum the parts).
    pub(super) kept: usize,
    /// The message is not SMB2 (encrypted, compressed, SMB1): no event at its end.
    pub(super) opaque: bool,
    /// The bytes were not a message start after all: the framer must scan again.
    pub(super) desync: bool,
    /// The plaintext of an encrypted message: not a stream position, so never a desync.
    pub(super) inner: bool,
    /// Keep only headers and fixed bodies (an encrypted message read without authentication).
    pub(super) headers_only: bool,
    pub(super) part: PartState,
}

fn first_gather(wire_len: u64) -> PartState {
    // The header and the longest fixed body fit inline: gathered a phase at a time (4, 64, then
    // 64 + the fixed body) with no allocation; a part kept whole moves to the heap.
    PartState::Gather {
        buf: PartBytes::new(),
        want: 4,
        phase: Phase::Proto,
        header: None,
        wire_len,
        next: false,
    }
}

impl InMessage {
    /// An NBSS session message of `len` bytes whose header was `nb`.
    pub(super) fn new(nb: [u8; 4], len: u32) -> InMessage {
        InMessage {
            nb,
            msg: Smb2Message {
                len,
                ..Smb2Message::default()
            },
            remaining: u64::from(len),
            kept: 0,
            opaque: false,
            desync: false,
            inner: false,
            headers_only: false,
            part: first_gather(u64::from(len)),
        }
    }

    /// [`InMessage::new`] in place (a spare message reused: no copy of its inline buffers).
    pub(super) fn reset(&mut self, nb: [u8; 4], len: u32) {
        self.reset_to(nb, len, first_gather(u64::from(len)));
    }

    /// [`InMessage::reset`] to begin in `first` (a message whose part [`InMessage::take_head`]
    /// takes next begins in `Rest`: its first phase's state is not written for nothing).
    pub(super) fn reset_to(&mut self, nb: [u8; 4], len: u32, first: PartState) {
        // Every field named, so that a new one cannot be forgotten here.
        let InMessage {
            nb: nb_field,
            msg,
            remaining,
            kept,
            opaque,
            desync,
            inner,
            headers_only,
            part,
        } = self;
        *nb_field = nb;
        let Smb2Message {
            len: msg_len,
            parts,
            overflow,
            lost_bytes,
            malformed,
            sealed,
        } = msg;
        *msg_len = len;
        parts.clear();
        overflow.clear();
        *lost_bytes = 0;
        *malformed = None;
        *sealed = None;
        *remaining = u64::from(len);
        *kept = 0;
        *opaque = false;
        *desync = false;
        *inner = false;
        *headers_only = false;
        *part = first;
    }

    /// The message's one part taken at once from where it lies ([`part_head`], `kept` its
    /// bytes), the rest of it to be skipped: the state the phases of [`InMessage::step`]
    /// reach on those bytes, without walking them (~400 fewer instructions a READ or WRITE).
    /// Only on a walker that has taken nothing yet ([`InMessage::untouched`]).
    #[inline]
    pub(super) fn take_head(&mut self, head: &PartHead, kept: &[u8], cfg: &FramerConfig) {
        debug_assert!(self.untouched(), "a head is taken before anything else");
        let len = u64::from(self.msg.len);
        let rest = len - kept.len() as u64;
        self.part = PartState::Skip {
            n: rest,
            next: false,
        };
        self.store(cfg, head.header, PartBytes::from_slice(kept), len, head.cut);
        self.remaining = rest;
    }

    /// Nothing of the message taken yet: its first part's first phase, no byte gathered (or
    /// `Rest`, where [`InMessage::reset_to`] left it for [`InMessage::take_head`]).
    pub(super) fn untouched(&self) -> bool {
        self.is_first_part()
            && u64::from(self.msg.len) == self.remaining
            && match &self.part {
                PartState::Gather { buf, phase, .. } => *phase == Phase::Proto && buf.is_empty(),
                PartState::Rest => true,
                _ => false,
            }
    }

    /// The `len`-byte plaintext of an encrypted message.
    pub(super) fn sealed(len: u32, headers_only: bool, info: SealedInfo) -> InMessage {
        InMessage::inner(len, headers_only, Some(info))
    }

    /// [`InMessage::sealed`] in place (a spare walker reused).
    pub(super) fn reset_sealed(&mut self, len: u32, headers_only: bool, info: SealedInfo) {
        self.reset([0; 4], len);
        self.inner = true;
        self.headers_only = headers_only;
        self.msg.sealed = Some(info);
    }

    /// A `len`-byte message that is not a stream position: the plaintext of an encrypted
    /// message, or a decompressed one (`sealed`: it came out of an encrypted message).
    pub(super) fn inner(len: u32, headers_only: bool, sealed: Option<SealedInfo>) -> InMessage {
        let mut m = InMessage::new([0; 4], len);
        m.inner = true;
        m.headers_only = headers_only;
        m.msg.sealed = sealed;
        m
    }

    /// Walk `bytes` (the message from the walker's position) through this walker.
    pub(super) fn walk(
        &mut self,
        bytes: &[u8],
        cfg: &FramerConfig,
        ctx: &mut SealCtx<'_>,
        out: &mut dyn FramerOut,
    ) {
        let mut at = 0usize;
        if self.untouched() {
            if let Some(head) = part_head(bytes, self.msg.len, self.headers_only, cfg) {
                self.take_head(&head, bytes.get(..head.keep).unwrap_or(&[]), cfg);
                at = head.keep;
            }
        }
        let mut stalls = 0;
        // A step may take no byte while its state moves on; three in a row means it is done.
        while self.remaining > 0 && at < bytes.len() && stalls < 3 {
            let n = self.step(
                bytes.get(at..).unwrap_or(&[]),
                cfg,
                out,
                &mut Vec::new(),
                ctx,
            );
            at += n;
            stalls = if n == 0 { stalls + 1 } else { 0 };
        }
    }

    /// No more bytes will be walked (a decompressed message decoded only as far as needed):
    /// what the walker was skipping anyway is not lost; anything else is.
    pub(super) fn end_of_bytes(&mut self, cfg: &FramerConfig) {
        if self.remaining == 0 {
            return;
        }
        if !matches!(
            self.part,
            PartState::Rest | PartState::Skip { next: false, .. }
        ) {
            self.msg.lost_bytes = self.msg.lost_bytes.saturating_add(self.remaining);
            self.take_current_part(cfg);
        }
        self.remaining = 0;
    }

    /// Bytes held for this message.
    pub(super) fn buffered(&self) -> usize {
        debug_assert_eq!(
            self.kept,
            self.msg.parts.iter().map(|p| p.bytes.len()).sum::<usize>()
        );
        let cur = match &self.part {
            PartState::Gather { buf, .. } => buf.len(),
            PartState::Sealed(s) => s.buffered(),
            PartState::Compressed(s) => s.buffered(),
            _ => 0,
        };
        self.kept + cur
    }

    /// How many bytes the walker wants to look at next (None: it is skipping, by count).
    pub(super) fn wants_content(&self) -> Option<usize> {
        match &self.part {
            PartState::Gather { buf, want, .. } => Some(want.saturating_sub(buf.len())),
            PartState::Compressed(s) => s.wants(),
            _ => None,
        }
    }

    fn is_first_part(&self) -> bool {
        self.msg.parts.is_empty() && self.msg.overflow.is_empty()
    }

    /// Give up on framing: the bytes taken for an NBSS header were not one.
    fn desync(&mut self, buf: &[u8], giveback: &mut Vec<u8>) {
        if self.inner {
            let mut id = [0u8; 4];
            for (d, s) in id.iter_mut().zip(buf.iter()) {
                *d = *s;
            }
            self.malformed(Smb2Error::UnknownProtocol(id));
            return;
        }
        giveback.extend_from_slice(&self.nb[1..]);
        giveback.extend_from_slice(buf);
        self.desync = true;
    }

    fn malformed(&mut self, e: Smb2Error) {
        self.msg.malformed = Some(e);
        self.part = PartState::Rest;
    }

    /// Consumes some of `data` (possibly none, when only the state changes). A part's header
    /// is gathered a phase at a time (4 bytes, 64, then the fixed body) and then skipped past:
    /// while bytes are there, those phases run in this one call, not one call each (a return
    /// to the framer costs it a state swap). Anything else returns after one phase.
    pub(super) fn step(
        &mut self,
        data: &[u8],
        cfg: &FramerConfig,
        out: &mut dyn FramerOut,
        giveback: &mut Vec<u8>,
        ctx: &mut SealCtx<'_>,
    ) -> usize {
        let mut used = 0;
        loop {
            let n = self.step_once(data.get(used..).unwrap_or(&[]), cfg, out, giveback, ctx);
            used += n;
            let in_place = matches!(
                self.part,
                PartState::Gather { .. } | PartState::Skip { .. } | PartState::Rest
            );
            if n == 0
                || !in_place
                || used >= data.len()
                || self.remaining == 0
                || self.desync
                || !giveback.is_empty()
            {
                return used;
            }
        }
    }

    /// One phase of [`InMessage::step`].
    fn step_once(
        &mut self,
        data: &[u8],
        cfg: &FramerConfig,
        out: &mut dyn FramerOut,
        giveback: &mut Vec<u8>,
        ctx: &mut SealCtx<'_>,
    ) -> usize {
        let avail = (data.len() as u64).min(self.remaining);
        match &mut self.part {
            PartState::Sealed(s) => {
                let used = s.step(data.get(..avail as usize).unwrap_or(&[]), cfg, ctx, out);
                self.remaining -= used as u64;
                used
            }
            PartState::Compressed(s) => {
                let used = s.take(data.get(..avail as usize).unwrap_or(&[]));
                self.remaining -= used as u64;
                used
            }
            PartState::Skip { n, next } => {
                let take = (*n).min(avail);
                *n -= take;
                self.remaining -= take;
                if *n == 0 {
                    self.part = if *next {
                        first_gather(self.remaining)
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
                if buf.is_empty() && need <= avail {
                    let here = data.get(..avail as usize).unwrap_or(&[]);
                    return self.gather_in_place(here, cfg, out, giveback, ctx);
                }
                let take = need.min(avail) as usize;
                buf.extend_from_slice(data.get(..take).unwrap_or(&[]));
                self.remaining -= take as u64;
                let (have, want) = (buf.len(), *want);
                if have >= want {
                    // Out of the state while the phase is decided on it, back if it gathers on.
                    let gathered = std::mem::take(buf);
                    self.advance(&gathered, cfg, out, giveback, ctx);
                    if let PartState::Gather { buf, .. } = &mut self.part {
                        *buf = gathered;
                    }
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

    /// A part's phases decided on its bytes where they lie (`here`: the message from the part's
    /// start, holding at least what the first phase wants), as [`InMessage::step_once`] decides
    /// them on gathered bytes: only what the part keeps is copied, once, and not every phase's
    /// bytes into the buffer (a message's header and fixed body usually arrive in one segment).
    /// Returns the bytes consumed: those the phases looked at, all of `here` when it ends first.
    fn gather_in_place(
        &mut self,
        here: &[u8],
        cfg: &FramerConfig,
        out: &mut dyn FramerOut,
        giveback: &mut Vec<u8>,
        ctx: &mut SealCtx<'_>,
    ) -> usize {
        let mut used = 0;
        while let PartState::Gather { want, .. } = self.part {
            match here.get(..want).filter(|_| want > used) {
                Some(bytes) => {
                    used = want;
                    self.advance(bytes, cfg, out, giveback, ctx);
                    if self.desync || !giveback.is_empty() {
                        break;
                    }
                }
                None => {
                    // The phase wants bytes that come later (or no more): gathered from here on.
                    let keep = if want > used { here.len() } else { used };
                    if let PartState::Gather { buf, .. } = &mut self.part {
                        buf.extend_from_slice(here.get(..keep).unwrap_or(&[]));
                    }
                    used = keep;
                    break;
                }
            }
        }
        self.remaining -= used as u64;
        used
    }

    /// [`super::Framer::skip_room`] for a message: bytes that the current part skips and that
    /// end before both it and the message (no state but the counts changes).
    pub(super) fn skip_room(&self) -> u64 {
        self.skippable().saturating_sub(1)
    }

    /// Bytes from here on that the current part skips by count, up to the message's end.
    pub(super) fn skippable(&self) -> u64 {
        let part = match &self.part {
            PartState::Skip { n, .. } => *n,
            PartState::Rest => u64::MAX,
            // An encrypted message's bulk data is counted off through it.
            PartState::Sealed(s) => s.skippable(),
            _ => return 0,
        };
        part.min(self.remaining)
    }

    /// Counts off `len` bytes, at most [`Self::skip_room`].
    pub(super) fn skip(&mut self, len: u64) {
        match &mut self.part {
            PartState::Skip { n, .. } => *n -= len,
            PartState::Sealed(s) => s.skip(len),
            _ => {}
        }
        self.remaining -= len;
    }

    /// The bytes wanted for the current phase are there (`bytes`: the part's so far, gathered
    /// or where they lie): decide what comes next.
    fn advance(
        &mut self,
        bytes: &[u8],
        cfg: &FramerConfig,
        out: &mut dyn FramerOut,
        giveback: &mut Vec<u8>,
        ctx: &mut SealCtx<'_>,
    ) {
        let first = self.is_first_part();
        let (inner, headers_only) = (self.inner, self.headers_only);
        let PartState::Gather {
            want,
            phase,
            header,
            wire_len,
            next,
            ..
        } = &mut self.part
        else {
            return;
        };
        match *phase {
            Phase::Proto => {
                let proto = bytes
                    .get(..4)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .and_then(ProtocolId::from_bytes);
                let len = self.msg.len;
                match (proto, first) {
                    (Some(ProtocolId::Smb2), _) => {
                        if *wire_len < HEADER_LEN as u64 {
                            let available = *wire_len as usize;
                            if first {
                                self.desync(bytes, giveback);
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
                    // Also in the plaintext of an encrypted message (never inside a
                    // decompressed one: `compress` checks that it holds SMB2).
                    (Some(ProtocolId::Compressed), true) => {
                        let squeezed = Squeezed::new(bytes, len, cfg);
                        self.opaque = true;
                        self.part = PartState::Compressed(Box::new(squeezed));
                    }
                    (Some(ProtocolId::Transform), true) if !inner => {
                        self.opaque = true;
                        self.part = PartState::Sealed(ctx.sealed(len, bytes));
                    }
                    (Some(_), true) if !inner => {
                        out.event(FramerEvent::Smb1 { len });
                        self.opaque = true;
                        self.part = PartState::Rest;
                    }
                    (None, true) => self.desync(bytes, giveback),
                    (_, _) => {
                        let mut id = [0u8; 4];
                        for (d, s) in id.iter_mut().zip(bytes.iter()) {
                            *d = *s;
                        }
                        self.malformed(Smb2Error::UnknownProtocol(id));
                    }
                }
            }
            Phase::Header => match parse_header(bytes) {
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
                    if bytes.len() >= *want {
                        self.advance(bytes, cfg, out, giveback, ctx);
                    }
                }
                Err(e) => {
                    if first {
                        self.desync(bytes, giveback);
                    } else {
                        self.malformed(e);
                    }
                }
            },
            Phase::Fixed => {
                let Some(h) = header else {
                    return;
                };
                let whole = if headers_only {
                    bytes.len()
                } else {
                    keep_plan(h, bytes, *wire_len, cfg.keep_ioctls)
                };
                let budget = cfg.max_keep.saturating_sub(self.kept);
                let allowed = whole.min(budget).max(bytes.len());
                *want = allowed;
                *phase = Phase::Whole;
                if allowed > bytes.len() {
                    return;
                }
                let cut = allowed < whole;
                self.finish_part(bytes, cfg, cut);
            }
            Phase::Whole => {
                let cut = match header {
                    Some(_) if headers_only => true,
                    Some(h) => keep_plan(h, bytes, *wire_len, cfg.keep_ioctls) > bytes.len(),
                    None => false,
                };
                self.finish_part(bytes, cfg, cut);
            }
        }
    }

    /// Give back memory (a bound over all framers was hit): the part being gathered whole ends
    /// here, and every kept part is cut to its header and fixed body.
    pub(super) fn shed(&mut self, cfg: &FramerConfig) {
        if let PartState::Sealed(s) = &mut self.part {
            s.shed();
        }
        if let PartState::Compressed(s) = &mut self.part {
            s.shed();
        }
        if let PartState::Gather {
            buf,
            phase: Phase::Whole,
            header: Some(_),
            ..
        } = &mut self.part
        {
            let gathered = std::mem::take(buf);
            self.finish_part(&gathered, cfg, true);
        }
        for p in &mut self.msg.parts {
            let keep = HEADER_LEN + fixed_body_len(p.header.command, p.header.is_response());
            if p.bytes.len() > keep {
                p.bytes.truncate(keep);
                p.bytes.shrink_to_fit();
                p.cut = true;
            }
        }
        self.kept = self.msg.parts.iter().map(|p| p.bytes.len()).sum();
    }

    /// The current part has all the bytes it keeps (`bytes`): store it and skip the rest of it.
    fn finish_part(&mut self, bytes: &[u8], cfg: &FramerConfig, cut: bool) {
        // Its fields taken where they are: the whole state moved out was a copy of it.
        let PartState::Gather {
            header: header @ Some(_),
            wire_len,
            next,
            ..
        } = &mut self.part
        else {
            self.part = PartState::Rest;
            return;
        };
        let (header, wire_len, next) = (header.take(), *wire_len, *next);
        let have = bytes.len() as u64;
        if let Some(header) = header {
            self.store(cfg, header, PartBytes::from_slice(bytes), wire_len, cut);
        }
        self.part = PartState::Skip {
            n: wire_len.saturating_sub(have),
            next,
        };
    }

    fn store(
        &mut self,
        cfg: &FramerConfig,
        header: Header,
        buf: PartBytes,
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
    pub(super) fn take_current_part(&mut self, cfg: &FramerConfig) {
        if !matches!(self.part, PartState::Gather { .. }) {
            return;
        }
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
    pub(super) fn gap_inside(
        &mut self,
        missing: u64,
        cfg: &FramerConfig,
        ctx: &mut SealCtx<'_>,
        out: &mut dyn FramerOut,
    ) -> bool {
        self.remaining -= missing;
        let in_step = match &mut self.part {
            PartState::Sealed(s) => s.gap(missing, cfg, ctx, out),
            PartState::Compressed(s) => s.gap(),
            PartState::Skip { n, .. } if missing <= *n => {
                *n -= missing;
                if *n == 0 {
                    // Same transition as after skipping: advance with no data.
                    let next = matches!(self.part, PartState::Skip { next: true, .. });
                    self.part = if next {
                        first_gather(self.remaining)
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
    /// NEGOTIATE and SESSION_SETUP go to the decryptor first (the preauth hash).
    pub(super) fn finish(
        &mut self,
        cfg: &FramerConfig,
        out: &mut dyn FramerOut,
        ctx: &mut SealCtx<'_>,
    ) {
        if matches!(self.part, PartState::Sealed(_)) {
            if let PartState::Sealed(mut s) = std::mem::replace(&mut self.part, PartState::Rest) {
                s.finish(cfg, ctx, out);
                // Its box kept for the next encrypted message.
                ctx.put_sealed(s);
            }
        }
        if let PartState::Compressed(s) = std::mem::replace(&mut self.part, PartState::Rest) {
            let (len, lost) = (self.msg.len, self.msg.lost_bytes);
            s.open(len, lost, self.msg.sealed, self.headers_only, cfg, ctx, out);
        }
        if self.opaque {
            return;
        }
        if let (Some(crypto), [p]) = (ctx.crypto.as_deref_mut(), self.msg.parts.as_slice()) {
            if matches!(
                p.header.command,
                Command::NEGOTIATE | Command::SESSION_SETUP
            ) {
                let whole =
                    !p.cut && self.msg.lost_bytes == 0 && p.bytes.len() as u64 == p.wire_len;
                crypto.observe(ctx.conn, &p.header, &p.bytes, whole);
            }
        }
        if !self.msg.parts.is_empty() || !self.msg.overflow.is_empty() {
            out.message(&mut self.msg);
            // What the receiver left (it read the message in place) is not held on to until
            // the walker frames its next message.
            self.msg.parts.clear();
            self.msg.overflow.clear();
        }
    }
}

/// A message of one part whose SMB2 header and kept bytes all lie in the bytes at hand: what
/// [`part_head`] decided.
#[derive(Clone, Copy, Debug)]
pub(super) struct PartHead {
    pub(super) header: Header,
    /// Bytes of the message kept (from its SMB2 header on), all at hand.
    pub(super) keep: usize,
    /// Fewer kept than [`keep_plan`] wants (`max_keep`).
    pub(super) cut: bool,
}

/// The common case decided at once: `msg` (a `len`-byte message from its start, as much of it
/// as is at hand) holds an SMB2 header with no NextCommand and all the part keeps (its header
/// and fixed body only with `headers_only`). None for anything else (compound, encrypted,
/// compressed, SMB1, too short, bytes still to come), which the phases of [`InMessage::step`]
/// decide as the bytes arrive. Decides what they would.
#[inline]
pub(super) fn part_head(
    msg: &[u8],
    len: u32,
    headers_only: bool,
    cfg: &FramerConfig,
) -> Option<PartHead> {
    let wire = len as usize;
    if wire < HEADER_LEN {
        return None;
    }
    // Checks the protocol id: 0xFE 'SMB' only.
    let header = parse_header(msg).ok()?;
    if header.next_command != 0 {
        return None;
    }
    let fixed = (HEADER_LEN + fixed_body_len(header.command, header.is_response())).min(wire);
    let fixed_bytes = msg.get(..fixed)?;
    let whole = if headers_only {
        fixed
    } else {
        keep_plan(&header, fixed_bytes, wire as u64, cfg.keep_ioctls)
    };
    let keep = whole.min(cfg.max_keep).max(fixed);
    msg.get(..keep)?;
    Some(PartHead {
        header,
        keep,
        cut: keep < whole,
    })
}

/// [`part_head`] for a stream at a message start: `data` begins with a session message's NBSS
/// header. Returns the header's bytes and length, and the part's head.
pub(super) fn message_head(data: &[u8], cfg: &FramerConfig) -> Option<([u8; 4], u32, PartHead)> {
    let nb = *data.first_chunk::<NBSS_HEADER_LEN>()?;
    let nbss = parse_nbss_header(nb)?;
    if nbss.kind != NbssType::SessionMessage || nbss.length > MAX_MESSAGE_LEN {
        return None;
    }
    let head = part_head(data.get(NBSS_HEADER_LEN..)?, nbss.length, false, cfg)?;
    Some((nb, nbss.length, head))
}

/// How many bytes of a part to keep, given its header and fixed body: the whole part for IOCTLs
/// with one of the `keep_ioctls` control codes (their buffers), up to the end of the name for
/// CREATE requests and of the share path for TREE_CONNECT requests, else the fixed part.
fn keep_plan(h: &Header, fixed: &[u8], wire_len: u64, keep_ioctls: &[u32]) -> usize {
    let wire = usize::try_from(wire_len).unwrap_or(usize::MAX);
    let u16_at = |at: usize| {
        let b: [u8; 2] = fixed.get(at..at + 2)?.try_into().ok()?;
        Some(usize::from(u16::from_le_bytes(b)))
    };
    // A name located by (offset, length) fields of the fixed body.
    let through = |off_at: usize, len_at: usize| match (u16_at(off_at), u16_at(len_at)) {
        (Some(off), Some(len)) => off.saturating_add(len),
        _ => fixed.len(),
    };
    let whole = match h.command {
        // Whole for SMB 3.1.1's preauth integrity hash (the decryption keys derive from it).
        Command::NEGOTIATE | Command::SESSION_SETUP => wire,
        Command::IOCTL if peek_ctl_code(fixed).is_some_and(|c| keep_ioctls.contains(&c)) => wire,
        Command::CREATE if !h.is_response() => through(HEADER_LEN + 44, HEADER_LEN + 46),
        Command::TREE_CONNECT if !h.is_response() => through(HEADER_LEN + 4, HEADER_LEN + 6),
        _ => fixed.len(),
    };
    whole.min(wire).max(fixed.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smb2::framer::SealCtx;

    /// A message of `body` after an SMB2 header for `command` (flags 1: a response).
    fn smb2(command: u16, flags: u32, body: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; HEADER_LEN];
        m[..4].copy_from_slice(&[0xFE, b'S', b'M', b'B']);
        m[4] = 64;
        m[12..14].copy_from_slice(&command.to_le_bytes());
        m[16..20].copy_from_slice(&flags.to_le_bytes());
        m[24] = 7;
        m.extend_from_slice(body);
        m
    }

    /// What a walker hands out for `msg`, given it in pieces of `piece` bytes through
    /// `step` (the phases), or whole through `walk` (a head at hand taken at once).
    fn walked(
        msg: &[u8],
        piece: Option<usize>,
        headers_only: bool,
        cfg: &FramerConfig,
    ) -> Vec<FramerEvent> {
        let mut m = InMessage::inner(msg.len() as u32, headers_only, None);
        let mut out = Vec::new();
        match piece {
            None => m.walk(msg, cfg, &mut SealCtx::none(), &mut out),
            Some(n) => {
                for p in msg.chunks(n) {
                    let mut at = 0;
                    while at < p.len() {
                        at += m.step(
                            &p[at..],
                            cfg,
                            &mut out,
                            &mut Vec::new(),
                            &mut SealCtx::none(),
                        );
                    }
                }
            }
        }
        m.finish(cfg, &mut out, &mut SealCtx::none());
        out
    }

    /// `part_head` decides what the phases decide: the same parts, kept bytes, cut marks and
    /// wire lengths, for the parts it takes (READ, a CREATE's name, an SQOS IOCTL's buffers,
    /// headers only, a `max_keep` that cuts) and those it leaves to the phases (compound).
    #[test]
    fn a_head_taken_at_once_is_the_head_the_phases_reach() {
        let mut read = vec![0u8; 48];
        read[0] = 49;
        read.extend_from_slice(&[0x55; 200]);
        let mut create = vec![0u8; 56];
        create[0] = 57;
        create[44] = 120; // NameOffset: right after the fixed body
        create[46] = 40; // NameLength
        create.extend_from_slice(&[b'a'; 60]);
        let mut ioctl = vec![0u8; 56];
        ioctl[0] = 57;
        ioctl[4..8].copy_from_slice(&0x0009_0350u32.to_le_bytes());
        ioctl.extend_from_slice(&[0x11; 96]);
        let mut compound = smb2(8, 0, &read[..48]);
        compound[20] = 112; // NextCommand
        compound.extend_from_slice(&smb2(8, 0, &read));
        let msgs = [
            smb2(8, 0, &read),
            smb2(8, 1, &read[..16]),
            smb2(5, 0, &create),
            smb2(11, 0, &ioctl),
            compound,
        ];
        for max_keep in [1 << 20, 130] {
            let cfg = FramerConfig {
                max_keep,
                keep_ioctls: &[0x0009_0350],
                ..FramerConfig::default()
            };
            for headers_only in [false, true] {
                for msg in &msgs {
                    let at_once = walked(msg, None, headers_only, &cfg);
                    assert!(!at_once.is_empty());
                    for piece in [1, 7, 64] {
                        assert_eq!(at_once, walked(msg, Some(piece), headers_only, &cfg));
                    }
                }
            }
        }
        // Taken at once where it applies, and cut by the bound.
        let cfg = FramerConfig {
            max_keep: 130,
            keep_ioctls: &[0x0009_0350],
            ..FramerConfig::default()
        };
        let head = part_head(&msgs[3], msgs[3].len() as u32, false, &cfg).unwrap();
        assert_eq!((head.keep, head.cut), (130, true));
        assert!(part_head(&msgs[4], msgs[4].len() as u32, false, &cfg).is_none());
    }

    /// A spare walker reset for the next message is the walker `new` makes: `reset` states
    /// `new`'s values a second time (to keep the inline buffers where they are), so this holds
    /// the two together, whatever the walker held before.
    #[test]
    fn a_reset_walker_is_a_new_one() {
        let cfg = FramerConfig::default();
        // A READ request (its header and fixed body kept, the rest counted off), then a
        // message cut short: parts, a kept count, a malformed mark, a state mid-part.
        let mut header = vec![0u8; HEADER_LEN];
        header[..4].copy_from_slice(&[0xFE, b'S', b'M', b'B']);
        header[4] = 64;
        header[12] = 0x08;
        let mut msg = header.clone();
        msg.extend_from_slice(&[0x31; 60]);
        let mut m = InMessage::new([0, 0, 0, msg.len() as u8], msg.len() as u32);
        let mut out = Vec::new();
        m.walk(&msg, &cfg, &mut SealCtx::none(), &mut out);
        m.finish(&cfg, &mut out, &mut SealCtx::none());
        assert_eq!(out.len(), 1, "{out:?}");
        m.msg.lost_bytes = 7;
        m.msg.malformed = Some(Smb2Error::Truncated {
            what: "test",
            needed: 1,
            available: 0,
        });
        m.msg.overflow.push((Command::READ, false));
        (m.kept, m.opaque, m.desync, m.inner, m.headers_only) = (9, true, true, true, true);
        m.reset([0, 0, 1, 0], 256);
        let fresh = InMessage::new([0, 0, 1, 0], 256);
        assert_eq!(format!("{m:?}"), format!("{fresh:?}"));
    }
}
