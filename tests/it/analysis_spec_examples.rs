//! The spec's own examples (sections 4.2 and 4.3, captures made by `sqos synth --scenario
//! spec-examples`) give the flow state the spec describes: the open associated with flow
//! b13a32e4…, the policy and initiator of the SET_POLICY, and the 4.3 response's limits.

use std::process::Command;

use serde_json::Value;

fn flows(capture: &str) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(["flows", "--format", "json", "--quiet"])
        .arg(format!("{}/captures/{capture}", env!("CARGO_MANIFEST_DIR")))
        .output()
        .expect("run sqos flows");
    assert!(
        out.status.success(),
        "sqos flows failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("flows JSON")
}

fn check_common(f: &Value) {
    assert_eq!(f["logical_flow_id"], "b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e");
    assert_eq!(f["policy_id"], "04b4f24e-b3e9-4594-adaa-e327528de54b");
    assert_eq!(f["initiator_id"], "1b9e4dc6-f8c0-419f-8785-8065bcff7284");
    assert_eq!(f["maximum_io_rate"], 100);
    assert_eq!(f["minimum_io_rate"], 0);
    assert_eq!(f["last_status"], 0);
    assert_eq!(f["limit"], 0);
    assert_eq!(f["reservation"], 0);
    let opens = f["opens"].as_array().expect("opens");
    assert_eq!(opens.len(), 1);
    assert_eq!(opens[0]["file_name"], "\\\\sofs\\vms\\TEST-VM\\disk0.vhdx");
    // The example exchange follows every rule the analysis checks.
    assert_eq!(
        f["findings"].as_array().map(Vec::len),
        Some(0),
        "{:#}",
        f["findings"]
    );
}

#[test]
fn spec_examples_dialect_1_0_give_the_described_state() {
    let fl = flows("spec-examples-1.0.pcap");
    assert_eq!(fl.len(), 1);
    let f = &fl[0];
    check_common(f);
    assert_eq!(f["protocol_version"], 0x0100);
    assert_eq!(f["base_io_size"], 8192);
    // InitiatorNameOffset 104 lies inside the 112-byte fixed part: no name (codec decision 6);
    // the node name is read where its offset 118 points, as a server going by the offsets would.
    assert_eq!(f["initiator_name"], Value::Null);
    assert_eq!(
        f["initiator_node_name"],
        "T-VMHYPERV-TEST.ntdev.corp.microsoft"
    );
}

#[test]
fn spec_examples_dialect_1_1_decode_the_response_by_the_structure() {
    let fl = flows("spec-examples-1.1.pcap");
    assert_eq!(fl.len(), 1);
    let f = &fl[0];
    check_common(f);
    assert_eq!(f["protocol_version"], 0x0101);
    // Section 4.3's 1.1 response read by the structure layout (BaseIoSize @80,
    // MaximumBandwidth @88), not by the example's annotation (200 / 8192 swapped).
    assert_eq!(f["base_io_size"], 200);
    assert_eq!(f["maximum_bandwidth"], 8192);
    // Both name offsets (104, 118) are inside the 128-byte fixed part.
    assert_eq!(f["initiator_name"], Value::Null);
    assert_eq!(f["initiator_node_name"], Value::Null);
}
