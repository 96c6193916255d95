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
}

/// The MCP server's own flags; without `--relay-url` it runs the relay in-process with the relay flags.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Minecraft")]
pub struct MinecraftArgs {
    /// Dial this relay (`ws://host:port`, `wss://...`, or a bare `host:port`) instead of running one in-process.
    #[arg(id = "mc_relay_url", long = "relay-url", env = "MINECRAFT_RELAY_URL")]
    pub relay_url: Option<String>,

    /// The token presented to the relay at --relay-url (one of its MCP_AUTH_TOKENS).
    #[arg(id = "mc_relay_token", long = "relay-token", env = "MINECRAFT_RELAY_TOKEN", hide_env_values = true,
          value_parser = config::secret())]
    pub relay_token: Option<String>,

    /// PEM CA certificate(s) to trust for a `wss://` --relay-url, besides the public web roots: the relay's
    /// private CA, or its self-signed certificate.
    #[arg(
        id = "mc_relay_ca",
        long = "relay-ca",
        env = "MINECRAFT_RELAY_CA",
        value_name = "FILE"
    )]
    pub relay_ca: Option<std::path::PathBuf>,

    /// This MCP server's name at the relay: reconnecting under the same name resumes its queue.
    #[arg(
        long = "client-id",
        env = "MINECRAFT_CLIENT_ID",
        default_value = "mcp-bridges"
    )]
    pub client_id: String,

    /// Event types to receive from the relay, comma-separated, or `*` for all five.
    #[arg(
        id = "mc_events",
        long = "events",
        env = "MINECRAFT_EVENTS",
        default_value = "*"
    )]
    pub events: String,

    /// How long a command may take through the relay and the game.
    #[arg(value_name = "DURATION", id = "mc_minecraft_timeout", long = "minecraft-timeout", alias = "minecraft-timeout-ms", env = "MINECRAFT_TIMEOUT",
          default_value = "20s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub command_timeout: Duration,

    /// Events kept per event stream for poll_events.
    #[arg(id = "mc_event_buffer", long = "event-buffer", env = "MINECRAFT_EVENT_BUFFER", default_value = "100000",
          value_parser = config::ranged(1usize, 1_000_000))]
    pub event_buffer: usize,

    /// First delay before redialling the relay; doubles to --reconnect-max, with ±20% jitter, forever.
    #[arg(value_name = "DURATION", id = "mc_reconnect_base", long = "reconnect-base", alias = "reconnect-base-ms", env = "MINECRAFT_RECONNECT_BASE",
          default_value = "1s",
          value_parser = config::duration(Duration::from_millis(10), Duration::from_secs(600), Unit::Millis))]
    pub reconnect_base: Duration,

    /// Longest delay between redials.
    #[arg(value_name = "DURATION", id = "mc_reconnect_max", long = "reconnect-max", alias = "reconnect-max-ms", env = "MINECRAFT_RECONNECT_MAX",
          default_value = "30s",
          value_parser = config::duration(Duration::from_millis(10), Duration::from_secs(3600), Unit::Millis))]
    pub reconnect_max: Duration,

    #[command(flatten)]
    pub relay: RelayArgs,

    #[command(flatten)]
    pub vanilla: crate::vanilla::VanillaArgs,
}

impl MinecraftArgs {
    /// `--events` as event types; an unknown name is an error naming it.
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
}

/// Nothing: the relay is not mountable in `serve` (see `MinecraftRelay`).
#[derive(Debug, Clone, clap::Args)]
pub struct RelayMount {}
