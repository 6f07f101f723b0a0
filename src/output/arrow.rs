//! Arrow record batches of an export table: the columns of `columns.rs` with their types, filled
//! from the same flat rows the CSV writer reads, plus the capture columns. Parquet files and the
//! Python package's tables are both built from these batches.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, ListBuilder, StringBuilder,
    TimestampMicrosecondBuilder, UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};
use serde_json::{Map, Value};

use crate::capture::Timestamp;

use super::columns::{Column, Kind, CAPTURE_COLUMNS};

/// Rows per record batch: small enough to bound memory, large enough for vectorised readers.
pub const BATCH_ROWS: usize = 8192;

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// A row's value does not fit its column's type: a defect of the column table.
    #[error("column {column}: {value} is not a {kind:?} value")]
    Type {
        column: &'static str,
        value: String,
        kind: Kind,
    },
    #[error("arrow: {0}")]
    Arrow(#[from] ArrowError),
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The capture a table's rows come from: its name, the host it was captured on, its first frame.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureLabel {
    pub file: String,
    pub host: Option<String>,
    pub start: Option<Timestamp>,
}

const UTC: &str = "UTC";

/// The Arrow type of a column kind.
pub fn data_type(kind: Kind) -> DataType {
    match kind {
        Kind::Int => DataType::Int64,
        Kind::UInt => DataType::UInt64,
        Kind::U32 => DataType::UInt32,
        Kind::Float => DataType::Float64,
        Kind::Bool => DataType::Boolean,
        Kind::Text | Kind::Guid => DataType::Utf8,
        Kind::Time => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
        Kind::TextList => DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
    }
}

/// The schema of a table: its columns, then the capture columns. Every column is nullable (a
/// value the JSON row leaves out is null, an empty cell in CSV).
pub fn schema(columns: &[Column]) -> SchemaRef {
    let fields: Vec<Field> = columns
        .iter()
        .chain(CAPTURE_COLUMNS)
        .map(|c| Field::new(c.name, data_type(c.kind), true))
        .collect();
    Arc::new(Schema::new(fields))
}

/// Microseconds since the epoch, from the JSON row's epoch seconds (a double carries
/// microseconds exactly for any date this century).
fn micros(secs: f64) -> i64 {
    (secs * 1e6).round() as i64
}

enum Builder {
    Int(Int64Builder),
    UInt(UInt64Builder),
    U32(UInt32Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
    Text(StringBuilder),
    Time(TimestampMicrosecondBuilder),
    List(ListBuilder<StringBuilder>),
}

impl Builder {
    fn new(kind: Kind) -> Self {
        match kind {
            Kind::Int => Builder::Int(Int64Builder::new()),
            Kind::UInt => Builder::UInt(UInt64Builder::new()),
            Kind::U32 => Builder::U32(UInt32Builder::new()),
            Kind::Float => Builder::Float(Float64Builder::new()),
            Kind::Bool => Builder::Bool(BooleanBuilder::new()),
            Kind::Text | Kind::Guid => Builder::Text(StringBuilder::new()),
            Kind::Time => Builder::Time(TimestampMicrosecondBuilder::new().with_timezone(UTC)),
            Kind::TextList => Builder::List(ListBuilder::new(StringBuilder::new())),
        }
    }

    /// Appends one value; `None` and JSON null append a null.
    fn append(&mut self, col: &Column, v: Option<&Value>) -> Result<(), TableError> {
        let v = v.filter(|v| !v.is_null());
        let bad = || TableError::Type {
            column: col.name,
            value: v.map_or_else(String::new, Value::to_string),
            kind: col.kind,
        };
        match self {
            Builder::Int(b) => b.append_option(v.map(|v| v.as_i64().ok_or_else(bad)).transpose()?),
            Builder::UInt(b) => b.append_option(v.map(|v| v.as_u64().ok_or_else(bad)).transpose()?),
            Builder::U32(b) => b.append_option(
                v.map(|v| {
                    v.as_u64()
                        .and_then(|x| u32::try_from(x).ok())
                        .ok_or_else(bad)
                })
                .transpose()?,
            ),
            Builder::Float(b) => {
                b.append_option(v.map(|v| v.as_f64().ok_or_else(bad)).transpose()?)
            }
            Builder::Bool(b) => {
                b.append_option(v.map(|v| v.as_bool().ok_or_else(bad)).transpose()?)
            }
            Builder::Text(b) => b.append_option(v.map(|v| v.as_str().ok_or_else(bad)).transpose()?),
            Builder::Time(b) => b.append_option(
                v.map(|v| v.as_f64().map(micros).ok_or_else(bad))
                    .transpose()?,
            ),
            Builder::List(b) => match v {
                None => b.append_null(),
                Some(Value::Array(items)) => {
                    for item in items {
                        b.values().append_option(item.as_str());
                    }
                    b.append(true);
                }
                Some(_) => return Err(bad()),
            },
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Int(b) => Arc::new(b.finish()),
            Builder::UInt(b) => Arc::new(b.finish()),
            Builder::U32(b) => Arc::new(b.finish()),
            Builder::Float(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Time(b) => Arc::new(b.finish()),
            Builder::List(b) => Arc::new(b.finish()),
        }
    }
}

/// Builds record batches of one table from flat rows.
pub struct BatchBuilder {
    columns: &'static [Column],
    schema: SchemaRef,
    builders: Vec<Builder>,
    label: CaptureLabel,
    rows: usize,
}

impl BatchBuilder {
    pub fn new(columns: &'static [Column], label: CaptureLabel) -> Self {
        BatchBuilder {
            columns,
            schema: schema(columns),
            builders: columns
                .iter()
                .chain(CAPTURE_COLUMNS)
                .map(|c| Builder::new(c.kind))
                .collect(),
            label,
            rows: 0,
        }
    }

    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The capture's first frame, once it is read (rows before it carry a null start).
    pub fn set_start(&mut self, ts: Timestamp) {
        self.label.start = Some(ts);
    }

    pub fn label(&self) -> &CaptureLabel {
        &self.label
    }

    /// Rows appended since the last `finish`.
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Appends one row. On a type error the row may be partly appended: the batch is unusable
    /// (the error is a defect of the column table, which the tests check on every capture).
    pub fn push(&mut self, row: &Map<String, Value>) -> Result<(), TableError> {
        let n = self.columns.len();
        for (c, b) in self.columns.iter().zip(&mut self.builders) {
            b.append(c, row.get(c.name))?;
        }
        let capture = [
            Some(Value::String(self.label.file.clone())),
            self.label.host.clone().map(Value::String),
            self.label.start.map(|t| Value::from(t.as_secs_f64())),
        ];
        for ((c, b), v) in CAPTURE_COLUMNS
            .iter()
            .zip(&mut self.builders[n..])
            .zip(&capture)
        {
            b.append(c, v.as_ref())?;
        }
        self.rows += 1;
        Ok(())
    }

    /// The rows so far as one batch; the builder starts empty again.
    pub fn finish(&mut self) -> Result<RecordBatch, TableError> {
        let arrays: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        self.rows = 0;
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), arrays)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::columns::FINDING_COLUMNS;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampMicrosecondType};
    use serde_json::json;

    #[test]
    fn rows_become_typed_columns() {
        let label = CaptureLabel {
            file: "a.pcap".into(),
            host: Some("HV01".into()),
            start: Some(Timestamp::from_secs_nanos(1_700_000_000, 123_456_000)),
        };
        let mut b = BatchBuilder::new(FINDING_COLUMNS, label);
        let row =
            json!({"scope": "flow", "code": "flow.x", "frame": 7, "time": 1_700_000_001.000_002});
        b.push(row.as_object().expect("object")).expect("push");
        b.push(&Map::new()).expect("empty row");
        let batch = b.finish().expect("batch");
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.num_columns(), FINDING_COLUMNS.len() + 3);
        let frame = batch.column_by_name("frame").expect("frame");
        assert_eq!(frame.as_primitive::<Int64Type>().value(0), 7);
        assert!(frame.is_null(1));
        let time = batch.column_by_name("time").expect("time");
        assert_eq!(
            time.as_primitive::<TimestampMicrosecondType>().value(0),
            1_700_000_001_000_002
        );
        let start = batch.column_by_name("capture_start").expect("start");
        assert_eq!(
            start.as_primitive::<TimestampMicrosecondType>().value(1),
            1_700_000_000_123_456
        );
        assert_eq!(
            batch
                .column_by_name("capture_host")
                .expect("host")
                .as_string::<i32>()
                .value(0),
            "HV01"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_an_error() {
        let mut b = BatchBuilder::new(FINDING_COLUMNS, CaptureLabel::default());
        let row = json!({"frame": "seven"});
        let e = b.push(row.as_object().expect("object")).expect_err("type");
        assert!(e.to_string().contains("column frame"), "{e}");
    }
}
