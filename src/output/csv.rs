//! CSV for spreadsheets, pandas and DuckDB: the columns of `columns.rs`, taken from the same flat
//! JSON objects the JSONL exports write (so both formats always carry the same data).

use std::io::Write;

use serde_json::{Map, Value};

#[cfg(doc)]
use super::columns::Kind;
use super::columns::{names, Column};

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

/// A CSV table with fixed columns.
pub struct CsvTable<W: Write> {
    w: ::csv::Writer<W>,
    columns: &'static [Column],
}

impl<W: Write> CsvTable<W> {
    /// Starts the table with its header row.
    pub fn new(out: W, columns: &'static [Column]) -> std::io::Result<Self> {
        let mut w = ::csv::Writer::from_writer(out);
        w.write_record(names(columns))
            .map_err(std::io::Error::other)?;
        Ok(CsvTable { w, columns })
    }

    pub fn row(&mut self, m: &Map<String, Value>) -> std::io::Result<()> {
        let cells = self.columns.iter().map(|c| cell(m.get(c.name)));
        self.w.write_record(cells).map_err(std::io::Error::other)
    }

    /// `{column: pandas dtype}` (`pd.read_csv(f, dtype=…)`): the columns' declared types
    /// ([`Kind::pandas_dtype`]), the same whatever the rows held, so integer columns that
    /// request or response rows leave empty stay integers (`Int64`, `UInt64`: empty is `<NA>`).
    pub fn dtypes(&self) -> Map<String, Value> {
        self.columns
            .iter()
            .map(|c| (c.name.to_string(), Value::from(c.kind.pandas_dtype())))
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
    fn dtypes_are_the_declared_types_whatever_the_rows_held() {
        use super::super::columns::MESSAGE_COLUMNS;
        let t = CsvTable::new(Vec::new(), MESSAGE_COLUMNS).expect("header");
        let d = t.dtypes();
        assert_eq!(d.len(), MESSAGE_COLUMNS.len());
        for (col, dtype) in [
            ("frame", "Int64"),
            ("time", "float64"),
            ("datetime", "string"),
            ("interim", "boolean"),
            ("status", "UInt32"),
            ("maximum_io_rate", "UInt64"),
            ("logical_flow_id", "string"),
            ("findings", "string"),
        ] {
            assert_eq!(d[col], dtype, "{col}");
        }
    }

    #[test]
    fn cells_and_quoting() {
        assert_eq!(cell(None), "");
        assert_eq!(cell(Some(&json!(null))), "");
        assert_eq!(cell(Some(&json!(12))), "12");
        assert_eq!(cell(Some(&json!(["a", "b"]))), "a|b");
        let mut buf = Vec::new();
        {
            use super::super::columns::Kind;
            static COLS: &[Column] = &[
                Column {
                    name: "a",
                    kind: Kind::Text,
                },
                Column {
                    name: "b",
                    kind: Kind::Text,
                },
            ];
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
}
