//! Flags (each with its environment variable) of `mcp-bridges minecraft` and `mcp-bridges minecraft-relay`.

use crate::relay::RelayArgs;
use crate::wire::{self, EventType};
use bridge_core::BridgeError;
use bridge_core::config::{self, Unit};
use bridge_core::serve::McpArgs;
use std::time::Duration;

/// `(variable, older name)`: the first design's and the relay's names from before one rule named every variable
/// (bridge_core::config); the relay's flags are the Minecraft bridge's too, so they take its prefix.
pub const ENV_ALIASES: &[(&str, &str)] = &[
    ("MINECRAFT_RELAY_CA", "RELAY_CA_CERT"),
    ("MINECRAFT_TIMEOUT", "MINECRAFT_TIMEOUT_MS"),
    ("MINECRAFT_RECONNECT_BASE", "MINECRAFT_RECONNECT_BASE_MS"),
    ("MINECRAFT_RECONNECT_MAX", "MINECRAFT_RECONNECT_MAX_MS"),
    ("MINECRAFT_RELAY_HOST", "RELAY_HOST"),
    ("MINECRAFT_RELAY_PORT", "RELAY_PORT"),
    ("MINECRAFT_MCP_AUTH_TOKENS", "MCP_AUTH_TOKENS"),
    ("MINECRAFT_MESSAGE_QUEUE_SIZE", "MESSAGE_QUEUE_SIZE"),
    ("MINECRAFT_MESSAGE_QUEUE_BYTES", "MESSAGE_QUEUE_BYTES"),
    ("MINECRAFT_CLIENTS_PER_TOKEN", "RELAY_CLIENTS_PER_TOKEN"),
    ("MINECRAFT_TOKEN_QUEUE_BYTES", "RELAY_TOKEN_QUEUE_BYTES"),
    ("MINECRAFT_HEARTBEAT_INTERVAL", "HEARTBEAT_INTERVAL_MS"),
    ("MINECRAFT_COMMAND_TIMEOUT", "RELAY_COMMAND_TIMEOUT_MS"),
    ("MINECRAFT_MAX_MESSAGE_BYTES", "RELAY_MAX_MESSAGE_BYTES"),
    ("MINECRAFT_MCP_RATE", "RELAY_MCP_RATE"),
    ("MINECRAFT_GAME_RATE", "RELAY_GAME_RATE"),
    ("MINECRAFT_QUEUE_RETENTION", "RELAY_QUEUE_RETENTION_SECS"),
    ("MINECRAFT_RELAY_MAX_CONNECTIONS", "RELAY_MAX_CONNECTIONS"),
    ("MINECRAFT_TLS_CERT", "RELAY_TLS_CERT"),
    ("MINECRAFT_TLS_KEY", "RELAY_TLS_KEY"),
];

/// `mcp-bridges minecraft`.
#[derive(Debug, Clone, clap::Args)]
pub struct MinecraftCommand {
    #[command(flatten)]
    pub mcp: McpArgs,
    #[command(flatten)]
    pub minecraft: MinecraftArgs,
    /// Threads the process runs its work on. 1 (the default when it dials a relay at --minecraft-relay-url, or
    /// in vanilla mode) runs everything on one thread; 0 (the default when it runs the relay in-process) is one
    /// per core; more is that many. The MCP server only passes events and calls on, and with one thread its
    /// hops never wait for another thread to wake (issue 22). Not in `serve`, which keeps one per core.
    #[arg(value_name = "N", long = "minecraft-worker-threads", env = "MINECRAFT_WORKER_THREADS",
          value_parser = config::ranged(0usize, MAX_WORKER_THREADS), help_heading = "Minecraft")]
    pub worker_threads: Option<usize>,
}

/// The most threads --minecraft-worker-threads asks for.
pub const MAX_WORKER_THREADS: usize = 256;

impl MinecraftCommand {
    /// --minecraft-worker-threads, or its default: 1 unless the relay runs in this process (then 0, one per
    /// core: the relay and the MCP server together outgrow one core at 50 000 events/s).
    pub fn worker_threads(&self) -> usize {
        self.worker_threads.unwrap_or(
            if self.minecraft.relay_url.is_some() || self.minecraft.vanilla.enabled() {
                1
            } else {
                0
            },
        )
    }
}

/// The MCP server's own flags; without `--minecraft-relay-url` it runs the relay in-process with the relay flags.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Minecraft")]
pub struct MinecraftArgs {
    /// Dial this relay (`ws://host:port`, `wss://...`, or a bare `host:port`) instead of running one in-process.
    #[arg(
        id = "mc_relay_url",
        long = "minecraft-relay-url",
        alias = "relay-url",
        env = "MINECRAFT_RELAY_URL"
    )]
    pub relay_url: Option<String>,

    /// The token presented to the relay at --minecraft-relay-url (one of its MINECRAFT_MCP_AUTH_TOKENS).
    #[arg(id = "mc_relay_token", long = "minecraft-relay-token", alias = "relay-token", env = "MINECRAFT_RELAY_TOKEN", hide_env_values = true,
          value_parser = config::secret())]
    pub relay_token: Option<String>,

    /// PEM CA certificate(s) to trust for a `wss://` --minecraft-relay-url, besides the public web roots: the relay's
    /// private CA, or its self-signed certificate.
    #[arg(
        id = "mc_relay_ca",
        long = "minecraft-relay-ca",
        alias = "relay-ca",
        env = "MINECRAFT_RELAY_CA",
        value_name = "FILE"
    )]
    pub relay_ca: Option<std::path::PathBuf>,

    /// This MCP server's name at the relay: reconnecting under the same name resumes its queue. Give each MCP server
    /// on one relay token its own: the relay refuses a second one while the first is connected.
    #[arg(
        long = "minecraft-client-id",
        alias = "client-id",
        env = "MINECRAFT_CLIENT_ID",
        default_value = "mcp-bridges"
    )]
    pub client_id: String,

    /// Event types to receive from the relay, comma-separated, or `*` for all five.
    #[arg(
        id = "mc_events",
        long = "minecraft-events",
        alias = "events",
        env = "MINECRAFT_EVENTS",
        default_value = "*"
    )]
    pub events: String,

    /// How long a command may take through the relay and the game.
    #[arg(value_name = "DURATION", id = "mc_minecraft_timeout", long = "minecraft-timeout", alias = "minecraft-timeout-ms", env = "MINECRAFT_TIMEOUT",
          default_value = "20s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub command_timeout: Duration,

    /// Events kept per event stream for poll_events, and at most 64 MiB of them: for chat (some 400-600 bytes
    /// an event) the bytes bind first, so a burst is held up to the memory bound, not stopped short of it.
    #[arg(id = "mc_event_buffer", long = "minecraft-event-buffer", alias = "event-buffer", env = "MINECRAFT_EVENT_BUFFER", default_value = "250000",
          value_parser = config::ranged(1usize, 1_000_000))]
    pub event_buffer: usize,

    /// First delay before redialling the relay; doubles to --minecraft-reconnect-max, with ±20% jitter, forever.
    #[arg(value_name = "DURATION", id = "mc_reconnect_base", long = "minecraft-reconnect-base", aliases = ["reconnect-base", "reconnect-base-ms"], env = "MINECRAFT_RECONNECT_BASE",
          default_value = "1s",
          value_parser = config::duration(Duration::from_millis(10), Duration::from_secs(600), Unit::Millis))]
    pub reconnect_base: Duration,

    /// Longest delay between redials.
    #[arg(value_name = "DURATION", id = "mc_reconnect_max", long = "minecraft-reconnect-max", aliases = ["reconnect-max", "reconnect-max-ms"], env = "MINECRAFT_RECONNECT_MAX",
          default_value = "30s",
          value_parser = config::duration(Duration::from_millis(10), Duration::from_secs(3600), Unit::Millis))]
    pub reconnect_max: Duration,

    #[command(flatten)]
    pub relay: InProcessRelay,

    #[command(flatten)]
    pub vanilla: crate::vanilla::VanillaArgs,
}

impl MinecraftArgs {
    /// `--minecraft-events` as event types; an unknown name is an error naming it.
    pub fn subscriptions(&self) -> Result<Vec<EventType>, BridgeError> {
        let items: Vec<serde_json::Value> = self
            .events
            .split(',')
            .map(|s| serde_json::Value::String(s.trim().to_owned()))
            .collect();
        wire::subscription(Some(&serde_json::Value::Array(items)), "MINECRAFT_EVENTS")
            .map_err(|e| format!("MINECRAFT_EVENTS: {}", e.message).into())
    }
}

/// `mcp-bridges minecraft-relay`. Of the MCP flags only the logging ones matter here.
#[derive(Debug, Clone, clap::Args)]
pub struct RelayCommand {
    #[command(flatten)]
    pub mcp: McpArgs,
    #[command(flatten)]
    pub relay: RelayArgs,
    /// Threads the relay runs its work on: 1 (the default) runs everything on one thread, 0 is one per core,
    /// more is that many. The relay only routes frames (50 000 events/s take about a fifth of a core), and with
    /// one thread its hops never wait for another thread to wake (issue 22).
    #[arg(value_name = "N", long = "minecraft-worker-threads", env = "MINECRAFT_WORKER_THREADS", default_value = "1",
          value_parser = config::ranged(0usize, MAX_WORKER_THREADS), help_heading = "Relay")]
    pub worker_threads: usize,
}

/// Nothing: the relay is not mountable in `serve` (see `MinecraftRelay`).
#[derive(Debug, Clone, clap::Args)]
pub struct RelayMount {}

/// The relay's flags as the `minecraft` bridge mounts them (it runs the relay in-process unless
/// --minecraft-relay-url is set): each takes the bridge's prefix like every bridge flag, `--relay-port` becoming
/// `--minecraft-relay-port` (its variable, MINECRAFT_RELAY_PORT, unchanged), the unprefixed name still read
/// as a hidden alias that warns once. `minecraft-relay` keeps the unprefixed names: it is a command of its own,
/// never mounted beside other bridges, so they cannot collide there.
#[derive(Debug, Clone)]
pub struct InProcessRelay(pub RelayArgs);

impl std::ops::Deref for InProcessRelay {
    type Target = RelayArgs;

    fn deref(&self) -> &RelayArgs {
        &self.0
    }
}

/// The prefix every flag of the `minecraft` bridge starts with.
const PREFIX: &str = "minecraft-";

/// `add` applied to `cmd`, then every argument it added renamed to `--minecraft-<name>` with the old name as a
/// hidden alias (an argument already starting with the prefix is left as it is).
fn prefixed(cmd: clap::Command, add: fn(clap::Command) -> clap::Command) -> clap::Command {
    let before: Vec<clap::Id> = cmd.get_arguments().map(|a| a.get_id().clone()).collect();
    let cmd = add(cmd);
    let added: Vec<clap::Id> = cmd
        .get_arguments()
        .map(|a| a.get_id().clone())
        .filter(|id| !before.contains(id))
        .collect();
    added.into_iter().fold(cmd, |cmd, id| {
        cmd.mut_arg(id, |arg| match arg.get_long().map(str::to_owned) {
            Some(long) if !long.starts_with(PREFIX) => {
                arg.long(format!("{PREFIX}{long}")).alias(long)
            }
            _ => arg,
        })
    })
}

impl clap::FromArgMatches for InProcessRelay {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        RelayArgs::from_arg_matches(matches).map(Self)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
}

impl clap::Args for InProcessRelay {
    fn group_id() -> Option<clap::Id> {
        RelayArgs::group_id()
    }

    fn augment_args(cmd: clap::Command) -> clap::Command {
        prefixed(cmd, <RelayArgs as clap::Args>::augment_args)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        prefixed(cmd, <RelayArgs as clap::Args>::augment_args_for_update)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        mc: MinecraftCommand,
    }

    #[test]
    fn the_in_process_relay_s_flags_take_the_bridge_s_prefix_and_keep_their_variables() {
        let cmd = <Cli as clap::CommandFactory>::command();
        let port = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some("minecraft-relay-port"));
        assert_eq!(
            port.and_then(|a| a.get_env()).and_then(|e| e.to_str()),
            Some("MINECRAFT_RELAY_PORT")
        );
        let cli = Cli::try_parse_from(["x", "--minecraft-relay-port", "0", "--tls-cert", "c.pem"]);
        let relay = cli.map(|c| c.mc.minecraft.relay.0).ok();
        assert_eq!(relay.as_ref().map(|r| r.port), Some(0));
        assert!(
            cmd.get_arguments()
                .any(|a| a.get_long() == Some("minecraft-auth-token")),
            "a flag already prefixed keeps its name"
        );
    }
}
