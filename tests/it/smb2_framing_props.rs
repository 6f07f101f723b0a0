//! Properties of the framer: any bytes, any chunking, any gaps — no panic, bounded memory; and a
//! valid stream frames the same however it is cut into segments.

use crate::smb2_build::*;
use proptest::prelude::*;
use sqos::smb2::{Framer, FramerConfig, FramerEvent};

fn msg_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u64..1000).prop_map(|id| framed(&Msg::request(ECHO, id, echo()))),
        (0u64..1000, 0usize..5000, any::<u8>()).prop_map(|(id, n, b)| framed(&Msg::response(
            READ,
            id,
            0,
            read_response(n, b)
        ))),
        (0u64..1000, "[a-z\\\\]{0,40}").prop_map(|(id, name)| framed(&Msg::request(
            CREATE,
            id,
            create_request(&name)
        ))),
        (
            0u64..1000,
            proptest::collection::vec(any::<u8>(), 0..300),
            0usize..32
        )
            .prop_map(|(id, input, pad)| framed(&Msg::request(
                IOCTL,
                id,
                ioctl_request(FSCTL_SQOS, fid(1, 2), &input, 96, pad)
            ))),
        (0u64..1000).prop_map(|id| nbss(&compound(&[
            Msg::request(CREATE, id, create_request("f")),
            Msg::request(CLOSE, id + 1, close_request(RELATED_FID)).related(),
        ]))),
    ]
}

/// Every part as (command, message id, kept bytes).
fn summary(ev: &[FramerEvent]) -> Vec<(u16, u64, Vec<u8>)> {
    ev.iter()
        .filter_map(|e| match e {
            FramerEvent::Message(m) => Some(m),
            _ => None,
        })
        .flat_map(|m| m.parts.iter())
        .map(|p| (p.header.command.0, p.header.message_id, p.bytes.clone()))
        .collect()
}

proptest! {
    #[test]
    fn chunking_does_not_change_the_result(
        msgs in proptest::collection::vec(msg_strategy(), 1..12),
        cuts in proptest::collection::vec(1usize..700, 1..40),
    ) {
        let stream: Vec<u8> = msgs.concat();
        let mut whole = Vec::new();
        Framer::new(framer_config()).push(&stream, &mut whole);
        let mut f = Framer::new(framer_config());
        let mut pieces = Vec::new();
        let mut rest = stream.as_slice();
        let mut i = 0;
        while !rest.is_empty() {
            let n = cuts[i % cuts.len()].min(rest.len());
            f.push(&rest[..n], &mut pieces);
            rest = &rest[n..];
            i += 1;
        }
        // Every message framed (compounds give two parts), none lost to a resync.
        let messages = whole.iter().filter(|e| matches!(e, FramerEvent::Message(_))).count();
        prop_assert_eq!(messages, msgs.len());
        let resyncs = whole.iter().filter(|e| matches!(e, FramerEvent::Resynced { .. })).count();
        prop_assert_eq!(resyncs, 0);
        prop_assert_eq!(summary(&whole), summary(&pieces));
    }

    #[test]
    fn arbitrary_bytes_and_gaps_never_panic_and_stay_bounded(
        ops in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..2000).prop_map(Ok),
                (0u64..100_000).prop_map(Err),
            ],
            0..30,
        ),
        valid in proptest::collection::vec(msg_strategy(), 0..4),
    ) {
        let cfg = FramerConfig { max_keep: 4096, max_parts: 8, ..framer_config() };
        let mut f = Framer::new(cfg);
        let mut out = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            match op {
                Ok(bytes) => f.push(bytes, &mut out),
                Err(missing) => f.gap(*missing, &mut out),
            }
            if let Some(m) = valid.get(i) {
                f.push(m, &mut out);
            }
            prop_assert!(f.buffered() <= cfg.max_keep + 64);
        }
        f.finish(&mut out);
        prop_assert_eq!(f.buffered(), 0);
    }

    #[test]
    fn counting_off_skipped_bytes_is_pushing_them(
        msgs in proptest::collection::vec(msg_strategy(), 1..12),
        cuts in proptest::collection::vec(1usize..700, 1..40),
        noise in proptest::collection::vec((0usize..40, proptest::collection::vec(any::<u8>(), 0..600)), 0..4),
        gaps in proptest::collection::vec((0usize..40, 0u64..3000), 0..4),
    ) {
        // Framer A pushes every chunk; framer B counts a chunk off whenever `skip_within` takes
        // it: the events and held bytes stay the same at every step.
        let stream: Vec<u8> = msgs.concat();
        let mut a = Framer::new(framer_config());
        let mut b = Framer::new(framer_config());
        let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
        let mut rest = stream.as_slice();
        let mut i = 0;
        while !rest.is_empty() {
            for (_, bytes) in noise.iter().filter(|(at, _)| *at == i) {
                a.push(bytes, &mut out_a);
                if !b.skip_within(bytes.len()) {
                    b.push(bytes, &mut out_b);
                }
            }
            for (_, missing) in gaps.iter().filter(|(at, _)| *at == i) {
                a.gap(*missing, &mut out_a);
                b.gap(*missing, &mut out_b);
            }
            let n = cuts[i % cuts.len()].min(rest.len());
            a.push(&rest[..n], &mut out_a);
            if !b.skip_within(n) {
                b.push(&rest[..n], &mut out_b);
            }
            prop_assert_eq!(a.buffered(), b.buffered());
            prop_assert_eq!(a.in_message(), b.in_message());
            prop_assert_eq!(&out_a, &out_b);
            rest = &rest[n..];
            i += 1;
        }
        a.finish(&mut out_a);
        b.finish(&mut out_b);
        prop_assert_eq!(out_a, out_b);
    }

    #[test]
    fn resynchronises_after_a_cut_head(
        msgs in proptest::collection::vec(msg_strategy(), 2..8),
        cut in 1usize..64,
    ) {
        // Drop the first `cut` bytes of the first message: everything after it is found again.
        let first = &msgs[0];
        let cut = cut.min(first.len() - 1);
        let mut stream = first[cut..].to_vec();
        let rest: Vec<u8> = msgs[1..].concat();
        stream.extend_from_slice(&rest);
        let mut expect = Vec::new();
        Framer::new(framer_config()).push(&rest, &mut expect);
        let mut out = Vec::new();
        Framer::new(framer_config()).push(&stream, &mut out);
        let got = summary(&out);
        let want = summary(&expect);
        prop_assert!(got.len() >= want.len());
        prop_assert_eq!(&got[got.len() - want.len()..], &want[..]);
    }
}

/// The middle of a READ response's data is counted off, its end and the next message are not.
#[test]
fn skip_within_takes_the_middle_of_read_data_only() {
    let read = framed(&Msg::response(READ, 7, 0, read_response(5000, 0xab)));
    let echo = framed(&Msg::request(ECHO, 8, echo()));
    let mut f = Framer::new(framer_config());
    let mut out = Vec::new();
    // Header and fixed body: looked at.
    assert!(!f.skip_within(200));
    f.push(&read[..200], &mut out);
    // Data: counted off, up to (not including) the last byte of the message.
    let left = read.len() - 200;
    assert!(f.skip_within(1000));
    assert!(f.skip_within(left - 1001));
    assert!(!f.skip_within(1), "the message's last byte completes it");
    f.push(&read[read.len() - 1..], &mut out);
    assert!(
        !f.skip_within(4),
        "a new message's NBSS header is looked at"
    );
    f.push(&echo, &mut out);
    let ids: Vec<u64> = out
        .iter()
        .filter_map(|e| match e {
            FramerEvent::Message(m) => Some(m.parts[0].header.message_id),
            _ => None,
        })
        .collect();
    assert_eq!(ids, [7, 8]);
}
