-- The Lua half of the CC shim: the parts of CC:Tweaked's bios and ROM APIs that are plain Lua on a real
-- computer, rewritten from the behaviour described in reference/computercraft.md (CC's ROM is not copied).
-- Natives come from the Rust half through the _SIM table.
local SIM = _SIM

-- print and write go through tostring, as CC's do, then to the captured terminal.
function write(s)
  SIM.term_write(tostring(s))
  return 0
end
function print(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  SIM.term_write(table.concat(parts, "\t") .. "\n")
  return 1
end
printError = print
term = term or {}
term.write = write

-- bios: os.pullEventRaw is coroutine.yield; os.pullEvent raises on terminate; sleep loops on
-- os.pullEvent("timer") and so DISCARDS every other event reaching its coroutine (reference key fact 5).
os.pullEventRaw = coroutine.yield
function os.pullEvent(filter)
  local ev = table.pack(coroutine.yield(filter))
  if ev[1] == "terminate" then error("Terminated", 0) end
  return table.unpack(ev, 1, ev.n)
end
function sleep(seconds)
  local timer = os.startTimer(seconds or 0)
  repeat
    local _, id = os.pullEvent("timer")
  until id == timer
end
os.sleep = sleep

textutils = textutils or {}
textutils.json_null = setmetatable({}, { __name = "json_null", __tostring = function() return "null" end })
textutils.empty_json_array = setmetatable({}, {
  __newindex = function() error("attempt to mutate textutils.empty_json_array", 2) end,
})

-- parallel: every coroutine gets each event whose name matches the filter it yielded, or terminate.
local function runAll(fns, stopOnFirst)
  local cos, filters, alive = {}, {}, #fns
  for i, f in ipairs(fns) do cos[i] = coroutine.create(f) end
  local ev = { n = 0 }
  while true do
    for i, co in ipairs(cos) do
      if co and (filters[i] == nil or filters[i] == ev[1] or ev[1] == "terminate") then
        local ok, filter = coroutine.resume(co, table.unpack(ev, 1, ev.n))
        if not ok then error(filter, 0) end
        filters[i] = filter
        if coroutine.status(co) == "dead" then
          cos[i] = false
          alive = alive - 1
          if stopOnFirst then return i end
        end
      end
    end
    if alive == 0 then return end
    ev = table.pack(os.pullEventRaw())
  end
end
parallel = {
  waitForAny = function(...) return runAll({ ... }, true) end,
  waitForAll = function(...) return runAll({ ... }, false) end,
}

function loadfile(path, env)
  local h, err = fs.open(path, "r")
  if not h then return nil, err end
  local text = h.readAll()
  h.close()
  return load(text, "@/" .. fs.combine(path), "t", env or _ENV)
end
function dofile(path)
  local fn = assert(loadfile(path))
  return fn()
end

-- A shell with no terminal: "shell" idles (it would wait for keys); programs run from the file system.
shell = {}
function shell.run(path, ...)
  if path == "shell" or path == "rom/programs/shell.lua" then
    while true do os.pullEventRaw() end
  end
  local fn, err = loadfile(path)
  if not fn then
    printError(err)
    return false
  end
  local ok, e = pcall(fn, ...)
  if not ok then
    printError(e)
    return false
  end
  return true
end

-- http: the synchronous forms wait in a loop that discards every other event, as CC's http.lua does.
http = {}
function http.websocketAsync(url, headers)
  if type(url) == "table" then url, headers = url.url, url.headers end
  return SIM.websocket(url, headers)
end
function http.websocket(url, headers)
  if type(url) == "table" then url, headers = url.url, url.headers end
  local ok, err = SIM.websocket(url, headers)
  if not ok then return false, err end
  while true do
    local ev, u, arg = os.pullEvent()
    if ev == "websocket_success" and u == url then return arg end
    if ev == "websocket_failure" and u == url then return false, arg end
  end
end
function http.request(url, body, headers)
  if type(url) == "table" then url, headers = url.url, url.headers end
  return SIM.http_get(url, headers)
end
function http.get(url, headers)
  if type(url) == "table" then url, headers = url.url, url.headers end
  local ok, err = SIM.http_get(url, headers)
  if not ok then return nil, err end
  while true do
    local ev, u, a, b = os.pullEvent()
    if ev == "http_success" and u == url then return a end
    if ev == "http_failure" and u == url then return nil, a, b end
  end
end

-- Builds a websocket handle; receive() is a pull loop with os.pullEvent semantics, as in WebsocketHandle.
function SIM.make_ws_handle(url)
  local h = {}
  function h.send(msg, binary) return SIM.ws_send(url, msg, binary) end
  function h.close() return SIM.ws_close(url) end
  function h.receive(timeout)
    local timer = timeout and os.startTimer(timeout)
    while true do
      local ev = table.pack(os.pullEvent())
      if ev[1] == "websocket_message" and ev[2] == url then return ev[3], ev[4] end
      if ev[1] == "websocket_closed" and ev[2] == url then return nil end
      if ev[1] == "timer" and ev[2] == timer then return nil end
    end
  end
  return h
end

-- turtle: commands yield until their turtle_response arrives, in a filtered pull (so they also discard
-- other events); queries answer at once.
if SIM.kind == "turtle" then
  turtle = {}
  for _, name in ipairs(SIM.turtle_commands) do
    turtle[name] = function(...)
      local id, err = SIM.turtle_issue(name, ...)
      if not id then return false, err end
      while true do
        local ev = table.pack(os.pullEvent("turtle_response"))
        if ev[2] == id then return table.unpack(ev, 3, ev.n) end
      end
    end
  end
  for _, name in ipairs(SIM.turtle_queries) do
    turtle[name] = function(...) return SIM.turtle_query(name, ...) end
  end
end
if SIM.kind == "pocket" then pocket = {} end

peripheral = {}
function peripheral.getNames() return SIM.peripheral_names() end
function peripheral.isPresent(name) return SIM.peripheral_types(name) ~= nil end
function peripheral.getType(name)
  local types = SIM.peripheral_types(name)
  if types then return table.unpack(types) end
  return nil
end
function peripheral.hasType(name, ty)
  local types = SIM.peripheral_types(name)
  if not types then return nil end
  for _, t in ipairs(types) do if t == ty then return true end end
  return false
end
function peripheral.getMethods(name) return SIM.peripheral_methods(name) end
function peripheral.call(name, method, ...)
  if SIM.peripheral_types(name) == nil then return nil end
  return SIM.peripheral_call(name, method, ...)
end
function peripheral.wrap(name)
  local methods = SIM.peripheral_methods(name)
  if not methods then return nil end
  local w = {}
  for _, m in ipairs(methods) do w[m] = function(...) return peripheral.call(name, m, ...) end end
  return w
end

redstone = {}
function redstone.getSides() return { "top", "bottom", "left", "right", "front", "back" } end
for _, name in ipairs({ "getInput", "getAnalogInput", "getOutput", "getAnalogOutput", "setOutput",
    "setAnalogOutput" }) do
  redstone[name] = function(...) return SIM.redstone(name, ...) end
end
rs = redstone

SIM.prelude_done = true
