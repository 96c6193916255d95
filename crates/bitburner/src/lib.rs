//! The Bitburner bridge: the game's Remote API as MCP tools.
//!
//! The game is the WebSocket client and only answers; this bridge listens, sends every request, and times
//! each one out itself (`reference/bitburner.md`).

pub mod fake_game;
pub mod path;
pub mod wire;
