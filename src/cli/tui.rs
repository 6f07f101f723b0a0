//! `sqos tui`: the interactive terminal UI (see `sqos::tui`).

use std::path::PathBuf;

use clap::Args;

use sqos::filter::Context;
use sqos::pipeline::PipelineConfig;
use sqos::tui::live::Selection;
use sqos::tui::source::Input;
use sqos::tui::store::DEFAULT_MAX_MESSAGES;
use sqos::tui::{run, TuiOptions};

#[derive(Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["capture", "read_file", "interface"])))]
#[command(after_help = "\
Examples:
  sqos tui -r captures/steady.pcap.gz
  sqos tui --follow /var/tmp/smb.pcapng --vm 'vm0*'
  sudo sqos tui -i eth0 -Y 'flow.normalized_iops > flow.maximum_io_rate or findings'")]
pub struct TuiArgs {
    /// pcap or pcapng file (gzip allowed); `-` reads a capture stream from standard input.
    capture: Option<PathBuf>,
    /// The capture to read, as tshark takes it (instead of CAPTURE).
    #[arg(
        short = 'r',
        long = "read-file",
        value_name = "FILE",
        conflicts_with = "capture"
    )]
    read_file: Option<PathBuf>,
    /// Follow FILE while it grows (a capture still being written by dumpcap or tcpdump).
    #[arg(long, conflicts_with = "interface")]
    follow: bool,
    /// Capture live from this interface by running `tcpdump` (needs tcpdump installed, and
    /// root or CAP_NET_RAW + CAP_NET_ADMIN).
    #[arg(
        short = 'i',
        long = "interface",
        value_name = "IFACE",
        conflicts_with_all = ["capture", "read_file"]
    )]
    interface: Option<String>,
    /// Extra TCP ports to treat as SMB (445 always is).
    #[arg(long = "port", value_name = "PORT")]
    ports: Vec<u16>,
    /// SMB3 keys for encrypted sessions (Wireshark's `smb2_seskey_list` file). Repeatable.
    #[arg(long = "keys", value_name = "FILE", value_parser = super::load_key_file_arg)]
    keys: Vec<super::KeyFileArg>,
    /// Most SQOS messages kept for the Messages view (the oldest go first).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_MESSAGES)]
    max_messages: usize,
    #[command(flatten)]
    filter: super::filter::FilterArgs,
    #[command(flatten)]
    memory: super::MemoryArg,
}

pub fn run_tui(a: &TuiArgs) -> i32 {
    let messages = match a.filter.build(Context::Messages) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let flows = match a.filter.build(Context::Flows) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let input = match (&a.interface, a.capture.as_ref().or(a.read_file.as_ref())) {
        (Some(name), _) => Input::Interface {
            name: name.clone(),
            ports: a.ports.clone(),
        },
        (None, Some(p)) if p.as_os_str() == "-" => {
            if a.follow {
                eprintln!("sqos: --follow needs a file, not `-`");
                return 2;
            }
            Input::Stdin
        }
        (None, Some(p)) if a.follow => Input::Follow(p.clone()),
        (None, Some(p)) => Input::File(p.clone()),
        (None, None) => {
            eprintln!("sqos: tui needs a capture file, `-`, or -i IFACE");
            return 2;
        }
    };
    run(TuiOptions {
        input,
        pipeline: PipelineConfig {
            keys: super::key_ring(&a.keys),
            ..PipelineConfig::default()
        }
        .with_ports(&a.ports)
        .with_memory(a.memory.budget()),
        max_messages: a.max_messages,
        selection: Selection {
            messages,
            flows,
            ..Selection::default()
        },
    })
}
