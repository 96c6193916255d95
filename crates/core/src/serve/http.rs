//! Streamable HTTP at `/mcp`, with `/health` and `/metrics` beside it.

use super::ServeError;
use super::body_budget::{BodyBudget, DEFAULT_MAX_PENDING_REQUEST_BYTES};
use super::edges::DEFAULT_MAX_REQUEST_BYTES;
use super::handler::{McpHandler, Shared};
use super::sessions::{DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, SessionLimit};
use crate::auth::{Access, HostPolicy, MissingOrigin, OriginPolicy, Token};
use crate::net::{self, GuardedListener, ListenLimits, ListenStats};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

mod fast;
mod legacy;
mod progress_only;
pub(crate) use fast::FastPath;
pub use legacy::MAX_RUNNING_CALLS as MAX_LEGACY_RUNNING_CALLS;
pub use legacy::MAX_SESSION_CALLS as MAX_LEGACY_SESSION_CALLS;
pub(crate) use legacy::{LegacyPath, Sessions};

/// Security settings of the HTTP transport.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Required as `Authorization: Bearer <token>` on `/mcp` when set.
    pub token: Option<String>,
    /// Origins allowed besides the local ones.
    pub extra_origins: Vec<String>,
    /// Host header values allowed besides the local ones.
    pub extra_hosts: Vec<String>,
    /// How long in-flight requests may run after shutdown starts.
    pub shutdown_grace: Duration,
    /// Connection cap and handshake/idle deadlines of the listener.
    pub limits: ListenLimits,
    /// Live legacy-era (`initialize`) sessions at most; more are refused with a JSON-RPC error.
    pub max_sessions: usize,
    /// A legacy session with no traffic for this long is closed.
    pub session_idle: Duration,
    /// Largest request body; a mounted bridge that needs more (`BridgeBuilder::max_request_bytes`) raises it.
    pub max_request_bytes: usize,
    /// Request bodies held at once, in bytes (raised to `max_request_bytes` if lower); a request whose body
    /// does not fit is refused with 503.
    pub max_pending_request_bytes: usize,
    /// How long a request's body may take to arrive once its head has, and as much again for each 64 KiB it
    /// sent (`serve/body_read.rs`).
    pub body_timeout: Duration,
    /// Which code answers the hot `/mcp` requests.
    pub paths: RequestPaths,
}

/// Which code answers `/mcp` requests ([`HttpOptions::paths`]): the hot stateless requests (`http/fast.rs`) and
/// the hot requests of legacy sessions (`http/legacy/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestPaths {
    /// Our own paths answer the hot requests (stateless requests, the calls of legacy sessions) as rmcp's
    /// service would; rmcp's service answers the rest.
    #[default]
    Front,
    /// rmcp's service answers every request: what tests compare the front with.
    RmcpOnly,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            token: None,
            extra_origins: Vec::new(),
            extra_hosts: Vec::new(),
            shutdown_grace: Duration::ZERO,
            limits: ListenLimits::default(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_pending_request_bytes: DEFAULT_MAX_PENDING_REQUEST_BYTES,
            session_idle: DEFAULT_SESSION_IDLE,
            body_timeout: Self::DEFAULT_BODY_TIMEOUT,
            paths: RequestPaths::Front,
        }
    }
}

impl HttpOptions {
    /// [`HttpOptions::body_timeout`]'s default.
    pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);

    /// Host, origin and token rules for every route: localhost pages and hosts, plus the extra ones.
    fn access(&self) -> Result<Access, ServeError> {
        let invalid = |e: crate::link::LinkError| ServeError::Access(e.to_string());
        let local = OriginPolicy::localhost(MissingOrigin::Accept);
        let origins = if self.extra_origins.is_empty() {
            local
        } else {
            local.with(
                OriginPolicy::new(&self.extra_origins, MissingOrigin::Accept).map_err(invalid)?,
            )
        };
        Ok(Access {
            origins,
            hosts: Some(HostPolicy::localhost_and(&self.extra_hosts).map_err(invalid)?),
            token: self.token.as_deref().map(Token::new),
            token_hint: "Authorization: Bearer <MCP_TOKEN>",
        })
    }
}

#[derive(Clone)]
struct AppState {
    shared: Arc<Shared>,
    access: Arc<Access>,
    sessions: Arc<SessionLimit>,
    listen: Arc<ListenStats>,
    limits: ListenLimits,
    max_body: usize,
    budget: Arc<BodyBudget>,
    /// Requests the fast path answered; `None` when it is off.
    fast_answered: Option<Arc<AtomicU64>>,
    /// Legacy-session requests the front answered; `None` when it is off.
    legacy_answered: Option<Arc<AtomicU64>>,
}

pub(crate) async fn serve(
    shared: Arc<Shared>,
    listener: TcpListener,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    // Not a child of `shutdown`: in-flight calls must outlive the start of shutdown by the grace period.
    let service_token = CancellationToken::new();
    let max_body = options
        .max_request_bytes
        .max(shared.mount.max_request_bytes().unwrap_or(0));
    let config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(max_body)
        .with_cancellation_token(service_token.clone())
        .with_legacy_session_mode(true)
        // Plain JSON replies for 2026-07-28 requests (legacy sessions keep SSE; a call that reports progress
        // switches to SSE by itself): half the client work per call, measured in bench/.
        .with_json_response(true)
        // Host and Origin are checked for every route by `check_access`, with the grammar links use too.
        .with_allowed_hosts(Vec::<String>::new())
        .with_allowed_origins(Vec::<String>::new());
    let factory_shared = shared.clone();
    let drain = shared.drain.clone();
    let sessions = SessionLimit::new(options.max_sessions);
    let factory_sessions = sessions.clone();
    // rmcp reaps a session idle for `keep_alive`; the slot it held under `sessions` goes with it. The legacy
    // front restarts rmcp's idle clock at intervals, not on each request, so rmcp waits that much longer.
    let front_on = options.paths == RequestPaths::Front;
    let mut session_manager = LocalSessionManager::default();
    session_manager.session_config.keep_alive = Some(if front_on {
        legacy::rmcp_keep_alive(options.session_idle)
    } else {
        options.session_idle
    });
    // Our manager around rmcp's: the registry of sessions the legacy front path answers for.
    let session_manager = Arc::new(Sessions::new(
        session_manager,
        front_on,
        shared.clone(),
        service_token.clone(),
        options.session_idle,
    ));
    let mcp = StreamableHttpService::new(
        move || {
            let handler = McpHandler::new(factory_shared.clone())
                .with_session_limit(factory_sessions.clone());
            if front_on {
                legacy::made(&handler);
            }
            Ok(handler)
        },
        session_manager.clone(),
        config,
    );
    let access = Arc::new(options.access()?);
    let fast = front_on.then(|| FastPath::start(shared.clone(), service_token.clone()));
    let legacy = front_on.then(|| LegacyPath::new(session_manager.clone()));
    let budget = BodyBudget::new(options.max_pending_request_bytes, max_body);
    let state = AppState {
        shared,
        access: access.clone(),
        sessions: sessions.clone(),
        listen: Arc::default(),
        limits: options.limits,
        max_body,
        budget: budget.clone(),
        fast_answered: fast.as_ref().map(FastPath::answered),
        legacy_answered: front_on.then(|| session_manager.answered()),
    };
    // `/mcp` is our service (access, drain, JSON-RPC edges, fast path) with rmcp's behind it; the pages and
    // anything else (the fallback's 404 included) are behind the same access check.
    let front = super::edges::Front {
        access,
        sessions,
        max_body,
        body_timeout: options.body_timeout,
        budget,
        drain: drain.clone(),
        fast,
        legacy,
    };
    // `/mcp` and the paths below it, as `nest_service("/mcp", ..)` routed them, without its prefix
    // stripping on `/mcp` itself.
    let service = super::edges::McpService::new(front, mcp);
    let mcp_routes = Router::new()
        .route_service("/mcp", service.clone())
        .route_service("/mcp/", service.nested())
        .route_service("/mcp/{*rest}", service.nested());
    let pages = Router::new()
        .route("/", get(index))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), check_access))
        .with_state(state.clone());
    let app = pages.merge(mcp_routes);
    let listener =
        GuardedListener::new(listener, options.limits).with_stats(Arc::clone(&state.listen));

    let grace = options.shutdown_grace;
    let graceful = {
        let shutdown = shutdown.clone();
        async move { shutdown.cancelled().await }
    };
    let server = net::serve(listener, app, graceful);
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => return result.map_err(ServeError::Io),
        () = shutdown.cancelled() => {}
    }
    // Stop accepting at once; let calls in flight finish within the grace period; then end the streams (an
    // open legacy-session stream would otherwise hold the server for the whole grace).
    tokio::select! {
        result = &mut server => {
            service_token.cancel();
            return result.map_err(ServeError::Io);
        }
        _ = drain.close(grace) => {}
    }
    service_token.cancel();
    if tokio::time::timeout(grace, &mut server).await.is_err() {
        tracing::warn!(
            "connections still open {} ms after the streams ended; closing them",
            grace.as_millis()
        );
    }
    Ok(())
}

/// Host, Origin and token, on `/mcp`, `/health` and `/metrics` alike: a page on another site must not read
/// the bridge's state any more than drive it.
async fn check_access(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match state.access.check(request.uri(), request.headers(), None) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            log_refusal(request.uri().path(), &refusal);
            refusal.into_response()
        }
    }
}

/// Logs a refused request: its path and the reason (which quotes the Origin or Host sent) shortened, and at
/// most a burst per 10 s. Any web page can send refused requests with a 60 KB path, and each wrote its 90 KB
/// to the log (an attack run measured 20 MB/s).
pub(crate) fn log_refusal(path: &str, refusal: &crate::auth::Refusal) {
    static LOG: crate::link::log_limit::LogLimit = crate::link::log_limit::LogLimit::new();
    if let Some(left_out) = LOG.allow() {
        tracing::warn!(
            path = %crate::text::for_log(path),
            status = %refusal.status,
            reason = %crate::text::for_log(&refusal.reason),
            left_out,
            "HTTP request refused"
        );
    }
}

async fn not_found() -> axum::http::StatusCode {
    axum::http::StatusCode::NOT_FOUND
}

async fn health(State(state): State<AppState>) -> impl IntoResponse {
    let mut body = serde_json::Map::new();
    body.insert("status".into(), "ok".into());
    body.insert(
        "mcp_sessions".into(),
        serde_json::json!({ "live": state.sessions.live(), "max": state.sessions.max() }),
    );
    body.extend(state.shared.mount.health());
    axum::Json(serde_json::Value::Object(body))
}

/// A page for a person who opens the server's address in a browser: what this is, its tools, where to point
/// an MCP client. Behind the same access checks as the rest.
async fn index(State(state): State<AppState>) -> impl IntoResponse {
    let mount = &state.shared.mount;
    let mut html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{name}</title></head><body><h1>{name} {version}</h1>\
         <p>An MCP server. Point an MCP client (Streamable HTTP) at <code>/mcp</code>; \
         <a href=\"/health\">/health</a> and <a href=\"/metrics\">/metrics</a> report its state.</p>",
        name = escape(mount.server_name()),
        version = escape(mount.version()),
    );
    for bridge in mount.bridges() {
        html.push_str(&format!("<h2>{}</h2><ul>", escape(bridge.name())));
        for tool in bridge.tool_names() {
            html.push_str(&format!("<li><code>{}</code></li>", escape(tool)));
        }
        html.push_str("</ul>");
    }
    html.push_str("</body></html>");
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let mut text = state.shared.metrics.render(&state.shared.mount);
    super::metrics::render_http_bounds(
        &mut text,
        state.sessions.live(),
        state.sessions.max(),
        state.max_body,
        &state.budget,
    );
    if let Some(answered) = &state.fast_answered {
        text.push_str(&format!(
            "# HELP mcp_http_fast_path_answered_total Stateless /mcp requests answered without rmcp's HTTP service.\n\
             # TYPE mcp_http_fast_path_answered_total counter\n\
             mcp_http_fast_path_answered_total {}\n",
            answered.load(Ordering::Relaxed)
        ));
    }
    if let Some(answered) = &state.legacy_answered {
        text.push_str(&format!(
            "# HELP mcp_http_legacy_front_answered_total Legacy-session /mcp requests answered without rmcp's HTTP service.\n\
             # TYPE mcp_http_legacy_front_answered_total counter\n\
             mcp_http_legacy_front_answered_total {}\n",
            answered.load(Ordering::Relaxed)
        ));
    }
    text.push_str(&state.listen.render("mcp_http", &state.limits));
    // The bridge's own ports (a game's or computers' link) served in this process.
    text.push_str(&net::render_registered("link_listener"));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}
