//! expose_port: an HTTP listener on the host (127.0.0.1 by default, `--sandbox-expose-address`) whose requests
//! are forwarded to a port on the sandbox's own loopback. Each forwarded request gets a connection made by a
//! short-lived thread that has joined the sandbox's network namespace (setns on a namespace file opened once,
//! from a process of the sandbox), so nothing is routed or bridged and the sandbox's network policy is
//! untouched.
//!
//! The listener is the core's: [`GuardedListener`] (connection cap, a cap per peer address, handshake and idle
//! deadlines) and [`Access::check`] on every request head before anything reaches the sandbox: a `Host` that is
//! not this machine's or the listener's own address is refused 403 (a DNS-rebinding page cannot read the
//! sandbox's server), a browser `Origin` other than the URL's own 403, and with `--sandbox-expose-token` a
//! request without `Authorization: Bearer <token>` 401. The token is taken from the header only (no `?token=`,
//! no cookie): a browser cannot open a token-protected URL, header clients (curl, programs) can. The
//! `Authorization` header is removed before the request goes into the sandbox. WebSocket and other upgrades
//! pass through (the connection then leaves the listener's deadlines). The listener and its connections end
//! when the sandbox goes.

use crate::backend::BackendKind;
use crate::manager::Manager;
use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::{IntoResponse, Response};
use bridge_core::auth::{Access, HostPolicy, MissingOrigin, OriginPolicy, Token};
use bridge_core::net::{Conn, GuardedListener, ListenLimits};
use bridge_core::{BridgeBuilder, ErrorCode, ToolCtx, ToolError, ToolSpec, Validate, check};
use http::{StatusCode, header};
use hyper_util::rt::TokioIo;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Ports one sandbox may expose at once.
const MAX_PER_SANDBOX: usize = 8;
/// Connections one exposed port carries at once.
const MAX_CONNECTIONS: usize = 64;
/// Of those, from one peer address: a browser opens six or so; one client cannot take every slot.
const MAX_PER_ADDRESS: usize = 32;
/// How often a listener checks that its sandbox still exists.
const CHECK_EVERY: Duration = Duration::from_millis(200);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExposeArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// The TCP port an HTTP server in the sandbox listens on (on its 127.0.0.1 or 0.0.0.0), 1-65535.
    pub port: u32,
}
impl Validate for ExposeArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::in_range("port", self.port, 1, 65_535)
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Exposed {
    /// An http URL on the host that reaches the port (HTTP and WebSocket; requests carry the bridge's expose
    /// token as `Authorization: Bearer` when one is configured).
    pub url: String,
    /// The host's port.
    pub host_port: u16,
    /// The port inside the sandbox.
    pub port: u16,
    /// False when this port was already exposed (the same URL is returned).
    pub new: bool,
    /// Whether requests must carry the expose token.
    pub token_required: bool,
}

/// (sandbox, port inside) -> (host port, the listener's stop).
type Table = HashMap<(Uuid, u16), (u16, CancellationToken)>;

#[derive(Clone, Default)]
struct Exposures(Arc<Mutex<Table>>);

impl Exposures {
    fn map(&self) -> std::sync::MutexGuard<'_, Table> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The sandbox's network namespace, from the first process under its launcher that is in another namespace
/// than ours.
fn netns_of(launcher: u32) -> Result<std::fs::File, String> {
    let ours = std::fs::read_link("/proc/self/ns/net").map_err(|e| e.to_string())?;
    let mut frontier = vec![launcher];
    let mut seen = 0;
    while let Some(pid) = frontier.pop() {
        seen += 1;
        if seen > 64 {
            break;
        }
        let ns = format!("/proc/{pid}/ns/net");
        if std::fs::read_link(&ns).is_ok_and(|l| l != ours) {
            return std::fs::File::open(&ns).map_err(|e| format!("{ns}: {e}"));
        }
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                let children =
                    std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
                frontier.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    Err("no process of the sandbox is in its own network namespace".into())
}

/// Connects to 127.0.0.1:`port` inside the namespace `ns`, from a thread that joins it and then ends.
async fn connect_inside(
    ns: Arc<std::fs::File>,
    port: u16,
) -> std::io::Result<tokio::net::TcpStream> {
    let std_stream = tokio::task::spawn_blocking(move || {
        // A thread of the blocking pool must not stay in the sandbox's namespace: a fresh thread does the
        // setns and the connect, and ends.
        std::thread::spawn(move || -> std::io::Result<std::net::TcpStream> {
            nix::sched::setns(&*ns, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(std::io::Error::from)?;
            let s = std::net::TcpStream::connect_timeout(
                &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
                Duration::from_secs(5),
            )?;
            s.set_nonblocking(true)?;
            Ok(s)
        })
        .join()
        .map_err(|_| std::io::Error::other("the connecting thread panicked"))?
    })
    .await
    .map_err(std::io::Error::other)??;
    tokio::net::TcpStream::from_std(std_stream)
}

/// The URL clients use: the configured address, or 127.0.0.1 when that is unspecified (0.0.0.0, ::).
fn url_of(address: IpAddr, host_port: u16) -> String {
    let shown = if address.is_unspecified() {
        IpAddr::from([127, 0, 0, 1])
    } else {
        address
    };
    format!("http://{}/", SocketAddr::new(shown, host_port))
}

/// The access rules of one exposed port: Host this machine's loopback names or the listener's own address
/// (any Host on an unspecified address, where the token is mandatory), Origin the URL's own, the token if set.
fn access_of(address: IpAddr, host_port: u16, token: Option<Token>) -> Result<Access, ToolError> {
    let own = SocketAddr::new(address, host_port).to_string();
    let bad = |e: bridge_core::link::LinkError| ToolError::internal(e.to_string());
    let hosts = if address.is_unspecified() {
        None
    } else {
        Some(HostPolicy::localhost_and([own.as_str()]).map_err(bad)?)
    };
    let mut origins = vec![
        format!("http://127.0.0.1:{host_port}"),
        format!("http://localhost:{host_port}"),
        format!("http://[::1]:{host_port}"),
    ];
    if !address.is_unspecified() {
        origins.push(format!("http://{own}"));
    }
    Ok(Access {
        origins: OriginPolicy::new(origins, MissingOrigin::Accept).map_err(bad)?,
        hosts,
        token,
        token_hint: "Authorization: Bearer <SANDBOX_EXPOSE_TOKEN>",
    })
}

#[derive(Clone)]
struct Proxy {
    access: Arc<Access>,
    ns: Arc<std::fs::File>,
    port: u16,
    stop: CancellationToken,
}

/// One request: checked, then forwarded over a fresh connection made inside the sandbox; the response streams
/// back. An upgrade (101) joins the two upgraded connections until either ends or the sandbox goes.
async fn forward(
    State(p): State<Proxy>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    mut req: Request,
) -> Response {
    if let Err(refusal) = p.access.check(req.uri(), req.headers(), None) {
        return refusal.into_response();
    }
    req.headers_mut().remove(header::AUTHORIZATION);
    let client_upgrade = req
        .headers()
        .contains_key(header::UPGRADE)
        .then(|| hyper::upgrade::on(&mut req));
    let bad_gateway = |what: String| (StatusCode::BAD_GATEWAY, format!("{what}\n")).into_response();
    let inside = match connect_inside(Arc::clone(&p.ns), p.port).await {
        Ok(s) => s,
        Err(e) => {
            return bad_gateway(format!(
                "nothing answers on port {} inside the sandbox: {e}",
                p.port
            ));
        }
    };
    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(inside)).await {
            Ok(pair) => pair,
            Err(e) => return bad_gateway(format!("the sandbox's server: {e}")),
        };
    let stop = p.stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = stop.cancelled() => {}
            _ = connection.with_upgrades() => {}
        }
    });
    let mut resp = match sender.send_request(req).await {
        Ok(r) => r,
        Err(e) => return bad_gateway(format!("the sandbox's server: {e}")),
    };
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client_upgrade) = client_upgrade
    {
        let server_upgrade = hyper::upgrade::on(&mut resp);
        conn.upgraded();
        let stop = p.stop.clone();
        tokio::spawn(async move {
            let (Ok(outside), Ok(inside)) = (client_upgrade.await, server_upgrade.await) else {
                return;
            };
            let (mut outside, mut inside) = (TokioIo::new(outside), TokioIo::new(inside));
            tokio::select! {
                () = stop.cancelled() => {}
                _ = tokio::io::copy_bidirectional(&mut outside, &mut inside) => {}
            }
        });
    }
    resp.map(Body::new)
}

async fn expose(m: Arc<Manager>, x: Exposures, a: ExposeArgs) -> Result<Exposed, ToolError> {
    let s = m.get(&a.sandbox_id)?;
    let port = u16::try_from(a.port).map_err(|_| ToolError::invalid_argument("port", "1-65535"))?;
    if s.instance.spec.backend != BackendKind::Namespace {
        return Err(ToolError::new(
            ErrorCode::Unsupported,
            format!(
                "expose_port needs the namespace backend (the sandbox's network namespace is joined from the \
                 host); this sandbox runs on {:?}",
                s.instance.spec.backend
            )
            .to_lowercase(),
        ));
    }
    let address = m.settings.expose_address;
    let token = m.settings.expose_token.clone();
    let token_required = token.is_some();
    if let Some((host_port, _)) = x.map().get(&(s.id, port)) {
        return Ok(Exposed {
            url: url_of(address, *host_port),
            host_port: *host_port,
            port,
            new: false,
            token_required,
        });
    }
    if x.map().keys().filter(|(id, _)| *id == s.id).count() >= MAX_PER_SANDBOX {
        return Err(ToolError::too_large(format!(
            "this sandbox already exposes {MAX_PER_SANDBOX} ports (the limit)"
        ))
        .with_details(serde_json::json!({"limit": MAX_PER_SANDBOX})));
    }
    let launcher = s
        .instance
        .launcher_pid()
        .ok_or_else(|| ToolError::remote("the sandbox has no launcher process"))?;
    let ns = Arc::new(netns_of(launcher).map_err(ToolError::remote)?);
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(address, 0))
        .await
        .map_err(|e| {
            ToolError::remote(format!(
                "no port on {address} (--sandbox-expose-address): {e}"
            ))
        })?;
    let host_port = listener
        .local_addr()
        .map_err(|e| ToolError::internal(e.to_string()))?
        .port();
    let access = Arc::new(access_of(address, host_port, token)?);
    let stop = CancellationToken::new();
    x.map().insert((s.id, port), (host_port, stop.clone()));
    let id = s.id;
    drop(s);
    let limits = ListenLimits {
        max_connections: MAX_CONNECTIONS,
        max_per_ip: MAX_PER_ADDRESS,
        ..ListenLimits::DEFAULT
    };
    let router = Router::new().fallback(forward).with_state(Proxy {
        access,
        ns,
        port,
        stop: stop.clone(),
    });
    let serving =
        bridge_core::net::serve_until(GuardedListener::new(listener, limits), router, stop.clone());
    tokio::spawn(async move {
        let watch = async {
            let mut tick = tokio::time::interval(CHECK_EVERY);
            loop {
                tick.tick().await;
                if stop.is_cancelled() || !m.list().iter().any(|s| s.id == id) {
                    break;
                }
            }
            stop.cancel();
        };
        // The server returns once the stop is given and its connections are gone; the forwarding tasks end
        // with the stop, so no connection outlives the sandbox.
        let _ = tokio::join!(serving, watch);
        x.map().remove(&(id, port));
    });
    Ok(Exposed {
        url: url_of(address, host_port),
        host_port,
        port,
        new: true,
        token_required,
    })
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    let x = Exposures::default();
    b.tool(
        ToolSpec::new(
            "expose_port",
            "Expose an HTTP server a program in the sandbox listens on (e.g. `python3 -m http.server 8000`) as a \
             URL on the host (its loopback unless the bridge is configured otherwise; WebSocket upgrades pass \
             through). It stays open until the sandbox is destroyed or expires; exposing the same port again \
             returns the same URL. Requests must carry the bridge's expose token when token_required. \
             Namespace backend only, 8 ports a sandbox.",
        )
        .title("Expose Port")
        .idempotent()
        .handler_on((Arc::clone(mgr), x), |(m, x), a: ExposeArgs, _: ToolCtx| async move {
            expose(m, x, a).await
        }),
    );
}
