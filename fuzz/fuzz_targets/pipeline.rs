//! Capture bytes (pcap, pcapng, gzip of either) through everything a face reads: the reader,
//! the pipeline, the flow analysis, and the text / JSON / CSV renderings of every record and
//! flow. No panic, and the memory shares stay within their limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sqos::analysis::Analyzer;
use sqos::capture::CaptureReader;
use sqos::output::{csv, flows, json, stats, text};
use sqos::pipeline::{
    CaptureNote, ChannelRecord, CloseRecord, IoRecord, OpenRecord, RecordSink, SqosRecord,
};
use sqos::run::{no_progress, run_capture, CaptureSink, Ending};

/// Renders every record as `dissect` does, then hands it to the analysis.
struct Faces {
    analyzer: Analyzer,
    rendered: usize,
}

impl RecordSink for Faces {
    fn on_sqos(&mut self, rec: SqosRecord) {
        let first = rec.ts;
        self.rendered += text::summary_line(&rec, first).len();
        self.rendered += text::detail_tree(&rec, first).len();
        self.rendered += json::record_json(&rec).to_string().len();
        self.rendered += csv::message_flat(&rec).len();
        self.analyzer.on_sqos(rec);
    }
    fn on_open(&mut self, rec: &OpenRecord) {
        self.analyzer.on_open(rec);
    }
    fn on_close(&mut self, rec: &CloseRecord) {
        self.analyzer.on_close(rec);
    }
    fn on_io(&mut self, rec: &IoRecord) {
        self.analyzer.on_io(rec);
    }
    /// Channels feed the analysis, as in `flows`: its channel table is fuzzed too.
    fn on_channel(&mut self, rec: &ChannelRecord) {
        self.analyzer.on_channel(rec);
    }
    fn on_note(&mut self, note: &CaptureNote) {
        self.rendered += note.message.len();
        self.analyzer.on_note(note);
    }
}

impl CaptureSink for Faces {}

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = CaptureReader::from_reader(Box::new(std::io::Cursor::new(data.to_vec())))
    else {
        return;
    };
    let mut faces = Faces {
        analyzer: Analyzer::default(),
        rendered: 0,
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
    let analysis = faces.analyzer.finish();
    let _ = flows::flows_text(&analysis);
    let all = flows::flows_json(&analysis);
    if let Some(list) = all.as_array() {
        for f in list {
            let _ = csv::flow_flat(f);
        }
    }
});
