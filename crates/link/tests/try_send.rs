#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `try_send_text` queues a frame at once, in order with `send_text`, and says `QueueFull` instead of waiting
//! when the writer is behind.

use crate::support;

use bridge_link::{FrameCodec, Framing, LinkError};
use futures::StreamExt;
use support::lines_link;
use tokio_util::codec::FramedRead;

#[tokio::test]
async fn a_frame_queued_without_waiting_keeps_its_place_in_the_link_order() {
    let (conn, far) = lines_link(1 << 16);
    conn.sender.try_send_text("first").unwrap();
    conn.sender.send_text("second").await.unwrap();
    conn.sender.try_send_text("third").unwrap();
    let (far_read, _far_write) = tokio::io::split(far);
    let mut frames = FramedRead::new(far_read, FrameCodec::new(Framing::Lines, 1 << 20));
    for want in ["first", "second", "third"] {
        assert_eq!(frames.next().await.unwrap().unwrap(), want);
    }
}

#[tokio::test]
async fn a_full_queue_is_queue_full_not_a_wait_and_a_closed_link_is_disconnected() {
    // A peer that never reads: the pipe fills, then the writer stops taking frames, then the queue fills.
    let (conn, _far) = lines_link(1024);
    let frame = "x".repeat(512);
    let mut queued = 0;
    let err = loop {
        match conn.sender.try_send_text(frame.clone()) {
            Ok(()) => queued += 1,
            Err(e) => break e,
        }
        assert!(queued < 10_000, "the queue has a bound");
        tokio::task::yield_now().await;
    };
    assert!(matches!(err, LinkError::QueueFull), "{err}");
    assert!(queued > 0);
    conn.sender.close("done");
    let err = conn.sender.try_send_text("late").unwrap_err();
    assert!(matches!(err, LinkError::Disconnected { .. }), "{err}");
}
