//! The computers linked right now, by computer id: the core's registry policy over [`Computer`]s.
//!
//! A second hello with an id that is held replaces the holder by default; with
//! [`OnDuplicate::RefuseIfLive`](bridge_core::link::OnDuplicate) a holder that still answers a ping keeps the
//! id and the newcomer is refused (see `session`).

use crate::computer::Computer;
use bridge_core::link::PeerRegistry;

pub type Registry = PeerRegistry<u32, Computer>;
