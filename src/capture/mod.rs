//! Capture sources (pcap / pcapng, file / stdin / gzip) and link-layer decoding.

mod frame;
pub mod link;
pub mod source;

pub use frame::{Frame, Timestamp};
pub use link::{decode_link, L3Packet, LinkError};
pub use source::{CaptureError, CaptureReader};
