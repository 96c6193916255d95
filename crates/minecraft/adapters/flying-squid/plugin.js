'use strict'
// flying-squid plugin: loaded through createMCServer({plugins: {[this file]: {}}, mcpBridge: {...}}).
// `mcpBridge` carries the resolved config (config.js) plus the relay url, token and game name.

const { Game } = require('./game')
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
  const link = new Link({
    url: opts.url,
    token: opts.token,
    name: opts.name,
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
  serv.mcpBridge = { game, link, log }
  // Property 14: version, configuration summary and connection target logged at startup.
  log('info', `${ADAPTER} starting: game "${opts.name}" version ${settings.version}, relay ${link.url}, ` +
    `events [${cfg.events.enabled.join(', ')}], ${cfg.commands.allowed_patterns.length} allowed command patterns, ` +
    `max_command_length ${cfg.security.max_command_length}`)
  serv.once('ready', () => {
    game.attach()
    link.start()
  })
}

module.exports.player = function (player, serv) {
  patchEntityTeleport(player)
  const bridge = serv.mcpBridge
  if (!bridge) return
  bridge.game.watchPlayer(player, (type, data) => bridge.link.emitEvent(type, data))
}
