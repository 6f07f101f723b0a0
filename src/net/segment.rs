//! IPv4 / IPv6 + TCP header decoding, with etherparse's lax slicers so that a frame cut by the
//! snaplen still yields its TCP header and the captured part of the payload.

use std::net::{IpAddr, SocketAddr};

use etherparse::{ip_number, IpNumber, Ipv4HeaderSlice, LaxIpv4Slice, LaxIpv6Slice, TcpSlice};
use thiserror::Error;

use super::Dir;
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

impl TcpSegment<'_> {
    /// Sequence space the segment occupies: payload (captured or not), plus SYN and FIN.
    pub fn seq_len(&self) -> u64 {
        self.payload.len() as u64
            + u64::from(self.missing)
            + u64::from(self.flags.syn)
            + u64::from(self.flags.fin)
    }
}

/// The 12 header bytes that name a plain IPv4 segment's endpoints, as they lie in the packet:
/// source and destination address, source and destination port. The bulk path
/// ([`crate::net::Reassembler::push_packet`]) compares them with the last connection's without
/// building a [`SocketAddr`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WireEnds([u8; 12]);

impl WireEnds {
    /// The ends of a segment from `src` to `dst`, when both are IPv4.
    pub(crate) fn of(src: SocketAddr, dst: SocketAddr) -> Option<WireEnds> {
        let (SocketAddr::V4(s), SocketAddr::V4(d)) = (src, dst) else {
            return None;
        };
        let mut b = [0; 12];
        b[..4].copy_from_slice(&s.ip().octets());
        b[4..8].copy_from_slice(&d.ip().octets());
        b[8..10].copy_from_slice(&s.port().to_be_bytes());
        b[10..].copy_from_slice(&d.port().to_be_bytes());
        Some(WireEnds(b))
    }

    /// Its direction on the connection whose plain segments to the server and to the client
    /// bear `ends` (`None`: another connection's).
    #[inline]
    pub(crate) fn dir_in(&self, ends: &[WireEnds; 2]) -> Option<Dir> {
        if *self == ends[0] {
            Some(Dir::ToServer)
        } else if *self == ends[1] {
            Some(Dir::ToClient)
        } else {
            None
        }
    }

    /// A hash that both directions of a connection share (their ends are the same bytes
    /// swapped); not seeded: for a table where a clash costs only a miss.
    #[inline]
    pub(crate) fn symmetric_hash(&self) -> u32 {
        let b = &self.0;
        let word = |at: usize| u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let ports = u16::from_ne_bytes([b[8], b[9]]) ^ u16::from_ne_bytes([b[10], b[11]]);
        // Multiplicative: the product's top bits depend on every bit of the sum (a table
        // takes those).
        (word(0) ^ word(4) ^ u32::from(ports).rotate_left(16)).wrapping_mul(0x9E37_79B1)
    }
}

/// A plain segment as the bulk path takes it, read at fixed offsets: IPv4 without options or
/// fragmentation, all of it captured, TCP with ACK and without SYN, FIN or RST (any options).
/// For such a packet, [`decode_tcp`] would give the same endpoints, numbers and payload.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlainSegment<'a> {
    pub(crate) ends: WireEnds,
    pub(crate) seq: u32,
    pub(crate) ack: u32,
    pub(crate) payload: &'a [u8],
}

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;

impl<'a> PlainSegment<'a> {
    /// The segment of an IPv4 packet when it is plain (see the type); `None`: decode it in full.
    #[inline]
    pub(crate) fn of(packet: &'a [u8]) -> Option<PlainSegment<'a>> {
        const IP: usize = 20;
        let ip: &[u8; IP + 20] = packet.first_chunk()?;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
        let flags = ip[IP + 13];
        // Version 4, a 20-byte header; TCP; not a fragment; every announced byte captured.
        if ip[0] != 0x45
            || ip[9] != 6
            || fragment != 0
            || total > packet.len()
            || flags & (TCP_SYN | TCP_FIN | TCP_RST) != 0
            || flags & TCP_ACK == 0
        {
            return None;
        }
        let tcp_len = usize::from(ip[IP + 12] >> 4) * 4;
        if tcp_len < 20 {
            return None;
        }
        let payload = packet.get(IP + tcp_len..total)?;
        let word = |at: usize| u32::from_be_bytes([ip[at], ip[at + 1], ip[at + 2], ip[at + 3]]);
        let mut ends = [0; 12];
        ends.copy_from_slice(&ip[12..24]);
        Some(PlainSegment {
            ends: WireEnds(ends),
            seq: word(IP + 4),
            ack: word(IP + 8),
            payload,
        })
    }
}

impl PlainSegment<'_> {
    /// Its direction on the connection whose plain segments to the server and to the client
    /// bear `ends` (`None`: another connection's).
    #[inline]
    pub(crate) fn dir_in(&self, ends: &[WireEnds; 2]) -> Option<Dir> {
        self.ends.dir_in(ends)
    }
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

/// What the IP layer yields: addresses, the transport payload as captured, the bytes the IP
/// length announces beyond the capture.
struct IpPayload<'a> {
    src: IpAddr,
    dst: IpAddr,
    protocol: IpNumber,
    payload: &'a [u8],
    missing: usize,
}

/// The TCP segment in an L3 packet, `Ok(None)` if it is not TCP.
pub fn decode_tcp(l3: L3Packet<'_>) -> Result<Option<TcpSegment<'_>>, NetError> {
    let ip = match l3 {
        L3Packet::Ipv4(data) => ipv4(data)?,
        L3Packet::Ipv6(data) => ipv6(data)?,
        L3Packet::Other { .. } => return Ok(None),
    };
    if ip.protocol != IpNumber::TCP {
        return Ok(None);
    }
    let tcp = TcpSlice::from_slice(ip.payload).map_err(|e| NetError::BadTcp(e.to_string()))?;
    Ok(Some(TcpSegment {
        src: SocketAddr::new(ip.src, tcp.source_port()),
        dst: SocketAddr::new(ip.dst, tcp.destination_port()),
        seq: tcp.sequence_number(),
        ack: tcp.acknowledgment_number(),
        flags: TcpFlags {
            syn: tcp.syn(),
            ack: tcp.ack(),
            fin: tcp.fin(),
            rst: tcp.rst(),
            psh: tcp.psh(),
        },
        window: tcp.window_size(),
        payload: tcp.payload(),
        missing: u32::try_from(ip.missing).unwrap_or(u32::MAX),
    }))
}

/// An IPv4 packet's payload as etherparse's lax slicer (`ipv4_lax`) yields it. Packets without
/// an authentication header (all but a few) take its header slice alone and the same length
/// rule: the slicer's layers (extension headers, the length source, the error paths) cost
/// more than the rest of the decoding on every frame of a bulk transfer.
#[inline]
fn ipv4(data: &[u8]) -> Result<IpPayload<'_>, NetError> {
    let h = Ipv4HeaderSlice::from_slice(data).map_err(|e| NetError::BadIp(e.to_string()))?;
    if h.protocol() == ip_number::AUTHENTICATION_HEADER {
        return ipv4_lax(data);
    }
    if h.is_fragmenting_payload() {
        return Err(NetError::Fragment);
    }
    let header_len = h.slice().len();
    let announced = usize::from(h.total_len());
    // The lax slicer's rule: a total length below the header's falls back to the captured
    // bytes; one beyond them is the snaplen loss.
    let (end, missing) = if announced < header_len {
        (data.len(), 0)
    } else if announced > data.len() {
        (data.len(), announced - data.len())
    } else {
        (announced, 0)
    };
    Ok(IpPayload {
        src: IpAddr::V4(h.source_addr()),
        dst: IpAddr::V4(h.destination_addr()),
        protocol: h.protocol(),
        payload: data.get(header_len..end).unwrap_or_default(),
        missing,
    })
}

fn ipv4_lax(data: &[u8]) -> Result<IpPayload<'_>, NetError> {
    let (ip, ext_err) =
        LaxIpv4Slice::from_slice(data).map_err(|e| NetError::BadIp(e.to_string()))?;
    if let Some(e) = ext_err {
        return Err(NetError::BadIp(e.to_string()));
    }
    let h = ip.header();
    if h.is_fragmenting_payload() {
        return Err(NetError::Fragment);
    }
    // total_len is honoured (so Ethernet padding and trailers are left out); what it announces
    // beyond the captured bytes is the snaplen loss.
    let announced = usize::from(h.total_len());
    let missing = if ip.payload().incomplete {
        announced.saturating_sub(data.len())
    } else {
        0
    };
    Ok(IpPayload {
        src: IpAddr::V4(h.source_addr()),
        dst: IpAddr::V4(h.destination_addr()),
        protocol: ip.payload().ip_number,
        payload: ip.payload().payload,
        missing,
    })
}

fn ipv6(data: &[u8]) -> Result<IpPayload<'_>, NetError> {
    let (ip, ext_err) =
        LaxIpv6Slice::from_slice(data).map_err(|e| NetError::BadIp(e.to_string()))?;
    if let Some((e, _)) = ext_err {
        return Err(NetError::BadIp(e.to_string()));
    }
    if ip.is_payload_fragmented() {
        return Err(NetError::Fragment);
    }
    let h = ip.header();
    let announced = 40 + usize::from(h.payload_length());
    let missing = if ip.payload().incomplete {
        announced.saturating_sub(data.len())
    } else {
        0
    };
    Ok(IpPayload {
        src: IpAddr::V6(h.source_addr()),
        dst: IpAddr::V6(h.destination_addr()),
        protocol: ip.payload().ip_number,
        payload: ip.payload().payload,
        missing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn v4_packet(payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(50000, 445, 1000, 64000)
            .ack(77)
            .psh();
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    /// What an IP decoder yields, comparable.
    fn outcome(
        ip: Result<IpPayload<'_>, NetError>,
    ) -> Result<(IpAddr, IpAddr, u8, &[u8], usize), NetError> {
        ip.map(|p| (p.src, p.dst, p.protocol.0, p.payload, p.missing))
    }

    proptest::proptest! {
        /// `ipv4` yields what etherparse's lax slicer does, for any version / header length /
        /// total length / fragment bits / protocol and any cut (around the bounds most).
        #[test]
        fn ipv4_is_the_lax_slicer(
            mut bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..90),
            version_ihl in proptest::prop_oneof![0x44u8..0x48, 0x40u8..0x50, proptest::num::u8::ANY],
            total in proptest::prop_oneof![0u16..100, proptest::num::u16::ANY],
            fragment in proptest::prop_oneof![0u8..1, 0x40u8..0x41, proptest::num::u8::ANY],
            offset in proptest::prop_oneof![0u8..1, proptest::num::u8::ANY],
            protocol in proptest::prop_oneof![6u8..7, 51u8..52, proptest::num::u8::ANY],
            auth_len in 0u8..3,
        ) {
            let fields = [(0, version_ihl), (6, fragment), (7, offset), (9, protocol)];
            for (i, v) in fields {
                if let Some(b) = bytes.get_mut(i) {
                    *b = v;
                }
            }
            if let Some(b) = bytes.get_mut(2..4) {
                b.copy_from_slice(&total.to_be_bytes());
            }
            // An authentication header's length byte, where a 20-byte header would end.
            if let Some(b) = bytes.get_mut(21) {
                *b = auth_len;
            }
            proptest::prop_assert_eq!(outcome(ipv4(&bytes)), outcome(ipv4_lax(&bytes)));
        }
    }

    proptest::proptest! {
        /// What the bulk path reads from a plain packet is what `decode_tcp` decodes from it;
        /// for any other packet it declines (and `decode_tcp` decides).
        #[test]
        fn plain_segment_is_decode_tcp(
            payload in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
            ihl in proptest::prop_oneof![0x45u8..0x46, proptest::num::u8::ANY],
            total_delta in -45i32..8,
            fragment in proptest::prop_oneof![0u8..1, proptest::num::u8::ANY],
            protocol in proptest::prop_oneof![6u8..7, proptest::num::u8::ANY],
            data_offset in proptest::prop_oneof![0x50u8..0x51, proptest::num::u8::ANY],
            flags in proptest::num::u8::ANY,
            cut in 0usize..80,
        ) {
            let mut pkt = v4_packet(&payload);
            pkt[0] = ihl;
            let total = (pkt.len() as i32 + total_delta).clamp(0, 0xffff) as u16;
            pkt[2..4].copy_from_slice(&total.to_be_bytes());
            pkt[6] = fragment;
            pkt[9] = protocol;
            pkt[32] = data_offset;
            pkt[33] = flags;
            pkt.truncate(pkt.len().saturating_sub(cut));
            let Some(plain) = PlainSegment::of(&pkt) else {
                return Ok(());
            };
            let seg = decode_tcp(L3Packet::Ipv4(&pkt)).unwrap().unwrap();
            proptest::prop_assert_eq!(Some(plain.ends), WireEnds::of(seg.src, seg.dst));
            proptest::prop_assert_eq!((plain.seq, plain.ack, plain.payload), (seg.seq, seg.ack, seg.payload));
            proptest::prop_assert_eq!(seg.missing, 0);
            let f = seg.flags;
            proptest::prop_assert!(f.ack && !f.syn && !f.fin && !f.rst);
        }
    }

    #[test]
    fn plain_segments_and_what_is_not_one() {
        let pkt = v4_packet(b"hello");
        let plain = PlainSegment::of(&pkt).expect("plain");
        let ends = WireEnds::of(
            "10.0.0.1:50000".parse().unwrap(),
            "10.0.0.2:445".parse().unwrap(),
        );
        assert_eq!(Some(plain.ends), ends);
        assert_eq!(
            (plain.seq, plain.ack, plain.payload),
            (1000, 77, &b"hello"[..])
        );
        // Cut by the snaplen, with IP options, a SYN, a fragment: decoded in full.
        assert!(PlainSegment::of(&pkt[..pkt.len() - 1]).is_none());
        for (at, value) in [(0, 0x46), (33, 0x12), (6, 0x20)] {
            let mut other = pkt.clone();
            other[at] = value;
            assert!(PlainSegment::of(&other).is_none(), "byte {at} = {value:#x}");
        }
        // Ethernet padding after the packet is left out, as `decode_tcp` does.
        let mut padded = pkt.clone();
        padded.extend_from_slice(&[0; 6]);
        assert_eq!(PlainSegment::of(&padded).expect("plain").payload, b"hello");
    }

    #[test]
    fn ipv4_tcp_fields() {
        let pkt = v4_packet(b"hello");
        let seg = decode_tcp(L3Packet::Ipv4(&pkt)).unwrap().unwrap();
        assert_eq!(seg.src, "10.0.0.1:50000".parse().unwrap());
        assert_eq!(seg.dst, "10.0.0.2:445".parse().unwrap());
        assert_eq!((seg.seq, seg.ack, seg.window), (1000, 77, 64000));
        assert!(seg.flags.ack && seg.flags.psh && !seg.flags.syn && !seg.flags.fin);
        assert_eq!(seg.payload, b"hello");
        assert_eq!(seg.missing, 0);
        assert_eq!(seg.seq_len(), 5);
    }

    #[test]
    fn padding_removed_and_snaplen_counted() {
        let mut padded = v4_packet(b"ab");
        padded.extend_from_slice(&[0, 0, 0, 0]); // Ethernet padding / FCS
        let seg = decode_tcp(L3Packet::Ipv4(&padded)).unwrap().unwrap();
        assert_eq!((seg.payload, seg.missing), (&b"ab"[..], 0));

        let full = v4_packet(&[7u8; 100]);
        let seg = decode_tcp(L3Packet::Ipv4(&full[..20 + 20 + 30]))
            .unwrap()
            .unwrap();
        assert_eq!((seg.payload.len(), seg.missing), (30, 70));

        // Cut inside the TCP header: nothing to decode.
        assert!(matches!(
            decode_tcp(L3Packet::Ipv4(&full[..30])),
            Err(NetError::BadTcp(_))
        ));
    }

    #[test]
    fn fragment_and_non_tcp() {
        let mut pkt = v4_packet(b"x");
        pkt[6] |= 0x20; // more fragments
        assert_eq!(
            decode_tcp(L3Packet::Ipv4(&pkt)).err(),
            Some(NetError::Fragment)
        );
        assert!(decode_tcp(L3Packet::Other { ethertype: 0x806 })
            .unwrap()
            .is_none());
        let udp = {
            let mut out = Vec::new();
            PacketBuilder::ipv4([1, 1, 1, 1], [2, 2, 2, 2], 9)
                .udp(1, 2)
                .write(&mut out, b"u")
                .unwrap();
            out
        };
        assert!(decode_tcp(L3Packet::Ipv4(&udp)).unwrap().is_none());
    }

    #[test]
    fn ipv6_with_hop_by_hop_extension() {
        let mut pkt = Vec::new();
        PacketBuilder::ipv6([0xfe; 16], [0xfd; 16], 64)
            .tcp(445, 51000, 5, 100)
            .write(&mut pkt, b"smb")
            .unwrap();
        // Insert an 8-byte hop-by-hop header (next header TCP) after the fixed header.
        pkt[6] = 0; // next header: hop-by-hop
        let plen = u16::from_be_bytes([pkt[4], pkt[5]]) + 8;
        pkt[4..6].copy_from_slice(&plen.to_be_bytes());
        pkt.splice(40..40, [6u8, 0, 1, 4, 0, 0, 0, 0]);
        let seg = decode_tcp(L3Packet::Ipv6(&pkt)).unwrap().unwrap();
        assert_eq!(seg.src.port(), 445);
        assert_eq!(seg.payload, b"smb");
        // Cut two payload bytes off.
        let seg = decode_tcp(L3Packet::Ipv6(&pkt[..pkt.len() - 2]))
            .unwrap()
            .unwrap();
        assert_eq!((seg.payload, seg.missing), (&b"s"[..], 2));
    }

    #[test]
    fn ipv4_options_and_tcp_options_are_skipped() {
        let mut pkt = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(50000, 445, 9, 100)
            .options(&[
                etherparse::TcpOptionElement::MaximumSegmentSize(1460),
                etherparse::TcpOptionElement::WindowScale(7),
            ])
            .unwrap()
            .write(&mut pkt, b"data")
            .unwrap();
        // Give the IP header 4 bytes of options (NOP NOP NOP EOL): IHL 6, total length + 4.
        pkt[0] = 0x46;
        let total = u16::from_be_bytes([pkt[2], pkt[3]]) + 4;
        pkt[2..4].copy_from_slice(&total.to_be_bytes());
        pkt.splice(20..20, [1u8, 1, 1, 0]);
        let seg = decode_tcp(L3Packet::Ipv4(&pkt)).unwrap().unwrap();
        assert_eq!(seg.payload, b"data");
        assert_eq!((seg.src.port(), seg.seq), (50000, 9));
    }
}
