//! The MCP tools. Each module declares its tools on the core's `ToolSpec` API; all share [`State`].

mod computers;
pub(crate) mod fs;
mod lua;
mod peripheral;
mod probe;
mod redstone;
mod turtle;

use crate::computer::Computer;
use crate::state::State;
use bridge_core::{BridgeBuilder, ToolError};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;

pub fn register(b: &mut BridgeBuilder, state: &Arc<State>) {
    for spec in [
        probe::specs(state),
        computers::specs(state),
        lua::specs(state),
        fs::specs(state),
    ]
    .into_iter()
    .chain([
        turtle::specs(state),
        peripheral::specs(state),
        redstone::specs(state),
    ])
    .flatten()
    {
        b.tool(spec);
    }
}

/// Reads a computer's reply into the shape the client promises; anything else is a client bug.
fn reply<T: DeserializeOwned>(computer: &Computer, value: Value) -> Result<T, ToolError> {
    serde_json::from_value(value).map_err(|e| {
        ToolError::internal(format!(
            "computer {} sent an unexpected reply: {e}",
            computer.id()
        ))
        .with_hint(
            "reinstall the client on that computer (wget run http://<bridge>:<port>/install.lua)",
        )
    })
}
