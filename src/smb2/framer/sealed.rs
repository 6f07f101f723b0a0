//! An encrypted message (0xFD TRANSFORM_HEADER) inside the framer.
//!
//! The transform header is read, the session's keys are looked up, and the first 64 bytes of
//! ciphertext are run through the keystream of each candidate key: the right one shows an SMB2
//! header of the same session. (A message of at most [`STREAM_MIN`] bytes whose likeliest key is
//! GCM's skips this probe: it is authenticated whole whatever it is, and GCM's open tells the
//! key.) Then, by what that header is:
//! - a single bulk READ response / WRITE request: *streamed*: the plaintext walker
//!   ([`InMessage`]) reads the header and fixed body through the keystream and skips the data
//!   by counting, never decrypting or buffering it (not authenticated: only its header is
//!   used, for observed I/O);
//! - anything else (SQOS IOCTLs, CREATE, TREE_CONNECT, SESSION_SETUP, compounds…): the whole
//!   ciphertext is buffered (at most `max_keep`), authenticated and decrypted by the AEAD, and
//!   the plaintext walked like a plain message. Larger ones are streamed with headers only.
//!
//! Either way the SMB2 messages inside come out as ordinary [`FramerEvent::Message`]s, tagged
//! with the session they were sealed for.

use std::sync::Arc;

use super::chain::InMessage;
use super::{FramerConfig, FramerEvent, FramerOut, Gathered, SealCtx};
use crate::smb2::crypto::{Candidate, Candidates, Cipher, KeySource, Keyed, Keystream, Missing};
use crate::smb2::error::Smb2Error;
use crate::smb2::header::{parse_header, HEADER_LEN};
use crate::smb2::names::Command;
use crate::smb2::transform::{parse_transform_header, TransformHeader, TRANSFORM_HEADER_LEN};

/// READ/WRITE messages up to this size are authenticated whole like the others (cheap, and it
/// proves the key early); larger ones are streamed.
pub const STREAM_MIN: u64 = 4096;
/// Whether a message of `len` bytes, a single bulk READ/WRITE or not (`bulk`), is streamed as
/// one: its data counted off, never decrypted.
fn streamed_bulk(len: u64, bulk: bool) -> bool {
    bulk && len > STREAM_MIN
}

/// Whether a message of `len` bytes is authenticated whole: not a streamed bulk message, and
/// within the framer's bound. With `bulk` true: whatever the message turns out to be, which is
/// known before its first bytes are decrypted.
fn opened_whole(len: u64, bulk: bool, cfg: &FramerConfig) -> bool {
    !streamed_bulk(len, bulk) && len <= cfg.max_keep as u64
}

/// Shortest plaintext: a compression transform header (an SMB2 message is longer).
const MIN_INNER_LEN: u64 = crate::smb2::compress::layout::UNCHAINED_LEN as u64;
/// Ciphertext bytes looked at to tell the right key and the kind of message.
const PROBE_LEN: u64 = HEADER_LEN as u64;

/// The first ciphertext bytes, as they arrive and as a candidate key decrypts them (no
/// allocation: every encrypted message has them looked at).
type Probe = Gathered<HEADER_LEN>;

/// What became of an encrypted message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SealOutcome {
    /// Decrypted; `authenticated` false when only its headers were read through the keystream.
    Decrypted { cipher: Cipher, authenticated: bool },
    /// No key for the session.
    NoKeys,
    /// SMB 3.1.1 session whose setup is not in the capture and only its session key is known.
    NeedDirectionKeys,
    /// No candidate key opened it (wrong key). `tried` says where the keys came from.
    AuthFailed { tried: Vec<KeySource> },
    /// Part of it never arrived (gap, end of capture) or the buffering bound dropped it.
    Incomplete,
    /// The transform header is inconsistent.
    Malformed(Smb2Error),
}

/// The session and trust of the SMB2 messages that came out of an encrypted message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SealedInfo {
    pub session_id: u64,
    pub cipher: Cipher,
    /// False when the message was streamed (headers read without the tag check).
    pub authenticated: bool,
}

/// Where an encrypted message is. The transform header and the candidate keys, once read, are
/// the message's ([`Sealed::th`], [`Sealed::cands`]), not a phase's: a phase change then moves
/// only the phase's own few bytes.
enum Phase {
    Header(Gathered<TRANSFORM_HEADER_LEN>),
    Probe {
        buf: Probe,
    },
    Whole {
        /// The candidate tried first: the one the probe found, or the likeliest (a GCM key)
        /// when the probe was skipped.
        first: usize,
        buf: Vec<u8>,
    },
    Stream {
        ks: Keystream,
        inner: Box<InMessage>,
        scratch: Vec<u8>,
    },
    Skip,
}

impl std::fmt::Debug for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Header(_) => "Header",
            Phase::Probe { .. } => "Probe",
            Phase::Whole { .. } => "Whole",
            Phase::Stream { .. } => "Stream",
            Phase::Skip => "Skip",
        })
    }
}

#[derive(Debug)]
pub(super) struct Sealed {
    /// NBSS length of the message (transform header included).
    nb_len: u32,
    /// Ciphertext length, once the header is read.
    len: u64,
    /// Ciphertext bytes consumed.
    pos: u64,
    session_id: Option<u64>,
    /// The transform header (from the probe on).
    th: TransformHeader,
    /// The keys that may open the message, most likely first (from the probe on).
    cands: Candidates,
    phase: Phase,
    /// The outcome event was given.
    reported: bool,
}

/// Boxes and buffers of encrypted messages kept for the next ones: a few of each for all of a
/// thread's framers, whatever the connections (an encrypted stream has them in every message,
/// and their allocation, copy and free were ~5 % of the instructions on encrypted small I/Os).
/// Taken and given back through the [`SealCtx`], which may have none.
#[derive(Default)]
// The boxes themselves are what is kept: taken out and put back whole, without allocating.
#[allow(clippy::vec_box)]
pub struct SealSpares {
    sealed: Vec<Box<Sealed>>,
    inner: Vec<Box<InMessage>>,
    bufs: Vec<Vec<u8>>,
}

/// Spares kept of each kind.
const SPARES: usize = 4;
/// A buffer kept must be no larger than this (the small messages authenticated whole, and the
/// fixed bodies read through the keystream, fit).
const SPARE_BUF_MAX: usize = 8 << 10;

/// Keeps `spare` in `kept` if there is room (else it is dropped).
fn keep<T>(kept: &mut Vec<T>, spare: T) {
    if kept.len() < SPARES {
        kept.push(spare);
    }
}

impl SealCtx<'_> {
    /// [`Sealed::new`], in a spare box if there is one.
    pub(super) fn sealed(&mut self, nb_len: u32, proto: &[u8]) -> Box<Sealed> {
        match self.spares.as_deref_mut().and_then(|s| s.sealed.pop()) {
            Some(mut spare) => {
                *spare = Sealed::new(nb_len, proto);
                spare
            }
            None => Box::new(Sealed::new(nb_len, proto)),
        }
    }

    pub(super) fn put_sealed(&mut self, sealed: Box<Sealed>) {
        if let Some(spares) = self.spares.as_deref_mut() {
            keep(&mut spares.sealed, sealed);
        }
    }

    /// [`InMessage::sealed`], in a spare box if there is one.
    fn inner(&mut self, len: u32, headers_only: bool, info: SealedInfo) -> Box<InMessage> {
        match self.spares.as_deref_mut().and_then(|s| s.inner.pop()) {
            Some(mut spare) => {
                spare.reset_sealed(len, headers_only, info);
                spare
            }
            None => Box::new(InMessage::sealed(len, headers_only, info)),
        }
    }

    fn put_inner(&mut self, inner: Box<InMessage>) {
        if let Some(spares) = self.spares.as_deref_mut() {
            keep(&mut spares.inner, inner);
        }
    }

    /// An empty buffer, a spare one if there is one.
    fn buf(&mut self) -> Vec<u8> {
        self.spares
            .as_deref_mut()
            .and_then(|s| s.bufs.pop())
            .unwrap_or_default()
    }

    fn put_buf(&mut self, mut buf: Vec<u8>) {
        if let Some(spares) = self.spares.as_deref_mut() {
            if buf.capacity() <= SPARE_BUF_MAX {
                buf.clear();
                keep(&mut spares.bufs, buf);
            }
        }
    }
}

/// A buffer for a message of `len` bytes opened whole, starting with the `first` bytes read
/// (a spare one if there is one).
fn whole_buf(ctx: &mut SealCtx<'_>, len: u64, first: &[u8]) -> Vec<u8> {
    let mut buf = ctx.buf();
    buf.reserve(len as usize);
    buf.extend_from_slice(first);
    buf
}

/// The candidate's cipher keyed, kept by the decryptor for the next messages of its key (none
/// without a decryptor: nothing opens then).
fn keyed<'a>(ctx: &'a mut SealCtx<'_>, c: &Candidate) -> Option<&'a Arc<Keyed>> {
    ctx.crypto.as_deref_mut()?.keyed(c)
}

/// The probe's test of one candidate: its keystream, and the message's first bytes (`probe`)
/// decrypted with it, when they read as an SMB2 message of the session. A candidate that fails
/// it cannot be the one the message was sealed with.
fn probe_with(
    keyed: &Arc<Keyed>,
    th: &TransformHeader,
    probe: Probe,
) -> Option<(Keystream, Probe)> {
    let ks = Keystream::new(Arc::clone(keyed), &th.nonce);
    let mut plain = probe;
    ks.apply_at(0, plain.as_mut_slice());
    plausible(plain.as_slice(), th.session_id).then_some((ks, plain))
}

fn plausible(plain: &[u8], session_id: u64) -> bool {
    match plain.get(..4) {
        Some([0xFE, b'S', b'M', b'B']) => plain
            .get(40..48)
            .is_none_or(|b| b == session_id.to_le_bytes()),
        // A compression transform inside: no session id to check (the AEAD will).
        Some([0xFC, b'S', b'M', b'B']) => true,
        _ => false,
    }
}

/// A single READ response or WRITE request (only its header and fixed body are used).
pub(super) fn is_bulk(plain: &[u8]) -> bool {
    parse_header(plain).is_ok_and(|h| {
        h.next_command == 0
            && ((h.command == Command::READ && h.is_response())
                || (h.command == Command::WRITE && !h.is_response()))
    })
}

impl Sealed {
    /// A transform message whose first bytes (the protocol id) are `proto`.
    pub(super) fn new(nb_len: u32, proto: &[u8]) -> Sealed {
        let mut header = Gathered::default();
        header.fill(proto);
        Sealed {
            nb_len,
            len: 0,
            pos: 0,
            session_id: None,
            th: TransformHeader::default(),
            cands: Candidates::default(),
            phase: Phase::Header(header),
            reported: false,
        }
    }

    pub(super) fn buffered(&self) -> usize {
        match &self.phase {
            Phase::Header(b) => b.len(),
            Phase::Probe { buf, .. } => buf.len(),
            Phase::Whole { buf, .. } => buf.len(),
            Phase::Stream { inner, .. } => inner.buffered(),
            Phase::Skip => 0,
        }
    }

    fn report(&mut self, outcome: SealOutcome, out: &mut dyn FramerOut) {
        if !self.reported {
            self.reported = true;
            out.event(FramerEvent::Encrypted {
                len: self.nb_len,
                session_id: self.session_id,
                outcome,
            });
        }
    }

    fn give_up(&mut self, outcome: SealOutcome, out: &mut dyn FramerOut) {
        self.report(outcome, out);
        self.phase = Phase::Skip;
    }

    /// A bound over all framers was hit: a message being buffered whole is dropped (reported
    /// as incomplete when the message ends).
    pub(super) fn shed(&mut self) {
        if matches!(self.phase, Phase::Whole { .. } | Phase::Probe { .. }) {
            self.phase = Phase::Skip;
        }
    }

    /// Ciphertext bytes from here on that [`Sealed::step`] takes without looking at them (see
    /// [`InMessage::skippable`]): a streamed message's bulk data, never decrypted (one
    /// ciphertext byte a plaintext byte), and whatever follows giving up on the message.
    pub(super) fn skippable(&self) -> u64 {
        match &self.phase {
            Phase::Stream { inner, .. } => inner.skippable().min(self.len.saturating_sub(self.pos)),
            Phase::Skip => u64::MAX,
            _ => 0,
        }
    }

    /// Counts off `len` bytes, fewer than [`Sealed::skippable`]: what `step` does with them.
    pub(super) fn skip(&mut self, len: u64) {
        if let Phase::Stream { inner, .. } = &mut self.phase {
            inner.skip(len);
            self.pos += len;
        }
    }

    /// Consume message bytes (after the NBSS header); returns how many.
    pub(super) fn step(
        &mut self,
        data: &[u8],
        cfg: &FramerConfig,
        ctx: &mut SealCtx<'_>,
        out: &mut dyn FramerOut,
    ) -> usize {
        let mut used = 0usize;
        let mut stalls = 0;
        while used < data.len() {
            let rest = data.get(used..).unwrap_or(&[]);
            let n = self.step_once(rest, cfg, ctx, out);
            used += n;
            if n == 0 {
                stalls += 1;
                if stalls > 2 {
                    break;
                }
            } else {
                stalls = 0;
            }
        }
        used
    }

    fn step_once(
        &mut self,
        data: &[u8],
        cfg: &FramerConfig,
        ctx: &mut SealCtx<'_>,
        out: &mut dyn FramerOut,
    ) -> usize {
        let left = self.len.saturating_sub(self.pos);
        match &mut self.phase {
            Phase::Header(buf) => {
                let take = buf.fill(data);
                if let Some(header) = buf.whole() {
                    self.after_header(parse_transform_header(&header), cfg, ctx, out);
                }
                take
            }
            Phase::Probe { buf, .. } => {
                let want = PROBE_LEN.min(self.len) as usize;
                let take = buf.fill_to(want, data);
                self.pos += take as u64;
                if buf.len() >= want {
                    self.after_probe(cfg, ctx, out);
                }
                take
            }
            Phase::Whole { buf, .. } => {
                let take = (left.min(data.len() as u64)) as usize;
                buf.extend_from_slice(data.get(..take).unwrap_or(&[]));
                self.pos += take as u64;
                if self.pos >= self.len {
                    self.open_whole(cfg, ctx, out);
                }
                take
            }
            Phase::Stream { ks, inner, scratch } => {
                let avail = left.min(data.len() as u64) as usize;
                let used = match inner.wants_content() {
                    Some(need) => {
                        let n = need.min(avail);
                        scratch.clear();
                        scratch.extend_from_slice(data.get(..n).unwrap_or(&[]));
                        ks.apply_at(self.pos, scratch);
                        inner.step(scratch, cfg, out, &mut Vec::new(), ctx)
                    }
                    // Skipped bytes are never decrypted: the walker only counts them.
                    None => inner.step(
                        data.get(..avail).unwrap_or(&[]),
                        cfg,
                        out,
                        &mut Vec::new(),
                        ctx,
                    ),
                };
                self.pos += used as u64;
                if inner.remaining == 0 || self.pos >= self.len {
                    self.finish_stream(cfg, ctx, out);
                }
                used
            }
            Phase::Skip => data.len(),
        }
    }

    fn after_header(
        &mut self,
        parsed: Result<TransformHeader, Smb2Error>,
        cfg: &FramerConfig,
        ctx: &mut SealCtx<'_>,
        out: &mut dyn FramerOut,
    ) {
        let th = match parsed {
            Ok(th) => th,
            Err(e) => return self.give_up(SealOutcome::Malformed(e), out),
        };
        self.session_id = Some(th.session_id);
        let room = u64::from(self.nb_len).saturating_sub(TRANSFORM_HEADER_LEN as u64);
        let len = u64::from(th.original_size);
        // A compressed message inside may be shorter than an SMB2 header, not than its own.
        if len < MIN_INNER_LEN || len > room {
            return self.give_up(
                SealOutcome::Malformed(Smb2Error::OutOfBounds {
                    what: "TRANSFORM_HEADER OriginalMessageSize",
                    offset: TRANSFORM_HEADER_LEN,
                    len: th.original_size as usize,
                    available: room as usize,
                }),
                out,
            );
        }
        self.len = len;
        let Some(crypto) = ctx.crypto.as_deref_mut() else {
            return self.give_up(SealOutcome::NoKeys, out);
        };
        match crypto.candidates(th.session_id, ctx.to_server) {
            Ok(cands) => {
                self.th = th;
                self.cands = cands;
                // A message this short is authenticated whole whatever it is. When the likeliest
                // key is GCM's, its open tells whether it is the key and leaves the bytes as
                // they were when it is not: the probe would only decrypt its first bytes
                // twice. (CCM's failed open zeroes them: there the probe picks the key first.)
                let whole =
                    opened_whole(len, true, cfg) && cands.get(0).is_some_and(|c| c.cipher.is_gcm());
                self.phase = if whole {
                    Phase::Whole {
                        first: 0,
                        buf: whole_buf(ctx, len, &[]),
                    }
                } else {
                    Phase::Probe {
                        buf: Probe::default(),
                    }
                };
            }
            Err(Missing::NoKeys) => self.give_up(SealOutcome::NoKeys, out),
            Err(Missing::NeedDirectionKeys) => self.give_up(SealOutcome::NeedDirectionKeys, out),
        }
    }

    fn after_probe(&mut self, cfg: &FramerConfig, ctx: &mut SealCtx<'_>, out: &mut dyn FramerOut) {
        let Phase::Probe { buf } = std::mem::replace(&mut self.phase, Phase::Skip) else {
            return;
        };
        let (th, cands) = (&self.th, &self.cands);
        let mut found = None;
        for (i, c) in cands.iter().enumerate() {
            let Some(keyed) = keyed(ctx, c) else {
                continue;
            };
            if let Some((ks, plain)) = probe_with(keyed, th, buf) {
                found = Some((i, ks, plain));
                break;
            }
        }
        let Some((i, ks, plain)) = found else {
            let tried = cands.iter().map(|c| c.source).collect();
            return self.give_up(SealOutcome::AuthFailed { tried }, out);
        };
        let single = is_bulk(plain.as_slice());
        if opened_whole(self.len, single, cfg) {
            self.phase = Phase::Whole {
                first: i,
                buf: whole_buf(ctx, self.len, buf.as_slice()),
            };
            if self.pos >= self.len {
                self.open_whole(cfg, ctx, out);
            }
            return;
        }
        let bulk = streamed_bulk(self.len, single);
        let Some(c) = cands.get(i).copied() else {
            return;
        };
        let info = SealedInfo {
            session_id: th.session_id,
            cipher: c.cipher,
            authenticated: false,
        };
        self.report(
            SealOutcome::Decrypted {
                cipher: c.cipher,
                authenticated: false,
            },
            out,
        );
        // Too large to authenticate within the bound and not bulk data: headers only.
        let mut inner = ctx.inner(self.len as u32, !bulk, info);
        inner.walk(plain.as_slice(), cfg, ctx, out);
        let scratch = ctx.buf();
        self.phase = Phase::Stream { ks, inner, scratch };
        if self.pos >= self.len {
            self.finish_stream(cfg, ctx, out);
        }
    }

    fn open_whole(&mut self, cfg: &FramerConfig, ctx: &mut SealCtx<'_>, out: &mut dyn FramerOut) {
        let Phase::Whole { first, mut buf } = std::mem::replace(&mut self.phase, Phase::Skip)
        else {
            return;
        };
        let th = self.th;
        let mut probe = Probe::default();
        probe.fill_to(PROBE_LEN as usize, &buf);
        // `first` is tried first (the probe found it, or it is the likeliest key, GCM's, and
        // the probe was skipped); another candidate can open the message only if it passes
        // the probe's test (almost never), so only those are tried after it, each tested
        // once and only when needed: after a GCM try failed, or before a CCM try (a failed CCM
        // open zeroes the bytes, so with a candidate left it opens a copy; GCM checks first
        // and leaves them alone). (The candidates are borrowed for the tries only.)
        let opened = {
            let mut others = self
                .cands
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != first)
                .map(|(_, c)| *c);
            let mut next_passing = |ctx: &mut SealCtx<'_>| {
                others.find(|c| keyed(ctx, c).is_some_and(|k| probe_with(k, &th, probe).is_some()))
            };
            let mut opened = None;
            let mut current = self.cands.get(first).copied();
            while let Some(c) = current {
                let after = (!c.cipher.is_gcm()).then(|| next_passing(ctx));
                if let Some(k) = keyed(ctx, &c).map(Arc::clone) {
                    let open = match after {
                        Some(Some(_)) => {
                            let mut copy = buf.clone();
                            let ok = k.open(&th, &mut copy).is_ok();
                            if ok {
                                buf = copy;
                            }
                            ok
                        }
                        _ => k.open(&th, &mut buf).is_ok(),
                    };
                    if open {
                        opened = Some(c.cipher);
                        break;
                    }
                }
                current = match after {
                    Some(next) => next,
                    None => next_passing(ctx),
                };
            }
            opened
        };
        let Some(cipher) = opened else {
            let tried = self.cands.iter().map(|c| c.source).collect();
            return self.give_up(SealOutcome::AuthFailed { tried }, out);
        };
        if let Some(crypto) = ctx.crypto.as_deref_mut() {
            crypto.confirm(th.session_id, cipher);
        }
        self.report(
            SealOutcome::Decrypted {
                cipher,
                authenticated: true,
            },
            out,
        );
        let info = SealedInfo {
            session_id: th.session_id,
            cipher,
            authenticated: true,
        };
        let mut inner = InMessage::sealed(buf.len() as u32, false, info);
        inner.walk(&buf, cfg, ctx, out);
        inner.finish(cfg, out, ctx);
        ctx.put_buf(buf);
    }

    fn finish_stream(
        &mut self,
        cfg: &FramerConfig,
        ctx: &mut SealCtx<'_>,
        out: &mut dyn FramerOut,
    ) {
        if let Phase::Stream {
            mut inner, scratch, ..
        } = std::mem::replace(&mut self.phase, Phase::Skip)
        {
            if inner.remaining > 0 {
                inner.msg.lost_bytes = inner.msg.lost_bytes.saturating_add(inner.remaining);
                inner.remaining = 0;
                inner.take_current_part(cfg);
            }
            inner.finish(cfg, out, ctx);
            ctx.put_inner(inner);
            ctx.put_buf(scratch);
        }
    }

    /// `missing` bytes of the message are lost. Returns true when nothing wanted was lost.
    pub(super) fn gap(
        &mut self,
        missing: u64,
        cfg: &FramerConfig,
        ctx: &mut SealCtx<'_>,
        out: &mut dyn FramerOut,
    ) -> bool {
        let left = self.len.saturating_sub(self.pos);
        match &mut self.phase {
            Phase::Skip => true,
            Phase::Stream { inner, .. } if missing <= left && missing <= inner.remaining => {
                let in_step = inner.gap_inside(missing, cfg, ctx, out);
                self.pos += missing;
                if inner.remaining == 0 {
                    self.finish_stream(cfg, ctx, out);
                }
                in_step
            }
            Phase::Stream { .. } => {
                self.pos = self.len;
                self.finish_stream(cfg, ctx, out);
                false
            }
            _ => {
                self.give_up(SealOutcome::Incomplete, out);
                false
            }
        }
    }

    /// The NBSS message ended (normally everything was consumed; else it was cut short).
    pub(super) fn finish(
        &mut self,
        cfg: &FramerConfig,
        ctx: &mut SealCtx<'_>,
        out: &mut dyn FramerOut,
    ) {
        match self.phase {
            Phase::Stream { .. } => self.finish_stream(cfg, ctx, out),
            _ => self.give_up(SealOutcome::Incomplete, out),
        }
    }
}
