//! Resources a bridge serves beyond its event streams (a game's files, API definitions).

use crate::error::{ErrorCode, ToolError};
use futures::future::BoxFuture;
use rmcp::ErrorData as McpError;

/// A resource as listed to clients.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// A family of resources addressed by an RFC 6570 template, e.g. `bitburner://files/{server}/{filename}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceTemplateInfo {
    pub uri_template: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// The contents of one resource.
#[derive(Debug, Clone, PartialEq)]
pub enum ResourceBody {
    Text { mime_type: String, text: String },
    Blob { mime_type: String, bytes: Vec<u8> },
}

/// Supplies resources. Several providers may serve one bridge; each answers for the URIs it owns.
pub trait ResourceProvider: Send + Sync + 'static {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ResourceInfo>, ToolError>>;

    fn templates(&self) -> Vec<ResourceTemplateInfo> {
        Vec::new()
    }

    /// `Ok(None)` means "not mine": the next provider is asked.
    fn read<'a>(&'a self, uri: &'a str) -> BoxFuture<'a, Result<Option<ResourceBody>, ToolError>>;
}

/// The JSON-RPC error `resources/read` answers when a provider fails. Only "there is no such thing" is the
/// spec's resource-not-found (-32002): a client drops a URI it is told does not exist, so a game that is merely
/// disconnected, slow or busy answers -32603 instead, with the bridge's coded text (`[E_DISCONNECTED] … —
/// reconnect …`) and its `{code, message, hint, details}` as data, as a tool would.
pub(crate) fn read_error(error: &ToolError) -> McpError {
    // The message twice (text and data): each held to what a tool's error is.
    let error = error.shortened();
    let data = Some(error.to_structured());
    match error.code() {
        ErrorCode::NotFound => McpError::resource_not_found(error.to_string(), data),
        ErrorCode::InvalidArgument => McpError::invalid_params(error.to_string(), data),
        _ => McpError::internal_error(error.to_string(), data),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ErrorCode as RpcCode;

    /// A URI quoted in the error is held to a tool error's length, in the message and in its data.
    #[test]
    fn a_long_error_is_sent_shortened() {
        let uri = format!("bitburner://files/home/{}.txt", "a".repeat(650_000));
        let error = read_error(&ToolError::not_found(format!("no file at {uri}")));
        assert_eq!(error.code, RpcCode::RESOURCE_NOT_FOUND);
        assert!(error.message.len() < 10_000, "{}", error.message.len());
        let data = serde_json::to_string(&error.data).unwrap_or_default();
        assert!(data.len() < 10_000, "{}", data.len());
        assert!(error.message.contains("bytes in all"), "{}", error.message);
    }

    #[test]
    fn a_disconnected_game_is_not_a_missing_resource() {
        let error = read_error(&ToolError::disconnected("the game is not connected"));
        assert_ne!(error.code, RpcCode::RESOURCE_NOT_FOUND);
        assert_eq!(error.code, RpcCode::INTERNAL_ERROR);
        assert!(
            error
                .message
                .starts_with("[E_DISCONNECTED] the game is not connected"),
            "{}",
            error.message
        );
        let data = error.data.unwrap_or_default();
        assert_eq!(data["code"], "E_DISCONNECTED", "{data}");
    }

    #[test]
    fn timeouts_and_busy_are_not_missing_either() {
        for tool_error in [ToolError::timeout("slow"), ToolError::busy("full")] {
            assert_eq!(read_error(&tool_error).code, RpcCode::INTERNAL_ERROR);
        }
    }

    #[test]
    fn not_found_stays_not_found_and_a_bad_uri_is_invalid_params() {
        let error = read_error(&ToolError::not_found("no file x.js on home"));
        assert_eq!(error.code, RpcCode::RESOURCE_NOT_FOUND);
        assert!(
            error.message.starts_with("[E_NOT_FOUND]"),
            "{}",
            error.message
        );
        let error = read_error(&ToolError::invalid_argument("uri", "no server named"));
        assert_eq!(error.code, RpcCode::INVALID_PARAMS);
    }
}
