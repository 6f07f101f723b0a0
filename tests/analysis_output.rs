//! The faces of the analysis: flow JSON keys, the text table, CSV, the SVG plot.

mod analysis_kit;

use analysis_kit::*;
use sqos::output::csv::{flow_flat, CsvTable, FLOW_COLUMNS};
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
        t.row(&flow_flat(&flow_json(f))).expect("row");
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
