//! Capture bytes (pcap, pcapng, gzip of either) through everything a face reads: the reader,
//! the pipeline, the flow analysis, and the text / JSON / CSV renderings of the first records
//! and of every flow. No panic, and the memory shares stay within their limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sqos::analysis::Analyzer;
use sqos::capture::CaptureReader;
use sqos::feed::{Feed, Tap};
use sqos::output::{columns, csv, flows, json, stats, text};
use sqos::pipeline::{CaptureNote, SqosRecord};
use sqos::run::{no_progress, run_capture, Ending};

/// Records rendered per input. A record's renderings depend on that record alone, so the
/// rest of a long input would add time, not paths: rendering all of them (the `-V` tree above
/// all) held this target at a few hundred executions a second. libFuzzer moves what a later
/// record holds to the front as easily as it changes it.
const RENDERED: usize = 8;

/// Renders the first [`RENDERED`] records as `dissect` does, before the analysis takes them
/// (the analysis gets every record through the faces' one adapter, `sqos::feed`).
struct Render {
    records: usize,
    rendered: usize,
}

impl Tap<Analyzer> for Render {
    fn before(&mut self, _analysis: &mut Analyzer, rec: &SqosRecord) {
        self.records += 1;
        if self.records > RENDERED {
            return;
        }
        let first = rec.ts;
        self.rendered += text::summary_line(rec, first).len();
        self.rendered += text::detail_tree(rec, first).len();
        self.rendered += json::record_json(rec).to_string().len();
        let flat = columns::message_flat(rec);
        self.rendered += flat.values().map(|v| csv::cell(Some(v)).len()).sum::<usize>();
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.rendered += note.message.len();
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = CaptureReader::from_reader(Box::new(std::io::Cursor::new(data.to_vec())))
    else {
        return;
    };
    let mut faces = Feed {
        analysis: Analyzer::default(),
        tap: Render {
            records: 0,
            rendered: 0,
        },
    };
    let result = run_capture(
        &mut reader,
        Default::default(),
        &mut faces,
        &mut no_progress,
    );
    if matches!(result.ending, Ending::Stopped) {
        return;
    }
    for m in &result.stats.memory {
        assert!(
            m.peak_bytes <= m.limit_bytes + (1 << 20),
            "{m:?} over its share"
        );
    }
    let _ = stats::stats_text(&result.stats);
    let _ = stats::stats_json(&result.stats);
    let analysis = faces.analysis.finish();
    let _ = flows::flows_text(&analysis);
    let all = flows::flows_json(&analysis);
    if let Some(list) = all.as_array() {
        for f in list {
            let flat = columns::flow_flat(f);
            let _ = flat.values().map(|v| csv::cell(Some(v))).count();
        }
    }
});
