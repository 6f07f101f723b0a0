//! The analysis against the generator's ground truth (`sqos::synth::generate`): every derived
//! figure per update interval, and which findings each scenario must (and must not) give.
//! Tolerance: counts exact; rates within 1e-9 relative (both sides use the capture's µs times).

use std::collections::BTreeMap;
use std::io::Cursor;

use sqos::analysis::{Analysis, Analyzer, FlowState};
use sqos::capture::CaptureReader;
use sqos::pipeline::PipelineConfig;
use sqos::run::{no_progress, run_capture, Ending};
use sqos::sqos::Severity;
use sqos::synth::truth::UpdateTruth;
use sqos::synth::{generate, Scenario, SynthConfig, Truth};
use uuid::Uuid;

fn analyzed(scenario: Scenario, name: &str) -> (Analysis, Truth) {
    let args = SynthConfig::new(scenario, format!("{name}.pcap"));
    let (bytes, _, truth) = match generate(&args, Vec::new()) {
        Ok(x) => x,
        Err(e) => panic!("{name}: {e}"),
    };
    let mut reader = CaptureReader::from_reader(Box::new(Cursor::new(bytes))).expect(name);
    let mut a = Analyzer::default();
    let r = run_capture(
        &mut reader,
        PipelineConfig::default(),
        &mut a,
        &mut no_progress,
    );
    assert!(matches!(r.ending, Ending::Clean), "{name}: {:?}", r.ending);
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
/// A logical flow handed from one open to another (live migration, a copied VM) has one truth
/// entry per open: their updates together, in frame order, are the flow's series.
pub(crate) fn check_against_truth(a: &Analysis, t: &Truth, exact_observed: bool) {
    let mut ids: Vec<Uuid> = Vec::new();
    for tf in &t.flows {
        if !ids.contains(&tf.logical_flow_id) {
            ids.push(tf.logical_flow_id);
        }
    }
    for id in ids {
        let f: &FlowState = a
            .flows
            .iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("flow {id}"));
        let mut updates: Vec<(&str, &UpdateTruth)> = t
            .flows
            .iter()
            .filter(|tf| tf.logical_flow_id == id)
            .flat_map(|tf| tf.updates.iter().map(|u| (tf.initiator_name.as_str(), u)))
            .collect();
        updates.sort_by_key(|(_, u)| u.request_frame);
        let mut sum_io = 0u64;
        let mut secs = 0.0;
        for (i, (vm, u)) in updates.iter().enumerate().skip(1) {
            let Some(rf) = u.request_frame else { continue };
            let row = f
                .series
                .rows
                .iter()
                .find(|r| r.end_frame == rf)
                .unwrap_or_else(|| panic!("{vm}: no row ends at {rf}"));
            let prev = updates[i - 1].1.request_time;
            // Truth times are the requests' first frames (µs); ours the frames that completed them.
            assert!(
                (row.secs() - (u.request_time - prev)).abs() < 1e-3,
                "{vm} row {rf}: {} vs {}",
                row.secs(),
                u.request_time - prev
            );
            // Failed, or never answered: the counts are lost.
            if u.nt_status != 0 || u.response_frame.is_none() {
                assert_eq!(row.updates_applied, 0, "{vm} {rf}");
                continue;
            }
            assert_eq!(row.reported.io_count, u.io_count_increment, "{vm} {rf}");
            assert_eq!(
                row.reported.normalized_io_count,
                u.normalized_io_count_increment
            );
            assert_eq!(row.reported.latency, u.latency_increment);
            assert_eq!(row.reported.lower_latency, u.lower_latency_increment);
            assert_eq!(row.reported.kilobytes, u.kilobyte_count_increment);
            if exact_observed {
                assert_eq!(row.observed.io_count, u.ios.len() as u64, "{vm} {rf}");
                let norm: u64 = u.ios.iter().map(|x| x.normalized).sum();
                let bytes: u64 = u.ios.iter().map(|x| u64::from(x.length)).sum();
                assert_eq!(row.observed.normalized_io_count, norm);
                assert_eq!(row.observed.bytes, bytes);
                // What the client really did, whatever it reported.
                assert_eq!(row.observed.io_count, u.actual.io_count, "{vm} {rf}");
                assert_eq!(
                    row.observed.normalized_io_count,
                    u.actual.normalized_io_count
                );
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
                "{id}: {} vs {}",
                w.iops,
                sum_io as f64 / secs
            );
        }
    }
}

fn flow_of<'a>(a: &'a Analysis, vm: &str) -> &'a FlowState {
    a.flows
        .iter()
        .find(|f| f.initiator_name.as_deref() == Some(vm))
        .unwrap_or_else(|| panic!("no flow named {vm}"))
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
        // The share of the TREE_CONNECT before the CREATE name: `\\sofs\vms\vm01\disk0.vhdx`.
        let names: Vec<String> = f
            .opens
            .iter()
            .filter_map(|o| o.file_name.as_deref().map(str::to_string))
            .collect();
        assert_eq!(names, tf.file_names);
        assert!(
            names.iter().all(|n| n.starts_with("\\\\sofs\\vms\\")),
            "{names:?}"
        );
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

#[test]
fn bandwidth_hog_exceeds_max_bandwidth_only_on_the_hog() {
    let (a, t) = analyzed(Scenario::BandwidthHog, "bandwidth-hog");
    check_against_truth(&a, &t, true);
    let c = codes_by_vm(&a);
    assert_eq!(c.len(), 4, "{c:?}");
    assert_eq!(c["vm01"], vec!["flow.exceeds_max_bandwidth"], "{c:?}");
    for vm in ["vm02", "vm03", "vm04"] {
        assert!(c[vm].is_empty(), "{vm}: {c:?}");
    }
    // HV01 paces MaximumIoRate only; every host speaks 1.1.
    assert!(!t.hosts[0].throttles_bandwidth && t.hosts[1].throttles_bandwidth);
    let hog = flow_of(&a, "vm01");
    let server = hog.server.expect("status answer");
    assert_eq!(
        (server.maximum_io_rate, server.maximum_bandwidth),
        (400, Some(256))
    );
    let obs = hog.observed_rates().expect("observed");
    // ~480 KB/s against 256, at ~60 normalized IOPS against 400: bandwidth only.
    assert!(obs.kilobytes_per_second > 400.0, "{obs:?}");
    assert!(obs.normalized_iops < 100.0, "{obs:?}");
    let found = hog.findings.iter().next().expect("finding");
    assert_eq!(found.severity, Severity::Error);
    assert!(found.occurrences >= 2, "{found:?}");
    assert!(
        found.message.contains("MaximumBandwidth 256 KB/s"),
        "{found:?}"
    );
    // vm03 is paced to its 128 KB/s (within the burst tolerance over its intervals).
    let paced = flow_of(&a, "vm03");
    assert_eq!(paced.server.and_then(|s| s.maximum_bandwidth), Some(128));
    let kbps = paced
        .observed_rates()
        .expect("observed")
        .kilobytes_per_second;
    assert!(kbps > 115.0 && kbps < 141.0, "vm03 {kbps}");
}

#[test]
fn misreporting_client_mismatches_only_on_its_host() {
    let (a, t) = analyzed(Scenario::MisreportingClient, "misreporting");
    // The increments on the wire and the I/O seen are both exactly the truth's.
    check_against_truth(&a, &t, true);
    let c = codes_by_vm(&a);
    assert_eq!(c.len(), 4, "{c:?}");
    for vm in ["vm01", "vm02"] {
        assert_eq!(c[vm], vec!["flow.counters_mismatch"], "{vm}: {c:?}");
    }
    for vm in ["vm03", "vm04"] {
        assert!(c[vm].is_empty(), "{vm}: {c:?}");
    }
    for tf in &t.flows {
        let reads_only = tf.host == "HV01.contoso.local";
        let mut under = 0;
        for u in &tf.updates {
            let reads: Vec<_> = u.ios.iter().filter(|x| x.op == "read").collect();
            assert_eq!(u.actual.io_count, u.ios.len() as u64);
            let kb: u64 = u.ios.iter().map(|x| u64::from(x.length)).sum::<u64>() / 1024;
            if reads_only {
                // The request counts READs only; `actual` counts everything.
                assert_eq!(u.io_count_increment, reads.len() as u64);
                let read_kb: u64 = reads.iter().map(|x| u64::from(x.length)).sum::<u64>() / 1024;
                assert_eq!(u.kilobyte_count_increment, Some(read_kb));
                assert_eq!(u.actual.kilobyte_count, Some(kb));
                under += usize::from(u.io_count_increment < u.actual.io_count);
            } else {
                assert_eq!(u.io_count_increment, u.actual.io_count);
                assert_eq!(u.latency_increment, u.actual.latency);
            }
        }
        if reads_only {
            assert!(under >= 2, "{}: {under}", tf.initiator_name);
        }
    }
    // The finding names the reported and the observed counts of its interval.
    let f = flow_of(&a, "vm01");
    let found = f.findings.iter().next().expect("finding");
    assert_eq!(found.severity, Severity::Warning);
    let row = f
        .series
        .rows
        .iter()
        .find(|r| r.end_frame == found.frame)
        .expect("row of the finding");
    assert!(found.message.contains(&format!(
        "IoCountIncrement {} vs {} I/O seen",
        row.reported.io_count, row.observed.io_count
    )));
    assert!(
        row.reported.io_count * 10 < row.observed.io_count * 8,
        "{row:?}"
    );
}

#[test]
fn live_migration_and_copied_vm_are_multiple_initiators() {
    let (a, t) = analyzed(Scenario::LiveMigration, "migration");
    check_against_truth(&a, &t, true);
    let c = codes_by_vm(&a);
    assert_eq!(c.len(), 4, "{c:?}");
    assert_eq!(c["vm01"], vec!["flow.multiple_initiators"], "{c:?}");
    assert_eq!(c["vm05"], vec!["flow.multiple_initiators"], "{c:?}");
    for vm in ["vm02", "vm03"] {
        assert!(c[vm].is_empty(), "{vm}: {c:?}");
    }
    // The migrated VM: same InitiatorID on two nodes — a note.
    let moved: Vec<_> = t
        .flows
        .iter()
        .filter(|f| f.initiator_name == "vm01")
        .collect();
    assert_eq!(moved.len(), 2);
    assert_eq!(moved[0].initiator_id, moved[1].initiator_id);
    let vm01 = flow_of(&a, "vm01");
    assert_eq!(vm01.findings_total(), 1);
    let note = vm01.findings.iter().next().expect("note");
    assert_eq!(note.severity, Severity::Note);
    assert!(note
        .message
        .contains("HV01.contoso.local, HV02.contoso.local"));
    assert_eq!(vm01.opens.total(), 2);
    let conns: Vec<_> = vm01.opens.iter().map(|o| o.conn).collect();
    assert_ne!(
        conns[0], conns[1],
        "the two opens are on two hosts' connections"
    );
    assert_eq!(
        vm01.initiator_node_name.as_deref(),
        Some("HV02.contoso.local")
    );
    assert_eq!(vm01.initiator_id, Some(moved[0].initiator_id));
    // The copied VM: a new InitiatorID on the same node — a warning only.
    let copy = flow_of(&a, "vm05");
    let old = t
        .flows
        .iter()
        .find(|f| f.initiator_name == "vm04")
        .expect("vm04");
    let new = t
        .flows
        .iter()
        .find(|f| f.initiator_name == "vm05")
        .expect("vm05");
    assert_eq!(old.logical_flow_id, new.logical_flow_id);
    assert_ne!(old.initiator_id, new.initiator_id);
    assert_eq!(copy.findings_total(), 1);
    let warn = copy.findings.iter().next().expect("warning");
    assert_eq!(warn.severity, Severity::Warning);
    assert!(warn
        .message
        .contains(&format!("{}, {}", old.initiator_id, new.initiator_id)));
    assert_eq!(copy.initiator_id, Some(new.initiator_id));
    let names: Vec<_> = copy
        .opens
        .iter()
        .filter_map(|o| o.file_name.as_deref())
        .collect();
    assert_eq!(
        names,
        vec![
            "\\\\sofs\\vms\\vm04\\disk0.vhdx",
            "\\\\sofs\\vms\\vm05\\disk0.vhdx"
        ]
    );
}

/// `sqos flows --format json` on the committed live-migration capture: each finding with the
/// frame and time of the SET_POLICY answer that revealed it.
#[test]
fn flows_json_gives_the_migration_findings_with_frame_and_time() {
    let path = "captures/live-migration.pcap.gz";
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(["flows", "--format", "json", path])
        .output()
        .expect("run sqos flows");
    assert!(out.status.success());
    let flows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let args = SynthConfig::new(Scenario::LiveMigration, path);
    let (_, _, t) = generate(&args, Vec::new()).expect("generate");
    let policy_answer = |file: &str, host: &str| {
        t.messages
            .iter()
            .find(|m| {
                m.host == host
                    && m.file_name.as_deref() == Some(file)
                    && m.option_names.contains(&"SET_POLICY")
            })
            .map(|m| {
                (
                    m.response_frame.expect("answered"),
                    m.response_time.expect("time"),
                )
            })
            .expect("SET_POLICY")
    };
    let cases = [
        (
            "vm01",
            "note",
            policy_answer("\\\\sofs\\vms\\vm01\\disk0.vhdx", "HV02.contoso.local"),
        ),
        (
            "vm05",
            "warning",
            policy_answer("\\\\sofs\\vms\\vm05\\disk0.vhdx", "HV02.contoso.local"),
        ),
    ];
    let list = flows.as_array().expect("array");
    assert_eq!(list.len(), 4);
    for (vm, severity, (frame, time)) in cases {
        let flow = list
            .iter()
            .find(|f| f["initiator_name"] == vm)
            .unwrap_or_else(|| panic!("{vm}"));
        let findings = flow["findings"].as_array().expect("findings");
        assert_eq!(findings.len(), 1, "{vm}: {findings:?}");
        let f = &findings[0];
        assert_eq!(f["code"], "flow.multiple_initiators");
        assert_eq!(f["severity"], severity);
        assert_eq!(f["frame"].as_u64(), Some(frame), "{vm}");
        let at = f["time"].as_f64().expect("time");
        assert!((at - time).abs() < 1e-6, "{vm}: {at} vs {time}");
        assert_eq!(flow["opens_total"].as_u64(), Some(2));
    }
}
