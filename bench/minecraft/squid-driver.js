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

// Diagnostics (stderr, one line per emit): how late the 1 ms timer ran, the event loop's delay, GC pauses, and
// how long an event waited between its timestamp and its frame's send (the adapter's own share of the latency).
const { monitorEventLoopDelay, PerformanceObserver } = require('perf_hooks')
const gcs = []
new PerformanceObserver((list) => { for (const e of list.getEntries()) gcs.push(e.duration) }).observe({ entryTypes: ['gc'] })
function quantiles (xs) {
  if (xs.length === 0) return 'none'
  const s = Float64Array.from(xs).sort()
  const q = (f) => s[Math.min(s.length - 1, Math.floor(f * s.length))].toFixed(2)
  return `n ${s.length} p50 ${q(0.5)} p99 ${q(0.99)} max ${s[s.length - 1].toFixed(2)}`
}

// Emits `rate` chat events per second for `secs` seconds on a 1 ms timer (each tick sends what is due), as the
// game's event loop would between ticks; reports how many were accepted.
function emit (rate, secs) {
  const link = serv.mcpBridge.link
  const start = performance.now()
  const total = Math.round(rate * secs)
  let sent = 0
  let accepted = 0
  const loop = monitorEventLoopDelay({ resolution: 1 })
  loop.enable()
  gcs.length = 0
  const gaps = []
  const flushLag = []
  let lastTick = performance.now()
  const origFlush = link.flush
  link.flush = function () {
    const t = nowUs()
    for (const text of this.pending) {
      const m = /"sentUs":(\d+)/.exec(text)
      if (m) flushLag.push((t - Number(m[1])) / 1000)
    }
    return origFlush.call(this)
  }
  const timer = setInterval(() => {
    const t = performance.now()
    gaps.push(t - lastTick)
    lastTick = t
    const due = Math.min(total, Math.floor((performance.now() - start) * rate / 1000))
    while (sent < due) {
      sent++
      if (link.emitEvent('player_chat', { player: 'bench', message: 'x', sentUs: nowUs() })) accepted++
    }
    if (sent >= total) {
      clearInterval(timer)
      loop.disable()
      link.flush = origFlush
      process.stderr.write(`squid-driver: timer gaps ms ${quantiles(gaps)}; event-loop delay ms p50 ${(loop.percentile(50) / 1e6).toFixed(2)} ` +
        `p99 ${(loop.percentile(99) / 1e6).toFixed(2)} max ${(loop.max / 1e6).toFixed(2)}; gc ms ${quantiles(gcs)} total ${gcs.reduce((a, b) => a + b, 0).toFixed(1)}; ` +
        `emit-to-send ms ${quantiles(flushLag)}\n`)
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
