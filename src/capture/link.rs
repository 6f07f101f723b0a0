//! Link layers → the L3 packet inside. STUB: owned by the capture/net work.

use thiserror::Error;

/// The network-layer packet found inside a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L3Packet<'a> {
    Ipv4(&'a [u8]),
    Ipv6(&'a [u8]),
    /// Not IP (ARP, LLDP, …): counted, not decoded.
    Other {
        ethertype: u16,
    },
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LinkError {
    #[error("unsupported link type {0}")]
    UnsupportedLinkType(u32),
    #[error(
        "frame too short for its link-layer header ({needed} bytes needed, {available} captured)"
    )]
    Truncated { needed: usize, available: usize },
}

/// Decode the link-layer header(s) of `data` for `link_type` (pcap LINKTYPE_*).
pub fn decode_link(link_type: u32, data: &[u8]) -> Result<L3Packet<'_>, LinkError> {
    let _ = data;
    Err(LinkError::UnsupportedLinkType(link_type))
}
