//! Shared test support: the simulated ComputerCraft computer (`ccsim`) and the bridge on loopback ports
//! with a real MCP client (`harness`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
pub mod ccsim;
pub mod harness;
