"""MS-SQOS (Storage Quality of Service over SMB3) captures as pyarrow Tables.

The same analysis as the ``sqos`` command line, compiled in: each ``read_*`` function reads a
pcap / pcapng capture (gzip too, a path or its bytes) and returns the table
``sqos export --what … --format parquet`` writes, as a :class:`pyarrow.Table` handed over
through the Arrow C data interface::

    import sqos
    flows = sqos.read_flows("captures/steady.pcap.gz").to_pandas()
    flows[["initiator_name", "maximum_io_rate", "normalized_iops"]]

Columns are typed: timestamps are UTC timestamps (microseconds), 64-bit protocol counters are
exact ``uint64``, GUIDs are their 36-character strings, lists of codes are lists of strings.
Every table ends with ``capture_file``, ``capture_host`` and ``capture_start`` so the tables of
many captures can be concatenated. Column meanings: docs/analysis.md and the README's JSON
schema (the keys are the same).

Encrypted SMB3 sessions are decoded with ``keys=`` (Wireshark's "SMB2 Secret Keys" file, as
``sqos --keys`` takes it); SMB on ports other than 445 and 139 with ``ports=``.

A capture that is damaged part-way (cut off, corrupt) raises :class:`CaptureError` naming the
frame and byte offset; everything decoded before the damage is in its ``table`` attribute
(``errors="warn"`` returns that table with a warning instead, ``errors="ignore"`` silently).
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Tuple, Union

from . import _sqos

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow

__version__ = _sqos.__version__

__all__ = [
    "read_messages",
    "read_flows",
    "read_series",
    "read_findings",
    "plot",
    "Plot",
    "CaptureError",
    "CaptureWarning",
    "capture_label",
    "schema",
]

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]
PathLike = Union[str, "os.PathLike[str]"]
Keys = Union[PathLike, Sequence[PathLike], None]


class CaptureError(ValueError):
    """A capture that could not be read, or not to its end.

    Attributes:
        path: the file (or the ``file=`` name given with bytes).
        frame: the 1-based frame the damage is in, or None (file missing, not a capture).
        offset: the byte offset in the (decompressed) capture, or None when no byte was read.
        table: for a damaged capture, the table of everything decoded before the damage;
            None when nothing could be read.
    """

    def __init__(self, message, path, frame=None, offset=None, table=None):
        super().__init__(message)
        self.path = path
        self.frame = frame
        self.offset = offset
        self.table = table


class CaptureWarning(UserWarning):
    """A damaged capture read with ``errors="warn"``: the table stops at the damage."""


def _source(source: Source, file: Optional[str]):
    if isinstance(source, (bytes, bytearray, memoryview)):
        return {"data": bytes(source), "file": file}
    return {"path": os.fspath(source), "file": file}


def _options(keys: Keys, ports: Sequence[int]) -> dict:
    """`keys=` (one key file or several) and `ports=` as the compiled module takes them."""
    if keys is None:
        files = []
    elif isinstance(keys, (str, os.PathLike)):
        files = [os.fspath(keys)]
    else:
        files = [os.fspath(k) for k in keys]
    return {"keys": files, "ports": [int(p) for p in ports]}


def _outcome(result, path, errors: str):
    value, problem = result
    if problem is None or errors == "ignore":
        return value
    message, frame, offset = problem
    if errors == "warn":
        warnings.warn(message, CaptureWarning, stacklevel=3)
        return value
    raise CaptureError(message, path, frame, offset, value)


def _call(fn, source: Source, file: Optional[str], errors: str, *args, **kwargs):
    """Runs a compiled reader; its unusable-capture error becomes a CaptureError."""
    if errors not in ("raise", "warn", "ignore"):
        raise ValueError(f"errors={errors!r}: use 'raise', 'warn' or 'ignore'")
    src = _source(source, file)
    name = src.get("file") or src.get("path") or "<bytes>"
    try:
        result = fn(*args, **src, **kwargs)
    except ValueError as e:
        # The compiled module raises ValueError(message, frame, offset) for an unusable capture.
        if len(e.args) == 3 and isinstance(e.args[0], str):
            message, frame, offset = e.args
            raise CaptureError(message, name, frame, offset) from None
        raise
    return _outcome(result, name, errors)


_ARGS_DOC = """
    Args:
        source: a capture path (pcap, pcapng, gzip-compressed too) or its bytes.
        keys: SMB3 keys for encrypted sessions: a key file (Wireshark's "SMB2 Secret Keys",
            ``sqos --keys``) or a list of them.
        ports: extra TCP ports to read as SMB (445 and 139 always are), like ``--port``.
        host: the host the capture was taken on, for the ``capture_host`` column.
        file: the name for ``capture_file`` (default: the path; ``"<bytes>"`` for bytes).
        errors: what a damaged capture does: ``"raise"`` (CaptureError, with the rows read
            before the damage in ``.table``), ``"warn"`` or ``"ignore"`` (return those rows).
"""


def _reader(table: str, doc: str) -> Callable[..., "pyarrow.Table"]:
    """One ``read_*`` function: the table ``sqos export --what TABLE --format parquet`` writes."""

    def read(
        source: Source,
        keys: Keys = None,
        *,
        ports: Sequence[int] = (),
        host: Optional[str] = None,
        file: Optional[str] = None,
        errors: str = "raise",
    ) -> "pyarrow.Table":
        return _call(
            _sqos.read_table, source, file, errors, table, host=host, **_options(keys, ports)
        )

    read.__name__ = read.__qualname__ = f"read_{table}"
    read.__doc__ = doc + _ARGS_DOC
    return read


read_messages = _reader(
    "messages",
    """One row per SQOS request and response (``sqos export --what messages``): frame, time,
    src, dst, direction, SMB2 ids, the SQOS fields (logical_flow_id, policy_id, limit,
    reservation, io_count_increment, status, maximum_io_rate, …), findings, then
    capture_file, capture_host, capture_start.
""",
)
read_flows = _reader(
    "flows",
    """One row per logical flow (VM disk), the ``sqos flows`` table: names, policy (limit,
    reservation), the server's MaximumIoRate / MinimumIoRate and status, IOPS / latency / KB/s
    reported by the client and observed on the wire, channels, finding codes.
""",
)
read_series = _reader(
    "series",
    """One row per flow per update interval (``sqos export --what series``): start and end
    times, the reported and observed rates of the interval, the limits in effect.
""",
)
read_findings = _reader(
    "findings",
    """One row per finding: first the messages' (``scope == "message"``, codes ``sqos.*``) in
    frame order, then the flows' (``scope == "flow"``, codes ``flow.*``) in frame order, with
    severity, message, frame, time, logical_flow_id and initiator_name.
""",
)


class Plot:
    """The ``sqos plot`` chart of a capture: per-flow normalized IOPS over time with the
    MaximumIoRate / MinimumIoRate lines and the findings. Jupyter shows it inline."""

    def __init__(self, svg: str):
        self._svg = svg

    @property
    def svg(self) -> bytes:
        """The SVG document, UTF-8."""
        return self._svg.encode("utf-8")

    def _repr_svg_(self) -> str:
        return self._svg

    def to_png(self, scale: float = 2.0) -> bytes:
        """The chart as PNG (``scale`` pixels per SVG unit), as ``sqos plot -o x.png`` draws it."""
        return _sqos.svg_to_png(self._svg, scale)

    def save(self, path: Union[str, "os.PathLike[str]"], scale: float = 2.0) -> None:
        """Write ``.svg`` or ``.png`` (by the extension)."""
        p = os.fspath(path)
        ext = os.path.splitext(p)[1].lower()
        if ext == ".svg":
            data = self.svg
        elif ext == ".png":
            data = self.to_png(scale)
        else:
            raise ValueError(f"{p}: name it .svg or .png")
        with open(p, "wb") as f:
            f.write(data)


def plot(
    source: Source,
    keys: Keys = None,
    *,
    ports: Sequence[int] = (),
    flows: Sequence[str] = (),
    max_flows: int = 12,
    same_scale: bool = False,
    file: Optional[str] = None,
    errors: str = "raise",
) -> Plot:
    """The ``sqos plot`` chart of a capture, titled with the capture's file name (or ``file``).

    Args:
        source, keys, ports, file, errors: as for :func:`read_messages`.
        flows: only these flows: LogicalFlowID prefixes or initiator names.
        max_flows: at most this many panels (flows with findings first, then the busiest).
        same_scale: one IOPS scale for every panel, like ``--same-scale``.
    """
    return Plot(
        _call(
            _sqos.plot_svg,
            source,
            file,
            errors,
            flows=list(flows),
            max_flows=max_flows,
            same_scale=bool(same_scale),
            **_options(keys, ports),
        )
    )


def capture_label(root: str, path: str) -> Tuple[str, Optional[str]]:
    """``(capture_file, capture_host)`` as ``sqos export DIR`` labels a file below ``root``: its
    path relative to ``root``, and the folder right below ``root`` that holds it
    (``ROOT/HOST/…``) or None. Paths or URIs, ``/``-separated."""
    return _sqos.capture_label(root, path)


def schema(table: str) -> "pyarrow.Schema":
    """The schema of a table (``"messages"``, ``"flows"``, ``"series"``, ``"findings"``): its
    columns, then capture_file, capture_host, capture_start."""
    return _sqos.schema(table)
