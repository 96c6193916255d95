//! Shared test support: the simulated ComputerCraft computer (`ccsim`).
#![allow(dead_code)]
pub mod ccsim;
