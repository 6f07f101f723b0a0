//! `--separate`: each capture analysed on its own (in parallel), each row labelled with its
//! file, the files in the order given — what each file gives alone, whatever finishes first. A
//! bad file is named and does not stop the others.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{sqos_on as sqos, stdout_text as text};

fn capture(name: &str) -> PathBuf {
    crate::support::repo().join("captures").join(name)
}

/// The largest capture first: it finishes last, yet its rows come first.
fn three() -> Vec<PathBuf> {
    vec![
        capture("noisy-neighbour.pcapng.gz"),
        capture("spec-examples-1.0.pcap"),
        capture("steady.pcap.gz"),
    ]
}

fn label(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn text_rows_carry_their_file_in_file_order() {
    let files = three();
    let out = sqos(&["dissect", "--separate"], &files);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut expected = String::new();
    for f in &files {
        let alone = sqos(&["dissect"], std::slice::from_ref(f));
        for line in text(&alone).lines() {
            expected.push_str(&format!("{}: {line}\n", label(f)));
        }
    }
    assert_eq!(text(&out), expected);
    // Frame numbers and relative times are each file's own.
    let second = text(&out)
        .lines()
        .find(|l| l.starts_with(&label(&files[1])))
        .map(str::to_owned)
        .unwrap();
    assert!(
        second.contains(":     19    0.002364 10.0.0.11:49712 → 10.0.0.100:445 SQOS Request  id=5"),
        "{second}"
    );
    // The same bytes however the files' runs interleave.
    for _ in 0..3 {
        assert_eq!(text(&sqos(&["dissect", "--separate"], &files)), expected);
    }
}

#[test]
fn json_documents_become_one_array_of_labelled_rows() {
    let files = three();
    let out = sqos(&["flows", "--separate", "--format", "json"], &files);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let all = all.as_array().expect("an array");
    // `flows --format json` is an array of flows: each flow carries its file.
    let mut start = 0;
    for f in &files {
        let alone: Value = serde_json::from_slice(
            &sqos(&["flows", "--format", "json"], std::slice::from_ref(f)).stdout,
        )
        .unwrap();
        let alone = alone.as_array().unwrap();
        let mine: Vec<Value> = all[start..start + alone.len()]
            .iter()
            .map(|flow| {
                let mut flow = flow.clone();
                let file = flow.as_object_mut().unwrap().remove("file");
                assert_eq!(file, Some(Value::from(label(f))));
                flow
            })
            .collect();
        assert_eq!(&mine, alone, "{f:?} as alone");
        start += alone.len();
    }
    assert_eq!(start, all.len());
    let vms: Vec<&str> = all
        .iter()
        .map(|f| f["initiator_name"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(
        vms,
        ["vm01", "vm02", "vm03", "vm04", "-", "vm01", "vm02", "vm03", "vm04"]
    );

    // `stats --format json` is one object per file.
    let stats = sqos(&["stats", "--separate", "--format", "json"], &files);
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    let counts: Vec<(String, u64, u64)> = stats
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["file"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_owned(),
                s["frames"].as_u64().unwrap(),
                s["sqos_messages"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [
            ("noisy-neighbour.pcapng.gz".to_owned(), 13204, 42),
            ("spec-examples-1.0.pcap".to_owned(), 27, 6),
            ("steady.pcap.gz".to_owned(), 11029, 58),
        ]
    );
}

#[test]
fn json_lines_and_csv_rows_get_a_file_field() {
    let files = three();
    let lines = sqos(&["dissect", "--separate", "-T", "jsonl"], &files);
    let mut counts = vec![0; files.len()];
    for line in text(&lines).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let file = v["file"].as_str().unwrap();
        let i = files.iter().position(|f| label(f) == file).unwrap();
        assert!(counts[i + 1..].iter().all(|&n| n == 0), "file order");
        counts[i] += 1;
    }
    let per_file: Vec<usize> = files
        .iter()
        .map(|f| {
            text(&sqos(&["dissect"], std::slice::from_ref(f)))
                .lines()
                .count()
        })
        .collect();
    assert_eq!(counts, per_file);

    let csv = sqos(
        &[
            "export",
            "--separate",
            "--what",
            "messages",
            "--format",
            "csv",
        ],
        &files,
    );
    assert!(
        csv.status.success(),
        "{}",
        String::from_utf8_lossy(&csv.stderr)
    );
    let mut r = csv::Reader::from_reader(&csv.stdout[..]);
    let header = r.headers().unwrap().clone();
    assert_eq!(header.get(0), Some("file"));
    let single = sqos(
        &["export", "--what", "messages", "--format", "csv"],
        &files[2..],
    );
    let mut alone = csv::Reader::from_reader(&single.stdout[..]);
    assert_eq!(
        header.iter().skip(1).collect::<Vec<_>>(),
        alone.headers().unwrap().iter().collect::<Vec<_>>()
    );
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), per_file.iter().sum::<usize>());
    let last: Vec<Vec<String>> = rows
        .iter()
        .filter(|r| r.get(0) == Some(label(&files[2]).as_str()))
        .map(|r| r.iter().skip(1).map(str::to_owned).collect())
        .collect();
    let expected: Vec<Vec<String>> = alone
        .records()
        .map(|r| r.unwrap().iter().map(str::to_owned).collect())
        .collect();
    assert_eq!(last, expected);
}

#[test]
fn a_bad_file_is_named_and_the_others_are_read() {
    let tmp = crate::support::scratch("sqos-separate-");
    let not_a_capture = tmp.path().join("notes.pcap");
    std::fs::write(&not_a_capture, "not a capture\n").unwrap();
    let cut = tmp.path().join("cut.pcap");
    let whole = std::fs::read(capture("spec-examples-1.1.pcap")).unwrap();
    std::fs::write(&cut, &whole[..whole.len() - 7]).unwrap();
    let files = vec![
        capture("steady.pcap.gz"),
        not_a_capture.clone(),
        cut.clone(),
        capture("policy-change.pcap.gz"),
    ];
    let out = sqos(&["flows", "--separate"], &files);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "the worst of the files: {stderr}"
    );
    assert!(
        stderr.contains(&label(&not_a_capture)) && stderr.contains(&label(&cut)),
        "both bad files named: {stderr}"
    );
    assert!(stderr.contains("capture cut off"), "{stderr}");
    let stdout = text(&out);
    for f in [&files[0], &cut, &files[3]] {
        assert!(
            stdout.contains(&format!("{}: ", label(f))),
            "{f:?} read: {stdout}"
        );
    }
    assert!(!stdout.contains(&label(&not_a_capture)));

    // A cut file alone: exit 1, as when it is read without --separate.
    let cut_only = sqos(&["flows", "--separate"], &[cut.clone(), files[0].clone()]);
    assert_eq!(cut_only.status.code(), Some(1));
}

#[test]
fn options_that_name_one_output_are_refused() {
    let files = three();
    let w = sqos(
        &["dissect", "--separate", "-w", "/nonexistent/x.pcap"],
        &files,
    );
    assert_eq!(w.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&w.stderr).contains("leave out -w"));
    let stdin = sqos(&["stats", "--separate", "-"], &files);
    assert_eq!(stdin.status.code(), Some(2));
    // One file: --separate changes nothing.
    let one = &files[2..];
    assert_eq!(
        text(&sqos(&["dissect", "--separate"], one)),
        text(&sqos(&["dissect"], one))
    );
}
