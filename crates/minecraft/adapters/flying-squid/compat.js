'use strict'
// Fixes for flying-squid 1.12.0 on Minecraft 1.21.4 that the bridge's users would otherwise trip over.

// flying-squid writes `entity_teleport` in its pre-1.21.2 shape (no dx/dy/dz, no `flags`); the 1.21.4 packet
// has them, the serializer throws on the missing `flags` bitfield, and flying-squid then disconnects the
// player the packet was for. It happens whenever an entity near another player moves more than a few blocks
// in one update: a teleport, a falling dropped item. The missing fields are filled with "absolute, no
// velocity"; protocols without them ignore extra fields.
function patchEntityTeleport (player) {
  const client = player._client
  const write = client.write.bind(client)
  client.write = (name, params) => {
    if (name === 'entity_teleport' && params && params.flags === undefined) {
      params = { dx: 0, dy: 0, dz: 0, flags: { _value: 0 }, ...params }
    }
    return write(name, params)
  }
}

module.exports = { patchEntityTeleport }
