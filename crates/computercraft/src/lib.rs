//! The ComputerCraft bridge: CC:Tweaked computers link to it over WebSocket (they can only dial out), and MCP
//! clients reach them through its tools.
//!
//! The Lua client that runs in-game lives in `lua/` and is served by the link listener, so a player installs
//! it with one `wget run`.

pub mod b64;
pub mod protocol;
