#!/bin/bash
# The long AddressSanitizer campaign of issue 16 (docs/robustness.md, "ASan campaigns: the
# ledger"), which adds up across sessions and machines:
#   fuzz/campaign.sh build           ASan + libFuzzer binaries of this checkout (needs nightly:
#                                    rustup toolchain install nightly)
#   fuzz/campaign.sh run SECS T...   targets T one after another, SECS of wall time each; run
#                                    several at once for several lanes
#   touch "$DIR/PAUSE"; rm ...       stop / resume the running fuzzers (for benchmarks)
#   touch "$DIR/STOP"                end the lanes (each writes its final stats)
#   fuzz/campaign.sh ledger [SINCE]  runs, executions and CPU s per target from summary.log
# Corpora, logs, artifacts and summary.log live in $SQOS_CAMPAIGN_DIR (default
# ~/.cache/sqos-campaign), outside the checkout; the seeds are fuzz/seeds. The lanes run at nice
# 19 in a scheduling group of their own: under autogroup scheduling `nice` alone does not yield
# to another session's builds.
set -u
FUZZ=$(cd "$(dirname "$0")" && pwd)
DIR=${SQOS_CAMPAIGN_DIR:-$HOME/.cache/sqos-campaign}
HOST=$(rustc -vV | sed -n 's/^host: //p')
BIN=$DIR/target/$HOST/release
mkdir -p "$DIR/logs"

build() {
  # The smoke's flags (fuzz/sancov.flags) and what cargo fuzz adds for a campaign.
  RUSTFLAGS="$(cat "$FUZZ/sancov.flags") -Cllvm-args=-sanitizer-coverage-stack-depth -Zsanitizer=address -Coverflow_checks" \
    RUSTC_WRAPPER=$FUZZ/ours-only-rustc.sh \
    nice -n 10 cargo +nightly build --manifest-path "$FUZZ/Cargo.toml" --release --bins \
    --target "$HOST" --target-dir "$DIR/target" || return
  # The ledger names the commit the binaries are of, not the checkout's when a run ends.
  git -C "$FUZZ" describe --always --dirty >"$DIR/target/built-from"
}

# One target for $1 seconds of wall time (paused time included).
one() {
  local secs=$1 t=$2
  mkdir -p "$DIR/corpus/$t" "$DIR/artifacts/$t" "$FUZZ/seeds/$t"
  local start log built
  start=$(date -u +%H:%M:%S)
  # The build this run's binary is of, read now: a build made while it runs must not rename it.
  built=$(cat "$DIR/target/built-from" 2>/dev/null || echo unknown-build)
  log=$DIR/logs/$t-$(date -u +%Y%m%dT%H%M%S).log
  # Allocation stacks and use-after-return's fake stacks cost ~23 % of a run; a finding is run
  # again with ASan's defaults for its full report.
  ASAN_OPTIONS=malloc_context_size=0:detect_stack_use_after_return=0 \
    nice -n 19 /usr/bin/time -f "TIME user=%U sys=%S wall=%e maxrss_kb=%M" \
    "$BIN/$t" -max_len=4096 -runs=10000000 -max_total_time="$secs" -print_final_stats=1 \
    -artifact_prefix="$DIR/artifacts/$t/" "$DIR/corpus/$t" "$FUZZ/seeds/$t" >"$log" 2>&1 &
  local timer=$! fuzzer="" stopped=0 ended=0
  while kill -0 "$timer" 2>/dev/null; do
    [ -z "$fuzzer" ] && fuzzer=$(pgrep -P "$timer" | head -n 1)
    if [ -n "$fuzzer" ]; then
      if [ -e "$DIR/STOP" ]; then
        # Once: libFuzzer writes its final stats on the first SIGINT.
        [ $ended = 0 ] && kill -CONT "$fuzzer" && kill -INT "$fuzzer" && ended=1
      elif [ -e "$DIR/PAUSE" ] && [ $stopped = 0 ]; then
        kill -STOP "$fuzzer" && stopped=1
      elif [ ! -e "$DIR/PAUSE" ] && [ $stopped = 1 ]; then
        kill -CONT "$fuzzer" && stopped=0
      fi
    fi
    sleep 2
  done
  wait "$timer"
  local rc=$?
  local block
  block="== $t $built $(date -u +%F) $start-$(date -u +%H:%M:%S) rc=$rc
$(grep -E "stat::number_of_executed_units|stat::peak_rss_mb|^TIME|DONE" "$log" | tail -n 4)"
  # In one write (cat's; bash's printf writes a line at a time): two lanes that ended in the
  # same second wrote their lines interleaved, and the ledger gave one target both bodies.
  cat <<<"$block" >>"$DIR/summary.log"
}

# Per target, the runs summary.log holds (from SINCE on, e.g. 2026-11-28T08:30): runs,
# executions, CPU seconds (user + system) and executions per CPU second; for the ledger in
# docs/robustness.md, which adds up across machines (a machine's summary.log has its own runs only).
ledger() {
  printf "%-12s %5s %12s %9s %10s\n" target runs executions "CPU s" "per CPU s"
  awk -v since="${1:-}" '
    /^== / { t = $2; when = $4 "T" substr($5, 1, 8); on = (when >= since); if (on) runs[t]++; next }
    on && /stat::number_of_executed_units/ { execs[t] += $2 }
    on && /^TIME / { split($2, u, "="); split($3, s, "="); cpu[t] += u[2] + s[2] }
    END {
      for (t in runs)
        printf "%-12s %5d %12d %9.0f %10.0f\n", t, runs[t], execs[t], cpu[t], (cpu[t] > 0 ? execs[t] / cpu[t] : 0)
    }' "$DIR/summary.log" | sort
}

case "${1:-}" in
build) build ;;
ledger) ledger "${2:-}" ;;
run)
  [ $# -ge 3 ] || { echo "usage: $0 run SECS TARGET..." >&2; exit 2; }
  secs=$2
  shift 2
  for t in "$@"; do
    [ -x "$BIN/$t" ] || { echo "no binary $BIN/$t: run '$0 build' first" >&2; exit 2; }
  done
  echo 19 >/proc/self/autogroup 2>/dev/null
  for t in "$@"; do
    [ -e "$DIR/STOP" ] && break
    one "$secs" "$t"
  done
  ;;
*)
  echo "usage: $0 build | run SECS TARGET... | ledger [SINCE]" >&2
  exit 2
  ;;
esac
