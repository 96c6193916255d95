//! Links to live systems: transports, framings, and one peer layer above them.
//!
//! Every bridge talks to a live system over some link, and every link has the same failure modes: the peer
//! vanishes without a close, answers late or never, answers out of order, sends more than it should, or is
//! not who it claims to be. The `bridge-link` crate solves those once, with no MCP and no HTTP server, and
//! this module re-exports all of it; what needs an HTTP server stays here:
//!
//! | layer | what | where |
//! |---|---|---|
//! | transports | WebSocket listen ([`ws_router`]/[`ws_routes`] + [`bind`] + [`serve`]), WebSocket dial ([`dial::websocket`]), TCP ([`dial::tcp`]), Unix socket ([`dial::unix`]), child stdio ([`dial::child`]); [`redial`] keeps a dialled link up with [`Backoff`] (exponential, ±20% jitter) | the listener (axum) in `ws.rs`, `listen.rs`; the rest in `bridge-link` |
//! | framings | WebSocket messages; [`Framing::Lines`] (newline JSON), [`Framing::ContentLength`] (DAP/LSP), [`Framing::LengthPrefixed`] (u32 big-endian); each with a max frame size in bytes, checked before buffering | `bridge-link` |
//! | link | whatever the transport, a [`Connection`]: a [`LinkSender`] (one writer task, bounded queue, close after flush, first close reason wins), bounded `incoming` frames, a `closed` token | `bridge-link` |
//! | peer | [`Peer`]: requests correlated by id ([`Correlator`]), a deadline each, every request failed at once with the close reason when the link drops ([`Peer::serve`]), liveness (WebSocket pings in the transport; [`Peer::watch`] probes elsewhere) | `bridge-link` |
//! | policies | [`SinglePeer`]: one peer, the newest wins (Bitburner). [`PeerRegistry`]: many by id, a held id replaced or, under [`OnDuplicate::RefuseIfLive`], kept by a holder that answers a probe (ComputerCraft) | `bridge-link` |
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

mod listen;
mod tool_error;
mod ws;

pub use crate::auth::{MissingOrigin, OriginPolicy};
pub use crate::net::ListenLimits;
// Everything that needs neither MCP nor an HTTP server lives in `bridge-link`, which programs outside MCP
// (the sandbox agent, game-side and host-side helpers) use alone.
pub use bridge_link::{
    Admission, Backoff, Connection, Correlator, Current, FrameCodec, FrameError, FrameReader,
    FrameWriter, Framing, INCOMING_BYTES, Incoming, LinkError, LinkSender, MAX_HEADER_BYTES,
    MAX_ID, OUTGOING_BYTES, OnDuplicate, Peer, PeerRegistry, Pending, Registered,
    SLOW_READER_PATIENCE, SinglePeer, StreamConfig, WsConnection, WsDial, WsSender, bind, child,
    dial, json_cost, log_limit, parse_id, redial, stream, tls, writers_finished,
};
pub use listen::{serve, serve_guarded, serve_with, serve_with_tls};
pub use ws::{WsConfig, ws_router, ws_routes};
