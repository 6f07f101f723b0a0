//! `sqos synth`: a deterministic generator of Hyper-V ↔ Scale-Out File Server traffic with
//! MS-SQOS, written as pcap or pcapng (optionally gzip-compressed), plus the generator's own
//! ground truth as JSON.
//!
//! Layers, each in its module: `rng` (seeded PRNG), `packet` (frame headers), `wire` (TCP and
//! time-ordered writing through the crate's one capture writer), `smb2` (message bytes; the
//! MS-SQOS buffers come from the codec's encoder), `server` (the MS-SQOS server rules),
//! `scenario` (what is simulated), `sim` (the cluster: hosts, VM I/O and the file server as
//! actors over one event loop), `session` (one client on one connection, set up once),
//! `examples` (the spec's example messages) and `large` (the benchmark stream) on it, `truth`.
//! [`SynthConfig`] is what to generate; the command line (src/cli/synth.rs) fills it.

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
use crate::smb2::compress::Algorithm;
use crate::smb2::crypto::Cipher;
use crate::sqos::Dialect;

pub use scenario::{DropKind, Scenario};
pub use truth::Truth;

use rng::Rng;
use wire::{NetConfig, Wire};

/// What [`generate`] writes: the scenario and every option of `sqos synth`, whose command line
/// (src/cli/synth.rs) fills it. `None` is the scenario's own choice.
#[derive(Clone, Debug)]
pub struct SynthConfig {
    pub scenario: Scenario,
    /// Seed of every random choice: the same seed and options give the same bytes.
    pub seed: u64,
    /// The capture's name: its extension picks the format (`.pcapng`) and gzip (`.gz`).
    pub output: PathBuf,
    /// File format (default: from the extension, else pcap).
    pub format: Option<FileFormat>,
    /// Bytes of READ/WRITE data for `large`.
    pub size: Option<u64>,
    pub hosts: Option<u32>,
    /// VMs per host.
    pub vms: Option<u32>,
    /// Virtual disks (logical flows) per VM.
    pub disks: Option<u32>,
    /// SMB3 multichannel: channels per host's session, 1 to 4.
    pub channels: Option<u32>,
    /// Capture length in seconds.
    pub duration: Option<f64>,
    /// Probability that a TCP data segment is lost (it is retransmitted after 200 ms).
    pub loss: Option<f64>,
    /// Lost segments are only missing from the capture (no retransmission: a real gap).
    pub loss_no_retransmit: bool,
    /// Probability that a server→client segment arrives after the next one.
    pub reorder: Option<f64>,
    pub vlan: Option<u16>,
    pub ipv6: bool,
    /// The capture starts mid-connection (its first 30 % is not written).
    pub midstream: bool,
    /// Capture interfaces (pcapng); hosts are spread over them.
    pub interfaces: Option<u32>,
    /// Receivers acknowledge an odd last segment after 200 ms.
    pub delayed_ack: bool,
    /// TCP payload bytes per full segment.
    pub mss: usize,
    pub nanos: bool,
    /// Keep only this many bytes of each frame.
    pub snaplen: Option<u32>,
    /// I/O sizes up to 1 MiB (default: 4-64 KiB).
    pub big_io: bool,
    /// SQOS dialect: of the spec examples (default 1.1), or of every host (default: mixed).
    pub sqos_dialect: Option<Dialect>,
    /// Where [`run`] writes the ground truth (JSON).
    pub truth: Option<PathBuf>,
    /// Encrypt every SMB3 session (after its SESSION_SETUP) with this cipher.
    pub encrypt: Option<Cipher>,
    /// Where [`run`] writes the sessions' keys (Wireshark's "SMB2 Secret Keys" file).
    pub keys_out: Option<PathBuf>,
    /// Negotiate SMB 3.1.1 compression with this algorithm (one of [`COMPRESSION_NAMES`]).
    pub compress: Option<Algorithm>,
    /// With `compress`: chained compression (and Pattern_V1).
    pub chained: bool,
}

/// TCP payload bytes per full segment unless told otherwise.
pub const DEFAULT_MSS: usize = 1448;

/// The names of the option values, as the command line takes them and [`command_line`] writes
/// them: (name, value, help).
pub type Names<T> = [(&'static str, T, &'static str)];

pub const FORMAT_NAMES: &Names<FileFormat> = &[
    ("pcap", FileFormat::Pcap, ""),
    ("pcapng", FileFormat::Pcapng, ""),
];
pub const DIALECT_NAMES: &Names<Dialect> =
    &[("1.0", Dialect::V1_0, ""), ("1.1", Dialect::V1_1, "")];
pub const CIPHER_NAMES: &Names<Cipher> = &[
    ("aes-128-ccm", Cipher::Aes128Ccm, ""),
    ("aes-128-gcm", Cipher::Aes128Gcm, ""),
    ("aes-256-ccm", Cipher::Aes256Ccm, ""),
    ("aes-256-gcm", Cipher::Aes256Gcm, ""),
];
/// The algorithms a session may be set to compress with.
pub const COMPRESSION_NAMES: &Names<Algorithm> = &[
    ("lznt1", Algorithm::Lznt1, ""),
    ("lz77", Algorithm::Lz77, ""),
    ("lz77-huffman", Algorithm::Lz77Huffman, ""),
];

/// The name of `v` in `table`.
pub fn name_of<T: PartialEq>(table: &Names<T>, v: T) -> &'static str {
    table.iter().find(|e| e.1 == v).map_or("", |e| e.0)
}

impl SynthConfig {
    /// A configuration with every option at its default.
    pub fn new(scenario: Scenario, output: impl Into<PathBuf>) -> SynthConfig {
        SynthConfig {
            scenario,
            seed: 1,
            output: output.into(),
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
            mss: DEFAULT_MSS,
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
fn format_of(path: &Path) -> FileFormat {
    let name = path.to_string_lossy().to_ascii_lowercase();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    if name.ends_with(".pcapng") {
        FileFormat::Pcapng
    } else {
        FileFormat::Pcap
    }
}

fn is_gzip(path: &Path) -> bool {
    path.to_string_lossy().to_ascii_lowercase().ends_with(".gz")
}

/// The command line that reproduces `cfg` (written into the truth and the README table).
pub fn command_line(cfg: &SynthConfig) -> String {
    let mut s = format!(
        "sqos synth --scenario {} --seed {}",
        cfg.scenario.name(),
        cfg.seed
    );
    let mut opt = |name: &str, v: Option<String>| {
        if let Some(v) = v {
            s.push_str(&format!(" --{name} {v}"));
        }
    };
    opt("size", cfg.size.map(|v| v.to_string()));
    opt("hosts", cfg.hosts.map(|v| v.to_string()));
    opt("vms", cfg.vms.map(|v| v.to_string()));
    opt("disks", cfg.disks.map(|v| v.to_string()));
    opt("channels", cfg.channels.map(|v| v.to_string()));
    opt("duration", cfg.duration.map(|v| v.to_string()));
    opt("loss", cfg.loss.map(|v| v.to_string()));
    opt("reorder", cfg.reorder.map(|v| v.to_string()));
    opt("vlan", cfg.vlan.map(|v| v.to_string()));
    opt("interfaces", cfg.interfaces.map(|v| v.to_string()));
    opt("snaplen", cfg.snaplen.map(|v| v.to_string()));
    opt("mss", (cfg.mss != DEFAULT_MSS).then(|| cfg.mss.to_string()));
    opt(
        "encrypt",
        cfg.encrypt.map(|c| name_of(CIPHER_NAMES, c).to_string()),
    );
    opt(
        "compress",
        cfg.compress
            .map(|a| name_of(COMPRESSION_NAMES, a).to_string()),
    );
    opt(
        "sqos-dialect",
        cfg.sqos_dialect
            .map(|d| name_of(DIALECT_NAMES, d).to_string()),
    );
    for (flag, on) in [
        ("loss-no-retransmit", cfg.loss_no_retransmit),
        ("ipv6", cfg.ipv6),
        ("midstream", cfg.midstream),
        ("chained", cfg.chained),
        ("delayed-ack", cfg.delayed_ack),
        ("nanos", cfg.nanos),
        ("big-io", cfg.big_io),
    ] {
        if on {
            s.push_str(&format!(" --{flag}"));
        }
    }
    s.push_str(&format!(" -o {}", cfg.output.display()));
    s
}

/// Generates the capture described by `cfg` into `out` (compressed if the output name ends in
/// `.gz`). Returns the writer, a summary and the ground truth.
pub fn generate<W: Write>(
    cfg: &SynthConfig,
    out: W,
) -> Result<(W, SynthSummary, Truth), SynthError> {
    let io_err = |source| SynthError::Io {
        path: cfg.output.display().to_string(),
        source,
    };
    if cfg.mss < 64 || cfg.mss > 65_000 {
        return Err(SynthError::InvalidArgs(format!(
            "--mss {} is outside 64..65000",
            cfg.mss
        )));
    }
    for (name, p) in [("loss", cfg.loss), ("reorder", cfg.reorder)] {
        if p.is_some_and(|p| !(0.0..=0.5).contains(&p)) {
            return Err(SynthError::InvalidArgs(format!(
                "--{name} must be between 0 and 0.5"
            )));
        }
    }
    if cfg
        .compress
        .is_some_and(|a| !COMPRESSION_NAMES.iter().any(|e| e.1 == a))
    {
        return Err(SynthError::InvalidArgs(
            "compression is LZNT1, LZ77 or LZ77+Huffman".into(),
        ));
    }
    let lossy = cfg.scenario == Scenario::LossyNetwork;
    let format = cfg.format.unwrap_or_else(|| format_of(&cfg.output));
    let interfaces = cfg
        .interfaces
        .unwrap_or(if lossy && format == FileFormat::Pcapng {
            2
        } else {
            1
        })
        .max(1);
    if format == FileFormat::Pcap && interfaces > 1 {
        return Err(SynthError::InvalidArgs(
            "several --interfaces need pcapng".into(),
        ));
    }
    let file = FileOptions {
        format,
        link_type: crate::capture::link::linktype::ETHERNET as u16,
        nanos: cfg.nanos,
        interfaces,
        snaplen: cfg.snaplen.unwrap_or(0),
    };
    let sink = Gzip::new(out, is_gzip(&cfg.output));
    let writer = FileWriter::new(sink, file).map_err(io_err)?;
    let rng = Rng::new(cfg.seed);
    let loss = cfg.loss.unwrap_or(if lossy { 0.004 } else { 0.0 });
    let net = NetConfig {
        mss: cfg.mss,
        loss: if cfg.loss_no_retransmit { 0.0 } else { loss },
        gap: if cfg.loss_no_retransmit {
            loss
        } else if lossy {
            0.001
        } else {
            0.0
        },
        reorder: cfg.reorder.unwrap_or(if lossy { 0.004 } else { 0.0 }),
        vlan: cfg.vlan.or(lossy.then_some(100)),
        delayed_ack_us: if cfg.delayed_ack { 200_000 } else { 200 },
        ..NetConfig::default()
    };
    let (sink, summary, mut truth) = match cfg.scenario {
        Scenario::SpecExamples if cfg.encrypt.is_some() || cfg.compress.is_some() => {
            return Err(SynthError::InvalidArgs(
                "--encrypt and --compress do not apply to spec-examples (no session setup)".into(),
            ));
        }
        Scenario::SpecExamples => {
            let wire = Wire::new(writer, net, rng.fork(7));
            let dialect = cfg.sqos_dialect.unwrap_or(Dialect::V1_1);
            examples::generate(wire, cfg.ipv6, dialect).map_err(io_err)?
        }
        Scenario::Large => {
            let size = cfg.size.unwrap_or(1 << 30);
            let squeeze = cfg.compress.map(|algorithm| squeeze::Squeezer {
                algorithm,
                chained: cfg.chained,
            });
            large::generate(writer, &net, size, cfg.ipv6, cfg.encrypt, squeeze).map_err(io_err)?
        }
        _ => {
            let shape = scenario::Shape {
                hosts: cfg.hosts,
                vms: cfg.vms,
                disks: cfg.disks,
                duration_s: cfg.duration,
                ipv6: cfg.ipv6,
                interfaces,
                sizes_up_to_1mib: cfg.big_io,
                channels: cfg.channels,
            };
            let mut crng = rng.fork(3);
            let mut cluster = scenario::build(cfg.scenario, &shape, &mut crng);
            if let Some(d) = cfg.sqos_dialect {
                for h in cluster.hosts.iter_mut() {
                    h.sqos = d;
                }
            }
            let cipher = cfg.encrypt;
            let squeeze = cfg.compress.map(|algorithm| squeeze::Squeezer {
                algorithm,
                chained: cfg.chained,
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
            if cfg.midstream {
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
        scenario: cfg.scenario.name().to_string(),
        seed: cfg.seed,
        command: command_line(cfg),
    };
    let summary = SynthSummary {
        scenario: truth.generator.scenario.clone(),
        ..summary
    };
    Ok((out, summary, truth))
}

/// `sqos synth`: writes the capture (and the truth file when asked).
pub fn run(cfg: &SynthConfig) -> Result<SynthSummary, SynthError> {
    let io_err = |path: &Path| {
        let path = path.display().to_string();
        move |source| SynthError::Io { path, source }
    };
    let file = File::create(&cfg.output).map_err(io_err(&cfg.output))?;
    let out = BufWriter::with_capacity(1 << 20, file);
    let (mut out, summary, truth) = generate(cfg, out)?;
    out.flush().map_err(io_err(&cfg.output))?;
    if let Some(path) = &cfg.truth {
        let f = File::create(path).map_err(io_err(path))?;
        let mut w = BufWriter::new(f);
        serde_json::to_writer_pretty(&mut w, &truth)?;
        w.write_all(b"\n").map_err(io_err(path))?;
        w.flush().map_err(io_err(path))?;
    }
    if let Some(path) = &cfg.keys_out {
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
        assert_eq!(format_of(Path::new("a.pcapng.gz")), FileFormat::Pcapng);
        assert_eq!(format_of(Path::new("a.pcap")), FileFormat::Pcap);
        assert!(is_gzip(Path::new("x.pcap.gz")));
    }
}
