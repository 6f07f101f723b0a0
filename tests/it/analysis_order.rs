//! The analysis comes out in one order whatever the hash maps inside it do: `sqos export --what
//! series` on the same file gave a different order of its last rows on every run (the rows still
//! open at the end were taken from the flows in hash-map order).

use sqos::analysis::{Analyzer, AnalyzerConfig};
use sqos::pipeline::PipelineConfig;
use sqos::run::run_path;
use uuid::Uuid;

/// (flow, first interval) of every row, streamed as `export --what series` streams them.
fn streamed_rows(capture: &str) -> Vec<(Uuid, u64)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(capture);
    let mut a = Analyzer::new(AnalyzerConfig {
        stream_rows: true,
        ..AnalyzerConfig::default()
    });
    run_path(&path, PipelineConfig::default(), &mut a).expect(capture);
    let mut rows: Vec<(Uuid, u64)> = a
        .drain_rows()
        .iter()
        .map(|(id, r)| (*id, r.index))
        .collect();
    rows.extend(a.finish().rows.iter().map(|(id, r)| (*id, r.index)));
    rows
}

/// Each analyzer has hash maps with their own random keys, so five runs in one process would
/// disagree (4 flows: 24 orders) if any order came from a map.
#[test]
fn series_rows_come_out_in_the_same_order_every_run() {
    for (capture, rows) in [
        ("captures/steady.pcap.gz", 17),
        ("captures/noisy-neighbour.pcapng.gz", 9),
    ] {
        let first = streamed_rows(capture);
        assert_eq!(first.len(), rows, "{capture}");
        for _ in 0..4 {
            assert_eq!(streamed_rows(capture), first, "{capture}");
        }
    }
}
