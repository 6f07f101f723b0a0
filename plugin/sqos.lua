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

-- Flow finding codes of the Rust analysis (src/analysis/finding.rs `FlowFindingCode::as_str`).
-- Their severity depends on the case (e.g. a product-note rule is a warning, a normative one an
-- error), so each is registered with every severity.
-- BEGIN FLOW FINDING CODES
local FLOW_CODES = {
    "flow.exceeds_max_io_rate",
    "flow.exceeds_max_bandwidth",
    "flow.reservation_not_met",
    "flow.counters_mismatch",
    "flow.status_poll_late",
    "flow.no_status_after_set_policy",
    "flow.server_should_have_failed",
    "flow.server_wrongly_failed",
    "flow.server_wrong_error",
    "flow.server_state_mismatch",
    "flow.server_qos_unsupported",
    "flow.request_unanswered",
    "flow.multiple_initiators",
    -- sqos only: its memory budget forgot requests of the flow (the plugin keeps no such bound)
    "flow.memory_bound",
}
-- END FLOW FINDING CODES

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
    flow_finding = ProtoField.string("sqosa.flow_finding", "Flow finding", base.ASCII,
        "stable flow finding code, as in `sqos flows` JSON"),
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
local FLOW_EXPERT = {}
for _, code in ipairs(FLOW_CODES) do
    for _, sev in ipairs({ "error", "warning", "note" }) do
        local e = ProtoExpert.new("sqosa." .. code .. "." .. sev, code, expert.group.SEQUENCE,
            EXPERT_SEVERITY[sev])
        FLOW_EXPERT[code .. "/" .. sev] = e
        expert_list[#expert_list + 1] = e
    end
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
               "smb2.ioctl.out", "smb2.sesid", "smb2.read_length", "smb2.write_length",
               "tcp.stream" }
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
-- Flow analysis: a port of src/analysis (analyzer.rs, flow.rs, rules.rs, checks.rs,
-- interval.rs), fed like the Rust analyzer with SQOS requests/responses, CREATE, CLOSE and
-- completed READ/WRITE in frame order. Definitions: docs/analysis.md. Times are seconds since
-- the first frame (pinfo.rel_ts), so differences keep nanosecond precision.
------------------------------------------------------------------------------------------------
local NIL_FLOW = NULL_GUID
local S -- the state; reset_state() below
local UNKNOWN, NOT_ASSOCIATED = "unknown", "none"

local NT = { SUCCESS = 0x00000000, INVALID_PARAMETER = 0xC000000D,
             INVALID_DEVICE_REQUEST = 0xC0000010, REVISION_MISMATCH = 0xC0000059,
             NOT_SUPPORTED = 0xC00000BB, NOT_FOUND = 0xC0000225 }
local NT_NAMES = {
    [0x00000000] = "STATUS_SUCCESS", [0xC000000D] = "STATUS_INVALID_PARAMETER",
    [0xC0000010] = "STATUS_INVALID_DEVICE_REQUEST", [0xC0000059] = "STATUS_REVISION_MISMATCH",
    [0xC00000BB] = "STATUS_NOT_SUPPORTED", [0xC0000225] = "STATUS_NOT_FOUND",
}
local function nt_name(s) return NT_NAMES[s] or string.format("0x%08x", s) end

-- Tolerances and bounds: src/analysis/config.rs defaults.
local TOL = { rate_rel = 0.10, rate_abs = 1.0, burst_secs = 0.25, backlog_ms = 1.0,
              min_window_secs = 0.5, counters_rel = 0.05,
              counters_abs = 2.0, poll_grace_rel = 0.25, poll_grace_min_secs = 0.5,
              set_policy_status_secs = 1.0, set_policy_grace_secs = 0.25,
              unanswered_grace_secs = 5.0 }
local MAX_UNFINISHED = 4
local MAX_INITIATORS = 4
local DEFAULT_STATUS_INTERVAL_MS = 1000
local DEFAULT_BASE_IO_SIZE = 8192

local A = {} -- the analysis functions (a table keeps the upvalue count of each function low)

-- Counters / rates (interval.rs) ----------------------------------------------------------------
function A.counters(q)
    if q == nil then return { io = 0, nio = 0, lat = 0, lower = 0, kb = nil } end
    return { io = u64n(q.io), nio = u64n(q.nio), lat = u64n(q.lat), lower = u64n(q.lower),
             kb = q.kb and u64n(q.kb) or nil }
end

function A.counters_add(a, b)
    a.io, a.nio = a.io + b.io, a.nio + b.nio
    a.lat, a.lower = a.lat + b.lat, a.lower + b.lower
    if a.kb ~= nil or b.kb ~= nil then a.kb = (a.kb or 0) + (b.kb or 0) end
end

function A.rates(c, secs)
    if secs == nil or secs <= 0 then return nil end
    local r = { iops = c.io / secs, normalized_iops = c.nio / secs }
    if c.kb then r.kbps = c.kb / secs end
    if c.io > 0 then
        r.latency_ms = c.lat / c.io / 10000
        r.lower_latency_ms = c.lower / c.io / 10000
    end
    return r
end

function A.normalized_io_size(bytes, base)
    if base == 0 then base = DEFAULT_BASE_IO_SIZE end
    return math.floor((bytes + base - 1) / base)
end

function A.observed() return { io = 0, nio = 0, bytes = 0, response = 0 } end

function A.observed_add_io(o, bytes, base, rt)
    o.io = o.io + 1
    o.nio = o.nio + A.normalized_io_size(bytes, base)
    o.bytes = o.bytes + bytes
    if rt > 0 then o.response = o.response + rt end
end

function A.observed_add(a, b)
    a.io, a.nio, a.bytes, a.response = a.io + b.io, a.nio + b.nio, a.bytes + b.bytes,
        a.response + b.response
end

function A.observed_rates(o, secs)
    if secs == nil or secs <= 0 then return nil end
    local r = { iops = o.io / secs, normalized_iops = o.nio / secs,
                kbps = o.bytes / 1024 / secs }
    if o.io > 0 then r.avg_response_ms = o.response / o.io * 1000 end
    return r
end

function A.effect() return { status_known = false, all_ok = false } end

function A.effect_merge(a, b)
    local function max(x, y)
        if x and y then return math.max(x, y) end
        return x or y
    end
    a.max_rate = max(a.max_rate, b.max_rate)
    a.max_bw = max(a.max_bw, b.max_bw)
    if a.min_rate and b.min_rate then a.min_rate = math.min(a.min_rate, b.min_rate)
    else a.min_rate = a.min_rate or b.min_rate end
    if a.status_known and b.status_known then a.all_ok = a.all_ok and b.all_ok
    elseif not a.status_known then a.all_ok = b.all_ok end
    a.status_known = a.status_known or b.status_known
end

function A.server_effect(v)
    return { max_rate = v.maximum_io_rate, min_rate = v.minimum_io_rate,
             max_bw = v.maximum_bandwidth, status_known = true, all_ok = v.status == 0 }
end

function A.copy(t)
    local c = {}
    for k, v in pairs(t) do c[k] = v end
    return c
end

-- Findings --------------------------------------------------------------------------------------
-- A flow finding is kept on its flow (for the summary) and shown on the message being analysed
-- when it is found (S.current); its `frame` is where the Rust analysis puts it.
function A.add_finding(f, fd)
    f.findings[#f.findings + 1] = fd
    if S.current then
        S.current[#S.current + 1] = fd
    elseif S.finished then
        -- Found at the end of the capture: shown on its frame when Wireshark redisplays it.
        local results = S.frames[fd.frame] or {}
        S.frames[fd.frame] = results
        local last = results[#results]
        if last == nil or last.direction ~= nil then
            last = { findings = {}, flow_findings = {} }
            results[#results + 1] = last
        end
        last.flow_findings[#last.flow_findings + 1] = fd
    end
end

function A.finding(f, code, severity, message, frame, t)
    A.add_finding(f, { flow = f.id, code = code, severity = severity, message = message,
                       frame = frame, time = t, occurrences = 1, last_frame = frame })
end

-- Flows (flow.rs) -------------------------------------------------------------------------------
function A.flow_mut(id, frame, t)
    local f = S.flows[id]
    if f == nil then
        f = { id = id, first_frame = frame, opens_total = 0, updates_sent = 0,
              updates_applied = 0, intervals = 0,
              whole = A.counters(nil), whole_secs = 0, whole_obs = A.observed(),
              whole_obs_secs = 0, all_io = A.observed(), late_io = 0,
              current = A.observed(), current_effect = A.effect(), current_inferred = false,
              unfinished = {}, next_index = 0, initiator_ids = {}, node_names = {},
              episodes = {}, once = {}, findings = {}, insufficient = false }
        S.flows[id] = f
        S.order[#S.order + 1] = id
    end
    return f
end

function A.base_io_size(f)
    if f.server and f.server.base_io_size > 0 then return f.server.base_io_size end
    return DEFAULT_BASE_IO_SIZE
end

-- A request of the flow, when it is sent: the client zeroes its counters when it sends an
-- update, so every UPDATE_COUNTERS ends an interval, whatever the answer.
function A.flow_on_request(f, q, frame, t)
    if q.dialect then f.protocol_version = q.protocol_version end
    if has(q.options, OPT.GET_STATUS) then
        f.last_status_request = t
        f.status_due = nil
        if f.policy_due and t >= f.policy_due.set_at then f.policy_due = nil end
    end
    if has(q.options, OPT.UPDATE_COUNTERS) then A.boundary(f, t, frame) end
end

function A.boundary(f, t, frame)
    f.updates_sent = f.updates_sent + 1
    if f.boundary == nil then
        f.first_update = { frame = frame, t = t }
    else
        local row = { index = f.next_index, intervals = 1, start = f.boundary.t, stop = t,
                      start_frame = f.boundary.frame, end_frame = frame, updates_applied = 0,
                      reported = A.counters(nil), reported_secs = 0, observed = f.current,
                      observed_complete = not f.current_inferred,
                      in_effect = f.current_effect }
        f.next_index = f.next_index + 1
        f.unfinished[#f.unfinished + 1] = { row = row, awaiting = true }
    end
    f.boundary = { t = t, frame = frame }
    f.current = A.observed()
    f.current_effect = f.server and A.server_effect(f.server) or A.effect()
    f.current_inferred = false
end

-- The answer to the UPDATE_COUNTERS sent in `request_frame`; `applied` its counters when the
-- server applied them. Gives the row's rates for the message (nil for the first update).
function A.update_answered(f, request_frame, applied)
    if applied then f.updates_applied = f.updates_applied + 1 end
    if f.first_update and f.first_update.frame == request_frame then
        f.first_update.counters = applied
        return nil, true
    end
    for _, p in ipairs(f.unfinished) do
        if p.row.end_frame == request_frame then
            p.awaiting = false
            if applied then
                p.row.reported = applied
                p.row.reported_secs = p.row.stop - p.row.start
                p.row.updates_applied = 1
                local r = A.rates(applied, p.row.reported_secs)
                if r then r.interval = p.row.reported_secs end
                return r, false
            end
            return nil, false
        end
    end
    return nil, false
end

function A.apply_policy(f, q, frame, t)
    f.policy = { policy_id = q.policy, initiator_id = q.initiator, limit = q.limit,
                 reservation = q.reservation, bandwidth_limit = q.bandwidth_limit }
    if q.name_len > 0 and q.name then f.initiator_name = q.name end
    if q.node_len > 0 and q.node then
        f.initiator_node_name = q.node
        A.note_listed(f, f.node_names, q.node, "node", frame, t)
    end
    if q.initiator ~= NULL_GUID then
        f.initiator_id = q.initiator
        A.note_listed(f, f.initiator_ids, q.initiator, "id", frame, t)
    end
end

function A.note_listed(f, list, v, what, frame, t)
    for _, x in ipairs(list) do if x == v then return end end
    if #list >= MAX_INITIATORS then return end
    list[#list + 1] = v
    if #list > 1 and not f.once[what] then
        f.once[what] = true
        if what == "id" then
            A.finding(f, "flow.multiple_initiators", "warning",
                "the flow was set up by several initiators: " .. table.concat(list, ", "), frame, t)
        else
            A.finding(f, "flow.multiple_initiators", "note",
                "the flow was seen on several nodes (e.g. a migration): " ..
                table.concat(list, ", "), frame, t)
        end
    end
end

-- A successful GET_STATUS answer (section 3.1.5.1).
function A.apply_server(f, s, frame, t)
    local v = { protocol_version = s.protocol_version, policy_id = s.policy,
                initiator_id = s.initiator, time_to_live = s.ttl, status = s.status,
                maximum_io_rate = u64n(s.maximum_io_rate),
                minimum_io_rate = u64n(s.minimum_io_rate), base_io_size = s.base_io_size,
                maximum_bandwidth = s.maximum_bandwidth and u64n(s.maximum_bandwidth) or nil }
    A.effect_merge(f.current_effect, A.server_effect(v))
    if v.status == 1 and not f.insufficient then
        A.finding(f, "flow.reservation_not_met", "warning", string.format(
            "the server reports StorageQoSStatusInsufficientThroughput: it cannot give " ..
            "MinimumIoRate %d", v.minimum_io_rate), frame, t)
    end
    f.insufficient = v.status == 1
    f.server = v
    local ttl_ms = v.time_to_live
    if ttl_ms <= DEFAULT_STATUS_INTERVAL_MS then ttl_ms = DEFAULT_STATUS_INTERVAL_MS end
    local ttl = ttl_ms / 1000
    local grace = math.max(TOL.poll_grace_min_secs, TOL.poll_grace_rel * ttl)
    f.status_due = { due = t + ttl, late_after = t + ttl + grace, ttl_ms = ttl_ms,
                     response_frame = frame, busy = false }
end

function A.note_unsupported(f, status, frame, t)
    if f.once.unsupported then return end
    f.once.unsupported = true
    A.finding(f, "flow.server_qos_unsupported", "note",
        "the server does not support Storage QoS: it answered " .. status, frame, t)
end

-- A READ/WRITE completed on one of the flow's opens; bucketed by the frame that completed its
-- response (`frame`): it belongs to the first update sent after it.
function A.add_io(f, req_t, resp_t, bytes, frame)
    local base = A.base_io_size(f)
    local rt = resp_t - req_t
    A.observed_add_io(f.all_io, bytes, base, rt)
    if f.io_span == nil then f.io_span = { req_t, req_t }
    else f.io_span = { math.min(f.io_span[1], req_t), math.max(f.io_span[2], req_t) } end
    if f.boundary ~= nil then
        if frame > f.boundary.frame then
            A.observed_add_io(f.current, bytes, base, rt)
        else
            local placed = false
            for _, p in ipairs(f.unfinished) do
                if p.row.start_frame < frame and frame <= p.row.end_frame then
                    A.observed_add_io(p.row.observed, bytes, base, rt)
                    placed = true
                    break
                end
            end
            if not placed then f.late_io = f.late_io + 1 end
        end
    end
    A.check_status_due(f, req_t, frame)
end

function A.check_status_due(f, req_t, frame)
    local due = f.status_due
    if due == nil then return end
    if req_t <= due.late_after then
        if req_t >= due.due - 1 then due.busy = true end
        return
    end
    f.status_due = nil
    if due.busy then
        A.finding(f, "flow.status_poll_late", "warning", string.format(
            "no GET_STATUS within TimeToLive %d ms of the answer in frame %d while I/O went on " ..
            "(section 3.1.5.1)", due.ttl_ms, due.response_frame), frame, req_t)
    end
end

function A.arm_policy_due(f, set_at, frame)
    if f.last_status_request and f.last_status_request >= set_at then return end
    f.policy_due = { set_at = set_at, frame = frame,
                     due = set_at + TOL.set_policy_status_secs + TOL.set_policy_grace_secs }
    S.timers[#S.timers + 1] = { due = f.policy_due.due, flow = f.id }
end

function A.policy_due_expired(f, due)
    local p = f.policy_due
    if p == nil or p.due ~= due then return end
    f.policy_due = nil
    A.finding(f, "flow.no_status_after_set_policy", "warning", string.format(
        "no GET_STATUS within %s s of the SET_POLICY in frame %d (section 3.1.6)",
        fmt_num(TOL.set_policy_status_secs), p.frame), p.frame, p.set_at)
end

-- checks.rs: one finished interval.
function A.check_row(row)
    local out = {}
    local secs = row.stop - row.start
    local span = string.format("over %.2f s (frames %d–%d)", secs, row.start_frame,
        row.end_frame)
    local observed = A.observed_rates(row.observed, secs)
    local reported = A.rates(row.reported, row.reported_secs)
    local burst = secs > 0 and TOL.burst_secs / secs or 0
    local function above(rate, max)
        return rate > max * (1 + burst) * (1 + TOL.rate_rel) + TOL.rate_abs
    end
    local function below(rate, min) return rate < min * (1 - TOL.rate_rel) - TOL.rate_abs end
    local function issue(code, sev, msg) out[#out + 1] = { code = code, severity = sev,
                                                           message = msg } end
    if secs >= TOL.min_window_secs then
        local max = row.in_effect.max_rate
        if max and max > 0 then
            if observed and above(observed.normalized_iops, max) then
                issue("flow.exceeds_max_io_rate", "error", string.format(
                    "observed %.1f normalized IOPS %s above MaximumIoRate %d",
                    observed.normalized_iops, span, max))
            elseif reported and above(reported.normalized_iops, max) then
                issue("flow.exceeds_max_io_rate", "error", string.format(
                    "reported %.1f normalized IOPS %s above MaximumIoRate %d",
                    reported.normalized_iops, span, max))
            end
        end
        local maxbw = row.in_effect.max_bw
        if maxbw and maxbw > 0 then
            if observed and above(observed.kbps, maxbw) then
                issue("flow.exceeds_max_bandwidth", "error", string.format(
                    "observed %.1f KB/s %s above MaximumBandwidth %d KB/s", observed.kbps, span,
                    maxbw))
            elseif reported and reported.kbps and above(reported.kbps, maxbw) then
                issue("flow.exceeds_max_bandwidth", "error", string.format(
                    "reported %.1f KB/s %s above MaximumBandwidth %d KB/s", reported.kbps, span,
                    maxbw))
            end
        end
        local min = row.in_effect.min_rate
        -- Demand: the client queued its I/O ((Latency - LowerLatency) / IoCount).
        local backlog = nil
        if row.updates_applied > 0 and row.reported.io > 0 then
            backlog = math.max(row.reported.lat - row.reported.lower, 0) / row.reported.io / 10000
        end
        if min and min > 0 and observed and backlog and backlog >= TOL.backlog_ms then
            local ok = row.in_effect.status_known and row.in_effect.all_ok
            if ok and row.observed_complete and below(observed.normalized_iops, min) then
                issue("flow.reservation_not_met", "warning", string.format(
                    "observed %.1f normalized IOPS %s below MinimumIoRate %d while the status " ..
                    "is StorageQoSStatusOk and the client queued its I/O %.1f ms on average",
                    observed.normalized_iops, span, min, backlog))
            end
        end
    end
    if row.observed_complete and row.updates_applied == row.intervals and row.intervals > 0 then
        local rep, obs = row.reported, row.observed
        local function disagree(a, b)
            return math.abs(a - b) > math.max(TOL.counters_abs, TOL.counters_rel * math.max(a, b))
        end
        local diffs = {}
        if disagree(rep.io, obs.io) then
            diffs[#diffs + 1] = string.format("IoCountIncrement %d vs %d I/O seen", rep.io, obs.io)
        end
        if disagree(rep.nio, obs.nio) then
            diffs[#diffs + 1] = string.format("NormalizedIoCountIncrement %d vs %d seen", rep.nio,
                obs.nio)
        end
        if rep.kb then
            local seen = obs.bytes / 1024
            local slack = obs.io
            if math.abs(rep.kb - seen) > slack + math.max(TOL.counters_abs,
                    TOL.counters_rel * seen) then
                diffs[#diffs + 1] = string.format("KilobyteCountIncrement %d vs %.1f KB seen",
                    rep.kb, seen)
            end
        end
        if #diffs > 0 then
            issue("flow.counters_mismatch", "warning", string.format(
                "reported counters disagree with the wire %s: %s", span,
                table.concat(diffs, ", ")))
        end
    end
    return out
end

function A.finish_row(f, row)
    A.counters_add(f.whole, row.reported)
    f.whole_secs = f.whole_secs + row.reported_secs
    A.observed_add(f.whole_obs, row.observed)
    f.whole_obs_secs = f.whole_obs_secs + (row.stop - row.start)
    f.intervals = f.intervals + row.intervals
    local issues = A.check_row(row)
    -- Consecutive intervals with the same problem are one finding (an episode).
    local open = f.episodes
    f.episodes = {}
    for _, ep in ipairs(open) do
        local again = false
        for _, i in ipairs(issues) do if i.code == ep.code then again = true end end
        if again then
            ep.occurrences = ep.occurrences + 1
            ep.last_frame = row.end_frame
            f.episodes[#f.episodes + 1] = ep
        else
            A.add_finding(f, ep)
        end
    end
    for _, i in ipairs(issues) do
        local known = false
        for _, ep in ipairs(f.episodes) do if ep.code == i.code then known = true end end
        if not known then
            f.episodes[#f.episodes + 1] = { flow = f.id, code = i.code, severity = i.severity,
                message = i.message, frame = row.end_frame, time = row.stop, occurrences = 1,
                last_frame = row.end_frame }
        end
    end
end

function A.finalize(f, force)
    local latest = f.boundary and f.boundary.t
    while #f.unfinished > 0 do
        local front = f.unfinished[1]
        local ready = force or #f.unfinished > MAX_UNFINISHED or
            (not front.awaiting and latest ~= nil and front.row.stop < latest)
        if not ready then break end
        table.remove(f.unfinished, 1)
        A.finish_row(f, front.row)
    end
    if force then
        local eps = f.episodes
        f.episodes = {}
        for _, ep in ipairs(eps) do A.add_finding(f, ep) end
    end
end

function A.finalize_flow(id)
    local f = S.flows[id]
    if f then A.finalize(f, false) end
end

-- rules.rs: the server's rules (section 3.2.5.1, note <8>) on a request and its open's state.
local MIN_STATUS_OUTPUT = 80
function A.evaluate(q, request_size, max_out, before)
    local opts = q.options
    local v = {}
    local uncertain = false
    local function rule(status, severity, text)
        v[#v + 1] = { status = status, severity = severity, text = text }
    end
    if not q.dialect then
        rule(NT.REVISION_MISMATCH, "error", string.format(
            "ProtocolVersion 0x%04x is not 0x0100 or 0x0101 (section 3.2.5.1)",
            q.protocol_version))
    end
    if band(opts, OPT_KNOWN) == 0 then
        rule(NT.INVALID_PARAMETER, "error", string.format(
            "Options 0x%08x has no defined flag (section 3.2.5.1)", opts))
    end
    local associated_before = (before == UNKNOWN) and "maybe" or
        ((before == NOT_ASSOCIATED) and "no" or "yes")
    -- Section 3.2.5.1: PROBE_POLICY is ignored on an associated open.
    local probe
    if not has(opts, OPT.PROBE_POLICY) or associated_before == "yes" then probe = "no"
    elseif associated_before == "no" then probe = "yes"
    else probe = "maybe" end
    local set = has(opts, OPT.SET_LOGICAL_FLOW_ID)
    local id = q.flow
    local change, associated_after
    if set and id ~= NULL_GUID then change, associated_after = id, "yes"
    elseif probe ~= "no" and id ~= NULL_GUID then change, associated_after = id, "yes"
    elseif set then change, associated_after = "clear", "no"
    else change, associated_after = "keep", associated_before end
    if id == NULL_GUID and probe == "yes" then
        rule(NT.INVALID_PARAMETER, "error",
            "PROBE_POLICY with a null LogicalFlowID on an unassociated open (section 3.2.5.1.1)")
    elseif id == NULL_GUID and probe == "maybe" then
        uncertain = true
    end
    local function need_associated(status, text)
        if associated_after == "no" then rule(status, "error", text)
        elseif associated_after == "maybe" then uncertain = true end
    end
    local set_policy = has(opts, OPT.SET_POLICY)
    if set_policy then
        need_associated(NT.NOT_FOUND,
            "SET_POLICY on an open not associated to a logical flow (section 3.2.5.1.2)")
    end
    if set_policy or probe ~= "no" then
        local pr = {}
        for _, n in ipairs({ { "InitiatorName", q.name_off, q.name_len },
                             { "InitiatorNodeName", q.node_off, q.node_len } }) do
            if n[3] > NAME_SIZE then
                pr[#pr + 1] = { "error", string.format(
                    "%sLength %d > STORAGE_QOS_INITIATOR_NAME_SIZE 512 (section 3.2.5.1.2)", n[1],
                    n[3]) }
            end
            if n[3] > 0 and n[2] < SPEC_TEXT_MIN_NAME_OFFSET then
                pr[#pr + 1] = { "error", string.format(
                    "%sOffset %d < 104 with a non-zero length (section 3.2.5.1.2)", n[1], n[2]) }
            end
            if request_size and n[3] + n[2] > request_size then
                pr[#pr + 1] = { "error", string.format(
                    "%s ends beyond the %d-byte request (section 3.2.5.1.2)", n[1],
                    request_size) }
            end
        end
        local maxp = UInt64(MAX_POLICY_PARAMETER)
        local zero = UInt64(0)
        local bw = q.bandwidth_limit or zero
        local with_policy = q.policy ~= NULL_GUID
        for _, c in ipairs({
            { q.limit > maxp, "Limit > 1000000000" },
            { q.reservation > maxp, "Reservation > 1000000000" },
            { bw > maxp, "BandwidthLimit > 1000000000" },
            { q.limit > zero and q.reservation > q.limit,
              "Reservation greater than a non-zero Limit" },
            { q.limit > zero and with_policy, "Limit set together with a PolicyID" },
            { bw > zero and with_policy, "BandwidthLimit set together with a PolicyID" },
            { q.reservation > zero and with_policy, "Reservation set together with a PolicyID" },
        }) do
            if c[1] then
                pr[#pr + 1] = { "warning", c[2] ..
                    " (Windows rejects it, product note <8> of section 3.2.5.1.2)" }
            end
        end
        if set_policy or probe == "yes" then
            for _, x in ipairs(pr) do rule(NT.INVALID_PARAMETER, x[1], x[2]) end
        elseif #pr > 0 then
            uncertain = true
        end
    end
    if has(opts, OPT.UPDATE_COUNTERS) then
        need_associated(NT.NOT_FOUND, "UPDATE_COUNTERS on an open not associated to a logical " ..
            "flow (section 3.2.5.1.3)")
    end
    if has(opts, OPT.GET_STATUS) then
        if max_out and max_out < MIN_STATUS_OUTPUT then
            rule(NT.INVALID_PARAMETER, "error", string.format(
                "GET_STATUS with MaxOutputResponse %d < 80 (section 3.2.5.1.4)", max_out))
        end
        need_associated(NT.NOT_FOUND, "GET_STATUS on an open not associated to a logical " ..
            "flow (section 3.2.5.1.4)")
    end
    return { violations = v, uncertain = uncertain, change = change,
             applies_policy = set_policy or probe == "yes" or (probe == "maybe" and id ~= NULL_GUID) }
end

-- Opens (analyzer.rs) ---------------------------------------------------------------------------
function A.open_met(key)
    local o = S.opens[key]
    if o == nil then
        o = { assoc = UNKNOWN }
        S.opens[key] = o
    end
    return o
end

function A.assoc_flow(a)
    if a == UNKNOWN or a == NOT_ASSOCIATED then return nil end
    return a
end

function A.associate(key, flow, inferred, frame, t)
    local o = A.open_met(key)
    if o.assoc == flow then return end
    o.assoc = flow
    local f = A.flow_mut(flow, frame, t)
    f.opens_total = f.opens_total + 1
    if inferred then f.current_inferred = true end
end

function A.dissociate(key)
    local o = S.opens[key]
    if o then o.assoc = NOT_ASSOCIATED end
end

-- The flow a request concerns: the one it associates, else the open's, else (state unknown)
-- the one it names.
function A.request_flow(q, assoc)
    local named = (q.flow ~= NULL_GUID) and q.flow or nil
    if has(q.options, OPT.SET_LOGICAL_FLOW_ID) then return named, "message" end
    if assoc == NOT_ASSOCIATED then
        if has(q.options, OPT.PROBE_POLICY) and named then return named, "message" end
        return nil, nil
    end
    if assoc == UNKNOWN then return named, named and "message" or nil end
    return assoc, "open"
end

function A.advance(t)
    if S.clock == nil or t > S.clock then S.clock = t end
    A.fire_timers(t)
end

function A.fire_timers(now)
    while true do
        local best, bi = nil, nil
        for i, tm in ipairs(S.timers) do
            if tm.due < now and (best == nil or tm.due < best.due) then best, bi = tm, i end
        end
        if best == nil then return end
        table.remove(S.timers, bi)
        local f = S.flows[best.flow]
        if f then A.policy_due_expired(f, best.due) end
    end
end

function A.on_request(m, q, key, t, frame, request_size, max_out)
    local assoc = key and A.open_met(key).assoc or UNKNOWN
    local flow, source = nil, nil
    if q then flow, source = A.request_flow(q, assoc) end
    if q and flow then
        A.flow_on_request(A.flow_mut(flow, frame, t), q, frame, t)
        A.finalize_flow(flow)
    end
    m.flow, m.flow_source = flow, source
    return { frame = frame, t = t, key = key, req = q, request_size = request_size,
             max_out = max_out, flow = flow, result = m }
end

function A.status_answer(m, p, flow, inferred, s, frame, t)
    local home = flow or NIL_FLOW
    if s == nil then
        A.finding(A.flow_mut(home, frame, t), "flow.server_state_mismatch", "error", string.format(
            "GET_STATUS of frame %d succeeded without a STORAGE_QOS_CONTROL_RESPONSE " ..
            "(section 3.2.5.1.4)", p.frame), frame, t)
        return
    end
    local problems = {}
    if flow and not inferred and s.flow ~= flow then
        problems[#problems + 1] = string.format(
            "LogicalFlowID %s but the open is associated with %s", s.flow, flow)
    end
    local pv = flow and S.flows[flow] and S.flows[flow].policy
    if pv then
        if s.policy ~= pv.policy_id then
            problems[#problems + 1] = string.format("PolicyID %s but the flow's policy is %s",
                s.policy, pv.policy_id)
        end
        if s.initiator ~= pv.initiator_id then
            problems[#problems + 1] = string.format(
                "InitiatorID %s but the flow's initiator is %s", s.initiator, pv.initiator_id)
        end
    end
    if #problems > 0 then
        A.finding(A.flow_mut(home, frame, t), "flow.server_state_mismatch", "error",
            "GET_STATUS answer does not match the state (section 3.2.5.1.4): " ..
            table.concat(problems, "; "), frame, t)
    end
    if flow then A.apply_server(A.flow_mut(flow, frame, t), s, frame, t) end
end

-- The final response to a pending request (analyzer.rs on_response).
function A.on_response(m, p, s, nt, key, frame, t)
    local q = p.req
    key = p.key or key
    if key == nil or q == nil then return end
    local before = A.open_met(key).assoc
    local outcome = A.evaluate(q, p.request_size, p.max_out, before)
    local named = (q.flow ~= NULL_GUID) and q.flow or nil
    local home = p.flow or named or NIL_FLOW
    local opts = q.options
    if nt == NT.SUCCESS then
        local rule = outcome.violations[1]
        if rule then
            A.finding(A.flow_mut(home, frame, t), "flow.server_should_have_failed",
                rule.severity, string.format(
                    "STATUS_SUCCESS to the request in frame %d: %s; it must fail with %s",
                    p.frame, rule.text, nt_name(rule.status)), frame, t)
        end
        local unknown = before == UNKNOWN
        if outcome.change == "clear" then
            A.dissociate(key)
        elseif outcome.change ~= "keep" then
            A.associate(key, outcome.change,
                not has(opts, OPT.SET_LOGICAL_FLOW_ID) and unknown, frame, t)
        else
            local needs = has(opts, OPT.SET_POLICY) or has(opts, OPT.UPDATE_COUNTERS) or
                has(opts, OPT.GET_STATUS)
            local shown = (s and s.flow ~= NULL_GUID) and s.flow or p.flow
            if unknown and needs and shown then A.associate(key, shown, true, frame, t) end
        end
        local flow = A.assoc_flow(A.open_met(key).assoc) or p.flow
        if flow and outcome.applies_policy then
            local f = A.flow_mut(flow, frame, t)
            A.apply_policy(f, q, frame, t)
            if has(opts, OPT.SET_POLICY) and not has(opts, OPT.GET_STATUS) then
                A.arm_policy_due(f, p.t, p.frame)
            end
        end
        if has(opts, OPT.UPDATE_COUNTERS) and p.flow and S.flows[p.flow] then
            local r, first = A.update_answered(S.flows[p.flow], p.frame, A.counters(q))
            if first then m.first_update = true end
            if r then
                for k, v in pairs(r) do m[k] = v end
            end
        end
        if has(opts, OPT.GET_STATUS) then
            A.status_answer(m, p, flow, unknown, s, frame, t)
        end
    else
        local got = nt_name(nt)
        local prescribed = false
        for _, r in ipairs(outcome.violations) do
            if r.status == nt then prescribed = true end
        end
        if nt == NT.INVALID_DEVICE_REQUEST or nt == NT.NOT_SUPPORTED then
            -- Section 3.2.5.1: a server without Storage QoS fails everything this way, before
            -- any other rule.
            A.note_unsupported(A.flow_mut(home, frame, t), got, frame, t)
        elseif prescribed then
            -- The failure the spec prescribes.
        elseif outcome.violations[1] then
            local r = outcome.violations[1]
            A.finding(A.flow_mut(home, frame, t), "flow.server_wrong_error", "warning",
                string.format("the request in frame %d failed with %s; the spec prescribes %s " ..
                    "because %s", p.frame, got, nt_name(r.status), r.text), frame, t)
        elseif not outcome.uncertain then
            local unfounded = nt == NT.NOT_FOUND or nt == NT.REVISION_MISMATCH or
                (nt == NT.INVALID_PARAMETER and not outcome.applies_policy)
            if unfounded then
                A.finding(A.flow_mut(home, frame, t), "flow.server_wrongly_failed", "error",
                    string.format("the request in frame %d (%s) failed with %s though no rule " ..
                        "of section 3.2.5.1 applies", p.frame, option_names(opts), got), frame, t)
            end
        end
        if nt == NT.NOT_FOUND and before == UNKNOWN and outcome.change == "keep" then
            A.open_met(key).assoc = NOT_ASSOCIATED
        end
        if has(opts, OPT.UPDATE_COUNTERS) and p.flow and S.flows[p.flow] then
            local _, first = A.update_answered(S.flows[p.flow], p.frame, nil)
            if first then m.first_update = true end
        end
    end
    if p.flow then A.finalize_flow(p.flow) end
end

-- The request was not seen (capture began after it): learn what the answer shows.
function A.response_without_request(s, nt, key, frame, t)
    if s == nil or nt ~= NT.SUCCESS or s.flow == NULL_GUID then return end
    if key then
        local o = S.opens[key]
        if o == nil or o.assoc == UNKNOWN then A.associate(key, s.flow, true, frame, t) end
    end
    A.apply_server(A.flow_mut(s.flow, frame, t), s, frame, t)
end

-- End of the capture: unanswered requests, timers, unfinished intervals (for the summary).
function A.finish()
    if S.finished then return end
    S.finished = true
    S.current = nil
    local unanswered = {}
    for _, p in pairs(S.pending) do unanswered[#unanswered + 1] = p end
    table.sort(unanswered, function(a, b) return a.frame < b.frame end)
    for _, p in ipairs(unanswered) do
        local waited = (S.clock or p.t) - p.t
        if waited >= TOL.unanswered_grace_secs then
            local named = p.req and p.req.flow ~= NULL_GUID and p.req.flow or nil
            local home = p.flow or named or NIL_FLOW
            local what = p.req and option_names(p.req.options) or "undecoded"
            A.finding(A.flow_mut(home, p.frame, p.t), "flow.request_unanswered", "warning",
                string.format("the request in frame %d (%s) got no response in the %.1f s the " ..
                    "capture went on", p.frame, what, waited), p.frame, p.t)
        end
    end
    if S.clock then A.fire_timers(S.clock + 1e-9) end
    for _, id in ipairs(S.order) do A.finalize(S.flows[id], true) end
end

------------------------------------------------------------------------------------------------
-- State across the capture (rebuilt on every first pass; see sqosa.init)
------------------------------------------------------------------------------------------------
local function reset_state()
    S = {
        frames = {},     -- frame number -> list of per-message results (what the tree shows)
        pending = {},    -- "stream:msg_id" -> SQOS request waiting for its final response
        io_pending = {}, -- "stream:msg_id" -> READ/WRITE request waiting for its response
        close_pending = {}, -- "stream:msg_id" -> open key of a CLOSE request
        opens = {},      -- open key -> { assoc = "unknown" | "none" | LogicalFlowID }
        flows = {},      -- LogicalFlowID -> flow state
        order = {},      -- LogicalFlowIDs in order of first appearance
        timers = {},     -- SET_POLICY -> GET_STATUS deadlines
        clock = nil, current = nil, finished = false,
        frames_read = 0, -- frames seen by the first pass (the flows window says how many)
    }
end
reset_state()

------------------------------------------------------------------------------------------------
-- Extracting the SMB2 messages of a frame from Wireshark's fields (tree order)
------------------------------------------------------------------------------------------------
local FIRST_OF = { ["smb2.cmd"] = "cmd", ["smb2.flags.response"] = "response",
                   ["smb2.msg_id"] = "msg_id", ["smb2.nt_status"] = "nt_status",
                   ["smb2.sesid"] = "sesid", ["smb2.ioctl.function"] = "fsctl",
                   ["smb2.max_ioctl_out_size"] = "max_out", ["smb2.read_length"] = "read_length",
                   ["smb2.write_length"] = "write_length" }

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
                local k = FIRST_OF[name]
                if k then
                    if cur[k] == nil then cur[k] = fi.value end
                elseif name == "smb2.fid" then
                    if cur.fid == nil and fi.len == 16 then
                        cur.fid = guid_string(fi.range:bytes())
                    end
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

-- The open an SMB2 message is about: TCP stream + SessionId + FileId (FileIds are unique only
-- within a session of a connection).
local function open_key(msg, fid)
    fid = fid or msg.fid
    if fid == nil or fid == ALL_FF then return nil end
    return tostring(msg.stream) .. ":" .. tostring(msg.sesid) .. ":" .. fid
end

local CMD_CREATE, CMD_CLOSE, CMD_READ, CMD_WRITE, CMD_IOCTL = 5, 6, 8, 9, 11

-- CREATE / CLOSE / READ / WRITE: what the analysis needs of them (no tree output).
local function track_other(msg, t, frame)
    local cmd = msg.cmd
    local pk = key(msg.stream, msg.msg_id)
    local nt = msg.nt_status or 0
    if not msg.response then
        if cmd == CMD_READ or cmd == CMD_WRITE then
            local bytes = (cmd == CMD_READ) and msg.read_length or msg.write_length
            S.io_pending[pk] = { t = t, key = open_key(msg), bytes = bytes or 0 }
        elseif cmd == CMD_CLOSE then
            S.close_pending[pk] = open_key(msg)
        end
        return
    end
    if nt == STATUS_PENDING then return end
    if cmd == CMD_CREATE then
        local k = open_key(msg)
        if nt == 0 and k then
            A.advance(t)
            S.opens[k] = { assoc = NOT_ASSOCIATED }
        end
    elseif cmd == CMD_CLOSE then
        local k = S.close_pending[pk]
        S.close_pending[pk] = nil
        if nt == 0 and k then
            A.advance(t)
            S.opens[k] = nil
        end
    elseif cmd == CMD_READ or cmd == CMD_WRITE then
        local p = S.io_pending[pk]
        S.io_pending[pk] = nil
        if p and p.key then
            A.advance(t)
            local o = S.opens[p.key]
            local flow = o and A.assoc_flow(o.assoc)
            if flow and S.flows[flow] then A.add_io(S.flows[flow], p.t, t, p.bytes, frame) end
        end
    end
end

-- The flow's state shown on a message: a copy of the fields, taken after the message.
local function flow_snapshot(f)
    local pv, sv = f.policy or {}, f.server or {}
    return { policy = pv.policy_id, initiator = f.initiator_id, name = f.initiator_name,
             node = f.initiator_node_name, limit = pv.limit, reservation = pv.reservation,
             bandwidth_limit = pv.bandwidth_limit, maximum_io_rate = sv.maximum_io_rate,
             minimum_io_rate = sv.minimum_io_rate, maximum_bandwidth = sv.maximum_bandwidth,
             base_io_size = sv.base_io_size, ttl = sv.time_to_live, status = sv.status,
             updates = f.updates_applied }
end

-- First pass over one SMB2 message: decode, match, track; gives what the tree shows, or nil.
local function analyse(msg, pinfo)
    local t = pinfo.rel_ts
    local frame = pinfo.number
    if msg.cmd ~= CMD_IOCTL then
        track_other(msg, t, frame)
        return nil
    end
    local pkey = key(msg.stream, msg.msg_id)
    local m = { msg_id = msg.msg_id, findings = {}, flow_findings = {}, frame = frame }

    if not msg.response then
        if msg.fsctl ~= FSCTL_STORAGE_QOS_CONTROL then return nil end
        m.direction = "request"
        m.fid = msg.fid
        local ba = buffer_bytes(msg.inbuf) or ByteArray.new()
        local q, found = parse_request(ba)
        m.findings = found
        if q then
            check_max_output(q, msg.max_out, m.findings)
            m.options = q.options
            m.dialect = q.dialect
        end
        local outer = S.current
        S.current = m.flow_findings
        A.advance(t)
        S.pending[pkey] = A.on_request(m, q, open_key(msg), t, frame, ba:len(), msg.max_out)
        S.current = outer
        if m.flow and S.flows[m.flow] then m.flow_state = flow_snapshot(S.flows[m.flow]) end
        return m
    end

    -- A response: SQOS when it carries the FSCTL or answers a pending SQOS request.
    local p = S.pending[pkey]
    if p == nil and msg.fsctl ~= FSCTL_STORAGE_QOS_CONTROL then return nil end
    m.direction = "response"
    m.nt_status = msg.nt_status or 0
    m.fid = msg.fid or (p and p.result.fid)
    if m.nt_status == STATUS_PENDING then m.interim = true end
    if p then
        m.request_frame = p.frame
        -- Round to the nanosecond of the capture format.
        m.response_time = math.floor((t - p.t) * 1e9 + 0.5) / 1e9
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
        if s then
            m.status = s.status
            m.dialect = s.dialect
            if p and p.req then check_response_against_request(p.req, s, m.findings) end
        end
    end
    local outer = S.current
    S.current = m.flow_findings
    A.advance(t)
    if m.interim then -- the final response comes later, same MessageId
        S.current = outer
        return m
    end

    local rkey = open_key(msg, m.fid)
    if p then
        S.pending[pkey] = nil
        p.result.response_frame = frame
        p.result.response_time = m.response_time
        -- A related compound request names its open only as all-FF: the answer tells which.
        if p.result.fid == ALL_FF and m.fid and m.fid ~= ALL_FF then p.result.fid = m.fid end
        A.on_response(m, p, s, m.nt_status, rkey, frame, t)
    else
        A.response_without_request(s, m.nt_status, rkey, frame, t)
    end
    S.current = outer
    -- The flow after the answer: the open's association, else what the request concerned.
    local o = rkey and S.opens[rkey]
    local flow = o and A.assoc_flow(o.assoc)
    if flow then m.flow, m.flow_source = flow, "open"
    elseif p and p.flow then m.flow, m.flow_source = p.flow, "message"
    elseif s and s.flow ~= NULL_GUID then m.flow, m.flow_source = s.flow, "message" end
    -- The request's frame shows the interval figures too when displayed again.
    if p then
        for _, k in ipairs({ "interval", "iops", "normalized_iops", "latency_ms",
                             "lower_latency_ms", "kbps", "first_update" }) do
            p.result[k] = m[k]
        end
    end
    if m.flow and S.flows[m.flow] then m.flow_state = flow_snapshot(S.flows[m.flow]) end
    return m
end

-- The tree
------------------------------------------------------------------------------------------------
local function add_u64(tree, field, v)
    if v == nil then return end
    if type(v) == "number" then v = UInt64.new(v) end -- uint64 fields take UInt64 values
    tree:add(field, v):set_generated()
end

-- Flow findings (the Rust analysis's, "flow.*"): shown on the message that revealed them; the
-- text names the frame the finding is about (as `sqos flows` reports it).
local function show_flow_findings(t, list)
    for _, fd in ipairs(list or {}) do
        local item = t:add(F.flow_finding, fd.code)
        item:set_generated()
        local e = FLOW_EXPERT[fd.code .. "/" .. fd.severity]
        if e then
            item:add_proto_expert_info(e, string.format("[%s] flow %s, frame %d: %s", fd.code,
                fd.flow, fd.frame, fd.message))
        end
    end
end

local function show(m, tree)
    if m.direction == nil then
        -- Flow findings revealed by a frame without SQOS message (READ/WRITE, a timer).
        local t = tree:add(sqosa, "SQOS analysis: flow findings")
        t:set_generated()
        show_flow_findings(t, m.flow_findings)
        return
    end
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
    if m.direction then gen(F.finding_count, #m.findings) end
    for _, fd in ipairs(m.findings) do
        local item = t:add(F.finding, fd.code)
        item:set_generated()
        local e = EXPERT[fd.code]
        if e then
            item:add_proto_expert_info(e, "[" .. fd.code .. "] " .. fd.message)
        end
    end
    show_flow_findings(t, m.flow_findings)
end

function sqosa.dissector(tvb, pinfo, tree)
    local results
    if pinfo.visited then
        results = S.frames[pinfo.number]
    else
        -- First pass (and every pass in single-pass tshark): compute and remember.
        S.frames_read = S.frames_read + 1
        results = {}
        local frame_level = { direction = nil, findings = {}, flow_findings = {} }
        S.current = frame_level.flow_findings
        for _, msg in ipairs(frame_messages()) do
            local m = analyse(msg, pinfo)
            if m then results[#results + 1] = m end
        end
        S.current = nil
        if #frame_level.flow_findings > 0 then results[#results + 1] = frame_level end
        if #results > 0 then S.frames[pinfo.number] = results else results = nil end
    end
    if results == nil then return end
    for _, m in ipairs(results) do show(m, tree) end
end

-- sqosa.init (a new file, a reload, a redissection): below, with the flow windows.

register_postdissector(sqosa)

------------------------------------------------------------------------------------------------
------------------------------------------------------------------------------------------------
-- Flow summary: tshark (tap draw, when asked) and Wireshark (Statistics > SQOS Flows).
-- One `flow` line per logical flow with the keys of `sqos flows --format json`, then one
-- `finding` line per flow finding, like `sqos flows`. The Wireshark window also shows the
-- table `sqos flows` prints (src/output/flows.rs, `flows_text`) above those lines.
------------------------------------------------------------------------------------------------
local function quote(s)
    return '"' .. tostring(s):gsub('\\', '\\\\'):gsub('"', '\\"') .. '"'
end

local function flow_line(f)
    local pv, sv = f.policy or {}, f.server or {}
    local parts = { "flow " .. f.id }
    local function kv(k, v, is_string)
        if v == nil then return end
        if is_string then v = quote(v)
        elseif type(v) == "number" then v = fmt_num(v)
        else v = tostring(v) end
        parts[#parts + 1] = k .. "=" .. v
    end
    kv("initiator_id", f.initiator_id)
    kv("initiator_name", f.initiator_name, true)
    kv("initiator_node_name", f.initiator_node_name, true)
    kv("policy_id", pv.policy_id)
    kv("protocol_version", f.protocol_version)
    kv("dialect", f.protocol_version and dialect_of(f.protocol_version))
    kv("first_frame", f.first_frame)
    kv("opens_total", f.opens_total)
    kv("limit", pv.limit)
    kv("reservation", pv.reservation)
    kv("bandwidth_limit", pv.bandwidth_limit)
    kv("maximum_io_rate", sv.maximum_io_rate)
    kv("minimum_io_rate", sv.minimum_io_rate)
    kv("maximum_bandwidth", sv.maximum_bandwidth)
    kv("base_io_size", sv.base_io_size)
    kv("time_to_live", sv.time_to_live)
    kv("last_status", sv.status)
    if sv.status then kv("last_status_name", STATUS_NAMES[sv.status], true) end
    kv("updates_sent", f.updates_sent)
    kv("updates_applied", f.updates_applied)
    kv("intervals", f.intervals)
    local r, o = A.whole_rates(f)
    r, o = r or {}, o or {}
    kv("iops", r.iops)
    kv("normalized_iops", r.normalized_iops)
    kv("avg_latency_ms", r.latency_ms)
    kv("avg_lower_latency_ms", r.lower_latency_ms)
    kv("kilobytes_per_second", r.kbps)
    kv("observed_io_count", f.all_io.io)
    kv("observed_bytes", f.all_io.bytes)
    kv("observed_iops", o.iops)
    kv("observed_normalized_iops", o.normalized_iops)
    kv("observed_kilobytes_per_second", o.kbps)
    kv("observed_avg_response_ms", o.avg_response_ms)
    kv("findings_total", #f.findings)
    return table.concat(parts, " ")
end

-- The whole capture's figures (flow.rs `reported_rates` / `observed_rates`): applied increments
-- after the first update over the seconds they cover; observed over the finished intervals,
-- else from the first to the last I/O request.
function A.whole_rates(f)
    local r = A.rates(f.whole, f.whole_secs)
    local o
    if f.whole_obs_secs > 0 then o = A.observed_rates(f.whole_obs, f.whole_obs_secs)
    elseif f.io_span then o = A.observed_rates(f.all_io, f.io_span[2] - f.io_span[1]) end
    return r, o
end

-- The flows in order of first appearance (ties: the order they were created), the catch-all
-- null flow (findings of no flow) last.
local function ordered_flow_ids()
    local ids, pos = {}, {}
    for i, id in ipairs(S.order) do ids[#ids + 1] = id; pos[id] = i end
    table.sort(ids, function(a, b)
        local na, nb = a == NIL_FLOW, b == NIL_FLOW
        if na ~= nb then return nb end
        local fa, fb = S.flows[a].first_frame, S.flows[b].first_frame
        if fa ~= fb then return fa < fb end
        return pos[a] < pos[b]
    end)
    return ids
end

local function sorted_findings(list)
    local fs = {}
    for _, fd in ipairs(list) do fs[#fs + 1] = fd end
    table.sort(fs, function(a, b)
        if a.frame ~= b.frame then return a.frame < b.frame end
        return a.code < b.code
    end)
    return fs
end

-- The machine-readable lines (tshark's summary; also the lower part of the Wireshark window).
local function detail_lines(ids)
    local lines = { string.format("SQOS flows (sqosa %s): %d", SQOSA_VERSION, #ids) }
    for _, id in ipairs(ids) do lines[#lines + 1] = flow_line(S.flows[id]) end
    for _, id in ipairs(ids) do
        for _, fd in ipairs(sorted_findings(S.flows[id].findings)) do
            lines[#lines + 1] = string.format(
                "finding %s code=%s severity=%s frame=%d occurrences=%d last_frame=%d message=%s",
                id, fd.code, fd.severity, fd.frame, fd.occurrences, fd.last_frame,
                quote(fd.message))
        end
    end
    return lines
end

local function summary_lines()
    A.finish()
    return detail_lines(ordered_flow_ids())
end

-- The human table of `sqos flows` (src/output/flows.rs `flows_text`), cell for cell. --------
local function nchars(s) return #(s:gsub("[\128-\191]", "")) end -- UTF-8 code points

local function cut(s, n)
    if nchars(s) <= n then return s end
    local out, count = {}, 0
    for ch in s:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
        if count == n - 1 then break end
        out[#out + 1] = ch
        count = count + 1
    end
    return table.concat(out) .. "…"
end

local function fmt_rate(x)
    if x == nil then return "-" end
    if x >= 100 then return string.format("%.0f", x) end
    return string.format("%.1f", x)
end

local function opt(v) if v == nil then return "-" end return tostring(v) end

local function status_label(s)
    local n = STATUS_NAMES[s]
    if n == nil then return string.format("0x%08x", s) end
    local short = n:gsub("^StorageQoSStatus", ""):gsub("^StorageQoS", "")
    return short
end

local function policy_label(f)
    local p = f.policy
    if p == nil then return "-" end
    if p.policy_id ~= NULL_GUID then return "policy " .. p.policy_id:sub(1, 8) end
    local s = string.format("lim %s res %s", tostring(p.limit), tostring(p.reservation))
    if p.bandwidth_limit and tostring(p.bandwidth_limit) ~= "0" then
        s = s .. " bw " .. tostring(p.bandwidth_limit)
    end
    return s
end

local function who(f)
    if f.id == NIL_FLOW then return "(no flow)" end
    if f.initiator_name then return f.initiator_name .. " " .. f.id:sub(1, 8) end
    return f.id:sub(1, 8)
end

local TABLE_HEADERS = { "VM / INITIATOR", "NODE", "FLOW", "POLICY", "MAX/MIN", "NIOPS rep/obs",
                        "LAT ms", "KB/s rep/obs", "STATUS", "OPENS", "FINDINGS" }

local function table_row(f)
    local r, o = A.whole_rates(f)
    r, o = r or {}, o or {}
    local sv = f.server or {}
    local name = f.initiator_name or "?"
    if f.id == NIL_FLOW then name = "(no flow)" end
    return {
        cut(name, 24), cut(f.initiator_node_name or "-", 24), f.id:sub(1, 8), policy_label(f),
        opt(sv.maximum_io_rate) .. "/" .. opt(sv.minimum_io_rate),
        fmt_rate(r.normalized_iops) .. "/" .. fmt_rate(o.normalized_iops),
        fmt_rate(r.latency_ms),
        fmt_rate(r.kbps) .. "/" .. fmt_rate(o.kbps),
        f.server and sv.status and status_label(sv.status) or "-",
        tostring(f.opens_total), tostring(#f.findings),
    }
end

local function table_lines(ids)
    local rows = {}
    for _, id in ipairs(ids) do rows[#rows + 1] = table_row(S.flows[id]) end
    local widths = {}
    for i, h in ipairs(TABLE_HEADERS) do widths[i] = nchars(h) end
    for _, r in ipairs(rows) do
        for i, c in ipairs(r) do widths[i] = math.max(widths[i], nchars(c)) end
    end
    local lines = {}
    local function line(cells)
        local s = {}
        for i, c in ipairs(cells) do
            local pad = string.rep(" ", widths[i] - nchars(c))
            -- Names left-aligned, figures right-aligned.
            if i <= 4 or i == 9 then s[#s + 1] = c .. pad .. "  "
            else s[#s + 1] = pad .. c .. "  " end
        end
        lines[#lines + 1] = (table.concat(s):gsub("%s+$", ""))
    end
    line(TABLE_HEADERS)
    for _, r in ipairs(rows) do line(r) end
    local n = 0
    for _, id in ipairs(ids) do if id ~= NIL_FLOW then n = n + 1 end end
    lines[#lines + 1] = ""
    lines[#lines + 1] = string.format("%d flows; NIOPS = normalized IOPS reported by the client " ..
        "/ observed on the wire; MAX/MIN = the server's MaximumIoRate/MinimumIoRate.", n)
    local all = {}
    for _, id in ipairs(ids) do
        for _, fd in ipairs(S.flows[id].findings) do all[#all + 1] = { f = S.flows[id], fd = fd } end
    end
    table.sort(all, function(a, b)
        if a.fd.frame ~= b.fd.frame then return a.fd.frame < b.fd.frame end
        return a.fd.code < b.fd.code
    end)
    if #all > 0 then
        lines[#lines + 1] = ""
        lines[#lines + 1] = "Findings:"
    end
    for _, x in ipairs(all) do
        local fd = x.fd
        local s = string.format("%10.3f  frame %-7d %-7s  %-34s %s: %s", fd.time, fd.frame,
            fd.severity, fd.code, who(x.f), fd.message)
        if fd.occurrences > 1 then
            s = s .. string.format(" (×%d intervals, until frame %d)", fd.occurrences,
                fd.last_frame)
        end
        lines[#lines + 1] = s
    end
    return lines
end

-- Wireshark: Statistics > SQOS Flows. -------------------------------------------------------
-- A deep copy of the analysis state (all but the per-frame results), so that the window can
-- settle the end of the capture (unanswered requests, timers, open episodes) as `sqos flows`
-- does without ending the live analysis: packets may still come (live capture, file still being
-- read) and the window may be refreshed any number of times.
local function copy_state(x, memo)
    if type(x) ~= "table" then return x end
    if memo[x] then return memo[x] end
    local c = {}
    memo[x] = c
    for k, v in pairs(x) do c[copy_state(k, memo)] = copy_state(v, memo) end
    return setmetatable(c, getmetatable(x))
end

local function window_text()
    local live = S
    local frames = live.frames
    live.frames = nil
    local snapshot = copy_state(live, {})
    live.frames = frames
    snapshot.frames = {} -- end-of-capture findings are not put on frames from here
    S = snapshot
    local ok, text = pcall(function()
        A.finish()
        local ids = ordered_flow_ids()
        local out = { string.format("sqosa %s: %d frames read; updated %s", SQOSA_VERSION,
            S.frames_read, os.date("%H:%M:%S")), "" }
        if #ids == 0 then
            out[#out + 1] = "No SQOS message seen yet. Open a capture with SMB3 " ..
                "FSCTL_STORAGE_QOS_CONTROL traffic"
            out[#out + 1] = "(or start a capture): this window follows the packets as they " ..
                "are read."
            out[#out + 1] = ""
        end
        for _, l in ipairs(table_lines(ids)) do out[#out + 1] = l end
        out[#out + 1] = ""
        out[#out + 1] = "The same figures with the keys of `sqos flows --format json` " ..
            "(plugin/README.md):"
        for _, l in ipairs(detail_lines(ids)) do out[#out + 1] = l end
        return table.concat(out, "\n") .. "\n"
    end)
    S = live
    if not ok then error(text, 0) end
    return text
end

-- Open windows, refreshed when the analysis changes (tap draw: Wireshark calls it every few
-- seconds while packets are being read, and after a reload) and when a new file starts.
local windows = {}
local open_windows = 0

local function show_text(w)
    w:set(window_text())
end

local function refresh_windows()
    if open_windows == 0 then return end
    for w in pairs(windows) do show_text(w) end
end

function sqosa.init()
    reset_state()
    refresh_windows()
end

-- tshark: the summary at the end of the run. (This listener's filter also makes Wireshark and
-- tshark build the protocol tree the postdissector reads.)
local tap = Listener.new("frame", "sqosa")
function tap.draw()
    if flows_requested() and not gui_enabled() then
        print(string.rep("=", 80))
        for _, l in ipairs(summary_lines()) do print(l) end
        print(string.rep("=", 80))
    end
end

-- Wireshark: every SMB2 frame may change the analysis (READ/WRITE, CREATE, CLOSE too), so each
-- one asks for a redraw; Wireshark then calls draw every few seconds (the "taps.update_interval"
-- preference) while packets come in, and once more after the last one. A listener without a
-- packet function never asks, and would leave the windows with what they showed mid-file.
if gui_enabled() then
    local follow = Listener.new("frame", "smb2")
    function follow.packet() return 1 end -- 1: redraw (wslua wants a number)
    function follow.draw() refresh_windows() end
end

local function open_flows_window()
    local w = TextWindow.new("SQOS Flows")
    windows[w] = true
    open_windows = open_windows + 1
    w:set_atclose(function()
        if windows[w] then
            windows[w] = nil
            open_windows = open_windows - 1
        end
    end)
    w:add_button("Refresh", function() show_text(w) end)
    show_text(w)
end

if gui_enabled() then
    -- MENU_STAT_UNSORTED: Wireshark 4.0's Qt main window puts no MENU_STAT_GENERIC item in any
    -- menu (its addMenuActions has no case for that group).
    register_menu("SQOS Flows", open_flows_window, MENU_STAT_UNSORTED)
end
