-- The Lua half of the CC shim: the parts of CC:Tweaked's bios and ROM that are plain Lua on a real computer,
-- rewritten from their behaviour (CC's ROM is not copied). Each part names the CC:Tweaked file it models
-- (under projects/core/src/main/resources/data/computercraft/lua/); docs/protocols/computercraft.md lists
-- the facts with their sources. Natives come from the Rust half through the _SIM table.
local SIM = _SIM

-- bios.lua: os.pullEventRaw is coroutine.yield; os.pullEvent raises "Terminated" on terminate; sleep loops
-- on os.pullEvent("timer") and so DISCARDS every other event reaching its coroutine
-- (docs/protocols/computercraft.md, "Events").
-- os.pullEvent looks os.pullEventRaw up at each call, as bios.lua does: a program that replaces it changes
-- what os.pullEvent and sleep do too (checked on CraftOS-PC).
os.pullEventRaw = coroutine.yield
function os.pullEvent(filter)
  local ev = table.pack(os.pullEventRaw(filter))
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
function os.version() return "CraftOS 1.9" end

-- rom/apis/term.lua: term.* forwards to the current redirect target; redirect returns the previous one and
-- fills methods the target lacks with ones that raise.
do
  local native = SIM.native_term
  local redirectTarget = native
  term = {}
  function term.redirect(target)
    if type(target) ~= "table" then error("bad argument #1 (table expected)", 2) end
    if target == term then error("term is not a recommended redirect target, try term.current() instead", 2) end
    for k, v in pairs(native) do
      if type(target[k]) ~= "function" then
        target[k] = function() error("Redirect object is missing method " .. k .. ".", 2) end
      end
    end
    local old = redirectTarget
    redirectTarget = target
    return old
  end
  function term.current() return redirectTarget end
  function term.native() return native end
  for k in pairs(native) do
    term[k] = function(...) return redirectTarget[k](...) end
  end
end

-- bios.lua: write word-wraps at the terminal's width and scrolls through term.scroll at the bottom row (so
-- a redirect target's scroll, such as textutils.pagedPrint's, runs); print joins with tabs; both count lines.
function write(sText)
  local w, h = term.getSize()
  local x, y = term.getCursorPos()
  local lines = 0
  local function newLine()
    if y + 1 <= h then
      term.setCursorPos(1, y + 1)
    else
      term.setCursorPos(1, h)
      term.scroll(1)
    end
    x, y = term.getCursorPos()
    lines = lines + 1
  end
  sText = tostring(sText)
  while #sText > 0 do
    local ws = sText:match("^[ \t]+")
    if ws then
      term.write(ws)
      x, y = term.getCursorPos()
      sText = sText:sub(#ws + 1)
    end
    if sText:match("^\n") then
      newLine()
      sText = sText:sub(2)
    end
    local text = sText:match("^[^ \t\n]+")
    if text then
      sText = sText:sub(#text + 1)
      if #text > w then
        while #text > 0 do
          if x > w then newLine() end
          term.write(text)
          text = text:sub(w - x + 2)
          x, y = term.getCursorPos()
        end
      else
        if x + #text - 1 > w then newLine() end
        term.write(text)
        x, y = term.getCursorPos()
      end
    end
  end
  return lines
end
function print(...)
  local lines, n = 0, select("#", ...)
  for i = 1, n do
    local s = tostring((select(i, ...)))
    if i < n then s = s .. "\t" end
    lines = lines + write(s)
  end
  return lines + write("\n")
end
printError = print

-- keys (GLFW codes, CC:T >= 1.16) and a read() that takes char/paste events until Enter; it pulls with
-- os.pullEvent, so a terminate ends it with "Terminated" (rom/apis/... read in bios.lua).
keys = { enter = 257, backspace = 259 }
function read()
  local line = ""
  while true do
    local ev, p = os.pullEvent()
    if ev == "char" or ev == "paste" then
      line = line .. p
      term.write(p)
    elseif ev == "key" and p == keys.enter then
      print()
      return line
    elseif ev == "key" and p == keys.backspace then
      line = line:sub(1, -2)
    end
  end
end

textutils = textutils or {}
textutils.json_null = setmetatable({}, { __name = "json_null", __tostring = function() return "null" end })
textutils.empty_json_array = setmetatable({}, {
  __newindex = function() error("attempt to mutate textutils.empty_json_array", 2) end,
})

-- rom/apis/textutils.lua: pagedPrint redirects the terminal to a copy of the current one whose scroll
-- writes "Press any key to continue" on the bottom row and waits in os.pullEvent("key") once the free lines
-- are used up (none by default), then redirects back. Code stopped while it waits leaves the copy in place.
local function makePagedScroll(target, freeLines)
  local nativeScroll = target.scroll
  freeLines = freeLines or 0
  return function(n)
    for _ = 1, n do
      nativeScroll(1)
      if freeLines <= 0 then
        local _, h = target.getSize()
        target.setCursorPos(1, h)
        target.write("Press any key to continue")
        os.pullEvent("key")
        target.clearLine()
        target.setCursorPos(1, h)
      else
        freeLines = freeLines - 1
      end
    end
  end
end
function textutils.pagedPrint(text, freeLines)
  local oldTerm = term.current()
  local newTerm = {}
  for k, v in pairs(oldTerm) do newTerm[k] = v end
  newTerm.scroll = makePagedScroll(oldTerm, freeLines)
  term.redirect(newTerm)
  local result
  local ok, err = pcall(function()
    if text ~= nil then result = print(text) else result = print() end
  end)
  term.redirect(oldTerm)
  if not ok then error(err, 0) end
  return result
end

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

-- bios.lua: loadfile(path, mode, env) (the old loadfile(path, env) form too) loads with env, or with the
-- global table when env is nil; os.run gives env an __index to _G and prints the error of a failed program.
function loadfile(path, mode, env)
  if type(mode) == "table" and env == nil then mode, env = nil, mode end
  local h = fs.open(path, "r")
  if not h then return nil, "File not found" end
  local text = h.readAll()
  h.close()
  return load(text, "@/" .. fs.combine(path), mode, env or _G)
end
function dofile(path)
  local fn, e = loadfile(path, nil, _G)
  if not fn then error(e, 2) end
  return fn()
end
local function runFunction(fn, ...)
  local ok, err = pcall(fn, ...)
  if not ok then
    if err and err ~= "" then printError(err) end
    return false
  end
  return true
end
function os.run(env, path, ...)
  setmetatable(env, { __index = _G })
  local fn, err = loadfile(path, nil, env)
  if not fn then
    if err and err ~= "" then printError(err) end
    return false
  end
  return runFunction(fn, ...)
end

-- rom/modules/main/cc/require.lua: make(env, dir) builds a require and package per program environment;
-- modules are searched on package.path relative to the program's directory and loaded with that env.
local function makePackage(env, dir)
  local package = {}
  package.loaded = { _G = _G, bit32 = bit32, coroutine = coroutine, math = math, package = package,
    string = string, table = table }
  package.path = "?;?.lua;?/init.lua;/rom/modules/main/?;/rom/modules/main/?.lua;/rom/modules/main/?/init.lua"
  package.config = "/\n;\n?\n!\n-"
  package.preload = {}
  function package.searchpath(name, path)
    local fname = name:gsub("%.", "/")
    local tried = {}
    for pattern in path:gmatch("[^;]+") do
      local p = pattern:gsub("%?", fname)
      if p:sub(1, 1) ~= "/" then p = fs.combine(dir, p) end
      if fs.exists(p) and not fs.isDir(p) then return p end
      tried[#tried + 1] = "no file '" .. p .. "'"
    end
    return nil, table.concat(tried, "\n  ")
  end
  package.searchers = {
    function(name)
      if package.preload[name] then return package.preload[name] end
      return nil, "no field package.preload['" .. name .. "']"
    end,
    function(name)
      local p, err = package.searchpath(name, package.path)
      if not p then return nil, err end
      local fn, lerr = loadfile(p, nil, env)
      if fn then return fn, p end
      return nil, lerr
    end,
  }
  local sentinel = {}
  local function require(name)
    if package.loaded[name] == sentinel then
      error("loop or previous error loading module '" .. name .. "'", 0)
    end
    if package.loaded[name] then return package.loaded[name] end
    local why = "module '" .. name .. "' not found:"
    for _, searcher in ipairs(package.searchers) do
      local loader, err = searcher(name)
      if loader then
        package.loaded[name] = sentinel
        local result = loader(name, err)
        if result ~= nil then package.loaded[name] = result else package.loaded[name] = true end
        return package.loaded[name]
      end
      why = why .. "\n  " .. err
    end
    error(why, 2)
  end
  return require, package
end

-- rom/programs/shell.lua: each shell has its own `shell` table; programs run in a fresh environment
-- holding `shell`, `multishell` (nil on a basic computer, as here), `require` and `package`, indexing _G. So
-- none of those four is a global. The prompt loop pulls with os.pullEvent: a terminate ends the shell
-- ("Terminated", printed by whoever ran it); `exit` ends it at the next prompt. The first shell runs the
-- startup file before its prompt; before each prompt it redirects the terminal back to its own.
local runShell
local builtins = {
  exit = function(env) env.shell.exit() end,
  shell = function(env, ...) runShell(env.shell, ...) end,
}
builtins["rom/programs/shell.lua"] = builtins.shell
builtins["rom/programs/exit.lua"] = builtins.exit

local function tokenise(line)
  local words, quoted = {}, false
  for match in (line .. '"'):gmatch('(.-)"') do
    if quoted then
      words[#words + 1] = match
    else
      for w in match:gmatch("[^ \t]+") do words[#words + 1] = w end
    end
    quoted = not quoted
  end
  return words
end

runShell = function(parentShell, ...)
  local shell = {}
  local bExit = false
  local sDir = parentShell and parentShell.dir() or ""
  local parentTerm = term.current()
  local stack = {}
  local function createShellEnv(dir)
    local env = { shell = shell, multishell = multishell }
    env.require, env.package = makePackage(env, dir)
    return env
  end
  function shell.dir() return sDir end
  function shell.setDir(d) sDir = fs.combine(d) end
  function shell.path() return ".:/rom/programs" end
  function shell.aliases() return {} end
  function shell.resolve(p)
    if p:sub(1, 1) == "/" or p:sub(1, 1) == "\\" then return fs.combine(p) end
    return fs.combine(sDir, p)
  end
  function shell.resolveProgram(cmd)
    if builtins[cmd] then return cmd end
    local p = shell.resolve(cmd)
    if fs.exists(p) and not fs.isDir(p) then return p end
    if fs.exists(p .. ".lua") then return p .. ".lua" end
    return nil
  end
  function shell.getRunningProgram() return stack[#stack] end
  function shell.exit() bExit = true end
  function shell.execute(command, ...)
    local path = shell.resolveProgram(command)
    if not path then
      printError("No such program")
      return false
    end
    stack[#stack + 1] = path
    local env = setmetatable(createShellEnv(fs.getDir(path)), { __index = _G })
    env.arg = { [0] = command, ... }
    local ok
    if builtins[path] then
      ok = runFunction(builtins[path], env, ...)
    else
      local h = fs.open(path, "r")
      local fn, err = load(h.readAll(), "@/" .. path, nil, env)
      h.close()
      if fn then ok = runFunction(fn, ...) else printError(err) ok = false end
    end
    stack[#stack] = nil
    return ok
  end
  function shell.run(...)
    local words = tokenise(table.concat({ ... }, " "))
    if words[1] then return shell.execute(table.unpack(words)) end
    return false
  end

  if select("#", ...) > 0 then return shell.run(...) end
  print(os.version())
  if parentShell == nil then
    -- rom/startup.lua runs the computer's startup file; without one, the test's SimConfig.command stands
    -- for what the player would type (a Lua chunk run like a program).
    if fs.exists("startup.lua") then
      shell.run("/startup.lua")
    elseif SIM.command then
      local fn, err = load(SIM.command, "=command", "t", setmetatable(createShellEnv(""), { __index = _G }))
      if fn then runFunction(fn) else printError(err) end
    end
  end
  while not bExit do
    term.redirect(parentTerm)
    write(sDir .. "> ")
    local line = read()
    shell.run(line)
  end
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

-- bios.lua's last lines: run the shell, then shut the computer down when it ends.
return function()
  runFunction(runShell)
  os.shutdown()
end
