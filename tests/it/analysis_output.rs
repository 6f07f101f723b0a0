//! The faces of the analysis: flow JSON keys, the text table, CSV, the SVG plot.

use crate::analysis_kit::*;
use sqos::output::columns::{flow_flat, flow_row, FLOW_COLUMNS};
use sqos::output::csv::CsvTable;
use sqos::output::flows::{flow_json, flows_json, flows_text};
use sqos::output::plot::{iops_svg, PlotOptions};
use sqos::sqos::Status;

fn two_flows() -> sqos::analysis::Analysis {
    let mut k = Kit::default();
    Steady {
        updates: 8,
        ..Steady::default()
    }
    .run(&mut k, 0.0);
    Steady {
        file: 2,
        flow: FLOW2,
        iops: 320,
        max: 200,
        min: 100,
        updates: 8,
        status: Status::OK,
        ..Steady::default()
    }
    .run(&mut k, 0.5);
    k.finish()
}

#[test]
fn flow_json_has_the_documented_keys_and_values() {
    let a = two_flows();
    let v = flows_json(&a);
    let arr = v.as_array().expect("array");
    assert_eq!(arr.len(), 2);
    let f = &arr[0];
    for key in [
        "logical_flow_id",
        "initiator_id",
        "initiator_name",
        "initiator_node_name",
        "policy_id",
        "protocol_version",
        "opens",
        "limit",
        "reservation",
        "bandwidth_limit",
        "maximum_io_rate",
        "minimum_io_rate",
        "maximum_bandwidth",
        "base_io_size",
        "last_status",
        "iops",
        "normalized_iops",
        "avg_latency_ms",
        "avg_lower_latency_ms",
        "kilobytes_per_second",
        "observed",
        "findings",
    ] {
        assert!(f.get(key).is_some(), "missing {key}");
    }
    assert_eq!(f["logical_flow_id"], FLOW.to_string());
    assert_eq!(f["initiator_name"], "VM01");
    assert_eq!(f["initiator_node_name"], "HV-01");
    assert_eq!(f["initiator_id"], INITIATOR.to_string());
    assert_eq!(f["protocol_version"], 0x0101);
    assert_eq!(f["opens"][0]["file_name"], "vms\\vm01\\disk0.vhdx");
    assert_eq!(f["limit"], 500);
    assert_eq!(f["reservation"], 50);
    assert_eq!(f["maximum_io_rate"], 500);
    assert_eq!(f["minimum_io_rate"], 50);
    assert_eq!(f["base_io_size"], 8192);
    assert_eq!(f["last_status"], 0);
    assert_eq!(f["iops"], 100.0);
    assert_eq!(f["avg_latency_ms"], 2.0);
    assert_eq!(f["avg_lower_latency_ms"], 2.0);
    assert_eq!(f["kilobytes_per_second"], 800.0);
    assert_eq!(f["observed"]["iops"], 100.0);
    assert_eq!(f["observed"]["kilobytes_per_second"], 800.0);
    for key in [
        "iops",
        "normalized_iops",
        "kilobytes_per_second",
        "avg_response_ms",
    ] {
        assert!(f["observed"].get(key).is_some(), "observed.{key}");
    }
    let g = &arr[1];
    let finding = &g["findings"][0];
    assert_eq!(finding["code"], "flow.exceeds_max_io_rate");
    assert_eq!(finding["severity"], "error");
    for key in ["message", "frame", "time"] {
        assert!(finding.get(key).is_some(), "finding.{key}");
    }
}

#[test]
fn text_table_names_the_vms_and_lists_findings() {
    let a = two_flows();
    let t = flows_text(&a);
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].starts_with("VM / INITIATOR"), "{t}");
    assert!(lines[1].starts_with("VM01 "), "{t}");
    assert!(lines[1].contains("lim 500 res 50"), "{t}");
    assert!(lines[1].contains("100/100"), "{t}");
    assert!(lines[2].starts_with("VM02 "), "{t}");
    assert!(lines[2].contains("320/320"), "{t}");
    assert!(t.contains("Findings:"), "{t}");
    assert!(t.contains("flow.exceeds_max_io_rate"), "{t}");
    assert!(t.contains("(×8 intervals"), "{t}");
}

#[test]
fn csv_has_one_row_per_flow() {
    let a = two_flows();
    let mut buf = Vec::new();
    let mut t = CsvTable::new(&mut buf, FLOW_COLUMNS).expect("header");
    for f in &a.flows {
        t.row(&flow_row(f)).expect("row");
    }
    t.finish().expect("flush");
    let text = String::from_utf8_lossy(&buf).to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with("logical_flow_id,initiator_id,initiator_name"));
    assert!(
        lines[2].ends_with(",1,flow.exceeds_max_io_rate"),
        "{}",
        lines[2]
    );
    assert!(lines[1].contains(",vms\\vm01\\disk0.vhdx,"), "{}", lines[1]);
}

#[test]
fn svg_has_a_panel_per_flow_with_limit_lines() {
    let a = two_flows();
    let svg = iops_svg(&a, &PlotOptions::default());
    assert!(svg.starts_with("<svg"));
    assert!(svg.trim_end().ends_with("</svg>"));
    // Flows with findings come first.
    let vm02 = svg.find("VM02 on HV-01").expect("VM02 panel");
    let vm01 = svg.find("VM01 on HV-01").expect("VM01 panel");
    assert!(vm02 < vm01);
    assert_eq!(
        svg.matches("stroke=\"#d62728\" stroke-width=\"2\"").count(),
        2
    );
    assert!(svg.contains("<title>flow.exceeds_max_io_rate"));
    if let Ok(dir) = std::env::var("SQOS_PLOT_DIR") {
        let _ = std::fs::write(format!("{dir}/analysis_test.svg"), &svg);
    }
}

/// `sqos plot -o x.png` on the noisy-neighbour capture: a real PNG twice the SVG's size in which
/// the reported series, the MaximumIoRate line and the finding marks were actually painted.
#[test]
fn plot_cli_writes_png_and_svg_from_a_capture() {
    let tmp = crate::support::scratch("sqos-plot-");
    let dir = tmp.path();
    let capture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/captures/noisy-neighbour.pcapng.gz"
    );
    let plot = |name: &str| {
        let out = dir.join(name);
        let st = std::process::Command::new(env!("CARGO_BIN_EXE_sqos"))
            .args(["plot", "--quiet", capture, "-o"])
            .arg(&out)
            .status()
            .expect("run sqos plot");
        (st.code(), out)
    };
    let (code, svg_path) = plot("iops.svg");
    assert_eq!(
        code,
        Some(0),
        "a readable capture: exit 0 (findings do not change it)"
    );
    let svg = std::fs::read_to_string(&svg_path).expect("svg");
    let dim = |key: &str| -> u32 {
        let at = svg.find(&format!("{key}=\"")).expect(key) + key.len() + 2;
        svg[at..]
            .split('"')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("number")
    };
    let (sw, sh) = (dim("width"), dim("height"));

    let (code, png_path) = plot("iops.png");
    assert_eq!(code, Some(0));
    let png = std::fs::read(&png_path).expect("png");
    let mut d = png::Decoder::new(std::io::Cursor::new(&png[..]))
        .read_info()
        .expect("png header");
    let mut px = vec![0; d.output_buffer_size().expect("size")];
    let info = d.next_frame(&mut px).expect("frame");
    assert_eq!((info.width, info.height), (2 * sw, 2 * sh));
    assert_eq!(info.color_type, png::ColorType::Rgba);
    let count = |rgb: [u8; 3]| px.chunks_exact(4).filter(|p| p[..3] == rgb).count();
    // Reported series (#1f77b4), MaximumIoRate (#d62728), MinimumIoRate (#2ca02c): each drawn
    // as lines of many pixels, not just present in the legend swatch.
    for (name, rgb) in [
        ("reported", [0x1f, 0x77, 0xb4]),
        ("maximum", [0xd6, 0x27, 0x28]),
        ("minimum", [0x2c, 0xa0, 0x2c]),
    ] {
        assert!(count(rgb) > 400, "{name}: {} pixels", count(rgb));
    }
    // Text is rendered with the embedded font: dark pixels in the title band (top 30 units).
    let title_dark = px[..(info.width * 60 * 4) as usize]
        .chunks_exact(4)
        .filter(|p| p[0] < 80 && p[1] < 80 && p[2] < 80)
        .count();
    assert!(title_dark > 500, "title not drawn: {title_dark}");

    let st = std::process::Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(["plot", capture, "-o"])
        .arg(dir.join("iops.jpg"))
        .output()
        .expect("run");
    assert_eq!(st.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&st.stderr).contains(".svg or .png"));
}

/// `sqos annotate` on the plugin's flows capture: the header, each message with the flow it
/// belongs to (and how that is known), the interval figures on the answers to UPDATE_COUNTERS,
/// the flow's state after the message; then the flows, the `sqos flows` text and the end.
#[test]
fn annotate_cli_gives_each_message_its_flow_and_figures() {
    let capture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/plugin/test/sqos-plugin-flows.pcap"
    );
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sqos"))
            .args(args)
            .arg(capture)
            .output()
            .expect("run sqos");
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let text = run(&["annotate"]);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    // Message lines are written straight from the record, not through a map: their keys (and
    // every nested object's) still come in the order a map gives them, alphabetical, as
    // before, so the same capture gives the same bytes.
    for (line, v) in text.lines().zip(&lines) {
        assert_eq!(serde_json::to_string(v).expect("writes"), line);
    }
    assert!(lines.iter().filter(|v| v["type"] == "message").count() > 10);
    assert_eq!(lines[0]["type"], "header");
    assert_eq!(lines[0]["format"], "sqos-annotate");
    assert_eq!(lines[0]["version"], 1);
    assert_eq!(lines[0]["sqos"], env!("CARGO_PKG_VERSION"));
    let msg = |frame: u64, id: u64| -> &serde_json::Value {
        lines
            .iter()
            .find(|v| v["message"]["frame"] == frame && v["message"]["msg_id"] == id)
            .unwrap_or_else(|| panic!("no message {id} in frame {frame}"))
    };
    let close = |v: &serde_json::Value, want: f64| {
        v.as_f64()
            .is_some_and(|x| (x - want).abs() <= 1e-9 * want.abs().max(1.0))
    };
    let a = "b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e";
    let b = "5d0c5f2a-6f3e-4c61-9a55-0b8c6d1e2f30";
    // SET_LOGICAL_FLOW_ID: the request names the flow; its answer finds the open associated.
    assert_eq!(msg(13, 2)["flow"], a);
    assert_eq!(msg(13, 2)["flow_from"], "message");
    assert_eq!(msg(14, 2)["flow_from"], "open");
    assert_eq!(msg(14, 2)["flow_state"]["updates_applied"], 0);
    // Counters on an open not associated: NOT_FOUND, no flow, no figures.
    let nf = msg(12, 2);
    assert_eq!(nf["message"]["nt_status"], 0xC000_0225u32);
    assert!(nf.get("flow").is_none() && nf.get("interval").is_none());
    // The first update opens the series; the next closes a 1 s interval.
    assert_eq!(msg(22, 4)["first_update"], true);
    assert!(msg(22, 4).get("interval").is_none());
    let i = &msg(24, 5)["interval"];
    for (k, want) in [
        ("seconds", 1.0),
        ("iops", 400.0),
        ("normalized_iops", 420.0),
        ("avg_latency_ms", 0.5),
        ("avg_lower_latency_ms", 0.45),
        ("kilobytes_per_second", 3360.0),
    ] {
        assert!(close(&i[k], want), "{k}: {}", i[k]);
    }
    // The request shows no figures: they come with its answer.
    assert!(msg(23, 5).get("interval").is_none());
    assert_eq!(msg(23, 5)["dialect"], "1.1");
    // Flow B (dialect 1.0) every 2 s, no KB/s.
    let i = &msg(32, 6)["interval"];
    assert!(close(&i["seconds"], 2.0) && close(&i["iops"], 175.0));
    assert!(i["kilobytes_per_second"].is_null());
    assert_eq!(msg(32, 6)["flow"], b);
    // The flow after the policy change.
    let s = &msg(34, 8)["flow_state"];
    assert_eq!(s["limit"], 800);
    assert_eq!(s["maximum_io_rate"], 800);
    assert_eq!(s["updates_applied"], 4);
    assert_eq!(s["initiator_name"], "VM07");
    // Then the flows, the table, the end.
    let of = |t: &str| lines.iter().filter(|v| v["type"] == t).collect::<Vec<_>>();
    let flows = of("flow");
    assert_eq!(flows.len(), 2);
    assert_eq!(flows[0]["flow"]["logical_flow_id"], a);
    assert_eq!(flows[0]["flow"]["updates_sent"], 4);
    assert_eq!(of("flows_text")[0]["text"], run(&["flows"]).as_str());
    let end = lines.last().expect("end");
    assert_eq!(end["type"], "end");
    assert_eq!(end["frames"], 34);
    assert!(end.get("error").is_none());
    assert_eq!(of("message").len(), 24);
}

/// A flow's row (tables, filters) is made without the timeline: it must be the flat object of
/// the whole flow JSON (a saved table's, a baseline's), which leaves the timeline's keys out,
/// as no column holds them.
#[test]
fn a_flow_row_is_the_flat_flow_json_without_its_timeline() {
    let a = two_flows();
    for f in &a.flows {
        let whole = flow_json(f);
        assert!(whole["timeline"].as_array().is_some_and(|t| !t.is_empty()));
        assert!(whole.get("timeline_dropped").is_some());
        let row = flow_row(f);
        assert_eq!(row, flow_flat(&whole));
        assert!(!row.contains_key("timeline") && !row.contains_key("timeline_dropped"));
        for c in FLOW_COLUMNS {
            assert!(row.contains_key(c.name), "{}", c.name);
        }
    }
}
