//! The integration tests of `crates/sandbox`, one module per behaviour (each file beside this one), built as one
//! test binary: a binary per file linked every dependency again for each, which filled a CI machine's disk
//! (ARCHITECTURE.md, "Testing at the boundaries"). A file added here must be named below, which
//! `crates/cli/tests/test_binaries.rs` checks.

// Tests and their helpers may unwrap and panic: a failure is the test's verdict.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod agent_lookup;
mod attacks;
mod code_session;
mod containment;
mod expose;
mod firecracker;
mod host_paths;
mod images;
mod lifecycle;
mod limits;
mod microvm;
mod network;
mod pause;
mod templates;
mod tools;
mod workspace_transfer;
