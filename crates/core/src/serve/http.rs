//! Streamable HTTP at `/mcp`, with `/health` and `/metrics` beside it.

use super::ServeError;
use super::handler::{McpHandler, Shared};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Origins a local browser page may call from; anything else is DNS rebinding or a foreign site.
const LOCAL_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];
const LOCAL_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];

/// Security settings of the HTTP transport.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Required as `Authorization: Bearer <token>` on `/mcp` when set.
    pub token: Option<String>,
    /// Origins allowed besides the local ones.
    pub extra_origins: Vec<String>,
    /// Host header values allowed besides the local ones.
    pub extra_hosts: Vec<String>,
    /// How long in-flight requests may run after shutdown starts.
    pub shutdown_grace: Duration,
}

#[derive(Clone)]
struct AppState {
    shared: Arc<Shared>,
    token: Option<Arc<str>>,
}

pub(crate) async fn serve(
    shared: Arc<Shared>,
    listener: TcpListener,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    // Not a child of `shutdown`: in-flight calls must outlive the start of shutdown by the grace period.
    let service_token = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(service_token.clone())
        .with_legacy_session_mode(true)
        // Plain JSON replies for 2026-07-28 requests (legacy sessions keep SSE; a call that reports progress
        // switches to SSE by itself): half the client work per call, measured in bench/.
        .with_json_response(true)
        .with_allowed_hosts(
            LOCAL_HOSTS
                .iter()
                .map(|h| h.to_string())
                .chain(options.extra_hosts.iter().cloned()),
        )
        .with_allowed_origins(
            LOCAL_ORIGINS
                .iter()
                .map(|o| o.to_string())
                .chain(options.extra_origins.iter().cloned()),
        );
    let factory_shared = shared.clone();
    let drain = shared.drain.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(McpHandler::new(factory_shared.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let state = AppState {
        shared,
        token: options.token.as_deref().map(Arc::from),
    };
    let mcp_routes = Router::new()
        .nest_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(
            drain.clone(),
            super::drain::hold_until_sent,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), require_token));
    let app = Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .with_state(state)
        .merge(mcp_routes);

    let listener = listener.tap_io(|socket| {
        // Without it, SSE replies stall ~40 ms on Nagle + delayed ACK (measured in reference/mcp-core.md §4.2).
        if let Err(e) = socket.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY not set: {e}");
        }
    });
    let grace = options.shutdown_grace;
    let graceful = {
        let shutdown = shutdown.clone();
        async move { shutdown.cancelled().await }
    };
    let server = axum::serve(listener, app)
        .with_graceful_shutdown(graceful)
        .into_future();
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => return result.map_err(ServeError::Io),
        () = shutdown.cancelled() => {}
    }
    // Stop accepting at once; let calls in flight finish within the grace period; then end the streams (an
    // open legacy-session stream would otherwise hold the server for the whole grace).
    tokio::select! {
        result = &mut server => {
            service_token.cancel();
            return result.map_err(ServeError::Io);
        }
        _ = drain.close(grace) => {}
    }
    service_token.cancel();
    if tokio::time::timeout(grace, &mut server).await.is_err() {
        tracing::warn!(
            "connections still open {} ms after the streams ended; closing them",
            grace.as_millis()
        );
    }
    Ok(())
}

async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(expected) = &state.token else {
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if presented.is_some_and(|p| constant_time_eq(p.as_bytes(), expected.as_bytes())) {
        return next.run(request).await;
    }
    tracing::warn!("rejected an MCP request without a valid bearer token");
    let mut response = (
        StatusCode::UNAUTHORIZED,
        "missing or wrong bearer token: send Authorization: Bearer <MCP_TOKEN>\n",
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Compares secrets without leaking through timing how long the matching prefix is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn health(State(state): State<AppState>) -> impl IntoResponse {
    let mut body = serde_json::Map::new();
    body.insert("status".into(), "ok".into());
    body.extend(state.shared.mount.health());
    axum::Json(serde_json::Value::Object(body))
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.shared.metrics.render(&state.shared.mount),
    )
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
