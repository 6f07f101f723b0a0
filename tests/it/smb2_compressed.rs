//! Compressed messages (0xFC) in the framer: every algorithm and both forms come out as the
//! SMB2 message they stand for; a bulk READ/WRITE larger than the buffering bound is decoded
//! from its first bytes (header and fixed body) without holding its data; damage, lies about
//! the size, algorithms sqos does not decode and lost bytes are reported, and the stream stays
//! framed.

use crate::smb2_build::*;
use sqos::smb2::compress::{compress_chained, compress_unchained, Algorithm, CompressError};
use sqos::smb2::framer::CompressOutcome;
use sqos::smb2::{Command, Framer, FramerConfig, FramerEvent, Smb2Message};

const ALGORITHMS: [Algorithm; 3] = [Algorithm::Lznt1, Algorithm::Lz77, Algorithm::Lz77Huffman];

fn run_with(cfg: FramerConfig, chunks: &[&[u8]]) -> (Vec<FramerEvent>, usize) {
    let mut f = Framer::new(cfg);
    let mut out = Vec::new();
    let mut held = 0;
    for c in chunks {
        f.push(c, &mut out);
        held = held.max(f.buffered());
    }
    f.finish(&mut out);
    (out, held)
}

fn messages(ev: &[FramerEvent]) -> Vec<&Smb2Message> {
    ev.iter()
        .filter_map(|e| match e {
            FramerEvent::Message(m) => Some(m),
            _ => None,
        })
        .collect()
}

fn outcomes(ev: &[FramerEvent]) -> Vec<&CompressOutcome> {
    ev.iter()
        .filter_map(|e| match e {
            FramerEvent::Compressed { outcome, .. } => Some(outcome),
            _ => None,
        })
        .collect()
}

/// An SQOS IOCTL request with a 200-byte input buffer of small numbers (compressible).
fn sqos_ioctl() -> Msg {
    let input: Vec<u8> = (0..200u32).map(|i| (i % 7) as u8).collect();
    Msg::request(
        IOCTL,
        41,
        ioctl_request(FSCTL_SQOS, fid(3, 4), &input, 64, 0),
    )
}

#[test]
fn every_algorithm_both_forms_give_the_message_back() {
    let plain = sqos_ioctl().bytes(0);
    for a in ALGORITHMS {
        for chained in [false, true] {
            let packed = if chained {
                compress_chained(&plain, Some(a), true, 0)
            } else {
                compress_unchained(&plain, a, 0)
            };
            let Some(packed) = packed else {
                // LZ77+Huffman's 256-byte table makes a message this small larger: Windows
                // then sends it uncompressed, and so does sqos synth.
                assert_eq!(a, Algorithm::Lz77Huffman);
                continue;
            };
            let mut stream = nbss(&packed);
            stream.extend(framed(&Msg::request(ECHO, 42, echo())));
            let (ev, _) = run_with(framer_config(), &[&stream]);
            assert_eq!(
                outcomes(&ev),
                vec![&CompressOutcome::Decompressed {
                    algorithms: vec![a],
                    chained,
                    complete: true
                }],
                "{a} chained {chained}"
            );
            let m = messages(&ev);
            assert_eq!(m.len(), 2, "{a}");
            let p = &m[0].parts[0];
            assert_eq!(p.header.command, Command::IOCTL);
            assert_eq!(p.header.message_id, 41);
            assert!(!p.cut);
            // The whole SQOS IOCTL is kept, byte for byte as it was before compression.
            assert_eq!(p.bytes.as_slice(), plain, "{a} chained {chained}");
            assert_eq!(m[1].parts[0].header.command, Command::ECHO);
        }
    }
}

#[test]
fn a_bulk_read_larger_than_the_bound_is_decoded_from_its_first_bytes() {
    // 1 MiB of READ data: a long run for Pattern_V1 (chained), LZ-compressible text else.
    let mut data = b"VHDX block ".repeat(50_000);
    data.resize(1 << 20, 0);
    let mut body = read_response(0, 0);
    body[4..8].copy_from_slice(&(data.len() as u32).to_le_bytes());
    body.extend_from_slice(&data);
    let plain = Msg::response(READ, 9, 0, body).bytes(0);
    let cfg = FramerConfig {
        max_keep: 64 * 1024,
        ..framer_config()
    };
    for a in ALGORITHMS {
        for chained in [false, true] {
            let packed = if chained {
                compress_chained(&plain, Some(a), true, 80)
            } else {
                compress_unchained(&plain, a, 80)
            }
            .expect("smaller");
            let stream = nbss(&packed);
            let (ev, held) = run_with(cfg, &stream.chunks(1448).collect::<Vec<_>>());
            // Never more than the bound (and the part kept) is held.
            assert!(held <= 64 * 1024 + 80, "{a}: held {held}");
            let m = messages(&ev);
            let p = &m[0].parts[0];
            assert_eq!(p.header.command, Command::READ, "{a}");
            assert_eq!(p.bytes.len(), 80, "{a}");
            assert_eq!(p.wire_len, plain.len() as u64, "{a}");
            // The data was not wanted: nothing is missing, nothing cut.
            assert!(!p.cut && m[0].lost_bytes == 0, "{a} chained {chained}");
            match sqos::smb2::parse_body(&p.header, &p.bytes).unwrap() {
                sqos::smb2::Body::ReadResponse(r) => assert_eq!(r.data_length, 1 << 20),
                other => panic!("{other:?}"),
            }
            let complete = matches!(
                outcomes(&ev)[..],
                [CompressOutcome::Decompressed { complete: true, .. }]
            );
            assert!(!complete, "{a}: decoded only as far as needed");
        }
    }
}

#[test]
fn damage_lies_and_unknown_algorithms_are_reported_and_framing_goes_on() {
    let plain = sqos_ioctl().bytes(0);
    let good = compress_unchained(&plain, Algorithm::Lz77, 0).unwrap();
    // OriginalCompressedSegmentSize of 4 GiB: refused before anything is allocated.
    let mut huge = good.clone();
    huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    // LZ4 (newer Windows): recognised, not decoded.
    let mut lz4 = good.clone();
    lz4[8] = 5;
    // The compressed bytes garbled: a match before the start of the output.
    let mut bad = good.clone();
    for b in &mut bad[16..] {
        *b = 0xFF;
    }
    let mut stream = Vec::new();
    for m in [&huge, &lz4, &bad] {
        stream.extend(nbss(m));
    }
    stream.extend(framed(&Msg::request(ECHO, 43, echo())));
    let (ev, _) = run_with(framer_config(), &[&stream]);
    let o = outcomes(&ev);
    assert!(
        matches!(
            o[0],
            CompressOutcome::Failed(CompressError::TooLarge { .. })
        ),
        "{o:?}"
    );
    assert_eq!(
        o[1],
        &CompressOutcome::Failed(CompressError::Unsupported(Algorithm::Lz4))
    );
    assert!(matches!(o[2], CompressOutcome::Failed(_)), "{o:?}");
    let m = messages(&ev);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].parts[0].header.command, Command::ECHO);
}

#[test]
fn lost_bytes_inside_a_compressed_message_are_reported() {
    let mut big = sqos_ioctl();
    big.body
        .extend((0..20_000u32).map(|i| (i * 31 % 251) as u8));
    let plain = big.bytes(0);
    let packed = nbss(&compress_unchained(&plain, Algorithm::Lznt1, 0).unwrap());
    let echo = framed(&Msg::request(ECHO, 44, echo()));
    let mut f = Framer::new(framer_config());
    let mut out = Vec::new();
    // The middle of the compressed message never arrives.
    let cut = packed.len() / 2;
    f.push(&packed[..cut], &mut out);
    f.gap(100, &mut out);
    f.push(&packed[cut + 100..], &mut out);
    f.push(&echo, &mut out);
    f.finish(&mut out);
    let o = outcomes(&out);
    assert_eq!(o.len(), 1, "{o:?}");
    // What came before the hole is decoded (the IOCTL's header), marked as incomplete.
    match o[0] {
        CompressOutcome::Decompressed { complete, .. } => assert!(!complete),
        CompressOutcome::Incomplete => {}
        other => panic!("{other:?}"),
    }
    let m = messages(&out);
    if let Some(first) = m
        .first()
        .filter(|m| m.parts[0].header.command == Command::IOCTL)
    {
        assert!(first.parts[0].cut || first.lost_bytes > 0);
    }
    assert_eq!(
        m.last().map(|m| m.parts[0].header.command),
        Some(Command::ECHO)
    );
}

#[test]
fn a_compressed_write_is_decompressed_only_as_far_as_its_fixed_body() {
    // 64 KiB of WRITE data: well within the bound, still not decompressed.
    let plain = Msg::request(WRITE, 12, write_request(fid(1, 2), 65536, 0x5A)).bytes(0);
    for a in ALGORITHMS {
        let packed = compress_unchained(&plain, a, 0).expect("smaller");
        let (ev, _) = run_with(framer_config(), &[&nbss(&packed)]);
        assert_eq!(
            outcomes(&ev),
            vec![&CompressOutcome::Decompressed {
                algorithms: vec![a],
                chained: false,
                complete: false
            }],
            "{a}"
        );
        let m = messages(&ev);
        let p = &m[0].parts[0];
        assert_eq!(p.header.command, Command::WRITE);
        assert_eq!(p.bytes.as_slice(), &plain[..112], "{a}");
        assert_eq!(p.wire_len, plain.len() as u64);
        assert!(!p.cut && m[0].lost_bytes == 0, "{a}");
    }
}
