//! Frames over a tokio byte stream without the `futures` crate: tokio-util's `FramedRead`/`FramedWrite`
//! driven through the `Stream`/`Sink` traits themselves, which are all a caller needs for one frame at a
//! time. (`futures::StreamExt`/`SinkExt` would pull futures-util and its tree into every user.)

use crate::framing::{FrameCodec, FrameError, Framing};
use futures_core::Stream;
use futures_sink::Sink;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{FramedRead, FramedWrite};

/// Reads text frames of one [`Framing`] from `R`.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: FramedRead<R, FrameCodec>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(read: R, framing: Framing, max_frame_bytes: usize) -> Self {
        Self {
            inner: FramedRead::new(read, FrameCodec::new(framing, max_frame_bytes)),
        }
    }

    /// The next frame; `None` when the stream ended cleanly between frames. After an error the stream
    /// cannot be resynchronised: stop reading.
    pub async fn next(&mut self) -> Option<Result<String, FrameError>> {
        poll_fn(|cx| Pin::new(&mut self.inner).poll_next(cx)).await
    }
}

/// Writes text frames of one [`Framing`] to `W`; each [`send`](Self::send) is flushed before it returns.
#[derive(Debug)]
pub struct FrameWriter<W> {
    inner: FramedWrite<W, FrameCodec>,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    pub fn new(write: W, framing: Framing, max_frame_bytes: usize) -> Self {
        Self {
            inner: FramedWrite::new(write, FrameCodec::new(framing, max_frame_bytes)),
        }
    }

    /// Encodes `frame` (refused with [`FrameError::TooLarge`] above the limit, nothing written) and flushes it.
    pub async fn send(&mut self, frame: String) -> Result<(), FrameError> {
        let mut sink = Pin::new(&mut self.inner);
        poll_fn(|cx| sink.as_mut().poll_ready(cx)).await?;
        sink.as_mut().start_send(frame)?;
        poll_fn(|cx| sink.as_mut().poll_flush(cx)).await
    }

    /// Flushes what is buffered and shuts the write side down (the peer reads end of stream).
    pub async fn close(&mut self) -> io::Result<()> {
        let mut sink = Pin::new(&mut self.inner);
        poll_fn(|cx| sink.as_mut().poll_close(cx))
            .await
            .map_err(|e| match e {
                FrameError::Io(e) => e,
                other => io::Error::other(other),
            })
    }

    pub fn get_mut(&mut self) -> &mut W {
        self.inner.get_mut()
    }
}
