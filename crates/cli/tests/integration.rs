//! The integration tests of `crates/cli`, one module per behaviour (each file beside this one), built as one test
//! binary: a binary per file linked every dependency again for each, which filled a CI machine's disk
//! (ARCHITECTURE.md, "Testing at the boundaries"). A file added here must be named below, which
//! `crates/cli/tests/test_binaries.rs` checks.

// Tests and their helpers may unwrap and panic: a failure is the test's verdict.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod both_transports;
mod collision;
mod commands;
mod config_file;
mod contract;
mod docs_hygiene;
mod serve;
mod shutdown;
mod startup;
mod stdout_closed;
mod task_support;
mod test_binaries;
mod transport_default;
