//! Association, dissociation, failed requests and unknown state, on records built in code.

use crate::analysis_kit::*;
use sqos::analysis::{AssociatedBy, FlowFindingCode};
use sqos::sqos::{Options, Status};
use uuid::Uuid;

#[test]
fn set_logical_flow_id_associates_the_open_with_its_file_name() {
    let mut k = Kit::default();
    k.create(0.0, 1, "vms\\vm01\\disk0.vhdx");
    let resp = k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    let a = k.finish();
    assert_eq!(a.flows.len(), 1);
    let f = flow(&a, FLOW);
    let opens: Vec<_> = f.opens.iter().collect();
    assert_eq!(opens.len(), 1);
    assert_eq!(opens[0].file_name.as_deref(), Some("vms\\vm01\\disk0.vhdx"));
    assert_eq!(opens[0].by, AssociatedBy::SetLogicalFlowId);
    assert_eq!(opens[0].frame, resp);
    assert_eq!(opens[0].ended_frame, None);
    assert!(f.findings.is_empty(), "{:?}", codes(f));
}

#[test]
fn a_rejected_set_logical_flow_id_leaves_the_open_unassociated() {
    let mut k = Kit::default();
    k.create(0.0, 1, "a.vhdx");
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        INVALID_DEVICE_REQUEST,
        None,
    );
    // SET_POLICY on the still unassociated open: the server is right to say NOT_FOUND.
    k.exchange(
        0.2,
        1,
        policy_req(FLOW, 100, 0, "VM", "HV"),
        NOT_FOUND,
        None,
    );
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert_eq!(f.opens.len(), 0, "no association after a rejected request");
    assert_eq!(f.policy, None);
    assert_eq!(codes(f), vec!["flow.server_qos_unsupported"]);
}

#[test]
fn null_flow_id_dissociates_and_later_requests_must_fail() {
    let mut k = Kit::default();
    k.create(0.0, 1, "a.vhdx");
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    let dis = k.exchange(
        0.2,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, Uuid::nil()),
        SUCCESS,
        None,
    );
    // UPDATE_COUNTERS after the dissociation: the server must answer NOT_FOUND, it said success.
    let bad = k.exchange(0.3, 1, counters_req(FLOW, 1, 1, 1, 0), SUCCESS, None);
    let a = k.finish();
    let f = flow(&a, FLOW);
    let opens: Vec<_> = f.opens.iter().collect();
    assert_eq!(opens.len(), 1);
    assert_eq!(opens[0].ended_frame, Some(dis));
    let sh = f
        .findings
        .iter()
        .find(|x| x.code == FlowFindingCode::ServerShouldHaveFailed)
        .expect("finding");
    assert_eq!(sh.frame, bad);
    assert!(sh.message.contains("STATUS_NOT_FOUND"), "{}", sh.message);
    assert!(sh.message.contains("section 3.2.5.1.3"), "{}", sh.message);
}

#[test]
fn a_failed_request_does_not_change_state() {
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
        policy_req(FLOW, 100, 10, "VM-A", "HV"),
        SUCCESS,
        None,
    );
    // A refused policy change (implementation-defined invalid value): the policy stays.
    k.exchange(
        0.3,
        1,
        policy_req(FLOW, 999, 10, "VM-B", "HV"),
        INVALID_PARAMETER,
        None,
    );
    // A refused re-association: the open stays on FLOW.
    k.exchange(
        0.4,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW2),
        INVALID_PARAMETER,
        None,
    );
    let a = k.finish();
    let f = flow(&a, FLOW);
    let p = f.policy.expect("policy");
    assert_eq!((p.limit, p.reservation), (100, 10));
    assert_eq!(f.initiator_name.as_deref(), Some("VM-A"));
    assert_eq!(
        f.opens.iter().filter(|o| o.ended_frame.is_none()).count(),
        1
    );
    assert!(a.flows.iter().all(|x| x.id != FLOW2 || x.opens.is_empty()));
}

#[test]
fn probe_policy_applies_only_to_an_unassociated_open() {
    let mut k = Kit::default();
    k.create(0.0, 1, "a.vhdx");
    let mut probe = policy_req(FLOW, 200, 0, "VM", "HV");
    probe.options = Options::PROBE_POLICY;
    k.exchange(0.1, 1, probe.clone(), SUCCESS, None);
    // A second probe naming another flow is ignored: the open stays on FLOW.
    let mut other = probe.clone();
    other.logical_flow_id = FLOW2;
    other.limit = 300;
    k.exchange(0.2, 1, other, SUCCESS, None);
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert_eq!(
        f.opens.iter().next().map(|o| o.by),
        Some(AssociatedBy::ProbePolicy)
    );
    assert_eq!(f.policy.map(|p| p.limit), Some(200));
    assert!(a.flows.iter().all(|x| x.id != FLOW2), "FLOW2 never touched");
}

#[test]
fn an_open_met_mid_stream_is_unknown_and_gives_no_false_findings() {
    let mut k = Kit::default();
    // No CREATE, no association seen: the capture started later.
    k.exchange(0.1, 7, policy_req(FLOW, 100, 0, "VM", "HV"), SUCCESS, None);
    k.exchange(
        0.2,
        7,
        counters_req(FLOW, 5, 5, 100, 40),
        SUCCESS,
        Some(status(FLOW, 100, 0, 4000, Status::OK)),
    );
    // Another unknown open: NOT_FOUND is plausible (it may never have been associated).
    k.exchange(0.3, 8, counters_req(FLOW2, 5, 5, 100, 40), NOT_FOUND, None);
    // ... and now known: a second UPDATE that succeeds must be flagged.
    k.exchange(0.4, 8, counters_req(FLOW2, 5, 5, 100, 40), SUCCESS, None);
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert!(f.findings.is_empty(), "{:?}", codes(f));
    assert_eq!(
        f.opens.iter().next().map(|o| o.by),
        Some(AssociatedBy::Inferred)
    );
    assert_eq!(f.server.map(|s| s.maximum_io_rate), Some(100));
    let g = flow(&a, FLOW2);
    assert_eq!(codes(g), vec!["flow.server_should_have_failed"]);
}

#[test]
fn close_ends_the_association_and_a_flow_spans_opens() {
    let mut k = Kit::default();
    k.create(0.0, 1, "a.vhdx");
    k.exchange(
        0.1,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    k.close(1.0, 1);
    let close_frame = k.frame;
    k.create(1.1, 2, "a.vhdx");
    k.exchange(
        1.2,
        2,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
    let a = k.finish();
    let f = flow(&a, FLOW);
    let ends: Vec<_> = f.opens.iter().map(|o| o.ended_frame).collect();
    assert_eq!(ends, vec![Some(close_frame), None]);
}

#[test]
fn a_response_without_its_request_shows_the_association() {
    let mut k = Kit::default();
    // The request was before the capture: only the answer (msg id 99) is seen.
    k.respond(
        0.5,
        3,
        (99, 0),
        SUCCESS,
        Some(status(FLOW, 250, 20, 3000, Status::OK)),
    );
    k.io(0.6, 3, 8192, 0.001);
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert_eq!(f.opens.len(), 1);
    assert_eq!(
        f.server.map(|s| (s.maximum_io_rate, s.minimum_io_rate)),
        Some((250, 20))
    );
    assert_eq!(f.all_io.io_count, 1);
}
