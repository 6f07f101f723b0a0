//! IPv4 / IPv6 + TCP header decoding. STUB: owned by the capture/net work.

use std::net::SocketAddr;

use thiserror::Error;

use crate::capture::L3Packet;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpFlags {
    pub syn: bool,
    pub ack: bool,
    pub fin: bool,
    pub rst: bool,
    pub psh: bool,
}

/// A TCP segment borrowed from the frame it came in.
#[derive(Clone, Copy, Debug)]
pub struct TcpSegment<'a> {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    pub window: u16,
    /// The payload bytes that were captured.
    pub payload: &'a [u8],
    /// Payload bytes the IP header announces but the capture does not hold (snaplen).
    pub missing: u32,
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum NetError {
    #[error("IP header truncated or malformed: {0}")]
    BadIp(String),
    #[error("TCP header truncated or malformed: {0}")]
    BadTcp(String),
    #[error("IP fragment (not reassembled)")]
    Fragment,
}

/// The TCP segment in an L3 packet, `Ok(None)` if it is not TCP.
pub fn decode_tcp(l3: L3Packet<'_>) -> Result<Option<TcpSegment<'_>>, NetError> {
    let _ = l3;
    Ok(None)
}
