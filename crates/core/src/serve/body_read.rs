//! Reading a request's body within a deadline. The listener's deadlines end once a request head has arrived,
//! so a body that never finished held its connection for good: 256 request heads, then a byte of each body
//! every 5 s, locked every other local client out of the port (an attack run's finding; all of loopback is one
//! address). A body gets [`HttpOptions::body_timeout`](super::HttpOptions) to start, and that much more for
//! each [`MIN_BYTES_PER_SEC`] it has sent: a large body on a slow link still arrives, a dripped one does not.

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use std::time::Duration;
use tokio::time::Instant;

/// The slowest a body may arrive, past its first allowance.
pub(crate) const MIN_BYTES_PER_SEC: usize = 64 << 10;

/// Why a body was not read.
#[derive(Debug, PartialEq)]
pub(crate) enum BodyRead {
    /// Over `max` bytes.
    TooLarge,
    /// Not all there in time.
    TooSlow,
    /// The connection failed while it arrived.
    Failed(String),
}

/// The whole of `body`, at most `max` bytes, arriving within `allowance` plus `allowance` per
/// [`MIN_BYTES_PER_SEC`] received.
pub(crate) async fn read_body(
    body: Body,
    max: usize,
    allowance: Duration,
) -> Result<Bytes, BodyRead> {
    let start = Instant::now();
    let mut stream = body.into_data_stream();
    let mut buf = BytesMut::new();
    loop {
        let earned = allowance
            .saturating_mul(u32::try_from(buf.len() / MIN_BYTES_PER_SEC).unwrap_or(u32::MAX));
        let deadline = start + allowance.saturating_add(earned);
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) => return Err(BodyRead::TooSlow),
            Ok(None) => return Ok(buf.freeze()),
            Ok(Some(Err(e))) => return Err(BodyRead::Failed(e.to_string())),
            Ok(Some(Ok(chunk))) => {
                if buf.len().saturating_add(chunk.len()) > max {
                    return Err(BodyRead::TooLarge);
                }
                buf.extend_from_slice(&chunk);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_arriving_is_given_up_and_one_that_arrives_is_read() {
        let (tx, rx) = futures::channel::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        let body = Body::from_stream(rx);
        let mut tx = tx;
        futures::SinkExt::send(&mut tx, Ok(Bytes::from_static(b"{\"a\":")))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // The sender is kept and sends nothing more: a dripping client's next byte comes too late.
        let read = read_body(body, 1 << 20, Duration::from_secs(10)).await;
        assert_eq!(read, Err(BodyRead::TooSlow));
        drop(tx);

        let whole = read_body(Body::from("{\"a\":1}"), 1 << 20, Duration::from_secs(10)).await;
        assert_eq!(whole.as_deref(), Ok(&b"{\"a\":1}"[..]));
        let large = read_body(Body::from(vec![b' '; 100]), 10, Duration::from_secs(10)).await;
        assert_eq!(large, Err(BodyRead::TooLarge));
    }
}
