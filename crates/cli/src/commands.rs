//! The commands that are not MCP servers, beside the bridges' table: they serve no tools, so `serve` cannot
//! mount them. Each runs until its work is done or its shutdown token is cancelled; [`Command::run`] makes
//! that token, with the core's signal watcher, in this one place for all of them (the bridges' MCP serving
//! gets its own from the core's serving loop, with the same watcher).

use bridge_bitburner::{BitburnerCommand, GameArgs};
use bridge_core::BridgeError;
use bridge_core::serve::{LogFormat, McpArgs};
use bridge_debug::{DebugArgs, HostArgs};
use bridge_minecraft::RelayCommand;
use tokio_util::sync::CancellationToken;

/// THE table of top-level commands that are not bridges. Adding one is a variant here, its name in
/// [`NAMES`] and its arm in [`Command::run`].
#[derive(clap::Subcommand)]
pub enum TopLevel {
    /// Minecraft relay alone: game adapters and MCP servers dial it (no MCP tools; see PROTOCOL.md).
    #[command(name = "minecraft-relay")]
    MinecraftRelay(RelayCommand),
}

/// The names of the commands that are not bridges, as a user might give them to `serve --bridge`: the
/// top-level ones and the shorthand of `debug host`.
pub const NAMES: &[&str] = &["minecraft-relay", "debug-host"];

/// A command that is not an MCP server: a top-level one, or a bridge's own (`debug host`, `bitburner push`,
/// `pull` and `sync`), which the binary takes out of the bridge's subcommand.
pub enum Command {
    MinecraftRelay(RelayCommand),
    DebugHost {
        mcp: McpArgs,
        debug: DebugArgs,
        host: HostArgs,
    },
    Bitburner {
        mcp: McpArgs,
        game: GameArgs,
        command: BitburnerCommand,
    },
}

impl From<TopLevel> for Command {
    fn from(top: TopLevel) -> Self {
        match top {
            TopLevel::MinecraftRelay(command) => Self::MinecraftRelay(command),
        }
    }
}

impl Command {
    pub fn log_format(&self) -> LogFormat {
        match self {
            Self::MinecraftRelay(command) => command.mcp.log_format,
            Self::DebugHost { mcp, .. } | Self::Bitburner { mcp, .. } => mcp.log_format,
        }
    }

    /// Runs the command until it is done or SIGINT/SIGTERM: the one shutdown path of every command that is
    /// not an MCP server.
    pub async fn run(self) -> Result<(), BridgeError> {
        let shutdown = bridge_core::serve::shutdown_on_signals();
        match self {
            Self::MinecraftRelay(command) => minecraft_relay(command, shutdown).await,
            Self::DebugHost { debug, host, .. } => {
                bridge_debug::fsbridge::host::run_until(debug, host, shutdown).await
            }
            Self::Bitburner { game, command, .. } => {
                bridge_bitburner::run_command(&game, &command, shutdown).await
            }
        }
    }
}

/// `mcp-bridges minecraft-relay`: the relay until `shutdown`, then its drain.
async fn minecraft_relay(
    command: RelayCommand,
    shutdown: CancellationToken,
) -> Result<(), BridgeError> {
    use bridge_minecraft::relay;
    let settings = relay::settings(&command.relay, Vec::new())?;
    if settings.mcp_tokens.is_empty() {
        tracing::warn!(
            "MINECRAFT_MCP_AUTH_TOKENS is empty: no MCP server can connect to this relay"
        );
    }
    let handle = relay::start(&command.relay, settings, shutdown).await?;
    handle
        .task
        .await
        .map_err(|e| format!("the relay task failed: {e}"))?;
    tracing::info!("minecraft relay stopped");
    Ok(())
}
