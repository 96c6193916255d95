//! What the two paths that answer requests themselves, instead of through rmcp's service loop (the stdio
//! loop, [`super::stdio`], and the HTTP fast path, [`super::http`]), do alike around the handler: the
//! request's context as rmcp's loop builds it, a panic answered as an internal error, and the result as its
//! JSON-RPC answer.

use super::panic;
use rmcp::model::{
    CallToolResponse, ClientRequest, ErrorCode, ErrorData, GetExtensions, GetMeta, JsonRpcMessage,
    RequestId, ServerResult,
};
use rmcp::service::{RequestContext, TxJsonRpcMessage};
use rmcp::{Peer, RoleServer};
use std::future::Future;

/// The request's context, with its `_meta` and extensions taken out of it as rmcp's loop does.
pub(crate) fn context(
    id: RequestId,
    request: &mut ClientRequest,
    peer: Peer<RoleServer>,
) -> RequestContext<RoleServer> {
    let mut context = RequestContext::new(id, peer);
    // The meta first: it is kept in the extensions, which would otherwise take it along.
    context.meta = std::mem::take(request.get_meta_mut());
    context.extensions = std::mem::take(request.extensions_mut());
    context
}

/// Runs a handler's future; a panic outside a tool handler's own guard (which answers it as a tool error)
/// is still answered, as an internal error.
pub(crate) async fn guarded<T>(
    handled: impl Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    panic::caught(handled)
        .await
        .unwrap_or_else(|panic| Err(panicked(&panic)))
}

/// The internal error that answers a request that panicked with `panic`.
pub(crate) fn panicked(panic: &str) -> ErrorData {
    tracing::error!(panic = %panic, "a request panicked; answered as an internal error");
    ErrorData::internal_error(
        format!("internal error (a bug in the bridge): {panic}"),
        None,
    )
}

/// The JSON-RPC answer to request `id`.
pub(crate) fn message(
    id: RequestId,
    result: Result<ServerResult, ErrorData>,
) -> TxJsonRpcMessage<RoleServer> {
    match result {
        Ok(result) => JsonRpcMessage::response(result, id),
        Err(error) => {
            tracing::debug!(%id, code = error.code.0, "answered with an error: {}", error.message);
            JsonRpcMessage::error(error, Some(id))
        }
    }
}

/// What rmcp's `handle_request` makes of `call_tool`'s answer (rmcp 3.9.0, `handler/server.rs`), for a
/// request of protocol 2026-07-28 or newer (`modern`) or an older one.
pub(crate) fn shape(
    called: Result<CallToolResponse, ErrorData>,
    modern: bool,
) -> Result<ServerResult, ErrorData> {
    match called {
        Ok(response) => {
            let mut result = ServerResult::from(response);
            if matches!(result, ServerResult::InputRequiredResult(_)) && !modern {
                Err(ErrorData::invalid_request(
                    "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                    None,
                ))
            } else {
                if modern {
                    result.fill_missing_cache_hints();
                } else {
                    result.strip_result_type_for_legacy_peer();
                }
                Ok(result)
            }
        }
        Err(mut error) => {
            if modern && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            Err(error)
        }
    }
}
