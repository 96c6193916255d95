#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Correlator behaviour that bridges rely on: fail fast on link drop, drop unknown ids, never leak entries.

use bridge_link::{Correlator, LinkError, MAX_ID, parse_id};
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn ids_count_up_from_one() {
    let c = Correlator::<u32>::new();
    let ids: Vec<u64> = (0..5).map(|_| c.start().0).collect();
    assert_eq!(ids, vec![1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn answers_reach_their_own_waiter_in_any_order() {
    let c = Correlator::<&'static str>::new();
    let (a, pa) = c.start();
    let (b, pb) = c.start();
    assert!(c.resolve(b, "second"));
    assert!(c.resolve(a, "first"));
    assert_eq!(pa.wait(LONG).await.unwrap(), "first");
    assert_eq!(pb.wait(LONG).await.unwrap(), "second");
    assert_eq!(c.pending(), 0);
}

// The waiters' timeout is an hour: a waiter released by its timer would report Timeout (and the test would hang),
// so receiving Disconnected proves the drop released them.
#[tokio::test]
async fn link_drop_fails_every_inflight_request_at_once() {
    let c = Correlator::<u32>::new();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let (_, p) = c.start();
            tokio::spawn(p.wait(LONG))
        })
        .collect();
    assert_eq!(c.pending(), 3);

    assert_eq!(
        c.fail_all(LinkError::disconnected("game closed the socket")),
        3
    );

    for w in waiters {
        match w.await.unwrap() {
            Err(LinkError::Disconnected { reason }) => assert_eq!(reason, "game closed the socket"),
            other => panic!("expected Disconnected, got {other:?}"),
        }
    }
    assert_eq!(c.pending(), 0);
}

#[tokio::test]
async fn close_also_fails_requests_started_after_the_drop() {
    let c = Correlator::<u32>::new();
    let (_, before) = c.start();
    assert_eq!(c.close(LinkError::disconnected("peer went away")), 1);
    assert!(c.is_closed());
    let (_, after) = c.start();
    assert!(matches!(
        before.wait(LONG).await,
        Err(LinkError::Disconnected { .. })
    ));
    assert!(matches!(
        after.wait(LONG).await,
        Err(LinkError::Disconnected { .. })
    ));
    assert_eq!(c.pending(), 0);
}

#[tokio::test]
async fn unknown_ids_are_dropped_and_do_not_disturb_others() {
    let c = Correlator::<u32>::new();
    let (id, p) = c.start();
    assert!(!c.resolve(id + 100, 7), "never-issued id must be refused");
    assert!(!c.resolve(0, 7));
    assert_eq!(c.pending(), 1);
    assert!(c.resolve(id, 42));
    assert!(
        !c.resolve(id, 43),
        "a second answer for the same id must be refused"
    );
    assert_eq!(p.wait(LONG).await.unwrap(), 42);
}

#[tokio::test]
async fn timeout_removes_the_entry_and_a_late_answer_is_dropped() {
    let c = Correlator::<u32>::new();
    let (id, p) = c.start();
    match p.wait(Duration::from_millis(250)).await {
        Err(LinkError::Timeout { elapsed }) => assert!(elapsed >= Duration::from_millis(250)),
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert_eq!(c.pending(), 0);
    assert!(!c.resolve(id, 1));
}

#[tokio::test]
async fn dropping_the_waiting_future_removes_the_entry() {
    let c = Correlator::<u32>::new();

    // Dropped without ever waiting.
    let (_, p) = c.start();
    assert_eq!(c.pending(), 1);
    drop(p);
    assert_eq!(c.pending(), 0);

    // Dropped mid-wait, as when a tool call is cancelled.
    let (id, p) = c.start();
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = entered_tx.send(());
        p.wait(LONG).await
    });
    entered_rx.await.unwrap();
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(c.pending(), 0);
    assert!(!c.resolve(id, 1));

    // Dropped by losing a select.
    let (_, p) = c.start();
    tokio::select! {
        biased;
        () = std::future::ready(()) => {}
        _ = p.wait(LONG) => panic!("nothing answered"),
    }
    assert_eq!(c.pending(), 0);
}

#[test]
fn parse_id_accepts_integers_and_digit_strings_only() {
    assert_eq!(parse_id(&json!(1)), Some(1));
    assert_eq!(parse_id(&json!(17.0)), Some(17));
    assert_eq!(parse_id(&json!("42")), Some(42));
    assert_eq!(parse_id(&json!(MAX_ID)), Some(MAX_ID));
    for bad in [
        json!(0),
        json!(-1),
        json!(1.5),
        json!(MAX_ID + 1),
        json!("str-id"),
        json!(""),
        json!("-3"),
        json!("+3"),
        json!(" 3"),
        json!(null),
        json!(true),
        json!([1]),
    ] {
        assert_eq!(parse_id(&bad), None, "{bad} should not parse");
    }
}
