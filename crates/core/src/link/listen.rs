//! Serving the link port: an HTTP server (axum) under the listener limits of `crate::net`. Binding it is
//! `bridge_link::bind`, which names the likely holder of a busy port.

use crate::net::{self, GuardedListener, ListenLimits, ListenStats};
use axum::Router;
use bridge_link::LinkError;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Serves `router` until `shutdown` is cancelled, then stops accepting and lets HTTP requests finish, under
/// the default [`ListenLimits`] (see [`serve_with`]).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> Result<(), LinkError> {
    serve_with(listener, router, ListenLimits::default(), shutdown).await
}

/// Serves `router` under `limits`: a connection cap and handshake/idle deadlines (`crate::net`). Every
/// link holds one connection slot for its lifetime, so `max_connections` also caps the links.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    limits: ListenLimits,
    shutdown: CancellationToken,
) -> Result<(), LinkError> {
    serve_with_tls(listener, router, limits, None, shutdown).await
}

/// [`serve_with`], speaking TLS (`https://`, `wss://`) on every connection when `tls` is given (see
/// [`bridge_link::tls::server_config`]). The TLS handshake counts against the handshake deadline.
pub async fn serve_with_tls(
    listener: TcpListener,
    router: Router,
    limits: ListenLimits,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: CancellationToken,
) -> Result<(), LinkError> {
    // The MCP server's /metrics of this process lists this port's closes and limits (`link_listener_*`).
    let stats = Arc::new(ListenStats::default());
    if let Ok(addr) = listener.local_addr() {
        net::register(addr.to_string(), &stats, limits);
    }
    let mut guarded = GuardedListener::new(listener, limits).with_stats(stats);
    if let Some(config) = tls {
        guarded = guarded.with_tls(config);
    }
    serve_guarded(guarded, router, shutdown).await
}

/// Serves `router` on a listener built by the caller: one that counts into stats a `/metrics` route reads
/// (`GuardedListener::with_stats`), for instance.
pub async fn serve_guarded(
    guarded: GuardedListener,
    router: Router,
    shutdown: CancellationToken,
) -> Result<(), LinkError> {
    net::serve_until(guarded, router, shutdown)
        .await
        .map_err(LinkError::from)
}
