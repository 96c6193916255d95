//! The MCP tools: strict arguments, one Remote API method each, no passthrough of other methods. Running
//! scripts, which the Remote API cannot, goes through the in-game helper (`helper`): four fixed operations
//! on scripts already in the game, never code sent by the agent.

pub mod args;
pub mod definitions;
pub mod files;
pub mod game;
pub mod helper;
pub mod page;
pub mod pins;
pub mod reply;

use crate::link::GameLink;
use crate::wire::Method;
use bridge_core::events::EventHub;
use bridge_core::{ErrorCode, ToolError, ToolSpec};
use serde_json::{Map, Value};
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
    /// Files pinned for paging, and sizes seen (`pins`).
    pub pins: pins::Pins,
}

/// Extra deadline for moving `bytes` through the game: it was seen to take 5.9 s to send 1 MB, so 10 s per MB.
pub fn transfer_allowance(bytes: usize) -> Duration {
    Duration::from_micros(u64::try_from(bytes).unwrap_or(u64::MAX).saturating_mul(10))
}

/// The words of the core's link error for a frame over the size limit (`bridge_core::link`).
const OVERSIZED_FRAME: &str = "-byte frame; the limit is";

impl Ctx {
    /// One request to the game, its terse errors explained (`reply::explain`), and an answer too large for
    /// the bridge said as such rather than as a mere disconnect.
    pub async fn call(
        &self,
        method: Method,
        params: Map<String, Value>,
    ) -> Result<Value, ToolError> {
        self.link
            .call(method, params)
            .await
            .map_err(|e| reply::explain(method, oversized(method, e)))
    }

    /// [`Self::call`] with a deadline that grows with the bytes expected to move (sent, or last seen).
    pub async fn call_sized(
        &self,
        method: Method,
        params: Map<String, Value>,
        expected_bytes: Option<usize>,
    ) -> Result<Value, ToolError> {
        let Some(bytes) = expected_bytes else {
            return self.call(method, params).await;
        };
        let timeout = self.link.config().rpc_timeout + transfer_allowance(bytes);
        self.link
            .call_within(method, params, timeout)
            .await
            .map_err(|e| reply::explain(method, oversized(method, e)))
    }

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
    all.extend(helper::specs(ctx));
    all
}

/// The game's answer was larger than `MAX_GAME_FRAME_BYTES`: the link closed the connection, and the call
/// failed with it. Tell the agent what was too large and what to ask for instead.
fn oversized(method: Method, e: ToolError) -> ToolError {
    if e.code() != ErrorCode::Disconnected || !e.message().contains(OVERSIZED_FRAME) {
        return e;
    }
    let details = e.details().clone();
    ToolError::too_large(format!(
        "the game's answer to {} was larger than the bridge accepts, so the bridge closed the game \
         connection: {}",
        method.name(),
        e.message()
    ))
    .with_hint(format!(
        "ask for less: read_file instead of get_all_files on a server with very large files; a save this large \
         cannot come through the bridge (export it in the game: Options → Export Game). The limit is {} MiB. \
         Then reconnect the game (press Connect in Options → Remote API, or wait for its Reconnection delay)",
        crate::MAX_GAME_FRAME_BYTES >> 20
    ))
    .with_details(details)
}

/// The tool that sends `method`.
pub fn tool_for(method: Method) -> &'static str {
    match method {
        Method::PushFile => "write_file",
        Method::GetFile => "read_file",
        Method::DeleteFile => "delete_file",
        Method::GetFileNames => "list_files",
        Method::GetAllFiles => "get_all_files",
        Method::CalculateRam => "calculate_ram",
        Method::GetDefinitionFile => "get_netscript_definitions",
        Method::GetAllServers => "get_all_servers",
        Method::GetSaveFile => "get_save_file",
        Method::GetFileMetadata => "get_file_metadata",
        Method::GetAllFileMetadata => "get_all_file_metadata",
    }
}
