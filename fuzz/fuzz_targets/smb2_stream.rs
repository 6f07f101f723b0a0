//! An SMB2 byte stream in both directions of one connection, straight into the SMB2 layer
//! (framing, matching, opens, SQOS records) and the flow analysis — past the TCP layer, so every
//! input is a stream. The first byte of each chunk header says its direction, its length, and
//! whether it is data or a gap (a gap takes no input bytes: a lost bulk segment costs the
//! fuzzer two bytes, not its length).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sqos::analysis::Analyzer;
use sqos::capture::Timestamp;
use sqos::net::{CloseKind, ConnId, ConnKey, Dir, StreamSink};
use sqos::pipeline::{Pipeline, PipelineConfig};

fuzz_target!(|data: &[u8]| {
    let mut p = Pipeline::new(PipelineConfig::default());
    let mut analyzer = Analyzer::default();
    let conn = ConnId(0);
    let key = ConnKey {
        client: "10.0.0.1:50000".parse().expect("address"),
        server: "10.0.0.2:445".parse().expect("address"),
    };
    p.stream_sink().on_connection(conn, &key, 1, Timestamp(0));
    let mut rest = data;
    let mut frame = 1u64;
    // Chunk header: bit 7 direction, bit 6 gap, bits 0-5 with the next byte: length (≤ 16 KiB;
    // a gap's is one less than the bytes missing).
    while let [h, l, tail @ ..] = rest {
        frame += 1;
        let ts = Timestamp(frame as i64 * 1_000_000);
        let dir = if h & 0x80 == 0 {
            Dir::ToServer
        } else {
            Dir::ToClient
        };
        let len = usize::from(h & 0x3f) << 8 | usize::from(*l);
        if h & 0x40 != 0 {
            p.stream_sink().on_gap(conn, dir, frame, ts, len as u64 + 1);
            rest = tail;
        } else {
            let (chunk, after) = tail.split_at(len.min(tail.len()));
            p.stream_sink().on_data(conn, dir, frame, ts, chunk);
            rest = after;
        }
        p.deliver(ts, &mut analyzer);
    }
    p.stream_sink().on_close(
        conn,
        CloseKind::Fin,
        frame + 1,
        Timestamp((frame + 1) as i64 * 1_000_000),
    );
    p.finish(&mut analyzer);
    let _ = analyzer.finish();
});
