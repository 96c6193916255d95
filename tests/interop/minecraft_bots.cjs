'use strict'
// mineflayer bots for tests/interop/test_minecraft_e2e.py, driven by JSON lines on stdin; one JSON line per
// request on stdout: {"id", "ok": true, ...} or {"id", "ok": false, "error"}; plus {"event": ...} lines for
// what the bots see (messages, deaths). mineflayer 4.39.0 comes from the flying-squid adapter's node_modules
// (scripts/minecraft-server installs it).
//
//   node minecraft_bots.cjs PORT
//   {"id":1,"op":"join","name":"alice"}  {"id":2,"op":"chat","name":"alice","text":"hi"}
//   {"id":3,"op":"dig","name":"alice"}   {"id":4,"op":"quit","name":"alice"}   {"id":5,"op":"state","name":"alice"}

const path = require('path')
const readline = require('readline')

const ADAPTER = path.join(__dirname, '..', '..', 'crates', 'minecraft', 'adapters', 'flying-squid', 'node_modules')
const mineflayer = require(path.join(ADAPTER, 'mineflayer'))
const { Vec3 } = require(path.join(ADAPTER, 'vec3'))

const port = Number(process.argv[2])
const bots = new Map()
const say = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')

function withTimeout (promise, ms, what) {
  return Promise.race([promise, new Promise((_, rej) => setTimeout(() => rej(new Error(`${what}: no result in ${ms} ms`)), ms))])
}

function join (name) {
  return new Promise((resolve, reject) => {
    const bot = mineflayer.createBot({ host: '127.0.0.1', port, username: name, auth: 'offline', version: '1.21.4', hideErrors: true })
    bot.on('messagestr', (text) => say({ event: 'message', bot: name, text }))
    bot.on('death', () => say({ event: 'death', bot: name }))
    bot.on('error', (e) => say({ event: 'error', bot: name, error: String(e && e.message) }))
    bot.once('spawn', () => { bots.set(name, bot); resolve({ position: bot.entity.position }) })
    bot.once('end', (reason) => { bots.delete(name); reject(new Error(`bot ${name} ended: ${reason}`)) })
  })
}

function bot (name) {
  const b = bots.get(name)
  if (!b) throw new Error(`no bot named ${name}`)
  return b
}

// Digs the block under the bot's feet, offset by dx/dz; waits for the bot to land first (after an earlier
// dig it falls into the hole). A module's tests share one world, so an earlier dig may have left a hole where
// this one aims: then the nearest solid block at that depth (up to 2 blocks from the aim) breaks instead, which
// is the same block_break event for the tests.
async function dig (name, dx = 0, dz = 0) {
  const b = bot(name)
  const deadline = Date.now() + 5000
  for (;;) {
    const aim = b.entity.position.floored().offset(dx, -1, dz)
    const block = b.entity.onGround ? diggableNear(b, aim) : null
    if (block) {
      await b.dig(block, true)
      const p = block.position
      return { blockType: 'minecraft:' + block.name, location: { x: p.x, y: p.y, z: p.z } }
    }
    if (Date.now() > deadline) {
      const there = b.blockAt(aim)
      throw new Error(`nothing to dig under ${name} at ${aim} (${there ? there.name : 'unloaded'}, on ground: ${b.entity.onGround}, none solid within 2 blocks)`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

function diggableNear (b, aim) {
  const solid = (p) => {
    const k = b.blockAt(p)
    return k && k.name !== 'air' && b.canDigBlock(k) ? k : null
  }
  for (let r = 0; r <= 2; r++) {
    for (let x = -r; x <= r; x++) {
      for (let z = -r; z <= r; z++) {
        if (Math.max(Math.abs(x), Math.abs(z)) !== r) continue
        const k = solid(aim.offset(x, 0, z))
        if (k) return k
      }
    }
  }
  return null
}

async function handle (req) {
  switch (req.op) {
    case 'join': return join(req.name)
    case 'chat': bot(req.name).chat(req.text); return {}
    case 'dig': return dig(req.name, req.dx || 0, req.dz || 0)
    case 'state': {
      const b = bot(req.name)
      return { position: b.entity.position, health: b.health, items: b.inventory.items().map(i => ({ name: i.name, count: i.count })) }
    }
    case 'quit': {
      const b = bot(req.name)
      const ended = new Promise((resolve) => b.once('end', resolve))
      b.quit()
      await ended
      return {}
    }
    default: throw new Error(`unknown op ${req.op}`)
  }
}

readline.createInterface({ input: process.stdin }).on('line', async (line) => {
  let req
  try { req = JSON.parse(line) } catch (e) { say({ ok: false, error: 'bad json' }); return }
  try {
    const res = await withTimeout(handle(req), req.timeoutMs || 30000, req.op)
    say({ id: req.id, ok: true, ...res })
  } catch (e) {
    say({ id: req.id, ok: false, error: String(e.message || e) })
  }
}).on('close', () => {
  for (const b of bots.values()) b.quit()
  setTimeout(() => process.exit(0), 500)
})
