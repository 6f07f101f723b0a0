//! The analysis against the generator's ground truth (`sqos::synth::generate`): every derived
//! figure per update interval, and which findings each scenario must (and must not) give.
//! Tolerance: counts exact; rates within 1e-9 relative (both sides use the capture's µs times).

use std::collections::BTreeMap;
use std::path::PathBuf;

use sqos::analysis::{Analysis, Analyzer, FlowState};
use sqos::pipeline::PipelineConfig;
use sqos::run::run_capture;
use sqos::synth::{generate, Scenario, SynthArgs, Truth};

fn analyzed(scenario: Scenario, name: &str) -> (Analysis, Truth) {
    let args = SynthArgs::new(scenario, format!("{name}.pcap"));
    let (bytes, _, truth) = match generate(&args, Vec::new()) {
        Ok(x) => x,
        Err(e) => panic!("{name}: {e}"),
    };
    let path: PathBuf =
        std::env::temp_dir().join(format!("sqos-analysis-{name}-{}.pcap", std::process::id()));
    std::fs::write(&path, bytes).expect("temp capture");
    let mut a = Analyzer::default();
    let r = run_capture(&path, PipelineConfig::default(), &mut a, false);
    let _ = std::fs::remove_file(&path);
    assert!(r.is_ok(), "{name}");
    (a.finish(), truth)
}

fn codes_by_vm(a: &Analysis) -> BTreeMap<String, Vec<&'static str>> {
    a.flows
        .iter()
        .map(|f| {
            let mut c: Vec<&'static str> = f.findings.iter().map(|x| x.code.as_str()).collect();
            c.sort();
            c.dedup();
            (f.initiator_name.clone().unwrap_or_default(), c)
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Every applied update after the first: reported increments and observed I/O as the truth says.
fn check_against_truth(a: &Analysis, t: &Truth, exact_observed: bool) {
    for tf in &t.flows {
        let f: &FlowState = a
            .flows
            .iter()
            .find(|f| f.id == tf.logical_flow_id)
            .unwrap_or_else(|| panic!("flow {}", tf.logical_flow_id));
        let mut sum_io = 0u64;
        let mut secs = 0.0;
        for (i, u) in tf.updates.iter().enumerate().skip(1) {
            let Some(rf) = u.request_frame else { continue };
            let row = f
                .series
                .rows
                .iter()
                .find(|r| r.end_frame == rf)
                .unwrap_or_else(|| panic!("{}: no row ends at {rf}", tf.initiator_name));
            let prev = tf.updates[i - 1].request_time;
            // Truth times are the requests' first frames (µs); ours the frames that completed them.
            assert!(
                (row.secs() - (u.request_time - prev)).abs() < 1e-3,
                "{} row {rf}: {} vs {}",
                tf.initiator_name,
                row.secs(),
                u.request_time - prev
            );
            // Failed, or never answered: the counts are lost.
            if u.nt_status != 0 || u.response_frame.is_none() {
                assert_eq!(row.updates_applied, 0, "{} {rf}", tf.initiator_name);
                continue;
            }
            assert_eq!(
                row.reported.io_count, u.io_count_increment,
                "{} {rf}",
                tf.initiator_name
            );
            assert_eq!(
                row.reported.normalized_io_count,
                u.normalized_io_count_increment
            );
            assert_eq!(row.reported.latency, u.latency_increment);
            assert_eq!(row.reported.lower_latency, u.lower_latency_increment);
            assert_eq!(row.reported.kilobytes, u.kilobyte_count_increment);
            if exact_observed {
                assert_eq!(
                    row.observed.io_count,
                    u.ios.len() as u64,
                    "{} {rf}",
                    tf.initiator_name
                );
                let norm: u64 = u.ios.iter().map(|x| x.normalized).sum();
                let bytes: u64 = u.ios.iter().map(|x| u64::from(x.length)).sum();
                assert_eq!(row.observed.normalized_io_count, norm);
                assert_eq!(row.observed.bytes, bytes);
            }
            let r = row.reported_rates().expect("rates");
            assert!(close(r.iops, u.io_count_increment as f64 / row.secs()));
            sum_io += u.io_count_increment;
            secs += row.secs();
        }
        if secs > 0.0 {
            let w = f.reported_rates().expect("whole");
            assert!(
                close(w.iops, sum_io as f64 / secs),
                "{}: {} vs {}",
                tf.initiator_name,
                w.iops,
                sum_io as f64 / secs
            );
        }
    }
}

#[test]
fn steady_matches_the_truth_and_has_no_findings() {
    let (a, t) = analyzed(Scenario::Steady, "steady");
    assert_eq!(a.flows.len(), t.flows.len());
    check_against_truth(&a, &t, true);
    for f in &a.flows {
        assert_eq!(f.findings_total(), 0, "{:?}", codes_by_vm(&a));
        let tf = t
            .flows
            .iter()
            .find(|x| x.logical_flow_id == f.id)
            .expect("truth flow");
        assert_eq!(
            f.initiator_name.as_deref(),
            Some(tf.initiator_name.as_str())
        );
        assert_eq!(
            f.initiator_node_name.as_deref(),
            Some(tf.initiator_node_name.as_str())
        );
        let names: Vec<String> = f
            .opens
            .iter()
            .filter_map(|o| o.file_name.as_deref().map(str::to_string))
            .collect();
        for n in &tf.file_names {
            assert!(
                names
                    .iter()
                    .any(|x| x.ends_with(n.trim_start_matches('\\')) || n.ends_with(x.as_str())),
                "{n} in {names:?}"
            );
        }
    }
}

#[test]
fn noisy_neighbour_exceeds_only_on_the_noisy_vm() {
    let (a, t) = analyzed(Scenario::NoisyNeighbour, "noisy");
    check_against_truth(&a, &t, true);
    let c = codes_by_vm(&a);
    assert_eq!(c["vm01"], vec!["flow.exceeds_max_io_rate"], "{c:?}");
    for vm in ["vm02", "vm03", "vm04"] {
        assert!(c[vm].is_empty(), "{c:?}");
    }
}

#[test]
fn misbehaving_client_findings() {
    let (a, t) = analyzed(Scenario::MisbehavingClient, "misbehaving");
    check_against_truth(&a, &t, true);
    let c = codes_by_vm(&a);
    for vm in ["vm03", "vm04"] {
        assert!(c[vm].contains(&"flow.exceeds_max_io_rate"), "{c:?}");
        assert!(c[vm].contains(&"flow.status_poll_late"), "{c:?}");
    }
    assert!(
        c.values()
            .flatten()
            .any(|x| *x == "flow.no_status_after_set_policy"),
        "{c:?}"
    );
    // The server answered every deliberate error as section 3.2.5.1 requires.
    assert!(
        !c.values().flatten().any(|x| x.starts_with("flow.server_")),
        "{c:?}"
    );
    assert!(c["vm01"].is_empty() && c["vm02"].is_empty(), "{c:?}");
}

#[test]
fn insufficient_throughput_is_reservation_not_met_on_every_flow() {
    let (a, t) = analyzed(Scenario::InsufficientThroughput, "insufficient");
    check_against_truth(&a, &t, true);
    let c = codes_by_vm(&a);
    assert_eq!(c.len(), 6);
    for (vm, codes) in &c {
        assert_eq!(codes, &vec!["flow.reservation_not_met"], "{vm}");
    }
}

#[test]
fn policy_change_follows_the_timeline_without_findings() {
    let (a, t) = analyzed(Scenario::PolicyChange, "policy");
    check_against_truth(&a, &t, true);
    let c = codes_by_vm(&a);
    assert!(c.values().all(|v| v.is_empty()), "{c:?}");
    let vm01 = a
        .flows
        .iter()
        .find(|f| f.initiator_name.as_deref() == Some("vm01"))
        .expect("vm01");
    assert_eq!(vm01.server.map(|s| s.maximum_io_rate), Some(15));
    let vm04 = a
        .flows
        .iter()
        .find(|f| f.initiator_name.as_deref() == Some("vm04"))
        .expect("vm04");
    assert_eq!(vm04.opens.total(), 2);
}

#[test]
fn lossy_network_reports_exactly_and_gives_no_findings() {
    let (a, t) = analyzed(Scenario::LossyNetwork, "lossy");
    check_against_truth(&a, &t, false);
    let c = codes_by_vm(&a);
    assert!(c.values().all(|v| v.is_empty()), "{c:?}");
}

/// `faulty-server`: each server bug gives exactly its finding, on the flow and at the frame and
/// time the truth names (the response that shows it; the request for one never answered); the
/// last VM of each host stays clean; the figures still match what the clients sent.
#[test]
fn faulty_server_findings_are_where_the_truth_puts_them() {
    let (a, t) = analyzed(Scenario::FaultyServer, "faulty");
    assert_eq!(a.flows.len(), 8);
    check_against_truth(&a, &t, true);
    let expected: BTreeMap<String, Vec<&str>> = [
        ("vm01", vec!["flow.server_should_have_failed"]),
        ("vm02", vec!["flow.server_should_have_failed"]),
        ("vm03", vec!["flow.request_unanswered"]),
        ("vm04", vec![]),
        ("vm05", vec!["flow.server_state_mismatch"]),
        ("vm06", vec!["flow.server_wrongly_failed"]),
        ("vm07", vec!["flow.server_wrong_error"]),
        ("vm08", vec![]),
    ]
    .into_iter()
    .map(|(vm, c)| (vm.to_string(), c))
    .collect();
    assert_eq!(codes_by_vm(&a), expected);
    assert_eq!(t.faults.len(), 6);
    for ft in &t.faults {
        let f = a
            .flows
            .iter()
            .find(|f| f.id == ft.logical_flow_id)
            .unwrap_or_else(|| panic!("flow of {}", ft.what));
        assert_eq!(
            f.initiator_name.as_deref(),
            Some(ft.initiator_name.as_str())
        );
        let found: Vec<_> = f.findings.iter().collect();
        assert_eq!(found.len(), 1, "{}: {found:?}", ft.initiator_name);
        let fd = found[0];
        assert_eq!(fd.code.as_str(), ft.finding, "{}", ft.initiator_name);
        let (frame, time) = if ft.finding == "flow.request_unanswered" {
            assert_eq!(ft.response_frame, None);
            (ft.request_frame, Some(ft.request_time))
        } else {
            (ft.response_frame, ft.response_time)
        };
        assert_eq!(Some(fd.frame), frame, "{}", ft.initiator_name);
        let time = time.expect("time");
        assert!(
            (fd.time.as_secs_f64() - time).abs() < 1e-6,
            "{}: {} vs {time}",
            ft.initiator_name,
            fd.time.as_secs_f64()
        );
    }
    // What each finding says, and its severity: note <8> is a product rule (warning).
    let finding = |vm: &str| {
        let f = a
            .flows
            .iter()
            .find(|f| f.initiator_name.as_deref() == Some(vm))
            .expect("vm");
        let fd = f.findings.iter().next().expect("finding");
        (fd.severity.as_str(), fd.message.clone())
    };
    let (sev, msg) = finding("vm01");
    assert_eq!(sev, "warning");
    assert!(
        msg.contains("Reservation greater than a non-zero Limit"),
        "{msg}"
    );
    let (sev, msg) = finding("vm02");
    assert_eq!(sev, "error");
    assert!(
        msg.contains("GET_STATUS on an open not associated"),
        "{msg}"
    );
    assert!(msg.contains("STATUS_NOT_FOUND"), "{msg}");
    let (_, msg) = finding("vm05");
    for part in ["LogicalFlowID", "PolicyID", "InitiatorID"] {
        assert!(msg.contains(part), "{msg}");
    }
    let (_, msg) = finding("vm07");
    assert!(
        msg.contains("failed with STATUS_INVALID_PARAMETER; the spec prescribes STATUS_NOT_FOUND"),
        "{msg}"
    );
    // vm06's status request was failed, so its interval lost its counts; the client retried
    // 10 s later (note <4>) and its counters resumed.
    let vm06 = t
        .flows
        .iter()
        .find(|f| f.initiator_name == "vm06")
        .expect("vm06");
    assert_eq!(vm06.updates.len(), 2);
    assert_eq!(vm06.updates[0].nt_status, 0xC000_0225);
    assert!((vm06.updates[1].request_time - vm06.updates[0].request_time - 10.0).abs() < 0.01);
}
