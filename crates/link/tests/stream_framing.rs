#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Framings at their boundaries, through a live link: frames split across writes are reassembled, several
//! in one write are separated, and an oversize frame or garbage ends the link with a reason naming what was
//! wrong, failing the requests in flight with it.

use crate::support;

use bridge_link::{FrameCodec, Framing, LinkError};
use bytes::BytesMut;
use std::time::Duration;
use support::*;
use tokio::io::AsyncWriteExt;
use tokio_util::codec::Encoder;

fn encoded(framing: Framing, frames: &[&str]) -> Vec<u8> {
    let mut codec = FrameCodec::new(framing, 1 << 20);
    let mut out = BytesMut::new();
    for f in frames {
        codec.encode((*f).to_owned(), &mut out).unwrap();
    }
    out.to_vec()
}

/// Writes raw bytes as the far end.
async fn write_raw(
    remote: &mut tokio_util::codec::Framed<tokio::io::DuplexStream, FrameCodec>,
    bytes: &[u8],
) {
    remote.get_mut().write_all(bytes).await.unwrap();
}

#[tokio::test]
async fn frames_split_across_writes_and_joined_in_one_are_both_read() {
    for framing in FRAMINGS {
        let mut pair = pair(framing);
        let peer = pair.peer.clone();
        let calls = futures::future::join(
            peer.request(|id| request(id, "one"), Duration::from_secs(20)),
            peer.request(|id| request(id, "two"), Duration::from_secs(20)),
        );
        let far = async {
            let a = next_request(&mut pair.remote).await;
            let b = next_request(&mut pair.remote).await;
            let ra = format!(r#"{{"id":{},"result":"one"}}"#, a["id"]);
            let rb = format!(r#"{{"id":{},"result":"two"}}"#, b["id"]);
            // The first answer one byte at a time, the second glued to its last byte.
            let first = encoded(framing, &[&ra]);
            let second = encoded(framing, &[&rb]);
            for byte in &first[..first.len() - 1] {
                write_raw(&mut pair.remote, &[*byte]).await;
                tokio::task::yield_now().await;
            }
            let mut tail = vec![first[first.len() - 1]];
            tail.extend_from_slice(&second);
            write_raw(&mut pair.remote, &tail).await;
        };
        let ((one, two), ()) = within("both answers", futures::future::join(calls, far)).await;
        assert_eq!(one.unwrap()["result"], "one", "{framing:?}");
        assert_eq!(two.unwrap()["result"], "two", "{framing:?}");
    }
}

/// Sends `bytes` as the far end while a request waits; returns the request's error and the link's reason.
async fn poisoned(framing: Framing, bytes: &[u8]) -> (LinkError, String) {
    let mut pair = pair(framing);
    let peer = pair.peer.clone();
    let call = peer.request(|id| request(id, "x"), Duration::from_secs(3600));
    let far = async {
        next_request(&mut pair.remote).await;
        write_raw(&mut pair.remote, bytes).await;
    };
    let (result, ()) = within("the failure", futures::future::join(call, far)).await;
    let reason = within("the link's end", pair.served).await.unwrap();
    (result.unwrap_err(), reason.to_string())
}

#[tokio::test]
async fn an_oversize_frame_ends_the_link_naming_the_limit() {
    let big = format!(r#"{{"id":1,"result":"{}"}}"#, "y".repeat(LIMIT));
    for framing in FRAMINGS {
        let (err, reason) = poisoned(framing, &encoded(framing, &[&big])).await;
        assert!(
            reason.contains("the limit is 1024 bytes"),
            "{framing:?}: {reason}"
        );
        assert!(
            matches!(&err, LinkError::Disconnected { reason: r } if r.contains("1024")),
            "{framing:?}: {err:?}"
        );
    }
    // A length prefix or header announces the size before the bytes come: it is refused at once, by size.
    for framing in [Framing::ContentLength, Framing::LengthPrefixed] {
        let announced = match framing {
            Framing::ContentLength => b"Content-Length: 999999999\r\n\r\n".to_vec(),
            _ => 999_999_999u32.to_be_bytes().to_vec(),
        };
        let (_, reason) = poisoned(framing, &announced).await;
        assert!(
            reason.contains("999999999 bytes; the limit is 1024 bytes"),
            "{framing:?}: {reason}"
        );
    }
}

#[tokio::test]
async fn garbage_ends_the_link_with_a_clear_reason() {
    let cases: [(Framing, &[u8], &str); 5] = [
        (Framing::Lines, b"\xff\xfe not utf-8\n", "not valid UTF-8"),
        (
            Framing::ContentLength,
            b"Content-Length: lots\r\n\r\n",
            "is not a byte count",
        ),
        (
            Framing::ContentLength,
            b"Content-Type: json\r\n\r\n{}",
            "no Content-Length header",
        ),
        (
            Framing::ContentLength,
            b"no colon here\r\n\r\n",
            "is not a `Name: value` header",
        ),
        (
            Framing::LengthPrefixed,
            b"\x00\x00\x00\x02\xc3\x28",
            "not valid UTF-8",
        ),
    ];
    for (framing, bytes, expected) in cases {
        let (_, reason) = poisoned(framing, bytes).await;
        assert!(reason.contains(expected), "{framing:?}: {reason}");
    }
    // A header block that never ends is refused once it passes its own bound.
    let endless = "X-Pad: aaaaaaaa\r\n".repeat(100);
    let (_, reason) = poisoned(Framing::ContentLength, endless.as_bytes()).await;
    assert!(
        reason.contains("no end of the header block within 1024 bytes"),
        "{reason}"
    );
}
