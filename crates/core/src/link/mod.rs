//! Links to live systems: WebSocket listener, request correlator, reconnect backoff.
//!
//! Every bridge talks to a live system over some link, and every link has the same failure modes: the peer
//! vanishes without a close, answers late or never, answers out of order, or is not who it claims to be. This
//! module solves those once so bridges only speak their protocol:
//!
//! - [`Correlator`]: integer request ids (1, 2, 3, ... below 2^53, safe for JavaScript peers), one waiter per
//!   id, per-request timeout, all waiters failed at once with [`LinkError::Disconnected`] when the link drops,
//!   unknown ids logged and dropped, and no entry outlives its waiter.
//! - [`Backoff`]: exponential reconnect delays with ±20% jitter for links the bridge dials out.
//!
//! Errors are [`LinkError`]; `ToolError::from(link_error)` gives the agent-facing form
//! (`E_DISCONNECTED`, `E_TIMEOUT`, ...).

mod backoff;
mod correlator;
mod error;

pub use backoff::Backoff;
pub use correlator::{Correlator, MAX_ID, Pending, parse_id};
pub use error::LinkError;
