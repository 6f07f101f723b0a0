//! `sqos dissect`: one line per SQOS message as tshark prints them, the field tree (`-V`), hex
//! (`-x`), JSON, or chosen fields (`-T fields -e …`); filtered with `-Y` and its shortcuts,
//! `-c N` messages at most, the matching frames written to a capture with `-w`.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use serde_json::{Map, Value};
use sqos::analysis::FlowState;
use sqos::capture::live::{cannot_run, spawn_tcpdump, Relay};
use sqos::capture::CaptureReader;
use sqos::capture::{CaptureFormat, Timestamp};
use sqos::filter::fields::{resolve, Context, FieldRef, Unresolved};
use sqos::filter::select::MessageSink;
use sqos::filter::{MessageSelect, Subject};
use sqos::output::frames::FramesOut;
use sqos::output::json::{push_json, RecordJson};
use sqos::output::text::{detail_tree, frame_hex, hex_dump, push_summary_line};
use sqos::output::time::{TimeColumn, TimeFormat};
use sqos::pipeline::{CaptureNote, ChannelRecord, RecordSink, SqosRecord, Stats};
use sqos::run::{no_progress, run_capture, CaptureSink, RunResult};

use super::filter::FilterArgs;
use super::out::RecordOut;
use super::InputArgs;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DissectFormat {
    Text,
    Jsonl,
    Json,
    /// The fields named with `-e`, one line per message (tshark's `-T fields`).
    Fields,
}

#[derive(Args)]
#[command(after_help = "\
Examples:
  sqos dissect -r capture.pcapng --vm vm03 -t ad -w vm03.pcap
  sqos dissect capture.pcap -Y 'nt_status != 0 or findings' -T fields -e frame -e flow.initiator_name -e status_name -E header=y
  sudo sqos dissect -i eth0 --vm vm03")]
pub struct DissectArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// Full field tree with findings, like `tshark -V`.
    #[arg(short = 'V', long = "verbose")]
    verbose: bool,
    /// Hex and ASCII of the frame that completed each message, then of its SQOS buffer.
    #[arg(short = 'x', long = "hex")]
    hex: bool,
    /// Output format (`-T` as in tshark).
    #[arg(short = 'T', long, value_enum, default_value = "text")]
    format: DissectFormat,
    /// A field to print with `-T fields` (a JSON key: `frame`, `sqos.limit`,
    /// `flow.initiator_name`…); repeat for several.
    #[arg(short = 'e', value_name = "FIELD")]
    fields: Vec<String>,
    /// `-T fields` options: `header=y|n`, `separator=/t|/s|C`, `quote=d|s|n`,
    /// `aggregator=,|/s|C` (between the values of a list), `occurrence=a|f|l`.
    #[arg(short = 'E', value_name = "OPTION=VALUE")]
    field_options: Vec<String>,
    /// Time column: r relative to the first frame, a / ad local time (with date), u / ud UTC
    /// (with date), e epoch seconds, d since the previous message, dd since the previous one
    /// shown.
    #[arg(short = 't', value_enum, value_name = "FORMAT", default_value = "r")]
    time_format: TimeFormat,
    /// Stop after this many messages have been shown.
    #[arg(short = 'c', value_name = "N")]
    count: Option<u64>,
    /// Write the frames that carry the shown messages to this capture (pcap; pcapng when the
    /// name ends in .pcapng), with their original timestamps.
    #[arg(short = 'w', value_name = "OUT")]
    write: Option<PathBuf>,
    /// Capture live from this interface (instead of a file) by running `tcpdump` (installed,
    /// with the rights to capture); each message is printed as it completes. Ctrl-C ends it.
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    pub interface: Option<String>,
}

impl DissectArgs {
    /// How `--separate` labels this command's rows.
    pub fn separate_rows(&self) -> Result<super::separate::Rows, String> {
        use super::separate::Rows;
        if self.write.is_some() {
            return Err("--separate writes to standard output: leave out -w".into());
        }
        Ok(match self.format {
            DissectFormat::Text => Rows::Text,
            DissectFormat::Jsonl => Rows::JsonLines,
            DissectFormat::Json => Rows::Json,
            DissectFormat::Fields => {
                let f = FieldsOut::parse(self)?;
                Rows::Fields {
                    separator: f.separator,
                    header: f.header,
                }
            }
        })
    }
}

/// `-T fields` settings.
struct FieldsOut {
    fields: Vec<FieldRef>,
    /// The message keys of `fields` (see `Subject::wanting`).
    message_keys: Vec<&'static str>,
    names: Vec<String>,
    header: bool,
    separator: String,
    quote: Option<char>,
    aggregator: String,
    occurrence: char,
}

impl FieldsOut {
    fn parse(a: &DissectArgs) -> Result<Self, String> {
        if a.fields.is_empty() {
            return Err("-T fields needs at least one -e FIELD".into());
        }
        let mut fields = Vec::new();
        for name in &a.fields {
            match resolve(Context::Messages, name) {
                Ok(f) => fields.push(f),
                Err(Unresolved::Unknown { hint }) => {
                    return Err(format!("-e {name}: unknown field{hint}"))
                }
                Err(Unresolved::NotHere(why)) => return Err(format!("-e {name}: {why}")),
            }
        }
        let message_keys = sqos::filter::fields::message_keys(&fields);
        let mut out = FieldsOut {
            fields,
            message_keys,
            names: a.fields.clone(),
            header: false,
            separator: "\t".into(),
            quote: None,
            aggregator: ",".into(),
            occurrence: 'a',
        };
        let sep = |v: &str| match v {
            "/t" => "\t".to_string(),
            "/s" => " ".to_string(),
            other => other.to_string(),
        };
        for opt in &a.field_options {
            let (k, v) = opt
                .split_once('=')
                .ok_or_else(|| format!("-E {opt}: give OPTION=VALUE"))?;
            match (k, v) {
                ("header", "y") => out.header = true,
                ("header", "n") => out.header = false,
                ("separator", v) if !v.is_empty() => out.separator = sep(v),
                ("aggregator", v) if !v.is_empty() => out.aggregator = sep(v),
                ("quote", "d") => out.quote = Some('"'),
                ("quote", "s") => out.quote = Some('\''),
                ("quote", "n") => out.quote = None,
                ("occurrence", "a" | "f" | "l") => out.occurrence = v.chars().next().unwrap_or('a'),
                // A UTF-8 byte order mark is never written; accepting `bom=n` keeps scripts working.
                ("bom", "n") => {}
                _ => return Err(format!("-E {opt}: unknown option or value (see --help)")),
            }
        }
        Ok(out)
    }

    fn needs_flow(&self) -> bool {
        self.fields
            .iter()
            .any(|f| f.scope == sqos::filter::Scope::Flow)
    }

    fn cell(&self, v: Option<&serde_json::Value>) -> String {
        use serde_json::Value;
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        let s = match v {
            None => String::new(),
            Some(Value::Array(items)) => {
                let picked: Vec<&Value> = match self.occurrence {
                    'f' => items.first().into_iter().collect(),
                    'l' => items.last().into_iter().collect(),
                    _ => items.iter().collect(),
                };
                picked
                    .into_iter()
                    .map(text)
                    .collect::<Vec<_>>()
                    .join(&self.aggregator)
            }
            Some(v) => text(v),
        };
        // Names from the wire cannot act on the terminal or forge a line (`output::escape`).
        let s = sqos::output::escape::text(&s);
        match self.quote {
            Some(q) => format!("{q}{s}{q}"),
            None => s.into_owned(),
        }
    }

    fn line(&self, s: &Subject<'_>) -> String {
        let cells: Vec<String> = self.fields.iter().map(|f| self.cell(s.field(*f))).collect();
        cells.join(&self.separator) + "\n"
    }

    fn header_line(&self) -> String {
        self.names.join(&self.separator) + "\n"
    }
}

/// Writes each record as it arrives (flushed when live, see [`RecordOut`]); a closed stdout
/// (`| head`) ends the output quietly and the run at once.
struct Printer {
    out: RecordOut,
    format: DissectFormat,
    verbose: bool,
    hex: bool,
    fields: Option<FieldsOut>,
    time: TimeColumn,
    first: Timestamp,
    count: u64,
    limit: Option<u64>,
    frames: Option<FramesOut>,
    /// Time of the message before the one being shown (for `-t d`).
    prev_seen: Option<Timestamp>,
    /// The text of the message being written, kept for the next (its capacity reused).
    line: String,
}

impl Printer {
    fn write(&mut self, s: &str) {
        if !self.out.closed() {
            let _ = self.out.write_all(s.as_bytes());
        }
    }

    /// False once it has all it wants: `-c N` messages shown, or nobody reads stdout.
    fn wants_more(&self) -> bool {
        self.limit.is_none_or(|n| self.count < n) && !self.out.closed()
    }

    /// The text of one message, appended to `s`.
    fn text(&mut self, rec: &SqosRecord, s: &mut String) {
        let time = self.time.shown(rec.ts, self.prev_seen);
        if self.verbose {
            s.push_str(&detail_tree(rec, self.first));
        } else {
            push_summary_line(s, rec, &time);
            s.push('\n');
        }
        if self.hex {
            if let Some(f) = &rec.frame_copy {
                s.push_str(&frame_hex(f, rec.first_frame));
                s.push_str(&format!("SQOS buffer ({} bytes):\n", rec.buffer.len()));
            }
            s.push_str(&hex_dump(&rec.buffer));
        }
        if self.verbose || self.hex {
            s.push('\n');
        }
    }
}

impl RecordSink for Printer {
    fn on_sqos(&mut self, rec: SqosRecord) {
        self.on_message(rec, None, None);
    }
    // One line per SQOS message; the channels show in `sqos flows` and `sqos stats`.
    fn on_channel(&mut self, _rec: &ChannelRecord) {}

    fn on_note(&mut self, note: &CaptureNote) {
        // Notes about incomplete data go to stderr so that JSON on stdout stays clean.
        eprintln!(
            "note: frame {}: {}",
            note.frame,
            sqos::output::escape::text(&note.message)
        );
    }
}

impl CaptureSink for Printer {
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.first = ts;
        self.time.set_first(ts);
    }
    fn on_format(&mut self, format: CaptureFormat) {
        if let Some(f) = &mut self.frames {
            f.input_format(format);
        }
    }
    fn done(&mut self) -> bool {
        !self.wants_more()
    }
}

impl MessageSink for Printer {
    fn on_seen(&mut self, rec: &SqosRecord) {
        self.prev_seen = self.time.seen(rec.ts);
    }

    fn on_message(
        &mut self,
        rec: SqosRecord,
        flow: Option<&FlowState>,
        row: Option<&Map<String, Value>>,
    ) {
        if !self.wants_more() {
            return;
        }
        if let Some(f) = &mut self.frames {
            f.write(&rec);
        }
        let text = match self.format {
            DissectFormat::Text => {
                // One buffer for every line, so a line costs no allocation of its own.
                let mut s = std::mem::take(&mut self.line);
                s.clear();
                self.text(&rec, &mut s);
                s
            }
            DissectFormat::Jsonl => {
                let mut s = std::mem::take(&mut self.line);
                s.clear();
                push_json(&mut s, &RecordJson(&rec), false);
                s.push('\n');
                s
            }
            DissectFormat::Json => {
                let sep = if self.count == 0 { "[\n" } else { ",\n" };
                let mut s = std::mem::take(&mut self.line);
                s.clear();
                s.push_str(sep);
                push_json(&mut s, &RecordJson(&rec), true);
                s
            }
            DissectFormat::Fields => {
                let _ = self.time.shown(rec.ts, self.prev_seen);
                let fields = self.fields.as_ref();
                let keys = fields.map_or(&[][..], |f| &f.message_keys[..]);
                let subject = Subject::message(&rec, flow, self.first)
                    .wanting(keys)
                    .with_flow_row(row);
                let mut s = String::new();
                if let (0, Some(f)) = (self.count, fields) {
                    if f.header {
                        s.push_str(&f.header_line());
                    }
                }
                if let Some(f) = fields {
                    s.push_str(&f.line(&subject));
                }
                s
            }
        };
        self.count += 1;
        self.write(&text);
        self.line = text;
        self.out.end_record();
    }
}

/// What was seen when nothing was shown: "0 SQOS messages in 99 SMB2 messages on 1 connection".
fn nothing_shown(stats: &Stats, seen: u64, filtered: bool) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut s = if filtered && seen > 0 {
        format!(
            "no message matched the filter ({} seen)",
            plural(seen, "SQOS message", "SQOS messages")
        )
    } else {
        format!(
            "{} in {} on {}",
            plural(stats.sqos_messages, "SQOS message", "SQOS messages"),
            plural(stats.smb2_messages, "SMB2 message", "SMB2 messages"),
            plural(stats.connections, "connection", "connections")
        )
    };
    let mut extra = Vec::new();
    // Which sessions stayed closed, and why, is said once after this line (`super::finish`).
    if stats.encrypted_messages > 0 {
        extra.push(format!(
            "{} encrypted ({} decrypted)",
            stats.encrypted_messages, stats.decrypted_messages
        ));
    }
    if stats.compressed_messages > 0 {
        extra.push(format!("{} compressed", stats.compressed_messages));
    }
    if stats.smb1_messages > 0 {
        extra.push(format!("{} SMB1", stats.smb1_messages));
    }
    if stats.smb2_messages == 0 && stats.connections == 0 {
        extra.push(format!(
            "{} frames, no TCP connection on an SMB port (445, 139, --port)",
            stats.frames
        ));
    }
    if !extra.is_empty() {
        s.push_str(&format!("; {}", extra.join(", ")));
    }
    s
}

pub fn run(a: &DissectArgs) -> i32 {
    if a.interface.is_some() && (!a.input.captures.is_empty() || a.input.read_file.is_some()) {
        eprintln!("sqos: give a capture or -i IFACE, not both");
        return 2;
    }
    let filter = match a.filter.build(Context::Messages) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let fields = match a.format {
        DissectFormat::Fields => match FieldsOut::parse(a) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("sqos: {e}");
                return 2;
            }
        },
        _ if !a.fields.is_empty() => {
            eprintln!("sqos: -e needs -T fields");
            return 2;
        }
        _ => None,
    };
    let frames = match &a.write {
        Some(path) => match FramesOut::create(path) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("sqos: {}: {e}", path.display());
                return 2;
            }
        },
        None => None,
    };
    let follow_flows = fields.as_ref().is_some_and(FieldsOut::needs_flow);
    let printer = Printer {
        out: RecordOut::stdout(a.input.is_live() || a.interface.is_some()),
        format: a.format,
        verbose: a.verbose,
        hex: a.hex,
        fields,
        time: TimeColumn::new(a.time_format),
        first: Timestamp::default(),
        count: 0,
        limit: a.count,
        frames,
        prev_seen: None,
        line: String::new(),
    };
    let filtered = filter.is_some();
    let mut sink = MessageSelect::new(printer, filter, follow_flows);
    let mut cfg = a.input.pipeline_config();
    cfg.keep_frames = a.hex || a.write.is_some();
    let result = match &a.interface {
        Some(iface) => match run_live(iface, &a.input.ports, cfg, &mut sink) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("sqos: {e}");
                return 2;
            }
        },
        None => match super::read_holding(&a.input, cfg, &mut sink) {
            Ok(r) => r,
            Err(code) => return code,
        },
    };
    let label = match &a.interface {
        Some(iface) => iface.clone(),
        None => a.input.label(),
    };
    let seen = sink.tap.seen;
    let mut p = sink.tap.inner;
    if p.format == DissectFormat::Json {
        let tail = if p.count == 0 { "[]\n" } else { "\n]\n" };
        p.write(tail);
    }
    let _ = p.out.flush();
    if p.count == 0 {
        eprintln!(
            "sqos: {label}: {}",
            nothing_shown(&result.stats, seen, filtered)
        );
    }
    if let (Some(f), Some(path)) = (p.frames.take(), &a.write) {
        match f.finish() {
            Ok(report) => eprintln!("sqos: {}: {report}", path.display()),
            Err(e) => {
                eprintln!("sqos: {}: {e}", path.display());
                return 2;
            }
        }
    }
    super::finish_as(&label, &result)
}

/// Read a live capture from tcpdump until it ends (Ctrl-C reaches both) or the sink has all it
/// wants (`-c N`, stdout closed); tcpdump's own lines go to stderr as "tcpdump: …".
fn run_live<S: CaptureSink>(
    iface: &str,
    ports: &[u16],
    cfg: sqos::pipeline::PipelineConfig,
    sink: &mut S,
) -> Result<RunResult, String> {
    let mut child = spawn_tcpdump(iface, ports).map_err(|e| cannot_run(iface, &e, "dissect"))?;
    let relay = child.stderr.take().map(Relay::start);
    // Ctrl-C is for tcpdump (it reaches the whole foreground group): it ends the capture, and we
    // finish reading what it wrote, close `-w` and say what was seen, as tshark does.
    ignore_interrupt();
    let stop = |child: &mut std::process::Child, relay: Option<Relay>, fallback: &str| {
        let _ = child.kill();
        let _ = child.wait();
        relay.map(|r| r.finish(fallback))
    };
    let Some(out) = child.stdout.take() else {
        stop(&mut child, relay, "");
        return Err("tcpdump gave no output pipe".into());
    };
    let read = CaptureReader::from_reader(Box::new(out))
        .map(|mut reader| run_capture(&mut reader, cfg, sink, &mut no_progress));
    match read {
        Ok(r) => {
            stop(&mut child, relay, "");
            Ok(r)
        }
        Err(e) => {
            let said = stop(&mut child, relay, &e.to_string());
            Err(said.unwrap_or_else(|| format!("tcpdump: {e}")))
        }
    }
}

#[cfg(unix)]
fn ignore_interrupt() {
    // SAFETY: setting a signal's disposition to SIG_IGN runs no handler code; tcpdump, already
    // started, keeps its own.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
}

#[cfg(not(unix))]
fn ignore_interrupt() {}
