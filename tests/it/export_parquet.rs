//! `sqos export --format parquet`: typed columns that hold what the CSV export holds, cell for
//! cell, on every committed capture; the capture columns; partitioned output for a directory.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float64Type, Int64Type, TimestampMicrosecondType, UInt32Type, UInt64Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, SchemaRef, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::{FileReader, SerializedFileReader};

const TABLES: [&str; 4] = ["messages", "flows", "series", "findings"];

fn sqos(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(args)
        .output()
        .expect("run sqos")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sqos-parquet-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn export(capture: &Path, what: &str, format: &str, out: &Path) {
    let o = sqos(&[
        "export",
        &capture.to_string_lossy(),
        "--what",
        what,
        "--format",
        format,
        "--quiet",
        "-o",
        &out.to_string_lossy(),
    ]);
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "{}: {}",
        capture.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn read_parquet(path: &Path) -> Vec<RecordBatch> {
    read_parquet_with_schema(path).1
}

/// The file's schema (also when it has no rows) and its batches.
fn read_parquet_with_schema(path: &Path) -> (SchemaRef, Vec<RecordBatch>) {
    let f = File::open(path).expect("parquet file");
    let b = ParquetRecordBatchReaderBuilder::try_new(f).expect("parquet footer");
    let schema = Arc::clone(b.schema());
    let batches = b
        .build()
        .expect("reader")
        .collect::<Result<_, _>>()
        .expect("batches");
    (schema, batches)
}

/// A value as the CSV export writes it (`sqos::output::csv::cell`), times as epoch micros.
fn cell(a: &dyn Array, i: usize) -> String {
    if a.is_null(i) {
        return String::new();
    }
    match a.data_type() {
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i).to_string(),
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(i).to_string(),
        DataType::UInt32 => a.as_primitive::<UInt32Type>().value(i).to_string(),
        DataType::Float64 => {
            serde_json::Value::from(a.as_primitive::<Float64Type>().value(i)).to_string()
        }
        DataType::Boolean => a.as_boolean().value(i).to_string(),
        DataType::Utf8 => a.as_string::<i32>().value(i).to_string(),
        DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if tz.as_ref() == "UTC" => {
            format!("@{}", a.as_primitive::<TimestampMicrosecondType>().value(i))
        }
        DataType::List(_) => {
            let l = a.as_list::<i32>().value(i);
            (0..l.len())
                .map(|j| cell(l.as_ref(), j))
                .collect::<Vec<_>>()
                .join("|")
        }
        t => panic!("unexpected type {t}"),
    }
}

/// CSV time cells are epoch seconds; Parquet's are microseconds.
fn csv_cell_as_parquet(header: &str, v: &str, time_columns: &[String]) -> String {
    if !v.is_empty() && time_columns.iter().any(|c| c == header) {
        let secs: f64 = v.parse().expect("seconds");
        format!("@{}", (secs * 1e6).round() as i64)
    } else {
        v.to_string()
    }
}

#[test]
fn parquet_holds_what_csv_holds_on_every_capture() {
    let dir = tmp("every");
    let mut captures = crate::support::captures_in(&crate::support::repo().join("captures"));
    captures.extend(crate::support::captures_in(
        &crate::support::repo().join("captures/real"),
    ));
    assert!(captures.len() >= 15, "{captures:?}");
    let mut rows = 0;
    for cap in &captures {
        for what in TABLES {
            let csv_path = dir.join(format!("{what}.csv"));
            let pq_path = dir.join(format!("{what}.parquet"));
            export(cap, what, "csv", &csv_path);
            export(cap, what, "parquet", &pq_path);
            let (schema, batches) = read_parquet_with_schema(&pq_path);
            let mut rdr = csv::Reader::from_path(&csv_path).expect("csv");
            let headers: Vec<String> = rdr
                .headers()
                .expect("header")
                .iter()
                .map(String::from)
                .collect();
            // The CSV's columns, in order, then the capture columns.
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            assert_eq!(names[..headers.len()], headers[..], "{what}");
            assert_eq!(
                names[headers.len()..],
                ["capture_file", "capture_host", "capture_start"]
            );
            let time_columns: Vec<String> = schema
                .fields()
                .iter()
                .filter(|f| matches!(f.data_type(), DataType::Timestamp(..)))
                .map(|f| f.name().clone())
                .collect();
            let csv_rows: Vec<csv::StringRecord> =
                rdr.records().collect::<Result<_, _>>().expect("rows");
            let n: usize = batches.iter().map(RecordBatch::num_rows).sum();
            assert_eq!(n, csv_rows.len(), "{} {what}", cap.display());
            let mut k = 0;
            for b in &batches {
                for i in 0..b.num_rows() {
                    for (c, h) in headers.iter().enumerate() {
                        let want = csv_cell_as_parquet(h, &csv_rows[k][c], &time_columns);
                        assert_eq!(
                            cell(b.column(c).as_ref(), i),
                            want,
                            "{} {what} row {k} column {h}",
                            cap.display()
                        );
                    }
                    let file = b.column(headers.len()).as_string::<i32>().value(i);
                    assert_eq!(file, cap.to_string_lossy());
                    assert!(b.column(headers.len() + 1).is_null(i), "no --host: null");
                    assert!(!b.column(headers.len() + 2).is_null(i), "capture_start");
                    k += 1;
                }
            }
            rows += n;
        }
    }
    assert!(rows > 1000, "{rows} rows compared");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn columns_are_typed_and_values_exact() {
    let dir = tmp("typed");
    let cap = crate::support::repo().join("captures/steady.pcap.gz");
    let out = dir.join("m.parquet");
    let o = sqos(&[
        "export",
        &cap.to_string_lossy(),
        "--what",
        "messages",
        "--format",
        "parquet",
        "--host",
        "HV01",
        "-o",
        &out.to_string_lossy(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let batches = read_parquet(&out);
    let b = &batches[0];
    let s = b.schema();
    let ty = |n: &str| s.field_with_name(n).expect(n).data_type().clone();
    assert_eq!(
        ty("time"),
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    );
    assert_eq!(ty("frame"), DataType::Int64);
    assert_eq!(ty("msg_id"), DataType::UInt64);
    assert_eq!(ty("session_id"), DataType::UInt64);
    assert_eq!(ty("status"), DataType::UInt32);
    assert_eq!(ty("logical_flow_id"), DataType::Utf8);
    assert!(matches!(ty("findings"), DataType::List(_)));
    // The first SQOS message of steady: the values `sqos dissect --format jsonl` prints.
    let d = sqos(&["dissect", &cap.to_string_lossy(), "--format", "jsonl"]);
    let first: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&d.stdout)
            .lines()
            .next()
            .expect("line"),
    )
    .expect("json");
    let col = |n: &str| b.column_by_name(n).expect(n).clone();
    assert_eq!(
        col("frame").as_primitive::<Int64Type>().value(0),
        first["frame"].as_i64().expect("frame")
    );
    assert_eq!(
        col("session_id").as_primitive::<UInt64Type>().value(0),
        first["session_id"].as_u64().expect("session")
    );
    assert_eq!(
        col("logical_flow_id").as_string::<i32>().value(0),
        first["sqos"]["logical_flow_id"].as_str().expect("flow")
    );
    let micros = col("time")
        .as_primitive::<TimestampMicrosecondType>()
        .value(0);
    let secs = first["time"].as_f64().expect("time");
    assert_eq!(micros, (secs * 1e6).round() as i64);
    assert_eq!(col("capture_host").as_string::<i32>().value(0), "HV01");
    assert!(
        col("capture_start")
            .as_primitive::<TimestampMicrosecondType>()
            .value(0)
            <= micros
    );
    let meta = SerializedFileReader::new(File::open(&out).expect("file")).expect("footer");
    assert!(meta
        .metadata()
        .file_metadata()
        .created_by()
        .is_some_and(|c| c.starts_with("sqos ")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_directory_of_captures_becomes_hive_partitions() {
    let dir = tmp("partition");
    let archive = dir.join("archive");
    for (host, cap) in [
        ("HV01", "steady.pcap.gz"),
        ("HV01", "policy-change.pcap.gz"),
        ("HV02", "noisy-neighbour.pcapng.gz"),
    ] {
        std::fs::create_dir_all(archive.join(host)).expect("dir");
        std::fs::copy(
            crate::support::repo().join("captures").join(cap),
            archive.join(host).join(cap),
        )
        .expect("copy");
    }
    std::fs::write(archive.join("README.txt"), "not a capture").expect("readme");
    let out = dir.join("out");
    let o = sqos(&[
        "export",
        &archive.to_string_lossy(),
        "--what",
        "flows",
        "--format",
        "parquet",
        "--partition-by",
        "date,node",
        "--quiet",
        "-o",
        &out.to_string_lossy(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut found: Vec<String> = Vec::new();
    let mut stack = vec![out.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                found.push(p.strip_prefix(&out).expect("below").display().to_string());
            }
        }
    }
    found.sort();
    // The captures' first frames: the synthetic captures start on 2024-06-03 (UTC).
    let first = |cap: &str| {
        let d = sqos(&[
            "export",
            &crate::support::repo()
                .join("captures")
                .join(cap)
                .to_string_lossy(),
            "--what",
            "messages",
            "--format",
            "parquet",
            "-o",
            &dir.join("one.parquet").to_string_lossy(),
        ]);
        assert_eq!(d.status.code(), Some(0));
        let b = &read_parquet(&dir.join("one.parquet"))[0];
        let us = b
            .column_by_name("capture_start")
            .expect("start")
            .as_primitive::<TimestampMicrosecondType>()
            .value(0);
        sqos::export::utc_date(sqos::capture::Timestamp(us * 1000))
    };
    let want = vec![
        format!(
            "date={}/node=HV01/HV01_policy-change.pcap.gz.parquet",
            first("policy-change.pcap.gz")
        ),
        format!(
            "date={}/node=HV01/HV01_steady.pcap.gz.parquet",
            first("steady.pcap.gz")
        ),
        format!(
            "date={}/node=HV02/HV02_noisy-neighbour.pcapng.gz.parquet",
            first("noisy-neighbour.pcapng.gz")
        ),
    ];
    assert_eq!(found, want);
    let b = &read_parquet(&out.join(&want[2]))[0];
    assert_eq!(
        b.column_by_name("capture_file")
            .expect("file")
            .as_string::<i32>()
            .value(0),
        "HV02/noisy-neighbour.pcapng.gz"
    );
    assert_eq!(
        b.column_by_name("capture_host")
            .expect("host")
            .as_string::<i32>()
            .value(0),
        "HV02"
    );
    // The rows are those of the capture exported alone.
    let alone = dir.join("alone.parquet");
    export(
        &crate::support::repo().join("captures/noisy-neighbour.pcapng.gz"),
        "flows",
        "parquet",
        &alone,
    );
    let a = &read_parquet(&alone)[0];
    assert_eq!(a.num_rows(), b.num_rows());
    let n = a.num_columns() - 3;
    for c in 0..n {
        for i in 0..a.num_rows() {
            assert_eq!(cell(a.column(c).as_ref(), i), cell(b.column(c).as_ref(), i));
        }
    }
    // Without --format parquet a directory is refused.
    let o = sqos(&[
        "export",
        &archive.to_string_lossy(),
        "--what",
        "flows",
        "-o",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--format parquet"));
    let _ = std::fs::remove_dir_all(&dir);
}
