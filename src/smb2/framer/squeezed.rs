//! A compressed message (0xFC COMPRESSION_TRANSFORM_HEADER) inside the framer, in clear or
//! in the plaintext of an encrypted message (MS-SMB2 3.1.4.3: compression comes before
//! encryption).
//!
//! Its bytes are gathered up to `max_keep` (the framer's per-message bound); what is beyond is
//! skipped by counting, as for any message. At its end the gathered bytes are decompressed to
//! at most `max_keep` bytes (`smb2::compress` stops early, whatever the header claims), and
//! the SMB2 message they hold is walked like a plain one: its parts come out as ordinary
//! [`FramerEvent::Message`]s. A bulk READ response or WRITE request is decompressed only as
//! far as its header and fixed body (all observed I/O needs); one larger than the bound is
//! decoded from its first bytes, which hold them.

use super::chain::InMessage;
use super::sealed::is_bulk;
use super::{FramerConfig, FramerEvent, FramerOut, SealCtx, SealedInfo};
use crate::smb2::compress::{decompress, decompress_prefix, Algorithm, CompressError};
use crate::smb2::header::HEADER_LEN;

/// Decompressed bytes looked at first: the SMB2 header and a WRITE request's fixed body (the
/// longest of the bulk messages').
const PROBE_LEN: usize = HEADER_LEN + 48;

/// What became of a compressed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompressOutcome {
    /// Decompressed (its SMB2 message follows as `Message` events). `complete`: all of it;
    /// else only its first bytes (larger than the buffering bound, or cut by lost bytes).
    Decompressed {
        algorithms: Vec<Algorithm>,
        chained: bool,
        complete: bool,
    },
    /// The compressed data does not decode (or claims more than the largest SMB2 message).
    Failed(CompressError),
    /// Too little of it arrived, or the memory bound over all framers dropped it.
    Incomplete,
}

#[derive(Debug)]
pub(super) struct Squeezed {
    buf: Vec<u8>,
    /// Most bytes gathered; the rest is skipped.
    cap: usize,
    /// Bytes inside the gathered range were lost (only what came before them is decoded).
    lost: bool,
    /// The buffer was given back (memory bound over all framers).
    shed: bool,
}

impl Squeezed {
    /// A compressed message of `len` bytes whose first bytes (the protocol id) are `proto`.
    pub(super) fn new(proto: &[u8], len: u32, cfg: &FramerConfig) -> Squeezed {
        let cap = cfg.max_keep.min(len as usize).max(proto.len());
        let mut buf = Vec::with_capacity(cap.min(1 << 16));
        buf.extend_from_slice(proto);
        Squeezed {
            buf,
            cap,
            lost: false,
            shed: false,
        }
    }

    pub(super) fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Bytes it wants to see (None: the rest is skipped by counting).
    pub(super) fn wants(&self) -> Option<usize> {
        let n = self.cap.saturating_sub(self.buf.len());
        (n > 0).then_some(n)
    }

    /// Consume `data` (the next bytes of the message): gathered up to the cap, the rest
    /// skipped. Returns the bytes consumed (all of them).
    pub(super) fn take(&mut self, data: &[u8]) -> usize {
        let n = self.cap.saturating_sub(self.buf.len()).min(data.len());
        self.buf.extend_from_slice(data.get(..n).unwrap_or(&[]));
        data.len()
    }

    /// `missing` bytes are lost. Returns true when none of them was wanted.
    pub(super) fn gap(&mut self) -> bool {
        if self.wants().is_none() {
            return true;
        }
        self.cap = self.buf.len();
        self.lost = true;
        false
    }

    pub(super) fn shed(&mut self) {
        self.buf = Vec::new();
        self.cap = 0;
        self.shed = true;
    }

    /// The message is over: decompress what was gathered and walk the SMB2 message inside.
    /// `len`: the compressed message's length; `lost`: bytes of it that never arrived.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn open(
        self,
        len: u32,
        lost: u64,
        sealed: Option<SealedInfo>,
        headers_only: bool,
        cfg: &FramerConfig,
        ctx: &mut SealCtx<'_>,
        out: &mut dyn FramerOut,
    ) {
        let event = |outcome| FramerEvent::Compressed { len, outcome };
        if self.shed {
            return out.event(event(CompressOutcome::Incomplete));
        }
        let whole = !self.lost && lost == 0 && self.buf.len() as u64 == u64::from(len);
        let decode = |limit| {
            if whole {
                decompress(&self.buf, limit)
            } else {
                decompress_prefix(&self.buf, limit)
            }
        };
        // First the header and the largest fixed body sqos reads of bulk data: a READ
        // response or WRITE request stops there (its data is never decompressed); anything
        // else is decoded again, up to the bound.
        let result = match decode(PROBE_LEN.min(cfg.max_keep)) {
            Ok(d) if d.complete || is_bulk(&d.bytes) => Ok(d),
            _ => decode(cfg.max_keep),
        };
        let d = match result {
            Ok(d) if d.bytes.is_empty() => return out.event(event(CompressOutcome::Incomplete)),
            Ok(d) => d,
            Err(e) if !whole && !matches!(e, CompressError::TooLarge { .. }) => {
                return out.event(event(CompressOutcome::Incomplete))
            }
            Err(e) => return out.event(event(CompressOutcome::Failed(e))),
        };
        out.event(event(CompressOutcome::Decompressed {
            algorithms: d.algorithms,
            chained: d.chained,
            complete: d.complete,
        }));
        let total = u32::try_from(d.total).unwrap_or(u32::MAX);
        let mut inner = InMessage::inner(total, headers_only, sealed);
        inner.walk(&d.bytes, cfg, ctx, out);
        inner.end_of_bytes(cfg);
        inner.finish(cfg, out, ctx);
    }
}
