//! The reader over every public capture in ../shared/real-captures/: frame counts as capinfos
//! reports them, timestamps and lengths as tshark shows them, every frame decodable to TCP.

use sqos::capture::{decode_link, CaptureReader, L3Packet};
use sqos::net::decode_tcp;

use crate::support::need::real_captures;

/// (file, frames per `capinfos -c`).
const FRAMES: &[(&str, u64)] = &[
    ("sv-smb2-01_smb2-peter.pcap", 792),
    ("sv-smb2-05_20171220_smb_mimikatz_copy_to_host.pcap", 649),
    ("sv-smb2-async-read_input.pcap", 3138),
    ("sv-smb2-async_input.pcap", 10),
    ("sv-smb2-delete_input.pcap", 134),
    (
        "sv-smb2-frames-gap-payload-logging_smb2-peter-minus-p191.pcap",
        791,
    ),
    ("sv-smb2-ntlmssp-negotiateflags_input.pcap", 1000),
    ("sv-smb3-02-midstream_input.pcap", 46),
    ("zeek-smb2-multiple-pdus.pcap", 2),
    ("zeek-smb2-zero-byte-error-ioctl.pcapng", 180),
    ("zeek-smb2.pcap", 1178),
    ("zeek-smb2_100_small_files.pcap", 979),
    ("zeek-smb2_fscontrol.pcap", 8),
    ("zeek-smb2readwrite.pcap", 56),
    ("zeek-smb3.pcap", 54),
    ("zeek-smb311.pcap", 34),
    ("zeek-smb3_multichannel.pcap", 1448),
    ("zeek-smb3_negotiate_context.pcap", 13),
    ("zeek-smb_v2_only_non_zero_reserved1.pcap", 220),
];

#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs ../shared/real-captures (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn frame_counts_match_capinfos() {
    let dir = real_captures();
    let on_disk = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            let n = n.to_string_lossy();
            n.ends_with(".pcap") || n.ends_with(".pcapng")
        })
        .count();
    assert_eq!(on_disk, FRAMES.len(), "every capture is listed");
    for &(name, frames) in FRAMES {
        let mut r = CaptureReader::open(&dir.join(name)).unwrap();
        let mut n = 0;
        let mut last = 0;
        while let Some(f) = r.next_frame().unwrap() {
            n += 1;
            assert_eq!(f.number, n);
            assert!(decode_link(f.link_type, f.data).is_ok(), "{name} frame {n}");
            last = f.number;
        }
        assert_eq!((name, n, last), (name, frames, frames));
        let size = std::fs::metadata(dir.join(name)).unwrap().len();
        assert_eq!(r.bytes_read(), size, "{name}: every byte consumed");
    }
}

/// First and last frame of a pcap and a pcapng file, per `tshark -e frame.time_epoch -e
/// frame.len -e frame.cap_len`.
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs ../shared/real-captures (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn timestamps_and_lengths_match_tshark() {
    let dir = real_captures();
    for (name, first, last) in [
        (
            "zeek-smb2-zero-byte-error-ioctl.pcapng",
            (1, 1_659_460_970_430_587_000, 78),
            (180, 1_659_460_970_970_413_000, 430),
        ),
        (
            "sv-smb2-01_smb2-peter.pcap",
            (1, 1_466_111_213_839_068_000, 90),
            (792, 1_466_111_244_422_364_000, 66),
        ),
    ] {
        let mut r = CaptureReader::open(&dir.join(name)).unwrap();
        let mut seen = Vec::new();
        while let Some(f) = r.next_frame().unwrap() {
            assert_eq!(f.data.len() as u32, f.orig_len);
            if f.number == first.0 || f.number == last.0 {
                seen.push((f.number, f.ts.0, f.data.len()));
            }
        }
        assert_eq!(seen, vec![first, last], "{name}");
    }
}

#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs ../shared/real-captures (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
#[test]
fn every_ip_frame_of_a_real_capture_decodes_to_tcp() {
    let mut r = CaptureReader::open(&real_captures().join("zeek-smb3_multichannel.pcap")).unwrap();
    let (mut tcp, mut other) = (0, 0);
    while let Some(f) = r.next_frame().unwrap() {
        match decode_link(f.link_type, f.data).unwrap() {
            l3 @ (L3Packet::Ipv4(_) | L3Packet::Ipv6(_)) => match decode_tcp(l3) {
                Ok(Some(_)) => tcp += 1,
                Ok(None) => other += 1,
                Err(e) => panic!("frame {}: {e}", f.number),
            },
            L3Packet::Other { .. } => other += 1,
        }
    }
    // tshark -Y tcp | wc -l
    assert_eq!((tcp, other), (TCP_MULTICHANNEL, 1448 - TCP_MULTICHANNEL));
}

const TCP_MULTICHANNEL: u64 = 1407;
