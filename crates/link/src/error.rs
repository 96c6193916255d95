//! What can go wrong on a link, typed so bridges can branch on it (bridge-core maps each to the stable code
//! an agent sees).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A failure of a link to a live system.
///
/// `Clone` because one link drop fails many waiting requests with the same error; I/O errors are held in an
/// `Arc` for that reason.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LinkError {
    /// The link is down, or dropped while the request was in flight.
    #[error("link disconnected: {reason}")]
    Disconnected { reason: String },
    /// The live system did not answer in time.
    #[error("no answer within {} ms", elapsed.as_millis())]
    Timeout { elapsed: Duration },
    /// A frame for the peer exceeds the link's frame limit; nothing was sent.
    #[error("a frame of {size} bytes exceeds the link's limit of {limit} bytes")]
    FrameTooLarge { size: usize, limit: usize },
    /// From [`LinkSender::try_send_text`](crate::LinkSender::try_send_text): the writer is behind.
    #[error("the link's send queue is full")]
    QueueFull,
    /// Dialling the peer failed (refused, unreachable, the program would not start...).
    #[error("cannot connect to {target}: {reason}")]
    Connect { target: String, reason: String },
    /// The listening port is taken. `what` names the likely holder, `env_var` how to choose another port, so
    /// the message tells the user both.
    #[error(
        "port {} on {} is already in use (is {what} running?); choose another with {env_var}",
        addr.port(),
        addr.ip()
    )]
    AddrInUse {
        addr: SocketAddr,
        what: String,
        env_var: String,
    },
    /// Listening failed for another reason (permission, address not available...).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: Arc<io::Error>,
    },
    /// An origin allow-list entry could not be understood; a configuration error.
    #[error("invalid origin pattern {pattern:?}: {reason}")]
    InvalidOriginPattern { pattern: String, reason: String },
    /// The link's listener or server failed.
    #[error("link server failed: {0}")]
    Io(Arc<io::Error>),
}

impl LinkError {
    pub fn disconnected(reason: impl Into<String>) -> Self {
        Self::Disconnected {
            reason: reason.into(),
        }
    }
}

impl From<io::Error> for LinkError {
    fn from(e: io::Error) -> Self {
        Self::Io(Arc::new(e))
    }
}
