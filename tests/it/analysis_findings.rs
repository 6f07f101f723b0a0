//! Every flow finding fires on the case made for it, and not on a clean flow.

use crate::analysis_kit::*;
use sqos::analysis::FlowFindingCode as C;
use sqos::sqos::{Options, ProtocolVersion, Severity, Status};

fn run(s: Steady) -> sqos::analysis::Analysis {
    let mut k = Kit::default();
    s.run(&mut k, 0.0);
    k.finish()
}

#[test]
fn clean_flow_has_no_findings() {
    let a = run(Steady::default());
    assert_eq!(a.flows.len(), 1);
    assert_eq!(flow(&a, FLOW).findings_total(), 0);
}

#[test]
fn exceeding_maximum_io_rate_is_one_episode_over_the_intervals() {
    let a = run(Steady {
        iops: 300,
        max: 200,
        ..Steady::default()
    });
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.exceeds_max_io_rate"]);
    let x = f.findings.iter().next().expect("finding");
    assert_eq!(x.severity, Severity::Error);
    assert_eq!(x.occurrences, 5);
    assert_eq!(x.frame, f.series.rows[0].end_frame);
    assert_eq!(x.last_frame, f.series.rows[4].end_frame);
    assert!(
        x.message.contains("observed 300.0 normalized IOPS"),
        "{}",
        x.message
    );
    assert!(x.message.contains("MaximumIoRate 200"), "{}", x.message);
}

#[test]
fn within_tolerance_of_the_maximum_is_not_a_finding() {
    // 105 IOPS against 100: under the 10 % + 1 tolerance.
    let a = run(Steady {
        iops: 105,
        max: 100,
        ..Steady::default()
    });
    assert_eq!(flow(&a, FLOW).findings_total(), 0);
}

#[test]
fn exceeding_maximum_bandwidth() {
    // 100 × 64 KiB per second = 6400 KB/s against 1000 KB/s.
    let a = run(Steady {
        bytes: 65536,
        max: 5000,
        max_bw: 1000,
        ..Steady::default()
    });
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.exceeds_max_bandwidth"]);
    let x = f.findings.iter().next().expect("finding");
    assert!(x.message.contains("6400.0 KB/s"), "{}", x.message);
}

#[test]
fn insufficient_throughput_status_is_a_reservation_not_met() {
    let a = run(Steady {
        status: Status::INSUFFICIENT_THROUGHPUT,
        ..Steady::default()
    });
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.reservation_not_met"]);
    assert!(f
        .findings
        .iter()
        .all(|x| x.message.contains("InsufficientThroughput")));
    // The SET_POLICY|GET_STATUS answer (frame 5) is the first to say so.
    assert_eq!(f.findings.iter().next().map(|x| x.frame), Some(5));
}

#[test]
fn observed_below_reservation_while_ok_with_a_backlog() {
    // The client queued each I/O 5 ms: it wanted more than the 20 IOPS it got.
    let a = run(Steady {
        iops: 20,
        min: 100,
        queue_ticks: 50_000,
        ..Steady::default()
    });
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.reservation_not_met"]);
    let x = f.findings.iter().next().expect("finding");
    assert_eq!(x.occurrences, 5);
    assert!(x.message.contains("queued its I/O 5.0 ms"), "{}", x.message);
    // No queueing: the flow just asked for less than its reservation.
    let a = run(Steady {
        iops: 20,
        min: 100,
        ..Steady::default()
    });
    assert_eq!(flow(&a, FLOW).findings_total(), 0);
}

#[test]
fn reported_counters_that_disagree_with_the_wire() {
    let a = run(Steady {
        reported_scale: 2.0,
        ..Steady::default()
    });
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.counters_mismatch"]);
    let x = f.findings.iter().next().expect("finding");
    assert!(
        x.message.contains("IoCountIncrement 400 vs 200 I/O seen"),
        "{}",
        x.message
    );
    // 3 % more is within the 5 % tolerance.
    let a = run(Steady {
        reported_scale: 1.03,
        ..Steady::default()
    });
    assert_eq!(flow(&a, FLOW).findings_total(), 0);
}

#[test]
fn status_polled_later_than_time_to_live_while_busy() {
    // TimeToLive 2 s, but the client polls every 4 s while doing I/O all the time.
    let a = run(Steady {
        poll_secs: Some(4.0),
        ..Steady::default()
    });
    let f = flow(&a, FLOW);
    assert_eq!(count(f, C::StatusPollLate), 5, "{:?}", codes(f));
    assert_eq!(f.findings_total(), 5);
}

#[test]
fn an_idle_flow_may_delay_its_status_request() {
    let mut k = Kit::default();
    Steady {
        updates: 1,
        ..Steady::default()
    }
    .run(&mut k, 0.0);
    // Idle from 2.1 s to 20 s, then I/O resumes and is followed by a status request.
    k.io(20.0, 1, 8192, 0.002);
    k.exchange(
        20.01,
        1,
        counters_req(FLOW, 1, 1, 20_000, 8),
        SUCCESS,
        Some(status(FLOW, 500, 50, 2000, Status::OK)),
    );
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert_eq!(count(f, C::StatusPollLate), 0, "{:?}", codes(f));
}

fn associated_with_policy_due(get_status_at: Option<f64>) -> sqos::analysis::Analysis {
    let mut k = Kit::default();
    k.create(0.0, 1, "a.vhdx");
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    k.exchange(1.0, 1, policy_req(FLOW, 100, 0, "VM", "HV"), SUCCESS, None);
    if let Some(t) = get_status_at {
        k.exchange(
            t,
            1,
            req(Options::GET_STATUS, FLOW),
            SUCCESS,
            Some(status(FLOW, 100, 0, 4000, Status::OK)),
        );
    }
    k.io(5.0, 1, 4096, 0.001);
    k.finish()
}

#[test]
fn no_get_status_within_one_second_of_set_policy() {
    let a = associated_with_policy_due(None);
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.no_status_after_set_policy"]);
    assert_eq!(f.findings.iter().next().map(|x| x.frame), Some(4));
    let a = associated_with_policy_due(Some(2.4));
    assert_eq!(
        codes(flow(&a, FLOW)),
        vec!["flow.no_status_after_set_policy"]
    );
    let a = associated_with_policy_due(Some(1.5));
    assert_eq!(flow(&a, FLOW).findings_total(), 0);
}

fn on_associated(r: sqos::sqos::Request, nt: u32) -> sqos::analysis::Analysis {
    let mut k = Kit::default();
    k.create(0.0, 1, "a.vhdx");
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    k.exchange(0.2, 1, r, nt, Some(status(FLOW, 100, 0, 4000, Status::OK)));
    k.finish()
}

#[test]
fn success_where_the_spec_says_fail() {
    // Unknown ProtocolVersion must get STATUS_REVISION_MISMATCH.
    let mut r = req(Options::GET_STATUS, FLOW);
    r.protocol_version = ProtocolVersion(0x0200);
    let a = on_associated(r.clone(), SUCCESS);
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.server_should_have_failed"]);
    let x = f.findings.iter().next().expect("finding");
    assert!(
        x.message.contains("STATUS_REVISION_MISMATCH"),
        "{}",
        x.message
    );
    assert_eq!(x.severity, Severity::Error);
    // ... and answering it so is right.
    assert_eq!(
        flow(&on_associated(r, REVISION_MISMATCH), FLOW).findings_total(),
        0
    );
    // Note <8>: Reservation above Limit is a warning when accepted.
    let mut p = policy_req(FLOW, 100, 200, "VM", "HV");
    p.options = Options::SET_POLICY;
    let a = on_associated(p.clone(), SUCCESS);
    let x = flow(&a, FLOW)
        .findings
        .iter()
        .next()
        .cloned()
        .expect("finding");
    assert_eq!(x.code, C::ServerShouldHaveFailed);
    assert_eq!(x.severity, Severity::Warning);
    assert!(x.message.contains("<8>"), "{}", x.message);
    assert_eq!(
        flow(&on_associated(p, INVALID_PARAMETER), FLOW).findings_total(),
        0
    );
}

#[test]
fn probe_with_null_flow_id_must_be_invalid_parameter() {
    let mut k = Kit::default();
    k.create(0.0, 1, "a.vhdx");
    let mut probe = req(Options::PROBE_POLICY, uuid::Uuid::nil());
    probe.initiator_id = INITIATOR;
    k.exchange(0.1, 1, probe.clone(), SUCCESS, None);
    k.create(1.0, 2, "b.vhdx");
    k.exchange(1.1, 2, probe, INVALID_PARAMETER, None);
    let a = k.finish();
    // No flow is named: the finding goes to the catch-all null flow.
    let f = flow(&a, uuid::Uuid::nil());
    assert_eq!(codes(f), vec!["flow.server_should_have_failed"]);
    assert_eq!(a.flows.last().map(|f| f.id), Some(uuid::Uuid::nil()));
}

#[test]
fn failure_where_no_rule_applies() {
    let a = on_associated(req(Options::GET_STATUS, FLOW), NOT_FOUND);
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.server_wrongly_failed"]);
    assert_eq!(
        f.findings.iter().next().map(|x| x.severity),
        Some(Severity::Error)
    );
    // A refused SET_POLICY with INVALID_PARAMETER may be an implementation-defined check (<8>).
    let a = on_associated(policy_req(FLOW, 10, 0, "VM", "HV"), INVALID_PARAMETER);
    assert_eq!(flow(&a, FLOW).findings_total(), 0);
}

#[test]
fn failure_with_another_status_than_prescribed() {
    let mut k = Kit::default();
    k.create(0.0, 1, "a.vhdx");
    k.exchange(
        0.1,
        1,
        policy_req(FLOW, 10, 0, "VM", "HV"),
        INVALID_PARAMETER,
        None,
    );
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.server_wrong_error"]);
    let x = f.findings.iter().next().expect("finding");
    assert!(
        x.message.contains("prescribes STATUS_NOT_FOUND"),
        "{}",
        x.message
    );
}

#[test]
fn status_answer_that_contradicts_the_state() {
    let mut k = Kit::default();
    k.create(0.0, 1, "a.vhdx");
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    k.exchange(
        0.2,
        1,
        req(Options::GET_STATUS, FLOW),
        SUCCESS,
        Some(status(FLOW2, 100, 0, 4000, Status::OK)),
    );
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.server_state_mismatch"]);
    let x = f.findings.iter().next().expect("finding");
    assert!(x.message.contains(&FLOW2.to_string()), "{}", x.message);
}

#[test]
fn requests_never_answered() {
    let mut k = Kit::default();
    k.create(0.0, 1, "a.vhdx");
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    let lost = k.request(1.0, 1, req(Options::GET_STATUS, FLOW));
    // Sent just before the capture ended: not judged.
    k.io(9.0, 1, 4096, 0.001);
    k.request(9.5, 1, req(Options::GET_STATUS, FLOW));
    k.io(10.0, 1, 4096, 0.001);
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.request_unanswered"]);
    assert_eq!(f.findings.iter().next().map(|x| x.frame), Some(lost.1));
}

#[test]
fn a_flow_set_up_by_two_initiators() {
    let mut k = Kit::default();
    Steady {
        updates: 1,
        ..Steady::default()
    }
    .run(&mut k, 0.0);
    let mut p = policy_req(FLOW, 500, 50, "VM01", "HV-02");
    p.initiator_id = INITIATOR2;
    k.create(3.0, 2, "vms\\vm01\\disk0.vhdx");
    k.exchange(
        3.1,
        2,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    k.exchange(3.2, 2, p, SUCCESS, None);
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert_eq!(count(f, C::MultipleInitiators), 2, "{:?}", codes(f));
    let sev: Vec<_> = f.findings.iter().map(|x| x.severity).collect();
    assert!(sev.contains(&Severity::Warning) && sev.contains(&Severity::Note));
    assert_eq!(f.opens.len(), 2);
}

fn doubled_reports(gap_in_first_interval: bool) -> sqos::analysis::Analysis {
    let mut k = Kit::default();
    k.create(0.0, 1, "a.vhdx");
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    let st = Some(status(FLOW, 0, 0, 4000, Status::OK));
    k.exchange(1.0, 1, counters_req(FLOW, 0, 0, 0, 0), SUCCESS, st.clone());
    for i in 0..2 {
        let t0 = 1.0 + f64::from(i);
        for j in 0..10 {
            k.io(t0 + 0.05 + f64::from(j) * 0.09, 1, 8192, 0.001);
        }
        if gap_in_first_interval && i == 0 {
            k.note();
        }
        // Reports 20 I/O for the 10 seen.
        k.exchange(
            t0 + 1.0,
            1,
            counters_req(FLOW, 20, 20, 0, 160),
            SUCCESS,
            st.clone(),
        );
    }
    k.finish()
}

#[test]
fn capture_gaps_suppress_the_counter_comparison() {
    let a = doubled_reports(false);
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.counters_mismatch"]);
    assert_eq!(f.findings.iter().next().map(|x| x.occurrences), Some(2));
    // A gap in the first interval: only the second is compared.
    let a = doubled_reports(true);
    let f = flow(&a, FLOW);
    assert_eq!(codes(f), vec!["flow.counters_mismatch"]);
    assert_eq!(f.findings.iter().next().map(|x| x.occurrences), Some(1));
    assert_eq!(
        f.findings.iter().next().map(|x| x.frame),
        Some(f.series.rows[1].end_frame)
    );
}
