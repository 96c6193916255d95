//! The Bitburner bridge: the game's Remote API as MCP tools.
//!
//! The game is the WebSocket client and only answers; this bridge listens, sends every request, and times
//! each one out itself (`docs/protocols/bitburner.md`). Entry point for the binary: [`run`].

pub mod config;
pub mod link;
pub mod path;
pub mod resources;
pub mod sync;
pub mod tools;
pub mod wire;

pub use config::{BitburnerArgs, BitburnerCommand, GameArgs, SyncArgs, WatchArgs};

use bridge_core::bridge::BuildError;
use bridge_core::events::EventStream;
use bridge_core::link::{
    LinkError, ListenLimits, MissingOrigin, OriginPolicy, WsConfig, bind, serve_with,
};
use bridge_core::serve::{McpArgs, ServeError, Transport, run_alone, shutdown_on_signals};
use bridge_core::{Bridge, BridgeBuilder, BridgeEntry, BridgeEnv, BridgeError};
use link::{GameLink, LinkConfig};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tools::{Ctx, Limits};

/// One game connects at a time; the cap only keeps stray or hostile clients from holding descriptors. The
/// per-address cap stays the default's (above this cap) on purpose: the game and any local junk share
/// 127.0.0.1, and a lower one would close the game at accept while junk holds it; at the cap the listener
/// closes the oldest silent connection to let the game in (`bridge_core::net`).
const GAME_LIMITS: ListenLimits = ListenLimits {
    max_connections: 64,
    ..ListenLimits::DEFAULT
};

/// The largest frame the game may send. The definitions are ~350 KB and a save several MB
/// (`docs/protocols/bitburner.md` §5); a binary save's bytes above 0x7F take two bytes in JSON, so 32 MiB
/// leaves room for a save of 16 MB and more. A larger frame closes the connection, and the call that asked
/// fails with `E_TOO_LARGE` (`tools::Ctx::call`).
pub const MAX_GAME_FRAME_BYTES: usize = 32 << 20;

const INSTRUCTIONS: &str = "Tools for the game Bitburner through its Remote API: read, write and delete the \
scripts and text files on in-game servers, compute a script's RAM cost, and read the NetScript type \
declarations. `server` defaults to `home`. The game connects to this bridge, not the other way round: when a \
tool reports E_DISCONNECTED, tell the player the hint's steps. Scripts run through the in-game helper \
(run_script, get_script_logs, kill_script, get_server_state): when one answers E_UNSUPPORTED, tell the player the \
one command in its hint (`run mcp-helper.js`). The event stream `connection` tells when the game connects or \
disconnects: poll_events with `wait_ms` waits for it.";

/// The event stream of game connects and disconnects.
pub const CONNECTION_STREAM: &str = "connection";

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Link(#[from] LinkError),
    #[error("{0}")]
    Serve(#[from] ServeError),
    #[error("{0}")]
    Build(#[from] BuildError),
    #[error("{0}")]
    Sync(#[from] sync::SyncError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The game's listener, serving until its shutdown token is cancelled.
pub struct GameListener {
    /// Where it listens (the real port when 0 was asked for).
    pub addr: SocketAddr,
    pub link: GameLink,
    /// The listener's task; it ends soon after the shutdown token is cancelled.
    pub task: JoinHandle<()>,
}

/// Binds the game's WebSocket listener and starts serving it. A taken port is an error that names the
/// usual culprits and how to pick another port.
pub async fn listen(
    game: &GameArgs,
    shutdown: CancellationToken,
) -> Result<GameListener, RunError> {
    let wanted = SocketAddr::new(game.host, game.port);
    let listener = bind(
        wanted,
        "bitburner-filesync, viteburner or another mcp-bridges bitburner",
        "--bitburner-game-port / BITBURNER_GAME_PORT (and enter the same port in the game's Options → Remote API)",
    )
    .await?;
    let addr = listener.local_addr()?;
    let host = if addr.ip().is_unspecified() {
        "localhost".to_owned()
    } else {
        addr.ip().to_string()
    };
    let link = GameLink::new(LinkConfig {
        rpc_timeout: game.rpc_timeout,
        save_timeout: game.save_timeout,
        connect_wait: game.connect_wait,
        advertised: (host, addr.port()),
    });
    let origins = OriginPolicy::new(game.origin_patterns(), MissingOrigin::Accept)?;
    let mut ws = WsConfig::new(origins);
    ws.max_frame_bytes = MAX_GAME_FRAME_BYTES;
    ws.ping_interval = game.ping_interval;
    // A browser answers a ping at once unless the tab is frozen; waiting longer only delays failing calls.
    ws.pong_timeout = game.ping_interval.min(std::time::Duration::from_secs(10));
    ws.shutdown = shutdown.clone();
    let router = link.router(ws);
    if !addr.ip().is_loopback() {
        tracing::warn!(
            "the game listener is on {addr}, beyond this machine: anyone on your network who can reach it can \
             pose as the game. Bind 127.0.0.1 unless you need this."
        );
    }
    tracing::info!(
        "waiting for Bitburner on ws://{addr} (in game: Options → Remote API, port {})",
        addr.port()
    );
    let limits = ListenLimits {
        handshake_timeout: game.handshake_timeout,
        idle_timeout: game.idle_timeout,
        ..GAME_LIMITS
    };
    let task = tokio::spawn(async move {
        if let Err(e) = serve_with(listener, router, limits, shutdown).await {
            tracing::error!(error = %e, "the game listener stopped");
        }
    });
    Ok(GameListener { addr, link, task })
}

/// The tools' shared context and a builder holding nothing yet but the event hub it uses.
pub fn context(link: GameLink, game: &GameArgs) -> (BridgeBuilder, Ctx) {
    let builder = Bridge::builder("bitburner", env!("CARGO_PKG_VERSION"));
    let ctx = Ctx {
        link,
        hub: builder.events(),
        limits: Limits {
            file_write_max_bytes: game.file_write_max_bytes,
            save_dir: game.save_dir.clone(),
        },
        pins: tools::pins::Pins::default(),
    };
    (builder, ctx)
}

/// The MCP bridge: tools, resources, health.
pub fn build_bridge(link: GameLink, game: &GameArgs) -> Result<Bridge, BuildError> {
    let (mut builder, ctx) = context(link.clone(), game);
    builder.instructions(INSTRUCTIONS);
    for spec in tools::specs(&ctx) {
        builder.tool(spec);
    }
    builder.resources(Arc::new(resources::GameResources { ctx }));
    builder.events().stream(
        CONNECTION_STREAM,
        "The game connecting (`{\"event\": \"connected\", \"peer\", \"origin\"}`) and disconnecting \
         (`{\"event\": \"disconnected\", \"reason\"}`). Games that connected and dropped before the bridge \
         looked come as one pair, the `connected` with `short_lived`: how many.",
        64,
    );
    builder.health(move || {
        let status = link.status();
        serde_json::json!({
            "game_connected": status.connected,
            "game_listen": status.listen,
            "game_connections_total": status.connections_total,
        })
    });
    builder.build()
}

/// Publishes the game's connects and disconnects on `stream` until `stop` is cancelled.
pub async fn watch_connection(link: GameLink, stream: EventStream, stop: CancellationToken) {
    // Compared with "never connected", so a game that connected before this task ran is still announced.
    let mut seen = (false, 0);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = link.wait_until(|s| (s.connected, s.connections_total) != seen) => {}
        }
        let now = link.status();
        let (was_connected, connections) = seen;
        let new_links = now.connections_total.saturating_sub(connections);
        // A newer game replacing the old one shows as a new connection without a gap.
        if was_connected && (!now.connected || new_links > 0) {
            let gone =
                serde_json::json!({ "event": "disconnected", "reason": now.last_disconnect });
            stream.publish(gone);
        }
        // Links that came and went between two looks (a game that connected and dropped at once) are still
        // told, as a pair, so a reader counting connects and disconnects stays balanced.
        let unseen = new_links.saturating_sub(u64::from(now.connected));
        if unseen > 0 {
            stream.publish(serde_json::json!({
                "event": "connected",
                "peer": null,
                "origin": null,
                "connections_total": connections + unseen,
                "short_lived": unseen,
            }));
            stream.publish(
                serde_json::json!({ "event": "disconnected", "reason": now.last_disconnect }),
            );
        }
        if now.connected && new_links > 0 {
            stream.publish(serde_json::json!({
                "event": "connected",
                "peer": now.peer,
                "origin": now.origin,
                "connections_total": now.connections_total,
            }));
        }
        seen = (now.connected, now.connections_total);
    }
}

/// The Bitburner bridge as the binary runs it: alone (`mcp-bridges bitburner`) or beside others (`serve`).
pub struct Bitburner;

impl BridgeEntry for Bitburner {
    const NAME: &'static str = "bitburner";
    const DEFAULT_TRANSPORT: Transport = Transport::Stdio;
    // The design's names, from before several bridges shared one process's environment.
    // And the names from before one rule named every variable (bridge_core::config).
    const ENV_ALIASES: &'static [(&'static str, &'static str)] = &[
        ("BITBURNER_RPC_TIMEOUT", "BITBURNER_RPC_TIMEOUT_MS"),
        ("BITBURNER_RPC_TIMEOUT", "RPC_TIMEOUT_MS"),
        ("BITBURNER_FILE_WRITE_MAX_BYTES", "FILE_WRITE_MAX_BYTES"),
        ("BITBURNER_GAME_HOST", "BITBURNER_HOST"),
        ("BITBURNER_GAME_PORT", "BITBURNER_PORT"),
        (
            "BITBURNER_GAME_ALLOWED_ORIGINS",
            "BITBURNER_ALLOWED_ORIGINS",
        ),
        ("BITBURNER_SAVE_TIMEOUT", "BITBURNER_SAVE_TIMEOUT_MS"),
        ("BITBURNER_CONNECT_WAIT", "BITBURNER_CONNECT_WAIT_MS"),
        ("BITBURNER_PING_INTERVAL", "BITBURNER_PING_INTERVAL_MS"),
        ("BITBURNER_POLL", "BITBURNER_SYNC_POLL_MS"),
        ("BITBURNER_DEBOUNCE", "BITBURNER_SYNC_DEBOUNCE_MS"),
        ("BITBURNER_WAIT", "BITBURNER_SYNC_WAIT_MS"),
    ];
    type Args = GameArgs;
    type Command = BitburnerArgs;

    fn mcp(command: &BitburnerArgs) -> &McpArgs {
        &command.mcp
    }

    async fn start(game: GameArgs, env: &BridgeEnv) -> Result<Bridge, BridgeError> {
        // The game's link outlives the start of shutdown: calls in flight still need it.
        let listener = listen(&game, env.links().clone()).await?;
        env.spawn(listener.task);
        let bridge = build_bridge(listener.link.clone(), &game)?;
        if let Some(stream) = bridge.events().get(CONNECTION_STREAM) {
            env.spawn(watch_connection(listener.link, stream, env.links().clone()));
        }
        Ok(bridge)
    }

    async fn run(command: BitburnerArgs) -> Result<(), BridgeError> {
        run(command).await
    }
}

/// `mcp-bridges bitburner`: serve MCP (stdio unless `--http`), or run `push`/`pull` once. Logging is set up
/// by the caller.
pub async fn run(args: BitburnerArgs) -> Result<(), BridgeError> {
    match &args.command {
        None => run_alone::<Bitburner>(&args.mcp, args.game).await,
        Some(command) => run_command(&args.game, command, shutdown_on_signals()).await,
    }
}

/// `push`, `pull` or `sync` (which with `--watch` runs until `shutdown`): the binary passes the one shutdown
/// token it makes for every command that is not an MCP server.
pub async fn run_command(
    game_args: &GameArgs,
    command: &BitburnerCommand,
    shutdown: CancellationToken,
) -> Result<(), BridgeError> {
    // The game's link ends with the command; the caller's token is only read.
    let done = shutdown.child_token();
    let game = listen(game_args, done.clone()).await?;
    let (_, ctx) = context(game.link.clone(), game_args);
    let (report, verb) = match command {
        BitburnerCommand::Push(sync_args) => (sync::push(&ctx, sync_args).await, "pushed"),
        BitburnerCommand::Pull(sync_args) => (sync::pull(&ctx, sync_args).await, "pulled"),
        BitburnerCommand::Sync(w) if w.watch => {
            let options = sync::watch::WatchOptions {
                poll: w.poll,
                debounce: w.debounce,
            };
            eprintln!(
                "watching {} (Ctrl-C stops); the game is polled every {} ms",
                w.sync.dir.display(),
                w.poll.as_millis()
            );
            let watched = sync::watch::watch(&ctx, &w.sync, options, shutdown.clone(), |round| {
                for line in round.lines("synced") {
                    println!("{line}");
                }
            })
            .await;
            game.link.close("watch finished").await;
            done.cancel();
            let _ = game.task.await;
            // Every round printed its own lines already.
            return Ok(watched?);
        }
        BitburnerCommand::Sync(w) => (
            sync::reconcile(&ctx, &w.sync, sync::Direction::Both).await,
            "synced",
        ),
    };
    game.link.close(&format!("{verb} finished")).await;
    done.cancel();
    let _ = game.task.await;
    report?.print(verb)?;
    Ok(())
}
