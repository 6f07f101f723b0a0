//! The same capture bytes read as a stream by the general path alone (`set_walk(false)`), as
//! a memory-mapped file and as a stream give the same run: the mapped and streamed readers
//! walk packet records where they lie (in the map, in the stream's buffer) and hand runs of
//! quiet frames to the bulk lane (`Pipeline::push_run`), which must change nothing but the
//! speed. Statistics (the memory shares' peaks included), the flows' analysis (`flows --format
//! json`) and the ending are compared.
#![no_main]

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};

use libfuzzer_sys::fuzz_target;
use sqos::capture::CaptureReader;
use sqos::output::flows;

#[path = "capture_run.rs"]
mod capture_run;

fuzz_target!(|data: &[u8]| {
    let stream = || CaptureReader::from_reader(Box::new(std::io::Cursor::new(data.to_vec())));
    let Ok(mut streamed) = stream() else {
        return;
    };
    // The reference: every record through the general path, none walked where it lies.
    streamed.set_walk(false);
    let walked = stream().expect("the same bytes open again");
    // An anonymous regular file in memory, opened again by path: mapped as a capture file is.
    // SAFETY: memfd_create with a valid name; the descriptor is owned by the File from here on.
    let fd = unsafe { libc::memfd_create(c"sqos-fuzz".as_ptr(), 0) };
    assert!(fd >= 0, "memfd_create");
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(data).expect("write the memfd");
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    let Ok(mapped) = CaptureReader::open(std::path::Path::new(&path)) else {
        panic!("the stream opened, the file did not");
    };
    let a = capture_run::run_reader(streamed);
    let b = capture_run::run_reader(mapped);
    let c = capture_run::run_reader(walked);
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
    let reference = outcome(a);
    assert_eq!(reference, outcome(b), "streamed and mapped runs differ");
    assert_eq!(reference, outcome(c), "the stream's walk changes the run");
});
