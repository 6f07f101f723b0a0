//! Memory of the analysis state with 100,000 logical flows and 1,000,000 opens, all alive at
//! once. Run: `cargo test --release --test it analysis_memory -- --ignored --nocapture`
//! (prints peak RSS and bytes per flow / per open; the numbers are in docs/analysis.md).

use crate::analysis_kit::*;
use sqos::analysis::AnalyzerConfig;
use sqos::sqos::{Options, Status};
use uuid::Uuid;

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn flow_id(i: u64) -> Uuid {
    Uuid::from_u128(0x5000_0000_0000_4000_8000_0000_0000_0000 | u128::from(i))
}

#[test]
#[ignore = "memory measurement: run explicitly with --release"]
fn hundred_thousand_flows_and_a_million_opens_stay_bounded() {
    const FLOWS: u64 = 100_000;
    const OPENS_PER_FLOW: u64 = 10;
    const UPDATES: u64 = 40;
    let base = rss_kib("VmRSS:");
    // A budget that follows them all (the default 64 MiB follows 2,621 flows).
    let cfg = AnalyzerConfig::default().with_memory(&sqos::budget::Budget::new(8 << 30));
    let budget_rows = cfg.series_budget_rows as u64;
    let mut k = Kit::new(cfg);
    let st = status(Uuid::nil(), 500, 50, 4000, Status::OK);
    // Every open created and associated: 1,000,000 opens alive at once.
    for f in 0..FLOWS {
        for o in 0..OPENS_PER_FLOW {
            let file = f * OPENS_PER_FLOW + o;
            k.create(0.0, file, &format!("\\\\sofs\\vms\\vm{f:06}\\disk{o}.vhdx"));
            k.exchange(
                0.0,
                file,
                req(Options::SET_LOGICAL_FLOW_ID, flow_id(f)),
                SUCCESS,
                None,
            );
        }
        let mut p = policy_req(
            flow_id(f),
            500,
            50,
            &format!("vm{f:06}"),
            "HV01.contoso.local",
        );
        p.options = Options::SET_POLICY | Options::GET_STATUS;
        let mut s = st.clone();
        s.logical_flow_id = flow_id(f);
        k.exchange(0.0, f * OPENS_PER_FLOW, p, SUCCESS, Some(s));
    }
    let opened = rss_kib("VmRSS:");
    println!("after creating and associating every open: RSS {opened} KiB");
    // 40 rounds of updates on every flow, with I/O on every open between them.
    for u in 0..UPDATES {
        let t = 1.0 + u as f64 * 4.0;
        for f in 0..FLOWS {
            let file = f * OPENS_PER_FLOW + (u % OPENS_PER_FLOW);
            k.io(t - 1.0, file, 8192, 0.001);
            let mut s = st.clone();
            s.logical_flow_id = flow_id(f);
            k.exchange(
                t,
                file,
                counters_req(flow_id(f), 1, 1, 10_000, 8),
                SUCCESS,
                Some(s),
            );
        }
    }
    let flows = k.an.flow_count() as u64;
    let opens = k.an.open_count() as u64;
    let live = rss_kib("VmRSS:");
    let peak = rss_kib("VmHWM:");
    let a = k.finish();
    let after = rss_kib("VmHWM:");
    let per_flow = (peak.saturating_sub(base)) * 1024 / FLOWS;
    println!(
        "flows {flows}, opens {opens}: RSS before {base} KiB, live {live} KiB, peak {peak} KiB, peak after finish {after} KiB; {per_flow} bytes per flow (with its {OPENS_PER_FLOW} opens, {UPDATES} updates)"
    );
    let rows: usize = a.flows.iter().map(|f| f.series.rows.len()).sum();
    println!("series rows kept: {rows}");
    assert_eq!(flows, FLOWS);
    assert_eq!(opens, FLOWS * OPENS_PER_FLOW);
    assert_eq!(a.flows.len() as u64, FLOWS);
    // Each flow keeps at most series_budget_rows / flows (≥ series_min_rows) rows.
    assert!(rows as u64 <= budget_rows.max(FLOWS * 4), "{rows} rows");
    assert!(per_flow < 8 * 1024, "{per_flow} bytes per flow");
}
