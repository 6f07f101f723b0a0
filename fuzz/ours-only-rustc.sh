#!/bin/bash
# RUSTC_WRAPPER for the ASan campaign (fuzz/campaign.sh): AddressSanitizer in every crate, but
# libFuzzer's coverage instrumentation (sancov) only in sqos and the fuzz targets. Guidance and
# libFuzzer's per-run bookkeeping then follow our code, not the regex compiler's or the AES
# crates' (fuzzed in their own projects): `smb3` ran 3.5× and `filter` 2–3× more executions per
# CPU second this way, and a crash or ASan report anywhere still stops the run.
rustc=$1
shift
name=""
prev=""
for a in "$@"; do
  [ "$prev" = "--crate-name" ] && name=$a
  prev=$a
done
here=$(dirname "$0")
if [ "$name" = sqos ] || [ -e "$here/fuzz_targets/$name.rs" ]; then
  exec "$rustc" "$@"
fi
args=()
for a in "$@"; do
  case "$a" in
  -Cpasses=sancov-module | -Cllvm-args=-sanitizer-coverage-*) ;;
  *) args+=("$a") ;;
  esac
done
exec "$rustc" "${args[@]}"
