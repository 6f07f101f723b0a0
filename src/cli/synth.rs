use sqos::synth::{run as generate, SynthArgs};

/// `sqos synth`: write a generated capture and say what is in it on stderr.
pub fn run(a: &SynthArgs) -> i32 {
    match generate(a) {
        Ok(_) if a.quiet => 0,
        Ok(s) => {
            eprintln!(
                "{}: {} frames, {} bytes, {:.1} s, {} flows, {} SQOS requests, {} I/Os ({} bytes)",
                s.scenario,
                s.frames,
                s.capture_bytes,
                s.duration_s,
                s.flows,
                s.sqos_requests,
                s.ios,
                s.io_bytes
            );
            0
        }
        Err(e) => {
            eprintln!("sqos synth: {e}");
            2
        }
    }
}
