//! Binding and serving the link port.
//!
//! Port clashes are the most common start-up failure for game bridges (bitburner-filesync, viteburner and the
//! Bitburner templates all default to 12525), so `bind` turns EADDRINUSE into a message that names the likely
//! culprit and the setting to change.

use super::error::LinkError;
use axum::Router;
use axum::serve::ListenerExt;
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

/// Serves `router` until `shutdown` is cancelled, then stops accepting and lets HTTP requests finish.
/// Sets `TCP_NODELAY` on every accepted socket (request/response links suffer from Nagle's delay) and records
/// each peer's address for [`WsConnection::peer`](super::WsConnection::peer).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> Result<(), LinkError> {
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "could not set TCP_NODELAY");
        }
    });
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown.cancelled_owned())
    .await
    .map_err(LinkError::from)
}
