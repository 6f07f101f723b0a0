# shellcheck shell=bash
# The bench's traffic, stated once: benches/dissect.sh times sqos on it, benches/pgo-build.sh
# trains the optimised build on it. Sourced, not run.
#
#   traffic KIND SIZE [KEYS]   sets the array SYNTH to the `sqos synth` options that write about
#                              SIZE bytes (e.g. 512MiB) of KIND; with KEYS, every session sealed
#                              with AES-128-GCM (SMB 3.1.1) and its keys written to that file.
#   TRAFFIC_SEED=N             synth's seed (default 1, the bench's)
# Kinds:
#   large       SMB2 READ/WRITE of 64 KiB payloads in 1448-byte segments on one connection, an
#               SQOS IOCTL pair every ~1,000 messages
#   large-lz77  the same, every message compressed (chained LZ77) where that makes it smaller
#   many        8 hosts of 4 VMs, each host's session on 2 channels: 16 connections, I/Os up to
#               1 MiB (`steady` writes ~24 MB of capture per simulated second with these)
#   small       the same hosts with `steady`'s own I/O sizes (4-64 KiB, as VM disks mostly do):
#               a message every ~6 frames, ~4.3 MB of capture per simulated second
traffic() {
  local kind=$1 size=$2 keys=${3:-} seed=${TRAFFIC_SEED:-1} bytes
  bytes=$(numfmt --from=auto "${size%B}")
  case $kind in
    large) SYNTH=(--scenario large --size "$size" --seed "$seed") ;;
    large-lz77) SYNTH=(--scenario large --size "$size" --seed "$seed" --compress lz77 --chained) ;;
    many)
      SYNTH=(--scenario steady --hosts 8 --vms 4 --channels 2 --big-io
        --duration $((bytes / 24000000 + 1)) --seed "$seed")
      ;;
    small)
      SYNTH=(--scenario steady --hosts 8 --vms 4 --channels 2
        --duration $((bytes / 4300000 + 1)) --seed "$seed")
      ;;
    *)
      echo "benches/traffic.sh: no traffic of kind '$kind'" >&2
      return 1
      ;;
  esac
  if [ -n "$keys" ]; then
    SYNTH+=(--encrypt aes-128-gcm --keys-out "$keys")
  fi
}
