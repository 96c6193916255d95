//! Listeners for tests that stop a server and start another on the same address.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;

/// A listener on `addr` again, once the one before has let it go: a dropped server closes its listener from
/// its own task, a moment later on a loaded machine. Panics on any other error, or if the address stays in
/// use for a minute (a hang guard, not a claim about speed).
pub async fn rebind(addr: SocketAddr) -> TcpListener {
    for _ in 0..3000 {
        match TcpListener::bind(addr).await {
            Ok(listener) => return listener,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("binding {addr} again: {e}"),
        }
    }
    panic!("{addr} stayed in use for a minute")
}
