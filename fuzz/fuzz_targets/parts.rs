//! A legacy pcap file cut into parts (`CaptureReader::open_parts`, each part walked by its
//! own reader through a map that ends where the part does) gives the frames the whole file
//! gives: each cut is a guess at a record start, checked by the part before it, which ends
//! cleanly exactly where the cut is right. So the parts' frames, up to the first part that
//! ends in an error, are the start of the whole file's frames; and where only the last part
//! ends in an error (or none does), they are all of them, and the ending is the whole file's.
#![no_main]

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sqos::capture::{CaptureReader, FileAccess};

type Frames = Vec<(i64, u32, Vec<u8>)>;

/// Every frame of `r` (its time, length on the wire and bytes; numbers count within a part),
/// and whether it ended in an error.
fn frames(r: &mut CaptureReader) -> (Frames, bool) {
    let mut out = Vec::new();
    loop {
        match r.next_frame() {
            Ok(Some(f)) => out.push((f.ts.0, f.orig_len, f.data.to_vec())),
            Ok(None) => return (out, false),
            Err(_) => return (out, true),
        }
    }
}

fuzz_target!(|bytes: &[u8]| {
    // SAFETY: memfd_create with a valid name; the descriptor is owned by the File from here on.
    let fd = unsafe { libc::memfd_create(c"sqos-fuzz-parts".as_ptr(), 0) };
    assert!(fd >= 0, "memfd_create");
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes).expect("write the memfd");
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    let path = Path::new(&path);
    let Ok(mut whole) = CaptureReader::open_as(path, FileAccess::Map) else {
        assert!(CaptureReader::open_parts(path, 2).is_err(), "the parts opened, the file did not");
        return;
    };
    let (want, whole_failed) = frames(&mut whole);
    // How many parts, by the input's length (which the mutations change often).
    let parts = 1 + bytes.len() % 8;
    let mut readers = CaptureReader::open_parts(path, parts).expect("the file opened");
    assert!(!readers.is_empty() && readers.len() <= parts);
    let last = readers.len() - 1;
    let mut got = Vec::new();
    for (k, r) in readers.iter_mut().enumerate() {
        let (f, failed) = frames(r);
        got.extend(f);
        if failed && k < last {
            // A cut the guess got wrong (or a corrupt record before it): what came before is
            // the file's, from its start.
            assert!(got.len() <= want.len(), "more frames than the file's");
            assert_eq!(got[..], want[..got.len()], "part {k} of {parts} ended early");
            return;
        }
        if k == last {
            assert_eq!(failed, whole_failed, "the last part ends as the file does");
        }
    }
    assert_eq!(got, want, "{parts} parts");
});
