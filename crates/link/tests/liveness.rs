#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Liveness on links without pings: the peer layer's probe closes a link whose peer stopped answering, so
//! requests fail at once with the reason instead of each waiting out its own deadline; a peer that answers
//! stays.

use crate::support;

use bridge_link::{Framing, LinkError};
use std::time::Duration;
use support::*;

const INTERVAL: Duration = Duration::from_secs(5);
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// A link whose peer layer probes with a `ping` request.
fn watched() -> Pair {
    let pair = pair(Framing::Lines);
    pair.peer.watch(INTERVAL, PROBE_TIMEOUT, |peer| async move {
        peer.request(|id| request(id, "ping"), PROBE_TIMEOUT)
            .await
            .is_ok()
    });
    pair
}

#[tokio::test(start_paused = true)]
async fn a_silent_peer_is_closed_by_the_probe() {
    let mut pair = watched();
    let call = pair
        .peer
        .request(|id| request(id, "work"), Duration::from_secs(3600));
    let far = async {
        // Reads everything and answers nothing.
        next_request(&mut pair.remote).await;
        let ping = next_request(&mut pair.remote).await;
        assert_eq!(ping["method"], "ping");
    };
    let (result, ()) = within(
        "the probe to close the link",
        futures::future::join(call, far),
    )
    .await;
    match result {
        Err(LinkError::Disconnected { reason }) => {
            assert!(reason.contains("liveness probe within 1000 ms"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_peer_that_answers_the_probe_stays() {
    let mut pair = watched();
    for _ in 0..3 {
        let ping = next_request(&mut pair.remote).await;
        assert_eq!(ping["method"], "ping");
        answer(&mut pair.remote, &ping).await;
    }
    let call = pair
        .peer
        .request(|id| request(id, "work"), Duration::from_secs(20));
    let far = async {
        let r = next_request(&mut pair.remote).await;
        answer(&mut pair.remote, &r).await;
    };
    let (result, ()) = futures::future::join(call, far).await;
    assert_eq!(result.unwrap()["result"], "work");
    assert!(!pair.peer.sender().is_closed());
}
