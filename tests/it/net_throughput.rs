//! Throughput of the lower pipeline (reader → link → TCP → reassembly) on bulk READ-like
//! traffic: 1448-byte segments server → client with an ACK every other segment.
//! Run with `cargo test --release --test it net_throughput -- --ignored --nocapture`.

use std::io::Cursor;
use std::time::Instant;

use etherparse::PacketBuilder;
use sqos::capture::{decode_link, CaptureReader, PcapWriter, Timestamp};
use sqos::net::{decode_tcp, ConnId, Dir, Reassembler, ReassemblyConfig, StreamSink};

#[derive(Default)]
struct Count {
    bytes: u64,
    gaps: u64,
}

impl StreamSink for Count {
    fn on_data(&mut self, _: ConnId, _: Dir, _: u64, _: Timestamp, data: &[u8]) {
        self.bytes += data.len() as u64;
    }
    fn on_gap(&mut self, _: ConnId, _: Dir, _: u64, _: Timestamp, _: u64) {
        self.gaps += 1;
    }
}

fn frame(to_client: bool, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
    let (src, dst, sp, dp) = if to_client {
        ([10, 0, 0, 2], [10, 0, 0, 1], 445, 50000)
    } else {
        ([10, 0, 0, 1], [10, 0, 0, 2], 50000, 445)
    };
    let mut out = Vec::with_capacity(1600);
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(src, dst, 64)
        .tcp(sp, dp, seq, 65535)
        .ack(ack)
        .write(&mut out, payload)
        .unwrap();
    out
}

#[test]
#[ignore = "measurement; run in release"]
fn bulk_read_throughput() {
    let payload = vec![0xabu8; 1448];
    let mut w = PcapWriter::new(Vec::with_capacity(300 << 20), 1).unwrap();
    let (mut sseq, cseq) = (1u32, 1u32);
    let mut n = 0u64;
    while n < 180_000 {
        let f = frame(true, sseq, cseq, &payload);
        w.write_packet(Timestamp(n as i64 * 1000), &f).unwrap();
        sseq = sseq.wrapping_add(1448);
        n += 1;
        if n % 2 == 0 {
            let a = frame(false, cseq, sseq, b"");
            w.write_packet(Timestamp(n as i64 * 1000), &a).unwrap();
        }
    }
    // 'static so that every run reads the same bytes without copying them first.
    let pcap: &'static [u8] = Box::leak(w.into_inner().into_boxed_slice());
    let size = pcap.len() as f64;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let mut r = CaptureReader::from_reader(Box::new(Cursor::new(pcap))).unwrap();
        let mut re = Reassembler::new(ReassemblyConfig::default());
        let mut sink = Count::default();
        while let Some(f) = r.next_frame().unwrap() {
            let Ok(l3) = decode_link(f.link_type, f.data) else {
                continue;
            };
            if let Ok(Some(seg)) = decode_tcp(l3) {
                re.push(f.number, f.ts, &seg, &mut sink);
            }
        }
        re.finish(&mut sink);
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!(sink.bytes, 180_000 * 1448);
        assert_eq!(sink.gaps, 0);
    }
    eprintln!(
        "{:.0} MB capture in {:.3} s: {:.0} MB/s",
        size / 1e6,
        best,
        size / 1e6 / best
    );
}
