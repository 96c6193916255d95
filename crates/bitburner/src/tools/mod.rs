//! The MCP tools: strict arguments, one Remote API method each, no passthrough of other methods.
//! Running scripts is deliberately absent: the game's Remote API cannot, and a relay through an in-game
//! daemon would hand an agent arbitrary code execution inside the player's save.

pub mod args;
pub mod files;
pub mod game;

use crate::link::GameLink;
use bridge_core::ToolSpec;
use bridge_core::events::EventHub;
use std::path::PathBuf;
use std::time::Duration;

/// Limits the tools enforce before sending anything.
#[derive(Debug, Clone)]
pub struct Limits {
    pub file_write_max_bytes: usize,
    /// Where `get_save_file` may write; `None` turns it off.
    pub save_dir: Option<PathBuf>,
}

/// What every tool handler needs. Cheap to clone.
#[derive(Clone)]
pub struct Ctx {
    pub link: GameLink,
    /// For `resources/updated` after a tool changed a file.
    pub hub: EventHub,
    pub limits: Limits,
}

impl Ctx {
    /// A tool's deadline: room for waiting for the game, `requests` game requests, and a margin, never below
    /// the core's default, so the core's timer does not cut a call the link would still finish.
    pub fn budget(&self, requests: u32, per_request: Duration) -> Duration {
        let config = self.link.config();
        let needed = config.connect_wait + per_request * requests + Duration::from_secs(5);
        needed.max(bridge_core::tool::DEFAULT_TOOL_TIMEOUT)
    }
}

/// Every tool, in the order `tools/list` shows them.
pub fn specs(ctx: &Ctx) -> Vec<ToolSpec> {
    let mut all = files::specs(ctx);
    all.extend(game::specs(ctx));
    all
}
