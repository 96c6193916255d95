//! Links to live systems, apart from MCP hosting: how a byte stream is cut into frames, and (with features)
//! the links, peers and registry every bridge builds on.
//!
//! Every bridge talks to a live system over some link, and every link has the same failure modes: the peer
//! vanishes without a close, answers late or never, answers out of order, sends more than it should, or is
//! not who it claims to be. This crate solves those once, so a bridge only speaks its protocol:
//!
//! | layer | what | feature |
//! |---|---|---|
//! | framings | [`Framing::Lines`] (newline JSON), [`Framing::ContentLength`] (DAP/LSP), [`Framing::LengthPrefixed`] (u32 big-endian), each with a max frame size in bytes checked before buffering; [`FrameReader`], [`FrameWriter`] over any tokio byte stream | default |
//! | transports | TCP (`dial::tcp`), Unix socket (`dial::unix`), child stdio (`dial::child`), any byte stream (`stream::spawn`); `redial` keeps a dialled link up with `Backoff` (exponential, ±20% jitter); `bind` names a port's likely holder | `peers` |
//! | link | whatever the transport, a `Connection`: a `LinkSender` (one writer task, bounded queue, close after flush, first close reason wins), bounded `incoming` frames, a `closed` token | `peers` |
//! | peer | `Peer`: requests correlated by id (`Correlator`), a deadline each, every request failed at once with the close reason when the link drops (`Peer::serve`), liveness (`Peer::watch` probes) | `peers` |
//! | policies | `SinglePeer`: one peer, the newest wins (Bitburner). `PeerRegistry`: many by id, a held id replaced or, under `OnDuplicate::RefuseIfLive`, kept by a holder that answers a probe (ComputerCraft) | `peers` |
//! | WebSocket | the tasks of one WebSocket link (pings, close handshake, frame limit) for any WebSocket implementation (`session`); dialling one (`dial::websocket`, `WsDial`); TLS on rustls/ring (`tls`) | `ws` |
//!
//! What is *not* here: the WebSocket listener (an HTTP server on axum), listener limits and the origin and
//! token checks live in `bridge-core`, which re-exports this whole crate as `bridge_core::link`. A program
//! that only speaks a framed protocol (the sandbox agent, PID 1 of every sandbox; a game-side or host-side
//! helper) depends on this crate with the features it uses: no rmcp, axum or hyper in any of them, and by
//! default no tokio runtime, TLS or WebSocket either (`tests/split.rs` checks it with `cargo tree`).
//!
//! Bounds, in bytes, on what a peer can make the bridge hold: one frame ≤ the framing's or socket's
//! `max_frame_bytes`; frames queued towards the bridge ≤ `INCOMING_BYTES` per link plus the one frame
//! the reader holds; a `Content-Length` header block ≤ [`MAX_HEADER_BYTES`]; pending requests are the
//! bridge's own, one entry each. What a frame decodes to is not bounded by its size: a bridge checks
//! [`json_cost::decoded_bytes`] before decoding one.

mod framing;
mod io;
pub mod json_cost;
pub mod log_limit;

pub use framing::{FrameCodec, FrameError, Framing, MAX_HEADER_BYTES};
pub use io::{FrameReader, FrameWriter};

#[cfg(feature = "peers")]
mod backoff;
#[cfg(feature = "peers")]
mod bind;
#[cfg(feature = "peers")]
pub mod child;
#[cfg(feature = "peers")]
mod correlator;
#[cfg(feature = "peers")]
pub mod dial;
#[cfg(feature = "peers")]
mod error;
#[cfg(feature = "peers")]
mod peer;
#[cfg(feature = "peers")]
mod policy;
#[cfg(feature = "peers")]
mod sender;
#[cfg(feature = "ws")]
pub mod session;
#[cfg(feature = "peers")]
pub mod stream;
#[cfg(feature = "ws")]
pub mod tls;

#[cfg(feature = "peers")]
pub use backoff::Backoff;
#[cfg(feature = "peers")]
pub use bind::bind;
#[cfg(feature = "peers")]
pub use correlator::{Correlator, MAX_ID, Pending, parse_id};
#[cfg(feature = "ws")]
pub use dial::WsDial;
#[cfg(feature = "peers")]
pub use dial::redial;
#[cfg(feature = "peers")]
pub use error::LinkError;
#[cfg(feature = "peers")]
pub use peer::Peer;
#[cfg(feature = "peers")]
pub use policy::{Admission, Current, OnDuplicate, PeerRegistry, Registered, SinglePeer};
#[cfg(feature = "peers")]
pub use sender::{
    Connection, INCOMING_BYTES, Incoming, LinkSender, OUTGOING_BYTES, SLOW_READER_PATIENCE,
    writers_finished,
};
#[cfg(feature = "ws")]
pub use session::{WsConnection, WsSender};
#[cfg(feature = "peers")]
pub use stream::StreamConfig;
