//! Capture bytes (pcap, pcapng, gzip of either) through the reader, the pipeline and the flow
//! analysis — what every face reads: no panic, and the memory shares stay within their limits.
//! The faces have targets of their own (`render`: one message; `faces`: the whole run), so
//! that this one runs at the speed of the pipeline: rendering took two thirds of its time.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "capture_run.rs"]
mod capture_run;

fuzz_target!(|data: &[u8]| {
    let _ = capture_run::run(data);
});
