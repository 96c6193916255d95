#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Frames a peer sends faster than the bridge takes them are held up to a bound in bytes per link
//! ([`INCOMING_BYTES`]), not by count: past it the link stops reading, the peer's writes back up, and
//! nothing is lost once the bridge catches up.

use crate::support;

use bridge_link::stream::{self, StreamConfig};
use bridge_link::{FrameCodec, Framing, INCOMING_BYTES};
use futures::SinkExt;
use support::within;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

const FRAME: usize = 100 << 10;
const FRAMES: usize = 20;

#[tokio::test]
async fn a_flood_is_held_to_the_byte_bound_and_nothing_is_lost() {
    let (ours, theirs) = tokio::io::duplex(64 << 10);
    let (read, write) = tokio::io::split(ours);
    let cfg = StreamConfig {
        framing: Framing::LengthPrefixed,
        max_frame_bytes: 1 << 20,
    };
    let mut conn = stream::spawn(read, write, cfg, &CancellationToken::new());
    let flood = tokio::spawn(async move {
        let mut far = Framed::new(theirs, FrameCodec::new(Framing::LengthPrefixed, 1 << 20));
        for n in 0..FRAMES {
            let frame = format!("{n:08}{}", "z".repeat(FRAME - 8));
            far.send(frame).await.unwrap();
        }
        far
    });

    // The bridge reads nothing: the budget fills (the frame that does not fit waits in the reader, holding
    // what is left of the budget), and the reader stops reading.
    within("the budget to fill", async {
        while conn.incoming.queued_bytes() < INCOMING_BYTES {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        INCOMING_BYTES / FRAME < FRAMES && !flood.is_finished(),
        "the peer is held back"
    );

    for n in 0..FRAMES {
        let frame = within("a frame", conn.incoming.recv()).await.unwrap();
        assert_eq!(&frame[..8], format!("{n:08}"), "in order, none lost");
        assert!(conn.incoming.queued_bytes() <= INCOMING_BYTES);
    }
    within("the flood to finish", flood).await.unwrap();
}
