//! A bound in bytes on the HTTP request bodies held at once, beside the bound on each
//! ([`HttpOptions::max_request_bytes`](super::HttpOptions)). Each body is bounded, yet 250 bodies of 4 MB at once,
//! each refused with a 400 in the end, took the server to 1.4 GB (the hostile run of stop 40): a body is held
//! while it arrives and while it is decoded, and decoding multiplies it. A request reserves its body's size
//! (its `Content-Length`, or the most a body may be) before reading it and gives it back when it has been
//! answered; one that does not fit is refused at once, so what is held never passes the bound.

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
