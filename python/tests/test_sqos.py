"""The Python package against the CLI: the same tables as `sqos export --format parquet`, typed
columns, pandas and DuckDB on them, errors with frame and offset, the plot.

Run by tests/python_package.rs (SQOS_EXTERNAL_TESTS=1) in a fresh venv with the wheel installed;
SQOS_BIN is the sqos binary, SQOS_REPO the repository.
"""

import gzip
import os
import subprocess
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqos

REPO = os.environ.get("SQOS_REPO", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("SQOS_BIN", os.path.join(REPO, "target", "release", "sqos"))
CAPTURES = os.path.join(REPO, "captures")
STEADY = os.path.join(CAPTURES, "steady.pcap.gz")
READERS = {
    "messages": sqos.read_messages,
    "flows": sqos.read_flows,
    "series": sqos.read_series,
    "findings": sqos.read_findings,
}


def committed_captures():
    names = sorted(os.listdir(CAPTURES))
    return [
        os.path.join(CAPTURES, n)
        for n in names
        if n.endswith((".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz"))
    ]


def cli_table(capture, what, tmp_path, *extra):
    out = tmp_path / f"{what}.parquet"
    r = subprocess.run(
        [BIN, "export", capture, "--what", what, "--format", "parquet", "--quiet", "-o", str(out), *extra],
        capture_output=True,
        text=True,
    )
    assert r.returncode in (0, 1), r.stderr
    return pq.read_table(out)


@pytest.mark.parametrize("capture", committed_captures(), ids=os.path.basename)
@pytest.mark.parametrize("what", sorted(READERS))
def test_tables_equal_the_cli_export(capture, what, tmp_path):
    got = READERS[what](capture, host="HV01", errors="ignore")
    want = cli_table(capture, what, tmp_path, "--host", "HV01")
    assert got.schema.equals(want.schema), f"{got.schema}\n!=\n{want.schema}"
    assert got.num_rows == want.num_rows
    assert got.equals(want)


def test_three_lines_to_pandas():
    flows = sqos.read_flows(STEADY).to_pandas()
    # In the order `sqos flows` lists them.
    assert list(flows["initiator_name"]) == ["vm01", "vm02", "vm03", "vm04"]
    assert list(flows["maximum_io_rate"]) == [120, 100, 100, 80]
    assert str(flows["maximum_io_rate"].dtype) == "uint64"
    assert (flows["capture_file"] == STEADY).all()


def test_types():
    m = sqos.read_messages(STEADY)
    s = m.schema
    assert s.field("time").type == pa.timestamp("us", tz="UTC")
    assert s.field("msg_id").type == pa.uint64()
    assert s.field("frame").type == pa.int64()
    assert s.field("status").type == pa.uint32()
    assert s.field("logical_flow_id").type == pa.string()
    assert s.field("findings").type == pa.list_(pa.string())
    assert m.num_rows == 58
    named = m.filter(pa.compute.equal(m["initiator_name"], "vm03")).to_pylist()
    assert named and all(r["initiator_node_name"] == "HV02.contoso.local" for r in named)
    req = named[0]
    assert req["capture_start"].year == m["time"][0].as_py().year


def test_bytes_equal_path():
    with open(STEADY, "rb") as f:
        data = f.read()
    a = sqos.read_series(data, file=STEADY)
    b = sqos.read_series(STEADY)
    assert a.equals(b)
    assert sqos.read_series(data).column("capture_file")[0].as_py() == "<bytes>"


def test_duckdb_reads_the_table_and_the_parquet(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    flows = sqos.read_flows(STEADY)
    top = duckdb.sql(
        "select initiator_name, normalized_iops from flows order by normalized_iops desc limit 1"
    ).fetchall()
    assert top[0][0] == "vm04"
    cli_table(STEADY, "messages", tmp_path)
    path = str(tmp_path / "messages.parquet")
    cols = {r[0]: r[1] for r in duckdb.sql(f"describe select * from '{path}'").fetchall()}
    assert cols["time"] == "TIMESTAMP WITH TIME ZONE"
    assert cols["msg_id"] == "UBIGINT"
    assert cols["status"] == "UINTEGER"
    assert cols["findings"] == "VARCHAR[]"
    n = duckdb.sql(f"select count(*) from '{path}' where direction = 'response'").fetchall()[0][0]
    assert n == 29


def test_damaged_capture_raises_with_frame_offset_and_rows(tmp_path):
    with gzip.open(STEADY, "rb") as f:
        data = f.read()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(sqos.CaptureError) as e:
        sqos.read_messages(cut)
    err = e.value
    assert err.frame is not None and err.frame > 1
    assert err.offset is not None and 0 < err.offset <= len(data) // 2
    assert "cut off in frame" in str(err)
    assert 0 < err.table.num_rows < 58
    # The CLI says the same frame and offset.
    r = subprocess.run([BIN, "dissect", str(cut)], capture_output=True, text=True)
    assert r.returncode == 1
    assert f"frame {err.frame} at offset {err.offset}" in r.stderr
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = sqos.read_messages(cut, errors="warn")
    assert t.num_rows == err.table.num_rows
    assert issubclass(w[0].category, sqos.CaptureWarning)


def test_unusable_inputs(tmp_path):
    with pytest.raises(sqos.CaptureError) as e:
        sqos.read_flows(tmp_path / "missing.pcap")
    assert e.value.frame is None and e.value.table is None
    with pytest.raises(sqos.CaptureError) as e:
        sqos.read_flows(b"this is not a capture")
    assert "not a pcap or pcapng" in str(e.value)
    assert e.value.offset == 0
    with pytest.raises(ValueError, match="no-such-keys"):
        sqos.read_flows(STEADY, keys=tmp_path / "no-such-keys")
    with pytest.raises(ValueError):
        sqos.read_flows(STEADY, errors="sometimes")


def test_plot_is_the_cli_plot(tmp_path):
    p = sqos.plot(STEADY)
    out = tmp_path / "iops.svg"
    subprocess.run([BIN, "plot", STEADY, "-o", str(out)], check=True)
    assert p.svg == out.read_bytes()
    assert b">steady.pcap.gz</text>" in p.svg
    subprocess.run([BIN, "plot", STEADY, "--same-scale", "-o", str(out)], check=True)
    same = sqos.plot(STEADY, same_scale=True).svg
    assert same == out.read_bytes() and same != p.svg
    assert p._repr_svg_().startswith("<svg")
    png = p.to_png(1.0)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    one = sqos.plot(STEADY, flows=["vm02"])
    assert b"vm02" in one.svg and b"vm01" not in one.svg


def test_capture_labels_and_schemas():
    assert sqos.capture_label("s3a://b/archive", "s3a://b/archive/HV01/x.pcapng") == ("HV01/x.pcapng", "HV01")
    assert sqos.capture_label("archive", "archive/x.pcapng") == ("x.pcapng", None)
    assert sqos.schema("flows").equals(sqos.read_flows(STEADY).schema)
    assert sqos.schema("findings").names[:2] == ["scope", "code"]


REAL = os.path.join(CAPTURES, "real")


@pytest.mark.parametrize("capture", ["smb311-encrypted.pcap", "smb302-encrypted.pcap"])
def test_keys_decrypt_as_the_cli_does(capture, tmp_path):
    path = os.path.join(REAL, capture)
    keys = os.path.join(REAL, "smb2_seskey_list")
    # Without keys the SQOS exchange is sealed; with them it is the CLI's `--keys` export.
    assert sqos.read_messages(path).num_rows == 0
    got = sqos.read_messages(path, keys=keys)
    assert got.num_rows == 12
    assert got.equals(cli_table(path, "messages", tmp_path, "--keys", keys))
    assert sqos.read_flows(path, keys=[keys]).equals(
        cli_table(path, "flows", tmp_path, "--keys", keys)
    )


def on_port(pcap: bytes, old: int, new: int) -> bytes:
    """A classic Ethernet/IPv4 pcap with TCP port `old` renumbered `new` (checksums as they were:
    sqos does not check them)."""
    out = bytearray(pcap)
    pos = 24
    while pos + 16 <= len(out):
        incl = int.from_bytes(out[pos + 8 : pos + 12], "little")
        frame = pos + 16
        if out[frame + 12 : frame + 14] == b"\x08\x00" and out[frame + 23] == 6:
            tcp = frame + 14 + (out[frame + 14] & 0x0F) * 4
            for at in (tcp, tcp + 2):
                if int.from_bytes(out[at : at + 2], "big") == old:
                    out[at : at + 2] = new.to_bytes(2, "big")
        pos = frame + incl
    return bytes(out)


def test_ports_read_smb_on_other_ports():
    spec = os.path.join(CAPTURES, "spec-examples-1.1.pcap")
    with open(spec, "rb") as f:
        original = f.read()
    assert original[:4] == b"\xd4\xc3\xb2\xa1", "a little-endian classic pcap"
    moved = on_port(original, 445, 10445)
    assert moved != original
    want = sqos.read_messages(original, file="x")
    assert want.num_rows > 0
    assert sqos.read_messages(moved, file="x").num_rows == 0
    got = sqos.read_messages(moved, file="x", ports=[10445]).to_pylist()
    # The same messages; only the server's address says the other port.
    server = {r["dst"] for r in got if r["direction"] == "request"}
    assert server == {"10.0.0.100:10445"}
    for r in got:
        for end in ("src", "dst"):
            r[end] = r[end].replace(":10445", ":445")
    assert got == want.to_pylist()
