//! Links to live systems: transports, framings, and one peer layer above them.
//!
//! Every bridge talks to a live system over some link, and every link has the same failure modes: the peer
//! vanishes without a close, answers late or never, answers out of order, sends more than it should, or is
//! not who it claims to be. This module solves those once, so a bridge only speaks its protocol:
//!
//! | layer | what | where |
//! |---|---|---|
//! | transports | WebSocket listen ([`ws_router`]/[`ws_routes`] + [`bind`] + [`serve`]), WebSocket dial ([`dial::websocket`]), TCP ([`dial::tcp`]), Unix socket ([`dial::unix`]), child stdio ([`dial::child`]); [`redial`] keeps a dialled link up with [`Backoff`] (exponential, ±20% jitter) | `ws.rs`, `session.rs`, `dial.rs`, `listen.rs` |
//! | framings | WebSocket messages; [`Framing::Lines`] (newline JSON), [`Framing::ContentLength`] (DAP/LSP), [`Framing::LengthPrefixed`] (u32 big-endian); each with a max frame size in bytes, checked before buffering | `bridge-link` (`crates/link`), `stream.rs` |
//! | link | whatever the transport, a [`Connection`]: a [`LinkSender`] (one writer task, bounded queue, close after flush, first close reason wins), bounded `incoming` frames, a `closed` token | `sender.rs` |
//! | peer | [`Peer`]: requests correlated by id ([`Correlator`]), a deadline each, every request failed at once with the close reason when the link drops ([`Peer::serve`]), liveness (WebSocket pings in the transport; [`Peer::watch`] probes elsewhere) | `peer.rs`, `correlator.rs` |
//! | policies | [`SinglePeer`]: one peer, the newest wins (Bitburner). [`PeerRegistry`]: many by id, a held id replaced or, under [`OnDuplicate::RefuseIfLive`], kept by a holder that answers a probe (ComputerCraft) | `policy.rs` |
//!
//! Listeners are guarded by `crate::net` (connection cap, handshake and idle deadlines: [`ListenLimits`])
//! and `crate::auth` (one origin grammar and one constant-time token check, shared with the MCP HTTP port).
//!
//! Bounds, in bytes, on what a peer can make the bridge hold: one frame ≤ the framing's or socket's
//! `max_frame_bytes`; frames queued towards the bridge ≤ [`INCOMING_BYTES`] per link plus the one frame
//! the reader holds; a `Content-Length` header block ≤
//! [`MAX_HEADER_BYTES`]; pending requests are the bridge's own, one entry each.
//!
//! Errors are [`LinkError`]; `ToolError::from(link_error)` gives the agent-facing form (`E_DISCONNECTED`,
//! `E_TIMEOUT`, `E_TOO_LARGE`, ...).
//!
//! A typical dial-in bridge, per connection: `let peer = Peer::new(conn.sender)`, publish it under a policy
//! (`SinglePeer::run` does install + serve + forget), parse each incoming frame and [`Peer::resolve`] answers
//! by [`parse_id`]; tools call [`Peer::request`].

mod backoff;
mod correlator;
pub mod dial;
mod error;
mod listen;
mod peer;
mod policy;
mod sender;
mod session;
pub mod stream;
pub mod tls;
mod ws;

pub use crate::auth::{MissingOrigin, OriginPolicy};
pub use crate::net::ListenLimits;
pub use backoff::Backoff;
pub use correlator::{Correlator, MAX_ID, Pending, parse_id};
pub use dial::{WsDial, redial};
pub use error::LinkError;
// The framings live in the `bridge-link` crate, which programs outside MCP (the sandbox agent) use alone.
pub use bridge_link::{
    FrameCodec, FrameError, FrameReader, FrameWriter, Framing, MAX_HEADER_BYTES,
};
pub use listen::{bind, serve, serve_guarded, serve_with, serve_with_tls};
pub use peer::Peer;
pub use policy::{Admission, Current, OnDuplicate, PeerRegistry, Registered, SinglePeer};
pub use sender::{
    Connection, INCOMING_BYTES, Incoming, LinkSender, OUTGOING_BYTES, SLOW_READER_PATIENCE,
    writers_finished,
};
pub use session::{WsConnection, WsSender};
pub use stream::StreamConfig;
pub use ws::{WsConfig, ws_router, ws_routes};
