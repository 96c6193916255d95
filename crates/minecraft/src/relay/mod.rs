//! The relay (the design's Bridge Server): one WebSocket listener for game adapters and MCP servers alike, the
//! token deciding the role; `/health` and `/metrics` on the same port. `PROTOCOL.md` is its contract.

pub mod audit;
pub mod bus;
pub mod config;
pub mod conn;
pub mod decoding;
pub mod queue;
pub mod rate;
pub mod state;

pub use config::{McpToken, McpTokens, RelayArgs};
pub use state::{Relay, Settings};

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bridge_core::auth::{HostPolicy, Token, bearer, request_host};
use bridge_core::link::tls::{self, TlsError};
use bridge_core::link::{
    LinkError, ListenLimits, MissingOrigin, OriginPolicy, WsConfig, bind, serve_guarded, ws_routes,
};
use bridge_core::net::{GuardedListener, ListenStats};
use conn::{ROLE_HEADER, Role};
use http::{HeaderValue, StatusCode, header};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("{0}")]
    Link(#[from] LinkError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Bus(#[from] bus::BusError),
}

/// A running relay.
pub struct RelayHandle {
    /// Where it listens (the real port when 0 was asked for).
    pub addr: SocketAddr,
    pub relay: Relay,
    /// Ends after `stop` was cancelled and the relay drained.
    pub task: JoinHandle<()>,
}

/// Every token the relay knows, and the role each gives.
struct Tokens {
    game: Option<Token>,
    mcp: Vec<Token>,
    /// /health and /metrics answer without a token to a request for a loopback `Host` (the relay listens on
    /// loopback only). `None`: they need a token.
    open_pages: Option<HostPolicy>,
}

impl Tokens {
    /// Compares `presented` with every token, without stopping at the first match, so timing says nothing
    /// about which one (or how much of one) matched.
    fn role(&self, presented: &str) -> Option<Role> {
        let mut found = None;
        if let Some(game) = &self.game
            && game.matches(presented)
        {
            found = Some(Role::Game);
        }
        for (i, t) in self.mcp.iter().enumerate() {
            if t.matches(presented) && found.is_none() {
                found = Some(Role::Mcp(i));
            }
        }
        found
    }
}

/// The relay's settings from its flags, with `extra` MCP tokens (the in-process MCP server's own).
pub fn settings(args: &RelayArgs, extra: Vec<McpToken>) -> Result<Settings, RelayError> {
    let tls = tls_config(args)?;
    let Some(game_token) = args.minecraft_token.clone() else {
        return Err(RelayError::Config(
            "set MINECRAFT_AUTH_TOKEN (--minecraft-auth-token): the token game adapters present to the relay"
                .to_owned(),
        ));
    };
    let mut mcp_tokens = args.mcp_tokens.clone().unwrap_or_default().0;
    mcp_tokens.extend(extra);
    if mcp_tokens.iter().any(|t| t.token == game_token) {
        return Err(RelayError::Config(
            "MINECRAFT_AUTH_TOKEN is also in MINECRAFT_MCP_AUTH_TOKENS: the token decides the role, so they must differ"
                .to_owned(),
        ));
    }
    Ok(Settings {
        mcp_tokens,
        minecraft_token: Some(game_token),
        queue_size: args.queue_size,
        queue_bytes: args.queue_bytes,
        clients_per_token: args.clients_per_token,
        token_queue_bytes: args.token_queue_bytes,
        heartbeat: args.heartbeat,
        command_timeout: args.command_timeout,
        drain_grace: args.drain_grace,
        max_message_bytes: args.max_message_bytes,
        max_assembling_bytes: args.max_assembling_bytes,
        max_decoding_bytes: args.max_decoding_bytes,
        mcp_rate: args.mcp_rate,
        game_rate: args.game_rate,
        mcp_token_rate: args.mcp_token_rate,
        game_command_rate: args.game_command_rate,
        games_event_rate: args.games_event_rate,
        retention: args.retention,
        tls,
    })
}

/// `--tls-cert` and `--tls-key` read and checked now, so a bad file stops the start, not the first client.
fn tls_config(args: &RelayArgs) -> Result<Option<Arc<tls::ServerConfig>>, RelayError> {
    const CERT: &str = "--tls-cert (RELAY_TLS_CERT)";
    const KEY: &str = "--tls-key (RELAY_TLS_KEY)";
    let (cert, key) = match (&args.tls_cert, &args.tls_key) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (cert, key),
        (Some(_), None) => {
            return Err(RelayError::Config(format!(
                "{CERT} is set but {KEY} is not: wss:// needs both the certificate and its private key"
            )));
        }
        (None, Some(_)) => {
            return Err(RelayError::Config(format!(
                "{KEY} is set but {CERT} is not: wss:// needs both the certificate and its private key"
            )));
        }
    };
    tls::server_config(cert, key).map(Some).map_err(|e| {
        let flag = match &e {
            TlsError::Cert { .. } | TlsError::NoCert { .. } => CERT.to_owned(),
            TlsError::Key { .. } | TlsError::NoKey { .. } => KEY.to_owned(),
            _ => format!("{CERT} / {KEY}"),
        };
        RelayError::Config(format!("{flag}: {e}"))
    })
}

/// Binds and serves the relay until `stop` is cancelled; then it stops taking game events, gives connected
/// MCP servers `--drain-grace` to acknowledge what they hold, and closes.
pub async fn start(
    args: &RelayArgs,
    settings: Settings,
    stop: CancellationToken,
) -> Result<RelayHandle, RelayError> {
    let wanted = SocketAddr::new(args.host, args.port);
    let listener = bind(
        wanted,
        "another relay or mcp-bridges minecraft",
        "--relay-port / MINECRAFT_RELAY_PORT",
    )
    .await?;
    let addr = listener.local_addr()?;
    let relay = Relay::new(settings);
    if let Some(config) = bus::BusConfig::from_args(args) {
        let bus = bus::NatsBus::connect(config, relay.epoch()).await?;
        let _ = relay.inner.bus.set(bus);
    }
    let tokens = Arc::new(Tokens {
        game: relay.settings().minecraft_token.as_ref().map(Token::new),
        mcp: relay
            .settings()
            .mcp_tokens
            .iter()
            .map(|t| Token::new(&t.token))
            .collect(),
        open_pages: addr
            .ip()
            .is_loopback()
            .then(|| HostPolicy::localhost_and(std::iter::empty::<&str>()))
            .transpose()?,
    });
    let closing = CancellationToken::new();
    let mut ws = WsConfig::new(OriginPolicy::localhost(MissingOrigin::Accept));
    ws.max_frame_bytes = crate::wire::HARD_MAX_FRAME_BYTES;
    ws.ping_interval = relay.settings().heartbeat;
    ws.pong_timeout = relay.settings().heartbeat.min(Duration::from_secs(10));
    ws.shutdown = closing.clone();
    // Idle, refused and silent connections are closed promptly and one address holds a bounded share
    // (issue 22 item 4: 256 idle ones kept the games out for 117 s); `/metrics` counts each close.
    let limits = ListenLimits {
        max_connections: args.max_connections,
        max_per_ip: args.max_connections_per_ip,
        handshake_timeout: args.handshake_timeout,
        idle_timeout: args.idle_timeout,
    };
    let listen = Arc::new(ListenStats::default());
    let pages = {
        let health = relay.clone();
        let metrics = relay.clone();
        let listen = Arc::clone(&listen);
        Router::new()
            .route(
                "/health",
                get(move || {
                    let relay = health.clone();
                    async move { axum::Json(relay.health()) }
                }),
            )
            .route(
                "/metrics",
                get(move || {
                    let relay = metrics.clone();
                    let listen = Arc::clone(&listen);
                    async move {
                        (
                            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                            relay.metrics() + &listen.render("minecraft_relay_listener", &limits),
                        )
                    }
                }),
            )
    };
    let on_connect = {
        let relay = relay.clone();
        move |conn| {
            tokio::spawn(conn::serve_link(relay.clone(), conn));
        }
    };
    let router = ws_routes(ws, &["/", "/ws"], on_connect, Some(pages))
        .layer(middleware::from_fn_with_state(tokens, authorize));
    let tls = relay.settings().tls.clone();
    let (scheme, http) = if tls.is_some() {
        ("wss", "https")
    } else {
        ("ws", "http")
    };
    if !addr.ip().is_loopback() && tls.is_none() {
        tracing::warn!(
            "the relay listens on {addr}, beyond this machine: traffic is plain ws:// and readable on the \
             network; keep the tokens long and serve wss:// with --tls-cert and --tls-key"
        );
    }
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        protocol = crate::wire::VERSION,
        mcp_tokens = relay.settings().mcp_tokens.len(),
        queue = relay.settings().queue_size,
        queue_bytes = relay.settings().queue_bytes,
        "minecraft relay listening on {scheme}://{addr} (health: {http}://{addr}/health)"
    );
    let background = spawn_background(relay.clone(), closing.clone());
    if let Some(bus) = relay.bus() {
        bus.run_presence(&relay, closing.clone());
    }
    let drain = {
        let relay = relay.clone();
        let closing = closing.clone();
        async move {
            stop.cancelled().await;
            for game in relay.live_senders(true, false) {
                game.close("relay shutting down");
            }
            let deadline = tokio::time::Instant::now() + relay.settings().drain_grace;
            while !relay.connected_clients_drained() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            closing.cancel();
        }
    };
    let serve_closing = closing.clone();
    let relay_bus = relay.clone();
    let task = tokio::spawn(async move {
        let mut guarded = GuardedListener::new(listener, limits).with_stats(listen);
        if let Some(config) = tls {
            guarded = guarded.with_tls(config);
        }
        let served = tokio::spawn(serve_guarded(guarded, router, serve_closing));
        drain.await;
        if let Ok(Err(e)) = served.await {
            tracing::error!(error = %e, "the relay listener stopped");
        }
        if let Some(bus) = relay_bus.bus() {
            bus.stop();
        }
        background.abort();
    });
    Ok(RelayHandle { addr, relay, task })
}

/// Heartbeats to every link, and the sweep of forgotten queues.
fn spawn_background(relay: Relay, closing: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        let period = relay.settings().heartbeat;
        let mut beat = tokio::time::interval(period);
        beat.tick().await;
        loop {
            tokio::select! {
                () = closing.cancelled() => return,
                _ = beat.tick() => {}
            }
            relay.sweep();
            let text = crate::wire::Envelope::new(
                crate::wire::Kind::Heartbeat,
                format!("hb-{}", crate::wire::now_ms()),
                crate::wire::Source::Relay,
                serde_json::json!({}),
            )
            .to_text();
            // Never waited for: a link whose queue is full has traffic ahead of a heartbeat, or a peer that
            // reads nothing (dropped by its watchdog); a send per link per beat used to pile up on such a link.
            for s in relay.live_senders(true, true) {
                let _ = s.try_send_text(text.clone());
            }
        }
    })
}

/// The token decides the role: an upgrade without a known bearer token is refused with 401 (AUTH_FAILED)
/// before any WebSocket exists. Plain pages (`/health`, `/metrics`) pass.
async fn authorize(
    State(tokens): State<Arc<Tokens>>,
    mut request: Request,
    next: Next,
) -> Response {
    request.headers_mut().remove(ROLE_HEADER);
    if !request.headers().contains_key(header::UPGRADE) {
        // The pages name clients, games and queue positions: beyond loopback they need a token too.
        if bearer(request.headers())
            .and_then(|t| tokens.role(t))
            .is_some()
        {
            return next.run(request).await;
        }
        if let Some(hosts) = &tokens.open_pages {
            // Open on loopback to local probes, not to a web page that rebinds its own name to 127.0.0.1 (DNS
            // rebinding): without a token, the Host must name loopback.
            let host = request_host(request.headers(), request.uri());
            return match host {
                Some(host) if hosts.allows(host) => next.run(request).await,
                _ => (
                    StatusCode::FORBIDDEN,
                    format!(
                        "Host {} is not allowed: without a token this relay's /health and /metrics answer only \
                         Host localhost, 127.0.0.1 or [::1] (DNS-rebinding protection); or send \
                         Authorization: Bearer <a game or MCP token>",
                        host.unwrap_or("(none)")
                    ),
                )
                    .into_response(),
            };
        }
        return (
            StatusCode::UNAUTHORIZED,
            "AUTH_FAILED: this relay listens beyond loopback; /health and /metrics need Authorization: Bearer <a game or MCP token>",
        )
            .into_response();
    }
    let role = bearer(request.headers()).and_then(|t| tokens.role(t));
    let Some(role) = role else {
        tracing::warn!("relay refused an upgrade: missing or wrong token (AUTH_FAILED)");
        return (
            StatusCode::UNAUTHORIZED,
            "AUTH_FAILED: missing or wrong token; send Authorization: Bearer <token>",
        )
            .into_response();
    };
    if let Ok(value) = HeaderValue::from_str(&role.header_value()) {
        request.headers_mut().insert(ROLE_HEADER, value);
    }
    next.run(request).await
}
