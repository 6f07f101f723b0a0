//! Every rule kind, passing and failing, on flow tables and message facts built in code; and
//! rules-file errors that must name the line and the key.

use serde_json::json;

use sqos::check::eval::{evaluate, Evidence};
use sqos::check::facts::{FindingTally, MessageFacts, Tally};
use sqos::check::flows::FlowTable;
use sqos::check::outcome::Outcome;
use sqos::check::rules::{Rules, RulesError};
use sqos::sqos::Severity;

const VM01: &str = "11111111-0000-4000-8000-000000000001";
const VM02: &str = "22222222-0000-4000-8000-000000000002";

fn flows() -> FlowTable {
    FlowTable::from_json(flows_json()).unwrap()
}

fn flows_json() -> serde_json::Value {
    json!([
        {
            "logical_flow_id": VM01,
            "initiator_id": "aaaaaaaa-0000-4000-8000-000000000001",
            "initiator_name": "vm01",
            "initiator_node_name": "HV01.contoso.local",
            "policy_id": "00000000-0000-0000-0000-000000000000",
            "protocol_version": 257,
            "opens": [{"file_name": "vm01\\disk0.vhdx"}],
            "limit": 120, "reservation": 30, "bandwidth_limit": 2048,
            "maximum_io_rate": 120, "minimum_io_rate": 30, "maximum_bandwidth": 2048,
            "base_io_size": 8192, "last_status": 0,
            "iops": 50.0, "normalized_iops": 61.5, "avg_latency_ms": 2.5,
            "avg_lower_latency_ms": 1.25, "kilobytes_per_second": 420.0,
            "observed": {"iops": 49.0, "normalized_iops": 61.0, "kilobytes_per_second": 418.0, "avg_response_ms": 2.4},
            "findings": [
                {"code": "flow.status_poll_late", "severity": "note", "message": "late", "frame": 99, "time": 9.0, "occurrences": 4}
            ]
        },
        {
            "logical_flow_id": VM02,
            "initiator_id": "aaaaaaaa-0000-4000-8000-000000000002",
            "initiator_name": "vm02",
            "initiator_node_name": "HV02.contoso.local",
            "policy_id": "00000000-0000-0000-0000-000000000000",
            "protocol_version": 256,
            "opens": [{"file_name": "vm02\\disk0.vhdx"}],
            "limit": 60, "reservation": 10, "bandwidth_limit": 0,
            "maximum_io_rate": 60, "minimum_io_rate": 10, "maximum_bandwidth": null,
            "base_io_size": 8192, "last_status": 1,
            "iops": 180.0, "normalized_iops": 190.0, "avg_latency_ms": 9.0,
            "avg_lower_latency_ms": 4.0, "kilobytes_per_second": 1500.0,
            "observed": {"iops": 120.0, "normalized_iops": 130.0, "kilobytes_per_second": 1000.0, "avg_response_ms": 8.0},
            "findings": [
                {"code": "flow.exceeds_max_io_rate", "severity": "warning", "message": "190 > 60", "frame": 42, "time": 3.5}
            ]
        }
    ])
}

fn facts() -> MessageFacts {
    let mut f = MessageFacts::default();
    f.requests = 30;
    f.responses = 30;
    f.requests_by_option.insert("SET_LOGICAL_FLOW_ID", 2);
    f.requests_by_option.insert("SET_POLICY", 2);
    f.requests_by_option.insert("GET_STATUS", 26);
    f.requests_by_option.insert("UPDATE_COUNTERS", 24);
    f.nt_statuses.insert(
        0,
        Tally {
            count: 29,
            first_frame: 10,
        },
    );
    f.nt_statuses.insert(
        0xC000_0225,
        Tally {
            count: 1,
            first_frame: 77,
        },
    );
    f.findings.insert(
        "sqos.trailing_bytes",
        FindingTally {
            severity: Severity::Note,
            tally: Tally {
                count: 3,
                first_frame: 12,
            },
        },
    );
    f
}

/// Judge the rules of `toml` against the fixtures; one outcome per rule.
fn judge_with(toml: &str, facts: &MessageFacts) -> Vec<Outcome> {
    let rules = Rules::parse(toml, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    let flows = flows();
    evaluate(
        &rules.rules,
        &Evidence {
            facts,
            flows: &flows,
        },
    )
}

fn judge(toml: &str) -> Vec<Outcome> {
    judge_with(toml, &facts())
}

fn one(toml: &str) -> Outcome {
    let mut v = judge(toml);
    assert_eq!(v.len(), 1, "{v:#?}");
    v.remove(0)
}

#[test]
fn no_findings_counts_flow_and_message_findings() {
    let o = one("[[no_findings]]\nname = \"clean\"\nmin_severity = \"warning\"\n");
    assert!(!o.passed);
    assert_eq!(o.name, "clean");
    assert_eq!(o.kind, "no_findings");
    assert_eq!(
        o.measured,
        "1 finding: vm02 [22222222]: flow.exceeds_max_io_rate (warning) in frame 42"
    );
    assert_eq!(o.expected, "no finding ≥ warning");

    let o = one("[[no_findings]]\nmin_severity = \"note\"\n");
    assert!(!o.passed);
    assert_eq!(
        o.details,
        vec![
            "sqos.trailing_bytes (note) ×3, first in frame 12",
            "vm01 [11111111]: flow.status_poll_late (note) ×4 in frame 99",
            "vm02 [22222222]: flow.exceeds_max_io_rate (warning) in frame 42",
        ]
    );
    assert!(o.measured.starts_with("8 findings: "), "{}", o.measured);

    let o = one("[[no_findings]]\nmin_severity = \"error\"\n");
    assert!(o.passed, "{o:?}");
    assert_eq!(o.measured, "0 findings");

    let o = one("[[no_findings]]\nexcept = [\"flow.exceeds_max_io_rate\"]\n");
    assert!(o.passed, "{o:?}");
    assert_eq!(o.name, "no findings ≥ warning");

    let o = one("[[no_findings]]\nmin_severity = \"note\"\nonly = [\"sqos.trailing_bytes\"]\n");
    assert!(!o.passed);
    assert_eq!(o.details.len(), 1);
}

#[test]
fn all_answered_passes_and_fails() {
    let o = judge("[[all_answered]]\n").remove(0);
    assert!(o.passed);
    assert_eq!(o.measured, "all 30 requests answered");
    let f = facts().with_unanswered(&[17, 230]);
    let o = judge_with("[[all_answered]]\n", &f).remove(0);
    assert!(!o.passed);
    assert_eq!(o.name, "every request answered");
    assert_eq!(
        o.measured,
        "2 unanswered: request in frame 17; request in frame 230"
    );
}

#[test]
fn nt_statuses_from_a_listed_set() {
    let o = one("[[nt_statuses]]\nallowed = [\"STATUS_SUCCESS\", 0xC0000225]\n");
    assert!(o.passed, "{o:?}");
    assert_eq!(o.measured, "STATUS_SUCCESS ×29, STATUS_NOT_FOUND ×1");

    let o = one("[[nt_statuses]]\nname = \"only success\"\nallowed = [\"STATUS_SUCCESS\"]\n");
    assert!(!o.passed);
    assert_eq!(o.measured, "STATUS_NOT_FOUND ×1, first in frame 77");
    assert_eq!(o.expected, "only STATUS_SUCCESS");

    let o = one("[[nt_statuses]]\nallowed = [\"0xc0000225\", \"STATUS_SUCCESS\"]\n");
    assert!(o.passed);
}

#[test]
fn flow_metric_bounds_numbers_and_fields() {
    let o = one("[[flow_metric]]\nmetric = \"iops\"\nmin = 10\nmax = 200\n");
    assert!(o.passed, "{o:?}");
    assert_eq!(o.measured, "vm01 [11111111]: 50; vm02 [22222222]: 180");

    let o = one("[[flow_metric]]\nname = \"iops cap\"\nmetric = \"iops\"\nmax = 100\n");
    assert!(!o.passed);
    assert_eq!(o.measured, "1 of 2 flows off: vm02 [22222222]: 180 > 100");
    assert_eq!(o.expected, "iops ≤ 100 for every flow");

    // Bound by the flow's own MaximumIoRate, with 10 % headroom.
    let o = one(
        "[[flow_metric]]\nmetric = \"normalized_iops\"\nmax = { field = \"maximum_io_rate\", factor = 1.1 }\n",
    );
    assert!(!o.passed);
    assert_eq!(o.measured, "1 of 2 flows off: vm02 [22222222]: 190 > 66");
    assert_eq!(
        o.expected,
        "normalized_iops ≤ 1.1 × maximum_io_rate for every flow"
    );

    let o = one("[[flow_metric]]\ninitiator = \"vm0[1]\"\nmetric = \"avg_latency_ms\"\nmax = 5\n");
    assert!(o.passed, "{o:?}");
    let o = one("[[flow_metric]]\nmetric = \"observed_avg_response_ms\"\nmin = 3\n");
    assert!(!o.passed);
    assert_eq!(o.measured, "1 of 2 flows off: vm01 [11111111]: 2.4 < 3");
    // A figure the flow does not have fails.
    let o = one("[[flow_metric]]\nmetric = \"maximum_bandwidth\"\nmax = 10000\n");
    assert!(!o.passed);
    assert_eq!(o.measured, "1 of 2 flows off: vm02 [22222222]: none");
    // … unless told to skip flows without it.
    let o =
        one("[[flow_metric]]\nmetric = \"maximum_bandwidth\"\nmax = 10000\nskip_missing = true\n");
    assert!(o.passed, "{o:?}");
    assert_eq!(
        o.measured,
        "vm01 [11111111]: 2048; vm02 [22222222]: none (skipped)"
    );
}

#[test]
fn flow_metric_selects_by_flow_id_and_needs_a_flow() {
    let o = one(&format!(
        "[[flow_metric]]\nflow = \"{VM02}\"\nmetric = \"kilobytes_per_second\"\nmin = 1000\n"
    ));
    assert!(o.passed, "{o:?}");
    assert_eq!(o.measured, "vm02 [22222222]: 1500");
    let o = one("[[flow_metric]]\ninitiator = \"db*\"\nmetric = \"iops\"\nmax = 1\n");
    assert!(!o.passed);
    assert_eq!(o.measured, "no flow selected (initiator db*)");
}

#[test]
fn flow_agreement_reported_vs_observed() {
    let o = one("[[flow_agreement]]\ninitiator = \"vm01\"\nmetric = \"iops\"\nrelative = 0.05\n");
    assert!(o.passed, "{o:?}");
    assert_eq!(o.measured, "vm01 [11111111]: 50 reported vs 49 observed");
    let o =
        one("[[flow_agreement]]\nmetric = \"normalized_iops\"\nrelative = 0.05\nabsolute = 1\n");
    assert!(!o.passed);
    assert_eq!(
        o.measured,
        "1 of 2 flows off: vm02 [22222222]: 190 reported vs 130 observed"
    );
    let o = one("[[flow_agreement]]\nmetric = \"latency\"\nabsolute = 1.0\n");
    assert!(o.passed, "{o:?}");
    let o = one("[[flow_agreement]]\nmetric = \"kilobytes_per_second\"\n");
    assert!(!o.passed);
    assert_eq!(o.details.len(), 2);
    // A flow missing a figure fails unless skipped; vm02 has no reported KB/s here.
    let mut t = flows_json();
    t[1]["kilobytes_per_second"] = serde_json::Value::Null;
    let table = FlowTable::from_json(t).unwrap();
    let rules = Rules::parse(
        "[[flow_agreement]]\nmetric = \"kilobytes_per_second\"\nrelative = 0.01\n[[flow_agreement]]\nmetric = \"kilobytes_per_second\"\nrelative = 0.01\nskip_missing = true\n",
        "t",
    )
    .unwrap();
    let f = facts();
    let out = evaluate(
        &rules.rules,
        &Evidence {
            facts: &f,
            flows: &table,
        },
    );
    assert!(!out[0].passed);
    assert_eq!(
        out[0].details,
        vec!["vm02 [22222222]: none reported vs 1000 observed"]
    );
    assert!(out[1].passed, "{:?}", out[1]);
}

#[test]
fn flow_equals_a_value() {
    let o =
        one("[[flow_equals]]\ninitiator = \"vm01\"\nfield = \"maximum_io_rate\"\nvalue = 120\n");
    assert!(o.passed, "{o:?}");
    let o = one("[[flow_equals]]\nfield = \"maximum_io_rate\"\nvalue = 120\n");
    assert!(!o.passed);
    assert_eq!(o.name, "maximum_io_rate value");
    assert_eq!(o.measured, "1 of 2 flows off: vm02 [22222222]: 60");
    assert_eq!(o.expected, "maximum_io_rate = 120 for every flow");
}

#[test]
fn flow_final_status() {
    let o = one("[[flow_status]]\ninitiator = \"vm01\"\nequals = \"ok\"\n");
    assert!(o.passed, "{o:?}");
    let o = one("[[flow_status]]\nequals = \"StorageQoSStatusOk\"\n");
    assert!(!o.passed);
    assert_eq!(
        o.measured,
        "1 of 2 flows off: vm02 [22222222]: insufficient_throughput"
    );
    let o = one("[[flow_status]]\ninitiator = \"vm02\"\nequals = 1\n");
    assert!(o.passed, "{o:?}");
}

#[test]
fn flow_exists_and_absent() {
    let o = one("[[flow_exists]]\ninitiator = \"vm0*\"\n");
    assert!(o.passed);
    assert_eq!(
        o.measured,
        "2 flows match: vm01 [11111111]; vm02 [22222222]"
    );
    let o = one("[[flow_exists]]\ninitiator = \"vm99\"\n");
    assert!(!o.passed);
    assert_eq!(o.name, "initiator vm99 exists");
    assert_eq!(o.measured, "no flow matches");
    let o = one("[[flow_absent]]\ninitiator = \"vm99\"\n");
    assert!(o.passed);
    let o = one(&format!("[[flow_absent]]\nflow = \"{VM01}\"\n"));
    assert!(!o.passed);
    assert_eq!(o.kind, "flow_absent");
    assert_eq!(o.details, vec!["vm01 [11111111]"]);
}

#[test]
fn counts_of_flows_and_messages() {
    let o = one("[[flow_count]]\nmin = 2\nmax = 2\n");
    assert!(o.passed);
    assert_eq!(
        (o.measured.as_str(), o.expected.as_str()),
        ("2 flows", "= 2")
    );
    let o = one("[[flow_count]]\nmax = 1\n");
    assert!(!o.passed);
    let o = one("[[message_count]]\noption = \"UPDATE_COUNTERS\"\nmin = 20\n");
    assert!(o.passed);
    assert_eq!(o.measured, "24 requests");
    let o = one("[[message_count]]\noption = \"SET_POLICY\"\nmin = 3\nmax = 10\n");
    assert!(!o.passed);
    assert_eq!(
        (o.name.as_str(), o.measured.as_str(), o.expected.as_str()),
        ("SET_POLICY requests", "2 requests", "3..=10")
    );
    let o = one("[[message_count]]\noption = \"PROBE_POLICY\"\nmax = 0\n");
    assert!(o.passed);
    let o = one("[[message_count]]\noption = \"ANY\"\nmax = 29\n");
    assert!(!o.passed);
}

#[test]
fn rules_keep_their_file_order_and_lines() {
    let rules = Rules::parse(
        "[[flow_count]]\nmin = 1\n\n[[all_answered]]\n\n[[flow_count]]\nname = \"last\"\nmax = 9\n",
        "t",
    )
    .unwrap();
    let got: Vec<(&str, usize)> = rules
        .rules
        .iter()
        .map(|r| (r.name.as_str(), r.line))
        .collect();
    assert_eq!(
        got,
        vec![
            ("number of flows", 1),
            ("every request answered", 4),
            ("last", 6)
        ]
    );
}

fn error(toml: &str) -> (usize, String) {
    let e: RulesError = Rules::parse(toml, "r.toml").unwrap_err();
    (e.line().unwrap_or(0), e.to_string())
}

#[test]
fn unknown_key_names_line_and_key() {
    let (line, msg) =
        error("[[flow_count]]\nmin = 1\n\n[[flow_metric]]\nmetric = \"iops\"\nmaxx = 5\n");
    assert_eq!(line, 6, "{msg}");
    assert!(
        msg.starts_with("r.toml:6:1: key `maxx`: unknown field `maxx`"),
        "{msg}"
    );
}

#[test]
fn unknown_table_names_line_and_key() {
    let (line, msg) = error("[[flow_count]]\nmin = 1\n[[flow_metrik]]\nmetric = \"iops\"\n");
    assert_eq!(line, 3, "{msg}");
    assert!(msg.contains("key `flow_metrik`"), "{msg}");
    assert!(msg.contains("unknown field `flow_metrik`"), "{msg}");
}

#[test]
fn bad_values_name_line_and_key() {
    let (line, msg) = error("[[no_findings]]\nname = \"x\"\nmin_severity = \"urgent\"\n");
    assert_eq!(line, 3, "{msg}");
    assert!(msg.contains("key `min_severity`"), "{msg}");
    assert!(msg.contains("urgent"), "{msg}");

    let (line, msg) = error("\n[[flow_metric]]\nmetric = \"iopz\"\nmax = 1\n");
    assert_eq!(line, 3, "{msg}");
    assert!(msg.contains("key `metric`: unknown figure `iopz`"), "{msg}");

    let (line, msg) = error("[[nt_statuses]]\nallowed = [\"STATUS_SUCCESS\", \"STATUS_NOPE\"]\n");
    assert_eq!(line, 2, "{msg}");
    assert!(msg.contains("key `allowed`"), "{msg}");
    assert!(msg.contains("STATUS_NOPE"), "{msg}");

    let (line, msg) = error("[[flow_count]]\nmin = -1\n");
    assert_eq!(line, 2, "{msg}");
    assert!(msg.contains("key `min`"), "{msg}");

    let (line, msg) =
        error("[[flow_metric]]\nmetric = \"iops\"\nmax = { field = \"iops\", fator = 2 }\n");
    assert_eq!(line, 3, "{msg}");
    assert!(msg.contains("fator"), "{msg}");

    let (line, msg) = error("[[flow_status]]\nequals = \"fine\"\n");
    assert_eq!(line, 2, "{msg}");
    assert!(msg.contains("key `equals`"), "{msg}");

    let (line, msg) = error("[[flow_exists]]\ninitiator = \"vm[\"\n");
    assert_eq!(line, 2, "{msg}");
    assert!(msg.contains("key `initiator`: bad pattern `vm[`"), "{msg}");
}

#[test]
fn unknown_finding_codes_are_refused() {
    let (line, msg) = error("[[no_findings]]\nmin_severity = \"note\"\nexcept = [\"flow.exceeds_max_io_rate\", \"flow.exceeds_max_iops\"]\n");
    assert_eq!(line, 3, "{msg}");
    assert!(
        msg.contains("key `except`: unknown finding code `flow.exceeds_max_iops`"),
        "{msg}"
    );
    let (line, msg) = error("[[no_findings]]\nonly = [\"sqos.short_bufer\"]\n");
    assert_eq!(line, 2, "{msg}");
    assert!(msg.contains("key `only`"), "{msg}");
}

#[test]
fn inconsistent_rules_name_line_and_key() {
    let (line, msg) = error(
        "[[flow_count]]\nmax = 1\n\n[[message_count]]\noption = \"SET_POLICY\"\nmin = 5\nmax = 2\n",
    );
    assert_eq!(line, 6, "{msg}");
    assert!(msg.contains("key `min`: `min` 5 is above `max` 2"), "{msg}");

    let (line, msg) = error(&format!(
        "[[flow_status]]\nflow = \"{VM01}\"\ninitiator = \"vm01\"\nequals = \"ok\"\n"
    ));
    assert_eq!(line, 3, "{msg}");
    assert!(
        msg.contains("key `initiator`: give `flow` or `initiator`, not both"),
        "{msg}"
    );

    let (line, msg) = error("[[flow_metric]]\nmetric = \"iops\"\n");
    assert_eq!(line, 1, "{msg}");
    assert!(msg.contains("give `min`, `max` or both"), "{msg}");

    let (line, msg) = error("[[flow_agreement]]\nmetric = \"iops\"\nrelative = -0.1\n");
    assert_eq!(line, 3, "{msg}");
    assert!(msg.contains("key `relative`"), "{msg}");

    let (line, msg) =
        error("[baseline.tolerance]\niops = { relative = 0.1 }\nlatency = { absolute = 1 }\n");
    assert_eq!(line, 3, "{msg}");
    assert!(msg.contains("unknown figure `latency`"), "{msg}");
}

#[test]
fn syntax_errors_name_the_line() {
    let (line, msg) = error("[[flow_count]]\nmin = 1\nmax = \n");
    assert_eq!(line, 3, "{msg}");
    assert!(msg.starts_with("r.toml:3:"), "{msg}");
}

#[test]
fn the_reference_documents_every_kind_and_figure() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/check.md")).unwrap();
    for kind in [
        "no_findings",
        "all_answered",
        "nt_statuses",
        "flow_metric",
        "flow_agreement",
        "flow_equals",
        "flow_status",
        "flow_exists",
        "flow_absent",
        "flow_count",
        "message_count",
    ] {
        assert!(
            doc.contains(&format!("**`[[{kind}]]`**")),
            "docs/check.md lacks {kind}"
        );
        // And the kind is a table the loader knows (it may still lack required keys).
        if let Err(e) = Rules::parse(&format!("[[{kind}]]\n"), "t") {
            assert!(!e.to_string().contains("unknown field"), "{kind}: {e}");
        }
    }
    // Every TOML example in it loads.
    let mut blocks = 0;
    for block in doc.split("```toml\n").skip(1) {
        let toml = block.split("```").next().unwrap();
        Rules::parse(toml, "docs/check.md").unwrap_or_else(|e| panic!("{e}\n{toml}"));
        blocks += 1;
    }
    assert_eq!(blocks, 2);
    for f in sqos::check::figure::Figure::ALL {
        assert!(
            doc.contains(&format!("`{}`", f.name())),
            "docs/check.md lacks {f}"
        );
    }
}
