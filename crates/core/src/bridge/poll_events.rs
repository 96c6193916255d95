//! `poll_events`: the pull path for event streams, for clients that drop pushed notifications.

use super::unknown_stream;
use crate::error::ToolError;
use crate::events::{EventHub, EventPage};
use crate::tool::{ToolCtx, ToolSpec, Validate, check};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::time::Duration;

const DEFAULT_LIMIT: u32 = 100;
const MAX_LIMIT: u32 = 1000;
const MAX_WAIT_MS: u64 = 60_000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PollArgs {
    /// The stream to read (see the `<bridge>://events/<stream>` resources).
    stream: String,
    /// Return events after this sequence number: 0 (default) for all that are buffered, or `next_since` from
    /// the previous call.
    #[serde(default)]
    since: u64,
    /// At most this many events (1-1000, default 100).
    limit: Option<u32>,
    /// If nothing new is buffered, wait up to this many milliseconds for an event (0-60000, default 0).
    #[serde(default)]
    wait_ms: u64,
    /// Only events whose data has all of these top-level fields with these exact values.
    filter: Option<Map<String, Value>>,
}

impl Validate for PollArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("stream", &self.stream)?;
        if let Some(limit) = self.limit {
            check::in_range("limit", limit, 1, MAX_LIMIT)?;
        }
        check::in_range("wait_ms", self.wait_ms, 0, MAX_WAIT_MS)
    }
}

pub(crate) fn tool(events: EventHub) -> ToolSpec {
    ToolSpec::new(
        "poll_events",
        "Read events from one of this bridge's event streams, after a cursor. Pass `next_since` from the previous \
         result as `since` to get only newer events; `dropped` counts events lost because the buffer overflowed. \
         Set `wait_ms` to wait for the next event instead of polling in a loop.",
    )
    .read_only()
    .timeout(Duration::from_millis(MAX_WAIT_MS + 10_000))
    .handler(move |args: PollArgs, ctx: ToolCtx| {
        let events = events.clone();
        async move { poll(&events, args, &ctx).await }
    })
}

async fn poll(events: &EventHub, args: PollArgs, ctx: &ToolCtx) -> Result<EventPage, ToolError> {
    let stream = events
        .get(&args.stream)
        .ok_or_else(|| unknown_stream(events, &args.stream))?;
    let limit = usize::try_from(args.limit.unwrap_or(DEFAULT_LIMIT)).unwrap_or(usize::MAX);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(args.wait_ms);
    let cancel = ctx.cancellation();
    loop {
        // Register interest before reading, so an event published in between still wakes us.
        let grew = stream.grew();
        let page = stream.read_since(args.since, limit, args.filter.as_ref());
        if !page.events.is_empty() || page.more || tokio::time::Instant::now() >= deadline {
            return Ok(page);
        }
        tokio::select! {
            () = grew => {}
            () = tokio::time::sleep_until(deadline) => {}
            () = cancel.cancelled() => return Ok(page),
        }
    }
}
