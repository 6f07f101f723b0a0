#!/usr/bin/env bash
# Rows per second of the export paths on one generated capture with many flows, measured in one
# run so machine load affects them alike: `sqos export` as JSONL, CSV and Parquet (the CLI)
# against the Python package's `read_messages` / `read_flows` / `read_series` (pyarrow Tables)
# and the same plus `.to_pandas()`. `sqos stats` on the same file is the ceiling: reading and
# decoding alone. Best of three runs each.
#
#   benches/export.sh [DURATION]   capture length in seconds (default 30: ~130 MB, 32 flows)
#   SQOS_PYTHON=/path/python       a Python with the release wheel and pandas installed
#                                  (maturin build --release -m python/Cargo.toml; default python3)
#   SQOS_BENCH_DIR=/path           where the capture is written (default: a temp dir, removed)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-30}
if [ -n "${SQOS_BENCH_DIR:-}" ]; then
  DIR=$SQOS_BENCH_DIR
else
  DIR=$(mktemp -d)
  trap 'rm -rf "$DIR"' EXIT
fi
CAP="$DIR/many-flows.pcap"
PY=${SQOS_PYTHON:-python3}

cargo build --release --quiet
BIN=./target/release/sqos
"$BIN" synth --scenario steady --hosts 4 --vms 8 --disks 1 --duration "$DURATION" --seed 1 -q -o "$CAP"
bytes=$(stat -c %s "$CAP")
echo "capture: $CAP, $bytes bytes, load: $(cut -d' ' -f1-3 /proc/loadavg)"

# Best of three wall-clock seconds of a command.
best() {
  local b=999999 t
  for _ in 1 2 3; do
    # time writes to a file of its own: the command's stderr goes to /dev/null, and with it
    # would go time's figure.
    /usr/bin/time -f '%e' -o "$DIR/time" "$@" >/dev/null 2>/dev/null
    t=$(tail -n 1 "$DIR/time")
    b=$(awk -v a="$b" -v c="$t" 'BEGIN { print (c < a) ? c : a }')
  done
  echo "$b"
}
rate() { awk -v r="$1" -v s="$2" 'BEGIN { if (s <= 0) s = 0.01; printf "%.0f", r / s }'; }

printf '%-40s %8s %10s %12s\n' "path" "rows" "seconds" "rows/s"
s=$(best "$BIN" stats --quiet "$CAP")
printf '%-40s %8s %10s %12s\n' "sqos stats (decode only)" "-" "$s" "-"
for what in messages flows series; do
  rows=$("$BIN" export "$CAP" --what "$what" --format csv --quiet | tail -n +2 | wc -l)
  for fmt in jsonl csv parquet; do
    s=$(best "$BIN" export "$CAP" --what "$what" --format "$fmt" --quiet -o "$DIR/out.$fmt")
    printf '%-40s %8s %10s %12s\n' "sqos export --what $what --format $fmt" "$rows" "$s" "$(rate "$rows" "$s")"
  done
  for step in table pandas; do
    s=$("$PY" - "$CAP" "$what" "$step" <<'EOF'
import sys, time
import sqos
cap, what, step = sys.argv[1:]
read = getattr(sqos, "read_" + what)
best = None
for _ in range(3):
    t = time.perf_counter()
    table = read(cap)
    if step == "pandas":
        table.to_pandas()
    t = time.perf_counter() - t
    best = t if best is None else min(best, t)
print(f"{best:.2f}")
EOF
)
    label="python sqos.read_$what(path)"
    [ "$step" = pandas ] && label="$label.to_pandas()"
    printf '%-40s %8s %10s %12s\n' "$label" "$rows" "$s" "$(rate "$rows" "$s")"
  done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
