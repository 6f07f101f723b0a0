//! Link, IP and TCP headers of one generated frame, written into a reused buffer, with the
//! IPv4 header checksum and the TCP checksum (pseudo-header included) computed.

use std::net::IpAddr;

/// One end of a TCP connection as it appears in frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub mac: [u8; 6],
    pub ip: IpAddr,
    pub port: u16,
}

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_ACK: u8 = 0x10;

/// The TCP fields of one segment.
#[derive(Clone, Copy, Debug)]
pub struct TcpFields {
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub ts_val: u32,
    pub ts_ecr: u32,
    /// SYN / SYN-ACK options: this MSS, window scale 8, SACK permitted (plus timestamps).
    pub syn_mss: Option<u16>,
}

/// Ones' complement sum over a byte sequence given in pieces (odd piece lengths allowed).
#[derive(Default)]
pub struct Checksum {
    sum: u64,
    odd: Option<u8>,
}

impl Checksum {
    pub fn add(&mut self, mut data: &[u8]) {
        if let Some(hi) = self.odd.take() {
            match data.split_first() {
                Some((&lo, rest)) => {
                    self.sum += u64::from(u16::from_be_bytes([hi, lo]));
                    data = rest;
                }
                None => {
                    self.odd = Some(hi);
                    return;
                }
            }
        }
        let mut words = data.chunks_exact(4);
        for w in &mut words {
            self.sum += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        }
        let rest = words.remainder();
        let mut pairs = rest.chunks_exact(2);
        for p in &mut pairs {
            self.sum += u64::from(u16::from_be_bytes([p[0], p[1]]));
        }
        self.odd = pairs.remainder().first().copied();
    }

    pub fn finish(mut self) -> u16 {
        if let Some(hi) = self.odd.take() {
            self.sum += u64::from(u16::from_be_bytes([hi, 0]));
        }
        let mut s = self.sum;
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }
}

/// Writes Ethernet (+802.1Q), IP and TCP headers for a segment carrying `payload` into `buf`
/// (cleared first). The payload itself is not copied into `buf`.
pub fn build_headers(
    buf: &mut Vec<u8>,
    vlan: Option<u16>,
    src: &Endpoint,
    dst: &Endpoint,
    ip_id: u16,
    tcp: &TcpFields,
    payload: &[u8],
) {
    buf.clear();
    buf.extend_from_slice(&dst.mac);
    buf.extend_from_slice(&src.mac);
    if let Some(id) = vlan {
        buf.extend_from_slice(&0x8100u16.to_be_bytes());
        buf.extend_from_slice(&(id & 0x0fff).to_be_bytes());
    }
    let opt_len: usize = if tcp.syn_mss.is_some() { 20 } else { 12 };
    let tcp_len = 20 + opt_len;
    let seg_len = tcp_len + payload.len();
    let mut pseudo = Checksum::default();
    match (src.ip, dst.ip) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            buf.extend_from_slice(&0x0800u16.to_be_bytes());
            let start = buf.len();
            let total = (20 + seg_len) as u16;
            buf.extend_from_slice(&[0x45, 0]);
            buf.extend_from_slice(&total.to_be_bytes());
            buf.extend_from_slice(&ip_id.to_be_bytes());
            buf.extend_from_slice(&0x4000u16.to_be_bytes()); // DF
            buf.extend_from_slice(&[128, 6, 0, 0]);
            buf.extend_from_slice(&s.octets());
            buf.extend_from_slice(&d.octets());
            let mut c = Checksum::default();
            c.add(&buf[start..]);
            let sum = c.finish();
            buf[start + 10..start + 12].copy_from_slice(&sum.to_be_bytes());
            pseudo.add(&s.octets());
            pseudo.add(&d.octets());
            pseudo.add(&[0, 6]);
            pseudo.add(&(seg_len as u16).to_be_bytes());
        }
        (s, d) => {
            let (s, d) = (v6(s), v6(d));
            buf.extend_from_slice(&0x86DDu16.to_be_bytes());
            buf.extend_from_slice(&[0x60, 0, 0, 0]);
            buf.extend_from_slice(&(seg_len as u16).to_be_bytes());
            buf.extend_from_slice(&[6, 128]);
            buf.extend_from_slice(&s);
            buf.extend_from_slice(&d);
            pseudo.add(&s);
            pseudo.add(&d);
            pseudo.add(&(seg_len as u32).to_be_bytes());
            pseudo.add(&[0, 0, 0, 6]);
        }
    }
    let start = buf.len();
    buf.extend_from_slice(&src.port.to_be_bytes());
    buf.extend_from_slice(&dst.port.to_be_bytes());
    buf.extend_from_slice(&tcp.seq.to_be_bytes());
    buf.extend_from_slice(&tcp.ack.to_be_bytes());
    buf.push(((tcp_len / 4) as u8) << 4);
    buf.push(tcp.flags);
    buf.extend_from_slice(&tcp.window.to_be_bytes());
    buf.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
    if let Some(mss) = tcp.syn_mss {
        buf.extend_from_slice(&[2, 4]);
        buf.extend_from_slice(&mss.to_be_bytes());
        buf.extend_from_slice(&[4, 2, 8, 10]);
        buf.extend_from_slice(&tcp.ts_val.to_be_bytes());
        buf.extend_from_slice(&tcp.ts_ecr.to_be_bytes());
        buf.extend_from_slice(&[1, 3, 3, 8]);
    } else {
        buf.extend_from_slice(&[1, 1, 8, 10]);
        buf.extend_from_slice(&tcp.ts_val.to_be_bytes());
        buf.extend_from_slice(&tcp.ts_ecr.to_be_bytes());
    }
    pseudo.add(&buf[start..]);
    pseudo.add(payload);
    let sum = pseudo.finish();
    buf[start + 16..start + 18].copy_from_slice(&sum.to_be_bytes());
}

fn v6(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V6(a) => a.octets(),
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn checksum_of_pieces_equals_checksum_of_whole() {
        let data: Vec<u8> = (0u8..=200).collect();
        let mut whole = Checksum::default();
        whole.add(&data);
        let mut parts = Checksum::default();
        parts.add(&data[..3]);
        parts.add(&data[3..4]);
        parts.add(&data[4..101]);
        parts.add(&data[101..]);
        assert_eq!(whole.finish(), parts.finish());
    }

    #[test]
    fn ipv4_header_checksum_verifies_to_zero() {
        let a = Endpoint {
            mac: [0, 0x15, 0x5d, 0, 0, 1],
            ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 11)),
            port: 50000,
        };
        let b = Endpoint {
            ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 100)),
            port: 445,
            ..a
        };
        let tcp = TcpFields {
            seq: 1,
            ack: 2,
            flags: TCP_ACK,
            window: 100,
            ts_val: 3,
            ts_ecr: 4,
            syn_mss: None,
        };
        let mut buf = Vec::new();
        build_headers(&mut buf, Some(7), &a, &b, 9, &tcp, b"hello");
        assert_eq!(buf.len(), 18 + 20 + 32);
        assert_eq!(&buf[12..16], &[0x81, 0x00, 0x00, 0x07]);
        let mut c = Checksum::default();
        c.add(&buf[18..38]);
        assert_eq!(c.finish(), 0);
        assert_eq!(u16::from_be_bytes([buf[20], buf[21]]), 20 + 32 + 5);
    }
}
