//! The headless backend: VSC-Bridge's debugging scripts run against real debug adapters over DAP.

pub mod adapter;
mod adapters;
mod attach;
mod backend;
pub mod breakpoints;
pub mod client;
pub mod ending;
mod go;
mod inspect;
pub mod journal;
mod jsdebug;
pub mod launch;
mod logs;
pub mod policy;
mod reap;
pub mod session;
mod source;
mod stops;

pub use backend::{DEFAULT_MAX_SESSIONS, DapBackend, DapConfig};
