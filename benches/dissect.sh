#!/usr/bin/env bash
# Throughput and peak memory of sqos against `cat`, a parse ceiling and tshark, all on the same
# large generated capture of SMB2 READ/WRITE traffic (64 KiB payloads in 1448-byte segments, an
# SQOS IOCTL pair every ~1,000 messages), in one run so that the machine's load affects them alike.
#
#   benches/dissect.sh [SIZE]        SIZE defaults to 1GiB (e.g. 256MiB for a quick run)
#   SQOS_BENCH_DIR=/path             where the capture is written and kept (default: a temp dir)
#   SKIP_TSHARK=1                    do not time tshark (it takes about a minute per GiB)
#   SKIP_ENCRYPTED=1                 do not time the encrypted capture (same traffic, AES-128-GCM)
#   SKIP_COMPRESSED=1                do not time the compressed capture (same traffic, LZ77 chained)
#   SKIP_MANY=1                      do not time the many-connection capture (see below)
#   SKIP_SMALL=1                     do not time the small-I/O capture (see below)
#   SKIP_ROTATED=1                   do not time the small-I/O capture cut into 6 and 100 files
#   SKIP_PCAPNG=1                    do not time the small-I/O capture as pcapng
#   SKIP_SMALL_ENCRYPTED=1           do not time the small-I/O capture encrypted (AES-128-GCM)
#   CACHE=written                    each capture in the page cache as a capture tool leaves it
#                                    (written anew in 4 KiB writes) rather than as a read from
#                                    disk leaves it (the default): see docs/performance.md
#   RUNS=N                           runs of each fast command, the quickest is kept (default 3)
#   TSHARK_RUNS=N                    runs of tshark, the quickest is kept (default 3: tshark's
#                                    time varies by a third from run to run on a shared machine,
#                                    and the ratios to it are only fair if both sides get the
#                                    quickest of several)
#
# Rows:
#   cat              `cat FILE > /dev/null`: what the kernel's copy of the file costs
#   parse ceiling    benches/parse_ceiling.rs: pcap-parser + etherparse on every frame, no
#                    reassembly (what reading and header parsing cost before sqos's own work)
#   record walk      benches/parse_ceiling.rs --walk: sqos's own reader alone on one thread
#                    (through the file's map where its look finds that pays, else in chunks),
#                    every record walked, a byte of each frame's IP header read: the floor
#                    under `sqos dissect -t1`, which works on top of this walk
#   record walk -tN  the same walk with the file cut into N parts (the machine's cores), each
#                    walked on its own thread (`CaptureReader::open_parts`): the floor under a
#                    design that shares one capture's walk out over the cores (a legacy pcap
#                    file only; README, Performance, session 39)
#   sqos dissect     the main job, text output to /dev/null: on one thread (--threads 1) and
#                    on all the machine's cores (2, the default on 2 cores or more: on a
#                    legacy pcap file whose map pays or that comes from disk, and on rotated
#                    files of 32 MiB and more, the second thread indexes the records ahead of
#                    the reader, capture/index.rs; else a helper reads the file's chunks ahead
#                    of the reader, the two sharing the copying, unless the reader's work is
#                    small beside the copy and the file's map pays; more: connections shared
#                    out to workers too)
#   sqos dissect -T jsonl  the same on one thread, each SQOS message a JSON line (the output
#                    the issue measured first; its cost is per SQOS message)
#   sqos flows       the whole analysis (flow table), all cores
#   PGO build        `sqos dissect` as above, built by benches/pgo-build.sh (a release build
#                    optimised with a profile of its runs on this traffic, made with 48 MiB of
#                    each kind); SKIP_PGO=1 leaves these rows out
#   cat again        `cat` once more after sqos's rows; the line under each table ("pace:")
#                    says when the two `cat` rows differ by more than a fifth (and 2 ms): the
#                    machine's pace changed while the table was measured, and its rows do not
#                    compare
#   tshark           `tshark -Y` on the SQOS IOCTLs, out-of-order reassembly on
# A second table does the same for the same traffic in an encrypted SMB 3.1.1 session
# (AES-128-GCM), decrypted with --keys (sqos and tshark alike); a third for the same traffic
# compressed (chained LZ77, SMB 3.1.1 compression: every message that comes out smaller); a
# fourth for traffic of many connections at once (`synth --scenario steady`, 8 hosts of 4 VMs,
# each host's session on 2 channels: 16 connections, I/Os up to 1 MiB), about SIZE bytes; a
# fifth for the same hosts with small I/Os (4-64 KiB: a message every ~6 frames); a sixth for
# the same small I/Os with every session encrypted (AES-128-GCM); a seventh and an eighth for
# the plain small-I/O capture cut into 6 files and into 100 (~5 MB each, `tcpdump -C 5`) as a
# rotating capture leaves them, read as one timeline (needs Wireshark's editcap to cut it; no
# tshark row: tshark reads one file); a ninth for the same capture as pcapng, as dumpcap and
# Wireshark write it (editcap again).
# Columns: wall seconds, CPU seconds (user + system), MB/s by wall time and per CPU second, peak
# RSS, and the throughput as ratios to cat and to tshark, by wall time and by CPU time. On a busy
# machine wall times mostly measure waiting for a core; CPU times stay comparable.
set -euo pipefail
CORES=$(nproc)
cd "$(dirname "$0")/.."
source benches/traffic.sh
SIZE=${1:-1GiB}
RUNS=${RUNS:-3}
TSHARK_RUNS=${TSHARK_RUNS:-3}
DIR=${SQOS_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$DIR"
CAP="$DIR/large-$SIZE.pcap"

cargo build --release --quiet --bin sqos --example parse_ceiling
BIN=./target/release/sqos
CEILING=./target/release/examples/parse_ceiling
PGO_BIN=""
if [ -z "${SKIP_PGO:-}" ]; then
  PGO_BIN=$(benches/pgo-build.sh | tail -n 1) || {
    echo "no PGO rows: benches/pgo-build.sh failed (its messages are above)"
    PGO_BIN=""
  }
fi

# Runs a command (stdout to /dev/null); prints "wall cpu max_rss_kib". Times come from bash's
# `time` (milliseconds: GNU time's 10 ms steps are a sixth of a run here), the peak RSS from GNU
# time, whose own few hundred microseconds every row carries alike.
measure_once() {
  local log times
  log=$(mktemp)
  times=$({
    TIMEFORMAT='%3R %3U %3S'
    time /usr/bin/time -f '%M' -o "$log" "$@" >/dev/null 2>"$DIR/stderr.log" || true
  } 2>&1)
  # The last line: before it GNU time may say that the command failed.
  tail -n 1 "$log" | awk -v t="$times" '{ split(t, v, " "); printf "%s %.3f %s\n", v[1], v[2] + v[3], $1 }'
  rm -f "$log"
}
# The quickest of $RUNS runs (by wall time).
measure() {
  local best="" line
  for _ in $(seq "$RUNS"); do
    line=$(measure_once "$@")
    if [ -z "$best" ] || awk -v a="${line%% *}" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then
      best=$line
    fi
  done
  echo "$best"
}

# The file in the page cache as a read from disk leaves it: dropped from the cache, then read
# once (readahead brings it back in large pieces). How the cache holds a file changes what
# mapping it costs: the same file as written in 4 KiB writes took sqos 1.5-1.9x as long
# (docs/performance.md), and `cat` 1.2x.
from_disk() {
  dd if="$1" iflag=nocache count=0 status=none 2>/dev/null || true
  cat "$1" >/dev/null
}
# CACHE=written: the file in the page cache as a capture tool leaves it instead, written anew in
# 4 KiB writes (the same bytes, a new file) just before it is timed.
cache_state() {
  if [ "${CACHE:-disk}" = written ]; then
    dd if="$1" of="$1.written" bs=4k status=none && mv "$1.written" "$1"
  else
    from_disk "$1"
  fi
}

if [ ! -s "$CAP" ]; then
  traffic large "$SIZE"
  "$BIN" synth "${SYNTH[@]}" -o "$CAP" >/dev/null 2>&1
fi
bytes=$(stat -c %s "$CAP")
cache_state "$CAP"

echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1), $(free -g | awk '/^Mem:/ { print $2 }') GiB"
echo "load before: $(uptime | sed 's/.*load average/load average/')"
echo "builds: $("$BIN" --version)${PGO_BIN:+; $("$PGO_BIN" --version)}"
echo "capture: $CAP, $bytes bytes ($("$BIN" dissect --quiet "$CAP" | wc -l) SQOS messages)"

# Rows of the table being measured: a name and "wall cpu rss" each. The first row is cat; a row
# whose name starts with "tshark" is the tshark the others are compared with.
names=()
results=()
row() {
  local name=$1
  shift
  names+=("$name")
  results+=("$(measure "$@")")
}
# The PGO build's rows (when it was built): `sqos dissect` on one thread and on all cores, with
# the options and files given.
pgo_rows() {
  [ -n "$PGO_BIN" ] || return 0
  local opt=${1:-}
  [[ $opt == -* ]] || opt=""
  row "PGO build -t1 $opt" "$PGO_BIN" dissect --quiet --threads 1 "$@"
  row "PGO build -t$CORES $opt" "$PGO_BIN" dissect --quiet --threads "$CORES" "$@"
}
# `cat` once more, after sqos's rows: on a VM whose pace changes within minutes (twice as slow
# for a minute or so, docs/performance.md), a table whose two `cat` rows disagree does not
# compare its rows with each other; `table` says so.
cat_again() {
  row "cat again" cat "$@"
}
# Prints the rows measured on a capture of $1 bytes as a table, then forgets them.
table() {
  local bytes=$1 cat_s cat_c tshark_s="" tshark_c="" again_s="" wall cpu rss i
  read -r cat_s cat_c _ <<<"${results[0]}"
  for i in "${!names[@]}"; do
    [[ ${names[$i]} == tshark* ]] && read -r tshark_s tshark_c _ <<<"${results[$i]}"
    [[ ${names[$i]} == "cat again" ]] && read -r again_s _ <<<"${results[$i]}"
  done
  printf '%-22s %7s %7s %7s %8s %9s %13s %13s\n' "" "wall s" "CPU s" "MB/s" "MB/CPU-s" "peak RSS" \
    "vs cat" "vs tshark"
  printf '%-22s %7s %7s %7s %8s %9s %13s %13s\n' "" "" "" "" "" "" "wall / CPU" "wall / CPU"
  for i in "${!names[@]}"; do
    read -r wall cpu rss <<<"${results[$i]}"
    awk -v n="${names[$i]}" -v w="$wall" -v c="$cpu" -v r="$rss" -v b="$bytes" \
      -v cw="$cat_s" -v cc="$cat_c" -v tw="$tshark_s" -v tc="$tshark_c" 'BEGIN {
        if (w <= 0) w = 0.0005
        if (c <= 0) c = 0.0005
        if (cc <= 0) cc = 0.0005
        ts = tw == "" ? "-" : sprintf("%.0fx / %.0fx", tw / w, tc / c)
        printf "%-22s %7.3f %7.3f %7.0f %8.0f %6.1f MB %6.2fx/%.2fx %13s\n", n, w, c, b / 1e6 / w, b / 1e6 / c,
          r / 1024, cw / w, cc / c, ts
      }'
  done
  if [ -n "$again_s" ]; then
    awk -v a="$cat_s" -v b="$again_s" 'BEGIN {
      d = a > 0 ? (b - a) / a * 100 : 0
      printf "pace: cat %.3f s before the sqos rows, %.3f s after (%+.0f %%)", a, b, d
      # A fifth, and 2 ms at least: a 2 ms cat timed in milliseconds moves by half.
      changed = (d > 20 || d < -20) && (b - a > 0.0015 || a - b > 0.0015)
      print changed ? ": the machine changed pace, the rows do not compare" : ""
    }'
  fi
  names=()
  results=()
}

# The record walk of $1 cut into a part per core, where there are several cores.
walk_parts() {
  [ "$CORES" -gt 1 ] && row "record walk -t$CORES" "$CEILING" --walk --threads "$CORES" "$1"
  return 0
}

row "cat" cat "$CAP"
row "parse ceiling" "$CEILING" "$CAP"
row "record walk" "$CEILING" --walk "$CAP"
walk_parts "$CAP"
row "sqos dissect -t1" "$BIN" dissect --quiet --threads 1 "$CAP"
row "sqos dissect -t$CORES" "$BIN" dissect --quiet --threads "$CORES" "$CAP"
row "sqos dissect -T jsonl" "$BIN" dissect --quiet -T jsonl --threads 1 "$CAP"
row "sqos flows" "$BIN" flows --quiet --threads "$CORES" "$CAP"
pgo_rows "$CAP"
cat_again "$CAP"
if [ -z "${SKIP_TSHARK:-}" ] && command -v tshark >/dev/null; then
  RUNS=$TSHARK_RUNS row "tshark -Y sqos" tshark -n -r "$CAP" -o tcp.reassemble_out_of_order:TRUE \
    -Y 'smb2.ioctl.function == 0x00090350'
fi
echo "load after: $(uptime | sed 's/.*load average/load average/')"
table "$bytes"

# Other traffic, as a table of its own: $1 what it is, $2 its file, $3 the bytes its MB/s are
# of (empty: the file's size); the arrays SYNTH (synth's options that make it: `traffic`), SQOS
# and TSHARK (the options that read it) say the rest.
variant() {
  local what=$1 file=$2 of_bytes=$3
  if [ ! -s "$file" ]; then
    "$BIN" synth "${SYNTH[@]}" -o "$file" >/dev/null 2>&1
  fi
  [ -n "$of_bytes" ] || of_bytes=$(stat -c %s "$file")
  cache_state "$file"
  echo
  echo "$what: $file, $(stat -c %s "$file") bytes ($("$BIN" dissect --quiet "${SQOS[@]}" "$file" | wc -l) SQOS messages)"
  row "cat" cat "$file"
  row "record walk" "$CEILING" --walk "$file"
  walk_parts "$file"
  row "sqos dissect -t1 ${SQOS[*]:0:1}" "$BIN" dissect --quiet --threads 1 "${SQOS[@]}" "$file"
  row "sqos dissect -t$CORES ${SQOS[*]:0:1}" "$BIN" dissect --quiet --threads "$CORES" "${SQOS[@]}" "$file"
  row "sqos dissect -T jsonl ${SQOS[*]:0:1}" "$BIN" dissect --quiet -T jsonl --threads 1 "${SQOS[@]}" "$file"
  row "sqos flows ${SQOS[*]:0:1}" "$BIN" flows --quiet --threads "$CORES" "${SQOS[@]}" "$file"
  pgo_rows "${SQOS[@]}" "$file"
  cat_again "$file"
  if [ -z "${SKIP_TSHARK:-}" ] && command -v tshark >/dev/null; then
    RUNS=$TSHARK_RUNS row "tshark -Y sqos" tshark -n -r "$file" -o tcp.reassemble_out_of_order:TRUE \
      "${TSHARK[@]}" -Y 'smb2.ioctl.function == 0x00090350'
  fi
  echo "load after: $(uptime | sed 's/.*load average/load average/')"
  table "$of_bytes"
}

# The traffic of kind $3 (`traffic`), every session sealed with AES-128-GCM (SMB 3.1.1) and
# decrypted with --keys by sqos and tshark alike: $1 what it is, $2 the name of its capture and
# key file.
encrypted_variant() {
  local what=$1 name=$2 kind=$3
  KEYS="$DIR/$name-aes128gcm.keys"
  ENC="$DIR/$name-aes128gcm.pcap"
  [ -s "$KEYS" ] || rm -f "$ENC"
  traffic "$kind" "$SIZE" "$KEYS"
  SQOS=(--keys "$KEYS")
  TSHARK=()
  if [ -s "$KEYS" ] || "$BIN" synth "${SYNTH[@]}" -o "$ENC" >/dev/null 2>&1; then
    while read -r l; do [[ $l == \#* ]] || TSHARK+=(-o "uat:smb2_seskey_list:$l"); done <"$KEYS"
  fi
  variant "$what" "$ENC" ""
}

# Encrypted SMB 3.1.1 session (AES-128-GCM), decrypted with --keys: SQOS and every other small
# message authenticated whole, READ/WRITE read by header through the keystream.
if [ -z "${SKIP_ENCRYPTED:-}" ]; then
  encrypted_variant "encrypted capture" "large-$SIZE" large
fi

# Compressed (chained LZ77): every message decompressed as far as its header and fixed body,
# bulk READ/WRITE data skipped. Synthetic payloads compress to almost nothing, so MB/s are of
# the same traffic uncompressed (the plain capture's size).
if [ -z "${SKIP_COMPRESSED:-}" ]; then
  traffic large-lz77 "$SIZE"
  SQOS=()
  TSHARK=()
  variant "compressed capture (MB/s of the uncompressed traffic)" "$DIR/large-$SIZE-lz77.pcap" "$bytes"
fi

# Many connections (benches/traffic.sh): SIZE sets the duration.
if [ -z "${SKIP_MANY:-}" ]; then
  traffic many "$SIZE"
  SQOS=()
  TSHARK=()
  variant "many connections (16, 8 sessions on 2 channels each)" "$DIR/many-$SIZE.pcap" ""
fi

# Small I/Os on many connections (benches/traffic.sh). Few frames follow the last one's
# connection here, and a message every ~6 frames: the per-message and per-connection work, not
# the bulk path, sets the pace.
if [ -z "${SKIP_SMALL:-}" ]; then
  traffic small "$SIZE"
  SQOS=()
  TSHARK=()
  variant "small I/Os (4-64 KiB) on 16 connections" "$DIR/small-$SIZE.pcap" ""
fi
# Small I/Os encrypted: the same hosts, every session sealed with AES-128-GCM (SMB 3.1.1), as
# Hyper-V hosts that require encryption talk to a Scale-Out File Server. Every READ request and
# WRITE response, and every other small message, is authenticated whole; the data messages are
# read by header: the AEAD of the small messages sets the pace.
if [ -z "${SKIP_SMALL_ENCRYPTED:-}" ]; then
  encrypted_variant "small I/Os encrypted (AES-128-GCM) on 16 connections" "small-$SIZE" small
fi

# The table of the small-I/O capture held another way (files $2..., $1 bytes in all): no tshark
# row (tshark reads one file, and one pcapng file as it reads the pcap one).
other_form() {
  local total=$1
  shift
  row "cat" cat "$@"
  row "sqos dissect -t1" "$BIN" dissect --quiet --threads 1 "$@"
  row "sqos dissect -t$CORES" "$BIN" dissect --quiet --threads "$CORES" "$@"
  row "sqos flows" "$BIN" flows --quiet --threads "$CORES" "$@"
  pgo_rows "$@"
  cat_again "$@"
  echo "load after: $(uptime | sed 's/.*load average/load average/')"
  table "$total"
}

# Rotated: the small-I/O capture cut into $1 files (`editcap -c`, as `tcpdump -C` leaves a
# ring), read as one timeline by a glob: each file opened in its turn and read as one file is.
rotated() {
  local n=$1 rot="$DIR/rotated-$SIZE" frames parts total f
  # (The 6 files keep the directory name they had before the 100.)
  [ "$n" = 6 ] || rot="$DIR/rotated$n-$SIZE"
  if [ ! -s "$rot/done" ]; then
    rm -rf "$rot" && mkdir -p "$rot"
    frames=$("$BIN" stats --quiet "$DIR/small-$SIZE.pcap" | awk '/^frames/ { print $2 }')
    editcap -F pcap -c $((frames / n + 1)) "$DIR/small-$SIZE.pcap" "$rot/part.pcap"
    echo yes >"$rot/done"
  fi
  parts=("$rot"/part*.pcap)
  for f in "${parts[@]}"; do cache_state "$f"; done
  total=$(cat "${parts[@]}" | wc -c)
  echo
  echo "rotated: the small-I/O capture in ${#parts[@]} files, $total bytes"
  other_form "$total" "${parts[@]}"
}
if [ -z "${SKIP_ROTATED:-}" ] && [ -z "${SKIP_SMALL:-}" ] && command -v editcap >/dev/null; then
  rotated 6
  rotated 100
fi

# pcapng: the small-I/O capture as dumpcap and Wireshark write it (`editcap -F pcapng`): blocks
# instead of records, read and indexed ahead the same way.
pcapng() {
  local ng="$DIR/small-$SIZE.pcapng" total
  if [ ! -s "$ng" ]; then
    editcap -F pcapng "$DIR/small-$SIZE.pcap" "$ng.part" && mv "$ng.part" "$ng"
  fi
  cache_state "$ng"
  total=$(stat -c %s "$ng")
  echo
  echo "pcapng: the small-I/O capture as pcapng, $total bytes"
  other_form "$total" "$ng"
}
if [ -z "${SKIP_PCAPNG:-}" ] && [ -z "${SKIP_SMALL:-}" ] && command -v editcap >/dev/null; then
  pcapng
fi
[ -n "${SQOS_BENCH_DIR:-}" ] || rm -rf "$DIR"
