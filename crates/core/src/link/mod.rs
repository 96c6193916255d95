//! Links to live systems: WebSocket listener, request correlator, reconnect backoff.
//!
//! Every bridge talks to a live system over some link, and every link has the same failure modes: the peer
//! vanishes without a close, answers late or never, answers out of order, or is not who it claims to be. This
//! module solves those once so bridges only speak their protocol:
//!
//! - [`ws_router`] + [`bind`] + [`serve`]: a WebSocket endpoint for systems that dial in, with an origin
//!   allow-list ([`OriginPolicy`]), an optional token, a frame size limit and ping-based liveness. Each link
//!   arrives as a [`WsConnection`]: a [`WsSender`], a stream of text frames, and a token cancelled when the
//!   link dies.
//! - [`Correlator`]: integer request ids (1, 2, 3, ... below 2^53, safe for JavaScript peers), one waiter per
//!   id, per-request timeout, all waiters failed at once with [`LinkError::Disconnected`] when the link drops,
//!   unknown ids logged and dropped, and no entry outlives its waiter.
//! - [`Backoff`]: exponential reconnect delays with ±20% jitter for links the bridge dials out.
//!
//! Errors are [`LinkError`]; `ToolError::from(link_error)` gives the agent-facing form
//! (`E_DISCONNECTED`, `E_TIMEOUT`, ...).
//!
//! A typical dial-in bridge, per connection: make a `Correlator`, publish it with the `WsSender` as the
//! current link, loop over `incoming` resolving answers by [`parse_id`], and when `incoming` ends call
//! `correlator.close(sender.disconnected())` so every request in flight fails at once.

mod backoff;
mod correlator;
pub mod dial;
mod error;
mod framing;
mod listen;
mod peer;
mod policy;
mod sender;
mod session;
pub mod stream;
mod ws;

pub use crate::auth::{MissingOrigin, OriginPolicy};
pub use crate::net::ListenLimits;
pub use backoff::Backoff;
pub use correlator::{Correlator, MAX_ID, Pending, parse_id};
pub use dial::{WsDial, redial};
pub use error::LinkError;
pub use framing::{FrameCodec, FrameError, Framing, MAX_HEADER_BYTES};
pub use listen::{bind, serve, serve_with};
pub use peer::Peer;
pub use policy::{Admission, Current, OnDuplicate, PeerRegistry, Registered, SinglePeer};
pub use sender::{Connection, LinkSender};
pub use session::{WsConnection, WsSender};
pub use stream::StreamConfig;
pub use ws::{WsConfig, ws_router, ws_routes};
