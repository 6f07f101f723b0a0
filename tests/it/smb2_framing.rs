//! The SMB2 stream framer on hand-built byte streams: NBSS framing, compounds, protocol ids
//! that are skipped, gaps and resynchronisation, bulk data skipped without buffering.

use crate::smb2_build::*;
use sqos::smb2::{Command, Framer, FramerConfig, FramerEvent, NtStatus, Smb2Message};

fn run(chunks: &[&[u8]]) -> Vec<FramerEvent> {
    let mut f = Framer::new(framer_config());
    let mut out = Vec::new();
    for c in chunks {
        f.push(c, &mut out);
    }
    out
}

fn messages(ev: &[FramerEvent]) -> Vec<&Smb2Message> {
    ev.iter()
        .filter_map(|e| match e {
            FramerEvent::Message(m) => Some(m),
            _ => None,
        })
        .collect()
}

/// (command, message id, is response) of every part, in order.
fn parts(ev: &[FramerEvent]) -> Vec<(Command, u64, bool)> {
    messages(ev)
        .iter()
        .flat_map(|m| m.parts.iter())
        .map(|p| {
            (
                p.header.command,
                p.header.message_id,
                p.header.is_response(),
            )
        })
        .collect()
}

fn stream_of(msgs: &[Msg]) -> Vec<u8> {
    msgs.iter().flat_map(framed).collect()
}

#[test]
fn several_messages_in_one_segment_and_one_message_over_many_segments() {
    let msgs = [
        Msg::request(ECHO, 1, echo()),
        Msg::request(CREATE, 2, create_request("vm\\disk.vhdx")),
        Msg::response(ECHO, 1, 0, echo()),
    ];
    let stream = stream_of(&msgs);
    let expected = vec![
        (Command::ECHO, 1, false),
        (Command::CREATE, 2, false),
        (Command::ECHO, 1, true),
    ];
    // All in one segment.
    assert_eq!(parts(&run(&[&stream])), expected);
    // One byte per segment.
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    let ev = run(&bytes);
    assert_eq!(parts(&ev), expected);
    // Segments of 7 bytes straddle every boundary; CREATE keeps its name.
    let ev = run(&stream.chunks(7).collect::<Vec<_>>());
    assert_eq!(parts(&ev), expected);
    let create = &messages(&ev)[1].parts[0];
    let body = sqos::smb2::parse_body(&create.header, &create.bytes).unwrap();
    match body {
        sqos::smb2::Body::CreateRequest(c) => assert_eq!(c.name.as_deref(), Some("vm\\disk.vhdx")),
        other => panic!("not a CREATE request: {other:?}"),
    }
}

#[test]
fn compound_chain_parts_with_alignment() {
    let chain = compound(&[
        Msg::request(CREATE, 10, create_request("a.txt")),
        Msg::request(
            IOCTL,
            11,
            ioctl_request(FSCTL_SQOS, RELATED_FID, &[1, 2, 3], 96, 0),
        )
        .related(),
        Msg::request(CLOSE, 12, close_request(RELATED_FID)).related(),
    ]);
    let ev = run(&[&nbss(&chain)]);
    let m = messages(&ev);
    assert_eq!(m.len(), 1);
    let p = &m[0].parts;
    assert_eq!(p.len(), 3);
    // CREATE: 64 + 56 + 10 name bytes = 130, padded to 136.
    assert_eq!(p[0].wire_len, 136);
    assert_eq!(p[0].header.next_command, 136);
    // IOCTL: 64 + 56 + 3 = 123 → 128; kept whole (SQOS).
    assert_eq!(p[1].wire_len, 128);
    assert_eq!(p[1].bytes.len(), 128);
    assert!(p[1].header.flags.is_related());
    assert_eq!(p[2].header.next_command, 0);
    assert_eq!(p[2].wire_len, 64 + 24);
    assert!(m[0].malformed.is_none());
}

#[test]
fn bad_next_command_keeps_first_part_and_reports() {
    let mut chain = compound(&[Msg::request(ECHO, 1, echo()), Msg::request(ECHO, 2, echo())]);
    // NextCommand 70: not 8-aligned.
    chain[20..24].copy_from_slice(&70u32.to_le_bytes());
    // In step already (a first message), the bad chain is taken as framed by NBSS.
    let first = framed(&Msg::request(ECHO, 0, echo()));
    let ev = run(&[
        &first,
        &nbss(&chain),
        &framed(&Msg::request(ECHO, 3, echo())),
    ]);
    let m = messages(&ev);
    assert_eq!(m.len(), 3);
    assert_eq!(m[1].parts.len(), 1);
    assert_eq!(m[1].parts[0].header.message_id, 1);
    assert!(m[1].malformed.is_some());
    assert_eq!(m[2].parts[0].header.message_id, 3);
    // Picked up mid-stream, the same chain is no plausible start: scanning skips it.
    let mut stream = vec![0x11, 0x22, 0x33];
    stream.extend(nbss(&chain));
    stream.extend(framed(&Msg::request(ECHO, 3, echo())));
    let ev = run(&[&stream]);
    assert_eq!(ev[0], FramerEvent::Resynced { skipped: 147 });
    assert_eq!(parts(&ev), vec![(Command::ECHO, 3, false)]);
}

#[test]
fn smb1_encrypted_and_compressed_are_counted_and_skipped() {
    let mut stream = Vec::new();
    let mut smb1 = vec![0xFF, b'S', b'M', b'B', 0x72];
    smb1.resize(40, 0);
    stream.extend(nbss(&smb1));
    let mut enc = vec![0xFD, b'S', b'M', b'B'];
    enc.resize(52 + 100, 0x5A);
    stream.extend(nbss(&enc));
    let mut comp = vec![0xFC, b'S', b'M', b'B'];
    comp.resize(16 + 30, 0x33);
    stream.extend(nbss(&comp));
    stream.extend(framed(&Msg::request(ECHO, 9, echo())));
    let ev = run(&[&stream]);
    assert_eq!(ev[0], FramerEvent::Smb1 { len: 40 });
    assert!(
        matches!(ev[1], FramerEvent::Encrypted { len: 152, .. }),
        "{:?}",
        ev[1]
    );
    // OriginalCompressedSegmentSize 0x33333333: more than any SMB2 message, not decoded.
    assert!(
        matches!(
            &ev[2],
            FramerEvent::Compressed {
                len: 46,
                outcome: sqos::smb2::framer::CompressOutcome::Failed(
                    sqos::smb2::compress::CompressError::TooLarge { .. }
                )
            }
        ),
        "{:?}",
        ev[2]
    );
    assert_eq!(parts(&ev), vec![(Command::ECHO, 9, false)]);
    assert_eq!(ev.len(), 4);
}

#[test]
fn nbss_keepalive_is_skipped() {
    let mut stream = vec![0x85, 0, 0, 0];
    stream.extend(framed(&Msg::request(ECHO, 4, echo())));
    let ev = run(&[&stream]);
    assert_eq!(parts(&ev), vec![(Command::ECHO, 4, false)]);
}

#[test]
fn read_response_payload_is_skipped_without_buffering() {
    let payload = 1 << 20;
    let resp = framed(&Msg::response(READ, 5, 0, read_response(payload, 0xAB)));
    let mut stream = resp.clone();
    stream.extend(framed(&Msg::response(ECHO, 6, 0, echo())));
    let mut f = Framer::new(framer_config());
    let mut out = Vec::new();
    let mut max_held = 0;
    for seg in stream.chunks(1448) {
        f.push(seg, &mut out);
        max_held = max_held.max(f.buffered());
    }
    // Header (64) + fixed READ response body (16) is all that is ever held.
    assert!(max_held <= 80, "framer held {max_held} bytes");
    let m = messages(&out);
    assert_eq!(m.len(), 2);
    let read = &m[0].parts[0];
    assert_eq!(read.bytes.len(), 80);
    assert_eq!(read.wire_len, 80 + payload as u64);
    assert!(!read.cut);
    match sqos::smb2::parse_body(&read.header, &read.bytes).unwrap() {
        sqos::smb2::Body::ReadResponse(r) => {
            assert_eq!(r.data_length, payload as u32);
            assert_eq!(r.data_offset, 80);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(m[1].parts[0].header.command, Command::ECHO);
}

#[test]
fn write_request_data_is_not_kept() {
    let w = framed(&Msg::request(
        WRITE,
        7,
        write_request(fid(1, 2), 65536, 0x11),
    ));
    let ev = run(&w.chunks(1448).collect::<Vec<_>>());
    let m = messages(&ev);
    assert_eq!(m[0].parts[0].bytes.len(), 64 + 48);
}

#[test]
fn gap_inside_skipped_payload_keeps_framing() {
    let read = framed(&Msg::response(READ, 5, 0, read_response(10_000, 0)));
    let echo = framed(&Msg::response(ECHO, 6, 0, echo()));
    let mut f = Framer::new(framer_config());
    let mut out = Vec::new();
    f.push(&read[..2000], &mut out);
    f.gap(1448, &mut out);
    f.push(&read[3448..], &mut out);
    f.push(&echo, &mut out);
    assert!(out.contains(&FramerEvent::Gap {
        bytes: 1448,
        in_step: true
    }));
    assert!(!out
        .iter()
        .any(|e| matches!(e, FramerEvent::Resynced { .. })));
    assert_eq!(
        parts(&out),
        vec![(Command::READ, 5, true), (Command::ECHO, 6, true)]
    );
}

#[test]
fn gap_over_message_boundary_resynchronises() {
    let a = framed(&Msg::response(READ, 1, 0, read_response(3000, 0x00)));
    let b = framed(&Msg::request(CREATE, 2, create_request("lost.txt")));
    let c = framed(&Msg::request(ECHO, 3, echo()));
    let d = framed(&Msg::request(ECHO, 4, echo()));
    let mut f = Framer::new(framer_config());
    let mut out = Vec::new();
    f.push(&a[..1000], &mut out);
    // Lose the rest of `a` and the first 20 bytes of `b`.
    f.gap((a.len() - 1000 + 20) as u64, &mut out);
    f.push(&b[20..], &mut out);
    f.push(&c, &mut out);
    f.push(&d, &mut out);
    // The READ header had arrived: it is reported, with the missing bytes.
    let m = messages(&out);
    assert_eq!(m[0].parts[0].header.message_id, 1);
    assert_eq!(m[0].lost_bytes, (a.len() - 1000) as u64);
    assert!(out.contains(&FramerEvent::Resynced {
        skipped: (b.len() - 20) as u64
    }));
    assert_eq!(
        parts(&out),
        vec![
            (Command::READ, 1, true),
            (Command::ECHO, 3, false),
            (Command::ECHO, 4, false)
        ]
    );
}

#[test]
fn stream_picked_up_mid_message_resynchronises() {
    let a = framed(&Msg::request(
        CREATE,
        1,
        create_request("some\\long\\name.vhdx"),
    ));
    let b = framed(&Msg::request(ECHO, 2, echo()));
    let mut stream = a[17..].to_vec();
    stream.extend_from_slice(&b);
    // Byte by byte, so the candidate is found across the carry.
    let ev = run(&stream.chunks(1).collect::<Vec<_>>());
    assert_eq!(
        ev.first(),
        Some(&FramerEvent::Resynced {
            skipped: (a.len() - 17) as u64
        })
    );
    assert_eq!(parts(&ev), vec![(Command::ECHO, 2, false)]);
}

#[test]
fn garbage_that_looks_like_nbss_is_abandoned() {
    // Type 0 with a length, but no SMB protocol id: not a message start.
    let mut stream = vec![0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
    stream.extend(framed(&Msg::request(ECHO, 2, echo())));
    let ev = run(&[&stream]);
    assert_eq!(ev[0], FramerEvent::Resynced { skipped: 12 });
    assert_eq!(parts(&ev), vec![(Command::ECHO, 2, false)]);
}

#[test]
fn sync_and_async_headers() {
    let interim = Msg::response(IOCTL, 40, STATUS_PENDING, error_response()).async_id(0x77);
    let sync = Msg::request(
        IOCTL,
        40,
        ioctl_request(FSCTL_SQOS, fid(3, 4), &[9; 8], 96, 0),
    );
    let ev = run(&[&framed(&sync), &framed(&interim)]);
    let m = messages(&ev);
    let req = &m[0].parts[0].header;
    assert_eq!(req.tree_id(), Some(5));
    assert_eq!(req.async_id(), None);
    assert_eq!(req.session_id, 0x1122_3344_5566_7788);
    assert!(!req.is_response());
    let int = &m[1].parts[0].header;
    assert_eq!(int.tree_id(), None);
    assert_eq!(int.async_id(), Some(0x77));
    assert_eq!(int.status, NtStatus::PENDING);
    assert!(int.is_interim());
    assert!(matches!(
        sqos::smb2::parse_body(int, &m[1].parts[0].bytes),
        Ok(sqos::smb2::Body::Error(_))
    ));
}

#[test]
fn oversized_sqos_ioctl_is_cut_at_the_bound() {
    let big = vec![0x42u8; 5000];
    let m = Msg::request(IOCTL, 1, ioctl_request(FSCTL_SQOS, fid(1, 1), &big, 0, 0));
    let cfg = FramerConfig {
        max_keep: 1024,
        max_parts: 64,
        ..framer_config()
    };
    let mut f = Framer::new(cfg);
    let mut out = Vec::new();
    f.push(&framed(&m), &mut out);
    let msgs = messages(&out);
    let p = &msgs[0].parts[0];
    assert_eq!(p.bytes.len(), 1024);
    assert!(p.cut);
    assert_eq!(p.wire_len, 64 + 56 + 5000);
}

#[test]
fn read_data_inside_a_compound_is_skipped_and_the_next_part_found() {
    let chain = compound(&[
        Msg::response(READ, 1, 0, read_response(1000, 0x77)),
        Msg::response(ECHO, 2, 0, echo()),
    ]);
    let ev = run(&nbss(&chain).chunks(100).collect::<Vec<_>>());
    let m = messages(&ev);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].parts.len(), 2);
    assert_eq!(m[0].parts[0].bytes.len(), 80);
    // 64 + 16 + 1000 = 1080, already 8-aligned.
    assert_eq!(m[0].parts[0].wire_len, 1080);
    assert_eq!(m[0].parts[1].header.command, Command::ECHO);
    assert_eq!(m[0].parts[1].header.message_id, 2);
}

#[test]
fn ioctl_buffers_are_kept_only_for_the_configured_control_codes() {
    let m = Msg::request(
        IOCTL,
        1,
        ioctl_request(FSCTL_SQOS, fid(1, 1), &[7; 200], 0, 0),
    );
    let other = FramerConfig {
        keep_ioctls: &[0x0014_0204],
        ..FramerConfig::default()
    };
    for (cfg, kept) in [
        (FramerConfig::default(), 64 + 56),
        (other, 64 + 56),
        (framer_config(), 64 + 56 + 200),
    ] {
        let mut f = Framer::new(cfg);
        let mut out = Vec::new();
        f.push(&framed(&m), &mut out);
        let p = &messages(&out)[0].parts[0];
        assert_eq!((p.bytes.len(), p.cut), (kept, false), "{cfg:?}");
        assert_eq!(p.wire_len, 64 + 56 + 200);
    }
}
