#!/usr/bin/env bash
# The quickest sqos: a release build optimised with a profile of its own runs on the bench's
# traffic (profile-guided optimisation, PGO). The compiler then lays out and inlines the hot path
# (frames, segments, messages) by what it really does: 9-12 % less time than `cargo build
# --release` on small I/Os, plain or encrypted, in session 32's runs (docs/performance.md). Output is the same: the
# script checks it on every committed capture before it says the build is done.
#
#   benches/pgo-build.sh           builds $PGO_DIR/sqos (prints its path last)
#   PGO_DIR=target/pgo             where the training captures, profiles and builds go
#   PGO_SIZE=48MiB                 bytes of each kind of training traffic
#
# Needs the compiler's own llvm-profdata (rustup's llvm-tools component; added with rustup when
# it is missing). Two release builds: ~6 minutes on 2 cores from nothing, and the training ~1.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/traffic.sh
SIZE=${PGO_SIZE:-48MiB}
mkdir -p "${PGO_DIR:-target/pgo}"
DIR=$(cd "${PGO_DIR:-target/pgo}" && pwd -P)

HOST=$(rustc -vV | sed -n 's/^host: //p')
PROFDATA=$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-profdata
if [ ! -x "$PROFDATA" ] && command -v rustup >/dev/null; then
  rustup component add llvm-tools >&2 || true
fi
if [ ! -x "$PROFDATA" ]; then
  echo "benches/pgo-build.sh: no llvm-profdata at $PROFDATA (rustup component add llvm-tools)" >&2
  exit 2
fi

# 1. A build that counts what its code does (its own target dir: other flags, other artifacts).
echo "pgo: instrumented build" >&2
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$DIR/raw" \
  cargo build --release --quiet --bin sqos --target-dir "$DIR/generate"
GEN=$DIR/generate/release/sqos

# 2. The training traffic, written by that build with its counts thrown away (synth is not what
# users run hot). Another seed than the bench's: the profile is of the kind of traffic, not of
# the files the bench times.
export TRAFFIC_SEED=2
echo "pgo: training captures, $SIZE of each kind" >&2
mkdir -p "$DIR/traffic"
synth() {
  local file=$1
  shift
  [ -s "$file" ] || LLVM_PROFILE_FILE="$DIR/synth-raw/%m.profraw" "$GEN" synth "$@" -o "$file" >/dev/null
}
for kind in large large-lz77 many small; do
  traffic "$kind" "$SIZE"
  synth "$DIR/traffic/$kind-$SIZE.pcap" "${SYNTH[@]}"
done
for kind in large small; do
  keys=$DIR/traffic/$kind-$SIZE-aes128gcm.keys
  [ -s "$keys" ] || rm -f "$DIR/traffic/$kind-$SIZE-aes128gcm.pcap"
  traffic "$kind" "$SIZE" "$keys"
  synth "$DIR/traffic/$kind-$SIZE-aes128gcm.pcap" "${SYNTH[@]}"
done
rm -rf "$DIR/synth-raw"

# 3. The runs the profile is made of: the main job on one thread and on all cores, the flow
# table and the stats on every kind of traffic; every face once on the committed captures.
echo "pgo: training runs" >&2
rm -rf "$DIR/raw"
# (%m: the runs' counts merged into one file as they end, not a file of ~20 MB a run.)
export LLVM_PROFILE_FILE="$DIR/raw/%m.profraw"
# Every training run must succeed (its notes are not shown: the traffic's last messages are cut
# and say so); one that fails stops the build with what it said.
train() {
  "$GEN" "$@" >/dev/null 2>"$DIR/train.err" || {
    cat "$DIR/train.err" >&2
    echo "benches/pgo-build.sh: training run \`sqos $*\` failed" >&2
    exit 1
  }
}
for cap in "$DIR"/traffic/*.pcap; do
  keys=()
  [ -s "${cap%.pcap}.keys" ] && keys=(--keys "${cap%.pcap}.keys")
  train dissect --quiet --threads 1 "${keys[@]}" "$cap"
  train dissect --quiet "${keys[@]}" "$cap"
  train flows --quiet "${keys[@]}" "$cap"
  train stats --quiet "${keys[@]}" "$cap"
done
# (nullglob: a pattern no file matches is no capture, not a path that fails.)
shopt -s nullglob
committed=(captures/*.pcap captures/*.pcap.gz captures/*.pcapng.gz captures/*/*.pcap*)
shopt -u nullglob
# (captures/real's encrypted sessions with their keys.)
REAL_KEYS=(--keys captures/real/smb2_seskey_list)
keys_of() {
  keys=()
  [[ $1 == captures/real/* ]] && keys=("${REAL_KEYS[@]}")
  return 0
}
for cap in "${committed[@]}"; do
  keys_of "$cap"
  train dissect --quiet "${keys[@]}" "$cap"
  train dissect --quiet -V "${keys[@]}" "$cap"
  train flows --quiet --format json "${keys[@]}" "$cap"
  train export --quiet --what messages --format csv "${keys[@]}" "$cap"
done
unset LLVM_PROFILE_FILE
"$PROFDATA" merge -o "$DIR/sqos.profdata" "$DIR/raw"
rm -rf "$DIR/raw" "$DIR/train.err"

# 4. The build that uses the profile. From nothing each time: cargo does not see a new profile
# as a change, and a crate built with the last one would keep it.
echo "pgo: optimised build" >&2
rm -rf "$DIR/use"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$DIR/sqos.profdata" \
  cargo build --release --quiet --bin sqos --target-dir "$DIR/use"

# 5. The same output as the build it was trained with (the same sources), on every committed
# capture: a profile changes how the code runs, never what it says.
for cap in "${committed[@]}"; do
  keys_of "$cap"
  for args in "dissect -V" "flows --format json" "stats"; do
    # shellcheck disable=SC2086 # args are words
    if ! cmp -s <(LLVM_PROFILE_FILE="$DIR/check-raw/%m.profraw" "$GEN" $args "${keys[@]}" "$cap" 2>&1) \
      <("$DIR/use/release/sqos" $args "${keys[@]}" "$cap" 2>&1); then
      echo "benches/pgo-build.sh: the optimised build's \`$args $cap\` differs" >&2
      exit 1
    fi
  done
done
rm -rf "$DIR/check-raw"
# (build.rs: the binary names its build.)
if ! "$DIR/use/release/sqos" --version | grep -q "PGO build"; then
  echo "benches/pgo-build.sh: the optimised build does not say it is one: $("$DIR/use/release/sqos" --version)" >&2
  exit 1
fi
cp "$DIR/use/release/sqos" "$DIR/sqos"
rm -rf "$DIR/use"
echo "pgo: same output on ${#committed[@]} committed captures; built:" >&2
echo "$DIR/sqos"
