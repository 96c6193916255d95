'use strict'
// The plugin's relay link against a scripted relay (a ws server in this process): handshake, outbox and
// resend, Property 6 filtering, and malformed / wrong-version / oversize messages (Properties 12, 21, 22).
const test = require('node:test')
const assert = require('node:assert')
const WebSocket = require('ws')
const { Link, Outbox, PROTOCOL_VERSION, MAX_BATCH } = require('../link')

const CASES = 100

function relay () {
  const wss = new WebSocket.Server({ host: '127.0.0.1', port: 0 })
  const state = { conns: [], received: [], auth: [] }
  wss.on('connection', (ws, req) => {
    state.auth.push(req.headers.authorization)
    state.conns.push(ws)
    ws.on('message', (t) => state.received.push(JSON.parse(t.toString())))
  })
  return new Promise((resolve) => wss.on('listening', () => resolve({ wss, state, url: `ws://127.0.0.1:${wss.address().port}` })))
}

const env = (type, id, payload, extra = {}) => JSON.stringify({ version: '1.0', type, id, timestamp: Date.now(), source: 'relay', payload, ...extra })
const until = async (pred, ms = 5000) => {
  const end = Date.now() + ms
  while (!pred()) {
    if (Date.now() > end) throw new Error('timed out')
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

function link (url, extra = {}) {
  const logs = []
  const l = new Link({
    url,
    token: 't0k',
    name: 'survival',
    adapter: 'test',
    gameVersion: '1.21.4',
    enabledEvents: ['player_chat', 'block_break'],
    reconnectDelay: 20,
    reconnectAttempts: 0,
    outboxSize: 50,
    onCommand: async (type, args) => ({ type, args }),
    log: (lvl, msg) => logs.push(`${lvl} ${msg}`),
    ...extra
  })
  l.logs = logs
  return l
}

test('hello with a bearer token, events after welcome, resend past lastSeq after a reconnect', async () => {
  const { wss, state, url } = await relay()
  const l = link(url)
  l.emitEvent('player_chat', { player: 'a', message: 'before welcome' })
  l.start()
  await until(() => state.received.length === 1)
  assert.strictEqual(state.auth[0], 'Bearer t0k')
  assert.strictEqual(state.received[0].type, 'hello')
  assert.strictEqual(state.received[0].payload.name, 'survival')
  state.conns[0].send(env('welcome', 'w', { role: 'minecraft', epoch: 'E', lastSeq: 0 }))
  await until(() => state.received.length === 2)
  assert.strictEqual(state.received[1].payload.data.message, 'before welcome')
  for (let i = 0; i < 5; i++) l.emitEvent('player_chat', { player: 'a', message: `m${i}` })
  await until(() => state.received.length === 7)
  state.conns[0].send(env('ack', 'a', { seq: 3 }))
  await until(() => l.outbox.items.length === 3)
  state.conns[0].terminate()
  await until(() => state.conns.length === 2 && state.received.some((m, i) => i > 6 && m.type === 'hello'))
  state.conns[1].send(env('welcome', 'w2', { role: 'minecraft', epoch: 'E2', lastSeq: 4 }))
  await until(() => state.received.filter(m => m.type === 'event').length === 8)
  const resent = state.received.slice(8).filter(m => m.type === 'event').map(m => m.seq)
  assert.deepStrictEqual(resent, [5, 6])
  l.stop()
  wss.close()
})

// Feature: minecraft-mcp-bridge, Property 6: Event filtering by configuration — events not enabled are never
// sent (or queued) by the flying-squid plugin.
test('property 6: disabled event types never leave the plugin', () => {
  const l = link('ws://127.0.0.1:1')
  let seed = 6
  const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 }
  const types = ['player_join', 'player_quit', 'player_chat', 'player_death', 'block_break']
  let expected = 0
  for (let i = 0; i < CASES; i++) {
    const t = types[Math.floor(rand() * types.length)]
    const accepted = l.emitEvent(t, { player: 'p' })
    assert.strictEqual(accepted, ['player_chat', 'block_break'].includes(t), t)
    if (accepted) expected++
  }
  assert.strictEqual(l.outbox.items.length, Math.min(expected, 50))
  assert.ok(l.outbox.items.every(it => ['player_chat', 'block_break'].includes(JSON.parse(it.text).payload.eventType)))
})

test('the outbox is bounded by count and bytes', () => {
  const o = new Outbox(3, 1 << 20, () => {})
  for (let i = 1; i <= 5; i++) o.push(i, 'e' + i)
  assert.deepStrictEqual(o.items.map(i => i.seq), [3, 4, 5])
  assert.strictEqual(o.dropped, 2)
  const b = new Outbox(1000, 100, () => {})
  for (let i = 1; i <= 10; i++) b.push(i, 'x'.repeat(30))
  assert.ok(b.bytes <= 100)
  assert.strictEqual(b.items.length, 3)
})

// Issue 22 item 9: at 50 000 events/s the relay's acks trail the outbox by more than its 1000 events, so it
// drops (already sent) events all the time; one stderr line per event was most of the game's send path.
test('outbox drops are logged once per burst with their count, not once per event', () => {
  const lines = []
  const o = new Outbox(10, 1 << 20, (level, msg) => lines.push([level, msg]))
  for (let i = 1; i <= 5000; i++) o.push(i, 'e' + i)
  assert.strictEqual(o.dropped, 4990)
  assert.strictEqual(lines.length, 1, JSON.stringify(lines.slice(0, 3)))
  assert.strictEqual(lines[0][0], 'warn')
  assert.match(lines[0][1], /outbox full \(10 events/)
  o.ackUpTo(5000)
  assert.strictEqual(o.bytes, 0)
})

// Issue 22 item 9: over the relay's --game-rate every event is answered with a rate_limited error; a log line
// for each doubled the game's cost exactly when it was already over its budget.
test('rate_limited errors from the relay are logged once per burst with their count', () => {
  const lines = []
  const l = new Link({ url: 'ws://127.0.0.1:1', token: 't', name: 'g', enabledEvents: ['player_chat'], reconnectDelay: 100, outboxSize: 100, log: (level, msg) => lines.push([level, msg]) })
  for (let i = 1; i <= 1000; i++) {
    l.onMessage(JSON.stringify({ version: '1.1', type: 'error', id: `g-x-${i}`, timestamp: 0, source: 'relay', payload: { code: 'SERVER_ERROR', message: 'rate limited', details: { reason: 'rate_limited', retryAfterMs: 1 } } }))
  }
  l.onMessage(JSON.stringify({ version: '1.1', type: 'error', id: 'other', timestamp: 0, source: 'relay', payload: { code: 'SCHEMA_ERROR', message: 'bad' } }))
  assert.strictEqual(lines.length, 2, JSON.stringify(lines.slice(0, 3)))
  assert.match(lines[0][1], /rate.limited/)
  assert.match(lines[1][1], /relay error for other/)
})

// Feature: minecraft-mcp-bridge, Property 12: Malformed message resilience — garbage, wrong versions and
// invalid envelopes from the relay are logged and refused; the next command is still answered.
// Feature: minecraft-mcp-bridge, Property 21: Schema validation enforcement — an invalid message gets a
// SCHEMA_ERROR `error` back and is not processed.
// Feature: minecraft-mcp-bridge, Property 22: Version mismatch handling — another major version is logged and
// handled as 1.0 when it validates.
test('properties 12, 21, 22: bad messages are refused, logged, and do not stop the link', async () => {
  const { wss, state, url } = await relay()
  const ran = []
  const l = link(url, { onCommand: async (type, args) => { ran.push(args.n); return { ok: true } } })
  l.start()
  await until(() => state.conns.length === 1 && state.received.length === 1)
  const ws = state.conns[0]
  ws.send(env('welcome', 'w', { role: 'minecraft', epoch: 'E', lastSeq: 0 }))
  const garbage = [
    'not json', '[]', '{"version":1}', JSON.stringify({ version: '1.0', type: 'teleport', id: 'x', timestamp: 1, source: 'relay', payload: {} }),
    JSON.stringify({ version: '1.0', type: 'command', id: 'y', timestamp: 'now', source: 'relay', payload: {} }),
    JSON.stringify({ version: '1.0', type: 'command', id: 'z', timestamp: 1, source: 'relay', payload: { command: 7 } })
  ]
  for (let i = 0; i < CASES; i++) {
    ws.send(garbage[i % garbage.length])
    const version = i % 2 ? '1.0' : `${2 + (i % 7)}.${i % 3}`
    ws.send(env('command', `c${i}`, { command: 'get_server_info', args: { n: i } }, { version }))
  }
  await until(() => state.received.filter(m => m.type === 'response').length === CASES, 10000)
  assert.deepStrictEqual(ran, [...Array(CASES).keys()], 'every valid command ran, in order, wrong major version included')
  const errors = state.received.filter(m => m.type === 'error')
  assert.ok(errors.length > 0 && errors.every(e => e.payload.code === 'SCHEMA_ERROR'))
  assert.ok(errors.some(e => e.id === 'z'), 'a command with a bad payload is refused by id')
  assert.ok(l.logs.some(x => x.includes('refused a message')))
  assert.ok(l.logs.some(x => x.includes('speaks protocol 2.')))
  // Oversize (over 1 MiB): the link closes (1009) and redials; nothing crashes.
  ws.send('x'.repeat(1024 * 1024 + 10))
  await until(() => state.conns.length === 2)
  state.conns[1].send(env('welcome', 'w2', { role: 'minecraft', epoch: 'E', lastSeq: 0 }))
  state.conns[1].send(env('command', 'after', { command: 'get_server_info', args: { n: 'after' } }))
  await until(() => ran.includes('after'))
  l.stop()
  wss.close()
})

test('a relay that goes silent past three heartbeats is dropped and redialled', async () => {
  const { wss, state, url } = await relay()
  const l = link(url)
  l.start()
  await until(() => state.received.length === 1)
  state.conns[0].send(env('welcome', 'w', { role: 'minecraft', epoch: 'E', lastSeq: 0, heartbeatInterval: 40 }))
  // The scripted relay says nothing more: within a few intervals the link is dropped and a new hello arrives.
  await until(() => state.conns.length === 2 && state.received.filter(m => m.type === 'hello').length === 2, 3000)
  assert.ok(l.logs.some(x => x.includes('relay silent')))
  l.stop()
  wss.close()
})

// Issue 22 item 1: the link never gives up. reconnectAttempts (the config's reconnect_attempts) only says when the
// outage is logged as long; the relay is away far longer than the capped backoff and the attempts, then back on
// the same port, and everything emitted meanwhile arrives. Each state change is logged once, not per attempt.
test('a relay away for longer than every backoff cap and attempt count is redialled forever; the outage is replayed', async () => {
  const { wss, state, url } = await relay()
  const port = wss.address().port
  const l = link(url, { reconnectDelay: 10, reconnectMaxDelay: 50, reconnectAttempts: 2 })
  l.start()
  await until(() => state.received.length === 1)
  state.conns[0].send(env('welcome', 'w', { role: 'minecraft', epoch: 'E', lastSeq: 0 }))
  await until(() => l.welcomed)
  l.emitEvent('player_chat', { player: 'a', message: 'before' })
  await until(() => state.received.length === 2)
  state.conns[0].send(env('ack', 'a', { seq: 1 }))
  await until(() => l.outbox.items.length === 0)
  await new Promise((resolve) => wss.close(resolve))
  for (const c of state.conns) c.terminate()
  for (let i = 0; i < 30; i++) l.emitEvent('player_chat', { player: 'a', message: `away ${i}` })
  // 1.5 s: 30 caps of 50 ms, far past the two attempts after which the old link gave up for good.
  await new Promise((resolve) => setTimeout(resolve, 1500))
  assert.ok(l.failures > 2, `kept redialling (${l.failures} failures)`)
  const back = new WebSocket.Server({ host: '127.0.0.1', port })
  const received = []
  let conn = null
  back.on('connection', (ws) => { conn = ws; ws.on('message', (t) => received.push(JSON.parse(t.toString()))) })
  await until(() => received.some(m => m.type === 'hello'), 5000)
  conn.send(env('welcome', 'w2', { role: 'minecraft', epoch: 'E2', lastSeq: 1 }))
  await until(() => received.filter(m => m.type === 'event').length === 30)
  assert.deepStrictEqual(received.filter(m => m.type === 'event').map(m => m.payload.data.message), [...Array(30).keys()].map(i => `away ${i}`))
  const count = (re) => l.logs.filter(x => re.test(x)).length
  assert.strictEqual(count(/relay link lost/), 1, l.logs.join('\n'))
  assert.strictEqual(count(/still unreachable after 2 attempts/), 1, l.logs.join('\n'))
  assert.strictEqual(count(/^info linked to relay/), 2, l.logs.join('\n'))
  assert.ok(!l.logs.some(x => /giving up/.test(x)))
  l.stop()
  await new Promise((resolve) => back.close(resolve))
})

// Issue 22 item 2 (protocol 1.1, PROTOCOL.md §2.1): an answer over the relay's maxMessageBytes goes in chunk
// messages that slice together to its text; a 1.0 relay gets it whole, as before.
test('a big answer goes in chunks to a 1.1 relay, whole to a 1.0 one', async () => {
  const { wss, state, url } = await relay()
  const big = { blocks: [...Array(300).keys()].map(i => ({ type: 'minecraft:stone', location: { world: 'w', x: i, y: 64, z: 0 }, note: 'q"\\' })) }
  const l = link(url, { onCommand: async () => big })
  l.start()
  await until(() => state.received.length === 1)
  state.conns[0].send(env('welcome', 'w', { role: 'minecraft', epoch: 'E', lastSeq: 0, maxMessageBytes: 2000 }, { version: '1.1' }))
  await until(() => l.welcomed)
  state.conns[0].send(env('command', 'r1', { command: 'get_world_info', args: {} }))
  await until(() => state.received.some(m => m.type === 'chunk' && m.payload.index === m.payload.count - 1))
  const chunks = state.received.filter(m => m.type === 'chunk')
  assert.ok(chunks.length > 5, `${chunks.length} chunks`)
  assert.ok(chunks.every((c, i) => c.id === 'r1' && c.payload.index === i && c.payload.count === chunks.length && c.version === PROTOCOL_VERSION))
  assert.ok(chunks.every(c => Buffer.byteLength(JSON.stringify(c)) <= 2000), 'each within maxMessageBytes')
  const whole = JSON.parse(chunks.map(c => c.payload.data).join(''))
  assert.strictEqual(whole.type, 'response')
  assert.strictEqual(whole.id, 'r1')
  assert.deepStrictEqual(whole.payload.data, big)
  // A 1.0 relay: whole.
  state.conns[0].terminate()
  await until(() => state.conns.length === 2 && state.received.filter(m => m.type === 'hello').length === 2)
  state.conns[1].send(env('welcome', 'w2', { role: 'minecraft', epoch: 'E', lastSeq: 0 }))
  await until(() => l.welcomed)
  state.conns[1].send(env('command', 'r2', { command: 'get_world_info', args: {} }))
  await until(() => state.received.some(m => m.type === 'response' && m.id === 'r2'))
  l.stop()
  wss.close()
})

// Protocol 1.2 (PROTOCOL.md §2.2): the events one turn of the event loop emits go in one batch frame to a 1.2
// relay, each batch within its maxMessageBytes, numbers in order; a lone event goes at once as itself; a 1.1
// relay gets one event a frame, as before.
test('events emitted together go in batch frames to a 1.2 relay and one a frame to a 1.1 relay', async () => {
  const { wss, state, url } = await relay()
  const l = link(url, { outboxSize: 5000 })
  l.start()
  await until(() => state.received.length === 1)
  state.conns[0].send(env('welcome', 'w', { role: 'minecraft', epoch: 'E', lastSeq: 0, maxMessageBytes: 4000 }, { version: '1.2' }))
  await until(() => l.welcomed)
  for (let i = 0; i < 60; i++) l.emitEvent('player_chat', { player: 'a', message: `m${i}` })
  const inBatches = () => state.received.filter(m => m.type === 'batch').flatMap(b => b.payload.messages)
  await until(() => inBatches().length === 60)
  const batches = state.received.filter(m => m.type === 'batch')
  assert.ok(batches.length >= 2, `${batches.length} batches for 60 events over 4000 bytes`)
  assert.ok(batches.every(b => Buffer.byteLength(JSON.stringify(b)) <= 4000 && b.version === PROTOCOL_VERSION && b.payload.messages.length <= MAX_BATCH))
  assert.deepStrictEqual(inBatches().map(m => m.seq), [...Array(60).keys()].map(i => i + 1))
  assert.ok(inBatches().every(m => m.type === 'event' && m.payload.eventType === 'player_chat'))
  assert.strictEqual(state.received.filter(m => m.type === 'event').length, 0, 'none sent alone')
  // A lone event is not held back for company.
  l.emitEvent('player_chat', { player: 'a', message: 'alone' })
  await until(() => state.received.some(m => m.type === 'event'))
  assert.strictEqual(state.received.find(m => m.type === 'event').seq, 61)
  // A 1.1 relay: one event a frame (the outbox resent past lastSeq too).
  state.conns[0].terminate()
  await until(() => state.conns.length === 2 && state.received.filter(m => m.type === 'hello').length === 2)
  const before = state.received.length
  state.conns[1].send(env('welcome', 'w2', { role: 'minecraft', epoch: 'E2', lastSeq: 58 }, { version: '1.1' }))
  await until(() => l.welcomed)
  for (let i = 0; i < 5; i++) l.emitEvent('player_chat', { player: 'a', message: `n${i}` })
  await until(() => state.received.slice(before).filter(m => m.type === 'event').length === 8)
  const after = state.received.slice(before)
  assert.strictEqual(after.filter(m => m.type === 'batch').length, 0)
  assert.deepStrictEqual(after.filter(m => m.type === 'event').map(m => m.seq), [59, 60, 61, 62, 63, 64, 65, 66])
  l.stop()
  wss.close()
})
