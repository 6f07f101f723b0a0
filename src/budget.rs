//! One memory budget for a run (`--memory`, default 64 MiB), shared out to every table that
//! grows with the capture, and one way to say what a full table dropped.
//!
//! Each table belongs to a [`Kind`], which fixes its share of the budget (per mille) and the cost
//! of one entry: what the entry's structs, its hash-table slot and the allocator's overhead cost,
//! estimated on the safe side. Variable bytes (names, payloads, buffered segments) are charged on
//! top, so a one-byte out-of-order segment costs what it costs and a missing chunk is not free.
//! The shares add up to less than the whole budget: the rest is left for the program itself
//! (code, I/O buffers, what faces keep), so the process stays under `--memory`.
//!
//! How a table uses it (new tables too: sessions, channels, trees, keys…):
//! 1. Pick a [`Kind`] (or add one, with its share, entry cost and what a drop means), and keep a
//!    [`Share`] from [`Budget::share`] beside the table.
//! 2. When the table grows, [`Share::charge`] its entries and variable bytes; when it shrinks,
//!    [`Share::release`] them.
//! 3. Before growing, ask [`Share::fits`]; if it does not fit, make room (oldest or idlest first)
//!    or refuse the new entry, and count what went with [`Share::dropped`]. Never one note per
//!    victim: the drop is counted.
//! 4. Once, at the end, the owner hands [`Share::usage`] to the run's report (`Stats::memory`,
//!    `Analysis::memory`) and [`Share::summary`] as one note. Every face prints them.

use std::fmt;

use serde::Serialize;

/// The default budget: 64 MiB.
pub const DEFAULT_MEMORY: usize = 64 << 20;
/// The smallest budget accepted: below it the shares are too small to follow a single flow.
pub const MIN_MEMORY: usize = 4 << 20;

/// What a table holds, which sets its share of the budget and the cost of one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// TCP connections with their reassembly and SMB2 framing state.
    Connections,
    /// Out-of-order TCP segments (captured bytes and snaplen-cut chunks) waiting for a hole.
    Reassembly,
    /// Bytes of SMB2 messages in progress kept by the framers (SQOS IOCTLs, CREATE names).
    Framers,
    /// SMB2 requests waiting for their response (matching).
    Pending,
    /// Opens (SessionId, FileId → name) of the SMB2 layer.
    Opens,
    /// Records and notes queued behind SQOS requests waiting for their response.
    Queued,
    /// SMB2 sessions, channels, tree connects and their keys.
    Sessions,
    /// SQOS requests waiting for their response, in the analyzer.
    FlowRequests,
    /// Opens followed by the analyzer (association with a logical flow).
    FlowOpens,
    /// Channels (session × connection) followed by the analyzer, with the flows that used them.
    FlowChannels,
    /// Logical flows with their timelines, findings and time series.
    Flows,
}

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Connections,
        Kind::Reassembly,
        Kind::Framers,
        Kind::Pending,
        Kind::Opens,
        Kind::Queued,
        Kind::Sessions,
        Kind::FlowRequests,
        Kind::FlowOpens,
        Kind::FlowChannels,
        Kind::Flows,
    ];

    /// Share of the budget, per mille. The sum (see the test) leaves a quarter for the rest of
    /// the program.
    pub const fn permille(self) -> usize {
        match self {
            Kind::Connections => 150,
            Kind::Reassembly => 150,
            Kind::Framers => 60,
            Kind::Pending => 50,
            Kind::Opens => 40,
            Kind::Queued => 40,
            Kind::Sessions => 30,
            Kind::FlowRequests => 30,
            Kind::FlowOpens => 30,
            Kind::FlowChannels => 10,
            Kind::Flows => 160,
        }
    }

    /// Bytes one entry costs besides its variable bytes (structs, table slot, allocator).
    pub const fn entry_cost(self) -> usize {
        match self {
            // Reassembly's connection (two directions, two index entries) and the SMB2 layer's
            // (endpoints, two framers, each with its message walker: in progress, or kept for
            // the next message, ~780 bytes with its inline parts). A test in `pipeline` holds
            // it above the structs' sizes.
            Kind::Connections => 2048,
            // A B-tree entry, the chunk and its allocation header.
            Kind::Reassembly => 96,
            Kind::Framers => 0,
            Kind::Pending => 192,
            Kind::Opens => 128,
            // A queued record (SQOS records are boxed and charged their buffer on top).
            Kind::Queued => 192,
            Kind::Sessions => 256,
            Kind::FlowRequests => 512,
            Kind::FlowOpens => 160,
            // Addresses, how it joined, when; its flows (16 bytes each) are charged on top.
            Kind::FlowChannels => 256,
            // The flow's state with its capped lists (timeline, opens, findings) partly filled
            // (docs/analysis.md measures ≈ 1.1 KB of fixed state); series rows are bounded
            // on top, from the other half of the share.
            Kind::Flows => 2048,
        }
    }

    /// Name in reports (`stats`, notes).
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Connections => "connections",
            Kind::Reassembly => "reassembly",
            Kind::Framers => "framers",
            Kind::Pending => "pending",
            Kind::Opens => "opens",
            Kind::Queued => "queued",
            Kind::Sessions => "sessions",
            Kind::FlowRequests => "flow_requests",
            Kind::FlowOpens => "flow_opens",
            Kind::FlowChannels => "flow_channels",
            Kind::Flows => "flows",
        }
    }

    /// What one dropped entry is, and what its loss means (in notes).
    const fn dropped_what(self) -> &'static str {
        match self {
            Kind::Connections => {
                "idle connections forgotten (their buffered data delivered, messages in progress reported incomplete)"
            }
            Kind::Reassembly => {
                "holes given up to deliver the out-of-order data held behind them (each reported as a gap)"
            }
            Kind::Framers => {
                "messages in progress cut to their headers and fixed bodies (SQOS buffers or names lost)"
            }
            Kind::Pending => {
                "SMB2 requests forgotten before their response (their responses go unmatched)"
            }
            Kind::Opens => "opens forgotten (later messages on them show no file name)",
            Kind::Queued => {
                "SQOS requests shown before their response came (the response is still shown)"
            }
            Kind::Sessions => {
                "SMB3 sessions, session setups, channels or tree connects not followed (encrypted messages of a session not followed need the key file's direction keys; a channel forgotten is seen again when used; files on a tree forgotten show no share)"
            }
            Kind::FlowRequests => {
                "SQOS requests forgotten by the analysis before their response (their answers not applied)"
            }
            Kind::FlowOpens => {
                "opens not followed by the analysis (their I/O is not counted in any flow)"
            }
            Kind::FlowChannels => {
                "channels not followed by the analysis (the flows using them show no addresses for them, nor when they ended)"
            }
            Kind::Flows => "logical flows not followed (no row, no findings for them)",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The whole run's memory budget in bytes; hands out each kind's [`Share`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    total: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(DEFAULT_MEMORY)
    }
}

impl Budget {
    /// A budget of `total` bytes (at least [`MIN_MEMORY`]).
    pub fn new(total: usize) -> Self {
        Budget {
            total: total.max(MIN_MEMORY),
        }
    }

    /// A budget that never drops anything (tests that feed more than any budget would hold).
    pub fn unbounded() -> Self {
        Budget { total: usize::MAX }
    }

    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes a kind may use.
    pub fn limit(&self, kind: Kind) -> usize {
        (self.total / 1000).saturating_mul(kind.permille())
    }

    /// The share of `kind`: an empty account with its limit.
    pub fn share(&self, kind: Kind) -> Share {
        Share::new(kind, self.limit(kind))
    }
}

/// One table's account: entries and variable bytes held, the limit, and what was dropped.
#[derive(Clone, Debug)]
pub struct Share {
    kind: Kind,
    limit: usize,
    entries: usize,
    bytes: usize,
    peak: usize,
    dropped: u64,
    dropped_bytes: u64,
    first_drop_frame: Option<u64>,
}

impl Share {
    /// An account of `kind` with an explicit limit in bytes (tables whose bound a test sets;
    /// otherwise use [`Budget::share`]).
    pub fn new(kind: Kind, limit: usize) -> Self {
        Share {
            kind,
            limit,
            entries: 0,
            bytes: 0,
            peak: 0,
            dropped: 0,
            dropped_bytes: 0,
            first_drop_frame: None,
        }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes charged now: entries at their cost plus variable bytes.
    #[inline]
    pub fn used(&self) -> usize {
        self.entries
            .saturating_mul(self.kind.entry_cost())
            .saturating_add(self.bytes)
    }

    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Most entries of no variable size the share can hold (for tables bounded by count).
    pub fn max_entries(&self) -> usize {
        (self.limit / self.kind.entry_cost().max(1)).max(1)
    }

    /// Whether `entries` more entries with `bytes` variable bytes fit. An empty share always
    /// takes one entry, so a single oversized item is never refused outright.
    pub fn fits(&self, entries: usize, bytes: usize) -> bool {
        let more = entries
            .saturating_mul(self.kind.entry_cost())
            .saturating_add(bytes);
        self.used() == 0 || self.used().saturating_add(more) <= self.limit
    }

    /// Over the limit now.
    #[inline]
    pub fn over(&self) -> bool {
        self.used() > self.limit
    }

    pub fn charge(&mut self, entries: usize, bytes: usize) {
        self.entries = self.entries.saturating_add(entries);
        self.bytes = self.bytes.saturating_add(bytes);
        self.peak = self.peak.max(self.used());
    }

    pub fn release(&mut self, entries: usize, bytes: usize) {
        self.entries = self.entries.saturating_sub(entries);
        self.bytes = self.bytes.saturating_sub(bytes);
    }

    /// The peak since the last call (or since the start), then start the next span's peak
    /// from what is used now: `--threads` adds the workers' spans up in frame order.
    pub fn take_peak(&mut self) -> usize {
        let used = self.used();
        std::mem::replace(&mut self.peak, used)
    }

    /// Forget everything charged (the table was emptied).
    pub fn clear(&mut self) {
        self.entries = 0;
        self.bytes = 0;
    }

    /// Count `entries` dropped (with `bytes` of data) at `frame` to stay within the share.
    /// Returns true for the first drop of this share (a caller may say so at once).
    pub fn dropped(&mut self, entries: u64, bytes: u64, frame: u64) -> bool {
        self.dropped = self.dropped.saturating_add(entries);
        self.dropped_bytes = self.dropped_bytes.saturating_add(bytes);
        let first = self.first_drop_frame.is_none();
        if first {
            self.first_drop_frame = Some(frame);
        }
        first
    }

    pub fn dropped_count(&self) -> u64 {
        self.dropped
    }

    /// The account for reports.
    pub fn usage(&self) -> MemoryUse {
        MemoryUse {
            kind: self.kind,
            limit_bytes: self.limit as u64,
            peak_bytes: self.peak as u64,
            dropped: self.dropped,
            dropped_bytes: self.dropped_bytes,
            first_drop_frame: self.first_drop_frame,
        }
    }

    /// The one note of this share, if it dropped anything.
    pub fn summary(&self) -> Option<String> {
        self.usage().summary()
    }
}

/// What one share used and dropped: the report's row (`stats`, notes, JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryUse {
    pub kind: Kind,
    pub limit_bytes: u64,
    pub peak_bytes: u64,
    pub dropped: u64,
    pub dropped_bytes: u64,
    pub first_drop_frame: Option<u64>,
}

impl MemoryUse {
    /// One sentence for a note: which share, how many entries, from which frame.
    pub fn summary(&self) -> Option<String> {
        let frame = self.first_drop_frame?;
        let bytes = if self.dropped_bytes > 0 {
            format!(", {} bytes", self.dropped_bytes)
        } else {
            String::new()
        };
        Some(format!(
            "memory budget: the {} share ({}) was full from frame {frame}: {} {}{bytes}",
            self.kind,
            human_bytes(self.limit_bytes),
            self.dropped,
            self.kind.dropped_what(),
        ))
    }
}

/// One row per kind, in `Kind` order: tables of the same kind (one per layer) add up.
pub fn merged(uses: impl IntoIterator<Item = MemoryUse>) -> Vec<MemoryUse> {
    let mut out: Vec<MemoryUse> = Vec::new();
    for u in uses {
        match out.iter_mut().find(|m| m.kind == u.kind) {
            Some(m) => {
                m.limit_bytes = m.limit_bytes.saturating_add(u.limit_bytes);
                m.peak_bytes = m.peak_bytes.saturating_add(u.peak_bytes);
                m.dropped = m.dropped.saturating_add(u.dropped);
                m.dropped_bytes = m.dropped_bytes.saturating_add(u.dropped_bytes);
                m.first_drop_frame = match (m.first_drop_frame, u.first_drop_frame) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            None => out.push(u),
        }
    }
    out.sort_by_key(|m| m.kind);
    out
}

/// "12.8 MiB", "640 KiB", "512 B".
pub fn human_bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
    } else if n >= 1 << 10 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

/// Parses a size: `64M`, `64MiB`, `1G`, `512k`, or plain bytes.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("{s:?}: not a size (examples: 64M, 1G, 512MiB)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{s:?}: unknown unit (use K, M or G)")),
    };
    let bytes = n
        .checked_mul(1usize << shift)
        .ok_or_else(|| format!("{s:?}: too large"))?;
    if bytes < MIN_MEMORY {
        return Err(format!(
            "{s:?}: at least {} is needed",
            human_bytes(MIN_MEMORY as u64)
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_leave_a_quarter_for_the_program() {
        let sum: usize = Kind::ALL.iter().map(|k| k.permille()).sum();
        assert_eq!(sum, 750);
        let b = Budget::default();
        assert_eq!(b.limit(Kind::Reassembly), 67_108 * 150);
    }

    #[test]
    fn entries_and_bytes_are_both_counted() {
        let mut s = Budget::new(4 << 20).share(Kind::Reassembly);
        let limit = s.limit();
        assert_eq!(limit, 4194 * 150);
        // A one-byte segment costs its entry.
        s.charge(1, 1);
        assert_eq!(s.used(), 97);
        let room = (limit - 97) / 97;
        assert!(s.fits(room, room));
        assert!(!s.fits(room + 1, room + 1));
        s.release(1, 1);
        assert_eq!(s.used(), 0);
    }

    #[test]
    fn an_empty_share_takes_one_oversized_entry() {
        let s = Budget::new(4 << 20).share(Kind::Framers);
        assert!(s.fits(1, 100 << 20));
    }

    #[test]
    fn drops_are_counted_and_summarised_once() {
        let mut s = Budget::default().share(Kind::Opens);
        assert_eq!(s.summary(), None);
        assert!(s.dropped(1, 0, 7));
        assert!(!s.dropped(2, 0, 9));
        let u = s.usage();
        assert_eq!((u.dropped, u.first_drop_frame), (3, Some(7)));
        let text = s.summary().unwrap_or_default();
        assert!(
            text.contains("opens share (2.6 MiB) was full from frame 7: 3 opens forgotten"),
            "{text}"
        );
    }

    /// The default bounds docs/robustness.md lists (change both together).
    #[test]
    fn default_bounds_are_the_documented_ones() {
        let b = Budget::default();
        let entries: Vec<(Kind, usize, usize)> = Kind::ALL
            .iter()
            .map(|&k| (k, b.limit(k), b.share(k).max_entries()))
            .collect();
        let expect = [
            (Kind::Connections, 10_066_200, 4_915),
            (Kind::Reassembly, 10_066_200, 104_856),
            (Kind::Framers, 4_026_480, 4_026_480),
            (Kind::Pending, 3_355_400, 17_476),
            (Kind::Opens, 2_684_320, 20_971),
            (Kind::Queued, 2_684_320, 13_980),
            (Kind::Sessions, 2_013_240, 7_864),
            (Kind::FlowRequests, 2_013_240, 3_932),
            (Kind::FlowOpens, 2_013_240, 12_582),
            (Kind::FlowChannels, 671_080, 2_621),
            (Kind::Flows, 10_737_280, 5_242),
        ];
        assert_eq!(entries, expect);
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("8388608"), Ok(8 << 20));
        assert!(parse_size("1M").is_err());
        assert!(parse_size("12X").is_err());
        assert!(parse_size("lots").is_err());
    }
}
