//! Fuzz the display filter parser: any text either parses (and then evaluates without panic on
//! an interval row) or gives an error whose span lies inside the text and renders with a caret.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sqos::capture::Timestamp;
use sqos::filter::{Context, Filter, Subject};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for ctx in [Context::Messages, Context::Flows, Context::Series] {
        match Filter::parse(text, ctx) {
            Ok(f) => {
                if ctx == Context::Series {
                    let row = serde_json::json!({"index": 3, "iops": 1.5, "initiator_name": "vm01",
                        "logical_flow_id": "06608ea2-8b2a-4c3b-9e2b-1d0e5f2a9c11", "status_ok": true});
                    if let serde_json::Value::Object(m) = row {
                        let _ = f.matches(&Subject::row(&m, None, Timestamp(0)));
                    }
                }
            }
            Err(e) => {
                if let Some(at) = e.span() {
                    assert!(at.start <= at.end && at.end <= text.len(), "{e:?}");
                    assert!(text.is_char_boundary(at.start) && text.is_char_boundary(at.end));
                }
                let shown = e.render(text);
                assert!(!shown.is_empty());
            }
        }
    }
});
