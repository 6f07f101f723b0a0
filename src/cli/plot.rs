//! `sqos plot CAPTURE -o iops.svg|iops.png`: per-flow normalized IOPS over time with the limit
//! lines. The format follows the file's extension.

use std::path::PathBuf;

use clap::Args;

use sqos::output::plot::{iops_svg, PlotOptions};
use sqos::output::png::svg_to_png;

use super::filter::FilterArgs;
use super::InputArgs;

#[derive(Args)]
#[command(after_help = "\
Examples:
  sqos plot captures/noisy-neighbour.pcapng.gz -o iops.svg
  sqos plot capture.pcapng --vm vm01 --vm vm02 -o vms.png --scale 3 --same-scale
  sqos plot capture.pcapng --finding 'flow.exceeds_*' --time 60..120 -o breaches.svg")]
pub struct PlotArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// The file to write: `.svg` or `.png`.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// PNG only: pixels per SVG unit (2 suits high-density screens and slides).
    #[arg(long, default_value_t = 2.0)]
    scale: f32,
    #[command(flatten)]
    filter: FilterArgs,
    /// At most this many flows, one panel each (flows with findings first, then the busiest).
    #[arg(long, default_value_t = 12)]
    max_flows: usize,
    /// One IOPS scale for every panel, so that flows compare at a glance (default: each panel
    /// scaled to its own flow).
    #[arg(long)]
    same_scale: bool,
}

pub fn run(a: &PlotArgs) -> i32 {
    let ext = a
        .output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let png = match ext.as_deref() {
        Some("svg") => false,
        Some("png") => true,
        _ => {
            eprintln!(
                "sqos: {}: name the output .svg or .png (the extension chooses the format)",
                a.output.display()
            );
            return 2;
        }
    };
    if png && !(a.scale > 0.0 && a.scale <= 8.0) {
        eprintln!("sqos: --scale {}: give a value in (0, 8]", a.scale);
        return 2;
    }
    let (analysis, result) = match super::analyze_flows(&a.input, &a.filter) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let svg = iops_svg(
        &analysis,
        &PlotOptions {
            max_flows: a.max_flows,
            capture: Some(capture_name(&a.input)),
            shared_scale: a.same_scale,
            ..PlotOptions::default()
        },
    );
    let bytes = if png {
        match svg_to_png(&svg, a.scale) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("sqos: {}: {e}", a.output.display());
                return 2;
            }
        }
    } else {
        svg.into_bytes()
    };
    if let Err(e) = std::fs::write(&a.output, bytes) {
        eprintln!("sqos: {}: {e}", a.output.display());
        return 2;
    }
    super::finish(&a.input, &result)
}

/// The capture as the title names it: its file name (standard input: "stdin"; several files:
/// how many).
fn capture_name(input: &InputArgs) -> String {
    match input.captures.as_slice() {
        [path] if path.as_os_str() == "-" => "stdin".into(),
        [path] => path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        _ => input.label(),
    }
}
