//! CSV for spreadsheets, pandas and DuckDB: fixed columns per table, taken from the same flat
//! JSON objects the JSONL exports write (so both formats always carry the same data).

use std::io::Write;

use serde_json::{json, Map, Value};

use crate::pipeline::SqosRecord;

use super::json::record_json;

/// Columns of `sqos export --what messages --format csv` (the keys of `sqos dissect --format
/// jsonl`, with the `sqos` object flattened and the findings as their codes).
pub const MESSAGE_COLUMNS: &[&str] = &[
    "frame",
    "time",
    "datetime",
    "src",
    "dst",
    "direction",
    "msg_id",
    "session_id",
    "tree_id",
    "async_id",
    "file_id",
    "file_name",
    "nt_status",
    "interim",
    "request_frame",
    "response_frame",
    "response_time",
    "max_output_response",
    "buffer_length",
    "buffer_truncated",
    "protocol_version",
    "options",
    "option_names",
    "logical_flow_id",
    "policy_id",
    "initiator_id",
    "limit",
    "reservation",
    "initiator_name",
    "initiator_node_name",
    "io_count_increment",
    "normalized_io_count_increment",
    "latency_increment",
    "lower_latency_increment",
    "bandwidth_limit",
    "kilobyte_count_increment",
    "time_to_live",
    "status",
    "status_name",
    "maximum_io_rate",
    "minimum_io_rate",
    "base_io_size",
    "maximum_bandwidth",
    "findings",
];

/// Columns of `sqos flows --format csv` and `sqos export --what flows --format csv`.
pub const FLOW_COLUMNS: &[&str] = &[
    "logical_flow_id",
    "initiator_id",
    "initiator_name",
    "initiator_node_name",
    "policy_id",
    "protocol_version",
    "opens_total",
    "file_names",
    "channels_total",
    "channels",
    "limit",
    "reservation",
    "bandwidth_limit",
    "maximum_io_rate",
    "minimum_io_rate",
    "maximum_bandwidth",
    "base_io_size",
    "time_to_live",
    "last_status",
    "last_status_name",
    "updates_sent",
    "updates_applied",
    "intervals",
    "iops",
    "normalized_iops",
    "avg_latency_ms",
    "avg_lower_latency_ms",
    "kilobytes_per_second",
    "observed_io_count",
    "observed_bytes",
    "observed_iops",
    "observed_normalized_iops",
    "observed_kilobytes_per_second",
    "observed_avg_response_ms",
    "findings_total",
    "finding_codes",
];

/// Columns of `sqos export --what series --format csv` (keys of `series_row_json`).
pub const SERIES_COLUMNS: &[&str] = &[
    "logical_flow_id",
    "initiator_name",
    "index",
    "intervals",
    "start",
    "end",
    "start_datetime",
    "end_datetime",
    "seconds",
    "start_frame",
    "end_frame",
    "updates_applied",
    "io_count_increment",
    "normalized_io_count_increment",
    "latency_increment",
    "lower_latency_increment",
    "kilobyte_count_increment",
    "iops",
    "normalized_iops",
    "avg_latency_ms",
    "avg_lower_latency_ms",
    "kilobytes_per_second",
    "observed_io_count",
    "observed_normalized_io_count",
    "observed_bytes",
    "observed_iops",
    "observed_normalized_iops",
    "observed_kilobytes_per_second",
    "observed_avg_response_ms",
    "observed_complete",
    "maximum_io_rate",
    "minimum_io_rate",
    "maximum_bandwidth",
    "status_ok",
];

/// One SQOS message as a flat object: `record_json` with its `sqos` object merged in and the
/// findings reduced to their codes.
pub fn message_flat(rec: &SqosRecord) -> Map<String, Value> {
    let mut m = match record_json(rec) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if let Some(Value::Object(sqos)) = m.remove("sqos") {
        for (k, v) in sqos {
            m.entry(k).or_insert(v);
        }
    }
    if let Some(Value::Array(chans)) = m.remove("channels") {
        m.insert("channels".into(), channel_ends(&chans));
    }
    if let Some(Value::Array(f)) = m.remove("findings") {
        let codes: Vec<Value> = f.iter().filter_map(|x| x.get("code").cloned()).collect();
        m.insert("findings".into(), Value::Array(codes));
    }
    m
}

/// client>server of each channel of a `channels` list (the connection number when the
/// addresses are unknown).
fn channel_ends(chans: &[Value]) -> Value {
    chans
        .iter()
        .map(|c| match (c.get("client"), c.get("server")) {
            (Some(Value::String(a)), Some(Value::String(b))) => json!(format!("{a}>{b}")),
            _ => json!(format!(
                "connection {}",
                c.get("connection").and_then(Value::as_u64).unwrap_or(0)
            )),
        })
        .collect()
}

/// A flow object of `flow_json` as a flat object for `FLOW_COLUMNS`.
pub fn flow_flat(flow: &Value) -> Map<String, Value> {
    let mut m = match flow {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    if let Some(Value::Object(obs)) = m.remove("observed") {
        for (k, v) in obs {
            m.insert(format!("observed_{k}"), v);
        }
    }
    if let Some(Value::Array(opens)) = m.remove("opens") {
        let names: Vec<Value> = opens
            .iter()
            .filter_map(|o| o.get("file_name").cloned())
            .filter(|v| !v.is_null())
            .collect();
        m.insert("file_names".into(), Value::Array(names));
    }
    if let Some(Value::Array(chans)) = m.remove("channels") {
        m.insert("channels".into(), channel_ends(&chans));
    }
    if let Some(Value::Array(f)) = m.remove("findings") {
        let codes: Vec<Value> = f.iter().filter_map(|x| x.get("code").cloned()).collect();
        m.insert("finding_codes".into(), Value::Array(codes));
    }
    m
}

/// A JSON value as one CSV cell: null is empty, arrays are joined with `|`.
pub fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        // Text from the wire may start like a spreadsheet formula (docs/robustness.md).
        Some(Value::String(s)) => super::escape::csv_cell(s).into_owned(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| cell(Some(x)))
            .collect::<Vec<_>>()
            .join("|"),
        Some(other) => other.to_string(),
    }
}

/// What a column held over the rows written, for its pandas dtype: the cells a request row
/// leaves empty in response columns (and the reverse) make pandas read integers as float64
/// unless told the column is a nullable integer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Kind {
    #[default]
    Empty,
    Bool,
    /// Integers that fit i64.
    Int,
    /// Integers, some only in u64.
    UInt,
    Float,
    Text,
}

impl Kind {
    fn of(v: &Value) -> Kind {
        match v {
            Value::Null => Kind::Empty,
            Value::Bool(_) => Kind::Bool,
            Value::Number(n) if n.is_i64() => Kind::Int,
            Value::Number(n) if n.is_u64() => Kind::UInt,
            Value::Number(_) => Kind::Float,
            Value::String(_) | Value::Array(_) | Value::Object(_) => Kind::Text,
        }
    }

    fn join(self, other: Kind) -> Kind {
        use Kind::*;
        match (self, other) {
            (a, b) if a == b => a,
            (Empty, k) | (k, Empty) => k,
            (Int, UInt) | (UInt, Int) => UInt,
            (Int | UInt | Float, Int | UInt | Float) => Float,
            _ => Text,
        }
    }

    /// The pandas dtype (nullable integer and boolean types: empty cells are `<NA>`).
    fn pandas(self) -> &'static str {
        match self {
            Kind::Bool => "boolean",
            Kind::Int => "Int64",
            Kind::UInt => "UInt64",
            Kind::Float => "float64",
            Kind::Empty | Kind::Text => "string",
        }
    }
}

/// A CSV table with fixed columns.
pub struct CsvTable<W: Write> {
    w: ::csv::Writer<W>,
    columns: &'static [&'static str],
    kinds: Vec<Kind>,
}

impl<W: Write> CsvTable<W> {
    /// Starts the table with its header row.
    pub fn new(out: W, columns: &'static [&'static str]) -> std::io::Result<Self> {
        let mut w = ::csv::Writer::from_writer(out);
        w.write_record(columns).map_err(std::io::Error::other)?;
        Ok(CsvTable {
            w,
            columns,
            kinds: vec![Kind::Empty; columns.len()],
        })
    }

    pub fn row(&mut self, m: &Map<String, Value>) -> std::io::Result<()> {
        for (k, c) in self.kinds.iter_mut().zip(self.columns) {
            if let Some(v) = m.get(*c) {
                *k = k.join(Kind::of(v));
            }
        }
        let cells = self.columns.iter().map(|c| cell(m.get(*c)));
        self.w.write_record(cells).map_err(std::io::Error::other)
    }

    /// `{column: pandas dtype}` for the rows written so far (`pd.read_csv(f, dtype=…)`):
    /// integers as `Int64`, flags as `boolean`, text and lists (`a|b`) as `string`.
    pub fn dtypes(&self) -> Map<String, Value> {
        self.columns
            .iter()
            .zip(&self.kinds)
            .map(|(c, k)| (c.to_string(), Value::from(k.pandas())))
            .collect()
    }

    /// Writes out the rows so far and flushes the writer (live output).
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }

    pub fn writer(&self) -> &W {
        self.w.get_ref()
    }

    pub fn finish(mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dtypes_follow_what_the_columns_held() {
        static COLS: &[&str] = &["id", "big", "rate", "ok", "name", "never"];
        let mut t = CsvTable::new(Vec::new(), COLS).expect("header");
        for row in [
            json!({"id": 1, "big": 2, "rate": 1, "ok": true, "name": "a"}),
            json!({"id": null, "big": u64::MAX, "rate": 0.5, "ok": null, "name": ["x", "y"]}),
        ] {
            if let Value::Object(m) = row {
                t.row(&m).expect("row");
            }
        }
        assert_eq!(
            Value::Object(t.dtypes()),
            json!({"id": "Int64", "big": "UInt64", "rate": "float64", "ok": "boolean",
                   "name": "string", "never": "string"})
        );
    }

    #[test]
    fn cells_and_quoting() {
        assert_eq!(cell(None), "");
        assert_eq!(cell(Some(&json!(null))), "");
        assert_eq!(cell(Some(&json!(12))), "12");
        assert_eq!(cell(Some(&json!(["a", "b"]))), "a|b");
        let mut buf = Vec::new();
        {
            static COLS: &[&str] = &["a", "b"];
            let mut t = CsvTable::new(&mut buf, COLS).expect("header");
            let m = json!({"a": "x,y", "b": "say \"hi\""});
            if let Value::Object(m) = m {
                t.row(&m).expect("row");
            }
            t.finish().expect("flush");
        }
        assert_eq!(
            String::from_utf8_lossy(&buf),
            "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n"
        );
    }

    #[test]
    fn flow_flattening() {
        let v = json!({
            "logical_flow_id": "f",
            "observed": {"iops": 1.5},
            "opens": [{"file_name": "a.vhdx"}, {"file_name": null}],
            "findings": [{"code": "flow.x"}],
        });
        let m = flow_flat(&v);
        assert_eq!(m.get("observed_iops"), Some(&json!(1.5)));
        assert_eq!(cell(m.get("file_names")), "a.vhdx");
        assert_eq!(cell(m.get("finding_codes")), "flow.x");
    }
}
