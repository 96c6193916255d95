//! The integration tests of `crates/link`, one module per behaviour (each file beside this one), built as one test
//! binary: a binary per file linked every dependency again for each, which filled a CI machine's disk
//! (ARCHITECTURE.md, "Testing at the boundaries"). A file added here must be named below, which
//! `crates/cli/tests/test_binaries.rs` checks.

// Tests and their helpers may unwrap and panic: a failure is the test's verdict.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod backoff;
mod correlator;
mod frames;
mod goodbye;
mod incoming_bound;
mod liveness;
mod policy;
mod split;
mod stream_framing;
mod stream_requests;
mod try_send;
