//! WebSocket listener for live systems that dial in (Bitburner, ComputerCraft).
//!
//! Built on axum's `WebSocketUpgrade` so a bridge can serve plain HTTP routes on the same port (the
//! ComputerCraft bridge serves its Lua installer beside the socket). Checks happen before the upgrade, so a
//! refused client gets a real HTTP status (403 origin, 401 token) with a plain-text reason. What happens
//! after the upgrade is `bridge_link::session`, shared with dialled links.

use crate::auth::{Access, OriginPolicy, Token};
use crate::net::Conn;
use axum::Router;
use axum::extract::ws::{
    CloseFrame, Message, WebSocketUpgrade, rejection::WebSocketUpgradeRejection,
};
use axum::extract::{FromRequestParts, Query, Request};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bridge_link::session::{
    self, Accepted, CLOSE_INTERNAL, Timing, WsConnection, WsFailure, WsIn, WsOut,
};
use futures::{SinkExt, StreamExt, future};
use http::header;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// Per-link socket read buffer.
const READ_BUFFER_BYTES: usize = 8 << 10;

/// Listener settings. Build with [`WsConfig::new`] and adjust the fields.
#[derive(Debug, Clone)]
pub struct WsConfig {
    /// Which `Origin` headers may connect.
    pub origins: OriginPolicy,
    /// When set, the client must send it as `Authorization: Bearer <token>` or as `?token=<token>`.
    pub token: Option<String>,
    /// Largest frame or message accepted from the peer; a bigger one closes the link (code 1009).
    pub max_frame_bytes: usize,
    /// How often the watchdog pings. `Duration::ZERO` turns liveness checks off.
    pub ping_interval: Duration,
    /// How long after a ping the peer has to show any sign of life.
    pub pong_timeout: Duration,
    /// Cancelling it closes every link of this router (code 1001). Pass the token given to
    /// [`serve`](super::serve), because HTTP graceful shutdown does not wait for upgraded connections.
    pub shutdown: CancellationToken,
}

impl WsConfig {
    /// No token, 16 MiB frames, a ping every 15 s answered within 10 s.
    pub fn new(origins: OriginPolicy) -> Self {
        Self {
            origins,
            token: None,
            max_frame_bytes: 16 << 20,
            ping_interval: Duration::from_secs(15),
            pong_timeout: Duration::from_secs(10),
            shutdown: CancellationToken::new(),
        }
    }
}

struct Shared<F> {
    cfg: WsConfig,
    access: Access,
    on_connect: F,
}

/// A router serving the WebSocket endpoint at `path`; merge it with other routes freely. Every accepted link
/// is passed to `on_connect`, which should hand it to a task and return quickly.
pub fn ws_router<F>(cfg: WsConfig, path: &str, on_connect: F) -> Router
where
    F: Fn(WsConnection) + Clone + Send + Sync + 'static,
{
    ws_routes(cfg, &[path], on_connect, None)
}

/// Like [`ws_router`], at several paths, with `pages` serving everything else: a plain GET (not a WebSocket
/// upgrade) to one of `paths` goes to `pages` too, so a path can carry both a page and the link (the
/// ComputerCraft bridge's index page and the link at `/`). Only upgrades pass the origin and token checks
/// here; `pages` are served as they are.
pub fn ws_routes<F>(cfg: WsConfig, paths: &[&str], on_connect: F, pages: Option<Router>) -> Router
where
    F: Fn(WsConnection) + Clone + Send + Sync + 'static,
{
    let access = Access {
        token: cfg.token.as_deref().map(Token::new),
        token_hint: "Authorization: Bearer <token> or ?token=<token>",
        ..Access::origins(cfg.origins.clone())
    };
    let shared = Arc::new(Shared {
        cfg,
        access,
        on_connect,
    });
    let mut router = Router::new();
    for path in paths {
        let shared = Arc::clone(&shared);
        let pages = pages.clone();
        router = router.route(
            path,
            get(move |request: Request| {
                let shared = Arc::clone(&shared);
                let pages = pages.clone();
                async move {
                    let (mut parts, body) = request.into_parts();
                    let ws = WebSocketUpgrade::from_request_parts(&mut parts, &()).await;
                    match (ws, pages) {
                        (Err(_), Some(pages)) => {
                            match pages.oneshot(Request::from_parts(parts, body)).await {
                                Ok(response) => response,
                                Err(never) => match never {},
                            }
                        }
                        (ws, _) => accept(shared, parts, ws),
                    }
                }
            }),
        );
    }
    match pages {
        Some(pages) => router.fallback_service(pages),
        None => router,
    }
}

fn accept<F>(
    shared: Arc<Shared<F>>,
    parts: http::request::Parts,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response
where
    F: Fn(WsConnection) + Clone + Send + Sync + 'static,
{
    let conn = parts
        .extensions
        .get::<axum::extract::ConnectInfo<Conn>>()
        .map(|c| c.0.clone());
    let peer = conn.as_ref().map(Conn::peer);
    let mut query = Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
        .map(|q| q.0)
        .unwrap_or_default();
    let query_token = query.remove("token");
    if let Err(refusal) = shared
        .access
        .check(&parts.uri, &parts.headers, query_token.as_deref())
    {
        tracing::warn!(?peer, status = %refusal.status, reason = %refusal.reason, "websocket refused");
        return refusal.into_response();
    }
    let origin = parts
        .headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => return rejection.into_response(),
    };
    let mut headers = parts.headers;
    headers.remove(header::AUTHORIZATION);
    let accepted = Accepted {
        peer,
        origin,
        headers,
        query,
    };
    let max = shared.cfg.max_frame_bytes;
    if let Some(conn) = &conn {
        conn.upgraded();
    }
    ws.max_message_size(max)
        .max_frame_size(max)
        // tungstenite's default read buffer is 128 KiB per link, zero-filled before every read: with a
        // thousand computers linked that was most of the bridge's memory and a third of its CPU. Larger
        // messages still arrive, assembled over several reads.
        .read_buffer_size(READ_BUFFER_BYTES)
        .on_failed_upgrade(move |e| tracing::warn!(?peer, error = %e, "websocket upgrade failed"))
        .on_upgrade(move |socket| async move {
            let cfg = &shared.cfg;
            let timing = Timing {
                ping_interval: cfg.ping_interval,
                pong_timeout: cfg.pong_timeout,
            };
            let (sink, stream) = socket.split();
            let stream = stream.map(|read| read.map(from_axum).map_err(classify_axum));
            let sink = sink
                .with(|out| future::ready(Ok::<_, axum::Error>(to_axum(out))))
                .sink_map_err(|e| e.to_string());
            let (conn, reader) = session::start(stream, sink, accepted, &cfg.shutdown, timing);
            (shared.on_connect)(conn);
            reader.await;
        })
}

fn from_axum(msg: Message) -> WsIn {
    match msg {
        Message::Text(text) => WsIn::Text(text.as_str().to_owned()),
        Message::Binary(data) => WsIn::Binary(data.len()),
        Message::Ping(_) | Message::Pong(_) => WsIn::Control,
        Message::Close(frame) => WsIn::Close(frame.map(|f| (f.code, f.reason.as_str().to_owned()))),
    }
}

fn to_axum(out: WsOut) -> Message {
    match out {
        WsOut::Text(text) => Message::Text(text.into()),
        WsOut::Ping => Message::Ping(Default::default()),
        WsOut::Close(frame) => Message::Close(frame.map(|(code, reason)| CloseFrame {
            code,
            reason: reason.into(),
        })),
    }
}

fn classify_axum(e: axum::Error) -> WsFailure {
    let inner = e.into_inner();
    match inner.downcast_ref::<tungstenite::Error>() {
        Some(e) => session::classify(e),
        None => (Some(CLOSE_INTERNAL), format!("websocket error: {inner}")),
    }
}
