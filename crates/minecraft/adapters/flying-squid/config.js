'use strict'
// minecraft-mcp-bridge.toml (its keys: crates/minecraft/adapters/README.md), read with a TOML subset parser (tables, strings, integers, booleans,
// arrays of those, comments): enough for that file, and no dependency that the game side would have to ship.

const DEFAULTS = Object.freeze({
  bridge: { url: 'ws://localhost:8080', auth_token: 'secret', reconnect_attempts: 5, reconnect_delay: 5000, reconnect_max_delay: 30000, server_name: '' },
  events: { enabled: ['player_join', 'player_quit', 'player_chat', 'player_death', 'block_break'] },
  commands: { allowed_patterns: ['^say .*', '^tp \\w+ -?\\d+ -?\\d+ -?\\d+$', '^give \\w+ \\w+ \\d+$'] },
  security: { require_auth: true, max_command_length: 256 },
  logging: { level: 'INFO' }
})

const EVENT_TYPES = ['player_join', 'player_quit', 'player_chat', 'player_death', 'block_break']

class ConfigError extends Error {}

function stripComment (line) {
  let inStr = null
  for (let i = 0; i < line.length; i++) {
    const c = line[i]
    if (inStr) {
      if (c === '\\' && inStr === '"') i++
      else if (c === inStr) inStr = null
    } else if (c === '"' || c === "'") inStr = c
    else if (c === '#') return line.slice(0, i)
  }
  return line
}

// Parses one value starting at s[i]; returns [value, nextIndex].
function parseValue (s, i, where) {
  while (s[i] === ' ' || s[i] === '\t' || s[i] === '\n' || s[i] === '\r') i++
  const c = s[i]
  if (c === '"') {
    let out = ''
    for (i++; i < s.length; i++) {
      const d = s[i]
      if (d === '"') return [out, i + 1]
      if (d === '\\') {
        const e = s[++i]
        const map = { n: '\n', t: '\t', r: '\r', '"': '"', '\\': '\\', b: '\b', f: '\f' }
        if (e in map) out += map[e]
        else if (e === 'u' || e === 'U') {
          const len = e === 'u' ? 4 : 8
          const hex = s.slice(i + 1, i + 1 + len)
          if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== len) throw new ConfigError(`${where}: bad \\${e} escape`)
          out += String.fromCodePoint(parseInt(hex, 16))
          i += len
        } else throw new ConfigError(`${where}: unknown escape \\${e}`)
      } else if (d === '\n') throw new ConfigError(`${where}: unterminated string`)
      else out += d
    }
    throw new ConfigError(`${where}: unterminated string`)
  }
  if (c === "'") {
    const end = s.indexOf("'", i + 1)
    if (end < 0 || s.slice(i + 1, end).includes('\n')) throw new ConfigError(`${where}: unterminated string`)
    return [s.slice(i + 1, end), end + 1]
  }
  if (c === '[') {
    const arr = []
    i++
    for (;;) {
      while (/[\s,]/.test(s[i] || '') || s[i] === '#') {
        if (s[i] === '#') { while (i < s.length && s[i] !== '\n') i++ } else i++
      }
      if (i >= s.length) throw new ConfigError(`${where}: unterminated array`)
      if (s[i] === ']') return [arr, i + 1]
      const [v, j] = parseValue(s, i, where)
      arr.push(v)
      i = j
      while (s[i] === ' ' || s[i] === '\t') i++
      if (s[i] !== ',' && s[i] !== ']' && s[i] !== '\n' && s[i] !== '\r' && s[i] !== '#') throw new ConfigError(`${where}: expected , or ] in array`)
    }
  }
  const m = /^(true|false|[+-]?\d[\d_]*)/.exec(s.slice(i))
  if (!m) throw new ConfigError(`${where}: unsupported value`)
  const tok = m[1]
  const v = tok === 'true' ? true : tok === 'false' ? false : Number(tok.replace(/_/g, ''))
  return [v, i + tok.length]
}

function parseToml (text) {
  const root = {}
  let table = root
  let tableName = ''
  // Join multi-line arrays: keep the raw text and walk it line by line, letting parseValue consume newlines.
  let i = 0
  let lineNo = 1
  const lines = text.replace(/\r\n/g, '\n')
  while (i < lines.length) {
    let end = lines.indexOf('\n', i)
    if (end < 0) end = lines.length
    const raw = stripComment(lines.slice(i, end)).trim()
    const where = `line ${lineNo}`
    if (raw === '') { i = end + 1; lineNo++; continue }
    const header = /^\[([A-Za-z0-9_.-]+)\]$/.exec(raw)
    if (header) {
      tableName = header[1]
      table = root
      for (const part of tableName.split('.')) {
        if (table[part] !== undefined && (typeof table[part] !== 'object' || Array.isArray(table[part]))) throw new ConfigError(`${where}: [${tableName}] redefines a value`)
        table[part] = table[part] || {}
        table = table[part]
      }
      i = end + 1; lineNo++
      continue
    }
    const kv = /^\s*([A-Za-z0-9_-]+|"[^"]*")\s*=\s*/.exec(lines.slice(i, end))
    if (!kv) throw new ConfigError(`${where}: expected key = value`)
    const key = kv[1].replace(/^"|"$/g, '')
    if (Object.prototype.hasOwnProperty.call(table, key)) throw new ConfigError(`${where}: duplicate key ${tableName ? tableName + '.' : ''}${key}`)
    const [value, next] = parseValue(lines, i + kv[0].length, where)
    table[key] = value
    const consumed = lines.slice(i, next)
    lineNo += (consumed.match(/\n/g) || []).length
    let rest = lines.indexOf('\n', next)
    if (rest < 0) rest = lines.length
    if (stripComment(lines.slice(next, rest)).trim() !== '') throw new ConfigError(`line ${lineNo}: unexpected text after value`)
    i = rest + 1; lineNo++
  }
  return root
}

function want (obj, table, key, type, fallback) {
  const t = obj[table] || {}
  if (t[key] === undefined) return fallback
  const v = t[key]
  const ok = type === 'array' ? Array.isArray(v) : typeof v === type
  if (!ok) throw new ConfigError(`${table}.${key}: expected ${type}`)
  return v
}

// Merges a parsed file over the defaults and validates every field the game side uses.
function resolve (parsed) {
  const d = DEFAULTS
  const cfg = {
    bridge: {
      url: want(parsed, 'bridge', 'url', 'string', d.bridge.url),
      auth_token: want(parsed, 'bridge', 'auth_token', 'string', d.bridge.auth_token),
      reconnect_attempts: want(parsed, 'bridge', 'reconnect_attempts', 'number', d.bridge.reconnect_attempts),
      reconnect_delay: want(parsed, 'bridge', 'reconnect_delay', 'number', d.bridge.reconnect_delay),
      reconnect_max_delay: want(parsed, 'bridge', 'reconnect_max_delay', 'number', d.bridge.reconnect_max_delay),
      server_name: want(parsed, 'bridge', 'server_name', 'string', d.bridge.server_name),
      outbox_size: want(parsed, 'bridge', 'outbox_size', 'number', 10000)
    },
    events: { enabled: want(parsed, 'events', 'enabled', 'array', d.events.enabled) },
    commands: { allowed_patterns: want(parsed, 'commands', 'allowed_patterns', 'array', d.commands.allowed_patterns) },
    security: {
      require_auth: want(parsed, 'security', 'require_auth', 'boolean', d.security.require_auth),
      max_command_length: want(parsed, 'security', 'max_command_length', 'number', d.security.max_command_length)
    },
    logging: { level: want(parsed, 'logging', 'level', 'string', d.logging.level) }
  }
  for (const e of cfg.events.enabled) {
    if (!EVENT_TYPES.includes(e)) throw new ConfigError(`events.enabled: unknown event type ${JSON.stringify(e)} (known: ${EVENT_TYPES.join(', ')})`)
  }
  cfg.commands.compiled = cfg.commands.allowed_patterns.map((p, n) => {
    if (typeof p !== 'string') throw new ConfigError(`commands.allowed_patterns[${n}]: expected string`)
    try {
      // Anchored at both ends: a pattern without ^/$ must still match the whole command, never a part of it.
      return new RegExp(`^(?:${p})$`, 'u')
    } catch (e) {
      throw new ConfigError(`commands.allowed_patterns[${n}]: ${e.message}`)
    }
  })
  const max = cfg.security.max_command_length
  if (!Number.isInteger(max) || max < 1 || max > 32767) throw new ConfigError('security.max_command_length: expected an integer in 1..32767')
  for (const k of ['reconnect_delay', 'reconnect_max_delay']) {
    const v = cfg.bridge[k]
    if (!Number.isInteger(v) || v < 1 || v > 3600000) throw new ConfigError(`bridge.${k}: expected an integer number of ms in 1..3600000`)
  }
  if (!Number.isInteger(cfg.bridge.outbox_size) || cfg.bridge.outbox_size < 1 || cfg.bridge.outbox_size > 100000) throw new ConfigError('bridge.outbox_size: expected an integer in 1..100000')
  return cfg
}

function loadConfig (text) {
  return resolve(text == null ? {} : parseToml(text))
}

// Property 7: a command runs only if it fits max_command_length and matches one allowed pattern completely.
function checkCommand (cfg, command) {
  if (typeof command !== 'string' || command.length === 0) return 'command: must be a non-empty string'
  if (command.length > cfg.security.max_command_length) return `command: ${command.length} characters, over max_command_length ${cfg.security.max_command_length}`
  if (/[\r\n\0]/.test(command)) return 'command: contains a line break or NUL'
  if (!cfg.commands.compiled.some(re => re.test(command))) return `command not allowed by commands.allowed_patterns: ${JSON.stringify(command.slice(0, 64))}`
  return null
}

// The game name when neither --name nor [bridge] server_name gives one: host name and port, so two servers on
// one machine, or on two machines, do not both claim one name (the relay refuses the second: name_in_use). Cut to
// the protocol's name alphabet (A-Z a-z 0-9 _ . -) and 64 characters, the port always kept whole.
function defaultServerName (host, port) {
  const suffix = `-${Number.isInteger(port) ? port : 0}`
  const h = String(host || '').replace(/[^A-Za-z0-9_.-]+/g, '-').replace(/^[-.]+|[-.]+$/g, '') || 'minecraft'
  return h.slice(0, 64 - suffix.length) + suffix
}

module.exports = { DEFAULTS, EVENT_TYPES, ConfigError, parseToml, loadConfig, checkCommand, defaultServerName }
