'use strict'
// The plugin's config and whitelist (Properties 6 and 7, game side: disabled event types never leave the game; a
// command runs only if it matches an allowed pattern and max_command_length), as seeded generator loops.
const test = require('node:test')
const assert = require('node:assert')
const { loadConfig, checkCommand, ConfigError, EVENT_TYPES } = require('../config')

const CASES = 200
function rng (seed) { // mulberry32: a seeded generator, so a failure names the case that reproduces it
  return () => {
    seed |= 0; seed = seed + 0x6D2B79F5 | 0
    let t = Math.imul(seed ^ seed >>> 15, 1 | seed)
    t = t + Math.imul(t ^ t >>> 7, 61 | t) ^ t
    return ((t ^ t >>> 14) >>> 0) / 4294967296
  }
}
const word = (r, min, max) => {
  const a = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_'
  let s = ''
  const n = min + Math.floor(r() * (max - min + 1))
  for (let i = 0; i < n; i++) s += a[Math.floor(r() * a.length)]
  return s
}

const SEED_FILE = `[bridge]
url = "ws://localhost:8080"
auth_token = "secret"
reconnect_attempts = 5
reconnect_delay = 5000

[events]
enabled = [
  "player_join",
  "player_quit",
  "player_chat",
  "player_death",
  "block_break"
]

[commands]
allowed_patterns = [
  "^say .*",
  "^tp \\\\w+ -?\\\\d+ -?\\\\d+ -?\\\\d+$",
  "^give \\\\w+ \\\\w+ \\\\d+$"
]

[security]
require_auth = true
max_command_length = 256

[logging]
level = "INFO"
`

test('the default file (adapters/README.md) parses to its values, and equals the defaults', () => {
  const c = loadConfig(SEED_FILE)
  assert.deepStrictEqual(c.commands.allowed_patterns, ['^say .*', '^tp \\w+ -?\\d+ -?\\d+ -?\\d+$', '^give \\w+ \\w+ \\d+$'])
  assert.deepStrictEqual(c.events.enabled, EVENT_TYPES)
  assert.strictEqual(c.security.max_command_length, 256)
  assert.strictEqual(c.bridge.reconnect_delay, 5000)
  const d = loadConfig(null)
  assert.deepStrictEqual(d.commands.allowed_patterns, c.commands.allowed_patterns)
  assert.deepStrictEqual(d.events.enabled, c.events.enabled)
})

// Issue 22 item 9: a batch in flight holds up to MAX_BATCH events until the relay's ack; an outbox smaller than
// that dropped events already sent (not lost unless the link drops, but then unresendable) at 50 000 events/s.
test('the default outbox holds several full batches awaiting their ack', () => {
  const { MAX_BATCH } = require('../link')
  const d = loadConfig(null)
  assert.ok(d.bridge.outbox_size >= 4 * MAX_BATCH, `outbox_size ${d.bridge.outbox_size} vs MAX_BATCH ${MAX_BATCH}`)
})

test('bad files are refused naming the key', () => {
  const cases = {
    '[security]\nmax_command_length = "long"\n': 'security.max_command_length',
    '[security]\nmax_command_length = 0\n': 'security.max_command_length',
    '[events]\nenabled = ["player_teleport"]\n': 'events.enabled',
    '[commands]\nallowed_patterns = ["(unclosed"]\n': 'commands.allowed_patterns[0]',
    '[bridge]\nurl = "a"\nurl = "b"\n': 'duplicate key bridge.url',
    '[bridge]\nurl = \n': 'line 2'
  }
  for (const [text, expected] of Object.entries(cases)) {
    assert.throws(() => loadConfig(text), (e) => e instanceof ConfigError && e.message.includes(expected), text)
  }
})

// Feature: minecraft-mcp-bridge, Property 7: Command whitelist enforcement — for any command that does not
// match the allowed command patterns, the game side rejects it (flying-squid plugin).
test('property 7: only whole-pattern matches within max_command_length pass', () => {
  const seed = 0x5EED7
  const r = rng(seed)
  const cfg = loadConfig(null)
  for (let i = 0; i < CASES; i++) {
    const name = word(r, 1, 16)
    const kind = Math.floor(r() * 3)
    const allowed = kind === 0
      ? 'say ' + word(r, 0, 40)
      : kind === 1
        ? `tp ${name} ${Math.floor(r() * 2000) - 1000} ${Math.floor(r() * 300)} ${Math.floor(r() * 2000) - 1000}`
        : `give ${name} ${word(r, 1, 20)} ${Math.floor(r() * 100)}`
    const refusedCases = [
      allowed + '\nop ' + name,
      ' ' + allowed,
      kind === 0 ? 'xsay hi' : allowed + ' extra',
      'op ' + name,
      allowed + 'x'.repeat(Math.max(1, 257 - allowed.length)),
      '',
      '/' + allowed
    ]
    const refused = refusedCases[Math.floor(r() * refusedCases.length)]
    assert.strictEqual(checkCommand(cfg, allowed), null, `seed ${seed} case ${i}: ${allowed}`)
    assert.notStrictEqual(checkCommand(cfg, refused), null, `seed ${seed} case ${i}: ${JSON.stringify(refused)}`)
  }
})

test('patterns without anchors still match whole commands only', () => {
  const cfg = loadConfig('[commands]\nallowed_patterns = ["say hi", "time query \\\\w+"]\n')
  assert.strictEqual(checkCommand(cfg, 'say hi'), null)
  assert.notStrictEqual(checkCommand(cfg, 'say hi; op me'), null)
  assert.notStrictEqual(checkCommand(cfg, 'please say hi'), null)
  assert.strictEqual(checkCommand(cfg, 'time query daytime'), null)
})
