//! CSV for spreadsheets, pandas and DuckDB: the columns of `columns.rs`, taken from the same flat
//! JSON objects the JSONL exports write (so both formats always carry the same data).

use std::io::Write;

use serde_json::{Map, Value};

use super::columns::{names, Column};

/// A JSON value as one CSV cell: null is empty, arrays are joined with `|`.
pub fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
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
