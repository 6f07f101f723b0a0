//! Capture bytes through the pipeline and the analysis (as the `pipeline` target), then every
//! face that shows the whole run: `stats` text and JSON, `flows` text, JSON and CSV. Single
//! messages' faces are the `render` target's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sqos::output::{columns, csv, flows, stats};

#[path = "capture_run.rs"]
mod capture_run;

fuzz_target!(|data: &[u8]| {
    let Some((run, analysis)) = capture_run::run(data) else {
        return;
    };
    let _ = stats::stats_text(&run);
    let _ = stats::stats_json(&run);
    let _ = flows::flows_text(&analysis);
    let all = flows::flows_json(&analysis);
    if let Some(list) = all.as_array() {
        for f in list {
            let flat = columns::flow_flat(f);
            let _cells: usize = flat.values().map(|v| csv::cell(Some(v)).len()).sum();
        }
    }
});
