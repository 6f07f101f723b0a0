#!/usr/bin/env bash
# Throughput and peak memory of `sqos dissect` / `sqos stats` (and tshark, if installed) on a
# large generated capture of SMB2 READ/WRITE traffic (64 KiB payloads in 1448-byte segments,
# an SQOS IOCTL pair every ~1,000 messages), plus the generator's own speed.
#
#   benches/dissect.sh [SIZE]        SIZE defaults to 1GiB (e.g. 256MiB for a quick run)
#   SQOS_BENCH_DIR=/path             where the capture is written (default: a temp dir)
#   SKIP_TSHARK=1                    do not time tshark
#   SKIP_ENCRYPTED=1                 do not time the encrypted capture (same traffic, AES-128-GCM)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-1GiB}
DIR=${SQOS_BENCH_DIR:-$(mktemp -d)}
CAP="$DIR/large.pcap"

cargo build --release --quiet
BIN=./target/release/sqos

# Runs a command under GNU time; prints "seconds max_rss_kib".
measure() {
  local log
  log=$(mktemp)
  /usr/bin/time -f '%e %M' -o "$log" "$@" >/dev/null 2>"$DIR/stderr.log" || true
  cat "$log"
  rm -f "$log"
}

mbps() { awk -v b="$1" -v s="$2" 'BEGIN { if (s <= 0) s = 0.001; printf "%.0f", b / 1e6 / s }'; }

read -r gen_s gen_rss < <(measure "$BIN" synth --scenario large --size "$SIZE" --seed 1 -o "$CAP")
bytes=$(stat -c %s "$CAP")
echo "capture: $CAP, $bytes bytes"
printf '%-28s %10s %10s %12s\n' "what" "seconds" "MB/s" "peak RSS MB"
printf '%-28s %10s %10s %12s\n' "sqos synth --scenario large" "$gen_s" "$(mbps "$bytes" "$gen_s")" "$((gen_rss / 1024))"

read -r d_s d_rss < <(measure "$BIN" dissect --quiet "$CAP")
printf '%-28s %10s %10s %12s\n' "sqos dissect" "$d_s" "$(mbps "$bytes" "$d_s")" "$((d_rss / 1024))"
read -r st_s st_rss < <(measure "$BIN" stats --quiet "$CAP")
printf '%-28s %10s %10s %12s\n' "sqos stats" "$st_s" "$(mbps "$bytes" "$st_s")" "$((st_rss / 1024))"
"$BIN" dissect --quiet "$CAP" | wc -l | awk '{print "sqos dissect: " $1 " SQOS messages"}'

if [ -z "${SKIP_TSHARK:-}" ] && command -v tshark >/dev/null; then
  read -r t_s t_rss < <(measure tshark -n -r "$CAP" -o tcp.reassemble_out_of_order:TRUE -Y 'smb2.ioctl.function == 0x00090350')
  printf '%-28s %10s %10s %12s\n' "tshark -Y sqos" "$t_s" "$(mbps "$bytes" "$t_s")" "$((t_rss / 1024))"
  awk -v a="$t_s" -v b="$d_s" 'BEGIN { if (b <= 0) b = 0.001; printf "sqos dissect is %.1fx tshark\n", a / b }'
fi
# The same traffic in an encrypted SMB 3.1.1 session (AES-128-GCM), decrypted with --keys:
# SQOS and every other small message authenticated whole, READ/WRITE read by header through
# the keystream.
if [ -z "${SKIP_ENCRYPTED:-}" ]; then
  ENC="$DIR/large-aes128gcm.pcap"
  KEYS="$DIR/large-aes128gcm.keys"
  read -r eg_s _ < <(measure "$BIN" synth --scenario large --size "$SIZE" --seed 1 --encrypt aes-128-gcm --keys-out "$KEYS" -o "$ENC")
  ebytes=$(stat -c %s "$ENC")
  echo "encrypted capture: $ENC, $ebytes bytes (generated in ${eg_s}s)"
  read -r c_s c_rss < <(measure cat "$ENC")
  printf '%-28s %10s %10s %12s
' "cat (encrypted)" "$c_s" "$(mbps "$ebytes" "$c_s")" "$((c_rss / 1024))"
  read -r ed_s ed_rss < <(measure "$BIN" dissect --quiet --keys "$KEYS" "$ENC")
  printf '%-28s %10s %10s %12s
' "sqos dissect --keys" "$ed_s" "$(mbps "$ebytes" "$ed_s")" "$((ed_rss / 1024))"
  read -r es_s es_rss < <(measure "$BIN" stats --quiet --keys "$KEYS" "$ENC")
  printf '%-28s %10s %10s %12s
' "sqos stats --keys" "$es_s" "$(mbps "$ebytes" "$es_s")" "$((es_rss / 1024))"
  "$BIN" dissect --quiet --keys "$KEYS" "$ENC" | wc -l | awk '{print "sqos dissect --keys: " $1 " SQOS messages"}'
  if [ -z "${SKIP_TSHARK:-}" ] && command -v tshark >/dev/null; then
    kopts=()
    while read -r l; do [[ $l == \#* ]] || kopts+=(-o "uat:smb2_seskey_list:$l"); done <"$KEYS"
    read -r et_s et_rss < <(measure tshark -n -r "$ENC" -o tcp.reassemble_out_of_order:TRUE "${kopts[@]}" -Y 'smb2.ioctl.function == 0x00090350')
    printf '%-28s %10s %10s %12s
' "tshark -Y sqos (keys)" "$et_s" "$(mbps "$ebytes" "$et_s")" "$((et_rss / 1024))"
  fi
fi
[ -n "${SQOS_BENCH_DIR:-}" ] || rm -rf "$DIR"
