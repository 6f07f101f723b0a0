//! `sqos stats`: the capture's statistics as text or JSON.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::budget::human_bytes;
use crate::pipeline::{ChannelEnd, Stats};

/// The JSON object of `sqos stats --format json` (keys fixed by the issue; more may be added).
pub fn stats_json(s: &Stats) -> Value {
    let mut v = serde_json::to_value(s).unwrap_or_else(|_| json!({}));
    if let Value::Object(m) = &mut v {
        m.entry("by_command").or_insert_with(|| json!({}));
    }
    v
}

pub fn stats_text(s: &Stats) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "frames            {}", s.frames);
    let _ = writeln!(out, "truncated frames  {}", s.truncated_frames);
    let _ = writeln!(out, "connections       {}", s.connections);
    sessions_text(s, &mut out);
    let _ = writeln!(out, "SMB2 messages     {}", s.smb2_messages);
    for (cmd, n) in s.by_command.by_name() {
        let _ = writeln!(out, "  {cmd:<16} {n}");
    }
    let closed = s.undecrypted();
    let _ = writeln!(
        out,
        "encrypted         {}{}",
        s.encrypted_messages,
        match (s.encrypted_messages, closed) {
            (0, _) => String::new(),
            (_, 0) => format!(
                " (all decrypted; {} READ/WRITE by header only)",
                s.decrypted_headers_only
            ),
            (_, c) if s.key_file_sessions == 0 =>
                format!(" ({c} not decrypted: no keys, see --keys)"),
            (_, c) => format!(
                " ({} decrypted, {c} not: no working key)",
                s.decrypted_messages
            ),
        }
    );
    let _ = writeln!(
        out,
        "compressed        {}{}",
        s.compressed_messages,
        match (s.compressed_messages, s.undecompressed_messages) {
            (0, _) => String::new(),
            (_, 0) => format!(" (all decompressed: {})", algorithm_list(s)),
            (_, u) => format!(
                " ({} decompressed: {}; {u} not)",
                s.decompressed_messages,
                algorithm_list(s)
            ),
        }
    );
    let _ = writeln!(out, "SMB1 (skipped)    {}", s.smb1_messages);
    let _ = writeln!(out, "gaps              {}", s.gaps);
    let _ = writeln!(out, "resyncs           {}", s.resyncs);
    let _ = writeln!(out, "undecoded frames  {}", s.undecoded_frames);
    let _ = writeln!(out, "SQOS messages     {}", s.sqos_messages);
    let _ = writeln!(out, "pending evicted   {}", s.pending_evicted);
    let _ = writeln!(out, "opens evicted     {}", s.opens_evicted);
    let _ = writeln!(out, "framer bytes shed {}", s.framer_bytes_shed);
    if !s.memory.is_empty() {
        let _ = writeln!(out, "memory            share        peak  dropped");
        for m in &s.memory {
            let _ = writeln!(
                out,
                "  {:<15} {:>10} {:>10}  {}",
                m.kind.as_str(),
                human_bytes(m.limit_bytes),
                human_bytes(m.peak_bytes),
                m.dropped
            );
        }
        for m in &s.memory {
            if let Some(line) = m.summary() {
                let _ = writeln!(out, "note: {line}");
            }
        }
    }
    let _ = writeln!(out, "unanswered        {}", s.unanswered_requests);
    for (cmd, n) in s.unanswered_by_command.by_name() {
        let _ = writeln!(out, "  {cmd:<16} {n}");
    }
    srt_text(s, &mut out);
    super::escape::lines(&out).into_owned()
}

/// The service response time table, laid out like tshark's `-z smb2,srt`.
fn srt_text(s: &Stats, out: &mut String) {
    if s.srt.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nSMB2 service response time (seconds; final responses, as tshark -z smb2,srt)"
    );
    let _ = writeln!(
        out,
        "  {:<16} {:>7} {:>10} {:>10} {:>10} {:>11}",
        "command", "calls", "min", "max", "avg", "sum"
    );
    for (cmd, t) in s.srt.by_code() {
        // As a string: `Command`'s Display writes the name without padding.
        let cmd = cmd.to_string();
        // Rounded as tshark rounds them, so that the two tables agree digit for digit.
        let [min, max, avg, sum] = t.micros().map(secs6);
        let _ = writeln!(
            out,
            "  {cmd:<16} {:>7} {min:>10} {max:>10} {avg:>10} {sum:>11}",
            t.calls
        );
    }
}

/// Whole microseconds as seconds with six decimals.
fn secs6(us: i64) -> String {
    let sign = if us < 0 { "-" } else { "" };
    let us = us.unsigned_abs();
    format!("{sign}{}.{:06}", us / 1_000_000, us % 1_000_000)
}

/// Sessions, and the channels of those that used several connections (SMB3 multichannel).
fn sessions_text(s: &Stats, out: &mut String) {
    let total = s.sessions.len() as u64 + s.sessions_unlisted;
    let multi: Vec<_> = s.sessions.iter().filter(|x| x.channels_total > 1).collect();
    let _ = writeln!(
        out,
        "sessions          {total}{}",
        if multi.is_empty() {
            String::new()
        } else {
            format!(" ({} over several channels)", multi.len())
        }
    );
    for x in multi {
        let _ = writeln!(
            out,
            "  0x{:016x}  {} channels",
            x.session_id, x.channels_total
        );
        for c in &x.channels {
            let mut line = format!(
                "    connection {:<4} {} → {}  {:<7}  frame {}",
                c.connection,
                c.client,
                c.server,
                c.joined.as_str(),
                c.frame
            );
            if let (Some(by), Some(f)) = (c.ended_by, c.ended_frame) {
                if by != ChannelEnd::CaptureEnd {
                    let _ = write!(line, "  ended ({}) at frame {f}", by.as_str());
                }
            }
            let _ = writeln!(out, "{line}");
        }
        let more = x.channels_total.saturating_sub(x.channels.len() as u64);
        if more > 0 {
            let _ = writeln!(out, "    ({more} more channels not listed)");
        }
    }
}

/// "LZ77 12, Pattern_V1 3" (messages per algorithm; a chained message counts once per
/// algorithm it uses).
fn algorithm_list(s: &Stats) -> String {
    let list: Vec<String> = s
        .compressed_by_algorithm
        .iter()
        .map(|(a, n)| format!("{a} {n}"))
        .collect();
    if list.is_empty() {
        "none".to_string()
    } else {
        list.join(", ")
    }
}
