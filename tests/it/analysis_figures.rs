//! Derived figures: the first-update rule, per-interval and whole-capture rates, observed I/O.

use crate::analysis_kit::*;
use sqos::sqos::{Options, Status};

fn associated(k: &mut Kit) {
    k.create(0.0, 1, "a.vhdx");
    k.exchange(
        0.01,
        1,
        req(Options::SET_LOGICAL_FLOW_ID, FLOW),
        SUCCESS,
        None,
    );
}

#[test]
fn first_update_opens_the_series_and_is_not_used_for_rates() {
    let mut k = Kit::default();
    associated(&mut k);
    let st = Some(status(FLOW, 0, 0, 4000, Status::OK));
    // Update 0 at t=1 carries 1000 I/O done before it: not a rate.
    let first = k.request(1.0, 1, counters_req(FLOW, 1000, 1000, 10_000_000, 8000));
    k.respond(1.001, 1, first, SUCCESS, st.clone());
    // Update 1 at t=2: 50 I/O, 50 normalized, 50 × 1 ms latency, 400 KB.
    let u1 = k.request(2.0, 1, counters_req(FLOW, 50, 50, 500_000, 400));
    k.respond(2.001, 1, u1, SUCCESS, st.clone());
    // Update 2 at t=4: 300 I/O (150 IOPS), 600 normalized, 3 ms each, 4800 KB.
    let u2 = k.request(4.0, 1, counters_req(FLOW, 300, 600, 9_000_000, 4800));
    k.respond(4.001, 1, u2, SUCCESS, st);
    let a = k.finish();
    let f = flow(&a, FLOW);
    let first_update = f.first_update.expect("first update");
    assert_eq!(first_update.frame, first.1);
    assert_eq!(first_update.counters.map(|c| c.io_count), Some(1000));
    assert_eq!(f.updates_sent, 3);
    assert_eq!(f.updates_applied, 3);
    let rows = &f.series.rows;
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].start_frame, rows[0].end_frame), (first.1, u1.1));
    let r0 = rows[0].reported_rates().expect("rates");
    assert_eq!(r0.iops, 50.0);
    assert_eq!(r0.avg_latency_ms, Some(1.0));
    assert_eq!(r0.avg_lower_latency_ms, Some(0.5));
    assert_eq!(r0.kilobytes_per_second, Some(400.0));
    let r1 = rows[1].reported_rates().expect("rates");
    assert_eq!(r1.iops, 150.0);
    assert_eq!(r1.normalized_iops, 300.0);
    assert_eq!(r1.avg_latency_ms, Some(3.0));
    assert_eq!(r1.kilobytes_per_second, Some(2400.0));
    // Whole capture: (50 + 300) I/O over 3 s from the first to the last update.
    let w = f.reported_rates().expect("whole");
    assert!((w.iops - 350.0 / 3.0).abs() < 1e-9, "{}", w.iops);
    assert!((w.normalized_iops - 650.0 / 3.0).abs() < 1e-9);
    assert_eq!(w.avg_latency_ms, Some(9_500_000.0 / 350.0 / 10_000.0));
    assert!((w.kilobytes_per_second.unwrap_or(0.0) - 5200.0 / 3.0).abs() < 1e-9);
}

#[test]
fn a_single_update_gives_no_rates() {
    let mut k = Kit::default();
    associated(&mut k);
    k.exchange(1.0, 1, counters_req(FLOW, 10, 10, 10, 10), SUCCESS, None);
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert!(f.series.rows.is_empty());
    assert_eq!(f.reported_rates(), None);
}

#[test]
fn a_failed_update_loses_its_counts_but_still_bounds_the_interval() {
    let mut k = Kit::default();
    associated(&mut k);
    k.exchange(1.0, 1, counters_req(FLOW, 0, 0, 0, 0), SUCCESS, None);
    // Update at t=2 refused: the client zeroed its counters anyway (section 3.1.4.1).
    k.exchange(
        2.0,
        1,
        counters_req(FLOW, 999, 999, 0, 0),
        0xC000_009A,
        None,
    );
    k.exchange(3.0, 1, counters_req(FLOW, 40, 40, 0, 0), SUCCESS, None);
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert_eq!(f.series.rows.len(), 2);
    assert_eq!(f.series.rows[0].updates_applied, 0);
    assert_eq!(f.series.rows[1].updates_applied, 1);
    // Whole: 40 I/O over the 1 s the applied update covers.
    assert_eq!(f.reported_rates().map(|r| r.iops), Some(40.0));
}

#[test]
fn observed_io_is_bucketed_by_the_frame_that_completed_its_response() {
    let mut k = Kit::default();
    associated(&mut k);
    let st = Some(status(FLOW, 0, 0, 4000, Status::OK));
    // Before the first update: counted in all I/O, not in any interval.
    k.io(0.5, 1, 4096, 0.001);
    k.exchange(1.0, 1, counters_req(FLOW, 0, 0, 0, 0), SUCCESS, st.clone());
    // Interval (1, 3]: 3 I/O of 64 KiB (8 normalized each), 2 ms.
    for t in [1.5, 2.0, 2.5] {
        k.io(t, 1, 65536, 0.002);
    }
    let held_back = k.frame + 1;
    k.frame += 1;
    let u = k.request(3.0, 1, counters_req(FLOW, 4, 32, 80_000, 256));
    // Completed before the update (frame `held_back`) but handed over after it.
    k.io_at_frame(2.9, 1, 65536, 0.002, held_back);
    // Issued before the update, answered after it: the next interval's.
    k.io(2.999, 1, 65536, 0.002);
    k.respond(3.001, 1, u, SUCCESS, st.clone());
    k.exchange(4.0, 1, counters_req(FLOW, 1, 8, 20_000, 64), SUCCESS, st);
    let a = k.finish();
    let f = flow(&a, FLOW);
    let row = &f.series.rows[0];
    assert_eq!(row.observed.io_count, 4);
    assert_eq!(row.observed.normalized_io_count, 32);
    assert_eq!(row.observed.bytes, 4 * 65536);
    let o = row.observed_rates().expect("rates");
    assert_eq!(o.iops, 2.0);
    assert_eq!(o.normalized_iops, 16.0);
    assert_eq!(o.kilobytes_per_second, 128.0);
    assert!((o.avg_response_ms.unwrap_or(0.0) - 2.0).abs() < 1e-6);
    assert_eq!(f.series.rows[1].observed.io_count, 1);
    assert_eq!(f.all_io.io_count, 6);
    // Whole observed over the finished intervals (1..4 s): 5 I/O / 3 s.
    let w = f.observed_rates().expect("whole");
    assert!((w.iops - 5.0 / 3.0).abs() < 1e-9);
    assert_eq!(f.late_io, 0);
    assert!(f.findings.is_empty(), "{:?}", codes(f));
}

#[test]
fn observed_normalization_uses_the_servers_base_io_size() {
    let mut k = Kit::default();
    associated(&mut k);
    let mut st = status(FLOW, 0, 0, 4000, Status::OK);
    st.base_io_size = 4096;
    k.exchange(1.0, 1, counters_req(FLOW, 0, 0, 0, 0), SUCCESS, Some(st));
    k.io(1.5, 1, 12288, 0.001);
    k.exchange(2.0, 1, counters_req(FLOW, 1, 3, 0, 12), SUCCESS, None);
    k.exchange(3.0, 1, counters_req(FLOW, 0, 0, 0, 0), SUCCESS, None);
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert_eq!(f.base_io_size(), 4096);
    assert_eq!(f.series.rows[0].observed.normalized_io_count, 3);
}

#[test]
fn a_steady_flow_matches_what_it_reported() {
    let mut k = Kit::default();
    let end = Steady::default().run(&mut k, 0.0);
    let a = k.finish();
    let f = flow(&a, FLOW);
    assert_eq!(end, 10.1);
    assert_eq!(f.series.rows.len(), 5);
    let r = f.reported_rates().expect("reported");
    let o = f.observed_rates().expect("observed");
    assert!((r.iops - 100.0).abs() < 1e-9, "{}", r.iops);
    assert!((o.iops - 100.0).abs() < 1e-9, "{}", o.iops);
    assert_eq!(r.avg_latency_ms, Some(2.0));
    assert!((o.avg_response_ms.unwrap_or(0.0) - 2.0).abs() < 1e-6);
    assert_eq!(f.initiator_name.as_deref(), Some("VM01"));
    assert_eq!(f.initiator_node_name.as_deref(), Some("HV-01"));
    assert!(f.findings.is_empty(), "{:?}", codes(f));
}
