//! VSC-Bridge's file protocol under `<workspace>/.vsc-bridge/`: the client (the MCP server's side) and the host
//! (the extension's side, headless). File names, JSON fields and job ids are the extension's, byte for byte.

pub mod client;
pub mod host;
pub mod ids;
pub mod io;
pub mod trust;
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

/// The bridge directory: the one given (`--debug-bridge-dir`), else the workspace's own `.vsc-bridge/`. Never a
/// parent's: a `.vsc-bridge/` planted in `/tmp` would otherwise answer for every workspace under it.
pub fn bridge_root(workspace: &Path, explicit: Option<&Path>) -> PathBuf {
    match explicit {
        Some(dir) if dir.is_absolute() => dir.to_path_buf(),
        Some(dir) => workspace.join(dir),
        None => workspace.join(BRIDGE_DIR),
    }
}

/// This process's pid namespace (`pid:[4026531836]`): a pid read from a file proves something about `/proc`
/// only when its writer was in the same one.
pub fn pid_ns() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|p| p.display().to_string())
}

/// Whether the pid `pid` written by a process of pid namespace `ns` is gone: only answerable in our namespace.
pub fn pid_gone(pid: u64, ns: Option<&str>) -> bool {
    let ours = pid_ns();
    ns.is_some() && ns == ours.as_deref() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// How long ago `host.json` was touched (the extension's heartbeat); a link is not followed.
pub fn host_json_age(root: &Path) -> Option<Duration> {
    let modified = std::fs::symlink_metadata(root.join(HOST_JSON))
        .ok()
        .filter(std::fs::Metadata::is_file)?
        .modified()
        .ok()?;
    Some(modified.elapsed().unwrap_or(Duration::ZERO))
}
