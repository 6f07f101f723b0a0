//! One SQOS record through every face that shows a message: the `dissect` summary line, the
//! `-V` tree, the `-x` hex dumps, JSON, the flat columns and CSV cells of `export` and `-T
//! fields`, the finding rows. The record is built from the input (its header fields, a file
//! name, the SQOS buffer decoded as the pipeline decodes it), so every field value and every
//! decode outcome reaches the faces — at the speed of one record, where the `pipeline` target
//! pays a whole capture for each record it renders.
//!
//! Input: a flags byte, 40 bytes of header fields, a file name (length byte, then UTF-8, lossy),
//! a split byte, then the SQOS buffer. A response takes `buffer[..split]` as its matched
//! request, for the cross-checks.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use sqos::capture::{FrameCopy, Timestamp};
use sqos::net::ConnId;
use sqos::output::{columns, csv, json, text};
use sqos::pipeline::{decode_request, decode_response, Direction, FileId, SqosBody, SqosRecord};

/// Takes `n` bytes from the front of `rest` (fewer at its end).
fn take<'a>(rest: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (head, tail) = rest.split_at(n.min(rest.len()));
    *rest = tail;
    head
}

fn int(rest: &mut &[u8], n: usize) -> u64 {
    take(rest, n)
        .iter()
        .rev()
        .fold(0u64, |v, b| v << 8 | u64::from(*b))
}

fn record(data: &[u8]) -> SqosRecord {
    let mut rest = data;
    let flags = int(&mut rest, 1);
    let bit = |n: u32| flags & (1 << n) != 0;
    let msg_id = int(&mut rest, 8);
    let session_id = int(&mut rest, 8);
    let ts = Timestamp(int(&mut rest, 8) as i64);
    let word = int(&mut rest, 8);
    let status = int(&mut rest, 4) as u32;
    let max_output = int(&mut rest, 4) as u32;
    let name_len = int(&mut rest, 1) as usize;
    let name = String::from_utf8_lossy(take(&mut rest, name_len)).into_owned();
    let split = int(&mut rest, 1) as usize;
    let buffer = rest.to_vec();
    let direction = if bit(0) {
        Direction::Response
    } else {
        Direction::Request
    };
    let body = match direction {
        _ if bit(7) => SqosBody::NoBuffer,
        Direction::Request => SqosBody::Request(decode_request(&buffer, max_output)),
        Direction::Response => {
            let (req, resp) = buffer.split_at(split.min(buffer.len()));
            let request = decode_request(req, max_output).message;
            SqosBody::Response(decode_response(resp, request.as_ref()))
        }
    };
    let frame = word >> 32;
    SqosRecord {
        frame,
        ts,
        conn: ConnId(word as u32 & 0xff),
        src: "10.0.0.1:50000".parse().expect("address"),
        dst: "[2001:db8::2]:445".parse().expect("address"),
        direction,
        msg_id,
        session_id,
        replay: bit(1),
        channel_sequence: bit(2).then_some(word as u16),
        tree_id: (!bit(3)).then_some(word as u32),
        async_id: bit(3).then_some(msg_id ^ session_id),
        file_id: bit(4).then_some(FileId {
            persistent: msg_id,
            volatile: session_id,
        }),
        file_name: bit(4).then_some(name),
        nt_status: (direction == Direction::Response).then_some(status),
        interim: bit(5),
        request_frame: bit(6).then_some(frame.saturating_sub(1)),
        response_frame: bit(6).then_some(frame + 1),
        response_time: bit(6).then_some(f64::from(status) / 1e6),
        max_output_response: (direction == Direction::Request).then_some(max_output),
        buffer_truncated: bit(2) && bit(5),
        first_frame: bit(6).then_some(frame.saturating_sub(2)),
        frame_copy: bit(6).then(|| {
            Arc::new(FrameCopy {
                number: frame,
                ts,
                interface: 0,
                link_type: 1,
                orig_len: buffer.len() as u32 + 128,
                data: buffer.clone(),
            })
        }),
        buffer,
        body,
    }
}

fuzz_target!(|data: &[u8]| {
    let rec = record(data);
    let first = Timestamp(0);
    let mut shown = text::summary_line(&rec, first).len();
    let tree = text::detail_tree(&rec, first);
    // A name from the wire never starts a line of its own, nor puts a control on one.
    for line in tree.lines() {
        assert!(!line.chars().any(char::is_control), "{line:?}");
    }
    shown += tree.len();
    shown += text::hex_dump(&rec.buffer).len();
    if let Some(f) = &rec.frame_copy {
        shown += text::frame_hex(f, rec.first_frame).len();
    }
    // The record written straight is the Value written: the keys in their order, whatever
    // the record holds.
    let value = json::record_json(&rec).to_string();
    let straight = serde_json::to_string(&json::RecordJson(&rec)).expect("a record writes");
    assert_eq!(straight, value);
    shown += value.len();
    let flat = columns::message_flat(&rec);
    shown += flat
        .values()
        .map(|v| csv::cell(Some(v)).len())
        .sum::<usize>();
    let findings = match &rec.body {
        SqosBody::Request(d) => &d.findings[..],
        SqosBody::Response(d) => &d.findings[..],
        SqosBody::NoBuffer => &[],
    };
    for f in findings {
        shown += columns::message_finding_flat(&rec, f).len();
    }
    assert!(shown > 0);
});
