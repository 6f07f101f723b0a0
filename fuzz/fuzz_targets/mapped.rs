//! The same capture bytes read as a stream by the general path alone (`set_walk(false)`) give
//! the run they give as a memory-mapped file, a file read in chunks (of 64 bytes in a fuzzing
//! build, with or without a thread reading ahead) or a stream: the readers walk packet records
//! where they lie (in the map, the chunks' buffers, the stream's buffer) and hand runs of quiet
//! frames to the bulk lane (`Pipeline::push_run`), which must change nothing but the speed.
//! The mapped file is also run with a thread to spare (`--threads 2`: a legacy pcap file's
//! records indexed ahead of the reader, `capture::index`, from guessed record starts) and on
//! workers (`--threads 3` and `4`: one worker given every frame, two given their connections'
//! frames, where they lie in the map), whose output must be the one thread's. Statistics (the memory shares' peaks included), the flows' analysis
//! (`flows --format json`) and the ending are compared.
#![no_main]

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};

use libfuzzer_sys::fuzz_target;
use sqos::capture::{CaptureReader, FileAccess};
use sqos::output::flows;

#[path = "capture_run.rs"]
mod capture_run;

fuzz_target!(|data: &[u8]| {
    let stream = || CaptureReader::from_reader(Box::new(std::io::Cursor::new(data.to_vec())));
    let Ok(mut reference) = stream() else {
        return;
    };
    // The reference: every record through the general path, none walked where it lies.
    reference.set_walk(false);
    // Each input checks one of the walks against it, by its length (which the mutations change
    // often): two runs an execution rather than eight.
    let (walked, what, threads) = match data.len() % 7 {
        0 => (file(data, FileAccess::Map), "mapped", 1),
        1 => (file(data, FileAccess::Chunks), "chunked", 1),
        2 => {
            let mut r = file(data, FileAccess::Chunks);
            r.read_ahead();
            (r, "chunked read ahead", 1)
        }
        3 => (file(data, FileAccess::Map), "mapped, one worker", 3),
        4 => (file(data, FileAccess::Map), "mapped, two workers", 4),
        5 => (file(data, FileAccess::Map), "mapped, indexed ahead", 2),
        _ => (
            stream().expect("the same bytes open again"),
            "walked stream",
            1,
        ),
    };
    let cfg = sqos::pipeline::PipelineConfig {
        threads,
        ..Default::default()
    };
    // What the faces show: the statistics and the flows' analysis, and how the run ended.
    let outcome = |r: Option<(
        sqos::pipeline::Stats,
        sqos::analysis::Analysis,
        Option<String>,
    )>| {
        r.map(|(stats, analysis, ending)| {
            let stats = serde_json::to_string(&stats).expect("stats");
            (stats, flows::flows_json(&analysis).to_string(), ending)
        })
    };
    assert_eq!(
        outcome(capture_run::run_reader(reference)),
        outcome(capture_run::run_reader_with(walked, cfg)),
        "the general path's run and the {what}'s differ"
    );
});

/// `data` in an anonymous regular file in memory, opened by path as a capture file is, read
/// as `access` says (in chunks of 64 bytes in a fuzzing build).
fn file(data: &[u8], access: FileAccess) -> CaptureReader {
    // SAFETY: memfd_create with a valid name; the descriptor is owned by the File from here on.
    let fd = unsafe { libc::memfd_create(c"sqos-fuzz".as_ptr(), 0) };
    assert!(fd >= 0, "memfd_create");
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(data).expect("write the memfd");
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    let Ok(reader) = CaptureReader::open_as(std::path::Path::new(&path), access) else {
        panic!("the stream opened, the file did not");
    };
    match access {
        FileAccess::Map => assert!(reader.is_mapped(), "a memfd is a regular file"),
        FileAccess::Chunks | FileAccess::Auto => {
            assert!(reader.is_chunked(), "a memfd is a regular file")
        }
    }
    reader
}
