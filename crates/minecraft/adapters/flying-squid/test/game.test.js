'use strict'
// The plugin's game side on its own (issue 22 items 6 and 7): default names unique per host, a graceful stop
// reporting every player online as quitting, and commands whose numbers are checked against the game's limits
// before flying-squid runs them (a whitelisted `give` of 23 diamonds broke flying-squid's inventory).
const test = require('node:test')
const assert = require('node:assert')
const { Game, GameError } = require('../game')
const { loadConfig, defaultServerName } = require('../config')
const { shutdown } = require('../plugin')

const registry = require('prismarine-registry')('1.21.4')
const Item = require('prismarine-item')(registry)

// The parts of a flying-squid server the game side touches, with players holding a real inventory.
function fakeServer (names) {
  const players = names.map((username, i) => {
    const slots = new Array(46).fill(null)
    return {
      username,
      uuid: `uuid-${i}`,
      inventory: {
        slots,
        updateSlot (n, item) { item.slot = n; slots[n] = item },
        firstEmptyInventorySlot () { const n = slots.findIndex((s, j) => j >= 9 && !s); return n < 0 ? null : n }
      }
    }
  })
  const ran = []
  const serv = {
    players,
    registry,
    getPlayer: (n) => players.find(p => p.username === n) || null,
    commands: { use: (c) => { ran.push(c); return 'done' } },
    info () {},
    err () {},
    warn () {}
  }
  return { serv, ran }
}

const CONFIG = loadConfig(`
[commands]
allowed_patterns = ["^give \\\\w+ [\\\\w:]+( \\\\w+)?$", "^tp .*$", "^teleport .*$", "^setblock .*$", "^summonMany .*$", "^time query daytime$"]
`)

function game (names = ['Steve']) {
  const { serv, ran } = fakeServer(names)
  return { g: new Game(serv, CONFIG, () => {}), serv, ran }
}

async function refusal (promise) {
  try {
    await promise
  } catch (e) {
    assert.ok(e instanceof GameError, String(e))
    return e
  }
  assert.fail('expected a refusal')
}

test('default names are the host name and port, in the protocol alphabet and at most 64 characters', () => {
  assert.strictEqual(defaultServerName('mc-host', 25565), 'mc-host-25565')
  assert.strictEqual(defaultServerName('my host!.local', 25566), 'my-host-.local-25566')
  assert.notStrictEqual(defaultServerName('h', 25565), defaultServerName('h', 25566), 'two servers on one host differ')
  const long = defaultServerName('x'.repeat(200), 65535)
  assert.strictEqual(long.length, 64)
  assert.ok(long.endsWith('-65535'), 'the port is kept whole')
  assert.strictEqual(defaultServerName('', 1), 'minecraft-1')
  for (const host of ['a', 'ü-ñ', '---', 'x'.repeat(70), 'a b\tc']) {
    assert.match(defaultServerName(host, 25565), /^[A-Za-z0-9_.-]{1,64}$/)
  }
})

test('a whitelisted give within the limits runs as the adapter\'s own give, with numeric counts that stack', async () => {
  const { g, serv, ran } = game()
  const a = await g.executeCommand('give Steve diamond 23')
  assert.strictEqual(a.success, true, JSON.stringify(a))
  const b = await g.executeCommand('give Steve minecraft:diamond 50')
  assert.strictEqual(b.success, true, JSON.stringify(b))
  assert.deepStrictEqual(ran, [], 'flying-squid\'s /give (count kept as text) never ran')
  const stacks = serv.players[0].inventory.slots.filter(Boolean)
  assert.deepStrictEqual(stacks.map(s => s.count), [64, 9], 'numbers, split at the stack size of 64')
  assert.ok(stacks.every(s => typeof s.count === 'number'))
})

test('a give over the game\'s limits is refused with INVALID_COMMAND naming the field and the limit', async () => {
  const { g, ran } = game()
  let e = await refusal(g.executeCommand('give Steve diamond 6401'))
  assert.strictEqual(e.code, 'INVALID_COMMAND')
  assert.deepStrictEqual(e.details, { reason: 'over_game_limit', field: 'count', limit: 6400, value: 6401 })
  e = await refusal(g.executeCommand('give Steve ender_pearl 1601'))
  assert.strictEqual(e.details.limit, 1600, '100 stacks of 16')
  e = await refusal(g.executeCommand('give Steve diamond_sword 101'))
  assert.strictEqual(e.details.limit, 100, '100 stacks of 1')
  e = await refusal(g.executeCommand('give Steve diamond 0'))
  assert.strictEqual(e.details.field, 'count')
  e = await refusal(g.executeCommand('give Steve no_such_item 1'))
  assert.strictEqual(e.details.reason, 'unknown_item')
  e = await refusal(g.executeCommand('give Nobody diamond 1'))
  assert.strictEqual(e.code, 'PLAYER_NOT_FOUND')
  assert.deepStrictEqual(ran, [])
})

test('coordinates beyond the world border or height are refused before flying-squid sees them', async () => {
  const { g, ran } = game()
  for (const [cmd, field, limit] of [
    ['tp Steve 30000000 64 0', 'x', 29999999],
    ['tp Steve 0 5000 0', 'y', 4096],
    ['teleport Steve 0 64 -99999999999', 'z', 29999999],
    ['tp Steve ~40000000 ~ ~', 'x', 29999999],
    ['setblock 0 9999 0 stone', 'y', 4096],
    ['summonMany 100000 zombie', 'count', 100]
  ]) {
    const e = await refusal(g.executeCommand(cmd))
    assert.strictEqual(e.code, 'INVALID_COMMAND', cmd)
    assert.strictEqual(e.details.field, field, cmd)
    assert.strictEqual(e.details.limit, limit, cmd)
  }
  const e = await refusal(g.executeCommand('setblock 0 64 0 no_such_block'))
  assert.strictEqual(e.details.reason, 'unknown_block')
  assert.deepStrictEqual(ran, [])
  const ok = await g.executeCommand('tp Steve 10 64 ~-5')
  assert.strictEqual(ok.success, true)
  await g.executeCommand('time query daytime')
  assert.deepStrictEqual(ran, ['tp Steve 10 64 ~-5', 'time query daytime'], 'within the limits, flying-squid runs it')
})

test('the give_item tool\'s range errors are INVALID_COMMAND with the limit, not SCHEMA_ERROR', async () => {
  const { g } = game()
  const e = await refusal(g.give({ player: 'Steve', item: 'ender_pearl', quantity: 2000 }))
  assert.strictEqual(e.code, 'INVALID_COMMAND')
  assert.strictEqual(e.details.limit, 1600)
  const r = await refusal(g.worldInfo({ x: 0, y: 0, z: 0, radius: 17 }))
  assert.strictEqual(r.code, 'INVALID_COMMAND')
  assert.strictEqual(r.details.limit, 16)
})

test('a graceful stop reports every player online as quitting once, and waits for the relay to have it', async () => {
  const { serv } = game(['Steve', 'Alex', 'Notch'])
  const events = []
  const link = {
    welcomed: true,
    outbox: { items: [] },
    stopped: false,
    emitEvent (type, data) {
      events.push([type, data])
      this.outbox.items.push({ type })
      // The relay acknowledges a little later.
      setTimeout(() => this.outbox.items.shift(), 30)
      return true
    },
    stop () { this.stopped = true }
  }
  const g = new Game(serv, CONFIG, () => {})
  serv.mcpBridge = { game: g, link, log: () => {} }
  const r = await shutdown(serv, 5000)
  assert.deepStrictEqual(r, { players: 3, unacknowledged: 0 })
  assert.ok(link.stopped)
  assert.deepStrictEqual(events.map(([t, d]) => [t, d.player, d.reason]), [
    ['player_quit', 'Steve', 'server_stopping'],
    ['player_quit', 'Alex', 'server_stopping'],
    ['player_quit', 'Notch', 'server_stopping']
  ])
  // flying-squid then kicks them: no second player_quit.
  assert.strictEqual(g.quitAll((t, d) => events.push([t, d])), 0)
  assert.strictEqual(events.length, 3)
})

test('every event carries its type\'s own number (typeSeq) beside the game\'s (seq)', () => {
  const { Link } = require('../link')
  const l = new Link({ url: 'ws://127.0.0.1:1', token: 't', name: 'g', enabledEvents: ['player_chat', 'player_join'], reconnectDelay: 100, outboxSize: 100, log: () => {} })
  for (const t of ['player_join', 'player_chat', 'player_chat', 'player_join', 'player_chat']) l.emitEvent(t, { player: 'p' })
  const sent = l.outbox.items.map((i) => JSON.parse(i.text))
  assert.deepStrictEqual(sent.map((m) => [m.seq, m.payload.eventType, m.payload.typeSeq]), [
    [1, 'player_join', 1], [2, 'player_chat', 1], [3, 'player_chat', 2], [4, 'player_join', 2], [5, 'player_chat', 3]
  ])
})
