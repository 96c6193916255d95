//! The integration tests of `crates/computercraft`, one module per behaviour (each file beside this one), built as
//! one test binary: a binary per file linked every dependency again for each, which filled a CI machine's disk
//! (ARCHITECTURE.md, "Testing at the boundaries"). A file added here must be named below, which
//! `crates/cli/tests/test_binaries.rs` checks.

// Tests and their helpers may unwrap and panic: a failure is the test's verdict.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod ccsim_shim;
mod fs_integrity;
mod link;
mod link_bounds;
mod loopback_default;
mod probe;
mod result_cap;
mod runtime;
mod tools;
mod transfer;
