//! `sqos::feed::Feed`, the one adapter the faces feed the flow analysis through: every record
//! reaches the analysis (the flow table equals the analyzer's own, fed directly, on captures
//! with lost bytes and several channels), and the tap sees each SQOS message just before and
//! just after the analysis takes it, the other records, the notes and the first frame.

use std::path::Path;

use sqos::analysis::Analyzer;
use sqos::capture::Timestamp;
use sqos::feed::{Feed, Tap};
use sqos::output::flows::flows_json;
use sqos::pipeline::{
    CaptureNote, ChannelRecord, CloseRecord, IoRecord, OpenRecord, PipelineConfig, SqosRecord,
};
use sqos::run::run_path;

use crate::support::{repo, run};

#[derive(Default)]
struct Seen {
    before: Vec<u64>,
    /// The flow the analyzer gave each message, right after feeding it.
    after: Vec<Option<uuid::Uuid>>,
    notes: usize,
    first: Option<Timestamp>,
    opens: usize,
    closes: usize,
    io: usize,
    channels: usize,
}

impl Tap<Analyzer> for Seen {
    fn before(&mut self, _a: &mut Analyzer, rec: &SqosRecord) {
        self.before.push(rec.frame);
    }
    fn after(&mut self, a: &mut Analyzer) {
        self.after.push(a.last_message().flow.map(|(id, _)| id));
    }
    fn on_open(&mut self, _rec: &OpenRecord) {
        self.opens += 1;
    }
    fn on_close(&mut self, _rec: &CloseRecord) {
        self.closes += 1;
    }
    fn on_io(&mut self, _rec: &IoRecord) {
        self.io += 1;
    }
    fn on_channel(&mut self, _rec: &ChannelRecord) {
        self.channels += 1;
    }
    fn on_note(&mut self, _note: &CaptureNote) {
        self.notes += 1;
    }
    fn on_first_frame(&mut self, ts: Timestamp) {
        self.first = Some(ts);
    }
}

fn check(name: &str) {
    let path = repo().join("captures").join(name);
    let mut feed = Feed {
        analysis: Analyzer::default(),
        tap: Seen::default(),
    };
    run_path(&path, PipelineConfig::default(), &mut feed).expect("capture");
    let mut direct = Analyzer::default();
    run_path(&path, PipelineConfig::default(), &mut direct).expect("capture");
    let (collected, _) = run(Path::new(&path));

    assert_eq!(
        flows_json(&feed.analysis.finish()),
        flows_json(&direct.finish()),
        "{name}"
    );
    let frames: Vec<u64> = collected.sqos.iter().map(|r| r.frame).collect();
    assert!(!frames.is_empty(), "{name}");
    assert_eq!(feed.tap.before, frames, "{name}");
    assert_eq!(feed.tap.after.len(), frames.len(), "{name}");
    assert!(feed.tap.after.iter().any(Option::is_some), "{name}");
    assert_eq!(feed.tap.notes, collected.notes.len(), "{name}");
    assert_eq!(feed.tap.first, collected.first_ts, "{name}");
    assert_eq!(feed.tap.opens, collected.opens.len(), "{name}");
    assert_eq!(feed.tap.closes, collected.closes.len(), "{name}");
    assert_eq!(feed.tap.io, collected.io.len(), "{name}");
    assert!(feed.tap.opens > 0 && feed.tap.io > 0, "{name}");
    assert!(feed.tap.channels > 0, "{name}");
}

#[test]
fn the_analysis_gets_every_record_and_the_tap_every_message() {
    check("lossy-network.pcapng.gz");
    check("multichannel.pcap.gz");
}
