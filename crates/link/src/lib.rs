//! The framing layer of mcp-bridges' links, apart from MCP hosting: how a byte stream is cut into text
//! frames ([`Framing`], [`FrameCodec`]), each with a maximum size checked before it is buffered, and an
//! async reader and writer of frames over any tokio byte stream ([`FrameReader`], [`FrameWriter`]).
//!
//! `bridge-core` re-exports all of it as `bridge_core::link::{Framing, FrameCodec, ...}` and builds its
//! transports, peers and registry on top. A program that only speaks a framed protocol (the sandbox agent,
//! PID 1 of every sandbox; a game-side helper) depends on this crate alone: no rmcp, axum, rustls or clap.

mod framing;
mod io;

pub use framing::{FrameCodec, FrameError, Framing, MAX_HEADER_BYTES};
pub use io::{FrameReader, FrameWriter};
