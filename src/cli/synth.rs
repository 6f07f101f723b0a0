//! `sqos synth`: the command line of the generator. The library's [`SynthConfig`] is what it
//! fills; the names of the values (scenarios, ciphers, algorithms, dialects, formats) are the
//! library's tables, offered here as clap's possible values.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use sqos::capture::writer::FileFormat;
use sqos::smb2::compress::Algorithm;
use sqos::smb2::crypto::Cipher;
use sqos::sqos::Dialect;
use sqos::synth::{self, parse_size, Scenario, SynthConfig};

/// Options of `sqos synth`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = "\
Examples:
  sqos synth --scenario noisy-neighbour -o nn.pcapng.gz
  sqos synth --scenario lossy-network --loss 0.01 --seed 7 -o lossy.pcap --truth lossy.json
  sqos synth --scenario large --size 1GiB -q -o big.pcap")]
pub struct SynthArgs {
    /// What to simulate.
    #[arg(long, default_value = "steady", value_parser = named(Scenario::NAMES))]
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
    #[arg(long, value_parser = named(synth::FORMAT_NAMES))]
    pub format: Option<FileFormat>,
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
    #[arg(long, default_value_t = synth::DEFAULT_MSS)]
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
    #[arg(long, value_parser = named(synth::DIALECT_NAMES))]
    pub sqos_dialect: Option<Dialect>,
    /// Write the generator's ground truth (JSON) here.
    #[arg(long)]
    pub truth: Option<PathBuf>,
    /// Encrypt every SMB3 session (after its SESSION_SETUP) with this cipher. AES-128-CCM
    /// keeps the scenario's SMB dialects (3.0.2 and 3.1.1); the others need 3.1.1, which every
    /// host then speaks.
    #[arg(long, value_name = "CIPHER", value_parser = named(synth::CIPHER_NAMES))]
    pub encrypt: Option<Cipher>,
    /// Write the sessions' keys here, as Wireshark's "SMB2 Secret Keys" file (for `--keys`).
    #[arg(long, value_name = "FILE", requires = "encrypt")]
    pub keys_out: Option<PathBuf>,
    /// Negotiate SMB 3.1.1 compression with this algorithm (every host then speaks 3.1.1)
    /// and send every message after SESSION_SETUP compressed when that makes it smaller.
    #[arg(long, value_name = "ALGO", value_parser = named(synth::COMPRESSION_NAMES))]
    pub compress: Option<Algorithm>,
    /// With `--compress`: negotiate chained compression (and Pattern_V1) and send chained
    /// messages.
    #[arg(long, requires = "compress")]
    pub chained: bool,
}

/// A parser offering the names of a library table (name, value, help) as possible values.
fn named<T: Copy + Send + Sync + 'static>(
    table: &'static [(&'static str, T, &'static str)],
) -> impl TypedValueParser<Value = T> {
    let values = table.iter().map(|&(name, _, help)| {
        let v = PossibleValue::new(name);
        if help.is_empty() {
            v
        } else {
            v.help(help)
        }
    });
    PossibleValuesParser::new(values).try_map(move |s: String| {
        table
            .iter()
            .find(|e| e.0 == s)
            .map(|e| e.1)
            .ok_or_else(|| format!("unknown value {s}"))
    })
}

/// The options named once, taken out of [`SynthArgs`] in full and put into [`SynthConfig`] in
/// full (no `..` either side): an option or a field added to one struct without the other does
/// not compile.
macro_rules! synth_config {
    ($args:expr; $($field:ident),* $(,)?) => {{
        let SynthArgs { $($field,)* quiet: _ } = $args;
        SynthConfig { $($field),* }
    }};
}

impl SynthArgs {
    /// The library's configuration these options describe: every option but `quiet` is a field
    /// of [`SynthConfig`] with the same name.
    ///
    /// Why a copy and not one type: clap's derive must sit on the type it parses into, clap
    /// stays out of the library (issue 17), and the orphan rule forbids implementing
    /// `clap::Args` here for the library's `SynthConfig`.
    pub fn config(&self) -> SynthConfig {
        synth_config!(
            self.clone();
            scenario,
            seed,
            output,
            format,
            size,
            hosts,
            vms,
            disks,
            channels,
            duration,
            loss,
            loss_no_retransmit,
            reorder,
            vlan,
            ipv6,
            midstream,
            interfaces,
            delayed_ack,
            mss,
            nanos,
            snaplen,
            big_io,
            sqos_dialect,
            truth,
            encrypt,
            keys_out,
            compress,
            chained,
        )
    }
}

/// `sqos synth`: write a generated capture and say what is in it on stderr.
pub fn run(a: &SynthArgs) -> i32 {
    match synth::run(&a.config()) {
        Ok(_) if a.quiet => 0,
        Ok(s) => {
            eprintln!(
                "{}: {} frames, {} bytes, {:.1} s, {} flows, {} SQOS requests, {} I/Os ({} bytes)",
                s.scenario,
                s.frames,
                s.capture_bytes,
                s.duration_s,
                s.flows,
                s.sqos_requests,
                s.ios,
                s.io_bytes
            );
            0
        }
        Err(e) => {
            eprintln!("sqos synth: {e}");
            2
        }
    }
}
