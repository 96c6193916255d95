//! WebSocket listener for live systems that dial in (Bitburner, ComputerCraft).
//!
//! Built on axum's `WebSocketUpgrade` so a bridge can serve plain HTTP routes on the same port (the
//! ComputerCraft bridge serves its Lua installer beside the socket). Checks happen before the upgrade, so a
//! refused client gets a real HTTP status (403 origin, 401 token) with a plain-text reason. What happens
//! after the upgrade is in `session`.

use super::origin::OriginPolicy;
use super::session::{self, Accepted, Timing, WsConnection};
use axum::Router;
use axum::extract::Query;
use axum::extract::ws::{WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{StatusCode, header};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
    on_connect: F,
}

/// A router serving the WebSocket endpoint at `path`; merge it with other routes freely. Every accepted link
/// is passed to `on_connect`, which should hand it to a task and return quickly.
pub fn ws_router<F>(cfg: WsConfig, path: &str, on_connect: F) -> Router
where
    F: Fn(WsConnection) + Clone + Send + Sync + 'static,
{
    let shared = Arc::new(Shared { cfg, on_connect });
    Router::new().route(
        path,
        get(
            move |parts: http::request::Parts,
                  ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>| {
                let shared = Arc::clone(&shared);
                async move { accept(shared, parts, ws) }
            },
        ),
    )
}

fn accept<F>(
    shared: Arc<Shared<F>>,
    parts: http::request::Parts,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response
where
    F: Fn(WsConnection) + Clone + Send + Sync + 'static,
{
    let cfg = &shared.cfg;
    let peer = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let origin = match parts.headers.get(header::ORIGIN).map(|v| v.to_str()) {
        None => None,
        Some(Ok(o)) => Some(o.to_owned()),
        Some(Err(_)) => {
            return reject(
                StatusCode::FORBIDDEN,
                "origin header is not valid text",
                peer,
            );
        }
    };
    if !cfg.origins.allows(origin.as_deref()) {
        let why = match &origin {
            Some(o) => format!("origin {o} is not allowed"),
            None => "a request without an Origin header is not allowed".to_owned(),
        };
        return reject(StatusCode::FORBIDDEN, &why, peer);
    }
    let mut query = Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
        .map(|q| q.0)
        .unwrap_or_default();
    let query_token = query.remove("token");
    if let Some(expected) = &cfg.token {
        let bearer = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token);
        let ok = [bearer, query_token.as_deref()]
            .into_iter()
            .flatten()
            .any(|t| same_secret(t.as_bytes(), expected.as_bytes()));
        if !ok {
            let mut resp = reject(StatusCode::UNAUTHORIZED, "missing or wrong token", peer);
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
            return resp;
        }
    }
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
    let max = cfg.max_frame_bytes;
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
            session::run(socket, accepted, &cfg.shutdown, timing, |conn| {
                (shared.on_connect)(conn)
            })
            .await;
        })
}

fn reject(status: StatusCode, why: &str, peer: Option<SocketAddr>) -> Response {
    tracing::warn!(?peer, %status, reason = why, "websocket refused");
    (status, format!("{why}\n")).into_response()
}

fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Compares without an early exit, so response timing does not reveal how much of a guess was right.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
