//! A rules file for `sqos check` (TOML): parsed, or refused with an error that names the line;
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sqos::check::rules::Rules;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Rules::parse(text, "fuzz.toml") {
        Ok(r) => {
            let _ = format!("{:?}", r.rules);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
