//! The MCP tools: the eight of docs/minecraft.md (each one command type of PROTOCOL.md §4.2) and `status`.

pub mod args;
pub mod commands;
pub mod marked;
pub mod queries;
pub mod status;
pub mod world_pages;

use crate::client::RelayLink;
use bridge_core::{ToolError, ToolSpec};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// What every tool handler needs. Cheap to clone.
#[derive(Clone)]
pub struct Ctx {
    pub link: RelayLink,
    /// Vanilla mode: commands answered over RCON instead of through the relay (crate::vanilla).
    pub vanilla: Option<crate::vanilla::Vanilla>,
    /// `get_world_info` answers whose later pages are still to be read.
    pub world: world_pages::WorldPages,
}

impl Ctx {
    /// One command, its answer read into `T` (a game answering outside PROTOCOL.md's models is an error that
    /// says which field).
    pub async fn call<T: DeserializeOwned>(
        &self,
        command: &str,
        args: Value,
        game: Option<String>,
    ) -> Result<T, ToolError> {
        let args = match args {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let data = match &self.vanilla {
            Some(v) => v.call(command, args, game).await?,
            None => self.link.call(command, args, game).await?,
        };
        serde_json::from_value(data).map_err(|e| {
            ToolError::internal(format!(
                "the game's answer to {command} does not fit the protocol: {e}"
            ))
            .with_hint(
                "the game adapter and this bridge disagree on PROTOCOL.md; update the adapter",
            )
            .with_details(json!({"command": command}))
            .with_code_name("SCHEMA_ERROR")
        })
    }

    /// How long a tool may take: the command timeout plus a margin for the relay's own.
    pub fn budget(&self) -> std::time::Duration {
        self.link.settings().command_timeout + std::time::Duration::from_secs(5)
    }
}

/// Every tool, in the order `tools/list` shows them.
pub fn specs(ctx: &Ctx) -> Vec<ToolSpec> {
    let mut all = commands::specs(ctx);
    all.extend(queries::specs(ctx));
    all.push(status::spec(ctx));
    all
}
