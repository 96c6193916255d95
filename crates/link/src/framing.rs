//! How frames are cut out of a byte stream: newline-delimited JSON, `Content-Length` headers (DAP, LSP) or a
//! u32 big-endian length prefix. Every framing has a maximum frame size in bytes, checked *before* the frame
//! is buffered, so a peer announcing or dribbling a huge frame is refused with an error naming the limit
//! instead of growing a buffer. Frames are text (the links carry JSON); invalid UTF-8 is an error.
//!
//! Lines and length prefixes are tokio-util's `LinesCodec` and `LengthDelimitedCodec`; only the
//! `Content-Length` header block is parsed here.

use bytes::{Buf, BufMut, BytesMut};
use std::io;
use tokio_util::codec::length_delimited::LengthDelimitedCodecError;
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec, LinesCodec, LinesCodecError};

/// Largest `Content-Length` header block accepted; real ones are one or two short lines.
pub const MAX_HEADER_BYTES: usize = 1024;

/// How a byte stream is cut into frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One JSON value per line (`\n`, a trailing `\r` dropped); blank lines are skipped.
    Lines,
    /// `Content-Length: N\r\n` (other headers ignored), a blank line, then N bytes: DAP and LSP.
    ContentLength,
    /// A u32 big-endian byte count, then that many bytes.
    LengthPrefixed,
}

/// A stream that cannot be read as frames. The link ends with this as its reason.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// `size` is `None` when the frame was refused before its end was seen (a line without its newline).
    #[error("peer sent a frame of {} bytes; the limit is {limit} bytes", size.map_or_else(|| format!("more than {limit}"), |s| s.to_string()))]
    TooLarge { size: Option<usize>, limit: usize },
    #[error("peer sent a malformed frame header: {0}")]
    Header(String),
    #[error("peer sent a frame that is not valid UTF-8")]
    NotUtf8,
    #[error("the stream ended inside a frame ({0} bytes of it unread)")]
    Truncated(usize),
    #[error("connection failed: {0}")]
    Io(#[from] io::Error),
}

/// Encodes and decodes text frames in one [`Framing`], none larger than `max_frame_bytes`.
#[derive(Debug)]
pub struct FrameCodec {
    inner: Inner,
    max: usize,
}

#[derive(Debug)]
enum Inner {
    Lines(LinesCodec),
    ContentLength(Option<(usize, usize)>),
    Prefixed(LengthDelimitedCodec),
}

impl FrameCodec {
    pub fn new(framing: Framing, max_frame_bytes: usize) -> Self {
        let inner = match framing {
            Framing::Lines => Inner::Lines(LinesCodec::new_with_max_length(max_frame_bytes)),
            Framing::ContentLength => Inner::ContentLength(None),
            Framing::LengthPrefixed => Inner::Prefixed(
                LengthDelimitedCodec::builder()
                    .big_endian()
                    .length_field_type::<u32>()
                    .max_frame_length(max_frame_bytes)
                    .new_codec(),
            ),
        };
        Self {
            inner,
            max: max_frame_bytes,
        }
    }

    fn too_large(&self, size: Option<usize>) -> FrameError {
        FrameError::TooLarge {
            size,
            limit: self.max,
        }
    }
}

impl Decoder for FrameCodec {
    type Item = String;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<String>, FrameError> {
        let max = self.max;
        match &mut self.inner {
            Inner::Lines(codec) => loop {
                match codec.decode(src) {
                    Ok(Some(line)) if line.trim().is_empty() => continue,
                    Ok(line) => return Ok(line),
                    Err(LinesCodecError::MaxLineLengthExceeded) => {
                        return Err(FrameError::TooLarge {
                            size: None,
                            limit: max,
                        });
                    }
                    Err(LinesCodecError::Io(e)) => return Err(io_error(e)),
                }
            },
            Inner::Prefixed(codec) => match codec.decode(src) {
                Ok(Some(bytes)) => String::from_utf8(bytes.to_vec())
                    .map(Some)
                    .map_err(|_| FrameError::NotUtf8),
                Ok(None) => Ok(None),
                Err(e)
                    if e.get_ref()
                        .is_some_and(|e| e.is::<LengthDelimitedCodecError>()) =>
                {
                    // The announced length is in the first four bytes, still in `src`.
                    let size = (src.len() >= 4)
                        .then(|| u32::from_be_bytes([src[0], src[1], src[2], src[3]]) as usize);
                    Err(FrameError::TooLarge { size, limit: max })
                }
                Err(e) => Err(io_error(e)),
            },
            Inner::ContentLength(state) => {
                let (head, body) = match *state {
                    Some(known) => known,
                    None => {
                        let Some(head) = find_blank_line(src) else {
                            if src.len() > MAX_HEADER_BYTES {
                                return Err(FrameError::Header(format!(
                                    "no end of the header block within {MAX_HEADER_BYTES} bytes"
                                )));
                            }
                            return Ok(None);
                        };
                        let body = content_length(&src[..head])?;
                        if body > max {
                            return Err(FrameError::TooLarge {
                                size: Some(body),
                                limit: max,
                            });
                        }
                        *state = Some((head, body));
                        (head, body)
                    }
                };
                if src.len() < head + body {
                    src.reserve(head + body - src.len());
                    return Ok(None);
                }
                *state = None;
                src.advance(head);
                let frame = src.split_to(body);
                String::from_utf8(frame.to_vec())
                    .map(Some)
                    .map_err(|_| FrameError::NotUtf8)
            }
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<String>, FrameError> {
        if let Inner::Lines(codec) = &mut self.inner {
            // A last line without its newline is still a line.
            return match codec.decode_eof(src) {
                Ok(Some(line)) if line.trim().is_empty() => Ok(None),
                Ok(line) => Ok(line),
                Err(LinesCodecError::MaxLineLengthExceeded) => Err(self.too_large(None)),
                Err(LinesCodecError::Io(e)) => Err(io_error(e)),
            };
        }
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => Err(FrameError::Truncated(src.len())),
        }
    }
}

impl Encoder<String> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, frame: String, dst: &mut BytesMut) -> Result<(), FrameError> {
        if frame.len() > self.max {
            return Err(self.too_large(Some(frame.len())));
        }
        match &mut self.inner {
            Inner::Lines(codec) => codec.encode(frame, dst).map_err(|e| match e {
                LinesCodecError::Io(e) => FrameError::Io(e),
                LinesCodecError::MaxLineLengthExceeded => FrameError::TooLarge {
                    size: None,
                    limit: self.max,
                },
            }),
            Inner::Prefixed(codec) => codec
                .encode(bytes::Bytes::from(frame), dst)
                .map_err(FrameError::Io),
            Inner::ContentLength(_) => {
                let header = format!("Content-Length: {}\r\n\r\n", frame.len());
                dst.reserve(header.len() + frame.len());
                dst.put_slice(header.as_bytes());
                dst.put_slice(frame.as_bytes());
                Ok(())
            }
        }
    }
}

fn io_error(e: io::Error) -> FrameError {
    if e.kind() == io::ErrorKind::InvalidData {
        FrameError::NotUtf8
    } else {
        FrameError::Io(e)
    }
}

/// Length of the header block including its terminating blank line, once it is all in `src`.
fn find_blank_line(src: &[u8]) -> Option<usize> {
    let window = &src[..src.len().min(MAX_HEADER_BYTES + 4)];
    window
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

fn content_length(head: &[u8]) -> Result<usize, FrameError> {
    let text = std::str::from_utf8(head)
        .map_err(|_| FrameError::Header("the header block is not text".into()))?;
    let mut length = None;
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| FrameError::Header(format!("{line:?} is not a `Name: value` header")))?;
        if name.trim().eq_ignore_ascii_case("content-length") {
            let n = value.trim().parse::<usize>().map_err(|_| {
                FrameError::Header(format!(
                    "Content-Length {:?} is not a byte count",
                    value.trim()
                ))
            })?;
            length = Some(n);
        }
    }
    length.ok_or_else(|| FrameError::Header("no Content-Length header".into()))
}
