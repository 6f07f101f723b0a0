-- sqos.lua: "SQOS analysis" (sqosa), a Wireshark/tshark >= 4.0 postdissector for MS-SQOS
-- (Storage Quality of Service over SMB3, FSCTL_STORAGE_QOS_CONTROL 0x00090350).
--
-- The analysis is sqos's, not this script's. While Wireshark reads the packets (its first
-- pass), the script writes every frame to a temporary capture file; when packets are shown
-- again (tshark -2, a packet selected or filtered in Wireshark) or the flows window is drawn, it
-- runs `sqos annotate` on that file and shows what sqos says: on each SQOS message the logical
-- flow it belongs to, the matched request/response, the interval figures, the flow's state and
-- the findings (fields and expert info); in Statistics > SQOS Flows the table `sqos flows`
-- prints. Why it is built this way, install and use: plugin/README.md.

local SQOSA_VERSION = "0.2.0"
-- What this script reads: `sqos annotate` lines of this format and version (src/output/annotate.rs).
local ANNOTATE_FORMAT, ANNOTATE_VERSION = "sqos-annotate", 1

set_plugin_info({
    version = SQOSA_VERSION,
    description = "MS-SQOS flow analysis by sqos: flows, derived IOPS/latency/bandwidth, expert info",
    repository = "sqos (plugin/sqos.lua)",
})

local FSCTL_STORAGE_QOS_CONTROL = 0x00090350

-- Expert items must exist before any packet is read, so the finding codes are listed here:
-- exactly those of src/sqos/findings.rs (`FindingCode::as_str`, `severity`) and
-- src/analysis/finding.rs (`FlowFindingCode::as_str`); tests/it/plugin_tshark.rs checks that the
-- lists agree and prints the lists to paste when they do not.
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

-- A flow finding's severity depends on the case (a product-note rule is a warning, a normative
-- one an error), so each is registered with every severity.
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
    -- sqos's memory budget forgot requests of the flow (docs/robustness.md)
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
-- Fields and expert items
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
        "time since the flow's previous UPDATE_COUNTERS request"),
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
local EXPERT = {}
local expert_list = {}
for _, cs in ipairs(CODES) do
    local code, sev = cs[1], cs[2]
    local group = MALFORMED_CODES[code] and expert.group.MALFORMED or expert.group.PROTOCOL
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
local NO_ANALYSIS = ProtoExpert.new("sqosa.no_analysis", "SQOS analysis unavailable",
    expert.group.UNDECODED, expert.severity.WARN)
expert_list[#expert_list + 1] = NO_ANALYSIS
sqosa.experts = expert_list

sqosa.prefs.sqos = Pref.string("sqos program", "sqos",
    "The sqos program that analyses the capture (its path, or its name on PATH); it must know " ..
    "`sqos annotate` (format version " .. ANNOTATE_VERSION .. ")")
sqosa.prefs.flows = Pref.bool("Print the flow summary at the end of a tshark run", false,
    "Same as -X lua_script1:flows (tshark -X lua_script:sqos.lua -X lua_script1:flows)")

local script_args = { ... }
local function flows_requested()
    if sqosa.prefs.flows then return true end
    for _, a in ipairs(script_args) do
        if a == "flows" or a == "flows=1" then return true end
    end
    return false
end

-- Wireshark's own SMB2 field: which frames carry an SQOS IOCTL (to say why there is no analysis).
local ioctl_function = Field.new("smb2.ioctl.function")
local function carries_sqos()
    for _, fi in ipairs({ ioctl_function() }) do
        if fi.value == FSCTL_STORAGE_QOS_CONTROL then return true end
    end
    return false
end

------------------------------------------------------------------------------------------------
-- JSON (one `sqos annotate` line at a time). Integers above 2^53 (u64 fields) become UInt64.
------------------------------------------------------------------------------------------------
local band, rshift = bit32.band, bit32.rshift

local function utf8_char(cp)
    if cp < 0x80 then return string.char(cp) end
    if cp < 0x800 then return string.char(0xC0 + rshift(cp, 6), 0x80 + band(cp, 0x3F)) end
    if cp < 0x10000 then
        return string.char(0xE0 + rshift(cp, 12), 0x80 + band(rshift(cp, 6), 0x3F),
            0x80 + band(cp, 0x3F))
    end
    return string.char(0xF0 + rshift(cp, 18), 0x80 + band(rshift(cp, 12), 0x3F),
        0x80 + band(rshift(cp, 6), 0x3F), 0x80 + band(cp, 0x3F))
end

local json_decode
do
    local find, sub = string.find, string.sub
    local ESC = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n',
                  r = '\r', t = '\t' }
    local function fail(i, what) error(string.format("bad JSON at byte %d: %s", i, what), 0) end
    local function skip(s, i) return find(s, "[^ \t\r\n]", i) or #s + 1 end
    local function hex4(s, i)
        local h = sub(s, i, i + 3)
        return #h == 4 and find(h, "^%x+$") and tonumber(h, 16) or nil
    end
    local function str(s, i)
        local out, j = {}, i + 1
        while true do
            local a = find(s, '["\\]', j)
            if not a then fail(i, "unterminated string") end
            out[#out + 1] = sub(s, j, a - 1)
            if sub(s, a, a) == '"' then return table.concat(out), a + 1 end
            local e = sub(s, a + 1, a + 1)
            if e == "u" then
                local cp = hex4(s, a + 2) or fail(a, "bad \\u escape")
                j = a + 6
                local lo = sub(s, j, j + 1) == "\\u" and hex4(s, j + 2)
                if cp >= 0xD800 and cp <= 0xDBFF and lo and lo >= 0xDC00 and lo <= 0xDFFF then
                    cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
                    j = j + 6
                end
                out[#out + 1] = utf8_char(cp)
            else
                out[#out + 1] = ESC[e] or fail(a, "bad escape")
                j = a + 2
            end
        end
    end
    local value
    local function members(s, i, close, add)
        i = skip(s, i)
        if sub(s, i, i) == close then return i + 1 end
        while true do
            i = skip(s, add(s, i))
            local c = sub(s, i, i)
            if c == close then return i + 1 end
            if c ~= "," then fail(i, "expected , or " .. close) end
            i = skip(s, i + 1)
        end
    end
    value = function(s, i)
        i = skip(s, i)
        local c = sub(s, i, i)
        if c == "{" then
            local obj = {}
            return obj, members(s, i + 1, "}", function(s2, k)
                if sub(s2, k, k) ~= '"' then fail(k, "expected a key") end
                local key, j = str(s2, k)
                j = skip(s2, j)
                if sub(s2, j, j) ~= ":" then fail(j, "expected :") end
                local v
                v, j = value(s2, j + 1)
                obj[key] = v
                return j
            end)
        elseif c == "[" then
            local arr, n = {}, 0
            return arr, members(s, i + 1, "]", function(s2, k)
                local v, j = value(s2, k)
                n = n + 1
                arr[n] = v
                return j
            end)
        elseif c == '"' then
            return str(s, i)
        elseif find(c, "^[-%d]") then
            local a, b = find(s, "^-?%d+%.?%d*[eE]?[-+]?%d*", i)
            local text = sub(s, a, b)
            if #text > 15 and find(text, "^%d+$") then return UInt64.fromdec(text), b + 1 end
            return tonumber(text) or fail(i, "bad number"), b + 1
        elseif sub(s, i, i + 3) == "true" then
            return true, i + 4
        elseif sub(s, i, i + 4) == "false" then
            return false, i + 5
        elseif sub(s, i, i + 3) == "null" then
            return nil, i + 4
        end
        fail(i, "unexpected " .. (c == "" and "end" or c))
    end
    json_decode = function(s)
        local v, i = value(s, 1)
        if skip(s, i) <= #s then fail(i, "trailing text") end
        return v
    end
end

------------------------------------------------------------------------------------------------
-- The frames, written to a temporary capture as Wireshark reads them (first pass). Every frame
-- is written, in order, so sqos numbers them as Wireshark does. nsec pcap keeps the timestamps
-- exact (4.0's pcapng writer here would write whole seconds).
------------------------------------------------------------------------------------------------
local WINDOWS = package.config:sub(1, 1) == "\\"

local function temp_name()
    local dir = os.getenv(WINDOWS and "TEMP" or "TMPDIR")
    if dir == nil or dir == "" then
        if WINDOWS then return "." .. os.tmpname() end -- a bare name in the drive's root
        return os.tmpname() -- Lua makes it under /tmp
    end
    -- The user's temporary directory (the copy is as large as the capture). Lua's tmpname
    -- ignores it; the name is made unique by an address of this process and the time.
    dir = dir:gsub("[/\\]+$", "")
    local id = tostring({}):match("%x+$") or "0"
    local sep = WINDOWS and "\\" or "/"
    for n = 0, 99 do
        local name = string.format("%s%ssqosa-%s-%d-%d", dir, sep, id, os.time(), n)
        local f = io.open(name, "rb")
        if f == nil then return name end
        f:close()
    end
    return os.tmpname()
end

local D = { path = nil, dumper = nil, count = 0, unwritten = 0, error = nil,
            second_pass = false, sqos_seen = false, last_write = 0 }

-- The names are chosen when first needed, not when the plugin loads: a tshark that reads no
-- capture (`tshark -G`) ends without closing Lua, and a file made then would stay behind.
local function paths()
    if D.path == nil then
        D.path = temp_name()
        D.err_path = D.path .. ".err"
        D.empty_path = D.path .. ".empty.pcap"
    end
    return D
end

local function remove_files()
    if D.path == nil then return end
    for _, p in ipairs({ D.path, D.err_path, D.empty_path }) do os.remove(p) end
end
-- Removed when Wireshark closes its Lua state (a table's __gc runs then in Lua 5.2).
D.gc = setmetatable({}, { __gc = remove_files })

local function close_dump()
    if D.dumper then pcall(D.dumper.close, D.dumper) end
    D.dumper = nil
end

local NSEC_PCAP = wtap_name_to_file_type_subtype("nsecpcap")

local function write_frame(pinfo)
    if D.error then return end
    if D.dumper == nil then
        local ok, d = pcall(Dumper.new_for_current, paths().path, NSEC_PCAP)
        if not ok or d == nil then
            D.error = "cannot write the frames to " .. D.path .. ": " .. tostring(d)
            return
        end
        D.dumper = d
    end
    if not pcall(D.dumper.dump_current, D.dumper) then
        -- A link type other than the first frame's: an empty frame keeps the numbering.
        D.unwritten = D.unwritten + 1
        pcall(D.dumper.dump, D.dumper, pinfo.abs_ts, PseudoHeader.none(), ByteArray.new())
    end
    D.count = D.count + 1
    D.last_write = os.time()
end

-- An empty capture (nsec pcap header, Ethernet), for the window before any packet is read.
local function empty_capture()
    local f = io.open(paths().empty_path, "wb")
    if f == nil then return nil end
    f:write(string.char(0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 4, 0, 1, 0, 0, 0))
    f:close()
    return D.empty_path
end

------------------------------------------------------------------------------------------------
-- Running `sqos annotate` and reading its lines into what each frame shows
------------------------------------------------------------------------------------------------
local R = nil -- the last analysis (see analysis())

local function shell_quote(s)
    if WINDOWS then return '"' .. s .. '"' end
    return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function read_all(path)
    local f = io.open(path, "rb")
    if f == nil then return "" end
    local s = f:read("*a") or ""
    f:close()
    return s
end

local function entry(res, frame)
    local e = res.frames[frame]
    if e == nil then
        e = { msgs = {}, flow_findings = {} }
        res.frames[frame] = e
    end
    return e
end

-- One `message` line: what the tree shows for it.
local function add_message(res, v)
    local msg = v.message or {}
    local q = msg.sqos or {}
    local m = {
        direction = msg.direction, msg_id = msg.msg_id, nt_status = msg.nt_status,
        interim = msg.interim, fid = msg.file_id, request_frame = msg.request_frame,
        response_frame = msg.response_frame, response_time = msg.response_time,
        dialect = v.dialect, status = q.status, status_name = q.status_name,
        flow = v.flow, flow_source = v.flow_from, first_update = v.first_update,
        findings = msg.findings or {}, flow_state = v.flow_state, flow_findings = {},
    }
    if msg.direction == "request" then
        m.options = q.options
        m.option_names = q.option_names and table.concat(q.option_names, "|")
    end
    local i = v.interval
    if i then
        m.interval, m.iops, m.normalized_iops = i.seconds, i.iops, i.normalized_iops
        m.latency_ms, m.lower_latency_ms = i.avg_latency_ms, i.avg_lower_latency_ms
        m.kbps = i.kilobytes_per_second
    end
    local e = entry(res, msg.frame)
    e.msgs[#e.msgs + 1] = m
end

-- A request shows its answer's interval figures too.
local FIGURES = { "interval", "iops", "normalized_iops", "latency_ms", "lower_latency_ms", "kbps",
                  "first_update" }
local function link_answers(res)
    for _, e in pairs(res.frames) do
        for _, m in ipairs(e.msgs) do
            local answer = m.direction == "request" and m.response_frame and
                res.frames[m.response_frame]
            for _, r in ipairs(answer and answer.msgs or {}) do
                if r.direction == "response" and not r.interim and tostring(r.msg_id) ==
                    tostring(m.msg_id) then
                    for _, k in ipairs(FIGURES) do m[k] = r[k] end
                end
            end
        end
    end
end

-- A flow finding goes on its frame: in the subtree of that frame's message of the same flow,
-- else in a subtree of its own.
local function place_flow_findings(res, flow)
    for _, fd in ipairs(flow.findings or {}) do
        local e = entry(res, fd.frame)
        local f = { flow = flow.logical_flow_id, code = fd.code, severity = fd.severity,
                    message = fd.message, frame = fd.frame, occurrences = fd.occurrences,
                    last_frame = fd.last_frame }
        local home = e.flow_findings
        for _, m in ipairs(e.msgs) do
            if m.flow == f.flow then home = m.flow_findings break end
        end
        home[#home + 1] = f
    end
end

local function add_line(res, v)
    local t = type(v) == "table" and v.type
    if t == "header" then
        if v.format ~= ANNOTATE_FORMAT then error("not `sqos annotate` output", 0) end
        if v.version ~= ANNOTATE_VERSION then
            error(string.format("sqos %s writes `sqos annotate` version %s; this plugin " ..
                "(sqosa %s) reads version %d: use the sqos and plugin/sqos.lua of one release",
                tostring(v.sqos), tostring(v.version), SQOSA_VERSION, ANNOTATE_VERSION), 0)
        end
        res.header = v
    elseif res.header == nil then
        error("no `sqos annotate` header line", 0)
    elseif t == "message" then
        add_message(res, v)
    elseif t == "flow" and v.flow then
        res.flows[#res.flows + 1] = v.flow
    elseif t == "flows_text" then
        res.text = v.text
    elseif t == "end" then
        res.ended = v
    end -- other types: added by a later sqos of the same version, not for this plugin
end

-- Wireshark's SMB2 decryption keys (Preferences > Protocols > SMB2 > Secret session keys: the
-- profile's smb2_seskey_list file, in the format sqos --keys reads) go to sqos too.
local function keys_file()
    local ok, p = pcall(persconffile_path, "smb2_seskey_list")
    if ok and p and file_exists(p) then return p end
    return nil
end

-- Runs sqos on `path` (the first `upto` frames) and reads its lines.
local function run_sqos(path, upto, keys)
    local res = { upto = upto, frames = {}, flows = {}, ran = os.date("%H:%M:%S"),
                  started = os.time(), keys = keys }
    local program = sqosa.prefs.sqos
    if program == nil or program == "" then program = "sqos" end
    res.program = program
    local cmd = shell_quote(program) .. " annotate --quiet " .. shell_quote(path)
    if keys then cmd = cmd .. " --keys " .. shell_quote(keys) end
    cmd = cmd .. " 2>" .. shell_quote(paths().err_path)
    if WINDOWS then cmd = '"' .. cmd .. '"' end
    local pipe = io.popen(cmd, "r")
    if pipe == nil then
        res.error = "cannot run " .. program
        return res
    end
    local ok, err = pcall(function()
        for line in pipe:lines() do add_line(res, json_decode(line)) end
    end)
    local _, _, code = pipe:close()
    local stderr = read_all(D.err_path):gsub("%s+$", "")
    if not ok then
        res.error = string.format("%s: %s", program, err)
    elseif res.header == nil and keys and stderr:find("--keys", 1, true) then
        -- An sqos that cannot decrypt: analyse without the keys.
        res = run_sqos(path, upto, nil)
        res.note = "this sqos does not take --keys: SMB3 sessions encrypted with the keys of " ..
            keys .. " are not analysed"
        return res
    elseif res.header == nil then
        -- Nothing read: not found, not sqos, or an sqos without `annotate`.
        local why = stderr ~= "" and stderr or ("exit status " .. tostring(code))
        if why:find("unrecognized subcommand") then
            why = "this sqos has no `sqos annotate`: it is older than this plugin needs"
        end
        res.error = string.format("`%s annotate` gave no analysis (%s). Set the sqos program " ..
            "in Preferences > Protocols > SQOSA (tshark: -o sqosa.sqos:PATH) or put sqos on PATH",
            program, why)
    elseif res.ended == nil then
        res.error = string.format("%s stopped before the end of its output: %s", program, stderr)
    elseif res.ended.frames ~= upto then
        res.note = string.format("sqos read %s frames of the %d written: frame numbers may " ..
            "differ from Wireshark's", tostring(res.ended.frames), upto)
    end
    if res.error then res.frames, res.flows = {}, {} end
    link_answers(res)
    for _, f in ipairs(res.flows) do place_flow_findings(res, f) end
    res.took = os.time() - res.started
    return res
end

-- The analysis of the frames read so far. While frames are still coming (a live capture, a file
-- being read), sqos runs again for the window (Wireshark redraws it every few seconds) and for a
-- packet displayed, but then only once frames stopped coming or every few seconds: sqos reads
-- the whole temporary file each time.
local function analysis(frame)
    if R ~= nil and D.count <= R.upto then return R end
    if R ~= nil and frame ~= nil then
        local now = os.time()
        if now - D.last_write < 1 and now - R.started < math.max(2, 4 * R.took) then
            return R
        end
    end
    if D.error then
        R = { upto = D.count, frames = {}, flows = {}, error = D.error, started = os.time(),
              took = 0, ran = os.date("%H:%M:%S"), program = sqosa.prefs.sqos }
        return R
    end
    local path = D.path
    if D.count == 0 then
        path = empty_capture()
    elseif D.dumper then
        pcall(D.dumper.flush, D.dumper)
    end
    R = run_sqos(path or D.path, D.count, keys_file())
    return R
end

------------------------------------------------------------------------------------------------
-- The tree
------------------------------------------------------------------------------------------------
local function fmt_num(x)
    -- Integers without a fraction, others with up to 6 decimals.
    if type(x) ~= "number" then return tostring(x) end
    if x == math.floor(x) and math.abs(x) < 2 ^ 53 then return string.format("%d", x) end
    return (string.format("%.6f", x):gsub("0+$", ""))
end

local function add_u64(tree, field, v)
    if v == nil then return end
    if type(v) == "number" then v = UInt64.new(v) end -- uint64 fields take UInt64 values
    tree:add(field, v):set_generated()
end

-- The episode's length goes first: Wireshark cuts expert texts at 240 bytes.
local function flow_finding_text(fd)
    local episode = ""
    if (fd.occurrences or 1) > 1 then
        episode = string.format(" (×%d intervals, until frame %d)", fd.occurrences, fd.last_frame)
    end
    return string.format("[%s] flow %s, frame %d%s: %s", fd.code, fd.flow, fd.frame, episode,
        fd.message)
end

local function show_flow_findings(t, list)
    for _, fd in ipairs(list) do
        local item = t:add(F.flow_finding, fd.code)
        item:set_generated()
        local e = FLOW_EXPERT[fd.code .. "/" .. fd.severity]
        if e then item:add_proto_expert_info(e, flow_finding_text(fd)) end
    end
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
    add_u64(t, F.msg_id, m.msg_id)
    if m.interim then gen(F.interim, true) end
    gen(F.nt_status, m.nt_status)
    gen(F.file_id, m.fid)
    gen(F.flow, m.flow)
    gen(F.flow_source, m.flow_source)
    gen(F.request_frame, m.request_frame)
    gen(F.response_frame, m.response_frame)
    gen(F.response_time, m.response_time)
    gen(F.dialect, m.dialect)
    gen(F.options, m.options)
    gen(F.option_names, m.option_names)
    gen(F.status, m.status)
    gen(F.status_name, m.status_name)
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
        fgen(F.f_policy, fs.policy_id)
        fgen(F.f_initiator, fs.initiator_id)
        fgen(F.f_name, fs.initiator_name)
        fgen(F.f_node, fs.initiator_node_name)
        add_u64(ft, F.f_limit, fs.limit)
        add_u64(ft, F.f_reservation, fs.reservation)
        add_u64(ft, F.f_bw_limit, fs.bandwidth_limit)
        add_u64(ft, F.f_max_rate, fs.maximum_io_rate)
        add_u64(ft, F.f_min_rate, fs.minimum_io_rate)
        add_u64(ft, F.f_max_bw, fs.maximum_bandwidth)
        fgen(F.f_base, fs.base_io_size)
        fgen(F.f_ttl, fs.time_to_live)
        fgen(F.f_status, fs.last_status)
        fgen(F.f_status_name, fs.last_status_name)
        fgen(F.f_updates, fs.updates_applied)
    end
    gen(F.finding_count, #m.findings)
    for _, fd in ipairs(m.findings) do
        local item = t:add(F.finding, fd.code)
        item:set_generated()
        local e = EXPERT[fd.code]
        if e then item:add_proto_expert_info(e, "[" .. fd.code .. "] " .. fd.message) end
    end
    show_flow_findings(t, m.flow_findings)
end

function sqosa.dissector(_, pinfo, tree)
    if not pinfo.visited then
        -- First pass: the frame goes to sqos; the analysis shows when it is displayed again.
        write_frame(pinfo)
        if carries_sqos() then
            D.sqos_seen = true
            tree:add(sqosa, "SQOS analysis: in a second pass (tshark -2; Wireshark: when the " ..
                "packet is selected)"):set_generated()
        end
        return
    end
    D.second_pass = true
    local res = analysis(pinfo.number)
    local e = res.frames[pinfo.number]
    if res.error and carries_sqos() then
        local t = tree:add(sqosa, "SQOS analysis: unavailable")
        t:set_generated()
        t:add_proto_expert_info(NO_ANALYSIS, res.error)
    end
    if e == nil then return end
    for _, m in ipairs(e.msgs) do show(m, tree) end
    if #e.flow_findings > 0 then
        -- Flow findings on a frame without an SQOS message of their flow (READ/WRITE, a timer).
        local t = tree:add(sqosa, "SQOS analysis: flow findings")
        t:set_generated()
        show_flow_findings(t, e.flow_findings)
    end
end

register_postdissector(sqosa)

------------------------------------------------------------------------------------------------
-- Flow summary: tshark (end of the run, when asked) and Wireshark (Statistics > SQOS Flows).
-- The table `sqos flows` prints, then one `flow` line per logical flow with the figures of
-- `sqos flows --format json` as key=value, then one `finding` line per flow finding.
------------------------------------------------------------------------------------------------
local function quote(s)
    return '"' .. tostring(s):gsub('\\', '\\\\'):gsub('"', '\\"') .. '"'
end

-- `flow <id> key=value …`: every figure of the flow's JSON object (`observed.x` as
-- `observed_x`; lists and null values left out), keys in alphabetical order.
local function flow_line(f)
    local flat = {}
    for k, v in pairs(f) do
        if k == "observed" and type(v) == "table" then
            for k2, v2 in pairs(v) do flat["observed_" .. k2] = v2 end
        elseif k ~= "logical_flow_id" and type(v) ~= "table" then
            flat[k] = v
        end
    end
    local keys = {}
    for k in pairs(flat) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = { "flow " .. f.logical_flow_id }
    for _, k in ipairs(keys) do
        local v = flat[k]
        parts[#parts + 1] = k .. "=" .. (type(v) == "string" and quote(v) or fmt_num(v))
    end
    return table.concat(parts, " ")
end

local function detail_lines(res)
    local lines = { string.format("SQOS flows (sqosa %s): %d", SQOSA_VERSION, #res.flows) }
    for _, f in ipairs(res.flows) do lines[#lines + 1] = flow_line(f) end
    for _, f in ipairs(res.flows) do
        for _, fd in ipairs(f.findings or {}) do
            lines[#lines + 1] = string.format(
                "finding %s code=%s severity=%s frame=%d occurrences=%d last_frame=%d message=%s",
                f.logical_flow_id, fd.code, fd.severity, fd.frame, fd.occurrences,
                fd.last_frame, quote(fd.message))
        end
    end
    return lines
end

local function summary_text(res)
    local out = {}
    if res.error then
        out[#out + 1] = "No analysis: " .. res.error
        return out
    end
    if res.note then out[#out + 1] = "Note: " .. res.note end
    if D.unwritten > 0 then
        out[#out + 1] = string.format("Note: %d frames have a link type other than the " ..
            "first frame's: sqos got them empty", D.unwritten)
    end
    for l in (res.text or ""):gmatch("([^\n]*)\n") do out[#out + 1] = l end
    out[#out + 1] = ""
    out[#out + 1] = "The same figures with the keys of `sqos flows --format json` " ..
        "(plugin/README.md):"
    for _, l in ipairs(detail_lines(res)) do out[#out + 1] = l end
    return out
end

local function window_text()
    local res = analysis(nil)
    local sqos = res.header and ("sqos " .. tostring(res.header.sqos)) or "no sqos"
    local out = { string.format("sqosa %s, %s (%s): %d frames read; updated %s", SQOSA_VERSION,
        sqos, tostring(res.program), res.upto, res.ran), "" }
    if res.keys then
        out[#out + 1] = "SMB3 keys: " .. res.keys
        out[#out + 1] = ""
    end
    if #res.flows == 0 and not res.error then
        out[#out + 1] = "No SQOS message seen yet. Open a capture with SMB3 " ..
            "FSCTL_STORAGE_QOS_CONTROL traffic"
        out[#out + 1] = "(or start a capture): this window follows the packets as they " ..
            "are read."
        out[#out + 1] = ""
    end
    for _, l in ipairs(summary_text(res)) do out[#out + 1] = l end
    return table.concat(out, "\n") .. "\n"
end

-- Open windows, redrawn when packets come (tap draw: every few seconds while packets are read,
-- and after the last one) and when a new file starts.
local windows = {}
local open_windows = 0

local function refresh_windows()
    if open_windows == 0 then return end
    for w in pairs(windows) do w:set(window_text()) end
end

function sqosa.init()
    close_dump()
    D.count, D.unwritten, D.error, D.second_pass, D.sqos_seen = 0, 0, nil, false, false
    R = nil
    refresh_windows()
end

function sqosa.prefs_changed()
    R = nil -- another sqos program: analyse again
end

-- tshark: the summary at the end of the run, and what kept the packets from showing analysis.
if not gui_enabled() then
    local tap = Listener.new("frame")
    function tap.draw()
        if flows_requested() then
            print(string.rep("=", 80))
            for _, l in ipairs(summary_text(analysis(nil))) do print(l) end
            print(string.rep("=", 80))
        end
        if D.sqos_seen and not D.second_pass and not flows_requested() then
            io.stderr:write("sqosa: the SQOS analysis is shown on the packets in a second " ..
                "pass: run tshark with -2\n")
        end
        if R and R.error then io.stderr:write("sqosa: " .. R.error .. "\n") end
        close_dump()
        remove_files()
    end
end

if gui_enabled() then
    -- Every frame asks for a redraw (a listener without `packet` never does); Wireshark then
    -- calls draw every few seconds ("taps.update_interval") while packets come in.
    local follow = Listener.new("frame")
    function follow.packet() return 1 end -- 1: redraw (wslua wants a number)
    function follow.draw() refresh_windows() end

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
        w:add_button("Refresh", function() w:set(window_text()) end)
        w:set(window_text())
    end
    -- MENU_STAT_UNSORTED: Wireshark 4.0's Qt main window puts no MENU_STAT_GENERIC item in any
    -- menu (its addMenuActions has no case for that group).
    register_menu("SQOS Flows", open_flows_window, MENU_STAT_UNSORTED)
end
