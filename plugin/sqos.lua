-- sqos.lua: "SQOS analysis" (sqosa), a Wireshark/tshark >= 4.0 postdissector for MS-SQOS
-- (Storage Quality of Service over SMB3, FSCTL_STORAGE_QOS_CONTROL 0x00090350).
--
-- Wireshark decodes the SQOS fields (smb2.ioctl.sqos.*) but keeps no state. This script adds,
-- per SQOS message: the logical flow of the open (also when the message does not carry it), the
-- matched request/response, per-interval IOPS / latency / KB/s derived from UPDATE_COUNTERS,
-- the flow's current limits and status, and expert info with the same codes and severities as
-- the sqos Rust codec (src/sqos/findings.rs, docs/sqos-codec.md). It decodes the
-- STORAGE_QOS_CONTROL buffers itself, by the structure layout (request 112/128 bytes fixed,
-- response 88/96 with MaximumBandwidth at 88), so it can say when bytes look like the spec's
-- contradictory section 4.2 / 4.3 examples instead of repeating a misreading.
--
-- Install and use: plugin/README.md. Tested with tshark 4.0.17 (Lua 5.2).

local SQOSA_VERSION = "0.1.0"

set_plugin_info({
    version = SQOSA_VERSION,
    description = "MS-SQOS flow analysis: flows, derived IOPS/latency/bandwidth, expert info",
    repository = "sqos (plugin/sqos.lua)",
})

local FSCTL_STORAGE_QOS_CONTROL = 0x00090350
local STATUS_PENDING = 0x00000103
local STATUS_BUFFER_OVERFLOW = 0x80000005
local NAME_SIZE = 0x200 -- STORAGE_QOS_INITIATOR_NAME_SIZE
local MAX_POLICY_PARAMETER = 1000000000 -- product behaviour note <8>
local SPEC_TEXT_MIN_NAME_OFFSET = 104
local SPEC_TEXT_RESPONSE_SIZE = 80

local OPT = { SET_LOGICAL_FLOW_ID = 0x01, SET_POLICY = 0x02, PROBE_POLICY = 0x04,
              GET_STATUS = 0x08, UPDATE_COUNTERS = 0x10 }
local OPT_KNOWN = 0x1F
local OPT_NAMES = { { 0x01, "SET_LOGICAL_FLOW_ID" }, { 0x02, "SET_POLICY" },
                    { 0x04, "PROBE_POLICY" }, { 0x08, "GET_STATUS" }, { 0x10, "UPDATE_COUNTERS" } }
local STATUS_NAMES = {
    [0] = "StorageQoSStatusOk",
    [1] = "StorageQoSStatusInsufficientThroughput",
    [2] = "StorageQoSUnknownPolicyId",
    [4] = "StorageQoSStatusConfigurationMismatch",
    [5] = "StorageQoSStatusNotAvailable",
}

-- Finding codes and their one severity, exactly as src/sqos/findings.rs (`FindingCode::as_str`,
-- `severity`); tests/plugin_tshark.rs checks that the two lists agree.
-- BEGIN FINDING CODES
local CODES = {
    { "sqos.short_buffer", "error" },
    { "sqos.unknown_version", "error" },
    { "sqos.trailing_bytes", "note" },
    { "sqos.reserved_nonzero", "warning" },
    { "sqos.options_none", "error" },
    { "sqos.options_unknown_bits", "warning" },
    { "sqos.probe_null_flow_id", "error" },
    { "sqos.name_too_long", "error" },
    { "sqos.name_length_odd", "error" },
    { "sqos.name_offset_in_fixed_part", "error" },
    { "sqos.name_out_of_bounds", "error" },
    { "sqos.name_invalid_utf16", "error" },
    { "sqos.name_null_terminated", "warning" },
    { "sqos.name_layout_spec_example", "note" },
    { "sqos.param_too_large", "error" },
    { "sqos.reservation_above_limit", "error" },
    { "sqos.param_with_policy_id", "error" },
    { "sqos.max_output_too_small", "error" },
    { "sqos.response_options_nonzero", "warning" },
    { "sqos.ttl_zero", "warning" },
    { "sqos.unknown_status", "warning" },
    { "sqos.base_io_size_zero", "warning" },
    { "sqos.response_layout_spec_example", "warning" },
    { "sqos.response_version_mismatch", "warning" },
    { "sqos.response_flow_id_mismatch", "warning" },
    { "sqos.response_policy_mismatch", "warning" },
    { "sqos.response_without_get_status", "warning" },
}
-- END FINDING CODES

-- Structure problems are "malformed"; rule breaking is "protocol"; flow-level is "sequence".
local MALFORMED_CODES = {
    ["sqos.short_buffer"] = true, ["sqos.trailing_bytes"] = true,
    ["sqos.name_length_odd"] = true, ["sqos.name_offset_in_fixed_part"] = true,
    ["sqos.name_out_of_bounds"] = true, ["sqos.name_invalid_utf16"] = true,
}

local sqosa = Proto("sqosa", "SQOS analysis")

------------------------------------------------------------------------------------------------
-- Fields
------------------------------------------------------------------------------------------------
local F = {
    direction = ProtoField.string("sqosa.direction", "Direction", base.ASCII,
        "request or response"),
    msg_id = ProtoField.uint64("sqosa.msg_id", "SMB2 MessageId"),
    interim = ProtoField.bool("sqosa.interim", "Interim (STATUS_PENDING)"),
    nt_status = ProtoField.uint32("sqosa.nt_status", "NT status", base.HEX),
    file_id = ProtoField.string("sqosa.file_id", "FileId", base.ASCII,
        "the open (smb2.fid) the message is about"),
    flow = ProtoField.string("sqosa.flow", "Logical flow", base.ASCII,
        "LogicalFlowID of the open, from the message or from the tracked association"),
    flow_source = ProtoField.string("sqosa.flow.source", "Logical flow from", base.ASCII,
        "message: carried by this message; open: the open's tracked association"),
    request_frame = ProtoField.framenum("sqosa.request_frame", "Request in frame", base.NONE,
        frametype.REQUEST),
    response_frame = ProtoField.framenum("sqosa.response_frame", "Response in frame", base.NONE,
        frametype.RESPONSE),
    response_time = ProtoField.double("sqosa.response_time", "Response time", "s"),
    dialect = ProtoField.string("sqosa.dialect", "Dialect", base.ASCII),
    options = ProtoField.uint32("sqosa.options", "Options", base.HEX),
    option_names = ProtoField.string("sqosa.options.names", "Option names", base.ASCII),
    status = ProtoField.uint32("sqosa.status", "Status", base.HEX),
    status_name = ProtoField.string("sqosa.status.name", "Status name", base.ASCII),
    -- per-interval figures, on the accepted UPDATE_COUNTERS exchange
    interval = ProtoField.double("sqosa.interval", "Interval", "s",
        "time since the flow's previous accepted UPDATE_COUNTERS request"),
    iops = ProtoField.double("sqosa.iops", "IOPS", "IO/s"),
    normalized_iops = ProtoField.double("sqosa.normalized_iops", "Normalized IOPS", "IO/s"),
    latency_ms = ProtoField.double("sqosa.latency_ms", "Average latency", "ms"),
    lower_latency_ms = ProtoField.double("sqosa.lower_latency_ms", "Average lower latency", "ms"),
    kbps = ProtoField.double("sqosa.kbps", "Bandwidth", "KB/s"),
    first_update = ProtoField.bool("sqosa.first_update", "First counter update of the flow",
        base.NONE, nil, nil, "opens the series; its interval began before it was seen"),
    -- the flow's state after this message
    flow_state = ProtoField.none("sqosa.flow.state", "Logical flow state after this message"),
    f_policy = ProtoField.string("sqosa.flow.policy_id", "PolicyID", base.ASCII),
    f_initiator = ProtoField.string("sqosa.flow.initiator_id", "InitiatorID", base.ASCII),
    f_name = ProtoField.string("sqosa.flow.initiator_name", "InitiatorName", base.UNICODE),
    f_node = ProtoField.string("sqosa.flow.initiator_node_name", "InitiatorNodeName",
        base.UNICODE),
    f_limit = ProtoField.uint64("sqosa.flow.limit", "Limit (normalized IOPS)"),
    f_reservation = ProtoField.uint64("sqosa.flow.reservation", "Reservation (normalized IOPS)"),
    f_bw_limit = ProtoField.uint64("sqosa.flow.bandwidth_limit", "BandwidthLimit (KB/s)"),
    f_max_rate = ProtoField.uint64("sqosa.flow.maximum_io_rate", "MaximumIoRate"),
    f_min_rate = ProtoField.uint64("sqosa.flow.minimum_io_rate", "MinimumIoRate"),
    f_max_bw = ProtoField.uint64("sqosa.flow.maximum_bandwidth", "MaximumBandwidth (KB/s)"),
    f_base = ProtoField.uint32("sqosa.flow.base_io_size", "BaseIoSize"),
    f_ttl = ProtoField.uint32("sqosa.flow.time_to_live", "TimeToLive (ms)"),
    f_status = ProtoField.uint32("sqosa.flow.status", "Status", base.HEX),
    f_status_name = ProtoField.string("sqosa.flow.status_name", "Status name", base.ASCII),
    f_updates = ProtoField.uint32("sqosa.flow.updates", "Accepted counter updates so far"),
    finding = ProtoField.string("sqosa.finding", "Finding", base.ASCII,
        "stable finding code, as in `sqos dissect` JSON"),
    finding_count = ProtoField.uint32("sqosa.finding_count", "Findings", base.DEC, nil, nil,
        "number of findings on this message"),
}
local field_list = {}
for _, f in pairs(F) do field_list[#field_list + 1] = f end
sqosa.fields = field_list

local EXPERT_SEVERITY = { error = expert.severity.ERROR, warning = expert.severity.WARN,
                          note = expert.severity.NOTE }
local SEVERITY = {}
local EXPERT = {}
local expert_list = {}
for _, cs in ipairs(CODES) do
    local code, sev = cs[1], cs[2]
    local group = MALFORMED_CODES[code] and expert.group.MALFORMED or expert.group.PROTOCOL
    SEVERITY[code] = sev
    EXPERT[code] = ProtoExpert.new("sqosa." .. code, code, group, EXPERT_SEVERITY[sev])
    expert_list[#expert_list + 1] = EXPERT[code]
end
sqosa.experts = expert_list

sqosa.prefs.flows = Pref.bool("Print the flow summary at the end of a tshark run", false,
    "Same as -X lua_script1:flows (tshark -X lua_script:sqos.lua -X lua_script1:flows)")

local script_args = { ... }
local function flows_requested()
    if sqosa.prefs.flows then return true end
    for _, a in ipairs(script_args) do
        if a == "flows" or a == "flows=1" or a == "sqos.flows:1" then return true end
    end
    return false
end

------------------------------------------------------------------------------------------------
-- Field extractors (creating them also makes Wireshark fill these fields in)
------------------------------------------------------------------------------------------------
local WANT = { "smb2", "smb2.cmd", "smb2.flags.response", "smb2.msg_id", "smb2.nt_status",
               "smb2.fid", "smb2.ioctl.function", "smb2.max_ioctl_out_size", "smb2.ioctl.in",
               "smb2.ioctl.out", "tcp.stream" }
local WANTED = {}
for _, n in ipairs(WANT) do
    Field.new(n)
    WANTED[n] = true
end

------------------------------------------------------------------------------------------------
-- Small helpers
------------------------------------------------------------------------------------------------
local band, rshift = bit32.band, bit32.rshift

local function guid_string(ba)
    -- Microsoft GUID: first three groups little-endian.
    local b = {}
    for i = 0, 15 do b[i] = ba:get_index(i) end
    return string.format("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
        b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6], b[8], b[9], b[10], b[11], b[12], b[13],
        b[14], b[15])
end

local NULL_GUID = "00000000-0000-0000-0000-000000000000"

local function option_names(opts)
    local out = {}
    for _, on in ipairs(OPT_NAMES) do
        if band(opts, on[1]) ~= 0 then out[#out + 1] = on[2] end
    end
    return table.concat(out, "|")
end

local function has(opts, flag) return band(opts, flag) == flag end

-- UTF-8 encoding of one code point.
local function utf8_char(cp)
    if cp < 0x80 then return string.char(cp) end
    if cp < 0x800 then
        return string.char(0xC0 + rshift(cp, 6), 0x80 + band(cp, 0x3F))
    end
    if cp < 0x10000 then
        return string.char(0xE0 + rshift(cp, 12), 0x80 + band(rshift(cp, 6), 0x3F),
            0x80 + band(cp, 0x3F))
    end
    return string.char(0xF0 + rshift(cp, 18), 0x80 + band(rshift(cp, 12), 0x3F),
        0x80 + band(rshift(cp, 6), 0x3F), 0x80 + band(cp, 0x3F))
end

-- Decodes UTF-16LE bytes [off, off+len) of a ByteArray; on an unpaired surrogate gives nil,
-- its byte position (relative to off) and the unit. Also says whether the last char is NUL.
local function decode_utf16le(ba, off, len)
    local out = {}
    local pos = 0
    local last = nil
    while pos + 1 < len do
        local u = ba:get_index(off + pos) + 256 * ba:get_index(off + pos + 1)
        if u >= 0xD800 and u <= 0xDBFF then
            local lo = nil
            if pos + 3 < len then
                lo = ba:get_index(off + pos + 2) + 256 * ba:get_index(off + pos + 3)
            end
            if lo == nil or lo < 0xDC00 or lo > 0xDFFF then return nil, pos, u end
            local cp = 0x10000 + (u - 0xD800) * 0x400 + (lo - 0xDC00)
            out[#out + 1] = utf8_char(cp)
            last = cp
            pos = pos + 4
        elseif u >= 0xDC00 and u <= 0xDFFF then
            return nil, pos, u
        else
            out[#out + 1] = utf8_char(u)
            last = u
            pos = pos + 2
        end
    end
    return table.concat(out), last == 0
end

local function fmt_num(x)
    -- Integers without a fraction, others with up to 6 significant decimals.
    if x == math.floor(x) and math.abs(x) < 2 ^ 53 then return string.format("%d", x) end
    return string.format("%.6f", x):gsub("0+$", "")
end

------------------------------------------------------------------------------------------------
-- The codec: STORAGE_QOS_CONTROL_REQUEST / RESPONSE by the structure layout. Mirrors
-- src/sqos/parse.rs, names.rs and rules.rs (same findings, same order).
------------------------------------------------------------------------------------------------

-- A bounds-checked reader over a ByteArray.
local function reader(ba)
    local len = ba:len()
    local r = { len = len }
    function r.u8(off) return ba:get_index(off) end
    function r.have(off, n) return off >= 0 and off + n <= len end
    function r.u16(off)
        if not r.have(off, 2) then return nil end
        return ba:get_index(off) + 256 * ba:get_index(off + 1)
    end
    function r.u32(off)
        if not r.have(off, 4) then return nil end
        return r.u16(off) + 65536 * r.u16(off + 2)
    end
    function r.u64(off)
        -- UInt64 for exact display and comparison; .n is the Lua number (exact below 2^53).
        if not r.have(off, 8) then return nil end
        return UInt64(r.u32(off), r.u32(off + 4))
    end
    function r.guid(off)
        if not r.have(off, 16) then return nil end
        return guid_string(ba:subset(off, 16))
    end
    return r
end

local function finding(list, code, message)
    list[#list + 1] = { code = code, severity = SEVERITY[code] or "warning", message = message }
end

local function dialect_of(pv)
    if pv == 0x0100 then return "1.0" end
    if pv == 0x0101 then return "1.1" end
    return nil
end

local function dialect_label(d)
    if d then return "dialect " .. d end
    return "unknown-version (read as 1.0)"
end

local function u64n(v) return v:tonumber() end

local function version_finding(list, kind, pv)
    finding(list, "sqos.unknown_version", string.format(
        "%s ProtocolVersion 0x%04X is neither 0x0100 (1.0) nor 0x0101 (1.1); decoded with the " ..
        "1.0 layout, a server MUST fail the request with STATUS_REVISION_MISMATCH", kind, pv))
end

local function reserved_finding(list, field, offset, value)
    finding(list, "sqos.reserved_nonzero",
        string.format("%s (offset %d) is 0x%X; it MUST be 0 when sent", field, offset, value))
end

local function check_request(q, out)
    if q.reserved ~= 0 then reserved_finding(out, "Reserved", 2, q.reserved) end
    local opts = q.options
    if band(opts, OPT_KNOWN) == 0 then
        finding(out, "sqos.options_none", string.format(
            "Options 0x%08X has none of the flags of section 2.2.2.2; the server MUST fail the " ..
            "request with STATUS_INVALID_PARAMETER", opts))
    end
    local unknown = band(opts, bit32.bnot(OPT_KNOWN))
    if unknown ~= 0 then
        finding(out, "sqos.options_unknown_bits",
            string.format("Options 0x%08X has undefined bits 0x%08X", opts, unknown))
    end
    if has(opts, OPT.PROBE_POLICY) and q.flow == NULL_GUID then
        finding(out, "sqos.probe_null_flow_id",
            "PROBE_POLICY with a NULL LogicalFlowID; the server MUST fail the request with " ..
            "STATUS_INVALID_PARAMETER (section 3.2.5.1.1)")
    end
    if has(opts, OPT.SET_POLICY) or has(opts, OPT.PROBE_POLICY) then
        local params = { { "Limit", q.limit }, { "Reservation", q.reservation } }
        if q.dialect == "1.1" and q.bandwidth_limit then
            params[#params + 1] = { "BandwidthLimit", q.bandwidth_limit }
        end
        local max = UInt64(MAX_POLICY_PARAMETER)
        for _, p in ipairs(params) do
            if p[2] > max then
                finding(out, "sqos.param_too_large", string.format(
                    "%s %s is above 1,000,000,000; the server fails the request with " ..
                    "STATUS_INVALID_PARAMETER (section 3.2.5.1.2, note <8>)", p[1],
                    tostring(p[2])))
            end
        end
        if q.limit > UInt64(0) and q.reservation > q.limit then
            finding(out, "sqos.reservation_above_limit", string.format(
                "Reservation %s is above Limit %s; the server fails the request with " ..
                "STATUS_INVALID_PARAMETER (section 3.2.5.1.2, note <8>)", tostring(q.reservation),
                tostring(q.limit)))
        end
        if q.policy ~= NULL_GUID then
            for _, p in ipairs(params) do
                if p[2] > UInt64(0) then
                    finding(out, "sqos.param_with_policy_id", string.format(
                        "%s %s is non-zero with PolicyID %s; the server fails the request with " ..
                        "STATUS_INVALID_PARAMETER (section 3.2.5.1.2, note <8>)", p[1],
                        tostring(p[2]), q.policy))
                end
            end
        end
    end
end

-- One name (names.rs read_name): gives text or nil, and the located byte range or nil.
local function read_name(ba, r, fixed_len, label, off, len, out)
    if len == 0 then return nil, nil end
    if len > NAME_SIZE then
        finding(out, "sqos.name_too_long", string.format(
            "%sLength %d is above STORAGE_QOS_INITIATOR_NAME_SIZE (0x200 = 512 bytes); a server " ..
            "MUST reject it with STATUS_INVALID_PARAMETER for SET_POLICY/PROBE_POLICY", label, len))
    end
    local odd = len % 2 == 1
    if odd then
        finding(out, "sqos.name_length_odd", string.format(
            "%sLength %d is odd; a UTF-16 string has an even number of bytes", label, len))
    end
    if off < fixed_len then
        local rule
        if off < SPEC_TEXT_MIN_NAME_OFFSET then
            rule = "and below the spec text's minimum of 104"
        else
            rule = "(the spec text's minimum of 104, section 3.2.5.1.2, is itself inside the " ..
                "fixed part)"
        end
        finding(out, "sqos.name_offset_in_fixed_part", string.format(
            "%sOffset %d points inside the %d-byte fixed part %s; the name is not decoded",
            label, off, fixed_len, rule))
        return nil, nil
    end
    if not r.have(off, len) then
        finding(out, "sqos.name_out_of_bounds", string.format(
            "%sOffset %d + %sLength %d = %d is past the end of the %d-byte buffer", label, off,
            label, len, off + len, r.len))
        return nil, nil
    end
    local text = nil
    if not odd then
        local s, a, b = decode_utf16le(ba, off, len)
        if s then
            if a then
                finding(out, "sqos.name_null_terminated", label ..
                    " ends with a NUL character; names MUST NOT be null-terminated")
            end
            text = s
        else
            finding(out, "sqos.name_invalid_utf16", string.format(
                "%s is not valid UTF-16LE: unpaired surrogate 0x%04X at byte %d of the structure",
                label, b, off + a))
        end
    end
    return text, { off, off + len }
end

-- names.rs packed_after_fixed_part: the section 4.2 example's reading.
local function packed_after_fixed_part(ba, r, fixed_len, names)
    local pos = fixed_len
    local out = {}
    for _, n in ipairs(names) do
        if n.len > 0 then
            if n.len % 2 == 1 then return nil end
            if not r.have(pos, n.len) then return nil end
            local s = decode_utf16le(ba, pos, n.len)
            if not s then return nil end
            out[#out + 1] = string.format("%s %q at offset %d", n.label, s, pos)
            pos = pos + n.len
        end
    end
    if #out == 0 then return nil end
    return out
end

local function parse_request(ba)
    local r = reader(ba)
    local out = {}
    local pv = r.u16(0)
    local d = pv and dialect_of(pv)
    local fixed_len = (d == "1.1") and 128 or 112
    if pv and not d then version_finding(out, "request", pv) end
    if not pv or not r.have(0, fixed_len) then
        table.insert(out, 1, {
            code = "sqos.short_buffer", severity = SEVERITY["sqos.short_buffer"],
            message = string.format(
                "buffer of %d bytes is shorter than the %d-byte fixed part of a %s request",
                r.len, fixed_len, dialect_label(d)) })
        return nil, out
    end
    local q = {
        protocol_version = pv, dialect = d, reserved = r.u16(2), options = r.u32(4),
        flow = r.guid(8), policy = r.guid(24), initiator = r.guid(40),
        limit = r.u64(56), reservation = r.u64(64),
        name_off = r.u16(72), name_len = r.u16(74), node_off = r.u16(76), node_len = r.u16(78),
        io = r.u64(80), nio = r.u64(88), lat = r.u64(96), lower = r.u64(104),
    }
    if d == "1.1" then
        q.bandwidth_limit = r.u64(112)
        q.kb = r.u64(120)
    end
    check_request(q, out)
    local names = { { label = "InitiatorName", off = q.name_off, len = q.name_len },
                    { label = "InitiatorNodeName", off = q.node_off, len = q.node_len } }
    local range1, range2
    q.name, range1 = read_name(ba, r, fixed_len, "InitiatorName", q.name_off, q.name_len, out)
    q.node, range2 = read_name(ba, r, fixed_len, "InitiatorNodeName", q.node_off, q.node_len, out)
    local stop = fixed_len
    for _, rg in ipairs({ range1 or { 0, 0 }, range2 or { 0, 0 } }) do
        if rg[2] > stop then stop = rg[2] end
    end
    local in_fixed = (q.name_len > 0 and q.name_off < fixed_len) or
        (q.node_len > 0 and q.node_off < fixed_len)
    local packed = in_fixed and packed_after_fixed_part(ba, r, fixed_len, names) or nil
    if packed then
        finding(out, "sqos.name_layout_spec_example", string.format(
            "the name offsets point inside the %d-byte fixed part, like the spec's section 4.2 " ..
            "example (offsets 104/118); read right after the fixed part, the bytes give %s",
            fixed_len, table.concat(packed, " and ")))
    elseif r.len > stop then
        finding(out, "sqos.trailing_bytes", string.format(
            "%d bytes after the end of the request at offset %d", r.len - stop, stop))
    end
    return q, out
end

local function looks_like_base_io_size(v)
    if v < 512 or v > 1048576 then return false end
    while v > 1 do
        if v % 2 ~= 0 then return false end
        v = v / 2
    end
    return true
end

local function check_response(s, out)
    if s.reserved ~= 0 then reserved_finding(out, "Reserved", 2, s.reserved) end
    if s.options ~= 0 then
        finding(out, "sqos.response_options_nonzero", string.format(
            "response Options is 0x%08X; the server MUST set it to 0", s.options))
    end
    if s.ttl == 0 then
        finding(out, "sqos.ttl_zero", "TimeToLive is 0; the server MUST send a positive " ..
            "validity period (section 3.2.5.1.4)")
    end
    if not STATUS_NAMES[s.status] then
        finding(out, "sqos.unknown_status", string.format(
            "Status 0x%08X is none of the logical flow status codes of section 2.2.2.1", s.status))
    end
    if s.base_io_size == 0 then
        finding(out, "sqos.base_io_size_zero",
            "BaseIoSize is 0; the normalized I/O size (section 4.1) divides by it")
    end
    if s.reserved2 ~= 0 then reserved_finding(out, "Reserved2", 84, s.reserved2) end
    -- Section 4.3's example prints MaximumBandwidth at 80 and BaseIoSize at 88.
    if s.maximum_bandwidth and s.dialect == "1.1" then
        local bw = s.maximum_bandwidth
        local alt_base = bw:lower()
        local alt_reserved = bw:higher()
        if not looks_like_base_io_size(s.base_io_size) and alt_reserved == 0 and
            looks_like_base_io_size(alt_base) then
            local alt_bw = UInt64(s.base_io_size, s.reserved2)
            finding(out, "sqos.response_layout_spec_example", string.format(
                "decoded by the structure layout (BaseIoSize at 80, Reserved at 84, " ..
                "MaximumBandwidth at 88): BaseIoSize %d, Reserved %d, MaximumBandwidth %s; the " ..
                "bytes look like the spec's section 4.3 example layout, which would read " ..
                "MaximumBandwidth %s (at 80), BaseIoSize %d (at 88), Reserved %d (at 92)",
                s.base_io_size, s.reserved2, tostring(bw), tostring(alt_bw), alt_base,
                alt_reserved))
        end
    end
end

local function parse_response(ba)
    local r = reader(ba)
    local out = {}
    local pv = r.u16(0)
    local d = pv and dialect_of(pv)
    local len = (d == "1.1") and 96 or 88
    if pv and not d then version_finding(out, "response", pv) end
    if not pv or not r.have(0, len) then
        table.insert(out, 1, {
            code = "sqos.short_buffer", severity = SEVERITY["sqos.short_buffer"],
            message = string.format(
                "buffer of %d bytes is shorter than the %d-byte fixed part of a %s response",
                r.len, len, dialect_label(d)) })
        return nil, out
    end
    local s = {
        protocol_version = pv, dialect = d, reserved = r.u16(2), options = r.u32(4),
        flow = r.guid(8), policy = r.guid(24), initiator = r.guid(40), ttl = r.u32(56),
        status = r.u32(60), maximum_io_rate = r.u64(64), minimum_io_rate = r.u64(72),
        base_io_size = r.u32(80), reserved2 = r.u32(84),
    }
    if d == "1.1" then s.maximum_bandwidth = r.u64(88) end
    check_response(s, out)
    if r.len > len then
        finding(out, "sqos.trailing_bytes", string.format(
            "%d bytes after the end of the response at offset %d", r.len - len, len))
    end
    return s, out
end

-- rules.rs check_max_output
local function check_max_output(q, max_out, out)
    if not has(q.options, OPT.GET_STATUS) or max_out == nil then return end
    local d = q.dialect or "1.0"
    local needed = (d == "1.1") and 96 or 88
    if max_out >= needed then return end
    local text
    if max_out < SPEC_TEXT_RESPONSE_SIZE then
        text = "below even the spec text's 80, so the server MUST fail it with " ..
            "STATUS_INVALID_PARAMETER"
    else
        text = "the spec text's minimum is 80, but the structure does not fit"
    end
    finding(out, "sqos.max_output_too_small", string.format(
        "GET_STATUS request with MaxOutputResponse %d, smaller than the %d-byte dialect %s " ..
        "response; %s", max_out, needed, d, text))
end

-- rules.rs check_response_against_request
local function check_response_against_request(q, s, out)
    if q.protocol_version ~= s.protocol_version then
        finding(out, "sqos.response_version_mismatch", string.format(
            "response ProtocolVersion 0x%04X differs from the request's 0x%04X",
            s.protocol_version, q.protocol_version))
    end
    local opts = q.options
    if not has(opts, OPT.GET_STATUS) then
        finding(out, "sqos.response_without_get_status", string.format(
            "a response buffer answers a request without GET_STATUS (Options 0x%08X); the " ..
            "server sends one only for GET_STATUS", opts))
    end
    local probe_only = has(opts, OPT.PROBE_POLICY) and not has(opts, OPT.SET_LOGICAL_FLOW_ID)
    if q.flow ~= NULL_GUID and not probe_only and q.flow ~= s.flow then
        finding(out, "sqos.response_flow_id_mismatch", string.format(
            "response LogicalFlowID %s differs from the request's %s", s.flow, q.flow))
    end
    if has(opts, OPT.SET_POLICY) then
        for _, t in ipairs({ { "PolicyID", q.policy, s.policy },
                             { "InitiatorID", q.initiator, s.initiator } }) do
            if t[2] ~= t[3] then
                finding(out, "sqos.response_policy_mismatch", string.format(
                    "response %s %s differs from %s set by the SET_POLICY request", t[1], t[3],
                    t[2]))
            end
        end
    end
end

------------------------------------------------------------------------------------------------
-- State across the capture (rebuilt on every first pass; see sqosa.init)
------------------------------------------------------------------------------------------------
local S

local function reset_state()
    S = {
        frames = {},   -- frame number -> list of per-message results (what the tree shows)
        pending = {},  -- "stream:msg_id" -> request info, until its final response
        opens = {},    -- "stream:fid" -> LogicalFlowID the open is associated with
        flows = {},    -- LogicalFlowID -> flow state
        order = {},    -- LogicalFlowIDs in order of first appearance
    }
end
reset_state()

local function flow_state(id)
    local f = S.flows[id]
    if not f then
        f = { id = id, updates = 0, messages = 0, findings = 0, opens = {}, open_order = {},
              sum = { io = 0, nio = 0, lat = 0, lower = 0, kb = 0, kb_updates = 0 } }
        S.flows[id] = f
        S.order[#S.order + 1] = id
    end
    return f
end

local function note_open(f, open_key)
    if open_key and not f.opens[open_key] then
        f.opens[open_key] = true
        f.open_order[#f.open_order + 1] = open_key
    end
end

-- The flow's state shown on a message: a copy of the fields, taken after the message.
local function flow_snapshot(f)
    return { policy = f.policy, initiator = f.initiator, name = f.name, node = f.node,
             limit = f.limit, reservation = f.reservation, bandwidth_limit = f.bandwidth_limit,
             maximum_io_rate = f.maximum_io_rate, minimum_io_rate = f.minimum_io_rate,
             maximum_bandwidth = f.maximum_bandwidth, base_io_size = f.base_io_size,
             ttl = f.ttl, status = f.status, updates = f.updates }
end

-- A request's policy parameters become the flow's (SET_POLICY / PROBE_POLICY accepted).
local function apply_policy(f, q)
    f.policy, f.initiator = q.policy, q.initiator
    f.limit, f.reservation = q.limit, q.reservation
    if q.dialect == "1.1" then f.bandwidth_limit = q.bandwidth_limit end
    if q.name_len > 0 and q.name then f.name = q.name end
    if q.node_len > 0 and q.node then f.node = q.node end
end

-- An accepted UPDATE_COUNTERS request: the interval runs from the flow's previous accepted
-- update request to this one (request times: the client samples and resets its counters when
-- it sends). The first update only opens the series.
local function apply_counters(f, q, t, m)
    local io, nio = u64n(q.io), u64n(q.nio)
    local lat, lower = u64n(q.lat), u64n(q.lower)
    local kb = q.kb and u64n(q.kb)
    f.updates = f.updates + 1
    if f.last_update == nil then
        m.first_update = true
        f.first_update = t
    else
        local dt = t - f.last_update
        m.interval = dt
        if dt > 0 then
            m.iops = io / dt
            m.normalized_iops = nio / dt
            if kb then m.kbps = kb / dt end
        end
        f.sum.io = f.sum.io + io
        f.sum.nio = f.sum.nio + nio
        f.sum.lat = f.sum.lat + lat
        f.sum.lower = f.sum.lower + lower
        if kb then
            f.sum.kb = f.sum.kb + kb
            f.sum.kb_updates = f.sum.kb_updates + 1
        end
        f.last_interval_end = t
    end
    if io > 0 then
        m.latency_ms = lat / io / 10000
        m.lower_latency_ms = lower / io / 10000
    end
    f.last_update = t
end

------------------------------------------------------------------------------------------------
-- Extracting the SMB2 messages of a frame from Wireshark's fields (tree order)
------------------------------------------------------------------------------------------------
local function frame_messages()
    local msgs = {}
    local cur = nil
    local stream = nil
    for _, fi in ipairs({ all_field_infos() }) do
        local name = fi.name
        if WANTED[name] then
            if name == "tcp.stream" then
                stream = fi.value
            elseif name == "smb2" then
                cur = { stream = stream }
                msgs[#msgs + 1] = cur
            elseif cur then
                if name == "smb2.cmd" then
                    if cur.cmd == nil then cur.cmd = fi.value end
                elseif name == "smb2.flags.response" then
                    if cur.response == nil then cur.response = fi.value end
                elseif name == "smb2.msg_id" then
                    if cur.msg_id == nil then cur.msg_id = fi.value end
                elseif name == "smb2.nt_status" then
                    if cur.nt_status == nil then cur.nt_status = fi.value end
                elseif name == "smb2.ioctl.function" then
                    if cur.fsctl == nil then cur.fsctl = fi.value end
                elseif name == "smb2.fid" then
                    if cur.fsctl ~= nil and cur.fid == nil and fi.len == 16 then
                        cur.fid = guid_string(fi.range:bytes())
                    end
                elseif name == "smb2.max_ioctl_out_size" then
                    if cur.max_out == nil then cur.max_out = fi.value end
                elseif name == "smb2.ioctl.in" then
                    if cur.inbuf == nil then cur.inbuf = fi end
                elseif name == "smb2.ioctl.out" then
                    if cur.outbuf == nil then cur.outbuf = fi end
                end
            end
        end
    end
    return msgs
end

local function buffer_bytes(fi)
    if fi == nil or fi.len == 0 then return nil end
    return fi.range:bytes()
end

local function key(stream, x) return tostring(stream) .. ":" .. tostring(x) end

local ALL_FF = "ffffffff-ffff-ffff-ffff-ffffffffffff"

-- First pass over one SMB2 message: decode, match, track; gives what the tree shows, or nil.
local function analyse(msg, pinfo)
    if msg.cmd ~= 11 then return nil end -- IOCTL
    local t = pinfo.abs_ts
    local frame = pinfo.number
    local msg_id = msg.msg_id and msg.msg_id:tonumber() or nil
    local pkey = key(msg.stream, msg.msg_id)
    local m = { msg_id = msg.msg_id, findings = {}, frame = frame }

    if not msg.response then
        if msg.fsctl ~= FSCTL_STORAGE_QOS_CONTROL then return nil end
        m.direction = "request"
        m.fid = msg.fid
        local ba = buffer_bytes(msg.inbuf)
        local q, found
        if ba then
            q, found = parse_request(ba)
        else
            q, found = parse_request(ByteArray.new())
        end
        m.findings = found
        m.req = q
        if q then
            check_max_output(q, msg.max_out, m.findings)
            m.options = q.options
            m.dialect = q.dialect
        end
        local open_key = msg.fid and msg.fid ~= ALL_FF and key(msg.stream, msg.fid) or nil
        -- The flow the request is about: the one it joins, else the open's, else its own.
        local flow, source = nil, nil
        if q and q.flow ~= NULL_GUID and
            (has(q.options, OPT.SET_LOGICAL_FLOW_ID) or has(q.options, OPT.PROBE_POLICY)) then
            flow, source = q.flow, "message"
        elseif open_key and S.opens[open_key] then
            flow, source = S.opens[open_key], "open"
        elseif q and q.flow ~= NULL_GUID then
            flow, source = q.flow, "message"
        end
        m.flow, m.flow_source = flow, source
        if flow then
            local f = flow_state(flow)
            f.messages = f.messages + 1
            f.findings = f.findings + #m.findings
            m.flow_state = flow_snapshot(f)
        end
        S.pending[pkey] = { frame = frame, time = t, req = q, fid = msg.fid, stream = msg.stream,
                            result = m }
        return m
    end

    -- A response: SQOS when it carries the FSCTL or answers a pending SQOS request.
    local p = S.pending[pkey]
    if p == nil and msg.fsctl ~= FSCTL_STORAGE_QOS_CONTROL then return nil end
    m.direction = "response"
    m.nt_status = msg.nt_status or 0
    m.fid = msg.fid or (p and p.fid)
    if m.nt_status == STATUS_PENDING and msg.outbuf == nil then
        m.interim = true
    end
    if p then
        m.request_frame = p.frame
        -- Timestamps are doubles here: round to the nanosecond of the capture format.
        m.response_time = math.floor((t - p.time) * 1e9 + 0.5) / 1e9
    end
    -- As the Rust pipeline: an output buffer counts with STATUS_SUCCESS or BUFFER_OVERFLOW.
    local ba = nil
    if m.nt_status == 0 or m.nt_status == STATUS_BUFFER_OVERFLOW then
        ba = buffer_bytes(msg.outbuf)
    end
    local s = nil
    if ba then
        local found
        s, found = parse_response(ba)
        m.findings = found
        m.resp = s
        if s then
            m.status = s.status
            m.dialect = s.dialect
            if p and p.req then check_response_against_request(p.req, s, m.findings) end
        end
    end
    if m.interim then
        -- The final response comes later with the same MessageId.
        return m
    end
    if p then
        S.pending[pkey] = nil
        p.result.response_frame = frame
        p.result.response_time = m.response_time
        -- A related compound request names its open only as all-FF: the answer tells which.
        if p.result.fid == ALL_FF and m.fid and m.fid ~= ALL_FF then p.result.fid = m.fid end
    end

    -- Which open and flow.
    local fid = m.fid
    if (fid == nil or fid == ALL_FF) and p then fid = p.fid end
    local open_key = fid and fid ~= ALL_FF and key(msg.stream, fid) or nil
    local q = p and p.req or nil
    local success = m.nt_status == 0
    local flow = open_key and S.opens[open_key] or nil
    local source = flow and "open" or nil

    if success and q then
        local opts = q.options
        -- Association (3.2.5.1.1); PROBE_POLICY only when the open has none.
        if has(opts, OPT.SET_LOGICAL_FLOW_ID) then
            if q.flow == NULL_GUID then
                if open_key then S.opens[open_key] = nil end
                flow = nil
            else
                if open_key then S.opens[open_key] = q.flow end
                flow = q.flow
            end
            source = "open"
        elseif has(opts, OPT.PROBE_POLICY) and flow == nil and q.flow ~= NULL_GUID then
            if open_key then S.opens[open_key] = q.flow end
            flow, source = q.flow, "open"
            apply_policy(flow_state(flow), q)
        end
        if flow == nil and q.flow ~= NULL_GUID then
            -- Association not seen (capture started later): go by what the request says.
            flow, source = q.flow, "message"
        end
    end
    if flow == nil and s and s.flow ~= NULL_GUID then flow, source = s.flow, "message" end
    if flow == nil and q and q.flow ~= NULL_GUID then flow, source = q.flow, "message" end
    m.flow, m.flow_source = flow, source

    if flow then
        local f = flow_state(flow)
        note_open(f, open_key)
        f.messages = f.messages + 1
        f.findings = f.findings + #m.findings
        if success and q then
            if has(q.options, OPT.SET_POLICY) then apply_policy(f, q) end
            if has(q.options, OPT.UPDATE_COUNTERS) then
                apply_counters(f, q, p.time, m)
                -- The request's frame shows the same figures when displayed later.
                for _, k in ipairs({ "interval", "iops", "normalized_iops", "latency_ms",
                                     "lower_latency_ms", "kbps", "first_update" }) do
                    p.result[k] = m[k]
                end
            end
            f.dialect = q.dialect or f.dialect
        end
        if success and s then
            f.maximum_io_rate, f.minimum_io_rate = s.maximum_io_rate, s.minimum_io_rate
            f.maximum_bandwidth = s.maximum_bandwidth or f.maximum_bandwidth
            f.base_io_size, f.ttl, f.status = s.base_io_size, s.ttl, s.status
            f.dialect = s.dialect or f.dialect
            if f.initiator == nil then f.initiator = s.initiator end
            if f.policy == nil then f.policy = s.policy end
        end
        m.flow_state = flow_snapshot(f)
    end
    return m
end

------------------------------------------------------------------------------------------------
-- The tree
------------------------------------------------------------------------------------------------
local function add_u64(tree, field, v)
    if v ~= nil then tree:add(field, v):set_generated() end
end

local function show(m, tree)
    local label = string.format("SQOS analysis: %s, MessageId %s", m.direction, tostring(m.msg_id))
    if m.flow then label = label .. ", flow " .. m.flow end
    local t = tree:add(sqosa, label)
    t:set_generated()
    local function gen(field, v)
        if v ~= nil then t:add(field, v):set_generated() end
    end
    gen(F.direction, m.direction)
    gen(F.msg_id, m.msg_id)
    if m.interim then gen(F.interim, true) end
    if m.nt_status then gen(F.nt_status, m.nt_status) end
    gen(F.file_id, m.fid)
    gen(F.flow, m.flow)
    gen(F.flow_source, m.flow_source)
    gen(F.request_frame, m.request_frame)
    gen(F.response_frame, m.response_frame)
    gen(F.response_time, m.response_time)
    gen(F.dialect, m.dialect)
    if m.options then
        gen(F.options, m.options)
        gen(F.option_names, option_names(m.options))
    end
    if m.status then
        gen(F.status, m.status)
        gen(F.status_name, STATUS_NAMES[m.status])
    end
    if m.first_update then gen(F.first_update, true) end
    gen(F.interval, m.interval)
    gen(F.iops, m.iops)
    gen(F.normalized_iops, m.normalized_iops)
    gen(F.latency_ms, m.latency_ms)
    gen(F.lower_latency_ms, m.lower_latency_ms)
    gen(F.kbps, m.kbps)
    local fs = m.flow_state
    if fs then
        local ft = t:add(F.flow_state)
        ft:set_text("Logical flow " .. m.flow .. " (after this message)")
        ft:set_generated()
        local function fgen(field, v)
            if v ~= nil then ft:add(field, v):set_generated() end
        end
        fgen(F.f_policy, fs.policy)
        fgen(F.f_initiator, fs.initiator)
        fgen(F.f_name, fs.name)
        fgen(F.f_node, fs.node)
        add_u64(ft, F.f_limit, fs.limit)
        add_u64(ft, F.f_reservation, fs.reservation)
        add_u64(ft, F.f_bw_limit, fs.bandwidth_limit)
        add_u64(ft, F.f_max_rate, fs.maximum_io_rate)
        add_u64(ft, F.f_min_rate, fs.minimum_io_rate)
        add_u64(ft, F.f_max_bw, fs.maximum_bandwidth)
        fgen(F.f_base, fs.base_io_size)
        fgen(F.f_ttl, fs.ttl)
        fgen(F.f_status, fs.status)
        if fs.status then fgen(F.f_status_name, STATUS_NAMES[fs.status]) end
        fgen(F.f_updates, fs.updates)
    end
    gen(F.finding_count, #m.findings)
    for _, fd in ipairs(m.findings) do
        local item = t:add(F.finding, fd.code)
        item:set_generated()
        local e = EXPERT[fd.code]
        if e then
            item:add_proto_expert_info(e, "[" .. fd.code .. "] " .. fd.message)
        end
    end
end

function sqosa.dissector(tvb, pinfo, tree)
    local results
    if pinfo.visited then
        results = S.frames[pinfo.number]
    else
        -- First pass (and every pass in single-pass tshark): compute and remember.
        results = {}
        for _, msg in ipairs(frame_messages()) do
            local m = analyse(msg, pinfo)
            if m then results[#results + 1] = m end
        end
        if #results > 0 then S.frames[pinfo.number] = results else results = nil end
    end
    if results == nil then return end
    for _, m in ipairs(results) do show(m, tree) end
end

function sqosa.init()
    reset_state()
end

register_postdissector(sqosa)

------------------------------------------------------------------------------------------------
-- Flow summary: tshark (tap draw, when asked) and Wireshark (Statistics > SQOS Flows)
------------------------------------------------------------------------------------------------
local function quote(s)
    return '"' .. tostring(s):gsub('\\', '\\\\'):gsub('"', '\\"') .. '"'
end

-- Whole-capture figures: sums of increments after the first update over the time from the
-- first to the last update.
local function flow_rates(f)
    local r = {}
    if f.first_update and f.last_interval_end then
        local span = f.last_interval_end - f.first_update
        if span > 0 then
            r.iops = f.sum.io / span
            r.normalized_iops = f.sum.nio / span
            if f.sum.kb_updates > 0 then r.kbps = f.sum.kb / span end
        end
        if f.sum.io > 0 then
            r.latency_ms = f.sum.lat / f.sum.io / 10000
            r.lower_latency_ms = f.sum.lower / f.sum.io / 10000
        end
    end
    return r
end

local function summary_lines()
    local lines = { string.format("SQOS flows (sqosa %s): %d", SQOSA_VERSION, #S.order) }
    for _, id in ipairs(S.order) do
        local f = S.flows[id]
        local r = flow_rates(f)
        local parts = { "flow " .. id }
        local function kv(k, v, is_string)
            if v == nil then return end
            if is_string then v = quote(v) elseif type(v) == "number" then v = fmt_num(v)
            else v = tostring(v) end
            parts[#parts + 1] = k .. "=" .. v
        end
        kv("initiator_name", f.name, true)
        kv("initiator_node_name", f.node, true)
        kv("initiator_id", f.initiator)
        kv("policy_id", f.policy)
        kv("dialect", f.dialect)
        kv("opens", #f.open_order)
        kv("limit", f.limit)
        kv("reservation", f.reservation)
        kv("bandwidth_limit", f.bandwidth_limit)
        kv("maximum_io_rate", f.maximum_io_rate)
        kv("minimum_io_rate", f.minimum_io_rate)
        kv("maximum_bandwidth", f.maximum_bandwidth)
        kv("base_io_size", f.base_io_size)
        kv("time_to_live", f.ttl)
        kv("last_status", f.status)
        if f.status then kv("last_status_name", STATUS_NAMES[f.status] or "unknown", true) end
        kv("updates", f.updates)
        kv("iops", r.iops)
        kv("normalized_iops", r.normalized_iops)
        kv("avg_latency_ms", r.latency_ms)
        kv("avg_lower_latency_ms", r.lower_latency_ms)
        kv("kilobytes_per_second", r.kbps)
        kv("messages", f.messages)
        kv("findings", f.findings)
        lines[#lines + 1] = table.concat(parts, " ")
    end
    return lines
end

local tap = Listener.new("frame", "sqosa")
function tap.draw()
    if flows_requested() and not gui_enabled() then
        print("=" .. string.rep("=", 79))
        for _, l in ipairs(summary_lines()) do print(l) end
        print("=" .. string.rep("=", 79))
    end
end

if gui_enabled() then
    register_menu("SQOS Flows", function()
        local w = TextWindow.new("SQOS Flows")
        w:set(table.concat(summary_lines(), "\n") .. "\n")
        w:add_button("Refresh", function()
            w:set(table.concat(summary_lines(), "\n") .. "\n")
        end)
    end, MENU_STAT_GENERIC)
end
