//! Bounds on what one legacy-era MCP session may hold, and on how many sessions may live at once.
//!
//! Each `initialize` on HTTP starts a session that lives until the client deletes it or it idles out; 20 000 of
//! them once cost 1.1 GB. The 2026-07-28 era has no sessions, so these bounds touch only legacy clients.

use rmcp::ErrorData as McpError;
use rmcp::model::{Implementation, InitializeRequestParams};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Live legacy sessions, unless the user chose otherwise (`MCP_MAX_SESSIONS`).
pub const DEFAULT_MAX_SESSIONS: usize = 256;
/// A legacy session with no traffic for this long is closed (`MCP_SESSION_IDLE_MS`).
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(300);
/// `resources/subscribe` URIs one session may hold.
pub const MAX_SUBSCRIPTIONS: usize = 64;
/// The longest resource URI a client may subscribe to; ours are far shorter.
pub const MAX_URI_BYTES: usize = 1024;
/// How much of a client's self-description the session log line keeps.
const MAX_CLIENT_INFO_CHARS: usize = 64;

/// The process-wide count of live sessions against its limit.
#[derive(Debug)]
pub(crate) struct SessionLimit {
    live: AtomicUsize,
    max: usize,
}

impl SessionLimit {
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            live: AtomicUsize::new(0),
            max,
        })
    }

    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// A slot for one more session, held until the session ends; refused when all are taken.
    pub(crate) fn admit(self: &Arc<Self>) -> Result<SessionSlot, McpError> {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |live| {
                (live < self.max).then_some(live + 1)
            })
            .map(|_| SessionSlot(self.clone()))
            .map_err(|_| self.refusal())
    }

    /// The error a client gets for a session past the limit.
    pub(crate) fn refusal(&self) -> McpError {
        let live = self.live();
        McpError::internal_error(
            format!(
                "too many MCP sessions: {live} are open, the limit is {} (MCP_MAX_SESSIONS). Close sessions you \
                 no longer use (HTTP DELETE), wait for idle ones to expire, or use protocol 2026-07-28, which needs \
                 no session",
                self.max
            ),
            Some(serde_json::json!({ "live_sessions": live, "max_sessions": self.max })),
        )
    }
}

/// One admitted session; dropping it (when the session's handler goes) frees the slot.
#[derive(Debug)]
pub(crate) struct SessionSlot(Arc<SessionLimit>);

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Adds `uri` to a session's subscriptions unless that would pass the per-session bounds.
pub(crate) fn subscribe(uris: &mut HashSet<String>, uri: String) -> Result<(), McpError> {
    if uri.len() > MAX_URI_BYTES {
        return Err(McpError::invalid_params(
            format!("`uri` is {} bytes; the limit is {MAX_URI_BYTES}", uri.len()),
            Some(serde_json::json!({ "field": "uri", "max_bytes": MAX_URI_BYTES })),
        ));
    }
    if uris.len() >= MAX_SUBSCRIPTIONS && !uris.contains(&uri) {
        return Err(McpError::invalid_params(
            format!(
                "this session already has {MAX_SUBSCRIPTIONS} subscriptions, the limit: unsubscribe from one first"
            ),
            Some(serde_json::json!({ "field": "uri", "max_subscriptions": MAX_SUBSCRIPTIONS })),
        ));
    }
    uris.insert(uri);
    Ok(())
}

/// The URIs of a `subscriptions/listen` filter that fit the same bounds as a legacy session's.
pub(crate) fn listen_uris(requested: &[String]) -> Vec<String> {
    requested
        .iter()
        .filter(|uri| uri.len() <= MAX_URI_BYTES)
        .take(MAX_SUBSCRIPTIONS)
        .cloned()
        .collect()
}

/// The client's name and version for the log, cut short: a client chooses them, and one sent 3 MB.
pub(crate) fn client_summary(request: &InitializeRequestParams) -> (String, String) {
    let Implementation { name, version, .. } = &request.client_info;
    (shorten(name), shorten(version))
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_CLIENT_INFO_CHARS) {
        Some((cut, _)) => format!("{}… ({} bytes)", &text[..cut], text.len()),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_refused_past_the_limit_and_freed_on_drop() {
        let limit = SessionLimit::new(2);
        let a = limit.admit().unwrap();
        let _b = limit.admit().unwrap();
        let refused = limit.admit().unwrap_err();
        assert!(refused.message.contains("MCP_MAX_SESSIONS"), "{refused:?}");
        drop(a);
        assert_eq!(limit.live(), 1);
        assert!(limit.admit().is_ok());
    }

    #[test]
    fn subscriptions_are_bounded_in_count_and_uri_length() {
        let mut uris = HashSet::new();
        let long = "x".repeat(MAX_URI_BYTES + 1);
        assert!(
            subscribe(&mut uris, long)
                .unwrap_err()
                .message
                .contains("`uri`")
        );
        for i in 0..MAX_SUBSCRIPTIONS {
            subscribe(&mut uris, format!("test://{i}")).unwrap();
        }
        assert!(subscribe(&mut uris, "test://one-more".into()).is_err());
        assert!(
            subscribe(&mut uris, "test://0".into()).is_ok(),
            "again is fine"
        );
        assert_eq!(uris.len(), MAX_SUBSCRIPTIONS);
    }

    #[test]
    fn long_client_names_are_cut_at_a_character() {
        assert_eq!(shorten("claude"), "claude");
        let long = "é".repeat(1000);
        let short = shorten(&long);
        assert!(short.starts_with(&"é".repeat(MAX_CLIENT_INFO_CHARS)));
        assert!(short.ends_with("(2000 bytes)"), "{short}");
    }
}
