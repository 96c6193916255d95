//! Binding a link port.
//!
//! Port clashes are the most common start-up failure for game bridges (bitburner-filesync, viteburner and the
//! Bitburner templates all default to 12525), so `bind` turns EADDRINUSE into a message that names the likely
//! culprit and the setting to change.

use crate::error::LinkError;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

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
