//! tshark-like text: one summary line per SQOS message, the `-V` field tree, the `-x` hex dump.

use std::fmt::Write as _;

use crate::capture::{FrameCopy, Timestamp};
use crate::pipeline::{Direction, SqosBody, SqosRecord};
use crate::smb2::NtStatus;
use crate::sqos::{
    Dialect, Field, FieldValue, Finding, Options, ProtocolVersion, Request, Response,
};

use super::escape;
use super::json::file_id_guid;

/// Capture-relative time, as tshark's second column.
pub fn rel_time(ts: Timestamp, first: Timestamp) -> f64 {
    ts.secs_since(first)
}

fn short_guid(u: &uuid::Uuid) -> String {
    let s = u.to_string();
    s.get(..8).map(str::to_string).unwrap_or(s)
}

fn dialect_label(v: ProtocolVersion) -> String {
    match v.dialect() {
        Some(Dialect::V1_0) => "1.0".into(),
        Some(Dialect::V1_1) => "1.1".into(),
        None => format!("?0x{:04x}", v.0),
    }
}

fn request_summary(r: &Request) -> String {
    let mut s = format!("v{} {}", dialect_label(r.protocol_version), {
        let names = r.options.names();
        if names.is_empty() {
            format!("options=0x{:x}", r.options.bits())
        } else {
            names.join("|")
        }
    });
    let _ = write!(s, " flow={}", short_guid(&r.logical_flow_id));
    if r.options.contains(Options::SET_POLICY) || r.options.contains(Options::PROBE_POLICY) {
        if !r.policy_id.is_nil() {
            let _ = write!(s, " policy={}", short_guid(&r.policy_id));
        }
        let _ = write!(s, " limit={} resv={}", r.limit, r.reservation);
        if let Some(v) = r.v1_1 {
            let _ = write!(s, " bwlimit={}KB/s", v.bandwidth_limit);
        }
        if let Some(n) = &r.initiator_name {
            let _ = write!(s, " name=\"{}\"", escape::text(n));
        }
        if let Some(n) = &r.initiator_node_name {
            let _ = write!(s, " node=\"{}\"", escape::text(n));
        }
    }
    if r.options.contains(Options::UPDATE_COUNTERS) {
        let _ = write!(
            s,
            " io+{} norm+{} latΣ+{:.1}ms",
            r.io_count_increment,
            r.normalized_io_count_increment,
            r.latency_increment as f64 / 10_000.0
        );
        if let Some(v) = r.v1_1 {
            let _ = write!(s, " kb+{}", v.kilobyte_count_increment);
        }
    }
    s
}

fn response_summary(r: &Response) -> String {
    let status = r
        .status
        .name()
        .map(|n| {
            n.trim_start_matches("StorageQoS")
                .trim_start_matches("Status")
                .to_string()
        })
        .unwrap_or_else(|| format!("0x{:x}", r.status.0));
    let mut s = format!(
        "v{} flow={} status={} max={} min={}",
        dialect_label(r.protocol_version),
        short_guid(&r.logical_flow_id),
        status,
        r.maximum_io_rate,
        r.minimum_io_rate
    );
    if let Some(bw) = r.maximum_bandwidth {
        let _ = write!(s, " maxbw={bw}KB/s");
    }
    let _ = write!(s, " base={} ttl={}ms", r.base_io_size, r.time_to_live);
    s
}

fn worst_findings(findings: &[Finding]) -> String {
    match findings.iter().map(|f| f.severity).max() {
        None => String::new(),
        Some(sev) => format!(
            " [{} finding{}, worst {}]",
            findings.len(),
            if findings.len() == 1 { "" } else { "s" },
            sev.as_str()
        ),
    }
}

/// One tshark-like summary line, time relative to `first`.
pub fn summary_line(rec: &SqosRecord, first: Timestamp) -> String {
    summary_line_at(rec, &format!("{:.6}", rel_time(rec.ts, first)))
}

/// One tshark-like summary line with its time column already formatted (`-t`).
pub fn summary_line_at(rec: &SqosRecord, time: &str) -> String {
    let mut s = format!(
        "{:>6} {:>11} {} → {} SQOS {} id={}",
        rec.frame,
        time,
        rec.src,
        rec.dst,
        match rec.direction {
            Direction::Request => "Request ",
            Direction::Response => "Response",
        },
        rec.msg_id
    );
    let findings: &[Finding] = match &rec.body {
        SqosBody::Request(d) => {
            match &d.message {
                Some(r) => {
                    let _ = write!(s, " {}", request_summary(r));
                }
                None => s.push_str(" (undecodable)"),
            }
            &d.findings
        }
        SqosBody::Response(d) => {
            if let Some(st) = rec.nt_status {
                let _ = write!(s, " {}", NtStatus(st).label());
            }
            match &d.message {
                Some(r) => {
                    let _ = write!(s, " {}", response_summary(r));
                }
                None => s.push_str(" (undecodable)"),
            }
            &d.findings
        }
        SqosBody::NoBuffer => {
            if let Some(st) = rec.nt_status {
                let _ = write!(s, " {}", NtStatus(st).label());
            }
            if rec.interim {
                s.push_str(" (interim)");
            }
            &[]
        }
    };
    s.push_str(&worst_findings(findings));
    match rec.direction {
        Direction::Request => {
            if let Some(f) = rec.response_frame {
                let _ = write!(s, " [resp in {f}");
                if let Some(t) = rec.response_time {
                    let _ = write!(s, ", {:.6}s", t);
                }
                s.push(']');
            } else {
                s.push_str(" [no response seen]");
            }
        }
        Direction::Response => {
            if let Some(f) = rec.request_frame {
                let _ = write!(s, " [req in {f}");
                if let Some(t) = rec.response_time {
                    let _ = write!(s, ", {:.6}s", t);
                }
                s.push(']');
            } else {
                s.push_str(" [request not seen]");
            }
        }
    }
    // One line, whatever a finding quotes.
    escape::text(&s).into_owned()
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
        "Frame {}: {:.6} s, conn {} {} → {}",
        rec.frame,
        rel_time(rec.ts, first),
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
                let _ = write!(out, ", time {:.6} s", t);
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
