'use strict'
// The game half of the plugin: runs the relay's commands against flying-squid and turns flying-squid's player
// events into GameEvent data (crates/minecraft/PROTOCOL.md §4.1). Knows nothing about the wire; link.js does.

const { Vec3 } = require('vec3')
const { checkCommand } = require('./config')

const MAX_WORLD_RADIUS = 16
const MAX_QUANTITY = 6400
const ANSI = /\x1b\[[0-9;]*m/g // eslint-disable-line no-control-regex
const MC_FORMAT = /§[0-9a-fk-or]/gi

class GameError extends Error {
  constructor (code, message, details) {
    super(message)
    this.code = code
    if (details) this.details = details
  }
}

// Largest count one `give` may hand out: vanilla's rule, 100 stacks of the item (6400 diamonds, 1600 ender
// pearls, 100 swords).
const GIVE_STACKS = 100
// The world's horizontal border and the height a position may have (vanilla's limits, flying-squid's own
// teleport checks them for three coordinates but not four).
const BORDER = 29999999
const MAX_HEIGHT = 4096
// Most entities one summonMany / pile may create.
const MAX_SUMMON = 100

// A value over a game limit: INVALID_COMMAND (the caller can fix it), naming the field, the limit and the value.
function overLimit (field, value, limit, message) {
  return new GameError('INVALID_COMMAND', `${field}: ${message}`, { reason: 'over_game_limit', field, limit, value })
}

// One coordinate of a command: a number, or ~ / ~N relative to the target. Absolute values and offsets
// alike must stay within the limit (a relative offset of 10^9 reaches as far as an absolute one).
function coordinate (token, field, limit) {
  const m = /^(~?)(-?\d*(?:\.\d+)?)$/.exec(token)
  if (!m || (m[1] === '' && m[2] === '')) throw overLimit(field, token, limit, `${JSON.stringify(token)} is not a coordinate`)
  const v = m[2] === '' || m[2] === '-' ? 0 : Number(m[2])
  if (!Number.isFinite(v) || Math.abs(v) > limit) throw overLimit(field, token, limit, `${token} is outside ±${limit}`)
  return v
}

const clean = (s) => String(s).replace(ANSI, '').replace(MC_FORMAT, '')

function worldName (serv, world) {
  if (!world || world === serv.overworld) return 'minecraft:overworld'
  if (world === serv.netherworld) return 'minecraft:the_nether'
  return 'minecraft:overworld'
}

function location (serv, entity) {
  const p = entity.position
  return { world: worldName(serv, entity.world), x: p.x, y: p.y, z: p.z }
}

function num (args, key, { integer = false } = {}) {
  const raw = args[key]
  const v = typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : raw
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new GameError('SCHEMA_ERROR', `${key}: expected a number, got ${JSON.stringify(raw)}`)
  if (integer && !Number.isInteger(v)) throw new GameError('SCHEMA_ERROR', `${key}: expected an integer, got ${JSON.stringify(raw)}`)
  return v
}

function str (args, key, { optional = false, max = 256 } = {}) {
  const v = args[key]
  if (v === undefined || v === null) {
    if (optional) return undefined
    throw new GameError('SCHEMA_ERROR', `${key}: required`)
  }
  if (typeof v !== 'string') throw new GameError('SCHEMA_ERROR', `${key}: expected a string`)
  if (v.length > max) throw new GameError('SCHEMA_ERROR', `${key}: ${v.length} characters, over the limit of ${max}`)
  return v
}

class Game {
  constructor (serv, cfg, log) {
    this.serv = serv
    this.cfg = cfg
    this.log = log
    this.weather = 'clear'
    this.tickTimes = []
    // Commands run one at a time: output is captured from the server log, which concurrent runs would mix.
    this.queue = Promise.resolve()
  }

  // Called once flying-squid is ready: hooks that must run after its built-in plugins have loaded.
  attach () {
    const serv = this.serv
    const writeAll = serv._writeAll.bind(serv)
    serv._writeAll = (name, data) => {
      if (name === 'game_state_change' && data && data.reason === 2) this.weather = 'rain'
      if (name === 'game_state_change' && data && data.reason === 1) this.weather = 'clear'
      return writeAll(name, data)
    }
    serv.on('tick', () => {
      const now = Date.now()
      this.tickTimes.push(now)
      while (this.tickTimes.length && this.tickTimes[0] < now - 1000) this.tickTimes.shift()
    })
  }

  // Wires one player's events to `emit(eventType, data)`.
  watchPlayer (player, emit) {
    const serv = this.serv
    player.on('spawned', () => emit('player_join', { player: player.username, uuid: player.uuid }))
    player.on('disconnected', () => {
      // Already reported by quitAll when the server began to stop.
      if (!player._mcpQuitReported) emit('player_quit', { player: player.username, uuid: player.uuid })
      player._mcpQuitReported = true
    })
    player.on('chat', (data, cancelled) => {
      if (!cancelled) emit('player_chat', { player: player.username, message: String(data.message) })
    })
    player.on('dug', (data, cancelled) => {
      if (cancelled) return
      const p = data.position
      emit('block_break', {
        player: player.username,
        blockType: 'minecraft:' + data.block.name,
        location: { world: worldName(serv, player.world), x: p.x, y: p.y, z: p.z }
      })
    })
    // flying-squid has no death event; health.js defines updateHealth when the player connects, after the
    // external plugins ran, so the wrapper is installed on 'connected' (or it would be overwritten).
    player.on('connected', () => {
      const inner = player.updateHealth
      player.updateHealth = (health) => {
        const wasAlive = player.health > 0
        inner(health)
        if (wasAlive && health <= 0) {
          const data = { player: player.username, cause: player._mcpDeathCause || 'generic', location: location(serv, player) }
          player._mcpDeathCause = undefined
          emit('player_death', data)
        }
      }
    })
  }

  // The server is stopping: every player online is reported as quitting now (their connections end with
  // the process, which may be before flying-squid says so). Returns how many.
  quitAll (emit) {
    let n = 0
    for (const p of this.serv.players) {
      if (!p.username || p._mcpQuitReported) continue
      p._mcpQuitReported = true
      emit('player_quit', { player: p.username, uuid: p.uuid, reason: 'server_stopping' })
      n += 1
    }
    return n
  }

  run (type, args) {
    const job = this.queue.then(() => this.dispatch(type, args || {}))
    this.queue = job.catch(() => {})
    return job
  }

  player (name) {
    const p = this.serv.getPlayer(name)
    if (!p) throw new GameError('PLAYER_NOT_FOUND', `player ${JSON.stringify(name)} is not online`)
    return p
  }

  async dispatch (type, args) {
    switch (type) {
      case 'execute_command': return this.executeCommand(str(args, 'command', { max: 32767 }))
      case 'send_message': return this.sendMessage(args)
      case 'teleport_player': return this.teleport(args)
      case 'give_item': return this.give(args)
      case 'get_online_players': return this.onlinePlayers()
      case 'get_player_info': return this.playerInfo(this.player(str(args, 'player', { max: 16 })))
      case 'get_server_info': return this.serverInfo()
      case 'get_world_info': return this.worldInfo(args)
      default: throw new GameError('INVALID_COMMAND', `unknown command type ${JSON.stringify(type)}`)
    }
  }

  // Runs a console command and returns what it printed. Checked against the whitelist here too, whatever the
  // relay and MCP server checked: the game side is the last line.
  async executeCommand (command) {
    const refused = checkCommand(this.cfg, command)
    if (refused) {
      this.log('warn', `refused command ${JSON.stringify(command.slice(0, 300))}: ${refused}`)
      throw new GameError('INVALID_COMMAND', refused)
    }
    // Whitelisted is not enough: a command's numbers must fit the game's limits, or flying-squid runs it and
    // breaks (a `give` of 23 diamonds made the slot's count the text "23", and the next give "2323").
    const safe = this.checkLimits(command)
    if (safe) return safe()
    if (/^kill\b/.test(command)) {
      const target = this.serv.getPlayer(command.split(' ')[1] || '')
      if (target) target._mcpDeathCause = 'kill_command'
    }
    const { output, error } = await this.capture(() => this.serv.commands.use(command, undefined, true))
    if (error) {
      this.log('warn', `command ${JSON.stringify(command)} failed: ${error.stack || error.message}`)
      return { success: false, error: clean(error.message), output }
    }
    return { success: true, message: output.join('\n'), output }
  }

  // Checks the numbers of the commands that take them against the game's limits, throwing INVALID_COMMAND
  // with the field and the limit. For `give`, returns the adapter's own give to run instead of flying-squid's
  // (which stores the count as text and never splits stacks).
  checkLimits (command) {
    const words = command.trim().split(/\s+/)
    const base = words[0].replace(/^\//, '')
    const registry = this.serv.registry
    if (base === 'give') {
      const [, player, rawItem, rawCount] = words
      if (!player || !rawItem || words.length > 4) throw new GameError('INVALID_COMMAND', 'give: usage is give <player> <item> [count]', { reason: 'usage' })
      if (player.startsWith('@')) throw new GameError('INVALID_COMMAND', `give: name one player, not the selector ${player}`, { reason: 'usage', field: 'player' })
      const item = rawItem.replace(/^minecraft:/, '')
      const data = registry.itemsByName[item]
      if (!data) throw new GameError('INVALID_COMMAND', `give: unknown item ${JSON.stringify(rawItem)}`, { reason: 'unknown_item', field: 'item', value: rawItem })
      const limit = (data.stackSize || 64) * GIVE_STACKS
      let count = 1
      if (rawCount !== undefined) {
        if (!/^\d+$/.test(rawCount)) throw overLimit('count', rawCount, limit, `${JSON.stringify(rawCount)} is not a whole number`)
        count = Number(rawCount)
      }
      if (count < 1 || count > limit) throw overLimit('count', count, limit, `${count} is outside 1..${limit} (${GIVE_STACKS} stacks of ${data.stackSize || 64} minecraft:${item})`)
      return () => this.give({ player, item, quantity: count })
    }
    if (base === 'tp' || base === 'teleport') {
      // tp [target] x y z: the last three words when they are coordinates (tp A B names two players).
      const rest = words.slice(1)
      const coords = rest.length >= 3 && rest.slice(-3).every(w => /^~?-?[\d.]*$/.test(w)) ? rest.slice(-3) : []
      coords.forEach((w, i) => coordinate(w, ['x', 'y', 'z'][i], i === 1 ? MAX_HEIGHT : BORDER))
    }
    if (base === 'setblock') {
      const [, x, y, z, block] = words
      if (z !== undefined) {
        coordinate(x, 'x', BORDER)
        coordinate(y, 'y', MAX_HEIGHT)
        coordinate(z, 'z', BORDER)
      }
      if (block && isNaN(+block) && !registry.blocksByName[block.replace(/^minecraft:/, '')]) {
        throw new GameError('INVALID_COMMAND', `setblock: unknown block ${JSON.stringify(block)}`, { reason: 'unknown_block', field: 'block', value: block })
      }
    }
    if (base === 'summonMany' || base === 'pile') {
      const n = Number(words[1])
      if (!Number.isInteger(n) || n < 1 || n > MAX_SUMMON) throw overLimit('count', words[1], MAX_SUMMON, `${words[1]} is outside 1..${MAX_SUMMON}`)
    }
    return null
  }

  async capture (fn) {
    const serv = this.serv
    const saved = { info: serv.info, err: serv.err, warn: serv.warn }
    const output = []
    const grab = (orig) => (msg) => { output.push(clean(msg)); orig(msg) }
    serv.info = grab(saved.info)
    serv.err = grab(saved.err)
    serv.warn = grab(saved.warn)
    let error = null
    try {
      const ret = await fn()
      if (ret) output.push(clean(ret))
    } catch (e) {
      if (!e.userError) throw new GameError('SERVER_ERROR', `command crashed: ${e.message}`)
      error = e
    } finally {
      Object.assign(serv, saved)
    }
    return { output, error }
  }

  sendMessage (args) {
    const message = str(args, 'message', { max: this.cfg.security.max_command_length })
    const target = str(args, 'target', { optional: true, max: 16 })
    if (/[\r\n\0]/.test(message)) throw new GameError('SCHEMA_ERROR', 'message: contains a line break or NUL')
    if (target) {
      this.player(target).chat(message)
      return { success: true, message: `sent to ${target}`, recipients: 1 }
    }
    this.serv.broadcast(message)
    return { success: true, message: 'broadcast', recipients: this.serv.players.length }
  }

  async teleport (args) {
    const p = this.player(str(args, 'player', { max: 16 }))
    const x = num(args, 'x'); const y = num(args, 'y'); const z = num(args, 'z')
    for (const [k, v] of [['x', x], ['z', z]]) if (Math.abs(v) > BORDER) throw overLimit(k, v, BORDER, `${v} is outside the world border (±${BORDER})`)
    if (y < -2048 || y > 2048) throw overLimit('y', y, 2048, `${y} is outside -2048..2048`)
    const world = str(args, 'world', { optional: true, max: 64 })
    if (world && !['minecraft:overworld', 'overworld', 'world'].includes(world)) {
      throw new GameError('INVALID_COMMAND', `world ${JSON.stringify(world)}: this flying-squid server teleports within minecraft:overworld only`)
    }
    await p.teleport(new Vec3(x, y, z))
    return { success: true, message: `teleported ${p.username}`, location: location(this.serv, p) }
  }

  async give (args) {
    const p = this.player(str(args, 'player', { max: 16 }))
    const item = str(args, 'item', { max: 128 }).replace(/^minecraft:/, '')
    const quantity = num(args, 'quantity', { integer: true })
    const itemData = this.serv.registry.itemsByName[item]
    if (!itemData) throw new GameError('INVALID_COMMAND', `item: unknown item ${JSON.stringify(args.item)}`, { reason: 'unknown_item', field: 'item', value: args.item })
    const limit = Math.min(MAX_QUANTITY, (itemData.stackSize || 64) * GIVE_STACKS)
    if (quantity < 1 || quantity > limit) throw overLimit('quantity', quantity, limit, `${quantity} is outside 1..${limit} (${GIVE_STACKS} stacks of ${itemData.stackSize || 64} minecraft:${item})`)
    // Not flying-squid's /give: it adds a numeric-string count to an existing stack as text ("3" + 2 = "32").
    const Item = require('prismarine-item')(this.serv.registry)
    const inv = p.inventory
    const stackSize = itemData.stackSize || 64
    let left = quantity
    for (const slot of inv.slots) {
      if (left === 0) break
      if (slot && slot.type === itemData.id && slot.count < stackSize) {
        const add = Math.min(left, stackSize - slot.count)
        slot.count += add
        inv.updateSlot(slot.slot, slot)
        left -= add
      }
    }
    while (left > 0) {
      const free = inv.firstEmptyInventorySlot()
      if (free === null || free === undefined || free < 0) break
      const add = Math.min(left, stackSize)
      inv.updateSlot(free, new Item(itemData.id, add))
      left -= add
    }
    const given = quantity - left
    if (given === 0) return { success: false, error: `${p.username}'s inventory is full`, output: [] }
    const message = `gave ${given} minecraft:${item} to ${p.username}` + (left ? ` (${left} did not fit)` : '')
    return { success: left === 0, message, output: [message] }
  }

  onlinePlayers () {
    return { players: this.serv.players.filter(p => p.username).map(p => p.username) }
  }

  playerInfo (p) {
    const inventory = []
    for (const slot of p.inventory.slots) {
      if (slot) inventory.push({ type: 'minecraft:' + slot.name, quantity: slot.count, displayName: slot.displayName })
    }
    const modes = ['survival', 'creative', 'adventure', 'spectator']
    return {
      name: p.username,
      uuid: p.uuid,
      health: p.health,
      foodLevel: p.food,
      location: location(this.serv, p),
      gameMode: modes[p.gameMode] || String(p.gameMode),
      inventory
    }
  }

  serverInfo () {
    const s = this.serv
    return {
      version: s.settings?.version || this.version,
      onlinePlayers: s.players.length,
      maxPlayers: this.maxPlayers,
      timeOfDay: ((s.time % 24000) + 24000) % 24000,
      weather: this.weather,
      tps: this.tickTimes.length
    }
  }

  async worldInfo (args) {
    const x = Math.floor(num(args, 'x')); const y = Math.floor(num(args, 'y')); const z = Math.floor(num(args, 'z'))
    const r = num(args, 'radius', { integer: true })
    if (r < 0 || r > MAX_WORLD_RADIUS) throw overLimit('radius', r, MAX_WORLD_RADIUS, `${r} is outside 0..${MAX_WORLD_RADIUS}`)
    const world = this.serv.overworld
    const blocks = []
    for (let dx = -r; dx <= r; dx++) {
      for (let dy = -r; dy <= r; dy++) {
        for (let dz = -r; dz <= r; dz++) {
          const pos = new Vec3(x + dx, y + dy, z + dz)
          const b = await world.getBlock(pos)
          if (b && b.name !== 'air' && b.name !== 'cave_air' && b.name !== 'void_air') {
            blocks.push({ type: 'minecraft:' + b.name, location: { world: 'minecraft:overworld', x: pos.x, y: pos.y, z: pos.z } })
          }
        }
      }
    }
    const centre = new Vec3(x, y, z)
    const entities = []
    for (const e of Object.values(this.serv.entities)) {
      if (!e.position || e.world !== world) continue
      const d = e.position
      if (Math.abs(d.x - centre.x) <= r + 0.5 && Math.abs(d.y - centre.y) <= r + 0.5 && Math.abs(d.z - centre.z) <= r + 0.5) {
        const ent = { type: e.type === 'player' ? 'minecraft:player' : 'minecraft:' + (e.name || e.type), location: location(this.serv, e) }
        if (e.username) ent.name = e.username
        entities.push(ent)
      }
    }
    return { blocks, entities }
  }
}

module.exports = { Game, GameError, MAX_WORLD_RADIUS }
