//! What a client gets for input rmcp cannot dispatch: JSON-RPC errors a client library can show, where rmcp
//! would answer with a bare HTTP status or "method not found".

use super::body_budget::BodyBudget;
use super::body_read::{BodyRead, read_body};
use super::drain::Drain;
use super::http::{FastPath, LegacyPath, Sessions};
use super::sessions::SessionLimit;
use crate::auth::Access;
use crate::text::shorten_middle;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CustomRequest, ErrorCode, GetPromptRequestParams,
    InitializeRequestParams, ReadResourceRequestParams, SubscribeRequestParams,
};
use rmcp::transport::streamable_http_server::StreamableHttpService;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The default limit on a request body, rmcp's own (`StreamableHttpServerConfig::max_request_body_bytes`).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 << 20;
/// The first protocol version without sessions or `resources/subscribe`.
const STATELESS_ERA: &str = "2026-07-28";
/// Methods of both eras whose params rmcp types; anything else it cannot parse is a method we do not know.
const KNOWN_METHODS: [&str; 16] = [
    "initialize",
    "ping",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "tasks/get",
];

/// Methods 2026-07-28 removed: in that era they do not exist (-32601), whatever their params.
const REMOVED_IN_STATELESS_ERA: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The error for a request rmcp handed over as custom: a known method with params that do not parse
/// (-32602, saying what is wrong), or a method this server does not have in the request's era (-32601).
pub(crate) fn unparsed_request(request: &CustomRequest, stateless_era: bool) -> McpError {
    let method = request.method.as_str();
    let problem = match method {
        _ if stateless_era && REMOVED_IN_STATELESS_ERA.contains(&method) => None,
        "tools/call" => Some(params_problem::<CallToolRequestParams>(request)),
        "resources/read" => Some(params_problem::<ReadResourceRequestParams>(request)),
        "resources/subscribe" | "resources/unsubscribe" => {
            Some(params_problem::<SubscribeRequestParams>(request))
        }
        "prompts/get" => Some(params_problem::<GetPromptRequestParams>(request)),
        "initialize" => Some(params_problem::<InitializeRequestParams>(request)),
        _ if KNOWN_METHODS.contains(&method) => Some("they do not match its schema".to_owned()),
        _ => None,
    };
    // Quoted shortened: a method name or a wrong-typed value of megabytes came back whole, twice for the name
    // (message and data), so an error answered 8 MB to a 4 MB request.
    let method = shorten_middle(method, MAX_QUOTED_CHARS);
    match problem {
        Some(problem) => McpError::invalid_params(
            format!(
                "invalid params for `{method}`: {}",
                shorten_middle(&problem, MAX_QUOTED_CHARS)
            ),
            Some(json!({ "method": method })),
        ),
        None => McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: `{method}`"),
            Some(json!({ "method": method })),
        ),
    }
}

/// The most characters of a client's input an error quotes.
const MAX_QUOTED_CHARS: usize = 240;

/// Why a known method's params did not parse. rmcp read them from the text; here they are read from the tree
/// rmcp kept, which holds one of a repeated key: when they read from it, that is the usual cause.
fn params_problem<T: DeserializeOwned>(request: &CustomRequest) -> String {
    let params = request.params.clone().unwrap_or(Value::Null);
    match serde_json::from_value::<T>(params) {
        Err(e) => e.to_string(),
        Ok(_) => "they could not be read as sent; a key that appears more than once in them is the usual cause"
            .to_owned(),
    }
}

/// What the front of `/mcp` needs: the access rules, the session cap, the body limit rmcp was given too, the
/// drain that counts calls in flight, and our fast path (`None` sends every request to rmcp).
pub(crate) struct Front {
    pub access: Arc<Access>,
    pub sessions: Arc<SessionLimit>,
    pub max_body: usize,
    /// See [`HttpOptions::body_timeout`](super::HttpOptions).
    pub body_timeout: std::time::Duration,
    /// Bytes of the bodies held at once.
    pub budget: Arc<BodyBudget>,
    pub drain: Arc<Drain>,
    pub fast: Option<FastPath>,
    /// Our answer to the hot requests of a legacy session (`None` sends them to rmcp).
    pub legacy: Option<LegacyPath>,
}

/// rmcp's HTTP service, as `/mcp` serves it.
pub(crate) type Rmcp = StreamableHttpService<super::handler::McpHandler, Sessions>;

/// The `/mcp` service: Host, Origin and token; a POST counts as in flight until its response body has been
/// sent (shutdown waits for it); JSON-RPC errors where rmcp would answer with a bare status; the hot
/// stateless requests answered by [`FastPath`], the hot requests of a legacy session by [`LegacyPath`];
/// everything else handed to rmcp's service. A service of its
/// own rather than an axum middleware around rmcp's: `from_fn` clones and boxes the inner service and boxes
/// its own future on every request, which the fast path's requests never use. A clone is one `Arc`.
#[derive(Clone)]
pub(crate) struct McpService {
    inner: Arc<McpInner>,
    /// Serves the paths below `/mcp` (`/mcp/`, `/mcp/...`): `/mcp` is taken off the path first, as axum's
    /// `nest_service` did for every path. `/mcp` itself is routed to a service without it: the prefix
    /// stripping cost more than a tenth of a request's own instructions.
    nested: bool,
}

struct McpInner {
    front: Front,
    rmcp: Rmcp,
}

impl McpService {
    pub(crate) fn new(front: Front, rmcp: Rmcp) -> Self {
        Self {
            inner: Arc::new(McpInner { front, rmcp }),
            nested: false,
        }
    }

    /// The same service for the paths below `/mcp`, which it sees without the `/mcp` prefix.
    pub(crate) fn nested(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            nested: true,
        }
    }
}

/// `uri` without its leading `/mcp`, as axum's `StripPrefix` gives it to a service nested at `/mcp`: the
/// rest of the path (`/` when nothing is left), the query kept. `None` when the path is not below `/mcp`.
fn below_mcp(uri: &axum::http::Uri) -> Option<axum::http::Uri> {
    let rest = uri.path().strip_prefix("/mcp")?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return None;
    }
    let rest = if rest.is_empty() { "/" } else { rest };
    let path_and_query = match uri.query() {
        None => rest.parse().ok()?,
        Some(query) => format!("{rest}?{query}").parse().ok()?,
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(path_and_query);
    axum::http::Uri::from_parts(parts).ok()
}

impl tower::Service<Request> for McpService {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        if self.nested
            && let Some(uri) = below_mcp(request.uri())
        {
            *request.uri_mut() = uri;
        }
        let inner = self.inner.clone();
        // Made in its heap slot: `Box::pin(future)` makes it on the stack and copies all of it into the box.
        let slot = Box::new_uninit();
        let future = Box::write(slot, async move { Ok(inner.serve(request).await) });
        Box::into_pin(future)
    }
}

impl McpInner {
    async fn serve(&self, request: Request) -> Response {
        let front = &self.front;
        if let Err(refusal) = front.access.check(request.uri(), request.headers(), None) {
            super::http::log_refusal(&original_path(&request), &refusal);
            return refusal.into_response();
        }
        match *request.method() {
            Method::POST => {
                let call = front.drain.track();
                let response = self.post(request).await;
                super::drain::hold(call, response)
            }
            Method::DELETE => {
                let response = self.rmcp(request).await;
                // rmcp answers 202, which the Python SDK logs as a failed termination; it expects 200 or 204.
                if response.status() == StatusCode::ACCEPTED {
                    return StatusCode::NO_CONTENT.into_response();
                }
                response
            }
            _ => self.rmcp(request).await,
        }
    }

    /// Boxed: rmcp's future is large, and every request's future (the fast path's too) would carry room
    /// for it, copied whole each time it moves.
    async fn rmcp(&self, request: Request) -> Response {
        Box::pin(self.rmcp.handle(request)).await.map(Body::new)
    }

    async fn post(&self, request: Request) -> Response {
        let front = &self.front;
        let max_body = front.max_body;
        let sessions = &front.sessions;
        let (parts, body) = request.into_parts();
        // Held until the request is answered: decoding the body takes more than the body.
        let mut reserved = match front.budget.reserve(&parts.headers, max_body) {
            Ok(reserved) => Some(reserved),
            Err(refused) => return refused.into_response(),
        };
        // At the cap, a connection whose body is slow to come may be closed to make room (`net.rs`).
        let awaiting = parts
            .extensions
            .get::<axum::extract::ConnectInfo<crate::net::Conn>>()
            .map(|info| info.0.awaiting_body());
        let body = read_body(body, max_body, front.body_timeout).await;
        drop(awaiting);
        let body = match body {
            Ok(body) => body,
            Err(BodyRead::TooLarge) => {
                return (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "request body over {max_body} bytes (MCP_MAX_REQUEST_BYTES / --mcp-max-request-bytes)\n"
                    ),
                )
                    .into_response();
            }
            // The body was not read whole: the connection cannot carry another request.
            Err(BodyRead::TooSlow) => {
                return (
                    StatusCode::REQUEST_TIMEOUT,
                    [(axum::http::header::CONNECTION, "close")],
                    format!(
                        "the request body did not arrive in time ({} s, and as much again for each {} KiB sent)\n",
                        front.body_timeout.as_secs_f64(),
                        super::body_read::MIN_BYTES_PER_SEC >> 10
                    ),
                )
                    .into_response();
            }
            Err(BodyRead::Failed(why)) => {
                return (
                    StatusCode::BAD_REQUEST,
                    [(axum::http::header::CONNECTION, "close")],
                    format!("the request body could not be read: {why}\n"),
                )
                    .into_response();
            }
        };
        // Decoding takes more than the text: that too is held until the request is answered.
        if let Some(reserved) = reserved.as_mut()
            && let Err(refused) = front.budget.reserve_decoding(reserved, &body)
        {
            return refused.into_response();
        }
        // The fast path takes none of the methods 2026-07-28 removed (its `Mcp-Method` must name what it
        // takes), so they are looked for only in what it leaves.
        if let Some(fast) = &front.fast
            && let Some(response) = fast.answer(&parts, &body).await
        {
            return response;
        }
        if let Some(legacy) = &front.legacy
            && let Some(response) = legacy.answer(&parts, &body, &mut reserved).await
        {
            return response;
        }
        if let Some(method) = removed_in_stateless_era(&parts.headers) {
            return removed_method(method, &body);
        }
        // The handler refuses a session past the limit too; refusing here first spares rmcp creating one
        // only to tear it down, and logging an error each time.
        if sessions.live() >= sessions.max()
            && !parts.headers.contains_key("mcp-session-id")
            && let Some(id) = initialize_id(&body)
        {
            return session_refusal(sessions, id);
        }
        let declared_json = declares_json(&parts.headers);
        // `Bytes` clones share the buffer: the body is not copied.
        let response = self
            .rmcp(Request::from_parts(parts, Body::from(body.clone())))
            .await;
        unparsed_body(response, declared_json, &body)
    }
}

/// The path the client asked for: below `/mcp`, `/mcp` is stripped off the request's own URI before it gets here.
fn original_path(request: &Request) -> String {
    request
        .extensions()
        .get::<axum::extract::OriginalUri>()
        .map_or_else(
            || request.uri().path().to_owned(),
            |uri| uri.path().to_owned(),
        )
}

fn session_refusal(sessions: &SessionLimit, id: Value) -> Response {
    let error = sessions.refusal();
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": error.code.0, "message": error.message, "data": error.data },
    });
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::RETRY_AFTER, "10"),
        ],
        body.to_string(),
    )
        .into_response()
}

/// rmcp answers a body it cannot parse with 415, whatever the content type; the client sent JSON-RPC and
/// should get a JSON-RPC error.
fn unparsed_body(response: Response, declared_json: bool, body: &Bytes) -> Response {
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE || !declared_json {
        return response;
    }
    let diagnosis = super::invalid::diagnose(body);
    rpc_error(
        StatusCode::BAD_REQUEST,
        diagnosis.id_json(),
        diagnosis.code,
        diagnosis.message,
    )
}

/// The id of an `initialize` request, or `None` for anything else.
fn initialize_id(body: &Bytes) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct Head {
        method: Option<String>,
        id: Option<Value>,
    }
    let head: Head = serde_json::from_slice(body).ok()?;
    (head.method.as_deref() == Some("initialize")).then(|| head.id.unwrap_or(Value::Null))
}

/// rmcp's 415 means a wrong content type only when the request did not declare JSON; otherwise it means the
/// body did not parse.
pub(crate) fn declares_json(headers: &HeaderMap) -> bool {
    is_json(headers.get(header::CONTENT_TYPE))
}

/// A `Content-Type` value (the first, as `HeaderMap::get` gives it) declares JSON.
pub(crate) fn is_json(value: Option<&HeaderValue>) -> bool {
    // What clients send, compared whole before any parsing.
    if value.is_some_and(|v| v.as_bytes() == b"application/json") {
        return true;
    }
    value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// `resources/subscribe` sent in the stateless era: rmcp would demand an `Mcp-Name` header no client sends
/// for a method that era removed.
fn removed_in_stateless_era(headers: &HeaderMap) -> Option<&'static str> {
    // By `HeaderName`: a `&str` name is parsed again on every lookup.
    static PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
    static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
    let version = headers.get(&PROTOCOL_VERSION)?.to_str().ok()?;
    if version < STATELESS_ERA {
        return None;
    }
    match headers.get(&MCP_METHOD)?.to_str().ok()? {
        "resources/subscribe" => Some("resources/subscribe"),
        "resources/unsubscribe" => Some("resources/unsubscribe"),
        _ => None,
    }
}

fn removed_method(method: &str, body: &Bytes) -> Response {
    let id = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .unwrap_or(Value::Null);
    rpc_error(
        StatusCode::NOT_FOUND,
        id,
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "`{method}` is not part of protocol {STATELESS_ERA}: open `subscriptions/listen` with \
             `notifications.resourceSubscriptions` to hear `notifications/resources/updated`"
        ),
    )
}

fn rpc_error(status: StatusCode, id: Value, code: ErrorCode, message: String) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code.0, "message": message },
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_params_that_read_only_as_a_tree_are_invalid_params_not_an_unknown_method() {
        // What rmcp hands over for `"params":{"name":"a","name":"b"}`: the tree kept one `name`.
        let request = CustomRequest::new("tools/call", Some(json!({"name": "b", "arguments": {}})));
        for stateless_era in [false, true] {
            let error = unparsed_request(&request, stateless_era);
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{error:?}");
            assert!(error.message.contains("`tools/call`"), "{error:?}");
            assert!(error.message.contains("more than once"), "{error:?}");
        }
        let unknown = CustomRequest::new("no/such", Some(json!({})));
        assert_eq!(
            unparsed_request(&unknown, false).code,
            ErrorCode::METHOD_NOT_FOUND
        );
    }
}
