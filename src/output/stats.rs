//! `sqos stats`: the capture's statistics as text or JSON.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::pipeline::Stats;

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
    let _ = writeln!(out, "SMB2 messages     {}", s.smb2_messages);
    for (cmd, n) in &s.by_command {
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
    let _ = writeln!(out, "compressed        {}", s.compressed_messages);
    let _ = writeln!(out, "SMB1 (skipped)    {}", s.smb1_messages);
    let _ = writeln!(out, "gaps              {}", s.gaps);
    let _ = writeln!(out, "resyncs           {}", s.resyncs);
    let _ = writeln!(out, "SQOS messages     {}", s.sqos_messages);
    out
}
