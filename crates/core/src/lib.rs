//! The shared core of every mcp-bridges bridge: MCP hosting (stdio and Streamable HTTP, both protocol eras),
//! the tool and error model, event streams, and the toolkit for links to live systems.
//!
//! Bridges describe tools, resources and events through this crate's own types; rmcp stays behind this
//! boundary so an SDK upgrade touches one crate.

pub mod auth;
pub mod bridge;
pub mod config;
pub mod error;
pub mod events;
pub mod json_peek;
pub mod json_size;
pub mod link;
pub mod mount;
pub mod net;
pub mod resource;
mod schema;
pub mod serve;
pub mod text;
pub mod tool;
pub mod untrusted;

pub use bridge::{Bridge, BridgeBuilder, BridgeEntry, BridgeEnv, BridgeError};
pub use error::{ErrorCode, ToolError};
pub use mount::Mount;
pub use tool::{Content, NoArgs, Rendered, ToolCtx, ToolSpec, Validate, WithContent, check};

/// ARCHITECTURE.md, included so `cargo test --doc` compiles its Rust examples against this crate's real API.
#[cfg(doctest)]
#[doc = include_str!("../../../ARCHITECTURE.md")]
pub struct ArchitectureDoc;
