#!/usr/bin/env bash
# Make real captures of FSCTL_STORAGE_QOS_CONTROL (MS-SQOS) sent to a real SMB3 stack:
# Samba's smbd on 127.0.0.1, driven by qos_client.py (smbprotocol), recorded by tcpdump on lo.
#
# Runs as root. Installs what it needs (Debian samba, tcpdump, tshark; smbprotocol from PyPI
# into captures/real/.venv), starts a private smbd, makes one capture per
# (SMB dialect x security) combination, writes the keys of the encrypted ones to
# smb2_seskey_list (Wireshark's "SMB2 Secret Keys" file, which `sqos --keys` reads) and checks
# with tshark that they decrypt. Idempotent: every run rewrites the captures and keys.
#
# Usage: sudo captures/real/make.sh                 every capture
#        sudo ONLY='smb311-encrypted-*' captures/real/make.sh   only those whose name matches
#        (the others and their keys stay as they are)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SMBPROTOCOL_VERSION=1.17.0
SMB_USER=sqosuser
SMB_PASS='Sqos-Test-1'

if [[ $(id -u) -ne 0 ]]; then
    echo "make.sh: must run as root (apt, smbd, tcpdump)" >&2
    exit 1
fi

# ---- 1. install -------------------------------------------------------------
need_pkgs=()
command -v smbd >/dev/null || need_pkgs+=(samba)
command -v tcpdump >/dev/null || need_pkgs+=(tcpdump)
command -v tshark >/dev/null || need_pkgs+=(tshark)
command -v smbtorture >/dev/null || need_pkgs+=(samba-testsuite)
if ((${#need_pkgs[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"
fi
PY="$HERE/.venv/bin/python"
if ! "$PY" -c "import smbprotocol, importlib.metadata as m; assert m.version('smbprotocol') == '$SMBPROTOCOL_VERSION'" 2>/dev/null; then
    python3 -m venv "$HERE/.venv"
    "$HERE/.venv/bin/pip" install -q "smbprotocol==$SMBPROTOCOL_VERSION"
fi

# ---- 2. private smbd on 127.0.0.1 ---------------------------------------------
port_free() { ! ss -Hltn "sport = :$1" | grep -q .; }
PORT=445
while ! port_free "$PORT"; do PORT=$((PORT == 445 ? 10445 : PORT + 1)); done

WORK="$(mktemp -d /tmp/sqos-realcap.XXXXXX)"
chmod 755 "$WORK" # the share user must traverse it
SMBD_PID=""
TCPDUMP_PID=""
cleanup() {
    local rc=$?
    set +e
    for pid in $TCPDUMP_PID $SMBD_PID; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT

id "$SMB_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$SMB_USER"
mkdir -p "$WORK"/{private,lock,state,cache,pid,ncalrpc,log} "$WORK/share/vm01" "$WORK/share/vm02"
# Dummy virtual disks: small files with the VHDX signature, enough for a CREATE to succeed.
for f in vm01/disk0.vhdx vm01/disk1.vhdx vm02/disk0.vhdx; do
    printf 'vhdxfile' >"$WORK/share/$f"
    truncate -s 64K "$WORK/share/$f"
done
chown -R "$SMB_USER" "$WORK/share"

CONF="$WORK/smb.conf"
cat >"$CONF" <<EOF
[global]
    server role = standalone server
    workgroup = SQOSTEST
    netbios name = SOFS
    interfaces = lo
    bind interfaces only = yes
    smb ports = $PORT
    disable netbios = yes
    server min protocol = SMB2_10
    server max protocol = SMB3_11
    # Signing and encryption are chosen by the client per run (signing "auto", encryption
    # "if_required" are Samba's defaults; written out here so the capture conditions are explicit).
    server signing = auto
    server smb encrypt = if_required
    # One session over several TCP connections (Samba's default on Linux since 4.15).
    server multi channel support = yes
    passdb backend = tdbsam:$WORK/private/passdb.tdb
    private dir = $WORK/private
    lock directory = $WORK/lock
    state directory = $WORK/state
    cache directory = $WORK/cache
    pid directory = $WORK/pid
    ncalrpc dir = $WORK/ncalrpc
    log file = $WORK/log/smbd.log
    log level = 1
    load printers = no
    printing = bsd
    printcap name = /dev/null
    disable spoolss = yes
    map to guest = never

[vms]
    path = $WORK/share
    read only = no
    valid users = $SMB_USER
EOF

printf '%s\n%s\n' "$SMB_PASS" "$SMB_PASS" | smbpasswd -c "$CONF" -s -a "$SMB_USER" >/dev/null
# setsid: smbd signals its whole process group when it stops; keep that group its own.
setsid smbd --foreground --no-process-group -s "$CONF" </dev/null >"$WORK/log/smbd.out" 2>&1 &
SMBD_PID=$!
for _ in $(seq 50); do
    port_free "$PORT" || break
    sleep 0.2
done
if port_free "$PORT"; then
    echo "smbd did not start:" >&2
    cat "$WORK/log/smbd.out" "$WORK/log/smbd.log" >&2 || true
    exit 1
fi

# ---- 3./4. one capture per combination -----------------------------------------
# capture NAME CLIENT-ARGS...: one run of qos_client.py recorded into NAME.
capture() {
    local name=$1
    shift
    record "$name" "$PY" "$HERE/qos_client.py" --port "$PORT" --user "$SMB_USER" \
        --password "$SMB_PASS" --keys-out "$KEYS" "$@"
}

# record NAME COMMAND...: COMMAND's traffic recorded into NAME.
record() {
    local name=$1
    shift
    # shellcheck disable=SC2053 # ONLY is a glob on purpose
    [[ $name == ${ONLY:-*} ]] || return 0
    local pcap="$HERE/$name"
    # This capture's key line follows a comment naming it; a new run replaces both.
    awk -v n="# $name" '$0 == n { skip = 2 } skip > 0 { skip--; next } { print }' "$KEYS" >"$KEYS.new"
    mv "$KEYS.new" "$KEYS"
    [[ " $* " == *" encrypted "* ]] && printf '# %s\n' "$name" >>"$KEYS"
    tcpdump -i lo --immediate-mode -U -B 65536 -s 0 -w "$pcap" "tcp port $PORT" 2>"$WORK/log/tcpdump.err" &
    TCPDUMP_PID=$!
    # tcpdump says "listening on" once the capture is open.
    for _ in $(seq 50); do
        grep -qs "listening on" "$WORK/log/tcpdump.err" && break
        sleep 0.1
    done
    echo "== $name"
    "$@"
    # Let the last FIN/ACK reach the capture before stopping it.
    sleep 1
    kill -INT "$TCPDUMP_PID"
    wait "$TCPDUMP_PID" || true
    TCPDUMP_PID=""
    grep -E "packets (captured|dropped)" "$WORK/log/tcpdump.err" | paste -sd' ' || true
    chmod 644 "$pcap"
}

KEYS="$HERE/smb2_seskey_list"
# The header line Wireshark's UAT writer puts first (Wireshark reads `#` lines as comments).
if [[ -z ${ONLY:-} || ! -f $KEYS ]]; then
    printf '# This file is automatically generated, DO NOT MODIFY.\n' >"$KEYS"
    rm -f "$HERE"/*.pcap
fi
for dialect in 210 302 311; do
    for sec in plain signed encrypted; do
        if [[ $dialect == 210 && $sec == encrypted ]]; then
            echo "skip smb210-encrypted: SMB 2.1 has no encryption"
            continue
        fi
        name="smb$dialect-$sec.pcap"
        capture "$name" --dialect "$dialect" --security "$sec"
    done
done
# SMB 3.1.1 sessions with the other ciphers (3.0.2 has AES-128-CCM only; smb311-encrypted.pcap
# above is AES-128-GCM, what Samba picks first).
for cipher in aes-128-ccm aes-256-gcm aes-256-ccm; do
    capture "smb311-encrypted-$cipher.pcap" --dialect 311 --security encrypted --cipher "$cipher"
done
# A multichannel session: smbprotocol cannot bind a second channel, Samba's own test client
# can: smbtorture's smb2.multichannel.generic.num_channels opens one session and binds further
# TCP connections to it (SESSION_SETUP with SMB2_SESSION_FLAG_BINDING), signed, SMB 3.1.1.
record "smb311-multichannel.pcap" smbtorture "//127.0.0.1/vms" -p "$PORT" \
    -U "$SMB_USER%$SMB_PASS" --option=clientmaxprotocol=SMB3_11 \
    smb2.multichannel.generic.num_channels

# ---- verify: tshark decrypts the encrypted captures and sees the SQOS IOCTLs ---------
decode=()
[[ $PORT != 445 ]] && decode=(-d "tcp.port==$PORT,nbss")
# Every line of the key file as a tshark option (each -o uat: adds one row).
keyopts=()
while read -r line; do
    [[ -z $line || $line == \#* ]] && continue
    keyopts+=(-o "uat:smb2_seskey_list:$line")
done <"$KEYS"
for pcap in "$HERE"/*-encrypted*.pcap; do
    n=$(tshark -r "$pcap" "${decode[@]}" "${keyopts[@]}" \
        -Y 'smb2.cmd == 11 && smb2.ioctl.function == 0x00090350 && smb2.flags.response == 0' | wc -l)
    echo "tshark decrypts $(basename "$pcap"): $n FSCTL_STORAGE_QOS_CONTROL requests"
    if [[ $n -ne 6 ]]; then
        echo "make.sh: expected 6 decrypted SQOS IOCTL requests in $pcap" >&2
        exit 1
    fi
done

echo "versions: samba $(smbd --version) | smbprotocol $("$PY" -c 'import importlib.metadata as m; print(m.version("smbprotocol"))') | $(tcpdump --version 2>&1 | head -1) | $(tshark --version | head -1)"
ls -l "$HERE"/*.pcap
