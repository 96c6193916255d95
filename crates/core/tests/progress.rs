//! A call that runs long reports progress at least every 10 s when its request carries a progress token, so a
//! host (which gives up after 60 s without progress) keeps waiting; the handler's own progress still arrives,
//! and the values keep increasing. On a paused clock: no test waits for real time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use bridge_core::{Bridge, NoArgs, ToolCtx, ToolSpec};
use serde_json::json;
use std::time::Duration;
use support::*;
use tokio::time::Instant;

fn slow_bridge() -> Bridge {
    let mut b = Bridge::builder("slow", "1.0.0");
    b.tool(
        ToolSpec::new("silent", "Runs 45 s and reports nothing.")
            .timeout(Duration::from_secs(3_000))
            .handler(|_: NoArgs, _: ToolCtx| async move {
                tokio::time::sleep(Duration::from_secs(45)).await;
                Ok(json!({ "done": true }))
            }),
    );
    b.tool(
        ToolSpec::new("steps", "Reports 1 of 3, is silent 25 s, reports 2 of 3.")
            .timeout(Duration::from_secs(3_000))
            .handler(|_: NoArgs, ctx: ToolCtx| async move {
                ctx.progress(1.0, Some(3.0), "one").await;
                tokio::time::sleep(Duration::from_secs(25)).await;
                ctx.progress(2.0, Some(3.0), "two").await;
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok(json!({ "done": true }))
            }),
    );
    b.build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_silent_long_call_reports_progress_at_least_every_ten_seconds() {
    for era in ERAS {
        let mut client = stdio_client(slow_bridge(), era, vec![]).await;
        let start = Instant::now();
        let call = tokio::spawn({
            let peer = client.service.peer().clone();
            async move { call(&peer, "silent", json!({})).await }
        });
        let mut times = vec![Duration::ZERO];
        let mut values = Vec::new();
        while !call.is_finished() {
            tokio::select! {
                Some(value) = client.progress.recv() => {
                    times.push(start.elapsed());
                    values.push(value);
                }
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        let result = call.await.unwrap();
        assert_ne!(result.is_error, Some(true), "{era:?}: {result:?}");
        times.push(start.elapsed());
        assert!(
            times.last().unwrap() >= &Duration::from_secs(45),
            "{era:?}: the call ran its 45 s"
        );
        for gap in times.windows(2) {
            assert!(
                gap[1] - gap[0] <= Duration::from_secs(10),
                "{era:?}: {:?} without progress (arrivals at {times:?})",
                gap[1] - gap[0]
            );
        }
        assert!(
            values.windows(2).all(|w| w[1] > w[0]),
            "{era:?}: progress increases: {values:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_handlers_own_progress_still_arrives_between_heartbeats() {
    for era in ERAS {
        let mut client = stdio_client(slow_bridge(), era, vec![]).await;
        let result = call(&client, "steps", json!({})).await;
        assert_ne!(result.is_error, Some(true));
        let mut values = Vec::new();
        while let Ok(value) = client.progress.try_recv() {
            values.push(value);
        }
        assert_eq!(values.first(), Some(&1.0), "{era:?}: {values:?}");
        assert!(
            values.contains(&2.0),
            "{era:?}: the handler's 2 of 3: {values:?}"
        );
        let heartbeats = values.iter().filter(|v| **v > 1.0 && **v < 2.0).count();
        assert!(
            heartbeats >= 2,
            "{era:?}: 25 s of silence between 1 and 2 is filled: {values:?}"
        );
        assert!(
            values.windows(2).all(|w| w[1] > w[0]),
            "{era:?}: progress increases: {values:?}"
        );
    }
}
