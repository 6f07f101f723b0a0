//! The whole pipeline on Ethernet/IPv4/TCP frames built in code: frame numbers through TCP
//! reassembly, and a frame cut by the snaplen in the middle of an SQOS request.

use crate::smb2_build::*;
use etherparse::PacketBuilder;
use sqos::capture::{Frame, Timestamp};
use sqos::pipeline::{CaptureNote, Pipeline, PipelineConfig, RecordSink, SqosBody, SqosRecord};

#[derive(Default)]
struct Sink {
    sqos: Vec<SqosRecord>,
    notes: Vec<CaptureNote>,
}

impl RecordSink for Sink {
    // These tests look at messages, opens, I/O and notes, not channels.
    fn on_channel(&mut self, _rec: &sqos::pipeline::ChannelRecord) {}
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.sqos.push(rec);
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.notes.push(note.clone());
    }
}

/// One TCP connection 10.0.0.1:50000 → 10.0.0.2:445, frame by frame.
struct Tcp {
    cseq: u32,
    sseq: u32,
    /// (captured bytes, length on the wire)
    frames: Vec<(Vec<u8>, u32)>,
}

impl Tcp {
    fn new() -> Tcp {
        let mut t = Tcp {
            cseq: 100,
            sseq: 9000,
            frames: Vec::new(),
        };
        t.segment(true, &[], Flag::Syn);
        t.segment(false, &[], Flag::Syn);
        t.segment(true, &[], Flag::Ack);
        t
    }

    fn segment(&mut self, to_server: bool, payload: &[u8], flag: Flag) {
        let (src, dst, sp, dp) = if to_server {
            ([10, 0, 0, 1], [10, 0, 0, 2], 50000, 445)
        } else {
            ([10, 0, 0, 2], [10, 0, 0, 1], 445, 50000)
        };
        let (seq, ack) = if to_server {
            (self.cseq, self.sseq)
        } else {
            (self.sseq, self.cseq)
        };
        let b = PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv4(src, dst, 64)
            .tcp(sp, dp, seq, 65535);
        let b = match flag {
            Flag::Syn if to_server => b.syn(),
            Flag::Syn => b.syn().ack(ack.wrapping_add(1)),
            Flag::Ack => b.ack(ack),
        };
        let mut out = Vec::with_capacity(b.size(payload.len()));
        b.write(&mut out, payload).expect("build frame");
        let used = payload.len() as u32 + u32::from(matches!(flag, Flag::Syn));
        if to_server {
            self.cseq = self.cseq.wrapping_add(used);
        } else {
            self.sseq = self.sseq.wrapping_add(used);
        }
        let len = out.len() as u32;
        self.frames.push((out, len));
    }

    /// A connection on which d.vhdx (FileId `F`) was opened (frames 1-5).
    fn with_open_file() -> Tcp {
        let mut t = Tcp::new();
        t.send(
            true,
            &framed(&Msg::request(CREATE, 1, create_request("d.vhdx"))),
            1448,
        );
        t.send(
            false,
            &framed(&Msg::response(CREATE, 1, 0, create_response(F))),
            1448,
        );
        t
    }

    /// Send `bytes` in segments of at most `mss`; returns the frame numbers used.
    fn send(&mut self, to_server: bool, bytes: &[u8], mss: usize) -> Vec<u64> {
        let mut nums = Vec::new();
        for c in bytes.chunks(mss) {
            self.segment(to_server, c, Flag::Ack);
            nums.push(self.frames.len() as u64);
        }
        nums
    }

    /// Cut frame `n` (1-based) to `keep` captured bytes, as a snaplen does.
    fn snap(&mut self, n: u64, keep: usize) {
        if let Some((data, _)) = self.frames.get_mut(n as usize - 1) {
            data.truncate(keep);
        }
    }

    fn run(&self) -> (Sink, sqos::pipeline::Stats) {
        self.run_with(PipelineConfig::default())
    }

    fn run_with(&self, cfg: PipelineConfig) -> (Sink, sqos::pipeline::Stats) {
        let mut p = Pipeline::new(cfg);
        let mut sink = Sink::default();
        for (i, (data, orig_len)) in self.frames.iter().enumerate() {
            // Cut by a snaplen where `orig_len` says so.
            let frame = Frame {
                orig_len: *orig_len,
                ..Frame::ethernet(i as u64 + 1, Timestamp(i as i64 * 1_000_000), data)
            };
            p.push_frame(&frame, &mut sink);
        }
        p.finish(&mut sink);
        (sink, p.stats().clone())
    }
}

#[derive(Clone, Copy)]
enum Flag {
    Syn,
    Ack,
}

const F: [u8; 16] = [5, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0];

/// Where a message began is kept for `dissect -x`/`-w` (`keep_frames`) only: otherwise no
/// record says it, and nothing is looked up for it per message.
#[test]
fn the_frame_a_message_began_in_only_with_kept_frames() {
    let mut t = Tcp::with_open_file();
    // One request over three segments (frames 6-8), then two in one segment (frame 9).
    let sqos = |id| {
        framed(&Msg::request(
            IOCTL,
            id,
            ioctl_request(FSCTL_SQOS, F, &[7; 120], 96, 0),
        ))
    };
    assert_eq!(t.send(true, &sqos(2), 100), vec![6, 7, 8]);
    let two: Vec<u8> = [sqos(3), sqos(4)].concat();
    assert_eq!(t.send(true, &two, 1448), vec![9]);
    let began = |keep_frames| {
        let cfg = PipelineConfig {
            keep_frames,
            ..PipelineConfig::default()
        };
        let (sink, _) = t.run_with(cfg);
        sink.sqos
            .iter()
            .map(|r| (r.msg_id, r.frame, r.first_frame))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        began(true),
        [(2, 8, Some(6)), (3, 9, Some(9)), (4, 9, Some(9))]
    );
    assert_eq!(began(false), [(2, 8, None), (3, 9, None), (4, 9, None)]);
}

#[test]
fn frame_numbers_through_reassembly() {
    let mut t = Tcp::with_open_file();
    let input: Vec<u8> = (0..120u8).collect();
    // The request in three segments: the message completes in the third.
    let req = t.send(
        true,
        &framed(&Msg::request(
            IOCTL,
            2,
            ioctl_request(FSCTL_SQOS, F, &input, 96, 0),
        )),
        100,
    );
    assert_eq!(req, vec![6, 7, 8]);
    // A READ response of 64 KiB in 1448-byte segments, then the SQOS response.
    t.send(
        true,
        &framed(&Msg::request(READ, 3, read_request(F, 65536, 0))),
        1448,
    );
    t.send(
        false,
        &framed(&Msg::response(READ, 3, 0, read_response(65536, 0))),
        1448,
    );
    let resp = t.send(
        false,
        &framed(&Msg::response(
            IOCTL,
            2,
            0,
            ioctl_response(FSCTL_SQOS, F, &[8; 88], 0),
        )),
        1448,
    );
    let (sink, stats) = t.run();
    assert_eq!(sink.sqos.len(), 2);
    let (q, r) = (&sink.sqos[0], &sink.sqos[1]);
    assert_eq!(q.frame, 8);
    assert_eq!(q.buffer, input);
    assert!(!q.buffer_truncated);
    assert_eq!(q.response_frame, Some(resp[0]));
    assert_eq!(r.frame, resp[0]);
    assert_eq!(r.request_frame, Some(8));
    assert_eq!(q.file_name.as_deref(), Some("d.vhdx"));
    assert_eq!(stats.connections, 1);
    assert_eq!(stats.smb2_messages, 6);
    assert_eq!(stats.gaps, 0);
    assert_eq!(stats.truncated_frames, 0);
}

#[test]
fn snaplen_cut_inside_an_sqos_request() {
    let mut t = Tcp::new();
    let input: Vec<u8> = (0..200u8).collect();
    let msg = framed(&Msg::request(
        IOCTL,
        2,
        ioctl_request(FSCTL_SQOS, F, &input, 96, 0),
    ));
    // 324 bytes: two segments of 200 and 124; the first is cut to 54 + 150 captured bytes.
    let frames = t.send(true, &msg, 200);
    assert_eq!(frames, vec![4, 5]);
    t.snap(4, 14 + 20 + 20 + 150);
    t.send(true, &framed(&Msg::request(ECHO, 3, echo())), 1448);
    t.send(
        false,
        &framed(&Msg::response(
            IOCTL,
            2,
            0,
            ioctl_response(FSCTL_SQOS, F, &[1; 88], 0),
        )),
        1448,
    );
    let (sink, stats) = t.run();
    assert_eq!(stats.truncated_frames, 1);
    assert_eq!(stats.gaps, 1);
    assert_eq!(stats.gap_bytes, 50);
    assert_eq!(
        stats.resyncs, 0,
        "the cut is inside the IOCTL: framing kept"
    );
    assert_eq!(stats.by_command.get(sqos::smb2::Command::ECHO), Some(&1));
    let q = &sink.sqos[0];
    assert_eq!(q.frame, 5);
    assert!(q.buffer_truncated);
    // 150 captured - 4 (NBSS) - 64 - 56 = 26 bytes of input before the cut.
    assert_eq!(q.buffer, input[..26].to_vec());
    assert!(matches!(&q.body, SqosBody::Request(d) if d.message.is_none()));
    assert_eq!(q.response_frame, Some(7));
    assert!(sink.notes.iter().any(|n| n
        .message
        .contains("buffer incomplete (26 of 200 bytes in the capture)")));
}
