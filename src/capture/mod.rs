//! Capture sources (pcap / pcapng, file / stdin / gzip) and link-layer decoding.

mod frame;
mod input;
pub mod link;
pub mod source;
pub mod writer;

pub use frame::{Frame, Timestamp};
pub use link::{decode_link, L3Packet, LinkError};
pub use source::{CaptureError, CaptureFormat, CaptureReader};
pub use writer::{PcapOptions, PcapWriter, PcapngWriter, TsPrecision};
