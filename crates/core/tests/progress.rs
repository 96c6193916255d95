//! A call that runs long reports progress at least every 10 s when its request carries a progress token, so a
//! host (which gives up after 60 s without progress) keeps waiting; the handler's own progress still arrives,
//! and the values keep increasing. Once the call is cancelled or answered, no progress goes out for it, whoever
//! sends it. On a paused clock: no test waits for real time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use bridge_core::{Bridge, NoArgs, ToolCtx, ToolSpec};
use mcp_testkit::start_call;
use serde_json::json;
use std::time::Duration;
use support::*;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Progress values from this one up were sent after the call had ended (its handler saw it cancelled, or a
/// helper task sent them after the answer).
const LATE: f64 = 1_000_000.0;

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

/// `chatty` reports progress every 10 ms until it sees its cancellation, then goes on reporting (marked
/// [`LATE`]) through 20 more steps of clean-up; `leaves_a_helper` answers at once and leaves a task holding its
/// context that reports 50 ms later. `done` says when the late senders have sent.
fn late_bridge() -> (Bridge, mpsc::UnboundedReceiver<()>) {
    let (done_tx, done) = mpsc::unbounded_channel();
    let mut b = Bridge::builder("late", "1.0.0");
    let chatty_done = done_tx.clone();
    b.tool(
        ToolSpec::new(
            "chatty",
            "Reports progress until cancelled, and while it cleans up.",
        )
        .timeout(Duration::from_secs(3_000))
        .handler(move |_: NoArgs, ctx: ToolCtx| {
            let done = chatty_done.clone();
            async move {
                let mut step = 0.0;
                let mut late = 0;
                while late < 20 {
                    step += 1.0;
                    if ctx.is_cancelled() {
                        late += 1;
                        ctx.progress(LATE + step, None, "cleaning up").await;
                    } else {
                        ctx.progress(step, None, "working").await;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let _ = done.send(());
                Ok(json!({ "done": true }))
            }
        }),
    );
    b.tool(
        ToolSpec::new(
            "leaves_a_helper",
            "Answers at once; a task it started reports later.",
        )
        .handler(move |_: NoArgs, ctx: ToolCtx| {
            let done = done_tx.clone();
            async move {
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    ctx.progress(LATE, None, "after the answer").await;
                    let _ = done.send(());
                });
                Ok(json!({ "answered": true }))
            }
        }),
    );
    (b.build().unwrap(), done)
}

/// What reached the client up to now, after a moment for anything in flight.
async fn arrived(client: &mut Client) -> Vec<f64> {
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut values = Vec::new();
    while let Ok(value) = client.progress.try_recv() {
        values.push(value);
    }
    values
}

#[tokio::test(start_paused = true)]
async fn no_progress_reaches_the_client_after_its_call_is_cancelled() {
    for era in ERAS {
        let (bridge, mut done) = late_bridge();
        let mut client = stdio_client(bridge, era, vec![]).await;
        let handle = start_call(&client, "chatty", json!({})).await;
        let first = within("chatty's first progress", client.progress.recv()).await;
        assert_eq!(first, Some(1.0), "{era:?}");
        handle.cancel(Some("stop".into())).await.unwrap();
        within("chatty's clean-up", done.recv()).await.unwrap();
        let values = arrived(&mut client).await;
        assert!(
            values.iter().all(|v| *v < LATE),
            "{era:?}: progress sent while the cancelled call cleaned up reached the client: {values:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn no_progress_reaches_the_client_after_its_call_is_answered() {
    for era in ERAS {
        let (bridge, mut done) = late_bridge();
        let mut client = stdio_client(bridge, era, vec![]).await;
        let result = call(&client, "leaves_a_helper", json!({})).await;
        assert_ne!(result.is_error, Some(true), "{era:?}: {result:?}");
        within("the helper's report", done.recv()).await.unwrap();
        let values = arrived(&mut client).await;
        assert!(
            values.is_empty(),
            "{era:?}: progress after the answer reached the client: {values:?}"
        );
    }
}
