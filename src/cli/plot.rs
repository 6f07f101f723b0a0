//! `sqos plot CAPTURE -o iops.svg|iops.png`: per-flow normalized IOPS over time with the limit
//! lines. The format follows the file's extension.

use std::path::PathBuf;

use clap::Args;

use sqos::analysis::Analyzer;
use sqos::output::plot::{iops_svg, PlotOptions};
use sqos::output::png::svg_to_png;

use super::InputArgs;

#[derive(Args)]
pub struct PlotArgs {
    #[command(flatten)]
    input: InputArgs,
    /// The file to write: `.svg` or `.png`.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// PNG only: pixels per SVG unit (2 suits high-density screens and slides).
    #[arg(long, default_value_t = 2.0)]
    scale: f32,
    /// Only this flow (GUID prefix or initiator name); repeat for several.
    #[arg(long = "flow", value_name = "FLOW")]
    flows: Vec<String>,
    /// At most this many flows, one panel each (flows with findings first, then the busiest).
    #[arg(long, default_value_t = 12)]
    max_flows: usize,
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
    let mut analyzer = Analyzer::new(a.input.analyzer_config());
    let result = match super::read_capture(&a.input, &mut analyzer) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let analysis = analyzer.finish();
    let svg = iops_svg(
        &analysis,
        &PlotOptions {
            select: a.flows.clone(),
            max_flows: a.max_flows,
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
