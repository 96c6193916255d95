-- mcp-bridges ComputerCraft client: links this computer to the MCP bridge and answers its requests.
-- Usage: client <ws://host:port/link> [token]     (install.lua writes a startup.lua that runs this on boot)
-- Run from the shell it is a foreground program: Ctrl+T stops it (and closes the link). startup.lua runs it
-- in the background (third argument "background"), where Ctrl+T belongs to the player's shell.
--
-- Why it is shaped like this (the CC facts and their sources: docs/protocols/computercraft.md):
-- * sleep(), turtle.* and any filtered os.pullEvent discard every other event, including websocket
--   messages, so the main loop never calls them: each request runs in its own coroutine, and the loop fans
--   every event out to the coroutines whose filter matches, the way `parallel` does.
-- * frames over 128 KiB close the link, so replies larger than MAX_FRAME are sent as `chunk` frames.
-- * textutils.serializeJSON drops nils, numeric keys of mixed tables and chokes on functions and NaN, so
--   every value is cleaned first and multiple results travel as {n, values}.
-- * os.getComputerLabel() returns no value at all when unlabelled; always assign it to a local first.
-- * run_lua code shares the computer with the player: it runs in a fresh environment, and whatever it did to
--   _G, the API tables or the terminal (term.redirect, e.g. a textutils.pagedPrint left waiting for a key)
--   is undone when it ends however it ends, so the client's own messages never block.
-- * Lua values become JSON one way (see `clean`): a table whose keys are exactly 1..n is an array; any other
--   table is an object whose keys are written with tostring (sparse slots {[1]=a, [5]=b} → {"1":a,"5":b}).

local args = { ... }
local LINK_URL = args[1]
local TOKEN = args[2]
local BACKGROUND = args[3] == "background"
-- The environment this client was loaded with: the shell's program environment (shell, require, package,
-- multishell) when startup.lua passes its own; run_lua code sees the same.
local PROGRAM_ENV = _ENV
if type(LINK_URL) ~= "string" or LINK_URL == "" then
  error("usage: client <ws://host:port/link> [token]", 0)
end

local PROTOCOL = 1
local MAX_FRAME = 65536          -- lowered (never raised) by the bridge's hello-ok
local CHUNK_PIECE = 30000        -- JSON escaping at most doubles a piece: 2 * 30000 + envelope < MAX_FRAME
local MAX_REPLY = 4 * 1024 * 1024 -- CC refuses more than 512 sends in flight; 4 MiB is ~140 chunks
local MAX_TASKS = 32             -- the bridge caps in-flight requests lower; this guards against a bad peer
local MAX_OUTPUT = 32 * 1024     -- printed output kept per run_lua call
local DEFAULT_TIMEOUT = 30
local REFUSED_RETRY = 300        -- seconds before retrying after the bridge refused the link (hello-rejected)
local NAME_MAX = 255             -- CC cuts longer names in a path (FileSystem.sanitizePath)
local READ_COPIES = 4            -- files copied for reads in progress, at most (the least recently used goes first)
local READ_COPY_BYTES = 8 * 1024 * 1024 -- bytes of those copies in all; the bridge reads no larger file
local FORWARDED = {
  redstone = true, turtle_inventory = true, peripheral = true, peripheral_detach = true,
  disk = true, disk_eject = true, monitor_touch = true, monitor_resize = true,
}
local JSON_IN = { parse_empty_array = false } -- the default returns a read-only sentinel for []

---------------------------------------------------------------------------------------------------------
-- values → JSON-safe values

local PACKED = setmetatable({}, { __mode = "k" }) -- value lists made by pack → their length

-- textutils writes numbers with %.14g: numbers it would round travel as a placeholder string that send
-- replaces with their exact text (integers as integers, other numbers with 17 significant digits).
local exactNumbers = nil
local NUM_TAG = "mcp-num-0f6e-"

local function clean(v, depth, seen)
  local t = type(v)
  if t == "number" then
    if v ~= v then return "nan" end
    if v == math.huge then return "inf" end
    if v == -math.huge then return "-inf" end
    if exactNumbers and tonumber(("%.14g"):format(v)) ~= v then
      local text
      if v == math.floor(v) and v > -2 ^ 63 and v < 2 ^ 63 then text = ("%d"):format(v) else text = ("%.17g"):format(v) end
      exactNumbers[#exactNumbers + 1] = text
      return NUM_TAG .. #exactNumbers
    end
    return v
  elseif t == "string" or t == "boolean" or t == "nil" then
    return v
  elseif t ~= "table" then
    return tostring(v)
  end
  depth = depth or 0
  seen = seen or {}
  if seen[v] or depth > 32 then return tostring(v) end
  if PACKED[v] then
    local out = {}
    for i = 1, PACKED[v] do out[i] = clean(v[i], depth + 1, seen) end
    return out
  end
  seen[v] = true
  -- A sequence (keys exactly 1..n) is an array; anything else, sparse integer keys included, an object
  -- with string keys, so one table never changes shape with the spacing of its keys.
  local count, sequence = 0, true
  for k in pairs(v) do
    count = count + 1
    if type(k) ~= "number" or k < 1 or k ~= math.floor(k) then sequence = false end
  end
  if sequence then
    for i = 1, count do
      if v[i] == nil then sequence = false break end
    end
  end
  local out = {}
  if sequence then
    for i = 1, count do out[i] = clean(v[i], depth + 1, seen) end
  else
    for k, val in pairs(v) do out[tostring(k)] = clean(val, depth + 1, seen) end
  end
  seen[v] = nil
  return out
end

-- Multiple results travel as {n, values}: values is a JSON array with null for each nil (serializeJSON
-- writes holes as null), so it is cleaned slot by slot, not as a table.
local function pack(...)
  local values = {}
  local n = select("#", ...)
  for i = 1, n do values[i] = (select(i, ...)) end
  local p = { n = n, values = values }
  PACKED[values] = n
  return p
end

---------------------------------------------------------------------------------------------------------
-- base64 (file bytes: CC's JSON would escape every byte >= 0x7F as six characters)

-- CC aborts code that runs about 7 s without yielding to the computer's event loop, and a slow server runs Lua
-- far slower than a desktop: the codec works on blocks of BLOCK bytes and yields between them (breathe), and
-- spends a handful of instructions per 3 bytes (tables of 12-bit pairs, string.byte over the block,
-- table.concat), where the old one spent dozens and took 16 s for 45 KB on CraftOS-PC.

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local BLOCK = 6144               -- raw bytes per piece between yields (a multiple of 3)
local floor, byte, char, concat = math.floor, string.byte, string.char, table.concat
local ENC1, ENC2, DEC2 = {}, {}, {}
for i = 0, 63 do ENC1[i] = B64:sub(i + 1, i + 1) end
for i = 0, 4095 do ENC2[i] = ENC1[floor(i / 64)] .. ENC1[i % 64] end
for i = 0, 63 do
  for j = 0, 63 do DEC2[byte(B64, i + 1) * 256 + byte(B64, j + 1)] = i * 64 + j end
end

-- Lets the computer run its event loop: a private event queued and pulled, the CC idiom. Several requests
-- may breathe at once; each waits for its own token, so one event wakes one request's work.
local breathToken = 0
local function breathe()
  breathToken = breathToken + 1
  local token = breathToken
  os.queueEvent("mcp_breathe", token)
  repeat
    local _, got = os.pullEventRaw("mcp_breathe")
  until got == token
end

-- A result whose `data` is RAW_MARK carries base64 in RAW[result]; send splices it into the frame's text, so
-- textutils (which walks a string character by character in Lua) never sees the 60 KB of it.
local RAW_MARK = "mcp-raw-base64-0f6e"
local RAW = setmetatable({}, { __mode = "k" })

local function b64encode(s)
  local out, k, len = {}, 0, #s
  local whole = len - len % 3
  for from = 1, whole, BLOCK do
    local to = math.min(from + BLOCK - 1, whole)
    for i = from, to, 3 do
      local a, b, c = byte(s, i, i + 2)
      local n = a * 65536 + b * 256 + c
      local lo = n % 4096
      out[k + 1] = ENC2[(n - lo) / 4096]
      out[k + 2] = ENC2[lo]
      k = k + 2
    end
    if to < whole then breathe() end
  end
  if len - whole == 1 then
    local a = byte(s, len)
    out[k + 1] = ENC2[a * 16] .. "=="
  elseif len - whole == 2 then
    local a, b = byte(s, len - 1, len)
    local n = a * 1024 + b * 4
    out[k + 1] = ENC2[floor(n / 64)] .. ENC1[n % 64] .. "="
  end
  return concat(out)
end

local function b64decode(s)
  local len = #s
  if len % 4 ~= 0 then return nil, "base64 length is not a multiple of 4" end
  local pad = 0
  if len > 0 and byte(s, len) == 61 then pad = byte(s, len - 1) == 61 and 2 or 1 end
  local whole = pad > 0 and len - 4 or len
  local out, k = {}, 0
  local step = BLOCK / 3 * 4
  for from = 1, whole, step do
    local to = math.min(from + step - 1, whole)
    for i = from, to, 4 do
      local c1, c2, c3, c4 = byte(s, i, i + 3)
      local hi, lo = DEC2[c1 * 256 + c2], DEC2[c3 * 256 + c4]
      if not (hi and lo) then return nil, "invalid base64 at " .. i end
      local n = hi * 4096 + lo
      local b3 = n % 256
      local b2 = (n - b3) / 256 % 256
      k = k + 1
      out[k] = char((n - b2 * 256 - b3) / 65536, b2, b3)
    end
    if to < whole then breathe() end
  end
  if pad > 0 then
    local c1, c2, c3 = byte(s, len - 3, len - 1)
    local hi = DEC2[c1 * 256 + c2]
    if not hi then return nil, "invalid base64 at " .. (len - 3) end
    if pad == 2 then
      if hi % 16 ~= 0 then return nil, "invalid base64 at " .. (len - 3) end
      out[k + 1] = char(hi / 16)
    else
      local v3 = DEC2[c3 * 256 + 65] -- 'A' as the fourth character: c3's six bits
      if not v3 then return nil, "invalid base64 at " .. (len - 1) end
      local n = hi * 4096 + v3
      local b2 = floor(n / 256) % 256
      if n % 256 ~= 0 then return nil, "invalid base64 at " .. (len - 1) end
      out[k + 1] = char(floor(n / 65536), b2)
    end
  end
  return concat(out)
end

---------------------------------------------------------------------------------------------------------
-- request handlers: each runs in its own coroutine; raise fail(code, message) for classified errors

local function fail(code, message, data)
  error({ code = code, message = message, data = data }, 0)
end

local function myLabel()
  local label = os.getComputerLabel()
  return label
end

local function myKind()
  if turtle then return "turtle" end
  if pocket then return "pocket" end
  return "computer"
end

local handlers = {}

-- Ends the write whose temp file is `tmp` (its chunk still being written, if any) and deletes that file; set in
-- the link section, where the tasks are.
local abortWrite

handlers.ping = function()
  local label = myLabel()
  return ("pong from %d (Label: %s)"):format(os.getComputerID(), tostring(label))
end

-- What run_lua code may change on the computer, saved when the first run starts and put back when the last
-- one ends (runs can overlap): the terminal redirect, _G's fields and the fields of every table in _G (the
-- APIs: os.pullEvent = os.pullEventRaw is a common line in CC programs).
local runsActive, saved = 0, nil

local function snapshot()
  local globals, apis = {}, {}
  for k, v in pairs(_G) do
    globals[k] = v
    if type(v) == "table" and v ~= _G and apis[v] == nil then
      local fields = {}
      for fk, fv in pairs(v) do fields[fk] = fv end
      apis[v] = fields
    end
  end
  return { term = term.current(), globals = globals, apis = apis }
end

local function putBack(fields, t)
  local extra = {}
  for k in pairs(t) do
    if fields[k] == nil then extra[#extra + 1] = k end
  end
  for _, k in ipairs(extra) do rawset(t, k, nil) end
  for k, v in pairs(fields) do
    if rawget(t, k) ~= v then rawset(t, k, v) end
  end
end

local function restore(s)
  putBack(s.globals, _G)
  for t, fields in pairs(s.apis) do putBack(fields, t) end
  if term.current() ~= s.term then term.redirect(s.term) end
end

local function runStarted()
  if runsActive == 0 then saved = snapshot() end
  runsActive = runsActive + 1
end

local function runEnded()
  runsActive = runsActive - 1
  if runsActive == 0 and saved then
    restore(saved)
    saved = nil
  end
end

-- A fresh environment per run: globals the code sets stay in it. shell, multishell come from the program
-- environment the client was started with; require and package are made anew for each run (cc.require),
-- as the shell does for each program.
local function runEnv(emit)
  local env = setmetatable({}, { __index = PROGRAM_ENV })
  local req = rawget(PROGRAM_ENV, "require")
  if req then
    local ok, r = pcall(req, "cc.require")
    if ok and type(r) == "table" and r.make then env.require, env.package = r.make(env, "/") end
  end
  env.print = function(...)
    local parts = {}
    for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
    emit(table.concat(parts, "\t") .. "\n")
    return 1
  end
  env.write = function(s) emit(tostring(s)) return 1 end
  env.printError = env.print
  return env
end

-- A terminal that writes into the run's output instead of the screen: programs started with shell.run, and
-- anything that writes through term, print into `output` and leave the player's screen alone. Moving the
-- cursor down (print's newline, a scroll) is a newline in the output.
local function captureTerm(emit)
  local native = term.native and term.native() or term.current()
  local w, h = native.getSize()
  local x, y, fg, bg, blink = 1, 1, colors and colors.white or 1, colors and colors.black or 32768, false
  local t = {}
  function t.write(text) text = tostring(text) emit(text) x = x + #text end
  function t.blit(text) t.write(text) end
  function t.setCursorPos(nx, ny)
    if type(ny) == "number" and ny > y then emit(("\n"):rep(math.min(ny - y, h))) end
    x, y = nx, ny
  end
  function t.getCursorPos() return x, y end
  function t.scroll(n) if type(n) == "number" and n > 0 then emit(("\n"):rep(math.min(n, h))) end end
  function t.getSize() return w, h end
  function t.clear() end
  function t.clearLine() end
  function t.setCursorBlink(b) blink = b end
  function t.getCursorBlink() return blink end
  function t.isColor() return native.isColor() end
  t.isColour = t.isColor
  function t.setTextColor(c) fg = c end
  t.setTextColour = t.setTextColor
  function t.getTextColor() return fg end
  t.getTextColour = t.getTextColor
  function t.setBackgroundColor(c) bg = c end
  t.setBackgroundColour = t.setBackgroundColor
  function t.getBackgroundColor() return bg end
  t.getBackgroundColour = t.getBackgroundColor
  return setmetatable(t, { __index = function(_, k) return native[k] end })
end

handlers["lua.run"] = function(p, task)
  if type(p.code) ~= "string" then fail("invalid", "code must be a string") end
  local out, size, truncated = {}, 0, false
  local function emit(s)
    if size >= MAX_OUTPUT then truncated = true return end
    if size + #s > MAX_OUTPUT then
      s = s:sub(1, MAX_OUTPUT - size)
      truncated = true
    end
    out[#out + 1] = s
    size = size + #s
  end
  if task then
    task.term = captureTerm(emit)
    term.redirect(task.term)
  end
  local fn, err = load(p.code, "=mcp", "t", runEnv(emit))
  if not fn then fail("syntax", err, { output = "" }) end
  local r = table.pack(pcall(fn))
  if not r[1] then
    local msg = r[2]
    if type(msg) == "table" then
      local okJson, json = pcall(textutils.serializeJSON, clean(msg))
      msg = okJson and json or tostring(msg)
    elseif type(msg) ~= "string" then
      msg = tostring(msg)
    end
    fail("lua", msg, { output = table.concat(out), truncated = truncated })
  end
  local result = pack(table.unpack(r, 2, r.n))
  result.output = table.concat(out)
  result.truncated = truncated
  return result
end

-- %c also matches DEL (127), which CC keeps in a name.
local function keepDel(c)
  if c == "\127" then return c end
  return ""
end

-- Paths the computer cannot use are the caller's mistake: say so and name the path, before CC raises an
-- error carrying the client's own file and line.
local function needPath(p)
  local path = p.path
  if type(path) ~= "string" then fail("invalid", "path must be a string") end
  -- Counted here, not left to fs.combine: runtimes differ on a leading "/.." (CraftOS-PC drops it). Each
  -- part as CC's sanitizePath reads it: control characters below 32 and these characters dropped (DEL is
  -- kept), spaces trimmed; "." and "..." (any run of three dots or more) name nothing.
  local depth = 0
  for part in path:gmatch("[^/\\]+") do
    local name = part:gsub('[%c"*:<>?|]', keepDel):match("^ *(.-) *$")
    if name == ".." then
      depth = depth - 1
    elseif name ~= "" and not name:match("^%.+$") then
      depth = depth + 1
    end
    if depth < 0 then fail("invalid", ("path %q climbs above the computer's root"):format(path)) end
    -- CC cuts a name at 255 characters: a longer one would silently be another file.
    if #name > NAME_MAX then
      fail("invalid", ("path has a name of %d bytes; CC cuts names at %d"):format(#name, NAME_MAX))
    end
  end
  local ok, full = pcall(fs.combine, path)
  if not ok or full == ".." or full:sub(1, 3) == "../" then
    fail("invalid", ("path %q climbs above the computer's root"):format(path))
  end
  local dir = fs.getDir(full)
  while dir ~= "" and dir ~= ".." do
    if fs.exists(dir) and not fs.isDir(dir) then
      fail("invalid", ("path %q goes through %q, which is a file, not a directory"):format(path, dir))
    end
    dir = fs.getDir(dir)
  end
  return full
end

handlers["fs.list"] = function(p)
  local path = needPath(p)
  if not fs.exists(path) then fail("not_found", "No such directory: " .. path) end
  if not fs.isDir(path) then fail("conflict", "Not a directory: " .. path) end
  local entries = {}
  for _, name in ipairs(fs.list(path)) do
    local full = fs.combine(path, name)
    local dir = fs.isDir(full)
    entries[#entries + 1] = { name = name, dir = dir, size = dir and 0 or fs.getSize(full) }
  end
  return { entries = entries }
end

-- Ids the bridge gives a write or a read, sent with each of its chunks.
local function needId(v, field)
  if type(v) ~= "string" or not v:match("^%w+$") or #v > 16 then
    fail("invalid", field .. " must be up to 16 letters and digits")
  end
  return v
end

-- Copies of files being read in chunks, by the read id the bridge sends with every chunk. The first chunk reads
-- the whole file in one step, and no other program on the computer runs until the handler yields, so the copy
-- is one version of the file; the later chunks come from it, whatever programs write to the file meanwhile (a
-- log that keeps growing reads as it was at the first chunk). A copy goes with the read's last chunk, the
-- bridge's fs.read_done, a chunk cancelled or timed out while it is served, the link dropping, or to make room
-- for a newer one (READ_COPIES, READ_COPY_BYTES): only a copy no chunk was served from for COPY_IDLE_MS, whose
-- read the bridge has given up. With no such copy to drop, a new read is served without a copy (its chunks are
-- then checked by size and modification time), so reads under way never take each other's copies.
local COPY_IDLE_MS = 30000
local reads, readBytes = {}, 0

local function nowMs()
  if os.epoch then return os.epoch("utc") end
  return os.clock() * 1000
end

local function dropRead(id)
  local copy = reads[id]
  if copy then
    readBytes = readBytes - #copy.data
    reads[id] = nil
  end
end

-- Makes room for a copy of `size` bytes by dropping idle copies, oldest first; false when it cannot.
local function makeRoom(size)
  local now = nowMs()
  while true do
    local count, oldest = 0, nil
    for id, copy in pairs(reads) do
      count = count + 1
      if now - copy.at >= COPY_IDLE_MS and (oldest == nil or copy.at < reads[oldest].at) then oldest = id end
    end
    if count < READ_COPIES and readBytes + size <= READ_COPY_BYTES then return true end
    if oldest == nil then return false end
    dropRead(oldest)
  end
end

local function serveCopy(copy, id, offset, length, task)
  copy.at = nowMs()
  local data = copy.data:sub(offset + 1, offset + length)
  local eof = offset + #data >= #copy.data
  local r = { size = #copy.data, offset = offset, data = RAW_MARK, eof = eof, modified = copy.modified, read = id }
  -- Encoding yields: a chunk cancelled or timed out meanwhile ends the read, and endTask drops its copy.
  if task then task.read = id end
  RAW[r] = b64encode(data)
  if task then task.read = nil end
  if eof then dropRead(id) end
  return r
end

handlers["fs.read"] = function(p, task)
  local path = needPath(p)
  local offset, length = tonumber(p.offset) or 0, tonumber(p.length) or 49152
  local readId = p.read ~= nil and needId(p.read, "read") or nil
  if readId and offset > 0 then
    local copy = reads[readId]
    if not copy or copy.path ~= path then
      fail("conflict", ("the copy of %s this read was served from is gone (more reads at once than the "
        .. "computer keeps copies for, or the read was given up)"):format(path), { read = "dropped" })
    end
    return serveCopy(copy, readId, offset, length, task)
  end
  if not fs.exists(path) then fail("not_found", "No such file: " .. path) end
  if fs.isDir(path) then fail("conflict", "Is a directory: " .. path) end
  local size = fs.getSize(path)
  -- A bridge that sends no read id compares size and modification time between chunks instead, so a file
  -- rewritten while it is read never comes back spliced from two versions. fs.attributes is CC:Tweaked 1.87+;
  -- its `modified` was `modification` before 1.91.
  local modified = nil
  if fs.attributes then
    local okA, attr = pcall(fs.attributes, path)
    if okA and type(attr) == "table" then modified = attr.modified or attr.modification end
    if type(modified) ~= "number" then modified = nil end
  end
  local h, err = fs.open(path, "rb")
  if not h then fail("remote", err or ("cannot open " .. path)) end
  if readId then dropRead(readId) end
  if readId and size > length and size <= READ_COPY_BYTES and makeRoom(size) then
    local all
    if h.readAll then all = h.readAll() else all = h.read(size) end
    h.close()
    all = all or ""
    local copy = { path = path, data = all, modified = modified, at = nowMs() }
    reads[readId] = copy
    readBytes = readBytes + #all
    return serveCopy(copy, readId, 0, length, task)
  end
  -- One chunk is the whole file, no copy was asked for, or there is no room for one (the file is too large:
  -- the bridge refuses it by its size; or reads under way hold all the room): no `read` in the reply, and the
  -- bridge asks for the later chunks without one.
  if offset > 0 then h.seek("set", offset) end
  local data = ""
  if length > 0 and offset < size then data = h.read(length) or "" end
  h.close()
  local r = { size = size, offset = offset, data = RAW_MARK, eof = offset + #data >= size, modified = modified }
  RAW[r] = b64encode(data)
  return r
end

-- The bridge gave up on a read (its call failed, timed out or was cancelled) before its last chunk.
handlers["fs.read_done"] = function(p)
  local id = needId(p.read, "read")
  local held = reads[id] ~= nil
  dropRead(id)
  return { dropped = held }
end

-- Temp files of writes in progress (chunks still to come), by their path. Each write has its own, named by
-- the write id the bridge sends with every chunk, so two writes never fill one temp file. A temp file goes
-- when its write ends however it ends: in place, an error, a timeout or a cancel (endTask), the bridge's
-- fs.abort, the link dropping, or the next write to the same file starting.
local writes = {}

local function tempName(path, writeId)
  if writeId == nil then return path .. ".mcp-part" end -- a bridge that sends no id (before write ids)
  return path .. ".mcp-part-" .. needId(writeId, "write")
end

local function dropTemp(tmp)
  writes[tmp] = nil
  pcall(fs.delete, tmp)
end

-- Every temp file beside path but `own`, with the write that fills it if one is still in progress here. The
-- bridge runs one write at a time per file, so a write that starts makes every earlier one to that file
-- history: its end never reached the computer (the bridge's fs.abort was lost, the computer rebooted or the
-- client stopped mid-write), and its temp file would hold the disk until the link drops.
local function dropOthers(path, own)
  local dir, name = fs.getDir(path), fs.getName(path)
  local prefix = name .. ".mcp-part"
  local function isTemp(n)
    return n:sub(1, #prefix) == prefix and (#n == #prefix or n:sub(#prefix + 1, #prefix + 1) == "-")
  end
  local others = {}
  local okL, names = pcall(fs.list, dir)
  if okL then
    for _, n in ipairs(names) do
      if isTemp(n) then others[fs.combine(dir, n)] = true end
    end
  end
  for tmp in pairs(writes) do
    if fs.getDir(tmp) == dir and isTemp(fs.getName(tmp)) then others[tmp] = true end
  end
  others[own] = nil
  for tmp in pairs(others) do abortWrite(tmp) end
end

handlers["fs.write"] = function(p, task)
  local path = needPath(p)
  if type(p.data) ~= "string" then fail("invalid", "data must be base64 text") end
  local part = p.part or "whole"
  if part ~= "whole" and part ~= "first" and part ~= "middle" and part ~= "last" then
    fail("invalid", "part must be whole, first, middle or last")
  end
  -- Chunks go to a side file that replaces the target only when complete, so a dropped link never leaves
  -- a half-written program behind.
  local tmp = tempName(path, p.write)
  if #fs.getName(path) + #tmp - #path > NAME_MAX then
    fail("invalid", ("path's file name is too long for its temp file (CC cuts names at %d)"):format(NAME_MAX))
  end
  local starting = part == "whole" or part == "first"
  if not starting and not (writes[tmp] and fs.exists(tmp)) then fail("conflict", "no write in progress for " .. path) end
  -- From here until the chunk is written, the temp file is this task's: if the task ends any other way
  -- (error, timeout, cancel), endTask deletes it.
  if task then task.tmp = tmp end
  local bytes, err = b64decode(p.data)
  if not bytes then fail("invalid", err) end
  if fs.isReadOnly(path) then fail("conflict", "Path is read-only: " .. path) end
  if fs.isDir(path) then fail("conflict", "Is a directory: " .. path) end
  if starting then
    dropOthers(path, tmp)
    writes[tmp] = true
  end
  local dir = fs.getDir(path)
  if dir ~= "" and not fs.exists(dir) then fs.makeDir(dir) end
  local h, openErr = fs.open(tmp, starting and "wb" or "ab")
  if not h then fail("remote", openErr or ("cannot open " .. tmp)) end
  h.write(bytes)
  h.close()
  if part == "whole" or part == "last" then
    if fs.exists(path) then fs.delete(path) end
    fs.move(tmp, path)
    writes[tmp] = nil
    if task then task.tmp = nil end
    return { size = fs.getSize(path), done = true }
  end
  if task then task.tmp = nil end
  return { size = fs.getSize(tmp), done = false }
end

handlers["fs.delete"] = function(p)
  local path = needPath(p)
  if path == "" then fail("invalid", "path is the computer's root; fs_delete deletes what is in it, not the root") end
  if not fs.exists(path) then fail("not_found", "No such file: " .. path) end
  if fs.isReadOnly(path) then fail("conflict", "Path is read-only: " .. path) end
  fs.delete(path)
  return { deleted = path }
end

local TURTLE_ACTIONS = {}
for name in ([[forward back up down turnLeft turnRight dig digUp digDown place placeUp placeDown
  detect detectUp detectDown inspect inspectUp inspectDown select getSelectedSlot getItemCount getItemSpace
  getItemDetail getFuelLevel getFuelLimit refuel suck suckUp suckDown drop dropUp dropDown attack attackUp
  attackDown compare compareUp compareDown compareTo transferTo equipLeft equipRight craft]]):gmatch("%S+") do
  TURTLE_ACTIONS[name] = true
end

local function needTurtle()
  if not turtle then fail("unsupported", "computer " .. os.getComputerID() .. " is not a turtle") end
end

handlers.turtle = function(p)
  needTurtle()
  local action = p.action
  if not TURTLE_ACTIONS[action] or type(turtle[action]) ~= "function" then
    fail("unsupported", "turtle action not available: " .. tostring(action))
  end
  local a = p.args or {}
  return pack(turtle[action](table.unpack(a, 1, tonumber(p.nargs) or #a)))
end

handlers["turtle.inventory"] = function()
  needTurtle()
  local slots = {}
  for slot = 1, 16 do
    local item = turtle.getItemDetail(slot)
    if item then slots[#slots + 1] = { slot = slot, name = item.name, count = item.count } end
  end
  return { selected = turtle.getSelectedSlot(), fuel = turtle.getFuelLevel(), slots = slots }
end

handlers["peripheral.list"] = function()
  local list = {}
  for _, name in ipairs(peripheral.getNames()) do
    list[#list + 1] = { name = name, types = { peripheral.getType(name) }, methods = peripheral.getMethods(name) or {} }
  end
  return { peripherals = list }
end

handlers["peripheral.call"] = function(p)
  if type(p.name) ~= "string" or type(p.method) ~= "string" then fail("invalid", "name and method are strings") end
  if not peripheral.isPresent(p.name) then fail("not_found", "No peripheral attached as " .. p.name) end
  local known = false
  for _, m in ipairs(peripheral.getMethods(p.name) or {}) do
    if m == p.method then known = true end
  end
  if not known then fail("not_found", "No such method " .. p.method .. " on " .. p.name) end
  local a = p.args or {}
  return pack(peripheral.call(p.name, p.method, table.unpack(a, 1, tonumber(p.nargs) or #a)))
end

local function sideState(side)
  return {
    side = side, input = redstone.getInput(side), analogInput = redstone.getAnalogInput(side),
    output = redstone.getOutput(side), analogOutput = redstone.getAnalogOutput(side),
  }
end

local function needSide(side)
  for _, s in ipairs(redstone.getSides()) do
    if s == side then return side end
  end
  fail("invalid", "side must be one of " .. table.concat(redstone.getSides(), ", "))
end

handlers["redstone.get"] = function(p)
  local sides = {}
  if p.side ~= nil then
    sides[1] = sideState(needSide(p.side))
  else
    for _, s in ipairs(redstone.getSides()) do sides[#sides + 1] = sideState(s) end
  end
  return { sides = sides }
end

handlers["redstone.set"] = function(p)
  local side = needSide(p.side)
  if type(p.strength) == "number" then
    redstone.setAnalogOutput(side, p.strength)
  else
    redstone.setOutput(side, p.on == true)
  end
  return sideState(side)
end

---------------------------------------------------------------------------------------------------------
-- the link

local ws, url, linked = nil, nil, false
local nonce = 0
local attempt = 0
local retryTimer = nil
local tasks = {}        -- request id → { co, filter, timer }
local taskCount = 0
local timeouts = {}     -- timer id → request id

-- The client's messages go to the terminal it started on, whatever run_lua code redirected the terminal to
-- (a paging terminal would make print wait for a key and stall the link).
-- In the background the player's screen is theirs: the client's status lines go to /mcp/client.log, and only
-- what the player must act on (the bridge refusing the link) is shown.
local screen = term.current()
local LOG = "/mcp/client.log"
local function log(line, show)
  line = "[mcp] " .. line
  if BACKGROUND then
    pcall(function()
      if fs.exists(LOG) and fs.getSize(LOG) > 16384 then fs.delete(LOG) end
      local h = fs.open(LOG, "a")
      if h then h.writeLine(line) h.close() end
    end)
    if not show then return end
  end
  local previous = term.redirect(screen)
  pcall(print, line)
  term.redirect(previous)
end

local function rawSend(text)
  if not ws then return false end
  local ok, err = pcall(ws.send, text)
  if not ok then
    log("send failed: " .. tostring(err))
    return false
  end
  return true
end

local function send(frame)
  exactNumbers = {}
  local cleaned = clean(frame)
  local numbers = exactNumbers
  exactNumbers = nil
  local ok, text = pcall(textutils.serializeJSON, cleaned)
  if ok and #numbers > 0 then
    text = text:gsub('"' .. NUM_TAG:gsub("%-", "%%-") .. '(%d+)"', function(k) return numbers[tonumber(k)] end)
  end
  local raw = type(frame.result) == "table" and RAW[frame.result]
  if ok and raw then
    local i, j = text:find('"' .. RAW_MARK .. '"', 1, true)
    if i then text = text:sub(1, i) .. raw .. text:sub(j) end
  end
  if not ok then
    return rawSend(textutils.serializeJSON({ type = "response", id = frame.id, ok = false, code = "remote",
      error = "result cannot be serialised: " .. tostring(text) }))
  end
  if #text <= MAX_FRAME then return rawSend(text) end
  if frame.type ~= "response" then return false end
  if #text > MAX_REPLY then
    return rawSend(textutils.serializeJSON({ type = "response", id = frame.id, ok = false, code = "too_large",
      error = ("reply of %d bytes exceeds %d"):format(#text, MAX_REPLY) }))
  end
  local seq = 0
  for i = 1, #text, CHUNK_PIECE do
    local last = i + CHUNK_PIECE > #text
    if not rawSend(textutils.serializeJSON({ type = "chunk", id = frame.id, seq = seq, last = last,
        data = text:sub(i, i + CHUNK_PIECE - 1) })) then
      return false
    end
    seq = seq + 1
  end
  return true
end

-- Forgets a task however it ends (done, timed out, cancelled, link lost); its coroutine is never resumed
-- again, and what a run_lua changed is undone.
local function endTask(id)
  local task = tasks[id]
  if not task then return nil end
  tasks[id] = nil
  taskCount = taskCount - 1
  if task.timer then
    timeouts[task.timer] = nil
    if os.cancelTimer then os.cancelTimer(task.timer) end
  end
  if task.run then runEnded() end
  if task.tmp then dropTemp(task.tmp) end
  if task.read then dropRead(task.read) end
  return task
end

-- The bridge gave up on a write (its call failed, timed out or was cancelled): its temp file goes, and so
-- does a chunk of it still being written.
abortWrite = function(tmp)
  local ids = {}
  for id, task in pairs(tasks) do
    if task.tmp == tmp then ids[#ids + 1] = id end
  end
  for _, id in ipairs(ids) do endTask(id) end
  local existed = fs.exists(tmp)
  dropTemp(tmp)
  return existed
end

handlers["fs.abort"] = function(p)
  return { aborted = abortWrite(tempName(needPath(p), p.write)) }
end

-- Requests that only free what earlier ones hold (a write's temp file, a read's copy) are answered at once,
-- without a task of their own, so a computer whose tasks are all taken never refuses them as busy: that is
-- exactly when a write times out and is aborted. Their handlers never yield.
local INSTANT = { ["fs.abort"] = true, ["fs.read_done"] = true }

local function respond(id, ok, value)
  if not linked then return end
  if ok then
    send({ type = "response", id = id, ok = true, result = value })
  elseif type(value) == "table" and value.message ~= nil then
    send({ type = "response", id = id, ok = false, error = tostring(value.message), code = value.code,
      data = value.data })
  else
    send({ type = "response", id = id, ok = false, error = tostring(value) })
  end
end

local function finish(id, ok, value)
  if endTask(id) then respond(id, ok, value) end
end

-- A run's terminal redirect is its own: set while its coroutine runs, put back after, so overlapping runs
-- and the client never write into each other's terminal.
local function resume(id, ...)
  local task = tasks[id]
  local before = term.current()
  if task.term then term.redirect(task.term) end
  local r = table.pack(coroutine.resume(task.co, ...))
  if task.term then
    task.term = term.current()
    term.redirect(before)
  end
  if coroutine.status(task.co) == "dead" then
    finish(id, r[1], r[2])
  else
    task.filter = r[2]
  end
end

local function startRequest(frame)
  local id = frame.id
  if type(id) ~= "string" then return end
  if tasks[id] then return end
  local handler = handlers[frame.method]
  if not handler then
    send({ type = "response", id = id, ok = false, code = "unsupported", error = "unknown method " .. tostring(frame.method) })
    return
  end
  local params = type(frame.params) == "table" and frame.params or {}
  if INSTANT[frame.method] then
    respond(id, pcall(handler, params))
    return
  end
  if taskCount >= MAX_TASKS then
    send({ type = "response", id = id, ok = false, code = "busy", error = "too many requests in flight" })
    return
  end
  local task = { run = frame.method == "lua.run" }
  task.co = coroutine.create(function() return handler(params, task) end)
  if task.run then runStarted() end
  local timeout = tonumber(params.timeout) or DEFAULT_TIMEOUT
  if timeout > 0 then
    task.timer = os.startTimer(timeout)
    timeouts[task.timer] = id
  end
  tasks[id] = task
  taskCount = taskCount + 1
  resume(id)
end

-- Every task ends, and every write and read in progress with it: the bridge cannot go on with them over
-- another link, so a temp file would only take up the disk and a copy the computer's memory.
local function dropTasks()
  local ids = {}
  for id in pairs(tasks) do ids[#ids + 1] = id end
  for _, id in ipairs(ids) do endTask(id) end
  local temps = {}
  for tmp in pairs(writes) do temps[#temps + 1] = tmp end
  for _, tmp in ipairs(temps) do dropTemp(tmp) end
  reads, readBytes = {}, 0
end

local function scheduleRetry(reason, delay)
  ws, linked = nil, false
  dropTasks()
  attempt = attempt + 1
  delay = delay or math.min(30, 2 ^ math.min(attempt - 1, 5)) * (0.75 + math.random() * 0.5)
  log(("link down (%s); retrying in %.1fs"):format(tostring(reason), delay))
  retryTimer = os.startTimer(delay)
end

local function connect()
  nonce = nonce + 1
  -- Events carry only the URL, so each connection gets its own.
  local sep = LINK_URL:find("?", 1, true) and "&" or "?"
  url = ("%s%sid=%d&n=%d%d"):format(LINK_URL, sep, os.getComputerID(), nonce, math.random(0, 99999))
  local headers = TOKEN and { Authorization = "Bearer " .. TOKEN } or nil
  local ok, err = http.websocketAsync(url, headers)
  if ok == false then scheduleRetry(err) end
end

local function onFrame(text)
  local frame = textutils.unserialiseJSON(text, JSON_IN)
  if type(frame) ~= "table" then
    log("ignored a malformed frame")
    return
  end
  if frame.type == "request" then
    startRequest(frame)
  elseif frame.type == "cancel" then
    endTask(frame.id)
  elseif frame.type == "hello-ok" then
    linked, attempt = true, 0
    if tonumber(frame.maxFrame) and frame.maxFrame < MAX_FRAME then MAX_FRAME = frame.maxFrame end
    if tonumber(frame.maxInFlight) and frame.maxInFlight > MAX_TASKS then MAX_TASKS = frame.maxInFlight end
    log("linked to " .. LINK_URL)
  elseif frame.type == "hello-rejected" then
    -- A refusal (another machine holds this computer's id, or a protocol mismatch) will not change by itself:
    -- show it in full and come back rarely instead of fighting over the id.
    log("bridge refused the link: " .. tostring(frame.error), true)
    pcall(ws.close)
    url = nil
    scheduleRetry("refused", REFUSED_RETRY)
  end
end

local helloLabel = nil

local function sayHello()
  helloLabel = myLabel()
  rawSend(textutils.serializeJSON({ type = "hello", protocol = PROTOCOL, computerId = os.getComputerID(),
    computerLabel = helloLabel, kind = myKind(), host = _HOST }))
end

local function handleEvent(ev)
  local name = ev[1]
  if name == "websocket_success" and ev[2] == url then
    ws = ev[3]
    sayHello()
  elseif name == "websocket_failure" and ev[2] == url then
    scheduleRetry(ev[3])
  elseif name == "websocket_closed" and ev[2] == url then
    url = nil
    scheduleRetry(ev[3] or "closed")
  elseif name == "websocket_message" and ev[2] == url then
    if not ev[4] then onFrame(ev[3]) end
  elseif name == "timer" and ev[2] == retryTimer then
    retryTimer = nil
    connect()
  elseif name == "timer" and timeouts[ev[2]] then
    local id = timeouts[ev[2]]
    timeouts[ev[2]] = nil
    if tasks[id] then tasks[id].timer = nil end
    finish(id, false, { code = "timeout", message = "request timed out on the computer" })
  elseif linked and FORWARDED[name] then
    send({ type = "event", event = name, args = pack(table.unpack(ev, 2, ev.n)).values })
  end
end

-- Returns when the client should stop: Ctrl+T while it runs in the foreground.
local function run()
  connect()
  while true do
    local ev = table.pack(os.pullEventRaw())
    if ev[1] == "terminate" and BACKGROUND then
      -- The player's Ctrl+T is for their shell; requests keep running.
    elseif ev[1] == "terminate" then
      return "terminated"
    else
      -- Snapshot first: a request started by this very event must not also receive it.
      local waiting = {}
      for id, task in pairs(tasks) do waiting[#waiting + 1] = { id = id, task = task } end
      handleEvent(ev)
      -- CC has no event for a new label; a hello on the same link tells the bridge.
      if linked and myLabel() ~= helloLabel then sayHello() end
      for _, w in ipairs(waiting) do
        local task = tasks[w.id]
        if task == w.task and (task.filter == nil or task.filter == ev[1]) then
          resume(w.id, table.unpack(ev, 1, ev.n))
        end
      end
    end
  end
end

-- One client per computer: running startup.lua again from the shell (or the client by hand) while a client
-- is linked would be a second link with the same id, which the bridge refuses as a duplicate computer. The
-- running client marks itself in _G and queues mcp_client_stopped when it ends; a second one in the
-- background waits for that, one in the foreground says so and stops.
local MARK = "_mcp_client"
local me = {}
if rawget(_G, MARK) then
  if not BACKGROUND then
    error("a client is already running on this computer; it keeps the link", 0)
  end
  while rawget(_G, MARK) do
    local timer = os.startTimer(30)
    repeat
      local ev = table.pack(os.pullEventRaw())
    until ev[1] == "mcp_client_stopped" or (ev[1] == "timer" and ev[2] == timer)
  end
end
rawset(_G, MARK, me)

math.randomseed(os.getComputerID() * 7919 + math.floor((os.epoch and os.epoch("utc") or 0) % 100000))
-- However the client stops (Ctrl+T, an error in the client), it closes its socket: the runtime would keep
-- answering the bridge's pings for an abandoned socket, and the bridge would list a dead client as linked.
local ok, why = pcall(run)
if ws then pcall(ws.close) end
ws, linked = nil, false
dropTasks()
if rawget(_G, MARK) == me then rawset(_G, MARK, nil) end
os.queueEvent("mcp_client_stopped")
log("client stopped: " .. tostring(why))
if not ok then error(why, 0) end
