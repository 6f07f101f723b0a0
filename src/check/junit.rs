//! JUnit XML for CI systems: one `<testsuite>` per capture, one `<testcase>` per rule, a
//! `<failure>` for a failed rule and an `<error>` for a capture that could not be judged.
//! Wire text is escaped as for a terminal (`output::escape`), then quick-xml escapes markup;
//! characters XML 1.0 cannot hold at all are replaced.

use std::io;

use quick_xml::events::{BytesDecl, BytesText, Event};
use quick_xml::Writer;

use super::outcome::{CaptureVerdict, Outcome};

/// Control characters and bidi overrides escaped visibly (line breaks kept), and what XML 1.0
/// forbids even when escaped replaced (lone surrogates cannot occur in `str`; U+FFFE/U+FFFF).
fn xml_safe(s: &str) -> String {
    crate::output::escape::lines(s)
        .chars()
        .map(|c| match c {
            '\u{FFFE}' | '\u{FFFF}' => '\u{FFFD}',
            c => c,
        })
        .collect()
}

fn failure_text(o: &Outcome) -> String {
    let mut s = format!("measured: {}\nexpected: {}", o.measured, o.expected);
    if let Some(l) = o.line {
        s.push_str(&format!("\nrule at line {l}"));
    }
    for d in &o.details {
        s.push_str("\n  ");
        s.push_str(d);
    }
    xml_safe(&s)
}

/// The JUnit document for all captures of one run.
pub fn junit_xml(verdicts: &[CaptureVerdict]) -> io::Result<Vec<u8>> {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let tests: usize = verdicts
        .iter()
        .map(|v| v.outcomes.len().max(usize::from(v.error.is_some())))
        .sum();
    let failures: usize = verdicts.iter().map(CaptureVerdict::failed).sum();
    let errors = verdicts.iter().filter(|v| v.error.is_some()).count();
    let (t, f, e) = (tests.to_string(), failures.to_string(), errors.to_string());
    w.create_element("testsuites")
        .with_attributes([
            ("name", "sqos check"),
            ("tests", t.as_str()),
            ("failures", f.as_str()),
            ("errors", e.as_str()),
        ])
        .write_inner_content(|w| {
            for v in verdicts {
                suite(w, v)?;
            }
            Ok(())
        })?;
    let mut out = w.into_inner();
    out.push(b'\n');
    Ok(out)
}

fn suite(w: &mut Writer<Vec<u8>>, v: &CaptureVerdict) -> io::Result<()> {
    let name = xml_safe(&v.capture);
    let tests =
        (v.outcomes.len() + usize::from(v.error.is_some() && v.outcomes.is_empty())).to_string();
    let failures = v.failed().to_string();
    let errors = usize::from(v.error.is_some()).to_string();
    w.create_element("testsuite")
        .with_attributes([
            ("name", name.as_str()),
            ("tests", tests.as_str()),
            ("failures", failures.as_str()),
            ("errors", errors.as_str()),
        ])
        .write_inner_content(|w| {
            if let Some(err) = &v.error {
                let msg = xml_safe(err);
                w.create_element("testcase")
                    .with_attributes([
                        ("name", "capture can be judged"),
                        ("classname", name.as_str()),
                    ])
                    .write_inner_content(|w| {
                        w.create_element("error")
                            .with_attribute(("message", msg.as_str()))
                            .write_text_content(BytesText::new(&msg))?;
                        Ok(())
                    })?;
            }
            for o in &v.outcomes {
                let case_name = xml_safe(&o.name);
                let case = w
                    .create_element("testcase")
                    .with_attributes([("name", case_name.as_str()), ("classname", name.as_str())]);
                if o.passed {
                    case.write_empty()?;
                } else {
                    let msg = xml_safe(&format!("{} (expected {})", o.measured, o.expected));
                    let body = failure_text(o);
                    case.write_inner_content(|w| {
                        w.create_element("failure")
                            .with_attributes([("message", msg.as_str()), ("type", o.kind)])
                            .write_text_content(BytesText::new(&body))?;
                        Ok(())
                    })?;
                }
            }
            Ok(())
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_what_xml_forbids_replaced() {
        assert_eq!(xml_safe("a\u{1}b\tc<\n"), "a\\x01b\\tc<\n");
        assert_eq!(xml_safe("x\u{FFFE}"), "x\u{FFFD}");
    }
}
