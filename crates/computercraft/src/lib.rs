//! The ComputerCraft bridge: CC:Tweaked computers link to it over WebSocket (they can only dial out), and MCP
//! clients reach them through its tools.
//!
//! The Lua client that runs in-game lives in `lua/` and is served by the link listener, so a player installs
//! it with one `wget run`. See README.md for setup and `protocol` for the link protocol.

pub mod assets;
pub mod b64;
pub mod computer;
pub mod config;
pub mod protocol;
mod reassembly;
pub mod registry;
mod server;
mod session;
pub mod state;
mod tools;
pub mod untrusted;

pub use config::{CcArgs, LinkArgs, LinkConfig};
pub use server::{CcError, ComputerCraft, Running, start};
