//! Properties of the framer: any bytes, any chunking, any gaps — no panic, bounded memory; and a
//! valid stream frames the same however it is cut into segments.

use std::sync::Arc;

use crate::smb2_build::*;
use proptest::prelude::*;
use sqos::smb2::crypto::cipher::seal;
use sqos::smb2::crypto::{Cipher, Decryptor, KeyRing, SessionKeys};
use sqos::smb2::framer::{SealCtx, SealOutcome, SealSpares};
use sqos::smb2::netbios::session_message_header;
use sqos::smb2::transform::TRANSFORM_HEADER_LEN;
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
        .map(|p| (p.header.command.0, p.header.message_id, p.bytes.to_vec()))
        .collect()
}

proptest! {
    #[test]
    fn chunking_does_not_change_the_result(
        msgs in proptest::collection::vec(msg_strategy(), 1..12),
        cuts in proptest::collection::vec(1usize..700, 1..40),
        // Also a bound that cuts kept IOCTL and CREATE bytes.
        max_keep in prop_oneof![Just(1usize << 20), 64usize..400],
    ) {
        let stream: Vec<u8> = msgs.concat();
        let cfg = FramerConfig { max_keep, ..framer_config() };
        let mut whole = Vec::new();
        Framer::new(cfg).push(&stream, &mut whole);
        let mut f = Framer::new(cfg);
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
        // All of every event (cut marks, wire lengths): a message whose head lies whole in a
        // push is framed at once, one cut into pieces through the phases.
        prop_assert_eq!(whole, pieces);
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
        counting_off_is_pushing(&msgs.concat(), None, &cuts, &noise, &gaps)?;
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

/// The MessageIds of the messages among `events`, in order.
fn message_ids(events: &[FramerEvent]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            FramerEvent::Message(m) => Some(m.parts[0].header.message_id),
            _ => None,
        })
        .collect()
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
    let ids = message_ids(&out);
    assert_eq!(ids, [7, 8]);
}

/// The session every sealed test message belongs to (`Msg::request`'s).
const SEALED_SESSION: u64 = 0x1122_3344_5566_7788;

/// `framed` messages sealed as an SMB3 client or server does (one key both ways, so a framer of
/// either direction opens them).
fn sealed(cipher: Cipher, key: &[u8], msgs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        out.extend_from_slice(&seal_one(cipher, key, SEALED_SESSION, i as u64 + 1, m));
    }
    out
}

/// One `framed` message of session `sid`, sealed with nonce `n`.
fn seal_one(cipher: Cipher, key: &[u8], sid: u64, n: u64, m: &[u8]) -> Vec<u8> {
    let mut body = m[4..].to_vec();
    let mut nonce = [0u8; 16];
    nonce[..8].copy_from_slice(&n.to_le_bytes());
    let th = seal(cipher, key, nonce, sid, &mut body).expect("seal");
    let mut out = session_message_header(TRANSFORM_HEADER_LEN + body.len()).to_vec();
    out.extend_from_slice(&th.to_bytes());
    out.extend_from_slice(&body);
    out
}

fn decryptor(key: &[u8]) -> Decryptor {
    let mut ring = KeyRing::default();
    ring.insert(SessionKeys {
        session_id: SEALED_SESSION,
        session_key: Vec::new(),
        server_to_client: key.to_vec(),
        client_to_server: key.to_vec(),
    });
    Decryptor::new(Arc::new(ring))
}

/// What the framer opens sealed messages with (`None`: counts them only), keeping their boxes
/// and buffers in `spares` if given.
fn ctx<'a>(crypto: Option<&'a mut Decryptor>, spares: Option<&'a mut SealSpares>) -> SealCtx<'a> {
    SealCtx {
        crypto,
        conn: 0,
        to_server: false,
        spares,
    }
}

proptest! {
    #[test]
    fn counting_off_sealed_bytes_is_pushing_them(
        msgs in proptest::collection::vec(msg_strategy(), 1..8),
        cipher in prop::sample::select(&Cipher::ALL[..]),
        cuts in proptest::collection::vec(1usize..3000, 1..40),
        gaps in proptest::collection::vec((0usize..40, 0u64..3000), 0..3),
    ) {
        // As the plain property above, through encrypted messages: a sealed READ's data is
        // streamed (never decrypted), which is what `skip_within` may count off.
        let key = vec![0x5a; cipher.key_len()];
        counting_off_is_pushing(&sealed(cipher, &key, &msgs), Some(&key), &cuts, &[], &gaps)?;
    }
}

/// One framer of a comparison, with the decryptor of its sealed messages (none: in clear) and
/// the spares it reuses their boxes from (none: each message allocates its own).
struct Side {
    framer: Framer,
    crypto: Option<Decryptor>,
    spares: Option<SealSpares>,
    out: Vec<FramerEvent>,
}

impl Side {
    fn new(key: Option<&[u8]>, spares: bool) -> Side {
        Side {
            framer: Framer::new(framer_config()),
            crypto: key.map(decryptor),
            spares: spares.then(SealSpares::default),
            out: Vec::new(),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let ctx = &mut ctx(self.crypto.as_mut(), self.spares.as_mut());
        self.framer.push_sealed(bytes, ctx, &mut self.out);
    }

    /// Counts `bytes` off when `skip_within` takes them, else pushes them.
    fn count_off_or_push(&mut self, bytes: &[u8]) {
        if !self.framer.skip_within(bytes.len()) {
            self.push(bytes);
        }
    }

    fn gap(&mut self, missing: u64) {
        let ctx = &mut ctx(self.crypto.as_mut(), self.spares.as_mut());
        self.framer.gap_sealed(missing, ctx, &mut self.out);
    }

    fn finish(&mut self) {
        let ctx = &mut ctx(self.crypto.as_mut(), self.spares.as_mut());
        self.framer.finish_sealed(ctx, &mut self.out);
    }
}

/// Framer A pushes every chunk of `stream` (cut by `cuts`, with `noise` pushed and `gaps`
/// missing before the chunk of their index); framer B counts a chunk off whenever
/// `skip_within` takes it: the events and held bytes stay the same at every step.
fn counting_off_is_pushing(
    stream: &[u8],
    key: Option<&[u8]>,
    cuts: &[usize],
    noise: &[(usize, Vec<u8>)],
    gaps: &[(usize, u64)],
) -> Result<(), TestCaseError> {
    // B also reuses the boxes and buffers of its encrypted messages: what it gives must not
    // change with them.
    let (mut a, mut b) = (Side::new(key, false), Side::new(key, true));
    let mut rest = stream;
    let mut i = 0;
    while !rest.is_empty() {
        for (_, bytes) in noise.iter().filter(|(at, _)| *at == i) {
            a.push(bytes);
            b.count_off_or_push(bytes);
        }
        for (_, missing) in gaps.iter().filter(|(at, _)| *at == i) {
            a.gap(*missing);
            b.gap(*missing);
        }
        let n = cuts[i % cuts.len()].min(rest.len());
        a.push(&rest[..n]);
        b.count_off_or_push(&rest[..n]);
        prop_assert_eq!(a.framer.buffered(), b.framer.buffered());
        prop_assert_eq!(a.framer.in_message(), b.framer.in_message());
        prop_assert_eq!(&a.out, &b.out);
        rest = &rest[n..];
        i += 1;
    }
    a.finish();
    b.finish();
    prop_assert_eq!(a.out, b.out);
    Ok(())
}

/// A sealed READ response's data is counted off once its header has been read through the
/// keystream; the message's last byte and the next message are pushed.
#[test]
fn skip_within_takes_the_middle_of_sealed_read_data() {
    let key = [0x5a; 16];
    let read = framed(&Msg::response(READ, 7, 0, read_response(20_000, 0xab)));
    let echo = framed(&Msg::request(ECHO, 8, echo()));
    let stream = sealed(Cipher::Aes128Gcm, &key, &[read, echo]);
    let first = 4 + TRANSFORM_HEADER_LEN + 20_000 + 64 + 16;
    let mut d = decryptor(&key);
    let mut f = Framer::new(framer_config());
    let mut out = Vec::new();
    // The transform header, the probe and the READ's header and fixed body: looked at.
    let head = 4 + TRANSFORM_HEADER_LEN + 200;
    assert!(!f.skip_within(head));
    f.push_sealed(&stream[..head], &mut ctx(Some(&mut d), None), &mut out);
    let left = first - head;
    assert!(f.skip_within(1000));
    assert!(f.skip_within(left - 1001));
    assert!(!f.skip_within(1), "the message's last byte completes it");
    f.push_sealed(
        &stream[head + left - 1..],
        &mut ctx(Some(&mut d), None),
        &mut out,
    );
    let ids: Vec<(u64, bool)> = out
        .iter()
        .filter_map(|e| match e {
            FramerEvent::Message(m) => Some((
                m.parts[0].header.message_id,
                m.sealed.is_some_and(|s| s.authenticated),
            )),
            _ => None,
        })
        .collect();
    // The READ streamed (headers only, unauthenticated), the ECHO opened whole.
    assert_eq!(ids, [(7, false), (8, true)]);
}

/// A small message is opened whole without a probe when the likeliest key is GCM's (a 16-byte
/// key of a session whose cipher is not known yet fits AES-128-GCM first, then AES-128-CCM):
/// GCM's open says which, and where it fails the next key that passes the probe opens it. Each
/// message says the cipher that opened it; one sealed with another key is not opened.
#[test]
fn a_small_message_opens_with_whichever_candidate_key_sealed_it() {
    let key = [0x5a; 16];
    let echo = |id| framed(&Msg::request(ECHO, id, echo()));
    let mut stream = seal_one(Cipher::Aes128Gcm, &key, SEALED_SESSION, 1, &echo(1));
    stream.extend(seal_one(
        Cipher::Aes128Ccm,
        &key,
        SEALED_SESSION,
        2,
        &echo(2),
    ));
    stream.extend(seal_one(
        Cipher::Aes128Gcm,
        &[0x77; 16],
        SEALED_SESSION,
        3,
        &echo(3),
    ));
    stream.extend(seal_one(
        Cipher::Aes128Gcm,
        &key,
        SEALED_SESSION,
        4,
        &echo(4),
    ));
    let mut d = decryptor(&key);
    let mut f = Framer::new(framer_config());
    let mut out = Vec::new();
    for chunk in stream.chunks(50) {
        f.push_sealed(chunk, &mut ctx(Some(&mut d), None), &mut out);
    }
    f.finish_sealed(&mut ctx(Some(&mut d), None), &mut out);
    let outcomes: Vec<SealOutcome> = out
        .iter()
        .filter_map(|e| match e {
            FramerEvent::Encrypted { outcome, .. } => Some(outcome.clone()),
            _ => None,
        })
        .collect();
    let opened = |cipher| SealOutcome::Decrypted {
        cipher,
        authenticated: true,
    };
    assert_eq!(outcomes.len(), 4, "{outcomes:?}");
    assert_eq!(outcomes[0], opened(Cipher::Aes128Gcm));
    assert_eq!(outcomes[1], opened(Cipher::Aes128Ccm));
    assert!(
        matches!(outcomes[2], SealOutcome::AuthFailed { .. }),
        "{:?}",
        outcomes[2]
    );
    // The CCM message confirmed the session's cipher: CCM is tried first now, and GCM after.
    assert_eq!(outcomes[3], opened(Cipher::Aes128Gcm));
    let ids = message_ids(&out);
    assert_eq!(ids, [1, 2, 4]);
}

/// Two sessions with keys of the same cipher, their messages interleaved on two connections
/// that share the decryptor: every message opens with its own session's key — whole ones, and
/// streamed READs whose keystream is read while the other session's messages go by (a cipher
/// kept for one key must never serve the other).
#[test]
fn interleaved_sessions_with_different_keys_each_decrypt() {
    let sessions = [(0xa1_u64, [0x11_u8; 16]), (0xb2, [0x22; 16])];
    let mut ring = KeyRing::default();
    for (sid, key) in sessions {
        ring.insert(SessionKeys {
            session_id: sid,
            session_key: Vec::new(),
            server_to_client: key.to_vec(),
            client_to_server: key.to_vec(),
        });
    }
    let mut d = Decryptor::new(Arc::new(ring));
    // Connection `conn` alternates the sessions, starting with session `conn`; message ids
    // say the connection, the session and the message.
    let stream = |conn: usize| -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..6u64 {
            let (sid, key) = sessions[(conn + i as usize) % 2];
            let id = 100 * conn as u64 + 10 * (sid & 0xf) + i;
            let msg = if i % 3 == 0 {
                Msg::response(READ, id, 0, read_response(9000, 0xab))
            } else {
                Msg::request(ECHO, id, echo())
            };
            let m = framed(&Msg {
                session_id: sid,
                ..msg
            });
            out.extend_from_slice(&seal_one(Cipher::Aes128Gcm, &key, sid, id, &m));
        }
        out
    };
    let streams = [stream(0), stream(1)];
    let mut framers = [Framer::new(framer_config()), Framer::new(framer_config())];
    let mut outs = [Vec::new(), Vec::new()];
    // 700-byte chunks, one connection's then the other's.
    for at in (0..streams[0].len().max(streams[1].len())).step_by(700) {
        for c in 0..2 {
            let chunk = streams[c].get(at..(at + 700).min(streams[c].len()));
            let ctx = &mut SealCtx {
                crypto: Some(&mut d),
                conn: c as u32,
                to_server: false,
                spares: None,
            };
            framers[c].push_sealed(chunk.unwrap_or(&[]), ctx, &mut outs[c]);
        }
    }
    for c in 0..2 {
        framers[c].finish_sealed(&mut ctx(Some(&mut d), None), &mut outs[c]);
        let failed: Vec<_> = outs[c]
            .iter()
            .filter(|e| {
                matches!(e, FramerEvent::Encrypted { outcome, .. }
                    if !matches!(outcome, SealOutcome::Decrypted { .. }))
            })
            .collect();
        assert!(failed.is_empty(), "connection {c}: {failed:?}");
        let got: Vec<(u64, u64, bool)> = outs[c]
            .iter()
            .filter_map(|e| match e {
                FramerEvent::Message(m) => {
                    let s = m.sealed?;
                    Some((m.parts[0].header.message_id, s.session_id, s.authenticated))
                }
                _ => None,
            })
            .collect();
        let want: Vec<(u64, u64, bool)> = (0..6u64)
            .map(|i| {
                let sid = sessions[(c + i as usize) % 2].0;
                (100 * c as u64 + 10 * (sid & 0xf) + i, sid, i % 3 != 0)
            })
            .collect();
        assert_eq!(got, want, "connection {c}");
    }
}
