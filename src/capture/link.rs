//! Link layers → the L3 packet inside.
//!
//! VLAN tags and Linux SLL use etherparse's header slices; Ethernet's 14 bytes, SLL2 and BSD
//! null/loopback (which etherparse lacks) are read here. Everything is a zero-copy sub-slice of
//! the frame.

use etherparse::{LinuxSllHeaderSlice, LinuxSllProtocolType, SingleVlanHeaderSlice};
use thiserror::Error;

/// pcap LINKTYPE_* values understood here.
pub mod linktype {
    pub const NULL: u32 = 0;
    pub const ETHERNET: u32 = 1;
    pub const RAW_BSD12: u32 = 12;
    pub const RAW_BSD14: u32 = 14;
    pub const RAW: u32 = 101;
    pub const LOOP: u32 = 108;
    pub const LINUX_SLL: u32 = 113;
    pub const IPV4: u32 = 228;
    pub const IPV6: u32 = 229;
    pub const LINUX_SLL2: u32 = 276;
}

/// VLAN tags peeled at most; deeper stacks are reported as non-IP rather than walked forever.
const MAX_VLAN_TAGS: usize = 8;

/// Destination, source, EtherType.
const ETHERNET_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
/// 802.1Q, 802.1ad, and the pre-standard QinQ tag types.
const VLAN_ETHERTYPES: [u16; 5] = [0x8100, 0x88a8, 0x9100, 0x9200, 0x9300];

/// BSD address-family values for IPv4 and IPv6 (they differ between BSDs and macOS).
const AF_INET: u32 = 2;
const AF_INET6: [u32; 3] = [24, 28, 30];

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
///
/// Inlined where frames are decoded (the bulk lane's loop calls it for every quiet frame):
/// Ethernet's untagged IPv4, nearly every frame, is told there; the rest out of line.
#[inline(always)]
pub fn decode_link(link_type: u32, data: &[u8]) -> Result<L3Packet<'_>, LinkError> {
    if link_type == linktype::ETHERNET {
        ethernet(data)
    } else {
        other_link(link_type, data)
    }
}

fn other_link(link_type: u32, data: &[u8]) -> Result<L3Packet<'_>, LinkError> {
    match link_type {
        linktype::LINUX_SLL => sll(data),
        linktype::LINUX_SLL2 => sll2(data),
        linktype::RAW | linktype::RAW_BSD12 | linktype::RAW_BSD14 => raw_ip(data),
        linktype::IPV4 => Ok(L3Packet::Ipv4(data)),
        linktype::IPV6 => Ok(L3Packet::Ipv6(data)),
        linktype::NULL => {
            // The family is in the capturing host's byte order; families are small numbers, so
            // a value with high bits set was written the other way round.
            let family = header_u32(data, 4)?;
            let family = if family & 0xffff_0000 != 0 {
                family.swap_bytes()
            } else {
                family
            };
            Ok(by_family(family, data.get(4..).unwrap_or_default()))
        }
        linktype::LOOP => {
            // LOOP (OpenBSD) always stores the family in network byte order.
            let family = u32::from_be_bytes(header_u32(data, 4)?.to_le_bytes());
            Ok(by_family(family, data.get(4..).unwrap_or_default()))
        }
        other => Err(LinkError::UnsupportedLinkType(other)),
    }
}

/// Destination, source, EtherType: read in place.
#[inline(always)]
fn ethernet(data: &[u8]) -> Result<L3Packet<'_>, LinkError> {
    let Some(h) = data.first_chunk::<ETHERNET_LEN>() else {
        return Err(truncated(ETHERNET_LEN, data));
    };
    let ethertype = u16::from_be_bytes([h[12], h[13]]);
    // Nearly every frame: untagged IPv4, told before the loop over tags.
    if ethertype == ETHERTYPE_IPV4 {
        return Ok(L3Packet::Ipv4(&data[ETHERNET_LEN..]));
    }
    after_ethertype(ethertype, data, ETHERNET_LEN)
}

fn sll(data: &[u8]) -> Result<L3Packet<'_>, LinkError> {
    const LEN: usize = 16;
    if data.len() < LEN {
        return Err(truncated(LEN, data));
    }
    // etherparse rejects packet and hardware types it does not know; newer kernels add some,
    // so fall back to the protocol field itself (which is an EtherType for the IP cases).
    let protocol = match LinuxSllHeaderSlice::from_slice(data).map(|h| h.protocol_type()) {
        // Netlink and radiotap "protocols" are not EtherTypes.
        Ok(
            p @ (LinuxSllProtocolType::NetlinkProtocolType(_) | LinuxSllProtocolType::Ignored(_)),
        ) => {
            return Ok(L3Packet::Other {
                ethertype: u16::from(p),
            })
        }
        Ok(p) => u16::from(p),
        Err(_) => be16(data, 14),
    };
    after_ethertype(protocol, data, LEN)
}

/// SLL2: protocol (2), reserved (2), interface index (4), hardware type (2), packet type (1),
/// address length (1), address (8).
fn sll2(data: &[u8]) -> Result<L3Packet<'_>, LinkError> {
    const LEN: usize = 20;
    if data.len() < LEN {
        return Err(truncated(LEN, data));
    }
    after_ethertype(be16(data, 0), data, LEN)
}

fn raw_ip(data: &[u8]) -> Result<L3Packet<'_>, LinkError> {
    match data.first().map(|b| b >> 4) {
        None => Err(truncated(1, data)),
        Some(4) => Ok(L3Packet::Ipv4(data)),
        Some(6) => Ok(L3Packet::Ipv6(data)),
        Some(_) => Ok(L3Packet::Other { ethertype: 0 }),
    }
}

fn by_family(family: u32, payload: &[u8]) -> L3Packet<'_> {
    if family == AF_INET {
        L3Packet::Ipv4(payload)
    } else if AF_INET6.contains(&family) {
        L3Packet::Ipv6(payload)
    } else {
        L3Packet::Other { ethertype: 0 }
    }
}

/// Follows `ethertype` at `offset` of `frame` through any VLAN tags to the L3 packet.
#[inline]
fn after_ethertype(
    mut ethertype: u16,
    frame: &[u8],
    mut offset: usize,
) -> Result<L3Packet<'_>, LinkError> {
    for _ in 0..=MAX_VLAN_TAGS {
        let rest = frame.get(offset..).unwrap_or_default();
        match ethertype {
            ETHERTYPE_IPV4 => return Ok(L3Packet::Ipv4(rest)),
            ETHERTYPE_IPV6 => return Ok(L3Packet::Ipv6(rest)),
            t if VLAN_ETHERTYPES.contains(&t) => {
                let tag = SingleVlanHeaderSlice::from_slice(rest)
                    .map_err(|_| truncated(offset + 4, frame))?;
                ethertype = tag.ether_type().0;
                offset += tag.slice().len();
            }
            other => return Ok(L3Packet::Other { ethertype: other }),
        }
    }
    Ok(L3Packet::Other { ethertype })
}

fn header_u32(data: &[u8], len: usize) -> Result<u32, LinkError> {
    data.get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| truncated(len, data))
}

fn be16(data: &[u8], at: usize) -> u16 {
    data.get(at..at + 2)
        .map(|b| {
            u16::from_be_bytes([
                b.first().copied().unwrap_or(0),
                b.get(1).copied().unwrap_or(0),
            ])
        })
        .unwrap_or(0)
}

fn truncated(needed: usize, data: &[u8]) -> LinkError {
    LinkError::Truncated {
        needed,
        available: data.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP4: [u8; 4] = [0x45, 0, 0, 20];
    const IP6: [u8; 4] = [0x60, 0, 0, 0];

    fn eth(ethertype: u16) -> Vec<u8> {
        let mut f = vec![0xaa; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    #[test]
    fn ethernet_ipv4_and_arp() {
        let mut f = eth(0x0800);
        f.extend_from_slice(&IP4);
        assert_eq!(decode_link(1, &f), Ok(L3Packet::Ipv4(&IP4[..])));
        assert_eq!(
            decode_link(1, &eth(0x0806)),
            Ok(L3Packet::Other { ethertype: 0x0806 })
        );
    }

    #[test]
    fn qinq_two_tags_then_ipv6() {
        let mut f = eth(0x88a8);
        f.extend_from_slice(&[0x00, 0x64, 0x81, 0x00]); // S-tag VID 100, next 802.1Q
        f.extend_from_slice(&[0x00, 0x0a, 0x86, 0xdd]); // C-tag VID 10, next IPv6
        f.extend_from_slice(&IP6);
        assert_eq!(decode_link(1, &f), Ok(L3Packet::Ipv6(&IP6[..])));
    }

    #[test]
    fn vlan_stack_deeper_than_bound_is_not_walked() {
        let mut f = eth(0x8100);
        for _ in 0..(MAX_VLAN_TAGS + 1) {
            f.extend_from_slice(&[0x00, 0x01, 0x81, 0x00]);
        }
        f.extend_from_slice(&IP4);
        assert_eq!(
            decode_link(1, &f),
            Ok(L3Packet::Other { ethertype: 0x8100 })
        );
    }

    #[test]
    fn cut_vlan_tag_is_truncated() {
        let mut f = eth(0x8100);
        f.extend_from_slice(&[0x00]);
        assert_eq!(
            decode_link(1, &f),
            Err(LinkError::Truncated {
                needed: 18,
                available: 15
            })
        );
    }

    #[test]
    fn sll_with_unknown_packet_type_still_decodes() {
        let mut f = vec![0x00, 0x63, 0x00, 0x01, 0x00, 0x06];
        f.extend_from_slice(&[0u8; 8]);
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        f.extend_from_slice(&IP4);
        assert_eq!(decode_link(113, &f), Ok(L3Packet::Ipv4(&IP4[..])));
    }

    #[test]
    fn sll2_ipv6() {
        let mut f = 0x86ddu16.to_be_bytes().to_vec();
        f.extend_from_slice(&[0u8; 18]);
        f.extend_from_slice(&IP6);
        assert_eq!(decode_link(276, &f), Ok(L3Packet::Ipv6(&IP6[..])));
        assert_eq!(
            decode_link(276, &f[..19]),
            Err(LinkError::Truncated {
                needed: 20,
                available: 19
            })
        );
    }

    #[test]
    fn null_both_byte_orders_and_loop() {
        let mut le = 2u32.to_le_bytes().to_vec();
        le.extend_from_slice(&IP4);
        assert_eq!(decode_link(0, &le), Ok(L3Packet::Ipv4(&IP4[..])));
        for af6 in [24u32, 28, 30] {
            let mut be = af6.to_be_bytes().to_vec();
            be.extend_from_slice(&IP6);
            assert_eq!(decode_link(0, &be), Ok(L3Packet::Ipv6(&IP6[..])));
            assert_eq!(decode_link(108, &be), Ok(L3Packet::Ipv6(&IP6[..])));
        }
        assert_eq!(
            decode_link(0, &[2, 0]),
            Err(LinkError::Truncated {
                needed: 4,
                available: 2
            })
        );
    }

    #[test]
    fn raw_ip_by_version_and_unsupported() {
        assert_eq!(decode_link(101, &IP6), Ok(L3Packet::Ipv6(&IP6[..])));
        assert_eq!(decode_link(12, &IP4), Ok(L3Packet::Ipv4(&IP4[..])));
        assert_eq!(decode_link(228, &IP4), Ok(L3Packet::Ipv4(&IP4[..])));
        assert_eq!(
            decode_link(147, &IP4),
            Err(LinkError::UnsupportedLinkType(147))
        );
    }
}
