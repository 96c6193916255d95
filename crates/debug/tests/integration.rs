//! The integration tests of `crates/debug`, one module per behaviour (each file beside this one), built as one test
//! binary: a binary per file linked every dependency again for each, which filled a CI machine's disk
//! (ARCHITECTURE.md, "Testing at the boundaries"). A file added here must be named below, which
//! `crates/cli/tests/test_binaries.rs` checks.

// Tests and their helpers may unwrap and panic: a failure is the test's verdict.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod bounds;
mod catalog;
mod dap_attach;
mod dap_backend;
mod dap_breakpoints;
mod dap_descendants;
mod dap_languages;
mod dap_launch_abandoned;
mod dap_refusal;
mod dap_sessions;
mod dap_shutdown;
mod dap_stops;
mod host;
mod js_debug;
mod launch_policy;
mod trust;
mod vscode_backend;
