//! One TCP segment in every supported link-layer encapsulation, written to a pcapng file (one
//! interface per link type) and read back through the reader, link and TCP decoders.

use std::io::Cursor;

use etherparse::PacketBuilder;
use sqos::capture::{decode_link, CaptureReader, LinkError, PcapngWriter, Timestamp};
use sqos::net::decode_tcp;

fn ipv4_tcp(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ipv4([192, 168, 1, 10], [192, 168, 1, 20], 64)
        .tcp(49152, 445, 0x0102_0304, 8192)
        .ack(1)
        .write(&mut out, payload)
        .unwrap();
    out
}

/// IPv6 with a destination-options extension header before TCP.
fn ipv6_ext_tcp(payload: &[u8]) -> Vec<u8> {
    let mut pkt = Vec::new();
    PacketBuilder::ipv6([0x20; 16], [0x30; 16], 64)
        .tcp(445, 50123, 77, 8192)
        .write(&mut pkt, payload)
        .unwrap();
    pkt[6] = 60; // next header: destination options
    let plen = u16::from_be_bytes([pkt[4], pkt[5]]) + 8;
    pkt[4..6].copy_from_slice(&plen.to_be_bytes());
    pkt.splice(40..40, [6u8, 0, 1, 4, 0, 0, 0, 0]); // next: TCP, PadN
    pkt
}

fn ethernet(ethertype_chain: &[u16], ip: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    f.extend_from_slice(&ethertype_chain[0].to_be_bytes());
    for (i, next) in ethertype_chain[1..].iter().enumerate() {
        f.extend_from_slice(&(100 + i as u16).to_be_bytes()); // TCI: VLAN id
        f.extend_from_slice(&next.to_be_bytes());
    }
    f.extend_from_slice(ip);
    f.extend_from_slice(&[0u8; 6]); // padding / FCS junk after the IP packet
    f
}

#[test]
fn every_link_layer_yields_the_tcp_segment() {
    let v4 = ipv4_tcp(b"SMB over v4");
    let v6 = ipv6_ext_tcp(b"SMB over v6");
    // Ethernet: plain, 802.1Q, QinQ (802.1ad + 802.1Q), old 0x9100 double tag.
    let mut frames: Vec<(u16, Vec<u8>, &[u8])> = vec![
        (1, ethernet(&[0x0800], &v4), b"SMB over v4"),
        (1, ethernet(&[0x8100, 0x86dd], &v6), b"SMB over v6"),
        (1, ethernet(&[0x88a8, 0x8100, 0x0800], &v4), b"SMB over v4"),
        (1, ethernet(&[0x9100, 0x8100, 0x0800], &v4), b"SMB over v4"),
    ];
    // Linux SLL: outgoing (4), Ethernet hardware, 6-byte address, IPv4.
    let mut sll = vec![0, 4, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(&v4);
    frames.push((113, sll, b"SMB over v4"));
    // SLL2: protocol, reserved, ifindex, hardware type, packet type, address length, address.
    let mut sll2 = vec![
        0x86, 0xdd, 0, 0, 0, 0, 0, 3, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0,
    ];
    sll2.extend_from_slice(&v6);
    frames.push((276, sll2, b"SMB over v6"));
    // BSD null: family in host order (little and big endian), LOOP: network order.
    let mut null_le = 2u32.to_le_bytes().to_vec();
    null_le.extend_from_slice(&v4);
    frames.push((0, null_le, b"SMB over v4"));
    let mut null_be = 28u32.to_be_bytes().to_vec();
    null_be.extend_from_slice(&v6);
    frames.push((0, null_be, b"SMB over v6"));
    let mut lo = 30u32.to_be_bytes().to_vec();
    lo.extend_from_slice(&v6);
    frames.push((108, lo, b"SMB over v6"));
    // Raw IP.
    frames.push((101, v6.clone(), b"SMB over v6"));
    frames.push((12, v4.clone(), b"SMB over v4"));
    frames.push((228, v4.clone(), b"SMB over v4"));
    frames.push((229, v6.clone(), b"SMB over v6"));

    let mut w = PcapngWriter::new(Vec::new()).unwrap();
    let mut ifaces: Vec<u16> = Vec::new();
    for (lt, f, _) in &frames {
        let i = match ifaces.iter().position(|x| x == lt) {
            Some(i) => i as u32,
            None => {
                ifaces.push(*lt);
                w.add_interface(*lt, 0, 9).unwrap()
            }
        };
        w.write_epb(i, Timestamp(1), f, f.len() as u32).unwrap();
    }
    let mut r = CaptureReader::from_reader(Box::new(Cursor::new(w.into_inner()))).unwrap();
    let mut n = 0;
    while let Some(f) = r.next_frame().unwrap() {
        let (lt, _, payload) = &frames[n];
        n += 1;
        assert_eq!(f.link_type, u32::from(*lt));
        let l3 = decode_link(f.link_type, f.data).unwrap();
        let seg = decode_tcp(l3).unwrap().unwrap();
        assert_eq!(seg.payload, *payload, "frame {n}, link type {lt}");
        assert_eq!(seg.missing, 0);
        let ports = (seg.src.port(), seg.dst.port());
        assert!(
            ports == (49152, 445) || ports == (445, 50123),
            "frame {n}: {ports:?}"
        );
    }
    assert_eq!(n, frames.len());
}

#[test]
fn snaplen_cut_frame_decodes_as_far_as_it_goes() {
    let v4 = ipv4_tcp(&[0x55; 1000]);
    let eth = ethernet(&[0x8100, 0x0800], &v4);
    let mut w = PcapngWriter::new(Vec::new()).unwrap();
    w.add_interface(1, 128, 6).unwrap();
    w.write_epb(0, Timestamp(1), &eth[..128], eth.len() as u32)
        .unwrap();
    let mut r = CaptureReader::from_reader(Box::new(Cursor::new(w.into_inner()))).unwrap();
    let f = r.next_frame().unwrap().unwrap();
    assert!(f.is_truncated());
    let seg = decode_tcp(decode_link(f.link_type, f.data).unwrap())
        .unwrap()
        .unwrap();
    // 128 captured = 18 (Ethernet + tag) + 20 (IP) + 20 (TCP) + 70 payload.
    assert_eq!((seg.payload.len(), seg.missing), (70, 930));
    assert_eq!(seg.seq, 0x0102_0304);
}

#[test]
fn unknown_link_type_and_cut_headers_are_errors() {
    assert_eq!(
        decode_link(147, b"user"),
        Err(LinkError::UnsupportedLinkType(147))
    );
    assert_eq!(
        decode_link(113, &[0u8; 10]),
        Err(LinkError::Truncated {
            needed: 16,
            available: 10
        })
    );
    assert_eq!(
        decode_link(1, &[0u8; 13]),
        Err(LinkError::Truncated {
            needed: 14,
            available: 13
        })
    );
}
