//! The example rules files in captures/ against the sample captures: they pass on `steady`
//! and fail, naming the right rules, on `noisy-neighbour` and `misbehaving-client`.

use std::path::{Path, PathBuf};

use sqos::check::judge::{judge_capture, Plan};
use sqos::check::outcome::CaptureVerdict;
use sqos::check::rules::Rules;
use sqos::check::source::flow_analysis;
use sqos::pipeline::PipelineConfig;

fn captures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("captures")
}

/// The sample capture whose name starts with `stem.` (pcap or pcapng, maybe gzipped).
fn capture(stem: &str) -> PathBuf {
    ["pcap", "pcapng", "pcap.gz", "pcapng.gz"]
        .iter()
        .map(|ext| captures().join(format!("{stem}.{ext}")))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no capture {stem}.* in captures/"))
}

fn judge(stem: &str, rules: &str) -> CaptureVerdict {
    let rules = Rules::load(&captures().join(rules)).unwrap_or_else(|e| panic!("{e}"));
    let plan = Plan {
        rules: rules.rules,
        ..Plan::default()
    };
    let v = judge_capture(
        Path::new(&capture(stem)),
        PipelineConfig::default(),
        &plan,
        flow_analysis(Default::default()),
        &mut sqos::run::no_progress,
    );
    assert_eq!(v.error, None, "{stem} could not be judged");
    v
}

fn report(v: &CaptureVerdict) -> String {
    sqos::check::report::capture_text(v)
}

#[test]
fn example_rules_files_load() {
    for f in ["steady.rules.toml", "limits.rules.toml"] {
        let r = Rules::load(&captures().join(f)).unwrap_or_else(|e| panic!("{e}"));
        assert!(r.rules.len() >= 6, "{f}: {} rules", r.rules.len());
    }
}

#[test]
fn steady_passes_its_rules_and_the_limits() {
    // The same cluster over IPv6 and over a lossy network behaves the same at the SQOS level.
    for stem in ["steady", "steady-ipv6", "lossy-network"] {
        for rules in ["steady.rules.toml", "limits.rules.toml"] {
            let v = judge(stem, rules);
            assert_eq!(v.failed(), 0, "{stem} {rules}:\n{}", report(&v));
            assert!(v.passed() >= 6, "{}", report(&v));
        }
    }
}

#[test]
fn noisy_neighbour_breaks_the_limits() {
    let v = judge("noisy-neighbour", "limits.rules.toml");
    assert_eq!(
        v.failed_names(),
        vec![
            "reported normalized IOPS within MaximumIoRate",
            "observed normalized IOPS within MaximumIoRate",
            "no limit breach found by the analysis",
        ],
        "{}",
        report(&v)
    );
    // The noisy VM is the one named.
    let o = v
        .outcomes
        .iter()
        .find(|o| o.name == "reported normalized IOPS within MaximumIoRate")
        .unwrap();
    assert!(
        o.measured.starts_with("1 of 4 flows off: vm01 ["),
        "{}",
        o.measured
    );

    let v = judge("noisy-neighbour", "steady.rules.toml");
    assert!(
        v.failed_names().contains(&"IOPS between 5 and 20"),
        "{}",
        report(&v)
    );
}

#[test]
fn misbehaving_client_breaks_the_limits_and_gets_errors() {
    let v = judge("misbehaving-client", "limits.rules.toml");
    let failed = v.failed_names();
    for name in [
        "server answers only with success",
        "reported normalized IOPS within MaximumIoRate",
    ] {
        assert!(
            failed.contains(&name),
            "{name} should fail:\n{}",
            report(&v)
        );
    }
    let o = v
        .outcomes
        .iter()
        .find(|o| o.name == "server answers only with success")
        .unwrap();
    assert!(o.measured.contains("STATUS_NOT_FOUND"), "{}", o.measured);
    assert!(
        o.measured.contains("STATUS_INVALID_PARAMETER"),
        "{}",
        o.details.join("\n")
    );

    let v = judge("misbehaving-client", "steady.rules.toml");
    assert!(
        v.failed_names().contains(&"only STATUS_SUCCESS"),
        "{}",
        report(&v)
    );
}

/// The flow table `sqos flows --format json` gives for a sample capture.
fn flow_table_json(stem: &str) -> serde_json::Value {
    let mut analyzer = sqos::analysis::Analyzer::default();
    sqos::run::run_path(&capture(stem), PipelineConfig::default(), &mut analyzer)
        .unwrap_or_else(|e| panic!("{e}"));
    sqos::output::flows::flows_json(&analyzer.finish())
}

/// The typed flows `check` judges are, on every sample capture, flow for flow the flows of the
/// table `sqos flows --format json` saves: a baseline compares like with like.
#[test]
fn typed_flows_are_the_saved_table() {
    use sqos::check::figure::Figure;
    use sqos::check::flows::FlowTable;
    let (mut flows, mut with_iops, mut findings) = (0, 0, 0);
    for entry in std::fs::read_dir(captures()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !path.is_file() || !(name.contains(".pcap")) {
            continue;
        }
        let mut analyzer = sqos::analysis::Analyzer::default();
        sqos::run::run_path(&path, PipelineConfig::default(), &mut analyzer)
            .unwrap_or_else(|e| panic!("{e}"));
        let a = analyzer.finish();
        let typed = FlowTable::from_analysis(&a);
        let saved = FlowTable::from_json(sqos::output::flows::flows_json(&a)).unwrap();
        assert_eq!(typed, saved, "{name}");
        flows += typed.len();
        for f in typed.flows() {
            with_iops += usize::from(f.figure(Figure::Iops).is_some());
            findings += f.findings().len();
        }
    }
    // The comparison covered flows with figures and with findings.
    assert!(flows >= 20, "{flows} flows");
    assert!(with_iops >= 10, "{with_iops} flows with IOPS");
    assert!(findings >= 10, "{findings} findings");
}

fn judge_baseline(stem: &str, baseline: serde_json::Value, tol: &[&str]) -> CaptureVerdict {
    let mut tolerances = sqos::check::rules::BaselineTolerances::default();
    for t in tol {
        tolerances.add_cli(t).unwrap();
    }
    let plan = Plan {
        rules: Vec::new(),
        baseline: Some(sqos::check::baseline::Baseline::from_json(baseline).unwrap()),
        tolerances,
        filter: None,
    };
    judge_capture(
        &capture(stem),
        PipelineConfig::default(),
        &plan,
        flow_analysis(Default::default()),
        &mut sqos::run::no_progress,
    )
}

/// Settings exact, rates allowed to move ×10: only configuration drift fails.
const SETTINGS_ONLY: [&str; 1] = ["default=1000%"];

#[test]
fn steady_matches_its_own_baseline_and_drift_is_found() {
    let base = flow_table_json("steady");
    let v = judge_baseline("steady", base.clone(), &[]);
    assert_eq!(v.outcomes.len(), 4, "{}", report(&v));
    assert_eq!(v.failed(), 0, "{}", report(&v));

    // A flow the baseline had that the capture lacks vanished.
    let mut with_ghost = base.clone();
    let mut ghost = with_ghost[0].clone();
    ghost["logical_flow_id"] = serde_json::json!("99999999-0000-4000-8000-000000000009");
    ghost["initiator_name"] = serde_json::json!("vm09");
    with_ghost.as_array_mut().unwrap().push(ghost);
    let v = judge_baseline("steady", with_ghost, &[]);
    assert_eq!(v.failed_names(), vec!["baseline: flow vm09 [99999999]"]);
    assert_eq!(v.outcomes.last().unwrap().measured, "vanished");
}

#[test]
fn noisy_neighbour_drifts_from_the_steady_baseline_by_its_limit() {
    let v = judge_baseline("noisy-neighbour", flow_table_json("steady"), &SETTINGS_ONLY);
    // Only vm01, whose policy the scenario changed, differs in its settings.
    let vm01: Vec<&sqos::check::outcome::Outcome> = v
        .outcomes
        .iter()
        .filter(|o| o.name.starts_with("baseline: flow vm01 ["))
        .collect();
    assert_eq!(vm01.len(), 1, "{}", report(&v));
    assert!(!vm01[0].passed);
    for prefix in ["limit 120 → ", "maximum_io_rate 120 → "] {
        assert!(
            vm01[0].details.iter().any(|d| d.starts_with(prefix)),
            "{prefix}: {:#?}",
            vm01[0].details
        );
    }
    for o in v.outcomes.iter().filter(|o| !o.name.contains("vm01")) {
        assert!(
            !o.details.iter().any(|d| d.starts_with("limit ")),
            "{}",
            report(&v)
        );
    }
}

#[test]
fn misbehaving_client_has_a_flow_the_steady_baseline_lacks() {
    let v = judge_baseline(
        "misbehaving-client",
        flow_table_json("steady"),
        &SETTINGS_ONLY,
    );
    let appeared: Vec<&str> = v
        .outcomes
        .iter()
        .filter(|o| o.measured == "appeared")
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(appeared.len(), 1, "{}", report(&v));
    assert!(
        appeared[0].starts_with("baseline: flow vm99 ["),
        "{appeared:?}"
    );
}
