#!/usr/bin/env bash
# Commands timed in turn, each after the other, ROUNDS times, so that the machine's drift within
# the minute affects them alike (docs/performance.md):
#   benches/inturn.sh ROUNDS label1 "command 1" label2 "command 2" ...
# prints, per label, the least and median wall time (bash's clock) and task-clock (from
# `perf stat`), in ms. Each round runs every command twice: once under perf, once for the clock.
#   BEFORE='command'   run (untimed) before each timing of each command: the file's state in
#                      the page cache then is the same for all, e.g. BEFORE='cat FILE' (in the
#                      cache) or BEFORE='dd if=FILE iflag=nocache count=0' (read from disk).
#                      On a machine that pages out idle memory, the page cache included (the
#                      AMD EPYC of session 25), a capture left alone for minutes is partly read
#                      from disk again, and rows timed minutes apart do not compare.
set -euo pipefail
rounds=$1
shift
labels=()
cmds=()
while [ $# -gt 0 ]; do
  labels+=("$1")
  cmds+=("$2")
  shift 2
done
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for _ in $(seq "$rounds"); do
  for j in "${!cmds[@]}"; do
    [ -n "${BEFORE:-}" ] && { eval "$BEFORE" >/dev/null 2>&1 || true; }
    eval "perf stat -x, -e task-clock -o '$err' -- ${cmds[$j]}" >/dev/null 2>&1 || true
    cpu=$(awk -F, '/task-clock/ { print $1 }' "$err")
    [ -n "${BEFORE:-}" ] && { eval "$BEFORE" >/dev/null 2>&1 || true; }
    # bash's own clock: no process started around the command's.
    t0=${EPOCHREALTIME/./}
    eval "${cmds[$j]}" >/dev/null 2>&1 || true
    t1=${EPOCHREALTIME/./}
    echo "${labels[$j]} $cpu $((t1 - t0))"
  done
done | awk '
  { n[$1]++; cpu[$1, n[$1]] = $2; wall[$1, n[$1]] = $3 / 1000; if (!($1 in seen)) { seen[$1]; order[++k] = $1 } }
  function stat(a, l, m,   i, j, v, t) {
    for (i = 1; i <= m; i++) v[i] = a[l, i]
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return sprintf("%6.1f %6.1f", v[1], (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2)
  }
  END {
    printf "%-16s %13s %13s\n", "", "wall min med", "CPU min med"
    for (i = 1; i <= k; i++) { l = order[i]; printf "%-16s %13s %13s  (n=%d)\n", l, stat(wall, l, n[l]), stat(cpu, l, n[l]), n[l] }
  }'
