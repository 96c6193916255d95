'use strict'
// Starts flying-squid with the bridge plugin: node server.js --port P --relay URL --token T [--config FILE]
// [--name NAME] [--stop-grace MS]. stdout carries only this launcher's status lines ("ready ...", "linked ...");
// flying-squid's own console output goes to stderr.

const fs = require('fs')
const path = require('path')

const out = process.stdout.write.bind(process.stdout)
process.stdout.write = process.stderr.write.bind(process.stderr)
process.env.CI = process.env.CI || '1' // flying-squid's log.js leaves console.log alone under CI

const { loadConfig, ConfigError } = require('./config')
const { squidOptions } = require('./squid-options')

function usage (msg) {
  process.stderr.write(`minecraft-server: ${msg}\nusage: minecraft-server --port P --relay URL --token T [--config FILE] [--name NAME] [--stop-grace MS]\n` +
    '  --stop-grace MS: how long a stopping server waits for the relay to acknowledge its last events (3000)\n')
  process.exit(2)
}

function parseArgs (argv) {
  const a = {}
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]
    if (!['--port', '--relay', '--token', '--config', '--name', '--stop-grace'].includes(k)) usage(`unknown argument ${k}`)
    if (i + 1 >= argv.length) usage(`${k} needs a value`)
    a[k.slice(2)] = argv[++i]
  }
  return a
}

const args = parseArgs(process.argv.slice(2))
const port = Number(args.port)
if (!Number.isInteger(port) || port < 0 || port > 65535) usage('--port: expected a port number')
const stopGraceArg = args['stop-grace'] ?? '3000'
const stopGrace = /^\d+$/.test(stopGraceArg) ? Number(stopGraceArg) : NaN
if (!Number.isInteger(stopGrace) || stopGrace > 600000) {
  usage('--stop-grace: expected milliseconds from 0 to 600000')
}
let config
try {
  config = loadConfig(args.config ? fs.readFileSync(args.config, 'utf8') : null)
} catch (e) {
  if (e instanceof ConfigError || e.code === 'ENOENT') usage(`--config ${args.config}: ${e.message}`)
  throw e
}
const relay = args.relay || config.bridge.url
const token = args.token || process.env.MINECRAFT_AUTH_TOKEN || config.bridge.auth_token
// Without a name, the plugin names the game after the host and port (unique per host).
const name = args.name || config.bridge.server_name || null

const mcServer = require('flying-squid')
const serv = mcServer.createMCServer(squidOptions({
  port,
  motd: 'mcp-bridges test server',
  footer: 'test',
  mcpBridge: {
    config,
    url: relay,
    token,
    name,
    onWelcome: (p) => out(`linked epoch=${p.epoch} lastSeq=${p.lastSeq}\n`)
  }
}))

serv.on('error', (e) => process.stderr.write(`server error: ${e.stack || e}\n`))
serv.once('ready', () => {
  const actual = serv._server.socketServer?.address()?.port ?? port
  out(`ready port=${actual} game=${serv.mcpBridge?.name ?? name} version=1.21.4\n`)
})

let stopping = false
const stop = () => {
  if (stopping) return
  stopping = true
  // A server that cannot close (a plugin stuck) still exits, some time after the grace.
  setTimeout(() => process.exit(0), stopGrace + 5000).unref()
  // Players online are reported as quitting, and the relay given time to take it, before the server closes.
  Promise.resolve(serv.mcpBridge?.shutdown(stopGrace))
    .then((r) => r && out(`stopped players=${r.players} unacknowledged=${r.unacknowledged}\n`))
    .catch((e) => process.stderr.write(`shutdown: ${e.stack || e}\n`))
    .then(() => serv.quit?.('Server closed'))
    .catch(() => {})
    .finally(() => process.exit(0))
}
// flying-squid's log plugin registers exit-hook, whose SIGTERM/SIGINT handler quits the server and exits at once:
// the players' player_quit would never reach the relay. The signals are this launcher's alone (exit-hook still
// runs its hook at process exit).
const ownSignals = () => {
  for (const sig of ['SIGTERM', 'SIGINT']) {
    process.removeAllListeners(sig)
    process.on(sig, stop)
  }
}
ownSignals()
serv.once('ready', () => setImmediate(ownSignals))
