//! tshark-like text: one summary line per SQOS message, the `-V` field tree, the `-x` hex dump.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::net::SocketAddr;

use crate::capture::{FrameCopy, Timestamp};
use crate::pipeline::{Direction, SqosBody, SqosRecord};
use crate::smb2::NtStatus;
use crate::sqos::{Field, FieldValue, Finding, Options, ProtocolVersion, Request, Response};

use super::escape;
use super::json::file_id_guid;

/// Capture-relative time, as tshark's second column.
pub fn rel_time(ts: Timestamp, first: Timestamp) -> f64 {
    ts.secs_since(first)
}

/// The first 8 hex digits of a GUID, written from a stack buffer (no `to_string` per line).
fn push_short_guid(out: &mut String, u: &uuid::Uuid) {
    let mut buf = uuid::Uuid::encode_buffer();
    let s = u.hyphenated().encode_lower(&mut buf);
    out.push_str(s.get(..8).unwrap_or(s));
}

fn dialect_label(v: ProtocolVersion) -> Cow<'static, str> {
    match v.dialect() {
        Some(d) => Cow::Borrowed(d.as_str()),
        None => Cow::Owned(format!("?0x{:04x}", v.0)),
    }
}

/// `addr` as its `Display` writes it. IPv4 is written by hand: the generic formatting machinery
/// (a `write!` for the address, one per octet, one for the port) cost a thousand instructions
/// an address, two addresses a dissect line. IPv6 keeps `Display` (zero runs, embedded IPv4).
fn push_addr(out: &mut String, addr: &SocketAddr) {
    match addr {
        SocketAddr::V4(a) => {
            for (i, octet) in a.ip().octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                push_decimal(out, u64::from(octet), 0);
            }
            out.push(':');
            push_decimal(out, u64::from(a.port()), 0);
        }
        SocketAddr::V6(_) => {
            let _ = write!(out, "{addr}");
        }
    }
}

/// `n` in decimal right-aligned in `width` characters, as `{n:>width}` writes it: the numbers
/// of every dissect line, without a trip through the formatting machinery for each.
fn push_decimal(out: &mut String, n: u64, width: usize) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(n);
    // Digits are ASCII: their length is their width in characters.
    for _ in digits.len()..width {
        out.push(' ');
    }
    out.push_str(digits);
}

/// `label` then `n` in decimal, as `write!(out, "{label}{n}")` writes them.
fn push_num(out: &mut String, label: &str, n: u64) {
    out.push_str(label);
    push_decimal(out, n, 0);
}

/// `s` right-aligned in `width` characters, as `{s:>width}` pads it.
fn push_right(out: &mut String, s: &str, width: usize) {
    for _ in s.chars().count()..width {
        out.push(' ');
    }
    out.push_str(s);
}

fn push_request_summary(s: &mut String, r: &Request) {
    s.push('v');
    s.push_str(&dialect_label(r.protocol_version));
    s.push(' ');
    let names = r.options.names();
    if names.is_empty() {
        let _ = write!(s, "options=0x{:x}", r.options.bits());
    } else {
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                s.push('|');
            }
            s.push_str(name);
        }
    }
    s.push_str(" flow=");
    push_short_guid(s, &r.logical_flow_id);
    if r.options.contains(Options::SET_POLICY) || r.options.contains(Options::PROBE_POLICY) {
        if !r.policy_id.is_nil() {
            s.push_str(" policy=");
            push_short_guid(s, &r.policy_id);
        }
        push_num(s, " limit=", r.limit);
        push_num(s, " resv=", r.reservation);
        if let Some(v) = r.v1_1 {
            push_num(s, " bwlimit=", v.bandwidth_limit);
            s.push_str("KB/s");
        }
        if let Some(n) = &r.initiator_name {
            s.push_str(" name=\"");
            s.push_str(&escape::text(n));
            s.push('"');
        }
        if let Some(n) = &r.initiator_node_name {
            s.push_str(" node=\"");
            s.push_str(&escape::text(n));
            s.push('"');
        }
    }
    if r.options.contains(Options::UPDATE_COUNTERS) {
        push_num(s, " io+", r.io_count_increment);
        push_num(s, " norm+", r.normalized_io_count_increment);
        let _ = write!(s, " latΣ+{:.1}ms", r.latency_increment as f64 / 10_000.0);
        if let Some(v) = r.v1_1 {
            push_num(s, " kb+", v.kilobyte_count_increment);
        }
    }
}

fn push_response_summary(s: &mut String, r: &Response) {
    s.push('v');
    s.push_str(&dialect_label(r.protocol_version));
    s.push_str(" flow=");
    push_short_guid(s, &r.logical_flow_id);
    s.push_str(" status=");
    match r.status.name() {
        Some(n) => s.push_str(trim_prefix(trim_prefix(n, "StorageQoS"), "Status")),
        None => {
            let _ = write!(s, "0x{:x}", r.status.0);
        }
    }
    push_num(s, " max=", r.maximum_io_rate);
    push_num(s, " min=", r.minimum_io_rate);
    if let Some(bw) = r.maximum_bandwidth {
        push_num(s, " maxbw=", bw);
        s.push_str("KB/s");
    }
    push_num(s, " base=", u64::from(r.base_io_size));
    push_num(s, " ttl=", u64::from(r.time_to_live));
    s.push_str("ms");
}

/// `s` without the copies of `prefix` it starts with, as `s.trim_start_matches(prefix)`: that
/// sets up a substring searcher for each call, five hundred instructions a response line.
fn trim_prefix<'a>(mut s: &'a str, prefix: &str) -> &'a str {
    while let Some(rest) = s.strip_prefix(prefix).filter(|_| !prefix.is_empty()) {
        s = rest;
    }
    s
}

fn push_worst_findings(s: &mut String, findings: &[Finding]) {
    if let Some(sev) = findings.iter().map(|f| f.severity).max() {
        let _ = write!(
            s,
            " [{} finding{}, worst {}]",
            findings.len(),
            if findings.len() == 1 { "" } else { "s" },
            sev.as_str()
        );
    }
}

/// One tshark-like summary line, time relative to `first`.
pub fn summary_line(rec: &SqosRecord, first: Timestamp) -> String {
    summary_line_at(rec, &super::time::secs6(rel_time(rec.ts, first)))
}

/// One tshark-like summary line with its time column already formatted (`-t`).
pub fn summary_line_at(rec: &SqosRecord, time: &str) -> String {
    let mut s = String::new();
    push_summary_line(&mut s, rec, time);
    s
}

/// [`summary_line_at`] appended to `out`: `sqos dissect` writes its lines into one buffer it
/// reuses, instead of a string (and its growth) per line.
pub fn push_summary_line(s: &mut String, rec: &SqosRecord, time: &str) {
    let start = s.len();
    push_decimal(s, rec.frame, 6);
    s.push(' ');
    push_right(s, time, 11);
    s.push(' ');
    push_addr(s, &rec.src);
    s.push_str(" → ");
    push_addr(s, &rec.dst);
    s.push_str(match rec.direction {
        Direction::Request => " SQOS Request  id=",
        Direction::Response => " SQOS Response id=",
    });
    push_decimal(s, rec.msg_id, 0);
    let findings: &[Finding] = match &rec.body {
        SqosBody::Request(d) => {
            match &d.message {
                Some(r) => {
                    s.push(' ');
                    push_request_summary(s, r);
                }
                None => s.push_str(" (undecodable)"),
            }
            &d.findings
        }
        SqosBody::Response(d) => {
            if let Some(st) = rec.nt_status {
                s.push(' ');
                s.push_str(&NtStatus(st).label());
            }
            match &d.message {
                Some(r) => {
                    s.push(' ');
                    push_response_summary(s, r);
                }
                None => s.push_str(" (undecodable)"),
            }
            &d.findings
        }
        SqosBody::NoBuffer => {
            if let Some(st) = rec.nt_status {
                s.push(' ');
                s.push_str(&NtStatus(st).label());
            }
            if rec.interim {
                s.push_str(" (interim)");
            }
            &[]
        }
    };
    push_worst_findings(s, findings);
    match rec.direction {
        Direction::Request => {
            if let Some(f) = rec.response_frame {
                push_num(s, " [resp in ", f);
                if let Some(t) = rec.response_time {
                    s.push_str(", ");
                    super::time::push_secs6(s, t);
                    s.push('s');
                }
                s.push(']');
            } else {
                s.push_str(" [no response seen]");
            }
        }
        Direction::Response => {
            if let Some(f) = rec.request_frame {
                push_num(s, " [req in ", f);
                if let Some(t) = rec.response_time {
                    s.push_str(", ");
                    super::time::push_secs6(s, t);
                    s.push('s');
                }
                s.push(']');
            } else {
                s.push_str(" [request not seen]");
            }
        }
    }
    // One line, whatever a finding quotes.
    escape::text_from(s, start);
}

fn field_value(v: &FieldValue) -> String {
    match v {
        FieldValue::U16(x) => format!("{x} (0x{x:04x})"),
        FieldValue::U32(x) => format!("{x} (0x{x:08x})"),
        FieldValue::U64(x) => format!("{x} (0x{x:016x})"),
        FieldValue::Guid(g) => g.to_string(),
        FieldValue::Version(v) => format!("0x{:04x} ({})", v.0, dialect_label(*v)),
        FieldValue::Options(o) => {
            let names = o.names();
            let mut s = format!("0x{:08x}", o.bits());
            if !names.is_empty() {
                let _ = write!(s, " ({})", names.join(" | "));
            }
            if o.unknown_bits() != 0 {
                let _ = write!(s, " [unknown bits 0x{:x}]", o.unknown_bits());
            }
            s
        }
        FieldValue::Status(st) => match st.name() {
            Some(n) => format!("0x{:08x} ({n})", st.0),
            None => format!("0x{:08x} (unknown)", st.0),
        },
        FieldValue::Text(t) => format!("\"{}\"", escape::text(t)),
        FieldValue::Bytes => "…".into(),
    }
}

fn tree_fields(out: &mut String, title: &str, fields: &[Field], findings: &[Finding]) {
    let _ = writeln!(out, "{title}");
    for f in fields {
        let _ = writeln!(
            out,
            "    [0x{:04x}+{:<3}] {}: {}",
            f.offset,
            f.len,
            f.name,
            field_value(&f.value)
        );
        if let FieldValue::Options(o) = &f.value {
            for (flag, name) in Options::FLAGS {
                let bit = flag.bits();
                let set = o.contains(flag);
                let _ = writeln!(
                    out,
                    "        {} = {}: {}",
                    bit_picture(bit, set),
                    name,
                    if set { "Set" } else { "Not set" }
                );
            }
        }
    }
    if !findings.is_empty() {
        let _ = writeln!(out, "    Findings:");
        for f in findings {
            let _ = writeln!(
                out,
                "        [{}] {}: {}",
                f.severity.as_str(),
                f.code.as_str(),
                f.message
            );
        }
    }
}

/// `.... ...1` style picture of one bit of a 32-bit field, like tshark's flag lines.
fn bit_picture(bit: u32, set: bool) -> String {
    let mut s = String::with_capacity(40);
    for i in (0..32).rev() {
        let c = if 1u32 << i == bit {
            if set {
                '1'
            } else {
                '0'
            }
        } else {
            '.'
        };
        s.push(c);
        if i % 4 == 0 && i != 0 {
            s.push(' ');
        }
    }
    s
}

/// The `-V` tree of one message.
pub fn detail_tree(rec: &SqosRecord, first: Timestamp) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Frame {}: {} s, conn {} {} → {}",
        rec.frame,
        super::time::secs6(rel_time(rec.ts, first)),
        rec.conn.0,
        rec.src,
        rec.dst
    );
    let kind = match rec.direction {
        Direction::Request => "Request",
        Direction::Response => "Response",
    };
    let _ = write!(
        out,
        "SMB2 IOCTL {kind} FSCTL_STORAGE_QOS_CONTROL, MessageId {}, SessionId 0x{:016x}",
        rec.msg_id, rec.session_id
    );
    if let Some(t) = rec.tree_id {
        let _ = write!(out, ", TreeId 0x{t:08x}");
    }
    if let Some(a) = rec.async_id {
        let _ = write!(out, ", AsyncId 0x{a:x}");
    }
    out.push('\n');
    if let Some(f) = rec.file_id {
        let _ = write!(out, "    FileId: {}", file_id_guid(f));
        if let Some(n) = &rec.file_name {
            let _ = write!(out, " ({})", escape::text(n));
        }
        out.push('\n');
    }
    if let Some(st) = rec.nt_status {
        let _ = writeln!(
            out,
            "    NT Status: {}{}",
            NtStatus(st).label(),
            if rec.interim { " (interim)" } else { "" }
        );
    }
    if let Some(m) = rec.max_output_response {
        let _ = writeln!(out, "    MaxOutputResponse: {m}");
    }
    match &rec.body {
        SqosBody::Request(d) => {
            let title = format!(
                "STORAGE_QOS_CONTROL_REQUEST ({} bytes{})",
                rec.buffer.len(),
                if rec.buffer_truncated {
                    ", truncated in capture"
                } else {
                    ""
                }
            );
            tree_fields(&mut out, &title, &d.fields, &d.findings);
        }
        SqosBody::Response(d) => {
            let title = format!(
                "STORAGE_QOS_CONTROL_RESPONSE ({} bytes{})",
                rec.buffer.len(),
                if rec.buffer_truncated {
                    ", truncated in capture"
                } else {
                    ""
                }
            );
            tree_fields(&mut out, &title, &d.fields, &d.findings);
        }
        SqosBody::NoBuffer => {
            let _ = writeln!(out, "    (no STORAGE_QOS_CONTROL_RESPONSE buffer)");
        }
    }
    match (rec.direction, rec.request_frame, rec.response_frame) {
        (Direction::Request, _, Some(f)) => {
            let _ = writeln!(out, "    [Response in frame {f}]");
        }
        (Direction::Response, Some(f), _) => {
            let _ = write!(out, "    [Request in frame {f}");
            if let Some(t) = rec.response_time {
                let _ = write!(out, ", time {} s", super::time::secs6(t));
            }
            out.push_str("]\n");
        }
        _ => {}
    }
    escape::lines(&out).into_owned()
}

/// `-x`: the heading and hex of the frame that completed a message.
pub fn frame_hex(f: &FrameCopy, first_frame: Option<u64>) -> String {
    let mut s = format!("Frame {}: {} bytes", f.number, f.data.len());
    if (f.data.len() as u64) < u64::from(f.orig_len) {
        let _ = write!(
            s,
            " of {} (the capture's snaplen cut the frame)",
            f.orig_len
        );
    }
    if let Some(start) = first_frame.filter(|&n| n < f.number) {
        let _ = write!(s, "; the message began in frame {start}");
    }
    s.push_str(":\n");
    s.push_str(&hex_dump(&f.data));
    s
}

/// `-x`: hex and ASCII of the SQOS buffer, 16 bytes a line, offsets from the buffer start.
pub fn hex_dump(buf: &[u8]) -> String {
    // Digits pushed from a table, not formatted: `-x` dumps whole frames, and `{:02x}` per
    // byte was most of the dump's time.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(buf.len().div_ceil(16) * 76);
    for (i, chunk) in buf.chunks(16).enumerate() {
        let _ = write!(out, "{:04x}  ", i * 16);
        for j in 0..16 {
            match chunk.get(j) {
                Some(&b) => {
                    out.push(char::from(DIGITS[usize::from(b >> 4)]));
                    out.push(char::from(DIGITS[usize::from(b & 0xf)]));
                    out.push(' ');
                }
                None => out.push_str("   "),
            }
            if j == 7 {
                out.push(' ');
            }
        }
        out.push(' ');
        for &b in chunk {
            out.push(if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            });
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_dump_lays_out_16_bytes_a_line() {
        let buf: Vec<u8> = (0u8..20).collect();
        let d = hex_dump(&buf);
        let lines: Vec<&str> = d.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            "0000  00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f  ................"
        );
        // 12 empty byte places, the gap after the 8th, the gap before the ASCII.
        assert_eq!(
            lines[1],
            format!("0010  10 11 12 13 {}  ....", " ".repeat(36))
        );
        assert_eq!(
            hex_dump(&[0xa5, 0xff, b'A']),
            format!("0000  a5 ff 41 {}  ..A\n", " ".repeat(39))
        );
    }

    /// The hand-written numbers, padding and addresses of a dissect line read as `Display` and
    /// `{:>width}` write them.
    #[test]
    fn pieces_read_as_display_writes_them() {
        for n in [0, 1, 9, 10, 99, 100, 65_535, 999_999, 1_000_000, u64::MAX] {
            for width in [0, 1, 6, 11, 25] {
                let mut s = String::from("x");
                push_decimal(&mut s, n, width);
                assert_eq!(s, format!("x{n:>width$}"));
            }
        }
        for t in ["", "0.000864", "12:00:00.123456", "→", "1234567890.123456"] {
            let mut s = String::new();
            push_right(&mut s, t, 11);
            assert_eq!(s, format!("{t:>11}"));
        }
        let addrs = [
            "0.0.0.0:0",
            "10.0.0.11:50113",
            "255.255.255.255:65535",
            "192.168.100.7:445",
            "[::1]:445",
            "[fe80::1%2]:139",
            "[::ffff:10.0.0.1]:445",
        ];
        for a in addrs {
            let Ok(addr) = a.parse::<SocketAddr>() else {
                panic!("{a} is an address");
            };
            let mut s = String::new();
            push_addr(&mut s, &addr);
            assert_eq!(s, addr.to_string());
        }
        for (n, prefix) in [("StatusStatusOk", "Status"), ("Ok", "Status"), ("x", "")] {
            assert_eq!(trim_prefix(n, prefix), n.trim_start_matches(prefix));
        }
    }

    #[test]
    fn bit_picture_marks_the_bit() {
        assert_eq!(
            bit_picture(0x10, true),
            ".... .... .... .... .... .... ...1 ...."
        );
        assert_eq!(
            bit_picture(0x01, false),
            ".... .... .... .... .... .... .... ...0"
        );
    }
}
