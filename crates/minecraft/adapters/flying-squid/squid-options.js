'use strict'
// The flying-squid settings a bridged server starts with: a small superflat 1.21.4 world on loopback, offline
// mode, and the bridge plugin beside this file. server.js (the tests' and players' launcher) and the real-stack
// bench's driver (bench/minecraft/squid-driver.js) both start from these.

const path = require('path')

function squidOptions ({ port, motd, footer, mcpBridge }) {
  return {
    motd,
    port,
    host: '127.0.0.1',
    'max-players': 20,
    maxPlayers: 20,
    'online-mode': false,
    logging: false,
    gameMode: 0,
    difficulty: 1,
    worldFolder: undefined,
    generation: { name: 'superflat', options: { worldHeight: 80 } },
    kickTimeout: 10000,
    plugins: { [path.join(__dirname, 'plugin.js')]: {} },
    modpe: false,
    'view-distance': 2,
    'player-list-text': { header: 'mcp-bridges', footer },
    'everybody-op': false,
    'max-entities': 100,
    version: '1.21.4',
    mcpBridge
  }
}

module.exports = { squidOptions }
