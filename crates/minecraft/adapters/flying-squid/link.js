'use strict'
// The relay link of the game adapter (crates/minecraft/PROTOCOL.md): dial with a bearer token, hello/welcome,
// sequenced events kept in a bounded outbox until acknowledged, commands answered one response each,
// reconnect forever with capped exponential backoff and jitter (each state change logged once).

const crypto = require('crypto')
const WebSocket = require('ws')

// 1.1 added `chunk` (PROTOCOL.md §2.1): an answer over the relay's maxMessageBytes goes in slices. 1.2 added
// `batch` (§2.2): events emitted together travel in one frame, to a relay that speaks 1.2.
const PROTOCOL_VERSION = '1.2'
// Room a chunk's envelope takes besides its data.
const CHUNK_OVERHEAD = 512
// Most messages one batch carries, and the room its envelope takes around them (PROTOCOL.md §2.2).
const MAX_BATCH = 1024
const BATCH_OVERHEAD = 192
const MAX_INBOUND_BYTES = 1024 * 1024
const MAX_BACKOFF_MS = 30000
// After this many failed dials in a row the outage is logged as long (once) when reconnectAttempts is 0.
const LONG_OUTAGE_ATTEMPTS = 5
// A relay silent for this many heartbeat intervals (no frame, no ping) is taken for dead: a half-open TCP link
// would otherwise look alive until the OS gives up on it.
const SILENT_INTERVALS = 3
const TYPES = ['hello', 'welcome', 'command', 'query', 'response', 'event', 'ack', 'subscribe', 'heartbeat', 'notice', 'error', 'chunk', 'batch']

// Accepts "ws://host:port" as well as "ws://host:port/".
function normaliseUrl (url) {
  const u = new URL(url)
  if (u.protocol !== 'ws:' && u.protocol !== 'wss:') throw new Error(`relay url ${url}: expected ws:// or wss://`)
  return u.toString()
}

// Validates an envelope; returns [message, null] or [null|partial, reason].
function parseEnvelope (text) {
  let m
  try { m = JSON.parse(text) } catch (e) { return [null, 'not JSON: ' + e.message] }
  if (!m || typeof m !== 'object' || Array.isArray(m)) return [null, 'not a JSON object']
  if (typeof m.version !== 'string' || !/^\d+\.\d+$/.test(m.version)) return [m, 'field `version`: must be "MAJOR.MINOR"']
  if (!TYPES.includes(m.type)) return [m, 'field `type`: must be one of ' + TYPES.join(', ')]
  if (typeof m.id !== 'string' || m.id.length > 128) return [m, 'field `id`: must be a string of at most 128 chars']
  if (typeof m.timestamp !== 'number') return [m, 'field `timestamp`: must be a number']
  if (typeof m.source !== 'string') return [m, 'field `source`: must be a string']
  if (!m.payload || typeof m.payload !== 'object' || Array.isArray(m.payload)) return [m, 'field `payload`: must be an object']
  return [m, null]
}

// Outbox drops are logged at most this often, with their count: at tens of thousands of events a second the
// relay's acks trail the outbox, and a line per dropped event was most of the send path's cost.
const DROP_LOG_MS = 10000

class Outbox {
  constructor (maxMessages, maxBytes, log) {
    this.items = [] // {seq, text, bytes}
    this.bytes = 0
    this.maxMessages = maxMessages
    this.maxBytes = maxBytes
    this.dropped = 0
    this.log = log
    this.unlogged = 0
    this.loggedAt = -Infinity
  }

  push (seq, text) {
    const bytes = Buffer.byteLength(text)
    this.items.push({ seq, text, bytes })
    this.bytes += bytes
    let n = 0
    let last = 0
    while (this.items.length > this.maxMessages || this.bytes > this.maxBytes) {
      const old = this.items.shift()
      this.bytes -= old.bytes
      last = old.seq
      n++
    }
    if (n === 0) return
    this.dropped += n
    this.unlogged += n
    const now = Date.now()
    if (now - this.loggedAt >= DROP_LOG_MS) {
      this.log('warn', `outbox full (${this.maxMessages} events / ${this.maxBytes} bytes): dropped the ${this.unlogged} oldest ` +
        `events (up to seq ${last}; ${this.dropped} in all); those not yet acknowledged by the relay cannot be resent ` +
        `if the link drops (raise [bridge] outbox_size for more room); next report in ${DROP_LOG_MS / 1000} s at most`)
      this.unlogged = 0
      this.loggedAt = now
    }
  }

  ackUpTo (seq) {
    let n = 0
    while (n < this.items.length && this.items[n].seq <= seq) this.bytes -= this.items[n++].bytes
    if (n) this.items.splice(0, n)
  }
}

class Link {
  // opts: {url, token, name, adapter, gameVersion, enabledEvents, reconnectDelay, reconnectMaxDelay,
  //        reconnectAttempts (the config's reconnect_attempts: failed dials after which the outage is logged as long; the link never
  //        gives up), outboxSize, outboxBytes, onCommand(type, args) -> Promise<data>, log(level, msg), onWelcome(payload)}
  constructor (opts) {
    this.opts = opts
    this.url = normaliseUrl(opts.url)
    this.instance = crypto.randomBytes(6).toString('hex')
    this.seq = 0
    this.msgCounter = 0
    this.outbox = new Outbox(opts.outboxSize, opts.outboxBytes || 4 * 1024 * 1024, opts.log)
    this.ws = null
    this.welcomed = false
    this.failures = 0
    this.stopped = false
    this.timer = null
    this.watchdog = null
    this.lastHeard = 0
    // Events waiting for the next batch frame (sent at the end of this turn of the event loop, or sooner when
    // the batch is full), and the relay's message limit when it takes batches (1.2), else null.
    this.pending = []
    this.pendingBytes = 0
    this.flushQueued = false
    this.batchMax = null
  }

  envelope (type, id, payload, extra) {
    return { version: PROTOCOL_VERSION, type, id, timestamp: Date.now(), source: 'minecraft', ...extra, payload }
  }

  nextId (prefix) {
    this.msgCounter += 1
    return `${prefix}-${this.instance}-${this.msgCounter}`
  }

  start () {
    this.connect()
  }

  stop () {
    this.stopped = true
    clearTimeout(this.timer)
    clearInterval(this.watchdog)
    if (this.ws) this.ws.terminate()
  }

  // Queues a game event (Property 6: disabled types are never sent, not even queued).
  emitEvent (eventType, data) {
    if (!this.opts.enabledEvents.includes(eventType)) return false
    this.seq += 1
    const seq = this.seq
    const ts = Date.now()
    // Each type numbered too (PROTOCOL.md §4.1 typeSeq): a client taking some types finds its own gaps.
    this.typeSeqs = this.typeSeqs || {}
    const typeSeq = (this.typeSeqs[eventType] = (this.typeSeqs[eventType] || 0) + 1)
    const msg = this.envelope('event', `${this.opts.name}-${this.instance}-${seq}`, { eventType, timestamp: ts, typeSeq, data }, { seq })
    const text = JSON.stringify(msg)
    this.outbox.push(seq, text)
    if (this.welcomed) this.sendEvent(text)
    return true
  }

  send (text) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(text)
  }

  // An event to a 1.2 relay waits for the end of this turn of the event loop, so the events a tick emits go
  // in one `batch` frame (PROTOCOL.md §2.2) without waiting for a timer: one frame per event through every
  // hop was where 50 000 events/s backed up. A full batch goes at once. A 1.0/1.1 relay gets single frames.
  sendEvent (text) {
    const max = this.batchMax
    if (!max) return this.send(text)
    const bytes = Buffer.byteLength(text) + 1
    if (this.pending.length > 0 && (this.pending.length >= MAX_BATCH || this.pendingBytes + bytes + BATCH_OVERHEAD > max)) this.flush()
    this.pending.push(text)
    this.pendingBytes += bytes
    if (!this.flushQueued) {
      this.flushQueued = true
      setImmediate(() => {
        this.flushQueued = false
        this.flush()
      })
    }
  }

  // Sends the waiting events: one alone as itself, more as a batch (their texts spliced in, not re-encoded).
  flush () {
    const p = this.pending
    if (p.length === 0) return
    this.pending = []
    this.pendingBytes = 0
    if (!this.welcomed) return // the link dropped: the outbox resends them after the next welcome
    if (p.length === 1) return this.send(p[0])
    this.send(`{"version":"${PROTOCOL_VERSION}","type":"batch","id":"${this.nextId('b')}","timestamp":${Date.now()},` +
      `"source":"minecraft","payload":{"messages":[${p.join(',')}]}}`)
  }

  connect () {
    if (this.stopped) return
    const log = this.opts.log
    const ws = new WebSocket(this.url, {
      headers: { Authorization: `Bearer ${this.opts.token}` },
      maxPayload: MAX_INBOUND_BYTES,
      handshakeTimeout: 10000
    })
    this.ws = ws
    this.welcomed = false
    this.pending = []
    this.pendingBytes = 0
    ws.on('unexpected-response', (req, res) => {
      const code = res.statusCode
      let body = ''
      res.on('data', (c) => { if (body.length < 512) body += c })
      res.on('end', () => {
        this.problem('error', `relay refused the link: HTTP ${code}${code === 401 ? ' (AUTH_FAILED: check the token)' : ''} ${body.trim()}`)
      })
      ws.terminate()
    })
    ws.on('open', () => {
      ws.send(JSON.stringify(this.envelope('hello', this.nextId('h'), {
        name: this.opts.name,
        instance: this.instance,
        adapter: this.opts.adapter,
        gameVersion: this.opts.gameVersion
      })))
    })
    ws.on('ping', () => { this.lastHeard = Date.now() })
    ws.on('message', (raw, isBinary) => {
      this.lastHeard = Date.now()
      if (isBinary) { log('warn', 'ignored a binary frame from the relay'); return }
      this.onMessage(raw.toString('utf8'))
    })
    ws.on('error', (e) => this.problem('warn', `relay link error: ${e.message}`))
    ws.on('close', (code, reason) => {
      if (this.ws !== ws) return
      clearInterval(this.watchdog)
      const wasWelcomed = this.welcomed
      this.welcomed = false
      this.ws = null
      if (this.stopped) return
      if (wasWelcomed) {
        this.failures = 0
        log('warn', `relay link lost (${code} ${String(reason || '')}); reconnecting with backoff ` +
          `(${this.opts.reconnectDelay} ms doubling to ${this.maxDelay()} ms, forever); ${this.outbox.items.length} events held`)
      }
      this.failures += 1
      const longAfter = this.opts.reconnectAttempts > 0 ? this.opts.reconnectAttempts : LONG_OUTAGE_ATTEMPTS
      if (this.failures === longAfter + 1) {
        log('error', `relay still unreachable after ${longAfter} attempts; retrying forever every ` +
          `${this.maxDelay()} ms at most (${this.outbox.items.length} events held in the outbox)`)
      }
      const base = Math.min(this.maxDelay(), this.opts.reconnectDelay * 2 ** Math.min(this.failures - 1, 16))
      const delay = Math.round(base / 2 + Math.random() * base / 2)
      log('debug', `relay dial failed (${code} ${String(reason || '')}); redial ${this.failures} in ${delay} ms`)
      this.timer = setTimeout(() => this.connect(), delay)
    })
  }

  // Logs a dial problem once while it stays the same (a relay down for an hour is one line, not one per attempt).
  problem (level, msg) {
    const key = msg.replace(/\d+/g, '#')
    if (key === this.lastProblem) return this.opts.log('debug', msg)
    this.lastProblem = key
    this.opts.log(level, msg)
  }

  // The frames one message goes out as: itself, or chunk messages when it is over the relay's limit and the
  // relay speaks 1.1 (a 1.0 relay refuses it with the limit named, as before).
  frames (msg) {
    const text = JSON.stringify(msg)
    const max = this.maxMessage
    if (!max || Buffer.byteLength(text) <= max) return [text]
    const budget = Math.max(64, max - CHUNK_OVERHEAD - 2 * Buffer.byteLength(msg.id))
    const parts = []
    let start = 0
    let size = 0
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i)
      // Bytes this UTF-16 unit takes inside a JSON string (a surrogate pair counts 2 + 2 = 4).
      const n = code === 34 || code === 92 ? 2 : code < 0x20 ? 6 : code < 0x80 ? 1 : code < 0x800 ? 2 : (code >= 0xd800 && code <= 0xdfff) ? 2 : 3
      const low = code >= 0xdc00 && code <= 0xdfff
      if (size + n > budget && i > start && !low) {
        parts.push(text.slice(start, i))
        start = i
        size = 0
      }
      size += n
    }
    parts.push(text.slice(start))
    return parts.map((data, index) => JSON.stringify(this.envelope('chunk', msg.id, { index, count: parts.length, data })))
  }

  maxDelay () {
    return Math.max(1, this.opts.reconnectMaxDelay || MAX_BACKOFF_MS)
  }

  refuse (id, message, details) {
    this.send(JSON.stringify(this.envelope('error', id || '', { code: 'SCHEMA_ERROR', message, details: details || {} })))
  }

  onMessage (text) {
    const log = this.opts.log
    const [m, problem] = parseEnvelope(text)
    if (problem) {
      log('warn', `refused a message from the relay: ${problem}`)
      if (m && m.type !== 'error') this.refuse(typeof m.id === 'string' ? m.id : '', problem)
      return
    }
    if (!m.version.startsWith('1.')) {
      // Graceful degradation: a newer major version is handled as 1.0 when it validates as such.
      log('warn', `relay speaks protocol ${m.version}, this adapter ${PROTOCOL_VERSION}: handling it as ${PROTOCOL_VERSION}`)
    }
    switch (m.type) {
      case 'welcome': return this.onWelcome(m.payload, m.version)
      case 'ack': {
        const seq = m.payload.seq
        if (!Number.isInteger(seq)) return this.refuse(m.id, 'field `payload.seq`: must be an integer', { field: 'payload.seq' })
        this.outbox.ackUpTo(seq)
        return
      }
      case 'command':
      case 'query': return this.onCommand(m)
      case 'heartbeat': return
      case 'notice': log('info', `relay notice: ${JSON.stringify(m.payload).slice(0, 300)}`); return
      case 'error':
        if (m.payload.details && m.payload.details.reason === 'rate_limited') return this.rateLimited(m.payload)
        log('warn', `relay error for ${m.id}: ${JSON.stringify(m.payload).slice(0, 500)}`)
        return
      default: return this.refuse(m.id, `type ${m.type} is not sent to game adapters`)
    }
  }

  // Over the relay's --game-rate each event is refused with its own error: counted, and logged at most every
  // DROP_LOG_MS (a line per event doubled the cost of a game already over its budget).
  rateLimited (p) {
    this.limitedUnlogged = (this.limitedUnlogged || 0) + 1
    const now = Date.now()
    if (this.limitedLoggedAt !== undefined && now - this.limitedLoggedAt < DROP_LOG_MS) return
    this.opts.log('warn', `the relay refused ${this.limitedUnlogged} messages as rate limited (${String(p.message).slice(0, 300)}); ` +
      `refused events are lost and the MCP servers are told; next report in ${DROP_LOG_MS / 1000} s at most`)
    this.limitedUnlogged = 0
    this.limitedLoggedAt = now
  }

  onWelcome (p, version) {
    const v = /^(\d+)\.(\d+)$/.exec(version || '')
    const chunks = v && (Number(v[1]) > 1 || (Number(v[1]) === 1 && Number(v[2]) >= 1))
    this.maxMessage = chunks ? (Number.isInteger(p.maxMessageBytes) && p.maxMessageBytes > 0 ? p.maxMessageBytes : 65536) : null
    const batches = v && (Number(v[1]) > 1 || (Number(v[1]) === 1 && Number(v[2]) >= 2))
    this.batchMax = batches ? this.maxMessage : null
    const lastSeq = Number.isInteger(p.lastSeq) ? p.lastSeq : 0
    this.outbox.ackUpTo(lastSeq)
    this.welcomed = true
    this.failures = 0
    this.lastProblem = null
    const interval = Number.isInteger(p.heartbeatInterval) && p.heartbeatInterval > 0 ? p.heartbeatInterval : 15000
    const ws = this.ws
    this.lastHeard = Date.now()
    clearInterval(this.watchdog)
    this.watchdog = setInterval(() => {
      if (ws !== this.ws) return clearInterval(this.watchdog)
      if (Date.now() - this.lastHeard > SILENT_INTERVALS * interval) {
        this.opts.log('warn', `relay silent for over ${SILENT_INTERVALS} heartbeats (${SILENT_INTERVALS * interval} ms): dropping the link`)
        ws.terminate()
      }
    }, Math.max(10, Math.floor(interval / 2)))
    this.opts.log('info', `linked to relay (epoch ${p.epoch}, relay has events up to ${lastSeq}); resending ${this.outbox.items.length}`)
    this.pending = []
    this.pendingBytes = 0
    for (const item of this.outbox.items) this.sendEvent(item.text)
    this.flush()
    if (this.opts.onWelcome) this.opts.onWelcome(p)
  }

  async onCommand (m) {
    const p = m.payload
    if (typeof p.command !== 'string' || (p.args !== undefined && (typeof p.args !== 'object' || p.args === null || Array.isArray(p.args)))) {
      this.opts.log('warn', `refused command ${m.id}: payload needs command (string) and args (object)`)
      return this.refuse(m.id, 'field `payload.command`/`payload.args`: command must be a string and args an object', { field: 'payload' })
    }
    const ws = this.ws
    let payload
    try {
      const data = await this.opts.onCommand(p.command, p.args || {})
      payload = { success: true, data }
    } catch (e) {
      const code = e.code || 'SERVER_ERROR'
      if (code === 'SERVER_ERROR') this.opts.log('error', `command ${p.command} ${JSON.stringify(p.args || {}).slice(0, 300)} failed: ${e.stack || e.message}`)
      payload = { success: false, error: { code, message: e.message, details: e.details || {} } }
    }
    // The answer goes back on the link the command came from; if it dropped, the relay already answered.
    if (ws && ws === this.ws && ws.readyState === WebSocket.OPEN) {
      for (const frame of this.frames(this.envelope('response', m.id, payload))) ws.send(frame)
    }
  }
}

module.exports = { Link, Outbox, parseEnvelope, normaliseUrl, PROTOCOL_VERSION, MAX_BATCH }
