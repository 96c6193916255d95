//! A cancelled call stops its tool on stdio and HTTP: a handler that does not watch its cancellation has its
//! future dropped, one that watches sees its token cancelled at once (and is dropped after
//! [`CANCEL_GRACE`](bridge_core::tool::CANCEL_GRACE), under a second, if it ignores it). On stdio the clock is paused, so "at
//! once" is checked as under a second of the test's own clock, never of the machine's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use bridge_core::serve::HttpOptions;
use bridge_core::tool::CANCEL_GRACE;
use bridge_core::{Bridge, NoArgs, ToolCtx, ToolSpec};
use mcp_testkit::start_call;
use std::time::Duration;
use support::*;
use tokio::sync::mpsc;
use tokio::time::Instant;

#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Started,
    /// The handler saw its cancellation token cancelled.
    Cancelled,
    /// The handler's future was dropped.
    Dropped,
}

struct OnDrop(mpsc::UnboundedSender<Seen>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(Seen::Dropped);
    }
}

/// `forever` never looks at its cancellation; `stubborn` watches it, says so, and runs on regardless.
fn bridge() -> (Bridge, mpsc::UnboundedReceiver<Seen>) {
    let (tx, seen) = mpsc::unbounded_channel();
    let mut b = Bridge::builder("cancel", "1.0.0");
    let forever_tx = tx.clone();
    b.tool(
        ToolSpec::new("forever", "Runs until dropped.")
            .timeout(Duration::from_secs(3_000))
            .handler(move |_: NoArgs, _: ToolCtx| {
                let tx = forever_tx.clone();
                async move {
                    let _guard = OnDrop(tx.clone());
                    let _ = tx.send(Seen::Started);
                    tokio::time::sleep(Duration::from_secs(2_000)).await;
                    Ok(serde_json::json!({}))
                }
            }),
    );
    b.tool(
        ToolSpec::new("stubborn", "Sees its cancellation, then runs on.")
            .timeout(Duration::from_secs(3_000))
            .handler(move |_: NoArgs, ctx: ToolCtx| {
                let tx = tx.clone();
                async move {
                    let _guard = OnDrop(tx.clone());
                    let _ = tx.send(Seen::Started);
                    ctx.cancellation().cancelled().await;
                    let _ = tx.send(Seen::Cancelled);
                    tokio::time::sleep(Duration::from_secs(2_000)).await;
                    Ok(serde_json::json!({}))
                }
            }),
    );
    (b.build().unwrap(), seen)
}

/// Starts `tool`, cancels it once it runs, and returns what its handler saw after the cancel, with the time
/// since the cancel of each.
async fn cancel(
    client: &Client,
    seen: &mut mpsc::UnboundedReceiver<Seen>,
    tool: &str,
    wanted: usize,
) -> Vec<(Seen, Duration)> {
    let handle = start_call(client, tool, serde_json::json!({})).await;
    assert_eq!(
        within("the handler to start", seen.recv()).await,
        Some(Seen::Started)
    );
    let cancelled_at = Instant::now();
    handle.cancel(Some("stop".into())).await.unwrap();
    let mut after = Vec::new();
    for _ in 0..wanted {
        let event = within("the handler to stop", seen.recv()).await.unwrap();
        after.push((event, cancelled_at.elapsed()));
    }
    after
}

#[tokio::test(start_paused = true)]
async fn on_stdio_a_cancelled_call_stops_its_tool_within_a_second() {
    for era in ERAS {
        let (bridge, mut seen) = bridge();
        let client = stdio_client(bridge, era, vec![]).await;
        let after = cancel(&client, &mut seen, "forever", 1).await;
        assert_eq!(after[0].0, Seen::Dropped, "{era:?}");
        assert!(after[0].1 < Duration::from_secs(1), "{era:?}: {after:?}");

        let after = cancel(&client, &mut seen, "stubborn", 2).await;
        assert_eq!(after[0].0, Seen::Cancelled, "{era:?}");
        assert!(after[0].1 < Duration::from_secs(1), "{era:?}: {after:?}");
        assert_eq!(
            after[1].0,
            Seen::Dropped,
            "{era:?}: ignoring it does not keep it alive"
        );
        // Honoured within a second even when ignored: the grace it gets to stop what it started fits in it.
        assert!(after[1].1 < Duration::from_secs(1), "{era:?}: {after:?}");
        assert!(
            after[1].1 >= CANCEL_GRACE,
            "{era:?}: it had its grace: {after:?}"
        );
    }
}

/// Real time: takes CANCEL_GRACE (under a second) per era, the stubborn handler's grace before it is dropped.
#[tokio::test]
async fn on_http_a_cancelled_call_stops_its_tool() {
    for era in ERAS {
        let (bridge, mut seen) = bridge();
        let server = start_http(bridge, HttpOptions::default(), vec![]).await;
        let client = http_client(server.addr, era).await;
        let after = cancel(&client, &mut seen, "forever", 1).await;
        assert_eq!(after[0].0, Seen::Dropped, "{era:?}");
        let after = cancel(&client, &mut seen, "stubborn", 2).await;
        let events: Vec<_> = after.iter().map(|(event, _)| event).collect();
        assert_eq!(
            events,
            [&Seen::Cancelled, &Seen::Dropped],
            "{era:?}: the token first, the drop after its grace"
        );
    }
}
