//! The export tables' columns, stated once with their types: CSV writes their names, Arrow and
//! Parquet their types, and every writer takes the values from the same flat rows (the JSON
//! objects the JSONL exports write, flattened), so all formats carry the same data.

use serde_json::{json, Map, Value};

use crate::analysis::{FlowFinding, FlowState};
use crate::pipeline::SqosRecord;
use crate::sqos::layout::{self, request, response, FieldDef};
use crate::sqos::Finding;

use super::flows::{finding_json, flow_object, Timeline, TIMELINE_KEYS};
use super::json::{RecordFlat, OPTION_NAMES, STATUS_NAME};
use super::time::iso_utc;
use Kind::*;

/// What a column holds. Integers keep their width and sign so u64 values stay exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A count or frame number (never near 2^63): Arrow Int64.
    Int,
    /// A 64-bit unsigned protocol field or counter: Arrow UInt64 (exact to 2^64 - 1).
    UInt,
    /// A 32- or 16-bit unsigned protocol field: Arrow UInt32.
    U32,
    Float,
    Bool,
    Text,
    /// A GUID in its 36-character text form (as the JSON and CSV exports write it).
    Guid,
    /// Epoch seconds in the JSON row; a UTC timestamp in microseconds in Arrow and Parquet.
    Time,
    /// A list of strings (CSV joins them with `|`).
    TextList,
}

impl Kind {
    /// The pandas dtype of a CSV column of this kind (nullable integer and boolean types, so
    /// empty cells are `<NA>`; times are the CSV's epoch seconds).
    pub fn pandas_dtype(self) -> &'static str {
        match self {
            Int => "Int64",
            UInt => "UInt64",
            U32 => "UInt32",
            Float | Time => "float64",
            Bool => "boolean",
            Text | Guid | TextList => "string",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub kind: Kind,
}

const fn col(name: &'static str, kind: Kind) -> Column {
    Column { name, kind }
}

/// Column names, in order.
pub fn names(columns: &[Column]) -> impl Iterator<Item = &'static str> + '_ {
    columns.iter().map(|c| c.name)
}

/// The columns of a message before its SQOS fields: the frame, the SMB2 exchange, the buffer.
const MESSAGE_HEAD: [Column; 20] = [
    col("frame", Int),
    col("time", Time),
    col("datetime", Text),
    col("src", Text),
    col("dst", Text),
    col("direction", Text),
    col("msg_id", UInt),
    col("session_id", UInt),
    col("tree_id", U32),
    col("async_id", UInt),
    col("file_id", Guid),
    col("file_name", Text),
    col("nt_status", U32),
    col("interim", Bool),
    col("request_frame", Int),
    col("response_frame", Int),
    col("response_time", Float),
    col("max_output_response", U32),
    col("buffer_length", Int),
    col("buffer_truncated", Bool),
];

/// The column after the SQOS fields: the message's finding codes.
const MESSAGE_TAIL: Column = col("findings", TextList);

/// The column kind of a layout field.
const fn sqos_kind(k: layout::Kind) -> Kind {
    match k {
        layout::Kind::U64 => UInt,
        layout::Kind::U16
        | layout::Kind::U32
        | layout::Kind::Version
        | layout::Kind::Options
        | layout::Kind::Status => U32,
        layout::Kind::Guid => Guid,
        layout::Kind::Utf16 => Text,
    }
}

const fn same_key(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Writes `c` at `at` when `out` has room; the next position either way (so one walk both
/// counts and fills).
const fn put(out: &mut [Column], at: usize, c: Column) -> usize {
    if at < out.len() {
        out[at] = c;
    }
    at + 1
}

/// A layout field's column at `at`, then the name column of its value (the keys
/// `fields_json` writes beside Options and Status).
const fn put_field(out: &mut [Column], at: usize, f: &FieldDef) -> usize {
    let at = put(out, at, col(f.key, sqos_kind(f.kind)));
    match f.kind {
        layout::Kind::Options => put(out, at, col(OPTION_NAMES, TextList)),
        layout::Kind::Status => put(out, at, col(STATUS_NAME, Text)),
        _ => at,
    }
}

/// The SQOS fields of a message as columns, from the layout table: the request's fields (each
/// name where its offset field sits; its offset and length are no columns), then the response's
/// fields the request does not have; reserved fields left out. Returns the end position.
const fn put_sqos(out: &mut [Column], mut at: usize) -> usize {
    let mut i = 0;
    'request: while i < request::FIELDS.len() {
        let f = &request::FIELDS[i];
        i += 1;
        if f.reserved {
            continue;
        }
        let mut j = 0;
        while j < request::NAMES.len() {
            let n = &request::NAMES[j];
            j += 1;
            if n.offset.def.offset == f.offset {
                at = put(out, at, col(n.key, Text));
                continue 'request;
            }
            if n.length.def.offset == f.offset {
                continue 'request;
            }
        }
        at = put_field(out, at, f);
    }
    let mut i = 0;
    'response: while i < response::FIELDS.len() {
        let f = &response::FIELDS[i];
        i += 1;
        if f.reserved {
            continue;
        }
        let mut j = 0;
        while j < request::FIELDS.len() {
            if same_key(request::FIELDS[j].key, f.key) {
                continue 'response;
            }
            j += 1;
        }
        at = put_field(out, at, f);
    }
    at
}

const MESSAGE_LEN: usize = MESSAGE_HEAD.len() + put_sqos(&mut [], 0) + 1;

const fn message_columns() -> [Column; MESSAGE_LEN] {
    let mut out = [MESSAGE_TAIL; MESSAGE_LEN];
    let mut i = 0;
    while i < MESSAGE_HEAD.len() {
        out[i] = MESSAGE_HEAD[i];
        i += 1;
    }
    put_sqos(&mut out, MESSAGE_HEAD.len());
    out
}

/// Columns of `sqos export --what messages --format csv` (the keys of `sqos dissect --format
/// jsonl`, with the `sqos` object flattened and the findings as their codes). The SQOS fields
/// come from the layout table ([`crate::sqos::layout`]).
pub const MESSAGE_COLUMNS: &[Column] = &message_columns();

/// Columns of `sqos flows --format csv` and `sqos export --what flows --format csv`.
pub const FLOW_COLUMNS: &[Column] = &[
    col("logical_flow_id", Guid),
    col("initiator_id", Guid),
    col("initiator_name", Text),
    col("initiator_node_name", Text),
    col("policy_id", Guid),
    col("protocol_version", U32),
    col("opens_total", Int),
    col("file_names", TextList),
    col("channels_total", Int),
    col("channels", TextList),
    col("limit", UInt),
    col("reservation", UInt),
    col("bandwidth_limit", UInt),
    col("maximum_io_rate", UInt),
    col("minimum_io_rate", UInt),
    col("maximum_bandwidth", UInt),
    col("base_io_size", U32),
    col("time_to_live", U32),
    col("last_status", U32),
    col("last_status_name", Text),
    col("updates_sent", Int),
    col("updates_applied", Int),
    col("intervals", Int),
    col("iops", Float),
    col("normalized_iops", Float),
    col("avg_latency_ms", Float),
    col("avg_lower_latency_ms", Float),
    col("kilobytes_per_second", Float),
    col("observed_io_count", UInt),
    col("observed_bytes", UInt),
    col("observed_iops", Float),
    col("observed_normalized_iops", Float),
    col("observed_kilobytes_per_second", Float),
    col("observed_avg_response_ms", Float),
    col("findings_total", Int),
    col("finding_codes", TextList),
];

/// Columns of `sqos export --what series --format csv` (keys of `series_row_json`).
pub const SERIES_COLUMNS: &[Column] = &[
    col("logical_flow_id", Guid),
    col("initiator_name", Text),
    col("index", Int),
    col("intervals", Int),
    col("start", Time),
    col("end", Time),
    col("start_datetime", Text),
    col("end_datetime", Text),
    col("seconds", Float),
    col("start_frame", Int),
    col("end_frame", Int),
    col("updates_applied", Int),
    col("io_count_increment", UInt),
    col("normalized_io_count_increment", UInt),
    col("latency_increment", UInt),
    col("lower_latency_increment", UInt),
    col("kilobyte_count_increment", UInt),
    col("iops", Float),
    col("normalized_iops", Float),
    col("avg_latency_ms", Float),
    col("avg_lower_latency_ms", Float),
    col("kilobytes_per_second", Float),
    col("observed_io_count", UInt),
    col("observed_normalized_io_count", UInt),
    col("observed_bytes", UInt),
    col("observed_iops", Float),
    col("observed_normalized_iops", Float),
    col("observed_kilobytes_per_second", Float),
    col("observed_avg_response_ms", Float),
    col("observed_complete", Bool),
    col("maximum_io_rate", UInt),
    col("minimum_io_rate", UInt),
    col("maximum_bandwidth", UInt),
    col("status_ok", Bool),
];

/// Columns of `sqos export --what findings`: the message findings (`sqos.*`, one per finding
/// of a decoded message) in frame order, then the flow findings (`flow.*`) in frame order.
pub const FINDING_COLUMNS: &[Column] = &[
    col("scope", Text),
    col("code", Text),
    col("severity", Text),
    col("message", Text),
    col("frame", Int),
    col("time", Time),
    col("datetime", Text),
    col("logical_flow_id", Guid),
    col("initiator_name", Text),
    col("occurrences", Int),
    col("last_frame", Int),
];

/// Columns Arrow and Parquet tables add to every table, so tables of many captures can be
/// unioned: the file, the host it was captured on (if known) and the time of its first frame.
pub const CAPTURE_COLUMNS: &[Column] = &[
    col("capture_file", Text),
    col("capture_host", Text),
    col("capture_start", Time),
];

/// One SQOS message as a flat object: `record_json`'s keys with its `sqos` object merged in and
/// the findings reduced to their codes ([`RecordFlat`], made in one pass: no nested objects
/// built and taken apart).
pub fn message_flat(rec: &SqosRecord) -> Map<String, Value> {
    match serde_json::to_value(RecordFlat(rec)) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
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

/// A flow as a flat object for `FLOW_COLUMNS` (a table's row, a filter's flow fields): its
/// object made without the timeline, which no column holds, and flattened.
pub fn flow_row(f: &FlowState) -> Map<String, Value> {
    flatten_flow(flow_object(f, Timeline::Without))
}

/// A flow object of `flow_json` (a saved flow table's) as a flat object for `FLOW_COLUMNS`:
/// [`flow_row`]'s keys, its timeline not copied.
pub fn flow_flat(flow: &Value) -> Map<String, Value> {
    match flow {
        Value::Object(m) => flatten_flow(
            m.iter()
                .filter(|(k, _)| !TIMELINE_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        _ => Map::new(),
    }
}

fn flatten_flow(mut m: Map<String, Value>) -> Map<String, Value> {
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

/// A message's finding as a `FINDING_COLUMNS` row.
pub fn message_finding_flat(rec: &SqosRecord, f: &Finding) -> Map<String, Value> {
    let (flow, name) = rec.named_flow();
    let mut m = Map::new();
    m.insert("scope".into(), "message".into());
    m.insert("code".into(), f.code.as_str().into());
    m.insert("severity".into(), f.severity.as_str().into());
    m.insert("message".into(), f.message.clone().into());
    m.insert("frame".into(), rec.frame.into());
    m.insert("time".into(), rec.ts.as_secs_f64().into());
    m.insert("datetime".into(), iso_utc(rec.ts).into());
    m.insert("logical_flow_id".into(), flow.map(|u| u.to_string()).into());
    m.insert("initiator_name".into(), name.into());
    m.insert("occurrences".into(), 1.into());
    m.insert("last_frame".into(), rec.frame.into());
    m
}

/// A flow's finding as a `FINDING_COLUMNS` row.
pub fn flow_finding_flat(flow: &FlowState, f: &FlowFinding) -> Map<String, Value> {
    let mut m = match finding_json(f) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    m.insert("scope".into(), "flow".into());
    m.insert("logical_flow_id".into(), flow.id.to_string().into());
    m.insert("initiator_name".into(), flow.initiator_name.clone().into());
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::csv::cell;
    use serde_json::json;

    /// The message columns derived from the layout table are the list the CSV export had when
    /// it was written out by hand.
    #[test]
    fn message_columns_from_the_layout() {
        let sqos: Vec<(&str, Kind)> = MESSAGE_COLUMNS[MESSAGE_HEAD.len()..]
            .iter()
            .map(|c| (c.name, c.kind))
            .collect();
        assert_eq!(
            sqos,
            [
                ("protocol_version", U32),
                ("options", U32),
                ("option_names", TextList),
                ("logical_flow_id", Guid),
                ("policy_id", Guid),
                ("initiator_id", Guid),
                ("limit", UInt),
                ("reservation", UInt),
                ("initiator_name", Text),
                ("initiator_node_name", Text),
                ("io_count_increment", UInt),
                ("normalized_io_count_increment", UInt),
                ("latency_increment", UInt),
                ("lower_latency_increment", UInt),
                ("bandwidth_limit", UInt),
                ("kilobyte_count_increment", UInt),
                ("time_to_live", U32),
                ("status", U32),
                ("status_name", Text),
                ("maximum_io_rate", UInt),
                ("minimum_io_rate", UInt),
                ("base_io_size", U32),
                ("maximum_bandwidth", UInt),
                ("findings", TextList),
            ]
        );
        assert_eq!(MESSAGE_COLUMNS.len(), 44);
        assert_eq!(MESSAGE_COLUMNS[19].name, "buffer_truncated");
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
