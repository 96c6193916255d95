#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `writers_finished` lets a process about to exit wait for its closed links' goodbyes. It watches every link
//! writer in the process, so this binary holds this one test alone.

use crate::support;

use bridge_link::{FrameCodec, Framing, writers_finished};
use futures::StreamExt;
use std::time::Duration;
use support::lines_link;
use tokio_util::codec::FramedRead;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exit_waits_for_closed_links_to_say_goodbye_and_not_longer() {
    let (conn, far) = lines_link(1 << 16);
    // An open link's writer is still running: the wait gives up at its limit.
    assert!(!writers_finished(Duration::from_millis(200)).await);

    conn.sender.send_text("last answer").await.unwrap();
    conn.sender.close("exiting");
    assert!(writers_finished(Duration::from_secs(10)).await);
    // By then the last answer and the end of the stream have left.
    let (far_read, _far_write) = tokio::io::split(far);
    let mut frames = FramedRead::new(far_read, FrameCodec::new(Framing::Lines, 1 << 20));
    assert_eq!(frames.next().await.unwrap().unwrap(), "last answer");
    assert!(frames.next().await.is_none(), "the writer closed its side");
}
