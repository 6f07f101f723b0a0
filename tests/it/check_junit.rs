//! The JUnit XML report, parsed back: suites per capture, cases per rule, failures and errors,
//! and escaping of names and messages.

use std::collections::BTreeMap;

use quick_xml::events::Event;
use quick_xml::Reader;

use sqos::check::junit::junit_xml;
use sqos::check::outcome::{exit_code, CaptureVerdict, Outcome};

fn outcome(name: &str, passed: bool, measured: &str) -> Outcome {
    Outcome {
        name: name.into(),
        kind: "flow_metric",
        line: Some(3),
        passed,
        measured: measured.into(),
        expected: "iops ≤ 100 for every flow".into(),
        details: vec!["vm02: 180 > 100".into()],
    }
}

/// One parsed element: its name, attributes, text, and its path of parent names.
#[derive(Debug, Default, Clone)]
struct Elem {
    name: String,
    attrs: BTreeMap<String, String>,
    text: String,
    parent: Option<usize>,
}

fn parse(xml: &[u8]) -> Vec<Elem> {
    let mut r = Reader::from_reader(xml);
    let mut out: Vec<Elem> = Vec::new();
    let mut stack: Vec<usize> = Vec::new();
    let mut buf = Vec::new();
    loop {
        let ev = r.read_event_into(&mut buf).expect("well-formed XML");
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let mut el = Elem {
                    name: String::from_utf8(e.name().as_ref().to_vec()).unwrap(),
                    parent: stack.last().copied(),
                    ..Elem::default()
                };
                for a in e.attributes() {
                    let a = a.unwrap();
                    el.attrs.insert(
                        String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                        a.unescape_value().unwrap().into_owned(),
                    );
                }
                out.push(el);
                if matches!(ev, Event::Start(_)) {
                    stack.push(out.len() - 1);
                }
            }
            Event::End(_) => {
                stack.pop();
            }
            Event::Text(t) => {
                if let Some(&i) = stack.last() {
                    out[i].text.push_str(&t.decode().unwrap());
                }
            }
            Event::GeneralRef(g) => {
                if let Some(&i) = stack.last() {
                    let name = String::from_utf8(g.to_vec()).unwrap();
                    let ch = match name.as_str() {
                        "lt" => "<",
                        "gt" => ">",
                        "amp" => "&",
                        "quot" => "\"",
                        "apos" => "'",
                        other => panic!("unexpected entity {other}"),
                    };
                    out[i].text.push_str(ch);
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    assert!(stack.is_empty(), "unclosed elements");
    out
}

#[test]
fn suites_cases_failures_and_errors_read_back() {
    let verdicts = vec![
        CaptureVerdict {
            capture: "captures/steady.pcap".into(),
            outcomes: vec![
                outcome("flow count", true, "4 flows"),
                outcome(
                    "iops <cap> & \"quotes\"",
                    false,
                    "1 of 4 flows off: vm02: 180 > 100",
                ),
            ],
            error: None,
        },
        CaptureVerdict {
            capture: "missing.pcap".into(),
            outcomes: Vec::new(),
            error: Some("unusable capture: no such file".into()),
        },
    ];
    assert_eq!(exit_code(&verdicts), 2);
    let xml = junit_xml(&verdicts).unwrap();
    let els = parse(&xml);

    let root = &els[0];
    assert_eq!(root.name, "testsuites");
    assert_eq!(root.attrs["tests"], "3");
    assert_eq!(root.attrs["failures"], "1");
    assert_eq!(root.attrs["errors"], "1");

    let suites: Vec<&Elem> = els.iter().filter(|e| e.name == "testsuite").collect();
    assert_eq!(suites.len(), 2);
    assert_eq!(suites[0].attrs["name"], "captures/steady.pcap");
    assert_eq!(suites[0].attrs["tests"], "2");
    assert_eq!(suites[0].attrs["failures"], "1");
    assert_eq!(suites[0].attrs["errors"], "0");
    assert_eq!(suites[1].attrs["name"], "missing.pcap");
    assert_eq!(suites[1].attrs["errors"], "1");

    let cases: Vec<(usize, &Elem)> = els
        .iter()
        .enumerate()
        .filter(|(_, e)| e.name == "testcase")
        .collect();
    let names: Vec<&str> = cases
        .iter()
        .map(|(_, e)| e.attrs["name"].as_str())
        .collect();
    assert_eq!(
        names,
        vec![
            "flow count",
            "iops <cap> & \"quotes\"",
            "capture can be judged"
        ]
    );
    assert_eq!(cases[0].1.attrs["classname"], "captures/steady.pcap");

    let failures: Vec<&Elem> = els.iter().filter(|e| e.name == "failure").collect();
    assert_eq!(failures.len(), 1);
    let f = failures[0];
    // The failure sits in the failed rule's testcase.
    assert_eq!(f.parent, Some(cases[1].0));
    assert_eq!(f.attrs["type"], "flow_metric");
    assert_eq!(
        f.attrs["message"],
        "1 of 4 flows off: vm02: 180 > 100 (expected iops ≤ 100 for every flow)"
    );
    assert!(f.text.contains("rule at line 3"), "{}", f.text);
    assert!(f.text.contains("vm02: 180 > 100"), "{}", f.text);

    let errors: Vec<&Elem> = els.iter().filter(|e| e.name == "error").collect();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].parent, Some(cases[2].0));
    assert_eq!(errors[0].attrs["message"], "unusable capture: no such file");
}

#[test]
fn all_passing_is_exit_zero_and_has_no_failure_elements() {
    let v = vec![CaptureVerdict {
        capture: "a.pcap".into(),
        outcomes: vec![outcome("x", true, "1"), outcome("y", true, "2")],
        error: None,
    }];
    assert_eq!(exit_code(&v), 0);
    let els = parse(&junit_xml(&v).unwrap());
    assert_eq!(els.iter().filter(|e| e.name == "testcase").count(), 2);
    assert!(!els.iter().any(|e| e.name == "failure" || e.name == "error"));
    let mut v = v;
    v[0].outcomes[1].passed = false;
    assert_eq!(exit_code(&v), 1);
}

#[test]
fn control_characters_in_names_stay_well_formed() {
    let v = vec![CaptureVerdict {
        capture: "a.pcap".into(),
        outcomes: vec![outcome("vm\u{1}01", false, "bell \u{7}")],
        error: None,
    }];
    let els = parse(&junit_xml(&v).unwrap());
    let case = els.iter().find(|e| e.name == "testcase").unwrap();
    // Escaped visibly, as on every face (docs/robustness.md).
    assert_eq!(case.attrs["name"], "vm\\x0101");
}
