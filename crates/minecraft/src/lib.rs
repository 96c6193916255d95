//! The Minecraft bridge: `mcp-bridges minecraft` (the MCP server) and `mcp-bridges minecraft-relay` (the
//! relay game adapters and MCP servers dial). `PROTOCOL.md` is the wire contract with the game side under
//! `adapters/`.

mod acks;
pub mod client;
pub mod config;
mod latency;
pub mod models;
pub mod relay;
pub mod tools;
pub mod vanilla;
pub mod wire;

pub use config::{MinecraftArgs, MinecraftCommand, RelayCommand, RelayMount};

use bridge_core::serve::{McpArgs, Transport, run_alone, shutdown_on_signals};
use bridge_core::{Bridge, BridgeEntry, BridgeEnv, BridgeError};
use client::{LinkSettings, RelayLink};
use relay::McpToken;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::Mutex;
use wire::EventType;

const INSTRUCTIONS: &str = "Tools for a Minecraft server through its bridge mod or plugin: run whitelisted \
commands with their output, chat, teleport, give items, and read players, the server and the blocks around a \
point. Game events (player_join, player_quit, player_chat, player_death, block_break) are event streams: \
subscribe to minecraft://events/<type>, or call poll_events (wait_ms waits for new ones). Errors start with the \
game's code ([PLAYER_NOT_FOUND], [INVALID_COMMAND], ...). `status` tells whether a game is \
connected; pass `game` to a tool only when several are.";

/// Bytes of events kept per stream for `poll_events` (beside --minecraft-event-buffer events): about two seconds of
/// 50 000 chat events/s (some 560 bytes each), so a client polling in pages rides out a burst or a slow poll. The
/// core holds each event as its JSON text, so this is close to the memory it takes: the real-stack bench at
/// 50 000/s peaked at 78 MB with 16 MiB here, against 222 MB when events were held as value trees (issue 22).
const STREAM_BYTES: usize = 64 << 20;

fn describe(ty: EventType) -> &'static str {
    match ty {
        EventType::PlayerJoin => {
            "A player joined: GameEvent {eventType, timestamp, data: {player, uuid}}, plus game and id."
        }
        EventType::PlayerQuit => {
            "A player left: GameEvent {eventType, timestamp, data: {player, uuid}}, plus game and id."
        }
        EventType::PlayerChat => {
            "A chat line: GameEvent {eventType, timestamp, data: {player, message}}, plus game and id."
        }
        EventType::PlayerDeath => {
            "A player died: GameEvent {eventType, timestamp, data: {player, cause, location, killer?}}, plus game and id."
        }
        EventType::BlockBreak => {
            "A player broke a block: GameEvent {eventType, timestamp, data: {player, blockType, location}}, plus game and id."
        }
    }
}

/// The URL the in-process MCP server dials its own relay at.
fn loopback_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("ws://{}/", SocketAddr::new(ip, addr.port()))
}

/// A bare `host:port` becomes `ws://host:port/`.
pub fn normalize_url(url: &str) -> String {
    let url = url.trim();
    if url.starts_with("ws://") || url.starts_with("wss://") {
        url.to_owned()
    } else {
        format!("ws://{url}")
    }
}

/// The TLS client settings for `url`: `--minecraft-relay-ca` read now, so a bad file stops the start.
fn relay_tls(
    url: &str,
    ca: Option<&std::path::Path>,
) -> Result<Option<Arc<bridge_core::link::tls::ClientConfig>>, BridgeError> {
    if !url.starts_with("wss://") {
        return match ca {
            Some(_) => Err(format!(
                "--minecraft-relay-ca (MINECRAFT_RELAY_CA) is set but --minecraft-relay-url {url} is not wss://: the CA only \
                 matters for a TLS relay"
            )
            .into()),
            None => Ok(None),
        };
    }
    bridge_core::link::tls::client_config(ca)
        .map(Some)
        .map_err(|e| format!("--minecraft-relay-ca (MINECRAFT_RELAY_CA): {e}").into())
}

/// `mcp-bridges minecraft`: the MCP server.
pub struct Minecraft;

impl BridgeEntry for Minecraft {
    const NAME: &'static str = "minecraft";
    const DEFAULT_TRANSPORT: Transport = Transport::Stdio;
    const ENV_ALIASES: &'static [(&'static str, &'static str)] = config::ENV_ALIASES;
    type Args = MinecraftArgs;
    type Command = MinecraftCommand;

    fn mcp(command: &MinecraftCommand) -> &McpArgs {
        &command.mcp
    }

    async fn start(args: MinecraftArgs, env: &BridgeEnv) -> Result<Bridge, BridgeError> {
        let mut b = Bridge::builder(Self::NAME, env!("CARGO_PKG_VERSION"));
        b.instructions(INSTRUCTIONS);
        for ty in EventType::ALL {
            b.events().stream_with_bytes(
                ty.as_str(),
                describe(ty),
                args.event_buffer,
                STREAM_BYTES,
            );
        }
        if args.vanilla.enabled() {
            vanilla::start(&mut b, &args, env).await?;
            return Ok(b.build()?);
        }
        let embedded: Arc<Mutex<Option<relay::Relay>>> = Arc::new(Mutex::new(None));
        let (url, token, mode, tls) = match &args.relay_url {
            Some(url) => {
                let Some(token) = args.relay_token.clone() else {
                    return Err("--minecraft-relay-url needs --minecraft-relay-token (MINECRAFT_RELAY_TOKEN): one of the relay's \
                                MINECRAFT_MCP_AUTH_TOKENS"
                        .into());
                };
                let url = normalize_url(url);
                let tls = relay_tls(&url, args.relay_ca.as_deref())?;
                (url, token, "remote", tls)
            }
            None => {
                // The in-process MCP server is one more MCP client of its own relay, with a token of its own.
                let token = format!("{:032x}", rand::random::<u128>());
                let settings = relay::settings(&args.relay, vec![McpToken::all(token.clone())])?;
                let handle = relay::start(&args.relay, settings, env.links().clone()).await?;
                let mut url = loopback_url(handle.addr);
                let mut tls = None;
                if let Some(cert) = &args.relay.tls_cert {
                    // The in-process link trusts exactly the relay's own certificate, whatever host it names.
                    url = url.replacen("ws://", "wss://", 1);
                    let leaf = bridge_core::link::tls::load_certs(cert)
                        .map_err(|e| format!("--minecraft-tls-cert (MINECRAFT_TLS_CERT): {e}"))?
                        .into_iter()
                        .next()
                        .ok_or_else(|| {
                            "--minecraft-tls-cert (MINECRAFT_TLS_CERT): no certificate".to_owned()
                        })?;
                    tls = Some(
                        bridge_core::link::tls::client_config_pinned(leaf).map_err(|e| {
                            format!("--minecraft-tls-cert (MINECRAFT_TLS_CERT): {e}")
                        })?,
                    );
                }
                if let Ok(mut slot) = embedded.lock() {
                    *slot = Some(handle.relay.clone());
                }
                env.spawn(handle.task);
                (url, token, "embedded", tls)
            }
        };
        let subscriptions = args.subscriptions()?;
        let link = RelayLink::new(
            LinkSettings {
                url,
                token,
                client_id: args.client_id.clone(),
                subscriptions,
                command_timeout: args.command_timeout,
                backoff_base: args.reconnect_base,
                backoff_max: args.reconnect_max,
                mode,
                tls,
            },
            b.events(),
        );
        env.spawn(link.clone().run(env.links().clone()));
        let ctx = tools::Ctx {
            link: link.clone(),
            vanilla: None,
            world: Default::default(),
        };
        for spec in tools::specs(&ctx) {
            b.tool(spec);
        }
        b.health(move || {
            let mut out = serde_json::json!({ "relay_link": link.status() });
            if let Ok(slot) = embedded.lock()
                && let Some(relay) = slot.as_ref()
            {
                out["relay"] = relay.health();
            }
            out
        });
        Ok(b.build()?)
    }

    async fn run(command: MinecraftCommand) -> Result<(), BridgeError> {
        run_alone::<Self>(&command.mcp, command.minecraft).await
    }
}

/// `mcp-bridges minecraft-relay`: the relay alone. It is an entry of the bridge table so it is a top-level
/// subcommand with the same logging and flags conventions; it has no MCP tools, so it cannot be mounted
/// in `serve` (mount `minecraft`, which runs the relay in-process).
pub struct MinecraftRelay;

impl BridgeEntry for MinecraftRelay {
    const NAME: &'static str = "minecraft-relay";
    const DEFAULT_TRANSPORT: Transport = Transport::Stdio;
    const ENV_ALIASES: &'static [(&'static str, &'static str)] = config::ENV_ALIASES;
    type Args = RelayMount;
    type Command = RelayCommand;

    fn mcp(command: &RelayCommand) -> &McpArgs {
        &command.mcp
    }

    async fn start(_: RelayMount, _: &BridgeEnv) -> Result<Bridge, BridgeError> {
        Err("minecraft-relay has no MCP tools and cannot be mounted: run `mcp-bridges minecraft-relay` on \
             its own, or mount `minecraft`, which runs the relay in-process"
            .into())
    }

    async fn run(command: RelayCommand) -> Result<(), BridgeError> {
        let stop = shutdown_on_signals();
        let settings = relay::settings(&command.relay, Vec::new())?;
        if settings.mcp_tokens.is_empty() {
            tracing::warn!(
                "MINECRAFT_MCP_AUTH_TOKENS is empty: no MCP server can connect to this relay"
            );
        }
        let handle = relay::start(&command.relay, settings, stop).await?;
        handle
            .task
            .await
            .map_err(|e| format!("the relay task failed: {e}"))?;
        tracing::info!("minecraft relay stopped");
        Ok(())
    }
}
