//! A bound in bytes on the HTTP request bodies held at once, beside the bound on each
//! ([`HttpOptions::max_request_bytes`](super::HttpOptions)). Each body is bounded, yet 250 bodies of 4 MB at once,
//! each refused with a 400 in the end, took the server to 1.4 GB (the hostile run of stop 40): a body is held
//! while it arrives and while it is decoded, and decoding multiplies it. A request reserves its body's size
//! (its `Content-Length`, or the most a body may be) before reading it and gives it back when it has been
//! answered, and once it is read, what decoding it will take beyond that ([`BodyBudget::reserve_decoding`]);
//! one that does not fit is refused at once, so what is held never passes the bound.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The default bound: sixteen bodies of the default 4 MiB each.
pub const DEFAULT_MAX_PENDING_REQUEST_BYTES: usize = 64 << 20;

#[derive(Debug)]
pub(crate) struct BodyBudget {
    bytes: Arc<Semaphore>,
    max: usize,
}

/// A body's bytes, given back when dropped.
pub(crate) type Reserved = OwnedSemaphorePermit;

impl BodyBudget {
    /// A budget of `max` bytes; never less than `max_body`, so one body of the largest size always fits.
    pub(crate) fn new(max: usize, max_body: usize) -> Arc<Self> {
        let max = max.max(max_body).min(Semaphore::MAX_PERMITS);
        Arc::new(Self {
            bytes: Arc::new(Semaphore::new(max)),
            max,
        })
    }

    /// Reserves what the body of a request with `headers` may take, at most `max_body`; refused when that
    /// does not fit beside what other requests hold.
    pub(crate) fn reserve(
        &self,
        headers: &HeaderMap,
        max_body: usize,
    ) -> Result<Reserved, Refused> {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<usize>().ok());
        let bytes = declared.map_or(max_body, |n| n.min(max_body));
        // At most `max_body`, itself at most 256 MiB (`--mcp-max-request-bytes`): it fits a u32.
        let permits = u32::try_from(bytes).unwrap_or(u32::MAX);
        Arc::clone(&self.bytes)
            .try_acquire_many_owned(permits)
            .map_err(|_| Refused {
                bytes,
                max: self.max,
            })
    }

    /// Adds to `reserved` what decoding `body` takes beyond its bytes
    /// ([`crate::link::json_cost::decoded_bytes`]): bodies of tiny values held within the bound still decoded
    /// far past it (16 bodies of 4 MB of `0,`, 64 MB in all, took the server past 1 GB; `bench/decode-flood.py`).
    /// Refused when that can never fit (413) or does not fit now (503), naming the limit.
    pub(crate) fn reserve_decoding(
        &self,
        reserved: &mut Reserved,
        body: &[u8],
    ) -> Result<(), DecodeRefused> {
        let cost = crate::link::json_cost::decoded_bytes(body);
        if cost > self.max {
            return Err(DecodeRefused {
                cost,
                max: self.max,
                fits_later: false,
            });
        }
        let more = cost.saturating_sub(reserved.num_permits());
        if more == 0 {
            return Ok(());
        }
        // At most `self.max`, which `new` keeps within the semaphore's permits (a u32 here: it fits).
        let permits = u32::try_from(more).unwrap_or(u32::MAX);
        let taken = Arc::clone(&self.bytes)
            .try_acquire_many_owned(permits)
            .map_err(|_| DecodeRefused {
                cost,
                max: self.max,
                fits_later: true,
            })?;
        reserved.merge(taken);
        Ok(())
    }

    /// Bytes reserved now.
    pub(crate) fn held(&self) -> usize {
        self.max.saturating_sub(self.bytes.available_permits())
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }
}

/// A body that did not fit: answered 503, naming the limit.
#[derive(Debug)]
pub(crate) struct Refused {
    bytes: usize,
    max: usize,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let Refused { bytes, max } = self;
        let mut response = (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "this request's body of up to {bytes} bytes does not fit beside the bodies other requests hold: \
                 at most {max} bytes at once (MCP_MAX_PENDING_REQUEST_BYTES / --mcp-max-pending-request-bytes); \
                 retry when fewer requests are in flight\n"
            ),
        )
            .into_response();
        let headers = response.headers_mut();
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        // The body was not read: the connection cannot carry another request.
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        response
    }
}

/// A body whose decoding does not fit the budget.
#[derive(Debug)]
pub(crate) struct DecodeRefused {
    cost: usize,
    max: usize,
    /// Whether it would fit once other requests are done (503), or never (413).
    fits_later: bool,
}

impl IntoResponse for DecodeRefused {
    fn into_response(self) -> Response {
        let DecodeRefused {
            cost,
            max,
            fits_later,
        } = self;
        let limit = format!(
            "at most {max} bytes of request bodies, decoded, at once (MCP_MAX_PENDING_REQUEST_BYTES / \
             --mcp-max-pending-request-bytes)"
        );
        if !fits_later {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "decoding this request's body would take about {cost} bytes (its JSON values, not only its \
                     text), over the limit: {limit}; send fewer values, or large data as one string\n"
                ),
            )
                .into_response();
        }
        let mut response = (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "decoding this request's body would take about {cost} bytes, which does not fit beside the \
                 bodies other requests hold: {limit}; retry when fewer requests are in flight\n"
            ),
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        response
    }
}
