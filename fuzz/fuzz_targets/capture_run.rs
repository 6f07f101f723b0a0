//! What the `pipeline` and `faces` targets share: capture bytes (pcap, pcapng, gzip of either)
//! through the reader, the pipeline and the flow analysis, as every command runs them; the
//! memory shares stay within their limits.

use sqos::analysis::{Analysis, Analyzer};
use sqos::capture::CaptureReader;
use sqos::feed::{Feed, Tap};
use sqos::pipeline::{CaptureNote, PipelineConfig, Stats};
use sqos::run::{no_progress, run_capture, Ending};

/// The notes, read as a face reads them.
struct Notes(usize);

impl Tap<Analyzer> for Notes {
    fn on_note(&mut self, note: &CaptureNote) {
        self.0 += note.message.len();
    }
}

/// The run's statistics and the finished analysis; `None` when the bytes are no capture.
#[allow(dead_code)] // not every target that includes this module uses it
pub fn run(data: &[u8]) -> Option<(Stats, Analysis)> {
    let reader = CaptureReader::from_reader(Box::new(std::io::Cursor::new(data.to_vec()))).ok()?;
    let (stats, analysis, _) = run_reader(reader)?;
    Some((stats, analysis))
}

/// [`run`] from a reader opened any way; also how the run ended (the error's text).
#[allow(dead_code)] // not every target that includes this module uses it
pub fn run_reader(reader: CaptureReader) -> Option<(Stats, Analysis, Option<String>)> {
    run_reader_with(reader, PipelineConfig::default())
}

/// [`run_reader`] with the pipeline configured as `cfg` says (`threads`: workers).
pub fn run_reader_with(
    mut reader: CaptureReader,
    cfg: PipelineConfig,
) -> Option<(Stats, Analysis, Option<String>)> {
    let mut faces = Feed {
        analysis: Analyzer::default(),
        tap: Notes(0),
    };
    let result = run_capture(&mut reader, cfg, &mut faces, &mut no_progress);
    let ending = match result.ending {
        Ending::Stopped => return None,
        Ending::Clean => None,
        Ending::Damaged(e) => Some(e.to_string()),
    };
    for m in &result.stats.memory {
        assert!(
            m.peak_bytes <= m.limit_bytes + (1 << 20),
            "{m:?} over its share"
        );
    }
    Some((result.stats, faces.analysis.finish(), ending))
}
