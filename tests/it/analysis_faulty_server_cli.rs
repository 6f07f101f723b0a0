//! `sqos flows --format json` on the committed `captures/faulty-server.pcap.gz`: every server
//! bug the generator injected (its ground truth, regenerated in memory with the README's
//! command) appears on its flow with its code, severity, frame and time, and nothing else does.

use serde_json::Value;
use sqos::synth::{generate, Scenario, SynthConfig};

const CAPTURE: &str = "captures/faulty-server.pcap.gz";

#[test]
fn flows_json_lists_each_injected_server_bug_with_frame_and_time() {
    let (_, _, truth) = generate(
        &SynthConfig::new(Scenario::FaultyServer, CAPTURE),
        Vec::new(),
    )
    .expect("generate");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(["flows", "--format", "json", CAPTURE])
        .output()
        .expect("run sqos flows");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let flows: Value = serde_json::from_slice(&out.stdout).expect("json");
    let flows = flows.as_array().expect("array");
    assert_eq!(flows.len(), 8);
    let mut seen = 0;
    for flow in flows {
        let id = flow["logical_flow_id"].as_str().expect("id");
        let findings = flow["findings"].as_array().expect("findings");
        let faults: Vec<_> = truth
            .faults
            .iter()
            .filter(|f| f.logical_flow_id.to_string() == id)
            .collect();
        // One bug per faulted flow; vm04 and vm08 are clean.
        assert_eq!(findings.len(), faults.len(), "{id}: {findings:?}");
        assert_eq!(flow["findings_total"], faults.len());
        for (fd, ft) in findings.iter().zip(faults) {
            seen += 1;
            assert_eq!(fd["code"], ft.finding, "{id}");
            assert_eq!(flow["initiator_name"], ft.initiator_name.as_str());
            let severity = if ft.what.contains("note <8>")
                || ft.finding == "flow.server_wrong_error"
                || ft.finding == "flow.request_unanswered"
            {
                "warning"
            } else {
                "error"
            };
            assert_eq!(fd["severity"], severity, "{}", ft.what);
            let (frame, time) = match ft.response_frame {
                Some(f) => (f, ft.response_time.expect("response time")),
                None => (ft.request_frame.expect("request frame"), ft.request_time),
            };
            assert_eq!(fd["frame"], frame, "{}", ft.what);
            let got = fd["time"].as_f64().expect("time");
            assert!((got - time).abs() < 1e-6, "{}: {got} vs {time}", ft.what);
            assert_eq!(fd["occurrences"], 1);
        }
    }
    assert_eq!(seen, 6);
    // The frames, as committed (the truth and the capture agree, see synth_captures).
    let frames: Vec<(&str, u64)> = truth
        .faults
        .iter()
        .map(|f| {
            (
                f.initiator_name.as_str(),
                f.response_frame.or(f.request_frame).unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        frames,
        [
            ("vm06", 448),
            ("vm02", 1075),
            ("vm07", 1354),
            ("vm01", 2186),
            ("vm05", 2922),
            ("vm03", 4744),
        ]
    );
}
