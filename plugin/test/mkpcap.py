#!/usr/bin/env python3
"""Writes the plugin's small test captures (classic pcap, Ethernet/IPv4/TCP/NetBIOS/SMB2).

Until `sqos synth` provides captures/, these exercise every path of plugin/sqos.lua: the spec's
own example buffers (MS-SQOS 4.2/4.3, dialects 1.0 and 1.1, including the contradictory 4.3
response layout), malformed and rule-breaking buffers, error responses, a compound IOCTL pair,
two SMB2 messages in one TCP segment, one message over two segments, and a flow with periodic
UPDATE_COUNTERS so per-interval IOPS / latency / KB/s can be checked.

Usage: mkpcap.py OUTDIR   (writes sqos-plugin-*.pcap; deterministic, no arguments otherwise)
"""
import struct
import sys
import uuid

FSCTL = 0x00090350


def guid(s):
    return uuid.UUID(s).bytes_le


FLOW = guid("b13a32e4-e2ad-5db2-a4f8-5cd3be9d696e")
POLICY = guid("04b4f24e-b3e9-4594-adaa-e327528de54b")
INIT = guid("1b9e4dc6-f8c0-419f-8785-8065bcff7284")
NULL = bytes(16)


def utf16(s):
    return s.encode("utf-16-le")


def request(version=0x0101, options=0, flow=NULL, policy=NULL, initiator=NULL, limit=0,
            reservation=0, names=None, io=0, nio=0, lat=0, lower=0, bw=0, kb=0,
            name_fields=None, reserved=0):
    """STORAGE_QOS_CONTROL_REQUEST; names=(name, node) placed right after the fixed part."""
    fixed = 128 if version == 0x0101 else 112
    name_b = utf16(names[0]) if names else b""
    node_b = utf16(names[1]) if names else b""
    if name_fields is None:
        name_fields = (fixed if name_b else 0, len(name_b),
                       fixed + len(name_b) if node_b else 0, len(node_b))
    b = struct.pack("<HHI", version, reserved, options) + flow + policy + initiator
    b += struct.pack("<QQ", limit, reservation)
    b += struct.pack("<HHHH", *name_fields)
    b += struct.pack("<QQQQ", io, nio, lat, lower)
    if version == 0x0101:
        b += struct.pack("<QQ", bw, kb)
    return b + name_b + node_b


def response(version=0x0101, flow=FLOW, policy=NULL, initiator=NULL, ttl=1000, status=0,
             max_rate=0, min_rate=0, base=8192, max_bw=0, options=0):
    b = struct.pack("<HHI", version, 0, options) + flow + policy + initiator
    b += struct.pack("<IIQQII", ttl, status, max_rate, min_rate, base, 0)
    if version == 0x0101:
        b += struct.pack("<Q", max_bw)
    return b


def hexbytes(s):
    return bytes.fromhex(" ".join(s.split()))


# --- the spec's example buffers, byte for byte ---
SPEC_10_SET_FLOW = hexbytes("""
00 01 00 00 01 00 00 00
E4 32 3A B1 AD E2 B2 5D A4 F8 5C D3 BE 9D 69 6E
""") + bytes(112 - 24)
SPEC_NAMES = hexbytes("""
54 00 45 00 53 00 54 00 2D 00 56 00 4D 00
48 00 59 00 50 00 45 00 52 00 56 00 2D 00 54 00 45 00 53 00 54 00 2E 00 6E 00 74 00 64 00 65
00 76 00 2E 00 63 00 6F 00 72 00 70 00 2E 00 6D 00 69 00 63 00 72 00 6F 00 73 00 6F 00 66 00
74 00 2E 00 63 00 6F 00 6D 00""")


def spec_set_policy(version, node_len):
    head = struct.pack("<HHI", version, 0, 2) + FLOW + POLICY + INIT + bytes(16)
    head += struct.pack("<HHHH", 0x68, 0x0E, 0x76, node_len) + bytes(32)
    if version == 0x0101:
        head += bytes(16)
    return head + SPEC_NAMES


SPEC_43_REQ_TAIL = hexbytes("""
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00
8F 01 00 00 00 00 00 00 8F 01 00 00 00 00 00 00
E0 3E 47 02 00 00 00 00 E0 3E 47 02 00 00 00 00""")


def spec_probe(version):
    b = struct.pack("<HHI", version, 0, 0x1C) + FLOW + POLICY + INIT + SPEC_43_REQ_TAIL
    return b + (bytes(16) if version == 0x0101 else b"")


# Section 4.3 (004) response as printed: MaximumBandwidth 200 at 80, BaseIoSize 8192 at 88.
SPEC_43_RESP_11 = struct.pack("<HHI", 0x0101, 0, 0) + FLOW + POLICY + INIT + hexbytes("""
8D 0F 00 00 00 00 00 00 64 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
C8 00 00 00 00 00 00 00 00 20 00 00 00 00 00 00""")
SPEC_43_RESP_10 = struct.pack("<HHI", 0x0100, 0, 0) + FLOW + POLICY + INIT + hexbytes("""
8D 0F 00 00 00 00 00 00 64 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 20 00 00 00 00 00 00""")

# --- SMB2 ---
CREATE, CLOSE, READ, WRITE, IOCTL = 5, 6, 8, 9, 11
F_RESPONSE, F_ASYNC, F_RELATED = 0x1, 0x2, 0x4


def smb2_header(cmd, msg_id, response, status=0, next_cmd=0, related=False, session=0x1111,
                tree=1, async_id=None):
    flags = (F_RESPONSE if response else 0) | (F_RELATED if related else 0)
    if async_id is not None:
        flags |= F_ASYNC
        return (b"\xfeSMB" + struct.pack("<HHIHHIIQQQ", 64, 1, status, cmd, 1, flags, next_cmd,
                                         msg_id, async_id, session) + bytes(16))
    return (b"\xfeSMB" + struct.pack("<HHIHHIIQIIQ", 64, 1, status, cmd, 1, flags, next_cmd,
                                     msg_id, 0xFEFF, tree, session) + bytes(16))


def ioctl_req(fid, buf, max_out=4096):
    body = struct.pack("<HHI", 57, 0, FSCTL) + fid
    body += struct.pack("<IIIIIIII", 64 + 56 if buf else 0, len(buf), 0, 64 + 56, 0, max_out,
                        1, 0)
    return body + (buf if buf else b"\x00")


def ioctl_resp(fid, buf):
    body = struct.pack("<HHI", 49, 0, FSCTL) + fid
    body += struct.pack("<IIIIII", 64 + 48, 0, 64 + 48, len(buf), 0, 0)
    return body + buf


def error_resp():
    return struct.pack("<HBBI", 9, 0, 0, 0) + b"\x00"


def create_req(name):
    n = utf16(name)
    body = struct.pack("<HBBIQQIIIIIHHII", 57, 0, 0, 2, 0, 0, 0x12019F, 0x80, 7, 1, 0x40,
                       64 + 56, len(n), 0, 0)
    return body + n


def create_resp(fid):
    body = struct.pack("<HBBI", 89, 0, 0, 1) + bytes(32) + struct.pack("<QQII", 1 << 30,
                                                                      1 << 30, 0x80, 0)
    return body + fid + struct.pack("<II", 0, 0) + b"\x00"


def read_req(fid, length, offset=0):
    return struct.pack("<HBBIQ", 49, 0x50, 0, length, offset) + fid + \
        struct.pack("<IIIHH", 1, 0, 0, 0, 0) + b"\x00"


def read_resp():
    # No data bytes: the analysis counts the Length asked for, and the test capture stays small.
    return struct.pack("<HBBIII", 17, 0x50, 0, 0, 0, 0) + b"\x00"


def write_req(fid, data, offset=0):
    return struct.pack("<HHIQ", 49, 64 + 48, len(data), offset) + fid + \
        struct.pack("<IIHHI", 0, 0, 0, 0, 0) + data


def write_resp(count):
    return struct.pack("<HHIIHH", 17, 0, count, 0, 0, 0)


def fid_bytes(persistent, volatile):
    return struct.pack("<QQ", persistent, volatile)


def nbss(msg):
    return struct.pack(">I", len(msg)) + msg


def compound(parts):
    """parts: list of (header_args, body); sets NextCommand, 8-byte aligned."""
    out = b""
    for i, (hdr, body) in enumerate(parts):
        msg = hdr(0) + body
        if i + 1 < len(parts):
            pad = (-len(msg)) % 8
            msg = hdr(len(msg) + pad) + body + bytes(pad)
        out += msg
    return out


# --- Ethernet / IPv4 / TCP ---
def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


class Conn:
    def __init__(self, cip, sip, cport):
        self.c = (bytes(map(int, cip.split("."))), cport)
        self.s = (bytes(map(int, sip.split("."))), 445)
        self.seq = {True: 1000, False: 5000}  # True: client → server

    def segment(self, from_client, payload, flags=0x18):
        src, dst = (self.c, self.s) if from_client else (self.s, self.c)
        seq = self.seq[from_client]
        ack = self.seq[not from_client] if flags != 0x02 else 0
        tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], seq, ack, 5 << 4, flags, 65535, 0, 0)
        pseudo = src[0] + dst[0] + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
        c = csum(pseudo + tcp + payload)
        tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 1, 0x4000,
                         64, 6, 0, src[0], dst[0])
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        eth = (b"\x00\x15\x5d\x00\x00\x02" if from_client else b"\x00\x15\x5d\x00\x00\x01")
        eth += (b"\x00\x15\x5d\x00\x00\x01" if from_client else b"\x00\x15\x5d\x00\x00\x02")
        eth += b"\x08\x00"
        self.seq[from_client] = (seq + len(payload) + (1 if flags & 0x03 else 0)) & 0xFFFFFFFF
        return eth + ip + tcp + payload

    def handshake(self):
        syn = self.segment(True, b"", 0x02)
        synack = self.segment(False, b"", 0x12)
        ack = self.segment(True, b"", 0x10)
        return [syn, synack, ack]


class Writer:
    def __init__(self, path, t0=1700000000.0):
        self.f = open(path, "wb")
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        self.t = t0

    def add(self, frame, dt=0.001):
        self.t += dt
        sec = int(self.t)
        usec = int(round((self.t - sec) * 1e6))
        if usec >= 1000000:
            sec, usec = sec + 1, usec - 1000000
        self.f.write(struct.pack("<IIII", sec, usec, len(frame), len(frame)) + frame)

    def close(self):
        self.f.close()


class Session:
    """One connection with helpers for request/response exchanges."""

    def __init__(self, w, conn):
        self.w, self.conn, self.msg = w, conn, 1
        for f in conn.handshake():
            w.add(f)

    def send(self, from_client, smb, dt=0.001):
        self.w.add(self.conn.segment(from_client, nbss(smb)), dt)

    def create(self, name, fid):
        m = self.msg
        self.msg += 1
        self.send(True, smb2_header(CREATE, m, False) + create_req(name))
        self.send(False, smb2_header(CREATE, m, True) + create_resp(fid))

    def read(self, fid, length, at):
        m = self.msg
        self.msg += 1
        self.w.t = at - 0.001
        self.send(True, smb2_header(READ, m, False) + read_req(fid, length))
        self.send(False, smb2_header(READ, m, True) + read_resp())

    def write(self, fid, length, at):
        m = self.msg
        self.msg += 1
        self.w.t = at - 0.001
        self.send(True, smb2_header(WRITE, m, False) + write_req(fid, bytes(length)))
        self.send(False, smb2_header(WRITE, m, True) + write_resp(length))

    def ioctl(self, fid, req, resp=None, status=0, dt=0.001, max_out=4096):
        """resp: bytes for a success response with output, None for no output."""
        m = self.msg
        self.msg += 1
        self.send(True, smb2_header(IOCTL, m, False) + ioctl_req(fid, req, max_out), dt)
        if status:
            self.send(False, smb2_header(IOCTL, m, True, status) + error_resp())
        else:
            self.send(False, smb2_header(IOCTL, m, True) + ioctl_resp(fid, resp or b""))
        return m


def spec_examples(path):
    """The spec's example exchanges of sections 4.2 and 4.3, dialect 1.0 then 1.1."""
    w = Writer(path)
    s = Session(w, Conn("10.0.0.1", "10.0.0.2", 49152))
    fid10 = fid_bytes(0x11, 0x21)
    fid11 = fid_bytes(0x12, 0x22)
    s.create("vms\\vm01\\disk0.vhdx", fid10)
    s.ioctl(fid10, SPEC_10_SET_FLOW)
    s.ioctl(fid10, spec_set_policy(0x0100, 0x48))
    s.ioctl(fid10, spec_probe(0x0100), SPEC_43_RESP_10)
    s.create("vms\\vm02\\disk0.vhdx", fid11)
    s.ioctl(fid11, request(0x0101, 1, FLOW))
    s.ioctl(fid11, spec_set_policy(0x0101, 0x2E))
    s.ioctl(fid11, spec_probe(0x0101), SPEC_43_RESP_11)
    w.close()


def flows(path):
    """Two flows on two connections: counters every second, policy changes, errors."""
    w = Writer(path)
    a = Session(w, Conn("10.0.0.1", "10.0.0.2", 49153))
    b = Session(w, Conn("10.0.0.3", "10.0.0.2", 49154))
    fa, fb = fid_bytes(0x31, 0x41), fid_bytes(0x32, 0x42)
    flow_b = guid("5d0c5f2a-6f3e-4c61-9a55-0b8c6d1e2f30")
    init_b = guid("7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d")
    a.create("vms\\vm07\\disk0.vhdx", fa)
    b.create("vms\\vm08\\disk0.vhdx", fb)
    # A counter update before association: the server answers STATUS_NOT_FOUND.
    b.ioctl(fb, request(0x0100, 0x18, flow_b), status=0xC0000225)
    a.ioctl(fa, request(0x0101, 1, FLOW))
    a.ioctl(fa, request(0x0101, 0x0A, FLOW, NULL, INIT, limit=500, reservation=100, bw=4000,
                        names=("VM07", "HV01.contoso.com")),
            response(0x0101, FLOW, NULL, INIT, 1000, 0, 500, 100, 8192, 4000))
    b.ioctl(fb, request(0x0100, 1, flow_b))
    b.ioctl(fb, request(0x0100, 0x0A, flow_b, POLICY, init_b, names=("VM08", "HV02")),
            response(0x0100, flow_b, POLICY, init_b, 4000, 0, 300, 50, 8192))
    # Counters: flow A every 1.0 s (v1.1 with kilobytes), flow B every 2.0 s.
    ios_a = [(120, 130, 1200000, 1000000, 1040), (400, 420, 2000000, 1800000, 3360),
             (600, 700, 9000000, 6000000, 5600), (300, 300, 600000, 500000, 2400)]
    ios_b = [(50, 50, 5000000, 4000000), (350, 360, 7000000, 3500000)]
    # Request times are exact: A's at base + i s, B's 2 ms after A's (so B's interval is 2 s).
    base = w.t + 0.5
    for i in range(4):
        io, nio, lat, lower, kb = ios_a[i]
        status = 1 if i == 2 else 0
        w.t = base + i - 0.001
        a.ioctl(fa, request(0x0101, 0x18, FLOW, io=io, nio=nio, lat=lat, lower=lower, kb=kb),
                response(0x0101, FLOW, NULL, INIT, 1000, status, 500, 100, 8192, 4000))
        if i % 2 == 1:
            io, nio, lat, lower = ios_b[i // 2]
            b.ioctl(fb, request(0x0100, 0x18, flow_b, io=io, nio=nio, lat=lat, lower=lower),
                    response(0x0100, flow_b, POLICY, init_b, 4000, 0, 300, 50, 8192))
    # Policy change on A: new limit.
    a.ioctl(fa, request(0x0101, 0x0A, FLOW, NULL, INIT, limit=800, reservation=100, bw=0),
            response(0x0101, FLOW, NULL, INIT, 1000, 0, 800, 100, 8192, 0))
    w.close()


def malformed(path):
    """Buffers that break the structure or the rules; some with success answers."""
    w = Writer(path)
    s = Session(w, Conn("10.0.0.5", "10.0.0.2", 49155))
    f = fid_bytes(0x51, 0x61)
    s.create("vms\\vm09\\disk0.vhdx", f)
    s.ioctl(f, request(0x0101, 1, FLOW)[:60], status=0xC000000D)           # short request
    s.ioctl(f, request(0x0200, 1, FLOW), status=0xC0000059)               # unknown version
    s.ioctl(f, request(0x0101, 0, FLOW), status=0xC000000D)               # no flag
    s.ioctl(f, request(0x0101, 0x101, FLOW))                              # unknown bit
    s.ioctl(f, request(0x0101, 0x04, NULL), status=0xC000000D)            # probe null flow
    s.ioctl(f, request(0x0101, 0x02, FLOW, POLICY, INIT, limit=2000000000, reservation=5,
                       bw=7), status=0xC000000D)                          # param rules
    s.ioctl(f, request(0x0101, 0x02, FLOW, NULL, INIT, limit=10, reservation=20),
            status=0xC000000D)                                            # reservation > limit
    s.ioctl(f, request(0x0100, 0x02, FLOW, names=("AB", "C"),
                       name_fields=(112, 5, 300, 2)), status=0xC000000D)  # odd, out of bounds
    s.ioctl(f, request(0x0100, 0x01, FLOW, reserved=3))                    # reserved
    bad = request(0x0100, 0x02, FLOW, name_fields=(112, 4, 116, 4)) + b"\x00\xd8x\x00N\x00\x00\x00"
    s.ioctl(f, bad, status=0xC000000D)                                    # bad utf16, NUL
    s.ioctl(f, request(0x0101, 0x08, FLOW), response(0x0101, FLOW, ttl=0, status=9, base=0,
                                                     options=4), max_out=80)
    s.ioctl(f, request(0x0101, 0x08, FLOW), response(0x0101, FLOW)[:70])  # short response
    s.ioctl(f, request(0x0101, 0x01, FLOW) + b"\x01\x02\x03",
            response(0x0100, guid("00000000-0000-0000-0000-000000000001")))  # trailing, no GET_STATUS
    # Compound: CREATE + IOCTL(related) in one message, answered by a compound response.
    m = s.msg
    s.msg += 2
    cf = fid_bytes(0x52, 0x62)
    req = compound([(lambda n: smb2_header(CREATE, m, False, next_cmd=n), create_req("vms\\vm09\\disk1.vhdx")),
                    (lambda n: smb2_header(IOCTL, m + 1, False, next_cmd=n, related=True),
                     ioctl_req(b"\xff" * 16, request(0x0101, 0x09, FLOW)))])
    s.send(True, req)
    resp = compound([(lambda n: smb2_header(CREATE, m, True, next_cmd=n), create_resp(cf)),
                     (lambda n: smb2_header(IOCTL, m + 1, True, next_cmd=n, related=True),
                      ioctl_resp(cf, response(0x0101, FLOW, NULL, INIT, 2000, 0, 0, 0, 8192, 0)))])
    s.send(False, resp)
    # Two IOCTL requests in one segment; then one response split over two segments.
    m = s.msg
    s.msg += 2
    two = nbss(smb2_header(IOCTL, m, False) + ioctl_req(f, request(0x0101, 0x08, FLOW))) + \
        nbss(smb2_header(IOCTL, m + 1, False) + ioctl_req(f, request(0x0101, 0x18, FLOW, io=5)))
    w.add(s.conn.segment(True, two))
    r1 = nbss(smb2_header(IOCTL, m, True) + ioctl_resp(f, response(0x0101, FLOW)))
    w.add(s.conn.segment(False, r1[:100]))
    w.add(s.conn.segment(False, r1[100:]))
    s.send(False, smb2_header(IOCTL, m + 1, True) + ioctl_resp(f, response(0x0101, FLOW)))
    w.close()


def io(path):
    """A flow with READ/WRITE on the wire, and the client and server misbehaving in the ways the
    flow analysis looks for: I/O above MaximumIoRate, counters that disagree with the wire, a
    reservation not met, late status polling, no GET_STATUS after SET_POLICY, a second
    initiator, a success that should have been a failure, an interim STATUS_PENDING answer and
    a request never answered."""
    w = Writer(path)
    t0 = w.t
    s = Session(w, Conn("10.0.0.7", "10.0.0.2", 49160))
    fc, fd = fid_bytes(0x71, 0x81), fid_bytes(0x72, 0x82)
    flow = guid("3c2b1a09-8f7e-4d6c-9b5a-493827160504")
    init2 = guid("0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0")
    s.create("vms\\vm10\\disk0.vhdx", fc)
    s.create("vms\\vm10\\disk1.vhdx", fd)
    s.ioctl(fc, request(0x0101, 0x01, flow))
    # SET_POLICY without GET_STATUS, and no GET_STATUS within 1 s (section 3.1.6).
    s.ioctl(fc, request(0x0101, 0x02, flow, NULL, INIT, limit=100, reservation=50,
                        names=("VM10", "HV03")))

    def status_resp(ttl=1000, initiator=INIT):
        return response(0x0101, flow, NULL, initiator, ttl, 0, 100, 50, 8192, 0)

    def update(at, io=0, nio=0, kb=0, options=0x18, answer=True):
        w.t = t0 + at - 0.001
        lat = io * 20000
        req = request(0x0101, options, flow, io=io, nio=nio, lat=lat, lower=lat // 2, kb=kb)
        if answer:
            s.ioctl(fc, req, status_resp() if options & 0x08 else None)
        else:
            m = s.msg
            s.msg += 1
            s.send(True, smb2_header(IOCTL, m, False) + ioctl_req(fc, req))

    update(2.0)
    # Interval 1: 150 reads of 8 KiB in 1 s, above MaximumIoRate 100; counters right.
    for i in range(150):
        s.read(fc, 8192, t0 + 2.005 + i * 0.006)
    update(3.0, 150, 150, 1200)
    # Interval 2: 10 writes of 4 KiB, but the client reports 30 I/Os; below MinimumIoRate 50.
    for i in range(10):
        s.write(fc, 4096, t0 + 3.1 + i * 0.08)
    update(4.0, 30, 30, 40)
    # Then counter updates without GET_STATUS while I/O goes on: status polling is late.
    for at in (4.2, 4.6, 5.4, 5.8, 6.2, 6.6):
        s.read(fc, 8192, t0 + at)
        if at in (4.6, 5.8):
            update(at + 0.4, 2, 2, 16, options=0x10)
    update(7.0, 2, 2, 16)
    # A second initiator on another node sets the policy.
    w.t = t0 + 7.5
    s.ioctl(fc, request(0x0101, 0x0A, flow, NULL, init2, limit=100, reservation=50,
                        names=("VM10", "HV04")), status_resp(initiator=init2))
    # GET_STATUS on an open never associated: the server must fail it, but answers.
    w.t = t0 + 7.6
    s.ioctl(fd, request(0x0101, 0x08, flow), status_resp(initiator=init2))
    # An interim STATUS_PENDING answer, then the final (async) one.
    w.t = t0 + 7.7
    m = s.msg
    s.msg += 1
    s.send(True, smb2_header(IOCTL, m, False) + ioctl_req(fc, request(0x0101, 0x08, flow)))
    s.send(False, smb2_header(IOCTL, m, True, 0x103, async_id=0x77) + error_resp())
    w.t = t0 + 7.75
    s.send(False, smb2_header(IOCTL, m, True, async_id=0x77) +
           ioctl_resp(fc, status_resp(initiator=init2)))
    # A request never answered; the capture goes on for more than 5 s.
    update(8.0, 0, 0, 0, options=0x10, answer=False)
    for at in (9.0, 11.0, 13.5):
        s.read(fc, 4096, t0 + at)
    w.close()


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    spec_examples(f"{out}/sqos-plugin-spec-examples.pcap")
    flows(f"{out}/sqos-plugin-flows.pcap")
    malformed(f"{out}/sqos-plugin-malformed.pcap")
    io(f"{out}/sqos-plugin-io.pcap")
