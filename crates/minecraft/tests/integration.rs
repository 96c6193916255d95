//! The integration tests of `crates/minecraft`, one module per behaviour (each file beside this one), built as one
//! test binary: a binary per file linked every dependency again for each, which filled a CI machine's disk
//! (ARCHITECTURE.md, "Testing at the boundaries"). A file added here must be named below, which
//! `crates/cli/tests/test_binaries.rs` checks.

// Tests and their helpers may unwrap and panic: a failure is the test's verdict.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;
mod vanilla_double;

mod acks;
mod answers_kept;
mod assembly;
mod batch;
mod big;
mod bounds;
mod client_ids;
mod decoding;
mod flood;
mod frames;
mod identity;
mod instance_bounds;
mod loopback_default;
mod losses;
mod nats;
mod outage;
mod pages;
mod properties;
mod queue_losses;
mod rates;
mod relay;
mod slots;
mod stuck_links;
mod tls;
mod tools;
mod vanilla_e2e;
mod vanilla_follow;
mod vanilla_patterns;
mod vanilla_rcon;
mod vanilla_tools;
