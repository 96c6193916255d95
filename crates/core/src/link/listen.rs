//! Binding and serving the link port.
//!
//! Port clashes are the most common start-up failure for game bridges (bitburner-filesync, viteburner and the
//! Bitburner templates all default to 12525), so `bind` turns EADDRINUSE into a message that names the likely
//! culprit and the setting to change.

use super::error::LinkError;
use crate::net::{self, GuardedListener, ListenLimits, ListenStats};
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Binds a TCP listener. `what` names what else may hold the port (e.g. "bitburner-filesync or
/// viteburner"), `env_var` how to pick another (e.g. "BITBURNER_PORT / --port"); both appear in the
/// [`LinkError::AddrInUse`] message.
pub async fn bind(addr: SocketAddr, what: &str, env_var: &str) -> Result<TcpListener, LinkError> {
    TcpListener::bind(addr).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            LinkError::AddrInUse {
                addr,
                what: what.to_owned(),
                env_var: env_var.to_owned(),
            }
        } else {
            LinkError::Bind {
                addr,
                source: Arc::new(e),
            }
        }
    })
}

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
/// [`super::tls::server_config`]). The TLS handshake counts against the handshake deadline.
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
