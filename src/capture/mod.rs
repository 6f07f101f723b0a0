//! Capture sources (pcap / pcapng, file / stdin / gzip) and link-layer decoding.
//!
//! [`CaptureReader`] streams frames with constant memory (one buffer of at most
//! [`source::MAX_BLOCK_LEN`] plus slack; a regular file is read in chunks into a few reused
//! buffers, or through a memory map whose pages are given back behind the reader); [`decode_link`] peels link layers off a frame without
//! copying; [`PcapWriter`] / [`PcapngWriter`] write captures for tests and the generator.

mod access;
#[cfg(target_os = "linux")]
mod ahead;
mod chunks;
mod frame;
#[cfg(target_os = "linux")]
mod index;
mod input;
mod layout;
pub mod link;
pub mod live;
#[cfg(target_os = "linux")]
mod map_reader;
#[cfg(target_os = "linux")]
mod mapped;
mod merge;
mod samples;
pub mod source;
#[cfg(target_os = "linux")]
mod spare;
#[cfg(target_os = "linux")]
mod split;
pub mod writer;

/// Elsewhere files are read, not mapped: there is never a map to share.
#[cfg(not(target_os = "linux"))]
#[derive(Clone)]
pub enum SharedMap {}

#[cfg(not(target_os = "linux"))]
impl SharedMap {
    pub(crate) fn bytes(&self) -> &[u8] {
        match *self {}
    }
    pub(crate) fn range_of(&self, _: &[u8]) -> Option<std::ops::Range<usize>> {
        match *self {}
    }
    pub(crate) fn keep_from(&self, _: usize) {
        match *self {}
    }
    pub(crate) fn prefetch(&self, _: usize) {
        match *self {}
    }
    pub fn pager(&self) -> Option<Pager> {
        match *self {}
    }
}

/// Elsewhere there is no map to page ahead of the reader.
#[cfg(not(target_os = "linux"))]
pub enum Pager {}

pub use access::{FileAccess, Reading};
pub use frame::{is_cut, Frame, FrameCopy, FrameRun, Timestamp};
pub use link::{decode_link, L3Packet, LinkError};
#[cfg(target_os = "linux")]
pub use mapped::{Pager, SharedMap};
pub use merge::MergedCaptures;
pub use source::{CaptureError, CaptureFormat, CaptureReader};
pub use writer::{PcapOptions, PcapWriter, PcapngWriter, TsPrecision};
