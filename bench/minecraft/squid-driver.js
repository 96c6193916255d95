'use strict'
// The real-stack bench's game (bench/src/bin/minecraft-stack.rs): flying-squid with the project's bridge plugin
// (crates/minecraft/adapters/flying-squid/plugin.js), whose relay link then sends events at a rate the bench
// asks for. Events enter through the plugin's own path (link.emitEvent, what a player's chat calls), so the
// figures include the adapter's outbox, serialisation and WebSocket send inside the game's event loop.
//
//   node squid-driver.js --relay URL --token T --name NAME
//
// stdout (the bench reads it): `linked`, then per `emit RATE SECONDS` line on stdin, `sent N` when done.
// flying-squid's own output goes to stderr.

const path = require('path')

const out = process.stdout.write.bind(process.stdout)
process.stdout.write = process.stderr.write.bind(process.stderr)
process.env.CI = process.env.CI || '1'

const ADAPTER_DIR = path.join(__dirname, '..', '..', 'crates', 'minecraft', 'adapters', 'flying-squid')
const { loadConfig } = require(path.join(ADAPTER_DIR, 'config'))
const { squidOptions } = require(path.join(ADAPTER_DIR, 'squid-options'))

const args = {}
for (let i = 2; i + 1 < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1]
for (const k of ['relay', 'token', 'name']) {
  if (!args[k]) { process.stderr.write(`squid-driver: --${k} is required\n`); process.exit(2) }
}

const config = loadConfig(null)
config.logging.level = 'WARN'
const mcServer = require(path.join(ADAPTER_DIR, 'node_modules', 'flying-squid'))
const serv = mcServer.createMCServer(squidOptions({
  port: 0,
  motd: 'mcp-bridges bench',
  footer: 'bench',
  mcpBridge: { config, url: args.relay, token: args.token, name: args.name, onWelcome: () => out('linked\n') }
}))
serv.on('error', (e) => process.stderr.write(`server error: ${e.stack || e}\n`))

const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000)

// Emits `rate` chat events per second for `secs` seconds on a 1 ms timer (each tick sends what is due), as the
// game's event loop would between ticks; reports how many were accepted.
function emit (rate, secs) {
  const link = serv.mcpBridge.link
  const start = performance.now()
  const total = Math.round(rate * secs)
  let sent = 0
  let accepted = 0
  const timer = setInterval(() => {
    const due = Math.min(total, Math.floor((performance.now() - start) * rate / 1000))
    while (sent < due) {
      sent++
      if (link.emitEvent('player_chat', { player: 'bench', message: 'x', sentUs: nowUs() })) accepted++
    }
    if (sent >= total) {
      clearInterval(timer)
      out(`sent ${accepted}\n`)
    }
  }, 1)
}

let buf = ''
process.stdin.on('data', (d) => {
  buf += d
  let nl
  while ((nl = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, nl).trim()
    buf = buf.slice(nl + 1)
    const [cmd, a, b] = line.split(/\s+/)
    if (cmd === 'emit') emit(Number(a), Number(b))
  }
})
process.stdin.on('end', () => {
  serv.mcpBridge?.link.stop()
  process.exit(0)
})
