//! Baseline drift: the flow table of a capture against one saved earlier, with tolerances from
//! the rules file and the command line.

use serde_json::{json, Value};

use sqos::check::baseline::Baseline;
use sqos::check::facts::MessageFacts;
use sqos::check::flows::FlowTable;
use sqos::check::judge::{judge_evidence, load_baseline, Plan};
use sqos::check::rules::{BaselineTolerances, Rules};

const A: &str = "11111111-0000-4000-8000-000000000001";
const B: &str = "22222222-0000-4000-8000-000000000002";

fn flow(id: &str, name: &str, limit: u64, iops: f64) -> Value {
    json!({
        "logical_flow_id": id, "initiator_id": "aaaaaaaa-0000-4000-8000-000000000001",
        "initiator_name": name, "initiator_node_name": "HV01", "policy_id": "00000000-0000-0000-0000-000000000000",
        "protocol_version": 257, "opens": [{"file_name": "d.vhdx"}],
        "limit": limit, "reservation": 10, "bandwidth_limit": 0,
        "maximum_io_rate": limit, "minimum_io_rate": 10, "maximum_bandwidth": null,
        "base_io_size": 8192, "last_status": 0,
        "iops": iops, "normalized_iops": iops * 1.25, "avg_latency_ms": 2.0, "avg_lower_latency_ms": 1.0,
        "kilobytes_per_second": iops * 8.0,
        "observed": {"iops": iops, "normalized_iops": iops * 1.25, "kilobytes_per_second": iops * 8.0, "avg_response_ms": 1.9},
        "findings": []
    })
}

fn table(v: Value) -> FlowTable {
    FlowTable::from_json(v).unwrap()
}

fn plan(baseline: Value, tolerances: BaselineTolerances) -> Plan {
    Plan {
        rules: Vec::new(),
        baseline: Some(Baseline::from_json(baseline).unwrap()),
        tolerances,
        filter: None,
    }
}

#[test]
fn same_table_passes_one_testcase_per_flow() {
    let t = json!([flow(A, "vm01", 120, 50.0), flow(B, "vm02", 60, 20.0)]);
    let out = judge_evidence(
        &plan(t.clone(), BaselineTolerances::default()),
        &MessageFacts::default(),
        &table(t),
    );
    let names: Vec<&str> = out.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "baseline: flow vm01 [11111111]",
            "baseline: flow vm02 [22222222]"
        ]
    );
    assert!(out.iter().all(|o| o.passed), "{out:#?}");
}

#[test]
fn a_changed_limit_is_a_difference() {
    let then = json!([flow(A, "vm01", 120, 50.0), flow(B, "vm02", 60, 20.0)]);
    let now = table(json!([
        flow(A, "vm01", 100, 50.0),
        flow(B, "vm02", 60, 20.0)
    ]));
    // Loose tolerances on rates do not hide a changed setting: settings are exact unless named.
    let mut tol = BaselineTolerances::default();
    tol.add_cli("iops=10%").unwrap();
    let out = judge_evidence(&plan(then, tol), &MessageFacts::default(), &now);
    assert!(!out[0].passed);
    assert!(out[1].passed);
    assert_eq!(
        out[0].details,
        vec![
            "limit 120 → 100 (tolerance exact)",
            "maximum_io_rate 120 → 100 (tolerance exact)"
        ]
    );
    assert_eq!(
        out[0].measured,
        "limit 120 → 100 (tolerance exact); maximum_io_rate 120 → 100 (tolerance exact)"
    );
}

#[test]
fn a_vanished_and_an_appeared_flow_are_differences() {
    let then = json!([flow(A, "vm01", 120, 50.0), flow(B, "vm02", 60, 20.0)]);
    let c = "33333333-0000-4000-8000-000000000003";
    let now = table(json!([
        flow(A, "vm01", 120, 50.0),
        flow(c, "vm03", 60, 20.0)
    ]));
    let out = judge_evidence(
        &plan(then, BaselineTolerances::default()),
        &MessageFacts::default(),
        &now,
    );
    let got: Vec<(&str, bool, &str)> = out
        .iter()
        .map(|o| (o.name.as_str(), o.passed, o.measured.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("baseline: flow vm01 [11111111]", true, "as in the baseline"),
            ("baseline: flow vm02 [22222222]", false, "vanished"),
            ("baseline: flow vm03 [33333333]", false, "appeared"),
        ]
    );
}

#[test]
fn rate_tolerances_from_rules_file_and_command_line() {
    let then = json!([flow(A, "vm01", 120, 50.0)]);
    let now = table(json!([flow(A, "vm01", 120, 53.0)]));
    let judge = |tol: BaselineTolerances| {
        judge_evidence(&plan(then.clone(), tol), &MessageFacts::default(), &now).remove(0)
    };
    // Exact by default: iops, normalized_iops, kilobytes_per_second and observed ones drift.
    let o = judge(BaselineTolerances::default());
    assert!(!o.passed);
    assert_eq!(o.details.len(), 6, "{:#?}", o.details);
    assert_eq!(o.details[0], "iops 50 → 53 (tolerance exact)");

    let rules = Rules::parse(
        "[baseline.tolerance]\ndefault = { relative = 0.10 }\nlimit = { absolute = 0 }\n",
        "t",
    )
    .unwrap();
    assert!(judge(rules.baseline.clone()).passed);

    // The default never loosens a setting: a changed limit fails under default=1000%.
    let moved = table(json!([flow(A, "vm01", 121, 53.0)]));
    let mut loose = BaselineTolerances::default();
    loose.add_cli("default=1000%").unwrap();
    let o = judge_evidence(
        &plan(then.clone(), loose.clone()),
        &MessageFacts::default(),
        &moved,
    )
    .remove(0);
    assert_eq!(
        o.details,
        vec![
            "limit 120 → 121 (tolerance exact)",
            "maximum_io_rate 120 → 121 (tolerance exact)"
        ]
    );
    // Named, a setting is loosened.
    loose.add_cli("limit=1").unwrap();
    loose.add_cli("maximum_io_rate=1%").unwrap();
    assert!(judge_evidence(&plan(then.clone(), loose), &MessageFacts::default(), &moved)[0].passed);

    // The command line overrides the file: 5 % is too tight for 50 → 53.
    let mut cli = BaselineTolerances::default();
    cli.add_cli("default=5%").unwrap();
    let o = judge(rules.baseline.clone().overridden_by(&cli));
    assert!(!o.passed);
    assert_eq!(o.details[0], "iops 50 → 53 (tolerance ±5%)");

    // An absolute tolerance for one figure, the others loose.
    let mut cli = BaselineTolerances::default();
    cli.add_cli("default=10%").unwrap();
    cli.add_cli("iops=2").unwrap();
    let o = judge(cli);
    assert!(!o.passed);
    assert_eq!(o.details, vec!["iops 50 → 53 (tolerance ±2)"]);
}

#[test]
fn bad_tolerance_arguments_are_refused() {
    let mut t = BaselineTolerances::default();
    assert!(t.add_cli("iops").unwrap_err().contains("FIGURE=TOLERANCE"));
    assert!(t
        .add_cli("iopz=5%")
        .unwrap_err()
        .contains("unknown figure `iopz`"));
    assert!(t.add_cli("iops=-5").unwrap_err().contains("≥ 0"));
}

#[test]
fn baseline_files_are_read_and_checked() {
    let tmp = crate::support::scratch("sqos-check-baseline-");
    let dir = tmp.path();
    let good = dir.join("good.json");
    std::fs::write(&good, json!([flow(A, "vm01", 120, 50.0)]).to_string()).unwrap();
    let t = load_baseline(&good).unwrap().flows;
    assert_eq!(t.len(), 1);
    assert_eq!(t.flows()[0].id(), A);

    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"flows\": []}").unwrap();
    let e = load_baseline(&bad).unwrap_err().to_string();
    assert!(e.ends_with("bad.json: not a JSON array of flows"), "{e}");
    std::fs::write(&bad, "[{").unwrap();
    let e = load_baseline(&bad).unwrap_err().to_string();
    assert!(e.contains("bad.json: not JSON"), "{e}");
}
