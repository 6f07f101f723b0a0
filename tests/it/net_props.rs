//! Properties: any permutation of overlapping, duplicated cuts of a byte stream reassembles to
//! exactly that stream; arbitrary segments never panic and respect the buffering bounds;
//! arbitrary bytes never panic the capture reader or the decoders.

use std::io::Cursor;

use proptest::prelude::*;
use sqos::capture::{decode_link, CaptureReader, Timestamp};
use sqos::net::{
    decode_tcp, ConnId, Dir, Reassembler, ReassemblyConfig, StreamSink, TcpFlags, TcpSegment,
};

#[derive(Default)]
struct Collect {
    to_server: Vec<u8>,
    gaps: u64,
    gap_bytes: u64,
}

impl StreamSink for Collect {
    fn on_data(&mut self, _: ConnId, dir: Dir, _: u64, _: Timestamp, data: &[u8]) {
        if dir == Dir::ToServer {
            self.to_server.extend_from_slice(data);
        }
    }
    fn on_gap(&mut self, _: ConnId, _: Dir, _: u64, _: Timestamp, missing: u64) {
        self.gaps += 1;
        self.gap_bytes += missing;
    }
}

fn segment(seq: u32, payload: &[u8], syn: bool) -> TcpSegment<'_> {
    TcpSegment {
        src: "192.0.2.1:40000".parse().unwrap(),
        dst: "192.0.2.2:445".parse().unwrap(),
        seq,
        ack: 0,
        flags: TcpFlags {
            syn,
            ..TcpFlags::default()
        },
        window: 1000,
        payload,
        missing: 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn shuffled_overlapping_cuts_reassemble_exactly(
        data in proptest::collection::vec(any::<u8>(), 1..3000),
        isn in any::<u32>(),
        cuts in proptest::collection::vec((0usize..3000, 1usize..400), 1..60),
        order in proptest::collection::vec(any::<u32>(), 60),
    ) {
        // Segments: one clean cut of the whole stream (so nothing is missing) plus random
        // overlapping slices; all carry the same bytes for the same sequence numbers.
        let mut pieces: Vec<(usize, usize)> = (0..data.len()).step_by(500)
            .map(|s| (s, (s + 500).min(data.len()))).collect();
        for (start, len) in cuts {
            let s = start % data.len();
            pieces.push((s, (s + len).min(data.len())));
        }
        let mut keyed: Vec<(u32, (usize, usize))> =
            pieces.into_iter().enumerate().map(|(i, p)| (order[i % order.len()] ^ i as u32, p)).collect();
        keyed.sort();
        let mut r = Reassembler::new(ReassemblyConfig::default());
        let mut sink = Collect::default();
        r.push(1, Timestamp(0), &segment(isn, b"", true), &mut sink);
        for (n, (_, (s, e))) in keyed.iter().enumerate() {
            let seq = isn.wrapping_add(1).wrapping_add(*s as u32);
            r.push(n as u64 + 2, Timestamp(0), &segment(seq, &data[*s..*e], false), &mut sink);
        }
        // Every byte was there: all delivered as soon as possible, nothing left for finish.
        prop_assert_eq!(&sink.to_server, &data);
        prop_assert_eq!(r.buffered_bytes(), 0);
        r.finish(&mut sink);
        prop_assert_eq!(sink.gaps, 0);
        prop_assert_eq!(&sink.to_server, &data);
    }

    #[test]
    fn arbitrary_segments_never_break_the_bounds(
        segs in proptest::collection::vec(
            (any::<bool>(), 0u32..20_000, 0usize..1500, 0u32..3000, 0u8..32, any::<u32>()), 1..200),
    ) {
        let cfg = ReassemblyConfig {
            max_buffered_per_dir: 4000,
            max_buffered_total: 6000,
            max_connections: 3,
            reorder_window: 3,
            ..ReassemblyConfig::default()
        };
        let mut r = Reassembler::new(cfg);
        let mut sink = Collect::default();
        let payload = vec![0x5a; 1500];
        for (i, (to_server, seq, len, missing, flags, ack)) in segs.into_iter().enumerate() {
            let mut s = segment(seq, &payload[..len], flags & 1 != 0);
            if !to_server {
                std::mem::swap(&mut s.src, &mut s.dst);
            }
            s.src.set_port(s.src.port() + u16::from(flags >> 3 & 3) * u16::from(to_server));
            s.missing = missing * u32::from(flags & 4 != 0);
            s.flags.fin = flags & 2 != 0;
            s.flags.rst = flags & 8 != 0 && flags & 16 != 0;
            s.flags.ack = flags & 16 != 0;
            s.ack = ack;
            r.push(i as u64 + 1, Timestamp(0), &s, &mut sink);
            prop_assert!(r.buffered_bytes() <= 6000);
            prop_assert!(r.tracked_connections() <= 3);
        }
        r.finish(&mut sink);
        prop_assert_eq!(r.buffered_bytes(), 0);
        prop_assert_eq!(sink.gap_bytes, r.stats().gap_bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_reader(
        head in prop_oneof![
            Just(vec![0xd4u8, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0]),
            Just(vec![0x0au8, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0,
                      255, 255, 255, 255, 255, 255, 255, 255, 28, 0, 0, 0]),
            Just(vec![]),
        ],
        body in proptest::collection::vec(any::<u8>(), 0..4000),
    ) {
        let mut bytes = head;
        bytes.extend(body);
        if let Ok(mut r) = CaptureReader::from_reader(Box::new(Cursor::new(bytes))) {
            let mut n = 0;
            while let Ok(Some(f)) = r.next_frame() {
                n += 1;
                prop_assert!(n < 4000);
                if let Ok(l3) = decode_link(f.link_type, f.data) {
                    let _ = decode_tcp(l3);
                }
            }
            // Ended (cleanly or by an error): it stays ended.
            prop_assert!(matches!(r.next_frame(), Ok(None)));
            prop_assert_eq!(r.frames_read(), n);
        }
    }

    #[test]
    fn arbitrary_frames_never_panic_the_decoders(
        link_type in prop_oneof![Just(0u32), Just(1), Just(12), Just(101), Just(108), Just(113), Just(228), Just(229), Just(276)],
        data in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        if let Ok(l3) = decode_link(link_type, &data) {
            let _ = decode_tcp(l3);
        }
    }
}
