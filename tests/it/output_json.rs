//! The SQOS record's JSON object is written once (`output::json::RecordJson`): straight to text
//! by `dissect -T jsonl`, made a `serde_json::Value` for the other faces. Both must give the
//! same bytes, which holds only while the writer puts the keys in their order (a `Value`'s map
//! sorts them).

use sqos::output::columns::{message_flat, MESSAGE_COLUMNS};
use sqos::output::json::{record_flat_picked, record_json, RecordJson};

use crate::support::{captures_in, repo, run};

#[test]
fn the_record_written_straight_is_the_value_written() {
    let mut files = captures_in(&repo().join("captures"));
    files.extend(captures_in(&repo().join("captures/hostile")));
    let mut records = 0;
    let mut with_sqos = 0;
    let mut with_findings = 0;
    for f in &files {
        for rec in run(f).0.sqos {
            let straight = serde_json::to_string(&RecordJson(&rec)).expect("written");
            let value = record_json(&rec);
            assert_eq!(
                straight,
                value.to_string(),
                "{}: frame {}",
                f.display(),
                rec.frame
            );
            assert_eq!(
                serde_json::to_string_pretty(&RecordJson(&rec)).expect("written"),
                format!("{value:#}"),
                "{}: frame {}",
                f.display(),
                rec.frame
            );
            records += 1;
            with_sqos += usize::from(value.get("sqos").is_some());
            with_findings +=
                usize::from(value["findings"].as_array().is_some_and(|a| !a.is_empty()));
        }
    }
    // Every kind of object the schema has was compared: decoded messages, and findings.
    // 816, 718 and 14 on the captures of session 34.
    assert!(records >= 800, "{records} records");
    assert!(with_sqos >= 700, "{with_sqos} with an sqos object");
    assert!(with_findings >= 10, "{with_findings} with findings");
}

#[test]
fn a_dialect_1_1_response_keeps_its_keys_in_order_with_its_values() {
    let f = repo().join("captures/spec-examples-1.1.pcap");
    let recs = run(&f).0.sqos;
    let rec = recs
        .iter()
        .find(|r| {
            serde_json::to_value(RecordJson(r)).unwrap()["sqos"]["maximum_bandwidth"].is_u64()
        })
        .expect("a response with MaximumBandwidth");
    let line = serde_json::to_string(&RecordJson(rec)).expect("written");
    let sqos = &record_json(rec)["sqos"];
    assert_eq!(sqos["protocol_version"], 0x0101, "{line}");
    assert!(line.contains("\"maximum_bandwidth\":"), "{line}");
    // "status_name" beside "status", "time_to_live" after both: the keys' order.
    let at = |k: &str| {
        line.find(&format!("\"{k}\":"))
            .unwrap_or_else(|| panic!("{k} in {line}"))
    };
    assert!(at("status") < at("status_name") && at("status_name") < at("time_to_live"));
    assert!(at("session_id") < at("sqos") && at("sqos") < at("src"));
}

#[test]
fn the_flat_record_is_the_nested_one_with_its_sqos_object_merged_and_finding_codes() {
    let mut files = captures_in(&repo().join("captures"));
    files.extend(captures_in(&repo().join("captures/hostile")));
    let mut merged = 0;
    for f in &files {
        for rec in run(f).0.sqos {
            let nested = record_json(&rec);
            let flat = message_flat(&rec);
            let at = || format!("{}: frame {}", f.display(), rec.frame);
            let mut keys = 0;
            for (k, v) in nested.as_object().expect("an object") {
                match (k.as_str(), v) {
                    ("sqos", serde_json::Value::Object(sqos)) => {
                        for (sk, sv) in sqos {
                            assert_eq!(flat.get(sk), Some(sv), "{} {sk}", at());
                            keys += 1;
                            merged += 1;
                        }
                    }
                    ("findings", serde_json::Value::Array(list)) => {
                        let codes: Vec<&serde_json::Value> =
                            list.iter().map(|x| &x["code"]).collect();
                        let flat_codes: Vec<&serde_json::Value> = flat["findings"]
                            .as_array()
                            .expect("a list")
                            .iter()
                            .collect();
                        assert_eq!(flat_codes, codes, "{}", at());
                        keys += 1;
                    }
                    _ => {
                        assert_eq!(flat.get(k), Some(v), "{} {k}", at());
                        keys += 1;
                    }
                }
            }
            assert_eq!(flat.len(), keys, "{}: no other key", at());
        }
    }
    assert!(merged > 10_000, "{merged} sqos values compared");
}

/// A filter or a field list makes only the keys it reads (`record_flat_picked`): each pick must
/// be the whole flat object cut to those keys, whatever the keys.
#[test]
fn a_picked_record_is_the_flat_one_cut_to_the_keys_asked_for() {
    let mut files = captures_in(&repo().join("captures"));
    files.extend(captures_in(&repo().join("captures/hostile")));
    let names: Vec<&str> = MESSAGE_COLUMNS.iter().map(|c| c.name).collect();
    // Each column alone, sets of neighbours, every column, and a key no record has.
    let mut picks: Vec<Vec<&str>> = names.iter().map(|n| vec![*n]).collect();
    picks.extend(names.chunks(3).map(|c| c.to_vec()));
    picks.push(names.clone());
    picks.push(vec!["no_such_key", "frame"]);
    let mut compared = 0;
    for f in &files {
        for rec in run(f).0.sqos {
            let flat = message_flat(&rec);
            for keys in &picks {
                let picked = record_flat_picked(&rec, keys);
                let cut: serde_json::Map<String, serde_json::Value> = flat
                    .iter()
                    .filter(|(k, _)| keys.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(picked, cut, "{}: frame {} {keys:?}", f.display(), rec.frame);
                compared += picked.len();
            }
        }
    }
    assert!(compared > 20_000, "{compared} picked values compared");
}

/// A subject told which keys will be read makes only those, and still answers any other key
/// from the whole object.
#[test]
fn a_subject_answers_keys_beyond_those_it_was_told_of() {
    use sqos::filter::{FieldRef, Scope, Subject};
    let recs = run(&repo().join("captures/spec-examples-1.1.pcap")).0.sqos;
    let rec = recs.first().expect("a record");
    let flat = message_flat(rec);
    let field = |name| FieldRef {
        scope: Scope::Message,
        name,
    };
    let s = Subject::message(rec, None, rec.ts).wanting(&["frame"]);
    for name in ["frame", "msg_id", "direction"] {
        assert_eq!(s.field(field(name)), flat.get(name), "{name}");
        assert!(s.field(field(name)).is_some(), "{name}");
    }
}
