//! VSC-Bridge's file protocol under `<workspace>/.vsc-bridge/`: the client (the MCP server's side) and the host
//! (the extension's side, headless). File names, JSON fields and job ids are the extension's, byte for byte.

pub mod client;
pub mod host;
pub mod ids;
pub mod io;
mod watch;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub const BRIDGE_DIR: &str = ".vsc-bridge";
pub const EXECUTE_DIR: &str = "execute";
pub const HOST_JSON: &str = "host.json";
pub const HOST_LOCK: &str = "host.lock";
pub const COMMAND_JSON: &str = "command.json";
pub const CLAIMED_JSON: &str = "claimed.json";
pub const RESPONSE_JSON: &str = "response.json";
pub const ERROR_JSON: &str = "error.json";
pub const DATA_JSON: &str = "data.json";
pub const EVENTS_NDJSON: &str = "events.ndjson";
pub const CANCEL: &str = "cancel";
pub const DONE: &str = "done";
pub const DLQ: &str = "dlq";
pub const KEEP: &str = "keep";

/// Walks up from `workspace` to the first `.vsc-bridge/` holding both `host.json` and `execute/`.
pub fn find_bridge_root(workspace: &Path) -> Option<PathBuf> {
    let mut dir = Some(workspace);
    while let Some(d) = dir {
        let root = d.join(BRIDGE_DIR);
        if root.join(HOST_JSON).is_file() && root.join(EXECUTE_DIR).is_dir() {
            return Some(root);
        }
        dir = d.parent();
    }
    None
}

/// How long ago `host.json` was touched (the extension's heartbeat).
pub fn host_json_age(root: &Path) -> Option<Duration> {
    let modified = std::fs::metadata(root.join(HOST_JSON))
        .ok()?
        .modified()
        .ok()?;
    Some(modified.elapsed().unwrap_or(Duration::ZERO))
}
