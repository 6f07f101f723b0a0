"""Type stubs of the compiled module (python/src/lib.rs); use the API in sqos/__init__.py."""

from typing import List, Optional, Tuple

import pyarrow

# (message, frame, offset) of a damaged capture.
Problem = Tuple[str, Optional[int], Optional[int]]

__version__: str

def read_table(
    table: str,
    path: Optional[str] = None,
    data: Optional[bytes] = None,
    file: Optional[str] = None,
    host: Optional[str] = None,
    keys: List[str] = ...,
    ports: List[int] = ...,
) -> Tuple[pyarrow.Table, Optional[Problem]]: ...
def plot_svg(
    path: Optional[str] = None,
    data: Optional[bytes] = None,
    file: Optional[str] = None,
    flows: List[str] = ...,
    max_flows: int = 12,
    same_scale: bool = False,
    keys: List[str] = ...,
    ports: List[int] = ...,
) -> Tuple[str, Optional[Problem]]: ...
def svg_to_png(svg: str, scale: float) -> bytes: ...
def capture_label(root: str, path: str) -> Tuple[str, Optional[str]]: ...
def schema(table: str) -> pyarrow.Schema: ...
