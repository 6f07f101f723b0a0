#!/usr/bin/env python3
"""Drive a real SMB2/3 server with MS-SQOS FSCTL_STORAGE_QOS_CONTROL requests.

One run = one TCP connection: NEGOTIATE (one forced dialect), SESSION_SETUP (NTLM),
TREE_CONNECT, CREATE of a .vhdx, then the SQOS IOCTLs of the spec's sections 4.2/4.3
in both SQOS dialects (1.0 = 0x0100, 1.1 = 0x0101), CLOSE, TREE_DISCONNECT, LOGOFF.

The STORAGE_QOS_CONTROL_REQUEST bytes are built here by hand, field by field, from the
structure in MS-SQOS 2.2.2.2 (112-byte fixed part for 1.0, 128 for 1.1, names in UTF-16LE
right after the fixed part), because no SMB client library knows the structure.

A server without SQOS (Samba's smbd) rejects each IOCTL with an NT status; that is the
expected outcome and the run goes on. For encrypted runs the session's keys are appended
to a key file in Wireshark's "SMB2 Secret Keys" format (smb2_seskey_list), which sqos
(--keys) and Wireshark/tshark read.
"""

import argparse
import struct
import sys
import uuid

from smbprotocol.connection import Ciphers, Connection, Dialects
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.ioctl import IOCTLFlags, SMB2IOCTLRequest, SMB2IOCTLResponse
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FileAttributes,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
    ShareAccess,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

FSCTL_STORAGE_QOS_CONTROL = 0x00090350

# Options bits, MS-SQOS 2.2.2.2.
SET_LOGICAL_FLOW_ID = 0x01
SET_POLICY = 0x02
PROBE_POLICY = 0x04
GET_STATUS = 0x08
UPDATE_COUNTERS = 0x10

# Values of the spec's examples (sections 4.2 and 4.3). uuid.UUID(...).bytes_le gives the
# on-the-wire GUID layout (E4 32 3A B1 AD E2 B2 5D A4 F8 ...).
LOGICAL_FLOW_ID = uuid.UUID("b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e")
POLICY_ID = uuid.UUID("04b4f24e-b3e9-4594-adaa-e327528de54b")
INITIATOR_ID = uuid.UUID("1b9e4dc6-f8c0-419f-8785-8065bcff7284")
INITIATOR_NAME = "TEST-VM"
INITIATOR_NODE_NAME = "HYPERV-TEST.contoso.com"

FIXED_SIZE = {0x0100: 112, 0x0101: 128}

# --cipher: the one cipher the client offers (3.1.1); 3.0.2 always encrypts with AES-128-CCM.
CIPHERS = {
    "aes-128-ccm": Ciphers.AES_128_CCM,
    "aes-128-gcm": Ciphers.AES_128_GCM,
    "aes-256-ccm": Ciphers.AES_256_CCM,
    "aes-256-gcm": Ciphers.AES_256_GCM,
}

DIALECTS = {
    "210": Dialects.SMB_2_1_0,
    "302": Dialects.SMB_3_0_2,
    "311": Dialects.SMB_3_1_1,
}


def qos_request(
    version,
    options,
    policy_id=None,
    initiator_id=None,
    initiator_name="",
    node_name="",
    counters=(0, 0, 0, 0),
    bandwidth_limit=0,
    kilobyte_count=0,
):
    """Bytes of one STORAGE_QOS_CONTROL_REQUEST (MS-SQOS 2.2.2.2)."""
    fixed = FIXED_SIZE[version]
    name = initiator_name.encode("utf-16-le")
    node = node_name.encode("utf-16-le")
    # Offsets are from the start of the structure; an absent name has offset 0 (as in 4.3).
    name_off = fixed if name else 0
    node_off = fixed + len(name) if node else 0
    zero_guid = b"\x00" * 16
    body = struct.pack(
        "<HHI16s16s16sQQHHHHQQQQ",
        version,  # ProtocolVersion @0
        0,  # Reserved @2
        options,  # Options @4
        LOGICAL_FLOW_ID.bytes_le,  # LogicalFlowID @8
        policy_id.bytes_le if policy_id else zero_guid,  # PolicyID @24
        initiator_id.bytes_le if initiator_id else zero_guid,  # InitiatorID @40
        0,  # Limit @56
        0,  # Reservation @64
        name_off,  # InitiatorNameOffset @72
        len(name),  # InitiatorNameLength @74
        node_off,  # InitiatorNodeNameOffset @76
        len(node),  # InitiatorNodeNameLength @78
        *counters,  # IoCount @80, NormalizedIoCount @88, Latency @96, LowerLatency @104
    )
    assert len(body) == 112
    if version == 0x0101:
        body += struct.pack("<QQ", bandwidth_limit, kilobyte_count)  # @112, @120
    assert len(body) == fixed
    return body + name + node


def sqos_sequence(version):
    """The requests a Windows client sends for one open: 4.2 (associate, set policy), 4.3 (status)."""
    return [
        ("SET_LOGICAL_FLOW_ID", qos_request(version, SET_LOGICAL_FLOW_ID)),
        (
            "SET_POLICY",
            qos_request(
                version,
                SET_POLICY,
                POLICY_ID,
                INITIATOR_ID,
                INITIATOR_NAME,
                INITIATOR_NODE_NAME,
            ),
        ),
        (
            "GET_STATUS|UPDATE_COUNTERS|PROBE_POLICY",
            qos_request(
                version,
                GET_STATUS | UPDATE_COUNTERS | PROBE_POLICY,
                POLICY_ID,
                INITIATOR_ID,
                counters=(399, 399, 38223584, 38223584),
            ),
        ),
    ]


def send_qos(conn, session, tree, handle, payload, max_output):
    req = SMB2IOCTLRequest()
    # smbprotocol's CtlCode enum does not list FSCTL_STORAGE_QOS_CONTROL.
    req["ctl_code"].enum_strict = False
    req["ctl_code"] = FSCTL_STORAGE_QOS_CONTROL
    req["file_id"] = handle.file_id
    req["max_input_response"] = 0
    req["max_output_response"] = max_output
    req["flags"] = IOCTLFlags.SMB2_0_IOCTL_IS_FSCTL
    req["buffer"] = payload
    request = conn.send(req, sid=session.session_id, tid=tree.tree_connect_id)
    try:
        response = conn.receive(request)
    except SMBResponseException as exc:
        return exc.status, b""
    resp = SMB2IOCTLResponse()
    resp.unpack(response["data"].get_value())
    return response["status"].get_value(), resp["buffer"].get_value()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=445)
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--share", default="vms")
    ap.add_argument("--file", default=r"vm01\disk0.vhdx")
    ap.add_argument("--dialect", choices=sorted(DIALECTS), required=True)
    ap.add_argument("--security", choices=["plain", "signed", "encrypted"], required=True)
    ap.add_argument("--cipher", choices=sorted(CIPHERS), help="offer only this cipher (3.1.1)")
    ap.add_argument("--max-output", type=int, default=4096)
    ap.add_argument("--keys-out", help="append this session's keys (Wireshark smb2_seskey_list line) here")
    args = ap.parse_args()

    if args.security == "encrypted" and args.dialect == "210":
        sys.exit("SMB 2.1 has no encryption")

    conn = Connection(uuid.uuid4(), args.host, args.port, require_signing=args.security == "signed")
    ciphers = [CIPHERS[args.cipher]] if args.cipher else None
    conn.connect(DIALECTS[args.dialect], preferred_encryption_algos=ciphers)
    session = Session(conn, args.user, args.password, require_encryption=args.security == "encrypted")
    session.connect()
    print(
        f"dialect=0x{conn.dialect:04x} cipher={getattr(conn, 'cipher_id', None)} signing={session.signing_required} "
        f"encrypt={session.encrypt_data} session_id=0x{session.session_id:016x}"
    )
    if args.keys_out and args.security == "encrypted":
        with open(args.keys_out, "a") as f:
            # Wireshark's UAT line: unquoted hex fields, the session id as its bytes on the wire
            # (little-endian), then session key, server-to-client key, client-to-server key.
            f.write(
                ",".join(
                    [
                        struct.pack("<Q", session.session_id).hex(),
                        session.session_key.hex(),
                        session.decryption_key.hex(),  # server-to-client
                        session.encryption_key.hex(),  # client-to-server
                    ]
                )
                + "\n"
            )

    tree = TreeConnect(session, rf"\\{args.host}\{args.share}")
    # MS-SMB2 3.2.4.2.4: with 3.1.1 the client signs TREE_CONNECT even when signing is not
    # required (smbd answers an unsigned one with STATUS_ACCESS_DENIED); the rest stays unsigned.
    plain_311 = conn.dialect == Dialects.SMB_3_1_1 and not session.signing_required and not session.encrypt_data
    if plain_311:
        session.signing_required = True
    tree.connect()
    if plain_311:
        session.signing_required = False
    handle = Open(tree, args.file)
    handle.create(
        ImpersonationLevel.Impersonation,
        FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
        FileAttributes.FILE_ATTRIBUTE_NORMAL,
        ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
        CreateDisposition.FILE_OPEN,
        CreateOptions.FILE_NON_DIRECTORY_FILE,
    )
    count = 0
    for version in (0x0100, 0x0101):
        for name, payload in sqos_sequence(version):
            status, out = send_qos(conn, session, tree, handle, payload, args.max_output)
            count += 1
            print(f"SQOS 0x{version:04x} {name}: {len(payload)} bytes -> status 0x{status:08x} out={len(out)}")
    handle.close()
    tree.disconnect()
    session.disconnect()
    conn.disconnect()
    print(f"sent {count} FSCTL_STORAGE_QOS_CONTROL requests")


if __name__ == "__main__":
    main()
