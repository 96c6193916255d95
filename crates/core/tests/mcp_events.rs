//! Event streams: pull with a cursor, overflow accounting, waiting, and pushed updates in both eras.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_core::Bridge;
use bridge_core::events::{DEFAULT_STREAM_BYTES, MAX_PAGE_BYTES};
use bridge_core::serve::HttpOptions;
use rmcp::model::{ServerNotification, SubscribeRequestParams, SubscriptionFilter};
use serde_json::json;
use std::time::Duration;
use support::*;

const CHAT: &str = "test://events/chat";

#[tokio::test]
async fn pull_after_a_cursor_and_count_overflow() {
    let tb = test_bridge();
    let client = stdio_client(tb.bridge.clone(), Era::Modern, vec![]).await;
    for i in 0..3 {
        call(&client, "say", json!({ "text": format!("m{i}") })).await;
    }
    let page = call(&client, "poll_events", json!({"stream": "chat"}))
        .await
        .structured_content
        .unwrap();
    assert_eq!(page["events"].as_array().unwrap().len(), 3);
    assert_eq!(page["dropped"], 0);
    assert_eq!(page["next_since"], 3);
    // Capacity is 4: six more events push out five.
    for i in 3..9 {
        tb.chat.publish(json!({ "text": format!("m{i}") }));
    }
    let page = call(
        &client,
        "poll_events",
        json!({"stream": "chat", "since": "3"}),
    )
    .await
    .structured_content
    .unwrap();
    let seqs: Vec<_> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![6, 7, 8, 9]);
    assert_eq!(
        page["dropped"], 2,
        "events 4 and 5 were lost after cursor 3"
    );
    let filtered = call(
        &client,
        "poll_events",
        json!({"stream": "chat", "filter": {"text": "m8"}}),
    )
    .await;
    let events = filtered.structured_content.unwrap()["events"].clone();
    assert_eq!(events.as_array().unwrap().len(), 1);
    assert_eq!(events[0]["seq"], 9);
}

/// On a paused clock: the publisher's delay and the poll's deadline are virtual, so the order is certain.
#[tokio::test(start_paused = true)]
async fn waiting_poll_returns_when_an_event_arrives() {
    let tb = test_bridge();
    let client = stdio_client(tb.bridge.clone(), Era::Legacy, vec![]).await;
    let chat = tb.chat.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        chat.publish(json!({"text": "late"}));
    });
    let started = tokio::time::Instant::now();
    let page = call(
        &client,
        "poll_events",
        json!({"stream": "chat", "wait_ms": 10000}),
    )
    .await;
    let page = page.structured_content.unwrap();
    assert_eq!(page["events"][0]["data"]["text"], "late");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(150) && waited < Duration::from_secs(10),
        "woke on the event, not the deadline: {waited:?}"
    );
    let started = tokio::time::Instant::now();
    let empty = call(
        &client,
        "poll_events",
        json!({"stream": "chat", "since": 1, "wait_ms": 50}),
    )
    .await;
    assert_eq!(empty.structured_content.unwrap()["events"], json!([]));
    assert!(started.elapsed() >= Duration::from_millis(50), "it waited");
}

#[tokio::test]
async fn streams_are_resources() {
    let tb = test_bridge();
    let client = stdio_client(tb.bridge.clone(), Era::Modern, vec![]).await;
    let resources = client.service.list_all_resources().await.unwrap();
    assert!(resources.iter().any(|r| r.uri == CHAT));
    tb.chat.publish(json!({"text": "hello"}));
    let read = client
        .service
        .read_resource(rmcp::model::ReadResourceRequestParams::new(CHAT))
        .await
        .unwrap();
    let text = match &read.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("expected text, got {other:?}"),
    };
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["events"][0]["data"]["text"], "hello");
    let missing = client
        .service
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "test://events/nope",
        ))
        .await;
    assert!(missing.is_err());
}

#[tokio::test]
#[allow(deprecated)]
async fn legacy_subscribers_get_resource_updated() {
    let tb = test_bridge();
    let mut client = stdio_client(tb.bridge.clone(), Era::Legacy, vec![]).await;
    client
        .service
        .subscribe(SubscribeRequestParams::new(CHAT))
        .await
        .unwrap();
    tb.chat.publish(json!({"text": "ping"}));
    assert_eq!(
        within("resources/updated", client.updates.recv())
            .await
            .unwrap(),
        CHAT
    );
    client
        .service
        .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(CHAT))
        .await
        .unwrap();
    // Updates reach a session in order: once the marker arrives, the chat update before it was passed over.
    let marker = "test://marker";
    client
        .service
        .subscribe(SubscribeRequestParams::new(marker))
        .await
        .unwrap();
    tb.chat.publish(json!({"text": "after unsubscribe"}));
    tb.bridge.events().resource_updated(marker);
    assert_eq!(
        within("the marker", client.updates.recv()).await.unwrap(),
        marker,
        "no notification after unsubscribe"
    );
}

#[tokio::test]
async fn modern_listeners_get_only_what_they_asked_for() {
    for transport in ["stdio", "http"] {
        let tb = test_bridge();
        let server;
        let client = if transport == "http" {
            server = start_http(tb.bridge.clone(), HttpOptions::default(), vec![]).await;
            http_client(server.addr, Era::Modern).await
        } else {
            stdio_client(tb.bridge.clone(), Era::Modern, vec![]).await
        };
        let filter = SubscriptionFilter::builder()
            .resource_subscriptions(vec![CHAT.to_owned()])
            .build();
        let mut chat_sub = client.service.peer().listen(filter).await.unwrap();
        assert_eq!(
            chat_sub.acknowledged().resource_subscriptions.as_deref(),
            Some(&[CHAT.to_owned()][..])
        );
        let other = SubscriptionFilter::builder()
            .resource_subscriptions(vec!["test://events/other".to_owned()])
            .build();
        let mut other_sub = client.service.peer().listen(other).await.unwrap();
        tb.chat.publish(json!({"text": "ping"}));
        let note = within("resources/updated", chat_sub.next())
            .await
            .unwrap()
            .unwrap();
        match note {
            ServerNotification::ResourceUpdatedNotification(n) => {
                assert_eq!(n.params.uri, CHAT, "{transport}")
            }
            other => panic!("{transport}: unexpected {other:?}"),
        }
        // Each listener hears updates in order: if the chat update had reached `other_sub`, it would come first.
        tb.bridge.events().resource_updated("test://events/other");
        match within("the other URI's update", other_sub.next())
            .await
            .unwrap()
            .unwrap()
        {
            ServerNotification::ResourceUpdatedNotification(n) => assert_eq!(
                n.params.uri, "test://events/other",
                "{transport}: a listener for another URI hears nothing of chat"
            ),
            other => panic!("{transport}: unexpected {other:?}"),
        }
    }
}

/// Issue 8 item 3, scaled to CI: 1 100 events of 128 KiB from one peer once took the bridge to 2.4 GB, and one
/// `poll_events` reply was 75 MiB.
#[tokio::test]
async fn large_events_are_bounded_in_bytes_held_and_bytes_sent() {
    let b = Bridge::builder("test", "0");
    let flood = b.events().stream("flood", "events a peer chooses", 100_000);
    let bridge = b.build().unwrap();
    let client = stdio_client(bridge, Era::Modern, vec![]).await;
    let big = "z".repeat(128 << 10);
    for i in 0..1_100 {
        flood.publish(json!({ "i": i, "text": big }));
    }
    assert!(
        flood.retained_bytes() < 1 << 20,
        "oversize events are held as stubs: {} bytes",
        flood.retained_bytes()
    );
    let page = call(
        &client,
        "poll_events",
        json!({"stream": "flood", "limit": 1000}),
    )
    .await;
    let page = page.structured_content.unwrap();
    assert_eq!(page["events"][0]["data"]["truncated"], true);
    let first_size = serde_json::to_string(&json!({ "i": 0, "text": big }))
        .unwrap()
        .len();
    assert_eq!(page["events"][0]["data"]["bytes"], first_size, "its size");

    // Just under the per-event limit, they are kept whole until the stream's byte budget is reached.
    let near = "w".repeat(60 << 10);
    for i in 0..200 {
        flood.publish(json!({ "i": i, "text": near }));
    }
    assert!(flood.retained_bytes() <= DEFAULT_STREAM_BYTES);
    let page = call(
        &client,
        "poll_events",
        json!({"stream": "flood", "since": 1_100, "limit": 1000}),
    )
    .await;
    let page = page.structured_content.unwrap();
    let sent = serde_json::to_string(&page).unwrap().len();
    assert!(sent <= MAX_PAGE_BYTES, "one reply is capped: {sent} bytes");
    assert_eq!(page["more"], true);
    let held = (DEFAULT_STREAM_BYTES / (60 << 10)) as u64;
    assert!(
        page["dropped"].as_u64().unwrap() >= 200 - held,
        "readers are told what the budget pushed out: {}",
        page["dropped"]
    );
    let next = page["next_since"].as_u64().unwrap();
    let rest = call(
        &client,
        "poll_events",
        json!({"stream": "flood", "since": next}),
    )
    .await
    .structured_content
    .unwrap();
    assert_eq!(rest["events"][0]["seq"], next + 1, "the rest reads on");
    assert_eq!(rest["dropped"], 0);

    let read = client
        .service
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "test://events/flood",
        ))
        .await
        .unwrap();
    let text = match &read.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.len(),
        other => panic!("expected text, got {other:?}"),
    };
    assert!(
        text <= MAX_PAGE_BYTES + 1024,
        "the resource is capped too: {text}"
    );
}
