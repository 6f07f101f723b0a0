//! Parquet files of an export table (`sqos export --format parquet`): the Arrow batches of
//! `arrow.rs` written with the Apache Arrow project's `parquet` crate, Snappy-compressed (what
//! Spark writes by default), in row groups sized for scans.

use std::io::Write;

use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde_json::{Map, Value};

use crate::capture::Timestamp;

use super::arrow::{BatchBuilder, CaptureLabel, TableError, BATCH_ROWS};
use super::columns::Column;

/// Rows per row group: the unit Spark and DuckDB split a scan by. 128 Ki rows of these tables
/// is a few MB compressed: enough to scan efficiently, and it bounds what the writer holds.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// A Parquet file being written row by row.
pub struct ParquetTable<W: Write + Send> {
    writer: ArrowWriter<W>,
    batch: BatchBuilder,
}

impl<W: Write + Send> ParquetTable<W> {
    pub fn new(
        out: W,
        columns: &'static [Column],
        label: CaptureLabel,
    ) -> Result<Self, TableError> {
        let batch = BatchBuilder::new(columns, label);
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_created_by(format!("sqos {}", env!("CARGO_PKG_VERSION")))
            .build();
        let writer = ArrowWriter::try_new(out, batch.schema(), Some(props))?;
        Ok(ParquetTable { writer, batch })
    }

    pub fn set_start(&mut self, ts: Timestamp) {
        self.batch.set_start(ts);
    }

    pub fn row(&mut self, row: &Map<String, Value>) -> Result<(), TableError> {
        self.batch.push(row)?;
        if self.batch.len() >= BATCH_ROWS {
            let b = self.batch.finish()?;
            self.writer.write(&b)?;
        }
        Ok(())
    }

    /// Writes the last rows and the footer; returns the output.
    pub fn finish(mut self) -> Result<W, TableError> {
        if !self.batch.is_empty() {
            let b = self.batch.finish()?;
            self.writer.write(&b)?;
        }
        Ok(self.writer.into_inner()?)
    }
}
