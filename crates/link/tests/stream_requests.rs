#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Requests over a byte-stream link, for every framing: answers reach their own caller in any order, a peer
//! that never answers gives a timeout, and a dropped stream fails every request in flight at once.

use crate::support;

use bridge_link::LinkError;
use serde_json::Value;
use std::time::Duration;
use support::*;

#[tokio::test]
async fn answers_reach_their_own_callers_in_any_order() {
    for framing in FRAMINGS {
        let mut pair = pair(framing);
        let calls = futures::future::join_all(["a", "b", "c"].map(|m| {
            let peer = pair.peer.clone();
            async move {
                peer.request(|id| request(id, m), Duration::from_secs(20))
                    .await
                    .unwrap()
            }
        }));
        let far = async {
            let mut got = Vec::new();
            for _ in 0..3 {
                got.push(next_request(&mut pair.remote).await);
            }
            for r in got.iter().rev() {
                answer(&mut pair.remote, r).await;
            }
        };
        let (answers, ()) = within("the answers", futures::future::join(calls, far)).await;
        let results: Vec<Value> = answers.iter().map(|a| a["result"].clone()).collect();
        assert_eq!(results, ["a", "b", "c"], "{framing:?}");
        assert_eq!(pair.peer.correlator().pending(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_peer_that_never_answers_gives_a_timeout() {
    for framing in FRAMINGS {
        let mut pair = pair(framing);
        let call = pair
            .peer
            .request(|id| request(id, "ping"), Duration::from_millis(500));
        let (result, seen) = futures::future::join(call, next_request(&mut pair.remote)).await;
        assert_eq!(seen["method"], "ping");
        assert!(
            matches!(result, Err(LinkError::Timeout { elapsed }) if elapsed >= Duration::from_millis(500)),
            "{framing:?}: {result:?}"
        );
        assert_eq!(
            pair.peer.correlator().pending(),
            0,
            "no entry outlives its caller"
        );
    }
}

#[tokio::test]
async fn a_dropped_stream_fails_every_request_in_flight_at_once() {
    for framing in FRAMINGS {
        let mut pair = pair(framing);
        let calls = futures::future::join_all((0..5).map(|_| {
            let peer = pair.peer.clone();
            // A deadline far beyond the test's hang guard: only the drop can end these calls.
            async move {
                peer.request(|id| request(id, "slow"), Duration::from_secs(3600))
                    .await
            }
        }));
        let far = async {
            for _ in 0..5 {
                next_request(&mut pair.remote).await;
            }
            drop(pair.remote);
        };
        let (results, ()) = within("the failures", futures::future::join(calls, far)).await;
        for r in &results {
            match r {
                Err(LinkError::Disconnected { reason }) => {
                    assert_eq!(reason, "peer closed the stream", "{framing:?}")
                }
                other => panic!("{framing:?}: {other:?}"),
            }
        }
        let reason = within("the link's end", pair.served).await.unwrap();
        assert!(reason.to_string().contains("peer closed the stream"));
        let later = pair
            .peer
            .request(|id| request(id, "late"), Duration::from_secs(3600))
            .await;
        assert!(
            matches!(later, Err(LinkError::Disconnected { .. })),
            "{later:?}"
        );
    }
}

#[tokio::test]
async fn an_oversize_request_is_refused_and_the_link_stays_up() {
    for framing in FRAMINGS {
        let mut pair = pair(framing);
        let big = "x".repeat(LIMIT);
        let refused = pair
            .peer
            .request(|id| request(id, &big), Duration::from_secs(20))
            .await;
        assert!(
            matches!(refused, Err(LinkError::FrameTooLarge { limit: LIMIT, .. })),
            "{framing:?}: {refused:?}"
        );
        let call = pair
            .peer
            .request(|id| request(id, "small"), Duration::from_secs(20));
        let far = async {
            let r = next_request(&mut pair.remote).await;
            answer(&mut pair.remote, &r).await;
        };
        let (answer, ()) = within("an answer", futures::future::join(call, far)).await;
        assert_eq!(answer.unwrap()["result"], "small");
    }
}
