"""The Spark job in local mode on committed captures: its partitioned tables hold exactly the rows
`sqos export DIR --format parquet --partition-by date,node` writes, read back by Spark, and the
top-throttled report equals the same figures computed from the Python package.

Run by tests/python_package.rs (SQOS_EXTERNAL_TESTS=1) with pyspark, a JRE and the wheel.
"""

import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import sqos  # noqa: E402
import sqos_spark  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

REPO = os.environ.get("SQOS_REPO", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("SQOS_BIN", os.path.join(REPO, "target", "release", "sqos"))
# Two nodes, one with two captures (rows of several files in one partition): enough to check
# labels, partitions and the union, small enough for CI (the job's cost is Spark's, per task).
LAYOUT = [
    ("HV01", "steady.pcap.gz"),
    ("HV01", "policy-change.pcap.gz"),
    ("HV02", "noisy-neighbour.pcapng.gz"),
]


@pytest.fixture(scope="module")
def spark():
    s = (
        # One executor thread: CI has 2 cores for everything, and the captures are small.
        SparkSession.builder.master("local[1]")
        .appName("sqos-test")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    yield s
    s.stop()


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("archive")
    for host, name in LAYOUT:
        (root / host).mkdir(exist_ok=True)
        shutil.copy(os.path.join(REPO, "captures", name), root / host / name)
    (root / "README.txt").write_text("not a capture")
    return root


@pytest.fixture(scope="module")
def job(spark, archive, tmp_path_factory):
    out = tmp_path_factory.mktemp("job")
    sqos_spark.export(spark, str(archive), str(out))
    return out


def rows(df):
    cols = sorted(df.columns)
    return sorted((tuple(r[c] for c in cols) for r in df.collect()), key=repr)


@pytest.mark.parametrize("table", sqos_spark.TABLES)
def test_rows_equal_sqos_export(spark, archive, job, table, tmp_path):
    cli = tmp_path / "cli"
    r = subprocess.run(
        [BIN, "export", str(archive), "--what", table, "--format", "parquet",
         "--partition-by", "date,node", "--quiet", "-o", str(cli)],
        capture_output=True, text=True,
    )
    assert r.returncode == 0, r.stderr
    got = spark.read.parquet(str(job / table))
    want = spark.read.parquet(str(cli))
    assert sorted(got.dtypes) == sorted(want.dtypes)
    g, w = rows(got), rows(want)
    assert len(g) == len(w) and len(g) > 0
    assert g == w
    # Every capture contributed, labelled as `sqos export DIR` labels it.
    files = {r["capture_file"] for r in got.select("capture_file").distinct().collect()}
    if table != "findings":
        assert files == {f"{h}/{n}" for h, n in LAYOUT}
    nodes = {r["node"] for r in got.select("node").distinct().collect()}
    assert nodes <= {"HV01", "HV02"}


def test_types_in_spark(spark, job):
    t = dict(spark.read.parquet(str(job / "messages")).dtypes)
    assert t["time"] == "timestamp"
    assert t["msg_id"] == "decimal(20,0)"
    assert t["status"] == "bigint"
    assert t["frame"] == "bigint"
    assert t["findings"] == "array<string>"
    assert t["date"] == "date"


def test_top_throttled_per_day(spark, archive, job):
    got = [r.asDict() for r in sqos_spark.top_throttled(spark, str(job), top=3).collect()]
    # The same figures from the package, without Spark.
    expect = {}
    for host, name in LAYOUT:
        s = sqos.read_series(str(archive / host / name)).to_pylist()
        for r in s:
            if r["maximum_io_rate"] and r["normalized_iops"] is not None and (
                r["normalized_iops"] >= 0.95 * r["maximum_io_rate"]
            ):
                key = (r["capture_start"].date(), host, r["logical_flow_id"])
                e = expect.setdefault(key, [0, 0.0])
                e[0] += 1
                e[1] += r["seconds"]
    assert expect, "the captures have intervals at MaximumIoRate"
    by_day = {}
    for (day, host, flow), (n, secs) in expect.items():
        by_day.setdefault(day, []).append((-secs, flow, host, n))
    want = []
    for day in sorted(by_day):
        for neg, flow, host, n in sorted(by_day[day])[:3]:
            want.append((day, host, flow, n, round(-neg, 1)))
    assert [
        (r["date"], r["node"], r["logical_flow_id"], r["intervals"], float(r["throttled_seconds"]))
        for r in got
    ] == want
