//! Wiring: the link listener (WebSocket + installer) and the MCP bridge with its tools, events and health.

use crate::assets::{self, LINK_PATH};
use crate::config::{CcArgs, LinkArgs, LinkConfig};
use crate::protocol::CC_FRAME_LIMIT;
use crate::state::State;
use crate::{session, tools};
use bridge_core::bridge::BuildError;
use bridge_core::link::{self, LinkError, ListenLimits, MissingOrigin, OriginPolicy, WsConfig};
use bridge_core::serve::{McpArgs, ServeError, Transport, check_exposure, run_alone};
use bridge_core::{Bridge, BridgeEntry, BridgeEnv, BridgeError};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const INSTRUCTIONS: &str = "Tools for ComputerCraft (CC:Tweaked) computers and turtles in a Minecraft world. Start \
with probe-computers or list_computers to learn the computer ids; every other tool takes a `computer` id. run_lua \
runs arbitrary Lua on a computer; fs_* manage its files; turtle_* move and act with turtles; peripheral_* and \
redstone_* reach attached devices. Computers link, unlink and forward events (redstone, turtle inventory, \
peripherals) on the event streams `computercraft://events/computers` and `computercraft://events/computer_events`; \
read them with poll_events.";

/// A world can hold thousands of computers, each holding one connection for its link; the installer's GETs
/// and the handshake of a computer that never says hello are bounded by the deadlines. Every computer of a
/// world connects from its Minecraft server's address, so the cap per address is the whole cap.
const LINK_LIMITS: ListenLimits = ListenLimits {
    max_connections: 4096,
    max_per_ip: 4096,
    ..ListenLimits::DEFAULT
};

#[derive(Debug, thiserror::Error)]
pub enum CcError {
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("building the MCP bridge failed: {0}")]
    Build(#[from] BuildError),
    #[error("link listener: {0}")]
    Io(#[from] std::io::Error),
    #[error("link listener task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// A started bridge: serve `bridge` over MCP however you like; the link listener runs until shutdown.
pub struct Running {
    pub bridge: Bridge,
    pub link_addr: SocketAddr,
    pub state: Arc<State>,
    pub link: JoinHandle<Result<(), LinkError>>,
}

/// Starts the link listener on `listener` and builds the MCP bridge. Tests bind `127.0.0.1:0`.
pub async fn start(
    cfg: LinkConfig,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<Running, CcError> {
    let link_addr = listener.local_addr()?;
    let mut b = Bridge::builder("computercraft", env!("CARGO_PKG_VERSION"));
    b.instructions(INSTRUCTIONS);
    // An 8 MiB fs_write travels in one request: base64 makes it 10.7 MiB, over HTTP's default body limit, and
    // JSON's escapes of text up to twice that.
    b.max_request_bytes(2 * crate::tools::fs::MAX_WRITE_CONTENT_BYTES + (1 << 20));
    let state = State::new(cfg.clone(), link_addr, &b.events());
    tools::register(&mut b, &state);
    let st = state.clone();
    b.health(move || {
        json!({
            "ok": true,
            "computers": st.registry.len(),
            "malformed_frames": st.malformed_frames(),
            "reassembly_bytes": st.reassembly_bytes(),
            "refused_links": st.refused_links(),
            // Only while the dispute lasts: an id leaves the list when its holder's link goes.
            "duplicate_ids": st.disputes().iter()
                .map(|(id, n)| json!({"id": id, "refusals": n}))
                .collect::<Vec<_>>(),
        })
    });
    let bridge = b.build()?;

    // CC sends no Origin; a request with one comes from a web page and has no business on this port.
    let mut ws = WsConfig::new(OriginPolicy::new(
        Vec::<String>::new(),
        MissingOrigin::Accept,
    )?);
    ws.token = cfg.token.clone();
    ws.max_frame_bytes = CC_FRAME_LIMIT + 1024;
    ws.ping_interval = cfg.ping_interval;
    ws.pong_timeout = cfg.pong_timeout;
    ws.shutdown = shutdown.clone();
    let st = state.clone();
    // A minimal client may open `ws://host:port` itself; the shipped client uses `/link`. `/` also serves the
    // index page to a browser, so plain GETs there fall through to the pages.
    let router = link::ws_routes(
        ws,
        &["/", LINK_PATH],
        move |conn| {
            tokio::spawn(session::run(st.clone(), conn));
        },
        Some(assets::routes(cfg.public_url.clone())),
    );
    let limits = ListenLimits {
        handshake_timeout: cfg.listen_handshake_timeout,
        idle_timeout: cfg.listen_idle_timeout,
        ..LINK_LIMITS
    };
    let link = tokio::spawn(link::serve_with(listener, router, limits, shutdown));
    Ok(Running {
        bridge,
        link_addr,
        state,
        link,
    })
}

/// The ComputerCraft bridge as the binary runs it: alone (`mcp-bridges computercraft`) or beside others
/// (`serve`).
pub struct ComputerCraft;

impl BridgeEntry for ComputerCraft {
    const NAME: &'static str = "computercraft";
    // One rule for every bridge: a host that launches it over a pipe is answered on stdio at once; HTTP, which
    // this bridge's users reach it by too, is served beside it when its port is free (`Both` never lets a busy
    // port fail stdio), and alone when stdin is closed from the start (a service).
    const DEFAULT_TRANSPORT: Transport = Transport::Both;
    const ENV_ALIASES: &'static [(&'static str, &'static str)] = crate::config::ENV_ALIASES;
    type Args = LinkArgs;
    type Command = CcArgs;

    fn mcp(command: &CcArgs) -> &McpArgs {
        &command.mcp
    }

    async fn start(args: LinkArgs, env: &BridgeEnv) -> Result<Bridge, BridgeError> {
        let addr = SocketAddr::new(args.host, args.port);
        // Checked before binding: a refused address must not even be listened on for a moment.
        let token_set = args.token.as_deref().is_some_and(|t| !t.is_empty());
        check_exposure(
            "the ComputerCraft link",
            args.host,
            "--computercraft-link-host (COMPUTERCRAFT_LINK_HOST)",
            token_set,
            "--computercraft-link-token (COMPUTERCRAFT_LINK_TOKEN, then install with `wget run http://<host>:<port>/install.lua <token>`)",
        )?;
        let listener = link::bind(
            addr,
            "another mcp-bridges computercraft",
            "COMPUTERCRAFT_LINK_PORT (--computercraft-link-port)",
        )
        .await?;
        let local = listener.local_addr()?;
        let cfg = LinkConfig::from(&args);
        tracing::info!(
            "computers link at ws://{local}{LINK_PATH}; install in-game with: wget run http://<this-host>:{}/install.lua",
            local.port()
        );
        // The computers' links outlive the start of shutdown: calls in flight still need them.
        let running = start(cfg, listener, env.links().clone()).await?;
        let link = running.link;
        env.spawn(async move {
            match link.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "the computers' link listener failed"),
                Err(e) => tracing::error!(error = %e, "the computers' link listener task failed"),
            }
        });
        Ok(running.bridge)
    }

    async fn run(command: CcArgs) -> Result<(), BridgeError> {
        run_alone::<Self>(&command.mcp, command.link).await
    }
}
