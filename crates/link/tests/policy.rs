#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Connection policies: a single peer where the newest wins, and a registry by id that can refuse a second
//! live peer claiming a held id instead of letting the two replace each other forever.

use crate::support;

use bridge_link::{
    Admission, Framing, LinkError, OnDuplicate, PeerRegistry, Registered, SinglePeer,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::*;

#[tokio::test]
async fn the_newest_peer_wins_and_the_old_ones_requests_fail_at_once() {
    let slot: SinglePeer<serde_json::Value, &str> = SinglePeer::new();
    let mut old = pair(Framing::Lines);
    slot.install(old.peer.clone(), "old", "replaced by a newer connection");
    let waiting = old
        .peer
        .request(|id| request(id, "slow"), Duration::from_secs(3600));
    let replace = async {
        next_request(&mut old.remote).await;
        let new = pair(Framing::Lines);
        slot.install(new.peer.clone(), "new", "replaced by a newer connection");
        new
    };
    let (result, new) = within("the replacement", futures::future::join(waiting, replace)).await;
    assert!(
        matches!(&result, Err(LinkError::Disconnected { reason }) if reason == "replaced by a newer connection"),
        "{result:?}"
    );
    assert_eq!(slot.current().unwrap().id(), new.peer.id());
    assert_eq!(slot.with_current(|c| c.map(|c| c.meta)), Some("new"));
    assert_eq!(slot.connections_total(), 2);
    assert_eq!(slot.last_end().unwrap().1, "replaced by a newer connection");
    // The old link's end does not unseat the new peer.
    slot.forget(old.peer.id(), "old link closed");
    assert!(slot.is_connected());
    slot.forget(new.peer.id(), "gone");
    assert!(!slot.is_connected());
    assert_eq!(slot.last_end().unwrap().1, "gone");
}

#[derive(Debug)]
struct Machine {
    link: u64,
    closed: AtomicBool,
    alive: bool,
}

impl Registered for Machine {
    fn link_id(&self) -> u64 {
        self.link
    }
    fn close(&self, _reason: &str) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

fn machine(link: u64, alive: bool) -> Arc<Machine> {
    Arc::new(Machine {
        link,
        closed: AtomicBool::new(false),
        alive,
    })
}

async fn probe(m: Arc<Machine>) -> bool {
    m.alive
}

#[tokio::test]
async fn a_second_live_peer_with_a_held_id_is_refused() {
    let registry: PeerRegistry<u32, Machine> = PeerRegistry::default();
    let first = machine(1, true);
    assert!(matches!(
        registry.judge(7, OnDuplicate::RefuseIfLive, probe).await,
        Admission::Free
    ));
    registry.insert(7, Arc::clone(&first), "replaced");

    let second = machine(2, true);
    match registry.judge(7, OnDuplicate::RefuseIfLive, probe).await {
        Admission::Refused { holder } => assert_eq!(holder.link, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(registry.get(7).unwrap().link, 1, "the holder keeps its id");
    assert!(!first.closed.load(Ordering::SeqCst), "and its link");
    assert!(!second.closed.load(Ordering::SeqCst));
    assert_eq!(registry.refused(), vec![(7, 1)]);
}

#[tokio::test]
async fn a_dead_holder_is_replaced_and_replace_never_asks() {
    let registry: PeerRegistry<u32, Machine> = PeerRegistry::default();
    let dead = machine(1, false);
    registry.insert(7, Arc::clone(&dead), "replaced");
    let newcomer = machine(2, true);
    assert!(matches!(
        registry.judge(7, OnDuplicate::RefuseIfLive, probe).await,
        Admission::Replace(h) if h.link == 1
    ));
    registry.insert(7, newcomer, "replaced");
    assert!(
        dead.closed.load(Ordering::SeqCst),
        "the replaced link is closed"
    );
    assert!(
        !registry.remove_link(7, 1),
        "the old link's end does not remove the newcomer"
    );
    assert_eq!(registry.get(7).unwrap().link, 2);

    let live = machine(3, true);
    registry.insert(8, live, "replaced");
    let asked = AtomicBool::new(false);
    let verdict = registry
        .judge(8, OnDuplicate::Replace, |m| {
            asked.store(true, Ordering::SeqCst);
            probe(m)
        })
        .await;
    assert!(matches!(verdict, Admission::Replace(_)));
    assert!(!asked.load(Ordering::SeqCst), "Replace does not probe");
    assert!(registry.refused().is_empty());
}
