//! The pipeline's SMB2 → records stage, fed reassembled stream bytes directly: matching,
//! related compound operations, interim responses, error responses, opens, I/O records,
//! hold-back order, statistics and notes.

use std::net::SocketAddr;

use crate::smb2_build::*;
use sqos::capture::Timestamp;
use sqos::net::{CloseKind, ConnId, ConnKey, Dir, StreamSink};
use sqos::pipeline::{
    CaptureNote, CloseRecord, Direction, FileId, IoKind, IoRecord, OpenRecord, Pipeline,
    PipelineConfig, RecordSink, SqosBody, SqosRecord,
};

#[derive(Debug)]
enum Rec {
    Sqos(Box<SqosRecord>),
    Open(OpenRecord),
    Close(CloseRecord),
    Io(IoRecord),
    Note(CaptureNote),
}

#[derive(Default)]
struct Collect(Vec<Rec>);

impl RecordSink for Collect {
    // These tests look at messages, opens, I/O and notes, not channels.
    fn on_channel(&mut self, _rec: &sqos::pipeline::ChannelRecord) {}
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.0.push(Rec::Sqos(Box::new(rec)));
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        self.0.push(Rec::Open(rec.clone()));
    }
    fn on_close(&mut self, rec: &CloseRecord) {
        self.0.push(Rec::Close(rec.clone()));
    }
    fn on_io(&mut self, rec: &IoRecord) {
        self.0.push(Rec::Io(rec.clone()));
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.0.push(Rec::Note(note.clone()));
    }
}

impl Collect {
    fn sqos(&self) -> Vec<&SqosRecord> {
        self.0
            .iter()
            .filter_map(|r| match r {
                Rec::Sqos(s) => Some(&**s),
                _ => None,
            })
            .collect()
    }
    fn notes(&self) -> Vec<&str> {
        self.0
            .iter()
            .filter_map(|r| match r {
                Rec::Note(n) => Some(n.message.as_str()),
                _ => None,
            })
            .collect()
    }
    /// A compact trace of the record kinds and frames, in delivery order.
    fn order(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|r| match r {
                Rec::Sqos(s) => format!("sqos-{:?}@{}", s.direction, s.frame),
                Rec::Open(o) => format!("open@{}", o.frame),
                Rec::Close(c) => format!("close@{}", c.frame),
                Rec::Io(i) => format!("io@{}", i.response_frame),
                Rec::Note(n) => format!("note@{}", n.frame),
            })
            .collect()
    }
}

const SEC: i64 = 1_000_000_000;

fn key() -> ConnKey {
    ConnKey {
        client: "10.0.0.1:50000".parse::<SocketAddr>().unwrap(),
        server: "10.0.0.2:445".parse::<SocketAddr>().unwrap(),
    }
}

/// Drives a pipeline frame by frame through its stream sink.
struct Drive {
    p: Pipeline,
    out: Collect,
    frame: u64,
}

impl Drive {
    fn new() -> Drive {
        let mut p = Pipeline::new(PipelineConfig::default());
        p.stream_sink()
            .on_connection(ConnId(0), &key(), 1, Timestamp(0));
        Drive {
            p,
            out: Collect::default(),
            frame: 0,
        }
    }
    /// Deliver `bytes` in a new frame at `secs`.
    fn send(&mut self, dir: Dir, secs: f64, bytes: &[u8]) -> u64 {
        self.frame += 1;
        let ts = Timestamp((secs * SEC as f64) as i64);
        self.p
            .stream_sink()
            .on_data(ConnId(0), dir, self.frame, ts, bytes);
        self.p.deliver(ts, &mut self.out);
        self.frame
    }
    fn finish(mut self) -> (Collect, sqos::pipeline::Stats) {
        self.p.finish(&mut self.out);
        let stats = self.p.stats().clone();
        (self.out, stats)
    }
}

const F: [u8; 16] = [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0];
const FID: FileId = FileId {
    persistent: 1,
    volatile: 2,
};

#[test]
fn sqos_request_is_held_until_its_response_and_linked() {
    let mut d = Drive::new();
    let sqos_in = [7u8; 40];
    d.send(
        Dir::ToServer,
        0.0,
        &framed(&Msg::request(CREATE, 1, create_request("vm.vhdx"))),
    );
    d.send(
        Dir::ToClient,
        0.1,
        &framed(&Msg::response(CREATE, 1, 0, create_response(F))),
    );
    let req = Msg::request(IOCTL, 2, ioctl_request(FSCTL_SQOS, F, &sqos_in, 96, 16));
    d.send(Dir::ToServer, 1.0, &framed(&req));
    d.send(
        Dir::ToServer,
        1.2,
        &framed(&Msg::request(READ, 3, read_request(F, 4096, 0))),
    );
    d.send(
        Dir::ToClient,
        1.3,
        &framed(&Msg::response(READ, 3, 0, read_response(4096, 0))),
    );
    let out = [9u8; 24];
    d.send(
        Dir::ToClient,
        1.5,
        &framed(&Msg::response(
            IOCTL,
            2,
            0,
            ioctl_response(FSCTL_SQOS, F, &out, 8),
        )),
    );
    let (c, stats) = d.finish();
    // The READ's I/O record (frame 5) waits behind the SQOS request (frame 3).
    assert_eq!(
        c.order(),
        vec!["open@2", "sqos-Request@3", "io@5", "sqos-Response@6"]
    );
    let s = c.sqos();
    let (q, r) = (s[0], s[1]);
    assert_eq!(q.direction, Direction::Request);
    assert_eq!(q.msg_id, 2);
    assert_eq!(q.response_frame, Some(6));
    assert!((q.response_time.unwrap() - 0.5).abs() < 1e-9);
    assert_eq!(q.file_id, Some(FID));
    assert_eq!(q.file_name.as_deref(), Some("vm.vhdx"));
    assert_eq!(q.max_output_response, Some(96));
    assert_eq!(
        q.buffer,
        sqos_in.to_vec(),
        "input located by its offset (16 bytes of padding)"
    );
    assert_eq!(q.tree_id, Some(5));
    assert_eq!(q.src, key().client);
    assert_eq!(q.dst, key().server);
    assert!(matches!(q.body, SqosBody::Request(_)));
    assert_eq!(r.request_frame, Some(3));
    assert_eq!(r.nt_status, Some(0));
    assert_eq!(r.buffer, out.to_vec());
    assert_eq!(r.file_name.as_deref(), Some("vm.vhdx"));
    assert!(matches!(r.body, SqosBody::Response(_)));
    assert_eq!(r.src, key().server);
    let io = c.0.iter().find_map(|r| match r {
        Rec::Io(i) => Some(i),
        _ => None,
    });
    let io = io.unwrap();
    assert_eq!(
        (io.kind, io.requested, io.transferred),
        (IoKind::Read, 4096, 4096)
    );
    assert_eq!(
        (io.request_frame, io.response_frame, io.file_id),
        (4, 5, FID)
    );
    assert_eq!(stats.sqos_messages, 2);
    assert_eq!(stats.smb2_messages, 6);
    assert_eq!(stats.by_command.get(sqos::smb2::Command::IOCTL), Some(&2));
    assert_eq!(stats.by_command.get(sqos::smb2::Command::READ), Some(&2));
    assert_eq!(stats.by_command.get(sqos::smb2::Command::CREATE), Some(&2));
    assert_eq!(stats.unanswered_requests, 0);
}

#[test]
fn related_compound_takes_file_from_the_create() {
    let mut d = Drive::new();
    let req = compound(&[
        Msg::request(CREATE, 10, create_request("share\\vm1.vhdx")),
        Msg::request(
            IOCTL,
            11,
            ioctl_request(FSCTL_SQOS, RELATED_FID, &[1; 40], 96, 0),
        )
        .related(),
        Msg::request(CLOSE, 12, close_request(RELATED_FID)).related(),
    ]);
    d.send(Dir::ToServer, 0.0, &nbss(&req));
    let resp = compound(&[
        Msg::response(CREATE, 10, 0, create_response(F)),
        Msg::response(
            IOCTL,
            11,
            0,
            ioctl_response(FSCTL_SQOS, RELATED_FID, &[2; 24], 0),
        )
        .related(),
        Msg::response(CLOSE, 12, 0, close_response()).related(),
    ]);
    d.send(Dir::ToClient, 0.01, &nbss(&resp));
    let (c, stats) = d.finish();
    assert_eq!(
        c.order(),
        vec!["sqos-Request@1", "open@2", "sqos-Response@2", "close@2"]
    );
    let s = c.sqos();
    assert_eq!(s[0].file_name.as_deref(), Some("share\\vm1.vhdx"));
    assert_eq!(s[0].file_id, Some(FID), "filled in from the response chain");
    assert_eq!(s[1].file_id, Some(FID));
    assert_eq!(s[1].file_name.as_deref(), Some("share\\vm1.vhdx"));
    let close = c.0.iter().find_map(|r| match r {
        Rec::Close(x) => Some(x),
        _ => None,
    });
    assert_eq!(close.unwrap().file_id, FID);
    assert_eq!(stats.smb2_messages, 6);
    assert_eq!(stats.by_command.get(sqos::smb2::Command::CLOSE), Some(&2));
}

#[test]
fn interim_then_final_async_response() {
    let mut d = Drive::new();
    d.send(
        Dir::ToServer,
        0.0,
        &framed(&Msg::request(
            IOCTL,
            5,
            ioctl_request(FSCTL_SQOS, F, &[1; 40], 96, 0),
        )),
    );
    d.send(
        Dir::ToClient,
        0.001,
        &framed(&Msg::response(IOCTL, 5, STATUS_PENDING, error_response()).async_id(0x99)),
    );
    d.send(
        Dir::ToClient,
        2.0,
        &framed(
            &Msg::response(IOCTL, 5, 0, ioctl_response(FSCTL_SQOS, F, &[3; 24], 0)).async_id(0x99),
        ),
    );
    let (c, _) = d.finish();
    let s = c.sqos();
    assert_eq!(s.len(), 3);
    assert_eq!(
        s[0].response_frame,
        Some(3),
        "the final response, not the interim one"
    );
    let interim = s[1];
    assert!(interim.interim);
    assert_eq!(interim.async_id, Some(0x99));
    assert_eq!(interim.tree_id, None);
    assert_eq!(interim.nt_status, Some(STATUS_PENDING));
    assert_eq!(interim.request_frame, Some(1));
    assert!(matches!(interim.body, SqosBody::NoBuffer));
    assert!(!s[2].interim);
    assert_eq!(s[2].request_frame, Some(1));
    assert!((s[2].response_time.unwrap() - 2.0).abs() < 1e-9);
}

#[test]
fn error_response_has_no_buffer() {
    let mut d = Drive::new();
    d.send(
        Dir::ToServer,
        0.0,
        &framed(&Msg::request(
            IOCTL,
            5,
            ioctl_request(FSCTL_SQOS, F, &[1; 40], 96, 0),
        )),
    );
    d.send(
        Dir::ToClient,
        0.1,
        &framed(&Msg::response(IOCTL, 5, STATUS_NOT_FOUND, error_response())),
    );
    let (c, _) = d.finish();
    let s = c.sqos();
    assert_eq!(s.len(), 2);
    assert_eq!(s[1].nt_status, Some(STATUS_NOT_FOUND));
    assert!(matches!(s[1].body, SqosBody::NoBuffer));
    assert!(s[1].buffer.is_empty());
    assert_eq!(s[1].file_id, Some(FID), "from the request");
    assert_eq!(s[0].response_frame, Some(2));
}

#[test]
fn unanswered_request_is_released_after_the_hold_window() {
    let mut d = Drive::new();
    d.send(
        Dir::ToServer,
        0.0,
        &framed(&Msg::request(
            IOCTL,
            5,
            ioctl_request(FSCTL_SQOS, F, &[1; 40], 96, 0),
        )),
    );
    d.send(
        Dir::ToServer,
        30.0,
        &framed(&Msg::request(READ, 6, read_request(F, 10, 0))),
    );
    d.send(
        Dir::ToClient,
        30.1,
        &framed(&Msg::response(READ, 6, 0, read_response(10, 0))),
    );
    // Nothing delivered yet: the request holds everything behind it.
    assert!(d.out.0.is_empty());
    d.send(Dir::ToServer, 61.0, &framed(&Msg::request(ECHO, 7, echo())));
    let order = d.out.order();
    assert_eq!(order, vec!["note@1", "sqos-Request@1", "io@3"]);
    assert!(d.out.notes()[0].contains("hold window"));
    let (c, stats) = d.finish();
    assert!(c
        .notes()
        .iter()
        .any(|n| n.contains("msg id 5") && n.contains("end of the capture")));
    assert_eq!(stats.unanswered_requests, 2);
}

#[test]
fn connection_close_releases_held_requests() {
    let mut d = Drive::new();
    d.send(
        Dir::ToServer,
        0.0,
        &framed(&Msg::request(
            IOCTL,
            5,
            ioctl_request(FSCTL_SQOS, F, &[1; 40], 96, 0),
        )),
    );
    d.p.stream_sink()
        .on_close(ConnId(0), CloseKind::Rst, 2, Timestamp(SEC));
    d.p.deliver(Timestamp(SEC), &mut d.out);
    let s = d.out.sqos();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].response_frame, None);
    assert!(d.out.notes().iter().any(|n| n.contains("closed")));
}

#[test]
fn write_io_record_and_encrypted_count() {
    let mut d = Drive::new();
    d.send(
        Dir::ToServer,
        0.0,
        &framed(&Msg::request(WRITE, 1, write_request(F, 65536, 1))),
    );
    d.send(
        Dir::ToClient,
        0.1,
        &framed(&Msg::response(WRITE, 1, 0, write_response(65536))),
    );
    // A well-formed TRANSFORM_HEADER (OriginalMessageSize 148, session 0x77) and no key.
    let mut enc = vec![0xFD, b'S', b'M', b'B'];
    enc.resize(200, 0);
    enc[36..40].copy_from_slice(&148u32.to_le_bytes());
    enc[44..52].copy_from_slice(&0x77u64.to_le_bytes());
    d.send(Dir::ToServer, 0.2, &nbss(&enc));
    let (c, stats) = d.finish();
    assert_eq!(c.order(), vec!["io@2"]);
    assert_eq!(stats.encrypted_messages, 1);
    assert_eq!(stats.undecrypted(), 1);
    assert_eq!(
        stats.undecrypted_by_session.get("0x0000000000000077"),
        Some(&1)
    );
    assert_eq!(stats.smb2_messages, 2);
    assert_eq!(
        stats.encrypted_by_connection.values().collect::<Vec<_>>(),
        vec![1]
    );
}

/// Encrypted messages are counted by connection up to 1,000 labels
/// (`MAX_LISTED_CONNECTIONS`); the connections past them share one label, which counts each of
/// their messages.
#[test]
fn encrypted_messages_past_the_listed_connections_are_counted_together() {
    let mut p = Pipeline::new(PipelineConfig::default());
    let mut out = Collect::default();
    // A TRANSFORM_HEADER (session 0x77) and no key, as above.
    let mut enc = vec![0xFD, b'S', b'M', b'B'];
    enc.resize(200, 0);
    enc[36..40].copy_from_slice(&148u32.to_le_bytes());
    enc[44..52].copy_from_slice(&0x77u64.to_le_bytes());
    let mut frame = 0;
    for i in 0..1005u32 {
        let k = ConnKey {
            client: SocketAddr::from(([10, 0, (i / 250) as u8, 1], 40000 + (i % 250) as u16)),
            server: "10.0.0.2:445".parse::<SocketAddr>().unwrap(),
        };
        frame += 1;
        let ts = Timestamp(i64::from(i) * SEC);
        p.stream_sink().on_connection(ConnId(i), &k, frame, ts);
        for _ in 0..2 {
            frame += 1;
            p.stream_sink()
                .on_data(ConnId(i), Dir::ToServer, frame, ts, &nbss(&enc));
        }
        p.deliver(ts, &mut out);
    }
    p.finish(&mut out);
    let by = &p.stats().encrypted_by_connection;
    assert_eq!(p.stats().encrypted_messages, 2010);
    assert_eq!(by.len(), 1001);
    assert_eq!(by.get("(other connections)"), Some(10));
    assert_eq!(by.values().sum::<u64>(), 2010);
    assert!(by.values().all(|n| n == 2 || n == 10));
}

/// The layer handles each framer event the moment the framer gives it, a message too: the
/// resynchronisation over junk in front of a response, given first, has its note first, as the
/// bytes did.
#[test]
fn a_framing_note_comes_before_the_records_of_messages_framed_after_it() {
    let mut d = Drive::new();
    d.send(
        Dir::ToServer,
        0.0,
        &framed(&Msg::request(WRITE, 1, write_request(F, 65536, 1))),
    );
    let mut junk_then_response = vec![0xAA; 7];
    junk_then_response.extend_from_slice(&framed(&Msg::response(
        WRITE,
        1,
        0,
        write_response(65536),
    )));
    let f = d.send(Dir::ToClient, 0.1, &junk_then_response);
    let (c, stats) = d.finish();
    assert_eq!(stats.resync_skipped_bytes, 7);
    assert_eq!(c.order(), vec![format!("note@{f}"), format!("io@{f}")]);
}

#[test]
fn gap_and_resync_are_counted_and_noted() {
    let mut d = Drive::new();
    let a = framed(&Msg::request(CREATE, 1, create_request("x")));
    d.send(Dir::ToServer, 0.0, &a[..30]);
    d.frame += 1;
    d.p.stream_sink().on_gap(
        ConnId(0),
        Dir::ToServer,
        d.frame,
        Timestamp(0),
        (a.len() - 30 + 10) as u64,
    );
    let b = framed(&Msg::request(ECHO, 2, echo()));
    let c2 = framed(&Msg::request(ECHO, 3, echo()));
    let mut rest = vec![0xAA; 0];
    rest.extend_from_slice(&b[10..]);
    rest.extend_from_slice(&c2);
    d.send(Dir::ToServer, 0.1, &rest);
    let (c, stats) = d.finish();
    assert_eq!(stats.gaps, 1);
    assert_eq!(stats.resyncs, 1);
    assert_eq!(stats.resync_skipped_bytes, (b.len() - 10) as u64);
    assert_eq!(stats.smb2_messages, 1);
    assert_eq!(stats.by_command.get(sqos::smb2::Command::ECHO), Some(&1));
    assert!(c.notes().iter().any(|n| n.contains("bytes missing")));
    assert!(c.notes().iter().any(|n| n.contains("resynchronised")));
}

#[test]
fn bytes_lost_inside_an_sqos_request_mark_its_buffer_truncated() {
    let mut d = Drive::new();
    let input: Vec<u8> = (0..200u8).collect();
    let req = framed(&Msg::request(
        IOCTL,
        8,
        ioctl_request(FSCTL_SQOS, F, &input, 96, 0),
    ));
    // 4 (NBSS) + 64 + 56 = 124 bytes before the input; lose 50 bytes from byte 224 on.
    d.send(Dir::ToServer, 0.0, &req[..224]);
    d.frame += 1;
    d.p.stream_sink()
        .on_gap(ConnId(0), Dir::ToServer, d.frame, Timestamp(0), 50);
    d.send(Dir::ToServer, 0.1, &req[274..]);
    // Framing was kept: the next message is decoded normally.
    d.send(Dir::ToServer, 0.2, &framed(&Msg::request(ECHO, 9, echo())));
    let (c, stats) = d.finish();
    let s = c.sqos();
    assert_eq!(s.len(), 1);
    assert!(s[0].buffer_truncated);
    assert_eq!(
        s[0].buffer,
        input[..100].to_vec(),
        "what arrived before the hole"
    );
    assert_eq!(s[0].frame, 3, "the frame that ended the message");
    assert!(c.notes().iter().any(|n| n
        .contains("SQOS request msg id 8: buffer incomplete (100 of 200 bytes in the capture)")));
    assert_eq!(stats.by_command.get(sqos::smb2::Command::ECHO), Some(&1));
    assert_eq!(stats.resyncs, 0);
}

#[test]
fn queue_bound_releases_the_held_request_with_a_note() {
    let limits = sqos::pipeline::Limits {
        max_queued: 3,
        ..Default::default()
    };
    let mut p = Pipeline::with_limits(PipelineConfig::default(), limits);
    p.stream_sink()
        .on_connection(ConnId(0), &key(), 1, Timestamp(0));
    let mut out = Collect::default();
    let req = framed(&Msg::request(
        IOCTL,
        1,
        ioctl_request(FSCTL_SQOS, F, &[1; 40], 96, 0),
    ));
    p.stream_sink()
        .on_data(ConnId(0), Dir::ToServer, 1, Timestamp(0), &req);
    for i in 0..3u64 {
        let f = 2 + 2 * i;
        let r = framed(&Msg::request(READ, 10 + i, read_request(F, 1, 0)));
        p.stream_sink()
            .on_data(ConnId(0), Dir::ToServer, f, Timestamp(0), &r);
        let r = framed(&Msg::response(READ, 10 + i, 0, read_response(1, 0)));
        p.stream_sink()
            .on_data(ConnId(0), Dir::ToClient, f + 1, Timestamp(0), &r);
        p.deliver(Timestamp(0), &mut out);
    }
    // Four queued (request + three I/O records) > 3: the request went out unanswered,
    // counted in the queued share (no note per request)...
    assert_eq!(out.order(), vec!["sqos-Request@1", "io@3", "io@5", "io@7"]);
    assert!(out.notes().is_empty());
    // ... and said once at the end.
    p.finish(&mut out);
    let said: Vec<&str> = out
        .notes()
        .into_iter()
        .filter(|n| n.contains("queued share"))
        .collect();
    assert_eq!(said.len(), 1);
    assert!(
        said[0].contains("was full from frame 1: 1 SQOS requests shown before their response came"),
        "{}",
        said[0]
    );
}

#[test]
fn all_ones_file_id_without_related_flag_names_no_file() {
    let mut d = Drive::new();
    d.send(
        Dir::ToServer,
        0.0,
        &framed(&Msg::request(CREATE, 1, create_request("x.vhdx"))),
    );
    d.send(
        Dir::ToClient,
        0.0,
        &framed(&Msg::response(CREATE, 1, 0, create_response(F))),
    );
    // Not flagged related: 0xFF… is just "no file" (as for FSCTLs sent to the share).
    let req = Msg::request(
        IOCTL,
        2,
        ioctl_request(FSCTL_SQOS, RELATED_FID, &[1; 40], 96, 0),
    );
    d.send(Dir::ToServer, 0.1, &framed(&req));
    // An explicit FileId gets the name its CREATE gave it.
    let req = Msg::request(IOCTL, 3, ioctl_request(FSCTL_SQOS, F, &[1; 40], 96, 0));
    d.send(Dir::ToServer, 0.2, &framed(&req));
    let (c, _) = d.finish();
    let s = c.sqos();
    assert_eq!((s[0].file_id, s[0].file_name.as_deref()), (None, None));
    assert_eq!(
        (s[1].file_id, s[1].file_name.as_deref()),
        (Some(FID), Some("x.vhdx"))
    );
}

#[test]
fn bound_over_all_framers_cuts_the_biggest_message_in_progress() {
    let limits = sqos::pipeline::Limits {
        max_framer_bytes: 3000,
        ..Default::default()
    };
    let mut p = Pipeline::with_limits(PipelineConfig::default(), limits);
    let mut out = Collect::default();
    let big: Vec<u8> = vec![0x42; 4000];
    let req = framed(&Msg::request(
        IOCTL,
        1,
        ioctl_request(FSCTL_SQOS, F, &big, 96, 0),
    ));
    for (i, conn) in [ConnId(0), ConnId(1)].into_iter().enumerate() {
        let mut k = key();
        k.client.set_port(50000 + i as u16);
        p.stream_sink().on_connection(conn, &k, 1, Timestamp(0));
    }
    // Connection 0 gets 2000 bytes of its request, connection 1 1500: 3500 > 3000.
    p.stream_sink()
        .on_data(ConnId(0), Dir::ToServer, 1, Timestamp(0), &req[..2000]);
    assert_eq!(p.framer_bytes(), 2000 - 4);
    p.stream_sink()
        .on_data(ConnId(1), Dir::ToServer, 2, Timestamp(0), &req[..1500]);
    // Connection 0's message was cut to header + fixed IOCTL body.
    assert_eq!(p.framer_bytes(), 120 + 1500 - 4);
    p.stream_sink()
        .on_data(ConnId(0), Dir::ToServer, 3, Timestamp(0), &req[2000..]);
    p.stream_sink()
        .on_data(ConnId(1), Dir::ToServer, 4, Timestamp(0), &req[1500..]);
    p.finish(&mut out);
    let s = out.sqos();
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[0].conn, s[0].buffer.len(), s[0].buffer_truncated),
        (ConnId(0), 0, true)
    );
    assert_eq!(
        (s[1].conn, s[1].buffer.len(), s[1].buffer_truncated),
        (ConnId(1), 4000, false)
    );
    assert_eq!(p.stats().framer_bytes_shed, 2000 - 4 - 120);
    let said: Vec<&str> = out
        .notes()
        .into_iter()
        .filter(|n| n.contains("framers share"))
        .collect();
    assert_eq!(said.len(), 1);
    assert!(
        said[0].contains("was full from frame 2: 1 messages in progress cut"),
        "{}",
        said[0]
    );
    let m = p
        .stats()
        .memory
        .iter()
        .find(|m| m.kind == sqos::budget::Kind::Framers);
    assert_eq!(m.map(|m| m.dropped_bytes), Some(2000 - 4 - 120));
    assert_eq!(p.framer_bytes(), 0);
}
