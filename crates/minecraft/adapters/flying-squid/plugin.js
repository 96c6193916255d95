'use strict'
// flying-squid plugin: loaded through createMCServer({plugins: {[this file]: {}}, mcpBridge: {...}}).
// `mcpBridge` carries the resolved config (config.js) plus the relay url, token and game name.

const os = require('os')
const { Game } = require('./game')
const { defaultServerName } = require('./config')
const { Link } = require('./link')
const { patchEntityTeleport } = require('./compat')

const ADAPTER = 'flying-squid-plugin 0.1.0'
const LEVELS = { DEBUG: 10, INFO: 20, WARN: 30, ERROR: 40 }

function makeLogger (level) {
  const min = LEVELS[String(level).toUpperCase()] || LEVELS.INFO
  return (lvl, msg) => {
    if ((LEVELS[lvl.toUpperCase()] || 20) >= min) process.stderr.write(`[mcp-bridge ${lvl.toUpperCase()}] ${msg}\n`)
  }
}

module.exports.server = function (serv, settings) {
  const opts = settings.mcpBridge
  if (!opts) throw new Error('mcp-bridge plugin: settings.mcpBridge is missing')
  const cfg = opts.config
  const log = makeLogger(cfg.logging.level)
  const game = new Game(serv, cfg, log)
  game.version = settings.version
  game.maxPlayers = settings['max-players']
  // Without a name, host name + port once the port is known (at 'ready'; --port 0 lets the kernel choose).
  const link = new Link({
    url: opts.url,
    token: opts.token,
    name: opts.name || null,
    adapter: ADAPTER,
    gameVersion: settings.version,
    enabledEvents: cfg.events.enabled,
    reconnectDelay: cfg.bridge.reconnect_delay,
    reconnectAttempts: cfg.bridge.reconnect_attempts,
    reconnectMaxDelay: cfg.bridge.reconnect_max_delay,
    outboxSize: cfg.bridge.outbox_size,
    onCommand: (type, args) => game.run(type, args),
    onWelcome: (p) => opts.onWelcome?.(p),
    log
  })
  serv.mcpBridge = { game, link, log, shutdown: (ms) => shutdown(serv, ms) }
  serv.once('ready', () => {
    if (!link.opts.name) {
      const port = serv._server?.socketServer?.address()?.port ?? settings.port
      link.opts.name = defaultServerName(os.hostname(), port)
    }
    serv.mcpBridge.name = link.opts.name
    // Property 14: version, configuration summary and connection target logged at startup.
    log('info', `${ADAPTER} starting: game "${link.opts.name}" version ${settings.version}, relay ${link.url}, ` +
      `events [${cfg.events.enabled.join(', ')}], ${cfg.commands.allowed_patterns.length} allowed command patterns, ` +
      `max_command_length ${cfg.security.max_command_length}`)
    game.attach()
    link.start()
  })
}

// A graceful stop: every player still online is reported as quitting (reason server_stopping) before the link
// closes, and the relay is given up to `ms` to acknowledge what the outbox holds. The players' own
// 'disconnected' as the server kicks them is then not reported twice.
async function shutdown (serv, ms = 3000) {
  const { game, link, log } = serv.mcpBridge
  const online = game.quitAll((type, data) => link.emitEvent(type, data))
  const deadline = Date.now() + ms
  while (link.outbox.items.length > 0 && link.welcomed && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const held = link.outbox.items.length
  log(held ? 'warn' : 'info', `stopping: reported ${online} players quitting; ` +
    (held ? `${held} events not acknowledged by the relay` : 'the relay has every event'))
  link.stop()
  return { players: online, unacknowledged: held }
}

module.exports.shutdown = shutdown

module.exports.player = function (player, serv) {
  patchEntityTeleport(player)
  const bridge = serv.mcpBridge
  if (!bridge) return
  bridge.game.watchPlayer(player, (type, data) => bridge.link.emitEvent(type, data))
}
