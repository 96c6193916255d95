//! Where game events go between the relay's links. Without `--bus` the relay keeps them in its own memory
//! (`state.rs` queues them for each MCP client directly, as it always did: nothing here is on that path).
//! With `--bus nats://…` every relay on the same NATS cluster shares them through JetStream (`nats.rs`): a
//! game's events are stored in one stream before the game hears its `ack`, and each MCP client reads them
//! through a durable consumer named after it, so it resumes at any relay where it left off.
//! docs/minecraft/nats.md is the deployment page; docs/protocols/minecraft.md (NATS) the facts relied on.

mod bounded;
pub mod nats;

pub use nats::{BusError, ClaimError, NatsBus};

use std::time::Duration;

/// The bus settings from the relay's flags.
#[derive(Debug, Clone)]
pub struct BusConfig {
    /// NATS servers, comma-separated `nats://host:port`.
    pub urls: String,
    /// Copies of the event stream JetStream keeps (3 on a three-node cluster).
    pub replicas: usize,
    pub max_age: Duration,
    pub max_bytes: u64,
    /// Most events a client's consumer hands this relay before the client acknowledges them; below the
    /// relay's queue bound, so the local queue never drops what JetStream still holds.
    pub max_ack_pending: i64,
    /// A client gone this long loses its consumer (the queue retention of the memory relay).
    pub retention: Duration,
    /// A digest of the game token (never the token): game-name claims say which token took them.
    pub token_hash: String,
    /// Bytes each of the relay's queues towards NATS may hold (`--bus-buffer-bytes`; bounded.rs).
    pub buffer_bytes: usize,
}

impl BusConfig {
    /// The bus of the relay's flags, if `--bus` was given.
    pub fn from_args(args: &super::RelayArgs) -> Option<Self> {
        let urls = args.bus.as_ref()?.trim().to_owned();
        Some(Self {
            urls,
            replicas: args.bus_replicas,
            max_age: args.bus_max_age,
            max_bytes: args.bus_max_bytes,
            max_ack_pending: i64::try_from(args.queue_size.min(20_000)).unwrap_or(20_000),
            retention: args.retention,
            token_hash: digest(args.minecraft_token.as_deref().unwrap_or_default()),
            buffer_bytes: args.bus_buffer_bytes,
        })
    }
}

/// The first 16 bytes of a secret's SHA-256, in hex: what the bus stores of a token or an MCP server's
/// `instance`.
pub(super) fn digest(secret: &str) -> String {
    use sha2::Digest;
    use std::fmt::Write;
    let digest = sha2::Sha256::digest(secret.as_bytes());
    let mut out = String::new();
    for b in digest.iter().take(16) {
        let _ = write!(out, "{b:02x}");
    }
    out
}
