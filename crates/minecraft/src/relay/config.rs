//! The relay's flags (each with its environment variable) and the token list with its permissions.

use crate::wire::COMMANDS;
use bridge_core::config::{self, Unit};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How the relay listens and what it holds for its clients.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Relay")]
pub struct RelayArgs {
    /// Address the relay binds; game adapters and MCP servers dial it.
    #[arg(id = "mc_relay_host", long = "relay-host", env = "MINECRAFT_RELAY_HOST", default_value = "127.0.0.1",
          value_parser = config::ip())]
    pub host: IpAddr,

    /// Port of the relay (the mod's default `bridge.url` is ws://localhost:8080).
    #[arg(id = "mc_relay_port", long = "relay-port", env = "MINECRAFT_RELAY_PORT", default_value = "8080",
          value_parser = config::ranged(0u16, 65535))]
    pub port: u16,

    /// Tokens MCP servers present, comma-separated; `TOKEN=cmd|cmd` limits one to those command types
    /// (PROTOCOL.md §6).
    #[arg(id = "mc_mcp_auth_tokens", long = "mcp-auth-tokens", env = "MINECRAFT_MCP_AUTH_TOKENS", hide_env_values = true,
          value_parser = parse_tokens)]
    pub mcp_tokens: Option<McpTokens>,

    /// Token game adapters present.
    #[arg(id = "mc_minecraft_auth_token", long = "minecraft-auth-token", env = "MINECRAFT_AUTH_TOKEN", hide_env_values = true,
          value_parser = config::secret())]
    pub minecraft_token: Option<String>,

    /// Messages kept per MCP client until it acknowledges them (the design's messageQueueSize); the byte bound
    /// (--message-queue-bytes) is the one that holds at high event rates (50 000 events/s fill 1000 in 20 ms).
    #[arg(id = "mc_message_queue_size", long = "message-queue-size", env = "MINECRAFT_MESSAGE_QUEUE_SIZE", default_value = "100000",
          value_parser = config::ranged(1usize, 1_000_000))]
    pub queue_size: usize,

    /// Bytes kept per MCP client queue; the oldest messages go first when either bound is hit.
    #[arg(id = "mc_message_queue_bytes", long = "message-queue-bytes", env = "MINECRAFT_MESSAGE_QUEUE_BYTES", default_value = "8388608",
          value_parser = config::ranged(1024usize, 1 << 30))]
    pub queue_bytes: usize,

    /// Most client ids (queues) one MCP token may hold; a new one beyond it replaces the least recently used
    /// disconnected queue (reported to that client as lost if it comes back), or is refused when all are connected.
    #[arg(id = "mc_clients_per_token", long = "clients-per-token", env = "MINECRAFT_CLIENTS_PER_TOKEN", default_value = "16",
          value_parser = config::ranged(1usize, 10_000))]
    pub clients_per_token: usize,

    /// Most bytes all the queues of one MCP token hold together; least recently used disconnected queues go
    /// first, then the oldest messages of its largest queue.
    #[arg(id = "mc_token_queue_bytes", long = "token-queue-bytes", env = "MINECRAFT_TOKEN_QUEUE_BYTES", default_value = "33554432",
          value_parser = config::ranged(1024usize, 1 << 34))]
    pub token_queue_bytes: usize,

    /// Application heartbeat interval (PROTOCOL.md §4.8); dead peers are found by WebSocket pings
    /// at the same interval.
    #[arg(value_name = "DURATION", id = "mc_heartbeat_interval", long = "heartbeat-interval", alias = "heartbeat-interval-ms",
          env = "MINECRAFT_HEARTBEAT_INTERVAL", default_value = "15s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub heartbeat: Duration,

    /// How long a game may take to answer a command before the relay answers TIMEOUT.
    #[arg(value_name = "DURATION", id = "mc_command_timeout", long = "command-timeout", alias = "command-timeout-ms",
          env = "MINECRAFT_COMMAND_TIMEOUT", default_value = "15s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub command_timeout: Duration,

    /// How long a stopping relay (SIGTERM, Ctrl-C) waits for connected MCP servers to acknowledge what it sent
    /// them before it exits: queues live in its memory, so what is still unacknowledged then is gone with it.
    /// A relay inside the minecraft bridge (no --minecraft-relay-url) has at most the 10 s a stopping bridge
    /// gives its tasks.
    #[arg(value_name = "DURATION", id = "mc_drain_grace", long = "drain-grace", env = "MINECRAFT_DRAIN_GRACE",
          default_value = "2s", value_parser = config::duration(Duration::ZERO, Duration::from_secs(600), Unit::Millis))]
    pub drain_grace: Duration,

    /// Largest message processed; a larger one is answered with SCHEMA_ERROR (over 1 MiB the link closes).
    #[arg(id = "mc_max_message_bytes", long = "max-message-bytes", env = "MINECRAFT_MAX_MESSAGE_BYTES", default_value = "65536",
          value_parser = config::ranged(1024usize, 1 << 20))]
    pub max_message_bytes: usize,

    /// Bytes of chunked messages the relay puts together at once, from every game together (each is at most
    /// 16 MiB); a chunk beyond it is refused with SCHEMA_ERROR and its message dropped.
    #[arg(id = "mc_max_assembling_bytes", long = "max-assembling-bytes", env = "MINECRAFT_MAX_ASSEMBLING_BYTES", default_value = "67108864",
          value_parser = config::ranged(65_536usize, 1 << 32))]
    pub max_assembling_bytes: usize,

    /// What the messages of every link being decoded at once may take decoded: a message's bytes and about
    /// 256 for each JSON value in it (a 16 MiB message of tiny values is gigabytes decoded). A message that
    /// does not fit waits for the others; a chunked one that never could is refused with SCHEMA_ERROR (an
    /// answer fails its command). Never less than one frame of --max-message-bytes may take (257 times it),
    /// so a single frame only ever waits.
    #[arg(id = "mc_max_decoding_bytes", long = "max-decoding-bytes", env = "MINECRAFT_MAX_DECODING_BYTES", default_value = "268435456",
          value_parser = config::ranged(1usize << 20, u32::MAX as usize))]
    pub max_decoding_bytes: usize,

    /// Messages per second an MCP server may send (bursts of twice that).
    #[arg(id = "mc_mcp_rate", long = "mcp-rate", env = "MINECRAFT_MCP_RATE", default_value = "100",
          value_parser = config::ranged(1u32, 1_000_000))]
    pub mcp_rate: u32,

    /// Messages per second a game adapter may send (bursts of twice that); each message of a batch counts.
    #[arg(id = "mc_game_rate", long = "game-rate", env = "MINECRAFT_GAME_RATE", default_value = "100000",
          value_parser = config::ranged(1u32, 10_000_000))]
    pub game_rate: u32,

    /// Messages per second all the links of one MCP token may send together (bursts of twice that), so
    /// many client ids cannot multiply --mcp-rate. Acks and heartbeats are never counted.
    #[arg(id = "mc_mcp_token_rate", long = "mcp-token-rate", env = "MINECRAFT_MCP_TOKEN_RATE", default_value = "400",
          value_parser = config::ranged(1u32, 1_000_000))]
    pub mcp_token_rate: u32,

    /// Commands per second one game may be sent, from every MCP server together (bursts of twice that).
    #[arg(id = "mc_game_command_rate", long = "game-command-rate", env = "MINECRAFT_GAME_COMMAND_RATE", default_value = "200",
          value_parser = config::ranged(1u32, 1_000_000))]
    pub game_command_rate: u32,

    /// Events per second from every game adapter together (the game token's limit; bursts of twice that).
    /// Events over any limit are counted and every MCP client that missed them is told how many.
    #[arg(id = "mc_games_event_rate", long = "games-event-rate", env = "MINECRAFT_GAMES_EVENT_RATE", default_value = "100000",
          value_parser = config::ranged(1u32, 10_000_000))]
    pub games_event_rate: u32,

    /// How long the queue of a disconnected MCP client is kept.
    #[arg(value_name = "DURATION", id = "mc_queue_retention", long = "queue-retention", alias = "queue-retention-secs",
          env = "MINECRAFT_QUEUE_RETENTION", default_value = "10m",
          value_parser = config::duration(Duration::from_secs(1), Duration::from_secs(604_800), Unit::Secs))]
    pub retention: Duration,

    /// Most simultaneous connections (games and MCP servers together).
    #[arg(id = "mc_relay_max_connections", long = "relay-max-connections", env = "MINECRAFT_RELAY_MAX_CONNECTIONS", default_value = "256",
          value_parser = config::ranged(1usize, 100_000))]
    pub max_connections: usize,

    /// Most simultaneous connections from one address (IPv6: one /64); more are closed at once.
    #[arg(id = "mc_relay_max_connections_per_ip", long = "relay-max-connections-per-ip", env = "MINECRAFT_RELAY_MAX_CONNECTIONS_PER_IP", default_value = "64",
          value_parser = config::ranged(1usize, 100_000))]
    pub max_connections_per_ip: usize,

    /// How long a new connection has to send its request head (and finish TLS) before it is closed.
    #[arg(value_name = "DURATION", id = "mc_relay_handshake_timeout", long = "relay-handshake-timeout",
          env = "MINECRAFT_RELAY_HANDSHAKE_TIMEOUT", default_value = "10s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub handshake_timeout: Duration,

    /// How long a kept-alive HTTP connection with no request in flight is kept (WebSocket links are judged by
    /// their heartbeats instead).
    #[arg(value_name = "DURATION", id = "mc_relay_idle_timeout", long = "relay-idle-timeout",
          env = "MINECRAFT_RELAY_IDLE_TIMEOUT", default_value = "5s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub idle_timeout: Duration,

    /// PEM certificate chain (leaf first): with --tls-key the relay serves wss:// (TLS, rustls) instead of
    /// ws://, for a relay that crosses machines. Clients trust it by its CA (`--minecraft-relay-ca` on the MCP side).
    #[arg(
        id = "mc_tls_cert",
        long = "tls-cert",
        env = "MINECRAFT_TLS_CERT",
        value_name = "FILE"
    )]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of the --tls-cert certificate (PKCS#8, PKCS#1 or SEC1); both or neither.
    #[arg(
        id = "mc_tls_key",
        long = "tls-key",
        env = "MINECRAFT_TLS_KEY",
        value_name = "FILE"
    )]
    pub tls_key: Option<PathBuf>,

    /// NATS servers (`nats://host:4222`, comma-separated) whose JetStream carries events and commands between
    /// relays (docs/minecraft/nats.md); unset, the relay holds everything in its own memory.
    #[arg(
        id = "mc_bus",
        long = "bus",
        env = "MINECRAFT_BUS",
        value_name = "URLS"
    )]
    pub bus: Option<String>,

    /// Copies JetStream keeps of the event stream (3 on a three-node cluster: one node may die).
    #[arg(id = "mc_bus_replicas", long = "bus-replicas", env = "MINECRAFT_BUS_REPLICAS", default_value = "1",
          value_parser = config::ranged(1usize, 5))]
    pub bus_replicas: usize,

    /// How long the event stream keeps an event (older ones are dropped, and reported lost to a client that
    /// resumes behind them).
    #[arg(value_name = "DURATION", id = "mc_bus_max_age", long = "bus-max-age", env = "MINECRAFT_BUS_MAX_AGE",
          default_value = "24h",
          value_parser = config::duration(Duration::from_secs(1), Duration::from_secs(31_536_000), Unit::Secs))]
    pub bus_max_age: Duration,

    /// Bytes the event stream keeps (oldest events dropped first).
    #[arg(id = "mc_bus_max_bytes", long = "bus-max-bytes", env = "MINECRAFT_BUS_MAX_BYTES", default_value = "1073741824",
          value_parser = config::ranged(1_048_576u64, 1 << 44))]
    pub bus_max_bytes: u64,

    /// Bytes each queue towards NATS may hold: JetStream acks and client floors waiting to be sent (past it
    /// they are dropped and counted, costing a redelivery, never an event), and each game's events waiting
    /// for JetStream (past it the relay stops reading the game until JetStream catches up).
    #[arg(id = "mc_bus_buffer_bytes", long = "bus-buffer-bytes", env = "MINECRAFT_BUS_BUFFER_BYTES",
          default_value = "8388608", value_parser = config::ranged(1024usize, 1 << 32))]
    pub bus_buffer_bytes: usize,
}

/// One MCP token and the command types it may send (`None` = all).
#[derive(Clone)]
pub struct McpToken {
    pub token: String,
    pub allowed: Option<BTreeSet<String>>,
}

impl std::fmt::Debug for McpToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToken")
            .field("token", &"…")
            .field("allowed", &self.allowed)
            .finish()
    }
}

impl McpToken {
    /// Full permissions.
    pub fn all(token: impl Into<String>) -> Self {
        Self {
            token: token.into(),
            allowed: None,
        }
    }

    /// Property 19 (PROTOCOL.md §6): may this token send `command`?
    pub fn allows(&self, command: &str) -> bool {
        self.allowed
            .as_ref()
            .is_none_or(|set| set.contains(command))
    }
}

/// The parsed `MINECRAFT_MCP_AUTH_TOKENS`.
#[derive(Debug, Clone, Default)]
pub struct McpTokens(pub Vec<McpToken>);

/// Parses `TOKEN[=cmd|cmd],TOKEN...`; every error names the variable and the entry.
pub fn parse_tokens(raw: &str) -> Result<McpTokens, String> {
    let mut out = Vec::new();
    for (i, entry) in raw.split(',').enumerate() {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(format!(
                "MINECRAFT_MCP_AUTH_TOKENS entry {} is empty",
                i + 1
            ));
        }
        let (token, allowed) = match entry.split_once('=') {
            None => (entry, None),
            Some((token, list)) => {
                let mut set = BTreeSet::new();
                for cmd in list.split('|').map(str::trim) {
                    if !COMMANDS.contains(&cmd) {
                        return Err(format!(
                            "MINECRAFT_MCP_AUTH_TOKENS entry {}: `{cmd}` is not a command type; use {}",
                            i + 1,
                            COMMANDS.join(", ")
                        ));
                    }
                    set.insert(cmd.to_owned());
                }
                (token.trim(), Some(set))
            }
        };
        if token.is_empty() {
            return Err(format!(
                "MINECRAFT_MCP_AUTH_TOKENS entry {} has an empty token",
                i + 1
            ));
        }
        out.push(McpToken {
            token: token.to_owned(),
            allowed,
        });
    }
    Ok(McpTokens(out))
}
