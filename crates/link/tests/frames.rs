//! The framings over an in-memory byte stream through the crate's own reader and writer: what one side
//! writes the other reads back in every framing, and the frame limit holds both ways.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bridge_link::{FrameError, FrameReader, FrameWriter, Framing};
use tokio::io::AsyncWriteExt;

const ALL: [Framing; 3] = [
    Framing::Lines,
    Framing::ContentLength,
    Framing::LengthPrefixed,
];

#[tokio::test]
async fn frames_written_are_read_back_in_order_in_every_framing() {
    for framing in ALL {
        let (a, b) = tokio::io::duplex(64);
        let mut writer = FrameWriter::new(a, framing, 1024);
        let mut reader = FrameReader::new(b, framing, 1024);
        let sent = vec![r#"{"id":1}"#.to_string(), "x".repeat(500), "ü".into()];
        let expected = sent.clone();
        let write = tokio::spawn(async move {
            for frame in sent {
                writer.send(frame).await.unwrap();
            }
            writer.close().await.unwrap();
        });
        let mut got = Vec::new();
        while let Some(frame) = reader.next().await {
            got.push(frame.unwrap());
        }
        write.await.unwrap();
        assert_eq!(got, expected, "{framing:?}");
    }
}

#[tokio::test]
async fn an_oversize_frame_is_refused_before_it_is_written() {
    for framing in ALL {
        let (a, _b) = tokio::io::duplex(64);
        let mut writer = FrameWriter::new(a, framing, 16);
        let err = writer.send("y".repeat(17)).await.unwrap_err();
        assert!(
            matches!(
                err,
                FrameError::TooLarge {
                    size: Some(17),
                    limit: 16
                }
            ),
            "{framing:?}: {err:?}"
        );
    }
}

#[tokio::test]
async fn an_announced_oversize_frame_is_refused_before_its_body_arrives() {
    let (mut a, b) = tokio::io::duplex(64);
    let mut reader = FrameReader::new(b, Framing::LengthPrefixed, 16);
    // Only the 4-byte prefix: the reader must refuse on the announced length, not wait for 1 MiB.
    a.write_all(&(1u32 << 20).to_be_bytes()).await.unwrap();
    let err = reader.next().await.unwrap().unwrap_err();
    assert!(
        matches!(
            err,
            FrameError::TooLarge {
                size: Some(1_048_576),
                limit: 16
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_stream_ending_inside_a_frame_is_truncated_not_a_clean_end() {
    let (mut a, b) = tokio::io::duplex(64);
    let mut reader = FrameReader::new(b, Framing::LengthPrefixed, 16);
    // 8 bytes announced, 2 sent: the prefix is consumed, the 2 body bytes are what was left.
    a.write_all(&[0, 0, 0, 8, b'a', b'b']).await.unwrap();
    drop(a);
    let err = reader.next().await.unwrap().unwrap_err();
    assert!(matches!(err, FrameError::Truncated(2)), "{err:?}");
}
