//! The JSON / JSONL schema of `sqos dissect` (documented in README, "JSON schema").
//!
//! Keys are the snake_case of the spec's field names. A key is absent when the message does not
//! carry that field (e.g. `bandwidth_limit` in a dialect 1.0 request, `nt_status` in a request);
//! an error response has no `sqos` object.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;
use uuid::Uuid;

use super::time::iso_utc;
use crate::pipeline::{FileId, SqosBody, SqosRecord};
use crate::sqos::layout::{request, FieldDef};
use crate::sqos::{FieldValue, Finding};

/// FileId as tshark shows `smb2.fid`: its 16 bytes read as a little-endian GUID.
pub fn file_id_guid(id: FileId) -> Uuid {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.persistent.to_le_bytes());
    b[8..].copy_from_slice(&id.volatile.to_le_bytes());
    Uuid::from_bytes_le(b)
}

/// Findings as the JSON array of `{code, message, severity}` objects.
struct FindingsJson<'a>(&'a [Finding]);

impl Serialize for FindingsJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut seq = ser.serialize_seq(Some(self.0.len()))?;
        for f in self.0 {
            seq.serialize_element(&FindingJson(f))?;
        }
        seq.end()
    }
}

struct FindingJson<'a>(&'a Finding);

impl Serialize for FindingJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let mut m = ser.serialize_map(Some(3))?;
        m.serialize_entry("code", f.code.as_str())?;
        m.serialize_entry("message", &f.message)?;
        m.serialize_entry("severity", f.severity.as_str())?;
        m.end()
    }
}

/// The key of the Options flag names beside `options`.
pub const OPTION_NAMES: &str = "option_names";
/// The key of the Status's spec name beside `status`.
pub const STATUS_NAME: &str = "status_name";

/// A value of the `sqos` object.
enum SqosValue<'a> {
    Number(u64),
    Guid(Uuid),
    Text(&'a str),
    Names(Vec<&'static str>),
}

impl Serialize for SqosValue<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        match self {
            SqosValue::Number(x) => ser.serialize_u64(*x),
            SqosValue::Guid(g) => g.serialize(ser),
            SqosValue::Text(t) => ser.serialize_str(t),
            SqosValue::Names(n) => n.serialize(ser),
        }
    }
}

/// The `sqos` object: each field of the layout table under its key (reserved fields left out),
/// Options with its flag names and Status with its spec name beside them, and a request's
/// names; in the order of the keys, as every JSON object of the schema.
struct SqosJson<'a>(Vec<(&'static str, SqosValue<'a>)>);

impl<'a> SqosJson<'a> {
    fn of(
        fields: &'a [(FieldDef, FieldValue)],
        names: [(&'static str, Option<&'a str>); 2],
    ) -> Self {
        let mut m = Vec::with_capacity(fields.len() + 2);
        for (def, value) in fields.iter().filter(|(def, _)| !def.reserved) {
            let v = match value {
                FieldValue::U16(x) => SqosValue::Number(u64::from(*x)),
                FieldValue::U32(x) => SqosValue::Number(u64::from(*x)),
                FieldValue::U64(x) => SqosValue::Number(*x),
                FieldValue::Guid(g) => SqosValue::Guid(*g),
                FieldValue::Version(v) => SqosValue::Number(u64::from(v.0)),
                FieldValue::Options(o) => {
                    m.push((OPTION_NAMES, SqosValue::Names(o.names())));
                    SqosValue::Number(u64::from(o.bits()))
                }
                FieldValue::Status(s) => {
                    if let Some(name) = s.name() {
                        m.push((STATUS_NAME, SqosValue::Text(name)));
                    }
                    SqosValue::Number(u64::from(s.0))
                }
                FieldValue::Text(t) => SqosValue::Text(t),
                FieldValue::Bytes => continue,
            };
            m.push((def.key, v));
        }
        for (key, text) in names {
            if let Some(t) = text {
                m.push((key, SqosValue::Text(t)));
            }
        }
        m.sort_unstable_by_key(|(key, _)| *key);
        SqosJson(m)
    }
}

impl Serialize for SqosJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            m.serialize_entry(key, value)?;
        }
        m.end()
    }
}

/// `v` as JSON text (indented with `pretty`) appended to `out`. Through serde_json's writer,
/// not `Display`, whose formatter machinery per piece cost as much again.
pub fn push_json(out: &mut String, v: &impl Serialize, pretty: bool) {
    let mut bytes = std::mem::take(out).into_bytes();
    // Writing into a Vec fails only where a value cannot be written (a map with keys that are
    // not strings), which the schema's values never hold.
    let _ = if pretty {
        serde_json::to_writer_pretty(&mut bytes, v)
    } else {
        serde_json::to_writer(&mut bytes, v)
    };
    // serde_json writes UTF-8.
    *out = String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
}

/// `v` written to `w` as one line of JSON Lines, through serde_json's writer (see
/// [`push_json`]).
pub fn write_json_line(w: &mut impl std::io::Write, v: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *w, v)?;
    w.write_all(b"\n")
}

/// One SQOS message as a JSON object (one line of `--format jsonl`).
pub fn record_json(rec: &SqosRecord) -> Value {
    serde_json::to_value(RecordJson(rec)).unwrap_or(Value::Null)
}

/// One SQOS message as the schema's JSON object, for any serde serializer: written straight
/// to text by `dissect -T jsonl`, made a [`Value`] by [`record_json`] for the other faces. The
/// keys come in their order (as serde_json's map keeps them), so both give the same bytes
/// (a test holds them to it).
pub struct RecordJson<'a>(pub &'a SqosRecord);

impl Serialize for RecordJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        serialize_record(self.0, ser, Shape::Nested)
    }
}

/// One SQOS message as the flat object of the tables and filters: [`RecordJson`]'s keys with
/// the `sqos` object's merged in (the message's own key kept, should a name be both) and the
/// findings reduced to their codes. Only made a `Value` (`output::columns::message_flat`),
/// whose map orders the keys.
pub struct RecordFlat<'a>(pub &'a SqosRecord);

impl Serialize for RecordFlat<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        serialize_record(self.0, ser, Shape::Flat)
    }
}

/// The entries of [`RecordFlat`] whose keys are in `keys`, as values: what a filter or a
/// column list reads, without making the other ~45 (each a `String` key in a map).
pub fn record_flat_picked(rec: &SqosRecord, keys: &[&str]) -> serde_json::Map<String, Value> {
    let mut pick = Pick {
        keys,
        out: serde_json::Map::new(),
    };
    // Values are made with serde_json's own serializer, which fails only on a map with
    // non-string keys: the schema has none.
    let _ = record_entries(rec, &mut pick, Shape::Flat);
    pick.out
}

/// Where a record's entries go: one at a time, each under its key.
trait Entries {
    type Error;
    fn entry<V: Serialize + ?Sized>(&mut self, key: &'static str, v: &V)
        -> Result<(), Self::Error>;
}

/// The entries into a serde map (the JSON writers and [`record_json`]).
struct MapEntries<M>(M);

impl<M: SerializeMap> Entries for MapEntries<M> {
    type Error = M::Error;
    fn entry<V: Serialize + ?Sized>(&mut self, key: &'static str, v: &V) -> Result<(), M::Error> {
        self.0.serialize_entry(key, v)
    }
}

/// The entries whose keys are asked for, made values; a later entry of a key replaces an
/// earlier one, as in a value map.
struct Pick<'k> {
    keys: &'k [&'k str],
    out: serde_json::Map<String, Value>,
}

impl Entries for Pick<'_> {
    type Error = serde_json::Error;
    fn entry<V: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        v: &V,
    ) -> Result<(), serde_json::Error> {
        if self.keys.contains(&key) {
            self.out.insert(key.to_owned(), serde_json::to_value(v)?);
        }
        Ok(())
    }
}

/// The two shapes of a record's object.
#[derive(Clone, Copy)]
enum Shape {
    /// The schema's: `sqos` and `findings` objects nested, the keys in their order.
    Nested,
    /// [`RecordFlat`]'s.
    Flat,
}

/// The codes of findings, as a JSON array of strings.
struct FindingCodes<'a>(&'a [Finding]);

impl Serialize for FindingCodes<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_seq(self.0.iter().map(|f| f.code.as_str()))
    }
}

/// The record as a serde map of its entries in `shape`.
fn serialize_record<S: Serializer>(
    rec: &SqosRecord,
    ser: S,
    shape: Shape,
) -> Result<S::Ok, S::Error> {
    let mut m = MapEntries(ser.serialize_map(None)?);
    record_entries(rec, &mut m, shape)?;
    m.0.end()
}

/// The record's entries in `shape`: the one place its keys and values are stated.
fn record_entries<E: Entries>(rec: &SqosRecord, m: &mut E, shape: Shape) -> Result<(), E::Error> {
    // The message's fields, and the names a request carries beside them.
    let (fields, names, findings) = match &rec.body {
        SqosBody::Request(d) => (
            d.message.as_ref().map(|r| r.wire_fields()),
            d.message.as_ref().map_or([None, None], |r| {
                [
                    r.initiator_name.as_deref(),
                    r.initiator_node_name.as_deref(),
                ]
            }),
            &d.findings[..],
        ),
        SqosBody::Response(d) => (
            d.message.as_ref().map(|r| r.wire_fields()),
            [None, None],
            &d.findings[..],
        ),
        SqosBody::NoBuffer => (None, [None, None], &[][..]),
    };
    let sqos = fields.as_deref().map(|f| {
        SqosJson::of(
            f,
            [
                (request::INITIATOR_NAME.key, names[0]),
                (request::INITIATOR_NODE_NAME.key, names[1]),
            ],
        )
    });
    if let (Shape::Flat, Some(s)) = (shape, &sqos) {
        // First: a value map keeps the last of two entries of one name.
        for (key, value) in &s.0 {
            m.entry(key, value)?;
        }
    }
    if let Some(a) = rec.async_id {
        m.entry("async_id", &a)?;
    }
    m.entry("buffer_length", &rec.buffer.len())?;
    if rec.buffer_truncated {
        m.entry("buffer_truncated", &true)?;
    }
    m.entry("datetime", &Shown(&IsoUtc(rec.ts)))?;
    m.entry("direction", &rec.direction)?;
    m.entry("dst", &Shown(&rec.dst))?;
    if let Some(f) = rec.file_id {
        m.entry("file_id", &file_id_guid(f))?;
    }
    if let Some(n) = &rec.file_name {
        m.entry("file_name", n)?;
    }
    match shape {
        Shape::Nested => m.entry("findings", &FindingsJson(findings))?,
        Shape::Flat => m.entry("findings", &FindingCodes(findings))?,
    }
    m.entry("frame", &rec.frame)?;
    if rec.nt_status.is_some() {
        m.entry("interim", &rec.interim)?;
    }
    if let Some(x) = rec.max_output_response {
        m.entry("max_output_response", &x)?;
    }
    m.entry("msg_id", &rec.msg_id)?;
    if let Some(s) = rec.nt_status {
        m.entry("nt_status", &s)?;
    }
    if let Some(f) = rec.request_frame {
        m.entry("request_frame", &f)?;
    }
    if let Some(f) = rec.response_frame {
        m.entry("response_frame", &f)?;
    }
    if let Some(t) = rec.response_time {
        m.entry("response_time", &t)?;
    }
    m.entry("session_id", &rec.session_id)?;
    if let (Shape::Nested, Some(s)) = (shape, &sqos) {
        m.entry("sqos", s)?;
    }
    m.entry("src", &Shown(&rec.src))?;
    m.entry("time", &rec.ts.as_secs_f64())?;
    if let Some(t) = rec.tree_id {
        m.entry("tree_id", &t)?;
    }
    Ok(())
}

/// A value written as its `Display` text, a JSON string.
struct Shown<'a, T: std::fmt::Display>(&'a T);

impl<T: std::fmt::Display> Serialize for Shown<'_, T> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_str(self.0)
    }
}

/// A time as `datetime`'s text, made only when written (a picked record may not ask for it).
struct IsoUtc(crate::capture::Timestamp);

impl std::fmt::Display for IsoUtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&iso_utc(self.0))
    }
}
