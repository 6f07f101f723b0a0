"""sqos on Apache Spark: a directory (or object-store prefix) of captures → partitioned Parquet →
Spark SQL.

    spark-submit examples/spark/sqos_spark.py CAPTURES OUT [--tables flows,series,...] [--top 10]

CAPTURES is a directory or prefix (file:, hdfs:, s3a:, gs: …) holding pcap / pcapng files, gzip
too, in any layout; `CAPTURES/HOST/…` gives the rows their capture_host, as `sqos export DIR`
does. Every executor runs the sqos Python package (the same analysis as the CLI, compiled in) on
whole files through `mapInArrow`, so a file is never split and the driver never sees its bytes.
OUT gets one folder per table, Hive-partitioned by date (of the capture's first frame, UTC) and
node (capture_host): `OUT/flows/date=2026-11-24/node=HV01/part-….parquet`. Then Spark SQL lists
the top throttled flows per day: the flows with the most seconds at their MaximumIoRate.

Each executor needs `pip install sqos-*.whl` (it brings pyarrow); see examples/spark/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

import sqos

TABLES = ("messages", "flows", "series", "findings")
READERS = {
    "messages": sqos.read_messages,
    "flows": sqos.read_flows,
    "series": sqos.read_series,
    "findings": sqos.read_findings,
}
CAPTURE_GLOB = "*.{pcap,pcapng,cap,ntar,pcap.gz,pcapng.gz,cap.gz,ntar.gz}"


def spark_type(t: pa.DataType) -> pa.DataType:
    """Spark has no unsigned integers: uint64 becomes decimal(20,0) and uint32 int64, exactly
    what Spark's own Parquet reader makes of sqos's UINT_64 / UINT_32 columns."""
    if t == pa.uint64():
        return pa.decimal128(20, 0)
    if t == pa.uint32():
        return pa.int64()
    return t


def spark_schema(arrow: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, spark_type(f.type), f.nullable) for f in arrow])


def qualified(spark: SparkSession, path: str) -> str:
    """The path as Spark names the files below it (`file:/abs/dir`, `s3a://bucket/prefix`)."""
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return fs.makeQualified(p).toString()


def read_capture(uri: str) -> bytes | str:
    """A local path for `file:` URIs; the bytes otherwise (through pyarrow's filesystems)."""
    if uri.startswith("file:"):
        path = uri[len("file://"):] if uri.startswith("file://") else uri[len("file:"):]
        return unquote(path)
    fs, path = pafs.FileSystem.from_uri(uri)
    with fs.open_input_stream(path) as f:
        return f.read()


def analyse(table: str, root: str):
    """The function mapInArrow runs in the executors: capture paths in, table rows out."""
    reader = READERS[table]
    target = spark_schema(sqos.schema(table))

    def run(batches):
        for batch in batches:
            for uri in batch.column("path").to_pylist():
                file, host = sqos.capture_label(root, uri)
                t = reader(read_capture(uri), file=file, host=host, errors="warn")
                yield from t.cast(target).to_batches()

    return run


def export(spark: SparkSession, captures: str, out: str, tables=TABLES) -> dict[str, DataFrame]:
    """Runs sqos on every capture below `captures` and writes each table to `out/TABLE`."""
    root = qualified(spark, captures)
    # The executors unpickle `analyse`'s function from this module: ship it to them.
    spark.sparkContext.addPyFile(os.path.abspath(__file__))
    files = (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", CAPTURE_GLOB)
        .load(captures)
        .select("path")  # the content column is never read: executors open the files
    )
    # One task per capture: a file is analysed whole, on one executor.
    n = max(files.count(), 1)
    files = files.repartition(n, "path")
    written = {}
    for table in tables:
        schema = from_arrow_schema(spark_schema(sqos.schema(table)))
        df = files.mapInArrow(analyse(table, root), schema)
        (
            df.withColumn("date", F.to_date("capture_start"))
            .withColumn("node", F.col("capture_host"))
            .write.mode("overwrite")
            .partitionBy("date", "node")
            .parquet(os.path.join(out, table))
        )
        written[table] = spark.read.parquet(os.path.join(out, table))
    return written


TOP_THROTTLED = """
WITH at_limit AS (
  SELECT date, node, logical_flow_id, initiator_name,
         count(*) AS intervals, sum(seconds) AS seconds,
         max(maximum_io_rate) AS maximum_io_rate, max(normalized_iops) AS peak_normalized_iops
  FROM series
  WHERE maximum_io_rate > 0 AND normalized_iops >= 0.95 * maximum_io_rate
  GROUP BY date, node, logical_flow_id, initiator_name
)
SELECT date, node, initiator_name, logical_flow_id, intervals,
       round(seconds, 1) AS throttled_seconds, maximum_io_rate,
       round(peak_normalized_iops, 1) AS peak_normalized_iops
FROM (SELECT *, row_number() OVER (PARTITION BY date ORDER BY seconds DESC, logical_flow_id) AS rank
      FROM at_limit)
WHERE rank <= {top}
ORDER BY date, throttled_seconds DESC, logical_flow_id
"""


def top_throttled(spark: SparkSession, out: str, top: int = 10) -> DataFrame:
    """Per day, the flows with the most seconds at (≥ 95 % of) their MaximumIoRate."""
    spark.read.parquet(os.path.join(out, "series")).createOrReplaceTempView("series")
    return spark.sql(TOP_THROTTLED.format(top=int(top)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("captures", help="directory or prefix of captures")
    ap.add_argument("out", help="output directory or prefix for the Parquet tables")
    ap.add_argument("--tables", default=",".join(TABLES), help="comma-separated tables")
    ap.add_argument("--top", type=int, default=10, help="flows per day in the report")
    a = ap.parse_args(argv)
    tables = [t for t in a.tables.split(",") if t]
    unknown = [t for t in tables if t not in TABLES]
    if unknown:
        ap.error(f"unknown tables {unknown}: choose from {', '.join(TABLES)}")
    spark = (
        SparkSession.builder.appName("sqos")
        # Dates of the partitions and of SQL are UTC, like `sqos export --partition-by date`.
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    export(spark, a.captures, a.out, tables)
    if "series" in tables:
        top_throttled(spark, a.out, a.top).show(truncate=False)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
