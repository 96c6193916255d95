-- mcp-bridges installer. In-game:   wget run __MCP_INSTALL_URL__ [token]
-- Downloads the client to /mcp/client.lua and writes a startup.lua that links on every boot, in the
-- background, so the computer keeps its normal shell. An existing startup.lua is kept and still run.
-- The bridge fills in the addresses (as Lua string literals) when it serves this file.

local HTTP_BASE = __MCP_HTTP_BASE__
local LINK_URL = __MCP_LINK_URL__
local token = ...

local CLIENT = "/mcp/client.lua"
local PREVIOUS = "/mcp/previous-startup.lua"
local STARTUP = "/startup.lua"
local MARKER = "-- mcp-bridges link"

local response, err = http.get(HTTP_BASE .. "/client.lua", nil, true)
if not response then error("could not download the client: " .. tostring(err), 0) end
local code = response.readAll()
response.close()
if not code or not load(code, "=client", "t", {}) then error("the downloaded client does not compile", 0) end

local function writeFile(path, text)
  local h, openErr = fs.open(path, "wb")
  if not h then error("cannot write " .. path .. ": " .. tostring(openErr), 0) end
  h.write(text)
  h.close()
end

local function readFile(path)
  local h = fs.open(path, "rb")
  if not h then return nil end
  local text = h.readAll()
  h.close()
  return text
end

if not fs.exists("/mcp") then fs.makeDir("/mcp") end
writeFile(CLIENT, code)

local existing = fs.exists(STARTUP) and readFile(STARTUP) or nil
if existing and existing:sub(1, #MARKER) ~= MARKER then
  if fs.exists(PREVIOUS) then fs.delete(PREVIOUS) end
  fs.move(STARTUP, PREVIOUS)
  print("Kept your old startup.lua as " .. PREVIOUS .. "; it still runs at boot.")
end

-- The link and the player's shell run side by side. The shell ending (`exit`, or Ctrl+T at its prompt,
-- which terminates it) must not end the link, so a new shell starts; the client ignores Ctrl+T in the
-- background. The client is loaded with this program's environment so run_lua sees shell and require.
-- The link is supervised: whenever the client stops (an error, "Too long without yielding" on a busy server),
-- it is loaded again after a pause that doubles up to a minute (back to 1 s after a minute of running), and
-- why it stopped goes to /mcp/client.log, so the computer relinks without anyone rebooting it.
local startup = MARKER .. [[ (written by install.lua; run the installer again to update)
local CLIENT, LOG = "]] .. CLIENT .. [[", "/mcp/client.log"
local url, token = ]] .. ("%q"):format(LINK_URL) .. ", " .. (token and ("%q"):format(token) or "nil") .. [[

local programEnv = _ENV
local function note(line)
  if fs.exists(LOG) and fs.getSize(LOG) > 16384 then fs.delete(LOG) end
  local h = fs.open(LOG, "a")
  if h then
    h.writeLine(("[day %d, %.1fs up] %s"):format(os.day(), os.clock(), line))
    h.close()
  end
end
local function pause(seconds)
  -- Not sleep(): it raises "Terminated" when the player presses Ctrl+T, which would end the supervisor.
  local timer = os.startTimer(seconds)
  repeat
    local ev, id = os.pullEventRaw("timer")
  until id == timer
end
local function link()
  local delay = 1
  while true do
    local started = os.clock()
    local client, loadErr = loadfile(CLIENT, nil, programEnv)
    local ok, why = false, loadErr
    if client then ok, why = pcall(client, url, token, "background") end
    if os.clock() - started > 60 then delay = 1 end
    note(("client stopped (%s); restarting in %ds"):format(ok and "returned" or tostring(why), delay))
    pause(delay)
    delay = math.min(delay * 2, 60)
  end
end
local function userShell()
  if fs.exists("]] .. PREVIOUS .. [[") then shell.run("]] .. PREVIOUS .. [[") end
  while true do
    shell.run("shell")
    print("[mcp] The shell ended; the link to the bridge keeps running. Starting a new shell.")
  end
end
parallel.waitForAny(link, userShell)
]]
writeFile(STARTUP, startup)

print("mcp-bridges client installed; linking to " .. LINK_URL)
print("Rebooting to start it...")
sleep(1)
os.reboot()
