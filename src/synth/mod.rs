//! `sqos synth`: a deterministic generator of Hyper-V ↔ Scale-Out File Server traffic with
//! MS-SQOS, written as pcap or pcapng (optionally gzip-compressed), plus the generator's own
//! ground truth as JSON.
//!
//! Layers, each in its module: `rng` (seeded PRNG), `packet` (frame
//! headers), `wire` (TCP and time-ordered writing), `smb2` (message bytes; the MS-SQOS buffers
//! come from the codec's encoder), `server` (the MS-SQOS server rules), `scenario` (what is
//! simulated), `sim` (the event loop), `examples` (the spec's example messages), `large` (the
//! benchmark stream), `truth`.

pub mod examples;
pub mod large;
pub mod packet;
pub mod rng;
pub mod scenario;
pub mod seal;
pub mod server;
pub mod session;
pub mod sim;
pub mod smb2;
pub mod squeeze;
pub mod truth;
pub mod wire;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::capture::writer::{FileFormat, FileOptions, FileWriter, Gzip};

pub use scenario::{DropKind, Scenario};
pub use truth::Truth;

use rng::Rng;
use wire::{NetConfig, Wire};

/// Options of `sqos synth`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = "\
Examples:
  sqos synth --scenario noisy-neighbour -o nn.pcapng.gz
  sqos synth --scenario lossy-network --loss 0.01 --seed 7 -o lossy.pcap --truth lossy.json
  sqos synth --scenario large --size 1GiB -q -o big.pcap")]
pub struct SynthArgs {
    /// What to simulate.
    #[arg(long, value_enum, default_value = "steady")]
    pub scenario: Scenario,
    /// Seed of every random choice: the same seed and options give the same bytes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Capture file to write (`.pcap`, `.pcapng`, optionally `.gz`).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Say nothing on stderr (errors aside).
    #[arg(short, long)]
    pub quiet: bool,
    /// File format (default: from the extension, else pcap).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Bytes of READ/WRITE data for `large` (suffixes KiB, MiB, GiB, KB, MB, GB).
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// Hyper-V hosts (one SMB connection each).
    #[arg(long)]
    pub hosts: Option<u32>,
    /// VMs per host.
    #[arg(long)]
    pub vms: Option<u32>,
    /// Virtual disks (logical flows) per VM.
    #[arg(long)]
    pub disks: Option<u32>,
    /// SMB3 multichannel: channels (connections, each over its own pair of NICs) per host's
    /// session, 1 to 4 (default 1; `multichannel`: 4, 2, 3, …).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4))]
    pub channels: Option<u32>,
    /// Capture length in seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Probability that a TCP data segment is lost (it is retransmitted after 200 ms).
    #[arg(long)]
    pub loss: Option<f64>,
    /// Lost segments are only missing from the capture (no retransmission: a real gap).
    #[arg(long)]
    pub loss_no_retransmit: bool,
    /// Probability that a server→client segment arrives after the next one.
    #[arg(long)]
    pub reorder: Option<f64>,
    /// 802.1Q VLAN tag on every frame.
    #[arg(long)]
    pub vlan: Option<u16>,
    /// IPv6 addresses (fd00:5105::/64).
    #[arg(long)]
    pub ipv6: bool,
    /// The capture starts mid-connection (its first 30 % is not written).
    #[arg(long)]
    pub midstream: bool,
    /// Capture interfaces (pcapng); hosts are spread over them.
    #[arg(long)]
    pub interfaces: Option<u32>,
    /// Receivers acknowledge an odd last segment after 200 ms (Windows' delayed ACK timer).
    #[arg(long)]
    pub delayed_ack: bool,
    /// TCP payload bytes per full segment.
    #[arg(long, default_value_t = 1448)]
    pub mss: usize,
    /// Nanosecond timestamps.
    #[arg(long)]
    pub nanos: bool,
    /// Keep only this many bytes of each frame.
    #[arg(long)]
    pub snaplen: Option<u32>,
    /// I/O sizes up to 1 MiB (default: 4-64 KiB, keeping captures small).
    #[arg(long)]
    pub big_io: bool,
    /// SQOS dialect: of the spec examples (default 1.1), or of every host (default: mixed).
    #[arg(long, value_enum)]
    pub sqos_dialect: Option<DialectArg>,
    /// Write the generator's ground truth (JSON) here.
    #[arg(long)]
    pub truth: Option<PathBuf>,
    /// Encrypt every SMB3 session (after its SESSION_SETUP) with this cipher. AES-128-CCM
    /// keeps the scenario's SMB dialects (3.0.2 and 3.1.1); the others need 3.1.1, which every
    /// host then speaks.
    #[arg(long, value_enum, value_name = "CIPHER")]
    pub encrypt: Option<seal::CipherArg>,
    /// Write the sessions' keys here, as Wireshark's "SMB2 Secret Keys" file (for `--keys`).
    #[arg(long, value_name = "FILE", requires = "encrypt")]
    pub keys_out: Option<PathBuf>,
    /// Negotiate SMB 3.1.1 compression with this algorithm (every host then speaks 3.1.1)
    /// and send every message after SESSION_SETUP compressed when that makes it smaller.
    #[arg(long, value_enum, value_name = "ALGO")]
    pub compress: Option<squeeze::CompressArg>,
    /// With `--compress`: negotiate chained compression (and Pattern_V1) and send chained
    /// messages.
    #[arg(long, requires = "compress")]
    pub chained: bool,
}

/// `--format` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Pcap,
    Pcapng,
}

/// `--sqos-dialect` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DialectArg {
    #[value(name = "1.0")]
    V1_0,
    #[value(name = "1.1")]
    V1_1,
}

impl DialectArg {
    pub fn dialect(self) -> crate::sqos::Dialect {
        match self {
            DialectArg::V1_0 => crate::sqos::Dialect::V1_0,
            DialectArg::V1_1 => crate::sqos::Dialect::V1_1,
        }
    }
}

impl SynthArgs {
    /// Arguments with every option at its default.
    pub fn new(scenario: Scenario, output: impl Into<PathBuf>) -> SynthArgs {
        SynthArgs {
            scenario,
            seed: 1,
            output: output.into(),
            quiet: false,
            format: None,
            size: None,
            hosts: None,
            vms: None,
            disks: None,
            channels: None,
            duration: None,
            loss: None,
            loss_no_retransmit: false,
            reorder: None,
            vlan: None,
            ipv6: false,
            midstream: false,
            interfaces: None,
            delayed_ack: false,
            mss: 1448,
            nanos: false,
            snaplen: None,
            big_io: false,
            sqos_dialect: None,
            truth: None,
            encrypt: None,
            keys_out: None,
            compress: None,
            chained: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("cannot encode the ground truth: {0}")]
    Json(#[from] serde_json::Error),
    #[error("invalid option: {0}")]
    InvalidArgs(String),
}

/// What was written.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SynthSummary {
    pub scenario: String,
    pub frames: u64,
    /// Bytes of the capture file before compression.
    pub capture_bytes: u64,
    pub duration_s: f64,
    pub flows: usize,
    pub sqos_requests: u64,
    pub ios: u64,
    pub io_bytes: u64,
    /// `--encrypt`: the keys of every session (written by `--keys-out`).
    #[serde(skip)]
    pub keys: Vec<crate::smb2::crypto::SessionKeys>,
}

/// Parses `1GiB`, `512MiB`, `64KiB`, `10MB`, `123`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("not a size: {s}"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return Err(format!("unknown size unit in {s}")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size too large: {s}"))
}

/// The file format an output name implies (`.pcapng` / `.pcapng.gz` → pcapng).
fn format_of(path: &Path) -> Format {
    let name = path.to_string_lossy().to_ascii_lowercase();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    if name.ends_with(".pcapng") {
        Format::Pcapng
    } else {
        Format::Pcap
    }
}

fn is_gzip(path: &Path) -> bool {
    path.to_string_lossy().to_ascii_lowercase().ends_with(".gz")
}

/// The command line that reproduces `args` (written into the truth and the README table).
pub fn command_line(args: &SynthArgs) -> String {
    let mut s = format!(
        "sqos synth --scenario {} --seed {}",
        clap::ValueEnum::to_possible_value(&args.scenario)
            .map_or_else(String::new, |v| v.get_name().to_string()),
        args.seed
    );
    let mut opt = |name: &str, v: Option<String>| {
        if let Some(v) = v {
            s.push_str(&format!(" --{name} {v}"));
        }
    };
    opt("size", args.size.map(|v| v.to_string()));
    opt("hosts", args.hosts.map(|v| v.to_string()));
    opt("vms", args.vms.map(|v| v.to_string()));
    opt("disks", args.disks.map(|v| v.to_string()));
    opt("channels", args.channels.map(|v| v.to_string()));
    opt("duration", args.duration.map(|v| v.to_string()));
    opt("loss", args.loss.map(|v| v.to_string()));
    opt("reorder", args.reorder.map(|v| v.to_string()));
    opt("vlan", args.vlan.map(|v| v.to_string()));
    opt("interfaces", args.interfaces.map(|v| v.to_string()));
    opt("snaplen", args.snaplen.map(|v| v.to_string()));
    opt("mss", (args.mss != 1448).then(|| args.mss.to_string()));
    opt(
        "encrypt",
        args.encrypt
            .and_then(|c| clap::ValueEnum::to_possible_value(&c).map(|v| v.get_name().to_string())),
    );
    opt(
        "compress",
        args.compress
            .and_then(|c| clap::ValueEnum::to_possible_value(&c).map(|v| v.get_name().to_string())),
    );
    opt(
        "sqos-dialect",
        args.sqos_dialect.map(|d| match d {
            DialectArg::V1_0 => "1.0".to_string(),
            DialectArg::V1_1 => "1.1".to_string(),
        }),
    );
    for (flag, on) in [
        ("loss-no-retransmit", args.loss_no_retransmit),
        ("ipv6", args.ipv6),
        ("midstream", args.midstream),
        ("chained", args.chained),
        ("delayed-ack", args.delayed_ack),
        ("nanos", args.nanos),
        ("big-io", args.big_io),
    ] {
        if on {
            s.push_str(&format!(" --{flag}"));
        }
    }
    s.push_str(&format!(" -o {}", args.output.display()));
    s
}

/// Generates the capture described by `args` into `out` (compressed if the output name ends in
/// `.gz`). Returns the writer, a summary and the ground truth.
pub fn generate<W: Write>(
    args: &SynthArgs,
    out: W,
) -> Result<(W, SynthSummary, Truth), SynthError> {
    let io_err = |source| SynthError::Io {
        path: args.output.display().to_string(),
        source,
    };
    if args.mss < 64 || args.mss > 65_000 {
        return Err(SynthError::InvalidArgs(format!(
            "--mss {} is outside 64..65000",
            args.mss
        )));
    }
    for (name, p) in [("loss", args.loss), ("reorder", args.reorder)] {
        if p.is_some_and(|p| !(0.0..=0.5).contains(&p)) {
            return Err(SynthError::InvalidArgs(format!(
                "--{name} must be between 0 and 0.5"
            )));
        }
    }
    let lossy = args.scenario == Scenario::LossyNetwork;
    let format = args.format.unwrap_or_else(|| format_of(&args.output));
    let interfaces = args
        .interfaces
        .unwrap_or(if lossy && format == Format::Pcapng {
            2
        } else {
            1
        })
        .max(1);
    if format == Format::Pcap && interfaces > 1 {
        return Err(SynthError::InvalidArgs(
            "several --interfaces need pcapng".into(),
        ));
    }
    let file = FileOptions {
        format: match format {
            Format::Pcap => FileFormat::Pcap,
            Format::Pcapng => FileFormat::Pcapng,
        },
        link_type: crate::capture::link::linktype::ETHERNET as u16,
        nanos: args.nanos,
        interfaces,
        snaplen: args.snaplen.unwrap_or(0),
    };
    let sink = Gzip::new(out, is_gzip(&args.output));
    let writer = FileWriter::new(sink, file).map_err(io_err)?;
    let rng = Rng::new(args.seed);
    let loss = args.loss.unwrap_or(if lossy { 0.004 } else { 0.0 });
    let net = NetConfig {
        mss: args.mss,
        loss: if args.loss_no_retransmit { 0.0 } else { loss },
        gap: if args.loss_no_retransmit {
            loss
        } else if lossy {
            0.001
        } else {
            0.0
        },
        reorder: args.reorder.unwrap_or(if lossy { 0.004 } else { 0.0 }),
        vlan: args.vlan.or(lossy.then_some(100)),
        delayed_ack_us: if args.delayed_ack { 200_000 } else { 200 },
        ..NetConfig::default()
    };
    let (sink, summary, mut truth) = match args.scenario {
        Scenario::SpecExamples if args.encrypt.is_some() || args.compress.is_some() => {
            return Err(SynthError::InvalidArgs(
                "--encrypt and --compress do not apply to spec-examples (no session setup)".into(),
            ));
        }
        Scenario::SpecExamples => {
            let wire = Wire::new(writer, net, rng.fork(7));
            let dialect = args
                .sqos_dialect
                .map_or(crate::sqos::Dialect::V1_1, DialectArg::dialect);
            examples::generate(wire, args.ipv6, dialect).map_err(io_err)?
        }
        Scenario::Large => {
            let size = args.size.unwrap_or(1 << 30);
            let cipher = args.encrypt.map(seal::CipherArg::cipher);
            let squeeze = args.compress.map(|a| squeeze::Squeezer {
                algorithm: a.algorithm(),
                chained: args.chained,
            });
            large::generate(writer, &net, size, args.ipv6, cipher, squeeze).map_err(io_err)?
        }
        _ => {
            let shape = scenario::Shape {
                hosts: args.hosts,
                vms: args.vms,
                disks: args.disks,
                duration_s: args.duration,
                ipv6: args.ipv6,
                interfaces,
                sizes_up_to_1mib: args.big_io,
                channels: args.channels,
            };
            let mut crng = rng.fork(3);
            let mut cluster = scenario::build(args.scenario, &shape, &mut crng);
            if let Some(d) = args.sqos_dialect {
                for h in cluster.hosts.iter_mut() {
                    h.sqos = d.dialect();
                }
            }
            let cipher = args.encrypt.map(seal::CipherArg::cipher);
            let squeeze = args.compress.map(|a| squeeze::Squeezer {
                algorithm: a.algorithm(),
                chained: args.chained,
            });
            if squeeze.is_some()
                || cipher.is_some_and(|c| c != crate::smb2::crypto::Cipher::Aes128Ccm)
            {
                // Compression is SMB 3.1.1's; SMB 3.0.2 encrypts with AES-128-CCM only.
                for h in cluster.hosts.iter_mut() {
                    h.smb_dialect = smb2::DIALECT_311;
                }
            }
            let mut net = net;
            if args.midstream {
                net.capture_from = Some(cluster.start + cluster.duration_us * 3 / 10);
            }
            let capture_from = net.capture_from;
            let wire = Wire::new(writer, net, rng.fork(4));
            let sim = sim::Sim::new(&cluster, wire, rng.fork(5))
                .encrypted(cipher)
                .compressed(squeeze);
            let (sink, res) = sim.run().map_err(io_err)?;
            let mut truth = res.truth(&cluster);
            truth.capture = truth::CaptureInfo {
                frames: res.frames,
                file_bytes: res.file_bytes,
                start_time: truth::secs(cluster.start),
                duration_s: cluster.duration_us as f64 / 1e6,
                capture_from: capture_from.map(truth::secs),
                retransmissions: res.retransmissions,
                reordered_segments: res.reordered,
                missing_segments: res.missing,
            };
            let summary = SynthSummary {
                frames: res.frames,
                capture_bytes: res.file_bytes,
                duration_s: cluster.duration_us as f64 / 1e6,
                flows: truth.flows.len(),
                sqos_requests: truth.totals.sqos_requests,
                ios: truth.totals.ios,
                io_bytes: truth.totals.bytes_read + truth.totals.bytes_written,
                keys: res.keys,
                ..SynthSummary::default()
            };
            (sink, summary, truth)
        }
    };
    let out = sink.finish().map_err(io_err)?;
    truth.generator = truth::GeneratorInfo {
        scenario: clap::ValueEnum::to_possible_value(&args.scenario)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default(),
        seed: args.seed,
        command: command_line(args),
    };
    let summary = SynthSummary {
        scenario: truth.generator.scenario.clone(),
        ..summary
    };
    Ok((out, summary, truth))
}

/// `sqos synth`: writes the capture (and the truth file when asked).
pub fn run(args: &SynthArgs) -> Result<SynthSummary, SynthError> {
    let io_err = |path: &Path| {
        let path = path.display().to_string();
        move |source| SynthError::Io { path, source }
    };
    let file = File::create(&args.output).map_err(io_err(&args.output))?;
    let out = BufWriter::with_capacity(1 << 20, file);
    let (mut out, summary, truth) = generate(args, out)?;
    out.flush().map_err(io_err(&args.output))?;
    if let Some(path) = &args.truth {
        let f = File::create(path).map_err(io_err(path))?;
        let mut w = BufWriter::new(f);
        serde_json::to_writer_pretty(&mut w, &truth)?;
        w.write_all(b"\n").map_err(io_err(path))?;
        w.flush().map_err(io_err(path))?;
    }
    if let Some(path) = &args.keys_out {
        std::fs::write(path, crate::smb2::crypto::keys::key_file(&summary.keys))
            .map_err(io_err(path))?;
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_suffixes() {
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("1XB").is_err());
        assert!(parse_size("99999999999GiB").is_err());
    }

    #[test]
    fn format_follows_extension() {
        assert_eq!(format_of(Path::new("a.pcapng.gz")), Format::Pcapng);
        assert_eq!(format_of(Path::new("a.pcap")), Format::Pcap);
        assert!(is_gzip(Path::new("x.pcap.gz")));
    }
}
