//! The bridge's flags.

use bridge_core::config::{self, Unit};
use std::path::PathBuf;
use std::time::Duration;

/// `(variable, older name)`: VSC-Bridge's manifest variable and the names from before one rule named every
/// variable (bridge_core::config).
pub const ENV_ALIASES: &[(&str, &str)] = &[
    ("DEBUG_TIMEOUT", "DEBUG_TIMEOUT_MS"),
    ("DEBUG_MANIFEST", "VSC_BRIDGE_MANIFEST_PATH"),
    ("DEBUG_CAPACITY", "DEBUG_HOST_CAPACITY"),
    ("DEBUG_HEARTBEAT", "DEBUG_HOST_HEARTBEAT_MS"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// `vscode` when the workspace's `.vsc-bridge/` is safe and its `host.json` fresh, else `dap`.
    Auto,
    /// The VSC-Bridge extension's file protocol (or `mcp-bridges debug host`).
    Vscode,
    /// Debug adapters run by the bridge itself (debugpy, lldb-dap, js-debug).
    Dap,
}

/// The debug bridge's own flags (beside the MCP ones).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Debug")]
pub struct DebugArgs {
    /// The workspace (agents pass `--debug-workspace $(pwd)`, or `-w`); relative tool paths are resolved against it.
    #[arg(
        long = "debug-workspace",
        alias = "workspace",
        short = 'w',
        env = "DEBUG_WORKSPACE",
        default_value = ".",
        global = true
    )]
    pub workspace: PathBuf,

    /// The bridge directory of the file protocol; the workspace's own `.vsc-bridge/` by default (never a
    /// parent's). It must be owned by this user and writable by no one else, or it is refused.
    #[arg(
        long = "debug-bridge-dir",
        alias = "bridge-dir",
        env = "DEBUG_BRIDGE_DIR",
        global = true
    )]
    pub bridge_dir: Option<PathBuf>,

    /// The largest `data.json` (and `response.json`/`error.json`) read from the host, in bytes; larger answers
    /// are E_DATA_TOO_LARGE.
    #[arg(long = "debug-max-data-bytes", alias = "max-data-bytes", env = "DEBUG_MAX_DATA_BYTES", default_value = "16777216",
        value_parser = clap::value_parser!(u64).range(1024..=(1u64 << 32)), global = true)]
    pub max_data_bytes: u64,

    /// Let `debug_start` run programs anywhere (and attach to processes); by default only programs inside the
    /// workspace or a --debug-launch-allow directory are launched.
    #[arg(
        long = "debug-allow-launch-anywhere",
        alias = "allow-launch-anywhere",
        env = "DEBUG_ALLOW_LAUNCH_ANYWHERE",
        global = true
    )]
    pub allow_launch_anywhere: bool,

    /// A directory (besides the workspace) whose programs `debug_start` may launch; repeatable.
    #[arg(
        long = "debug-launch-allow",
        alias = "launch-allow",
        env = "DEBUG_LAUNCH_ALLOW",
        value_delimiter = ',',
        global = true
    )]
    pub launch_allow: Vec<PathBuf>,

    /// An environment variable passed to debuggers and readable as `${env:NAME}`, besides PATH, HOME, LANG,
    /// LC_ALL, LC_CTYPE, TERM, TMPDIR, USER, LOGNAME, TZ; repeatable.
    #[arg(
        long = "debug-env-allow",
        alias = "env-allow",
        env = "DEBUG_ENV_ALLOW",
        value_delimiter = ',',
        global = true
    )]
    pub env_allow: Vec<String>,

    /// Which backend runs the tools.
    #[arg(
        long = "debug-backend",
        alias = "backend",
        env = "DEBUG_BACKEND",
        value_enum,
        default_value = "auto"
    )]
    pub backend: BackendChoice,

    /// Default tool timeout, for tools whose metadata sets none (VSC-Bridge's `--timeout`, still read; a bare number is
    /// milliseconds, as there).
    #[arg(value_name = "DURATION", long = "debug-timeout", alias = "timeout", short = 't', env = "DEBUG_TIMEOUT", default_value = "30s",
        value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(3600), Unit::Millis))]
    pub timeout: Duration,

    /// A VSC-Bridge `manifest.json` (v2), or a folder of `*.meta.yaml` files, instead of the built-in catalog.
    #[arg(long = "debug-manifest", alias = "manifest", env = "DEBUG_MANIFEST")]
    pub manifest: Option<PathBuf>,

    /// The Python that runs debugpy (`python -m debugpy.adapter`); the first `python3` on PATH by default.
    #[arg(
        long = "debug-python",
        alias = "python",
        env = "DEBUG_PYTHON",
        global = true
    )]
    pub python: Option<PathBuf>,

    /// The lldb-dap binary; `lldb-dap`, `lldb-dap-22`, `lldb-dap-19` on PATH by default.
    #[arg(
        long = "debug-lldb-dap",
        alias = "lldb-dap",
        env = "DEBUG_LLDB_DAP",
        global = true
    )]
    pub lldb_dap: Option<PathBuf>,

    /// Debug sessions live at once on the dap backend; a `debug_start` beyond is refused (E_TOO_MANY_SESSIONS).
    // Its own id: the MCP flags (flattened beside these) already have a `max_sessions` (--mcp-max-sessions).
    #[arg(id = "debug_max_sessions", long = "debug-max-sessions", alias = "max-sessions", env = "DEBUG_MAX_SESSIONS", default_value = "8",
        value_parser = config::ranged(1usize, 64), global = true)]
    pub max_sessions: usize,

    /// js-debug's DAP server script (`vsDebugServer.js` / `dapDebugServer.js`), run with `node`, for
    /// `pwa-node`/`node` launches; without it those launches answer E_ADAPTER_NOT_FOUND.
    #[arg(
        long = "debug-js-debug",
        alias = "js-debug",
        env = "DEBUG_JS_DEBUG",
        global = true
    )]
    pub js_debug: Option<PathBuf>,
}

/// `mcp-bridges debug [host]`.
#[derive(Debug, Clone, clap::Args)]
pub struct DebugCommand {
    #[command(flatten)]
    pub mcp: bridge_core::serve::McpArgs,
    #[command(flatten)]
    pub debug: DebugArgs,
    /// Without a command: serve MCP. `host`: serve the file protocol's host side instead.
    #[command(subcommand)]
    pub sub: Option<DebugSub>,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum DebugSub {
    /// The VSC-Bridge extension's side of `.vsc-bridge/`, headless: runs jobs on real debuggers (dap backend).
    Host(HostArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct HostArgs {
    /// Jobs run at once; more are refused with E_CAPACITY.
    #[arg(long, env = "DEBUG_CAPACITY", default_value = "10", value_parser = config::ranged(1usize, 10_000))]
    pub capacity: usize,
    /// Heartbeat interval of host.json (a bare number is milliseconds, the older form).
    #[arg(value_name = "DURATION", long, env = "DEBUG_HEARTBEAT", default_value = "5s",
        value_parser = config::duration(Duration::from_millis(10), Duration::from_secs(60), Unit::Millis))]
    pub heartbeat: Duration,
}

#[cfg(test)]
mod tests {
    /// clap's own checks (unique argument ids among the flattened MCP and debug flags, ...), which otherwise
    /// run only when a debug build starts and panics.
    #[test]
    fn the_debug_command_passes_clap_checks() {
        use clap::Args;
        super::DebugCommand::augment_args(clap::Command::new("debug")).debug_assert();
    }
}
