#!/bin/sh
# Makes the venv of the Python build and test tools pinned in python/requirements-tools.txt
# (maturin, pytest, pyspark, pyarrow…) at $1, by default target/py-tools. tests/it/python_package.rs
# runs it when that venv is missing; .ci/run runs it in the background while the Rust code builds
# (pyspark is a ~450 MB download).
#
# Binary wheels only, except pyspark: PyPI has it only as a source archive, which pip turns into a
# wheel by copying its jars (no compiler).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:-$here/../target/py-tools}
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --only-binary :all: --no-binary pyspark -r "$here/requirements-tools.txt"
