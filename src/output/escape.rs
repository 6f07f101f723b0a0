//! Strings from the wire (InitiatorName, InitiatorNodeName, file names, anything a finding or
//! note quotes) made safe for each face. One function per kind of output, used by every face:
//!
//! - [`text`]: terminals and text files (dissect, `-V`, notes, flows, stats, check reports,
//!   the TUI, plot labels): control characters (C0, DEL, C1), bidi overrides and isolates, and
//!   line / paragraph separators become visible escapes — `\r`, `\n`, `\t`, `\x1b`, `\u202e` —
//!   so a name cannot set the terminal's title, clear the screen, forge an output line or
//!   reorder what is shown. Everything else, backslashes included (Windows paths), is kept, so
//!   escaping twice changes nothing.
//! - [`lines`]: the same for a text of several lines, keeping its line breaks.
//! - [`csv_cell`]: a text cell that starts with `=`, `+`, `-`, `@` gets a leading `'`, so a
//!   spreadsheet shows it instead of running it as a formula (numbers are not text cells).
//! - JSON output is exact: serde_json escapes what JSON must, and nothing else is changed.
//! - XML (SVG plots, JUnit reports) takes [`text`] first; the XML writer then escapes markup.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as it is.
fn is_hostile(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Bidi embeddings, overrides, isolates and marks; line and paragraph separators.
            '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{061C}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// How many bytes `s` starts with that are printable ASCII (0x20..=0x7e), which nothing needs
/// escaping: eight bytes at a time, because every line of `-V`, every dissect line and every
/// note is checked (and a character-wise check costs the fuzz targets more than everything
/// they test).
fn printable_ascii_len(s: &str) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let bytes = s.as_bytes();
    let mut words = bytes.chunks_exact(8);
    let mut len = 0;
    for w in &mut words {
        let x = u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        // A byte below 0x20 (its high bit is set by the borrow), or above 0x7e (0x7f plus one
        // carries into the high bit, and a byte of 0x80 or more has it already).
        let below = x.wrapping_sub(ONES * 0x20) & !x;
        let above = x.wrapping_add(ONES) | x;
        if (below | above) & HIGHS != 0 {
            break;
        }
        len += 8;
    }
    // The word that failed (if one did) and the tail, byte by byte.
    len + bytes
        .iter()
        .skip(len)
        .take_while(|b| (0x20..0x7f).contains(*b))
        .count()
}

/// Whether `s` holds a character [`text`] escapes. Runs of printable ASCII are skipped by
/// [`printable_ascii_len`]; [`is_hostile`] judges each character between them, so a line that is
/// ASCII but for its `→` is not checked character by character.
fn needs_escape(s: &str) -> bool {
    let mut rest = s;
    loop {
        rest = rest.get(printable_ascii_len(rest)..).unwrap_or("");
        let mut chars = rest.chars();
        match chars.next() {
            None => return false,
            Some(c) if is_hostile(c) => return true,
            Some(_) => rest = chars.as_str(),
        }
    }
}

/// `s` with every hostile character escaped (borrowed when there is none).
pub fn text(s: &str) -> Cow<'_, str> {
    if !needs_escape(s) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !is_hostile(c) {
            out.push(c);
            continue;
        }
        let _ = match c {
            '\n' => write!(out, "\\n"),
            '\r' => write!(out, "\\r"),
            '\t' => write!(out, "\\t"),
            c if (c as u32) < 0x80 => write!(out, "\\x{:02x}", c as u32),
            c => write!(out, "\\u{:04x}", c as u32),
        };
    }
    Cow::Owned(out)
}

/// `out[from..]` escaped as [`text`] escapes it, in place: for a line written into a buffer
/// that is reused line after line.
pub fn text_from(out: &mut String, from: usize) {
    let Some(tail) = out.get(from..) else {
        return;
    };
    if let Cow::Owned(escaped) = text(tail) {
        out.truncate(from);
        out.push_str(&escaped);
    }
}

/// A text of several lines, each escaped, its line breaks kept.
pub fn lines(s: &str) -> Cow<'_, str> {
    // Line by line, so a line with a non-ASCII character (the `→` of a dissect line) leaves the
    // fast check for itself only.
    if !s.split('\n').any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&text(line));
    }
    Cow::Owned(out)
}

/// A CSV text cell: escaped as [`text`] (so tabs and carriage returns are already `\t`, `\r`),
/// and neutralised for spreadsheets when it starts like a formula (`=`, `+`, `-`, `@`): a leading
/// `'` makes it text.
pub fn csv_cell(s: &str) -> Cow<'_, str> {
    let t = text(s);
    match t.chars().next() {
        Some('=' | '+' | '-' | '@') => Cow::Owned(format!("'{t}")),
        _ => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_become_visible() {
        assert_eq!(text("vm01"), "vm01");
        assert!(matches!(text("\\\\sofs\\vms\\a.vhdx"), Cow::Borrowed(_)));
        assert_eq!(
            text("a\u{1b}]0;pwned\u{7}b\u{1b}[2J"),
            "a\\x1b]0;pwned\\x07b\\x1b[2J"
        );
        assert_eq!(text("x\r\nFAKE line"), "x\\r\\nFAKE line");
        assert_eq!(text("evil\u{202e}txt.exe"), "evil\\u202etxt.exe");
        assert_eq!(text("\u{85}\u{2028}\u{7f}\t"), "\\u0085\\u2028\\x7f\\t");
        // Escaping is idempotent: an escaped text has nothing left to escape.
        let once = text("\u{1b}[31mred\u{202e}").into_owned();
        assert_eq!(text(&once), once);
    }

    proptest::proptest! {
        /// The eight-bytes-at-a-time check finds the first byte that is not printable ASCII,
        /// at every alignment and length (bytes around the bounds 0x1f/0x20 and 0x7e/0x7f most).
        #[test]
        fn printable_ascii_is_exact(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![0x1eu8..0x22, 0x7cu8..0x82, proptest::num::u8::ANY],
                0..40,
            ),
            skip in 0usize..8,
        ) {
            let s = String::from_utf8_lossy(&bytes);
            let s = s.get(skip.min(s.len())..).unwrap_or("");
            let expected = s.bytes().take_while(|b| (0x20..0x7f).contains(b)).count();
            proptest::prop_assert_eq!(printable_ascii_len(s), expected);
            let hostile = s.chars().any(is_hostile);
            proptest::prop_assert_eq!(matches!(text(s), Cow::Owned(_)), hostile);
        }
    }

    /// The run-skipping check agrees with judging every character, whatever surrounds the
    /// character: each edge character alone, then at every offset of an ASCII text (inside and
    /// across the eight-byte words) and next to other non-ASCII characters.
    #[test]
    fn needs_escape_agrees_with_every_character() {
        let edges = [
            "",
            " ",
            "~",
            "\u{0}",
            "\u{1f}",
            "\u{7f}",
            "\u{80}",
            "\u{85}",
            "\u{9f}",
            "\u{a0}",
            "\t",
            "\n",
            "\r",
            "\u{1b}",
            "\\",
            "\"",
            "→",
            "Σ",
            "é",
            "\u{200d}",
            "\u{200e}",
            "\u{200f}",
            "\u{202a}",
            "\u{202e}",
            "\u{202f}",
            "\u{2066}",
            "\u{2069}",
            "\u{206a}",
            "\u{061c}",
            "\u{2028}",
            "\u{2029}",
            "\u{feff}",
            "\u{10ffff}",
            "😀",
        ];
        let slow = |s: &str| s.chars().any(is_hostile);
        for e in edges {
            assert_eq!(needs_escape(e), slow(e), "{e:?}");
            for pad in 0..20 {
                let ascii = "abcdefghijklmnopqrstu".get(..pad).unwrap_or("");
                for s in [
                    format!("{ascii}{e}"),
                    format!("{e}{ascii}"),
                    format!("{ascii}{e}{ascii}"),
                    format!("{ascii}→{e}Σ{ascii}"),
                    format!("{ascii}{e}→{ascii}"),
                ] {
                    assert_eq!(needs_escape(&s), slow(&s), "{s:?}");
                }
            }
        }
    }

    #[test]
    fn text_from_escapes_the_tail_only() {
        let mut out = String::from("kept\u{1b} ");
        text_from(&mut out, 5);
        assert_eq!(out, "kept\u{1b} ");
        out.push_str("a\u{1b}[2J → b");
        text_from(&mut out, 6);
        assert_eq!(out, "kept\u{1b} a\\x1b[2J → b");
        // Past the end, or inside a character: nothing to escape there, left as it is.
        text_from(&mut out, 100);
        let arrow = out.find('→').unwrap_or(0);
        text_from(&mut out, arrow + 1);
        assert_eq!(out, "kept\u{1b} a\\x1b[2J → b");
    }

    #[test]
    fn lines_keep_their_breaks() {
        assert_eq!(lines("a\u{1b}\nb\r\n"), "a\\x1b\nb\\r\n");
        assert!(matches!(lines("a\nb\n"), Cow::Borrowed(_)));
        assert!(matches!(lines("a → b\nc\n"), Cow::Borrowed(_)));
        assert_eq!(lines("a → b\nc\u{202e}\n"), "a → b\nc\\u202e\n");
    }

    #[test]
    fn csv_formulas_are_neutralised() {
        assert_eq!(
            csv_cell("=HYPERLINK(\"http://x\")"),
            "'=HYPERLINK(\"http://x\")"
        );
        assert_eq!(csv_cell("+1"), "'+1");
        assert_eq!(csv_cell("-2+3"), "'-2+3");
        assert_eq!(csv_cell("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_cell("\tx"), "\\tx");
        assert_eq!(csv_cell("vm01"), "vm01");
        assert_eq!(csv_cell(""), "");
    }
}
