#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issues 22/23: the relay remembers, per game instance, the highest event `seq` it accepted (the `lastSeq`
//! of a reconnecting adapter's `welcome`). A game that reconnects with a fresh instance id each time (a crash
//! loop, or a hostile holder of the game token) used to grow that map forever. Now each name keeps its live
//! instance and its few most recent dead ones, all of them together within a byte bound; a recently dead
//! instance still resumes, and one dropped is counted in /metrics.

use crate::support;

use std::time::Duration;
use support::*;

/// Connects `name`/`instance`, sends events `from..=to`, waits for their ack, closes cleanly (waiting until the
/// relay let the link go, so the next instance under the name is not refused). The welcome's `lastSeq`.
async fn session(relay: &TestRelay, name: &str, instance: &str, from: u64, to: u64) -> u64 {
    let mut tries = 0;
    let (link, welcome) = loop {
        let (link, first) = game_hello(&relay.url(), name, instance).await;
        if first["type"] == "welcome" {
            break (link, first);
        }
        // The previous instance's link is not yet known closed: it holds the name a moment longer.
        assert_eq!(
            first["payload"]["details"]["reason"], "name_in_use",
            "{first}"
        );
        tries += 1;
        assert!(tries < 200, "the name stayed held: {first}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    send_events_and_close(link, "e", from, to).await;
    welcome["payload"]["lastSeq"].as_u64().unwrap()
}

/// Waits until the relay has taken `name` off its live games (the link's end is seen asynchronously).
async fn wait_gone(relay: &TestRelay) {
    within("the game to be gone", async {
        while relay
            .metric("minecraft_relay_connections{role=\"minecraft\"}")
            .await
            != 0
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_game_keeps_few_instances() {
    let relay = start_relay(relay_args(&[])).await;
    for i in 0..2000 {
        let last = session(&relay, "crashy", &format!("i{i}"), 1, 1).await;
        assert_eq!(last, 0, "instance i{i} is new");
    }
    wait_gone(&relay).await;
    let kept = relay.metric("minecraft_relay_game_instances").await;
    let per_name = relay
        .metric("minecraft_relay_limit{bound=\"dead_instances_per_name\"}")
        .await;
    assert!(
        kept <= per_name + 1,
        "2000 instances of one name left {kept} remembered (bound {per_name} dead + the live one)"
    );
    assert_eq!(
        relay
            .metric("minecraft_relay_game_instances_evicted_total")
            .await,
        2000 - kept,
        "every instance dropped is counted"
    );
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_game_names_stay_within_the_byte_bound() {
    let relay = start_relay(relay_args(&[])).await;
    // The longest names the protocol allows (64 characters each), so few entries reach the bound.
    for i in 0..2000 {
        let name = format!("{i:0>64}");
        let instance = format!("{:x>64}", i);
        session(&relay, &name, &instance, 1, 1).await;
    }
    wait_gone(&relay).await;
    let bytes = relay.metric("minecraft_relay_game_instances_bytes").await;
    let limit = relay
        .metric("minecraft_relay_limit{bound=\"game_instances_bytes\"}")
        .await;
    assert!(
        bytes <= limit,
        "2000 names left {bytes} bytes of instances (bound {limit})"
    );
    let kept = relay.metric("minecraft_relay_game_instances").await;
    assert!(
        kept < 2000,
        "some instances were dropped to keep the bound ({kept})"
    );
    assert_eq!(
        relay
            .metric("minecraft_relay_game_instances_evicted_total")
            .await,
        2000 - kept
    );
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recently_dead_instance_resumes_and_an_evicted_one_starts_over() {
    let relay = start_relay(relay_args(&[])).await;
    assert_eq!(session(&relay, "g", "old", 1, 5).await, 0);
    let per_name = relay
        .metric("minecraft_relay_limit{bound=\"dead_instances_per_name\"}")
        .await;
    // Fewer restarts than the bound: the first instance is still remembered.
    for i in 1..per_name {
        session(&relay, "g", &format!("n{i}"), 1, 1).await;
    }
    assert_eq!(
        session(&relay, "g", "old", 6, 7).await,
        5,
        "a recently dead instance resumes after what the relay accepted"
    );
    // Enough restarts to push it out: it comes back as an unknown instance, lastSeq 0, and resends what it
    // holds; nothing it sends is dropped as a duplicate (clients drop repeats by event id, PROTOCOL.md §5).
    for i in 0..=per_name {
        session(&relay, "g", &format!("m{i}"), 1, 1).await;
    }
    assert!(
        relay
            .metric("minecraft_relay_game_instances_evicted_total")
            .await
            >= 1
    );
    let duplicates = relay.metric("minecraft_relay_events_duplicate_total").await;
    let received = relay.metric("minecraft_relay_events_received_total").await;
    assert_eq!(session(&relay, "g", "old", 7, 8).await, 0);
    assert_eq!(
        relay.metric("minecraft_relay_events_duplicate_total").await,
        duplicates
    );
    assert_eq!(
        relay.metric("minecraft_relay_events_received_total").await,
        received + 2
    );
    relay.stop().await;
}
