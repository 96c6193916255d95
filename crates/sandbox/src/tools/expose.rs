//! expose_port: a listener on the host's loopback whose connections reach a port on the sandbox's own
//! loopback. Each connection is made by a short-lived thread that has joined the sandbox's network namespace
//! (setns on a namespace file opened once, from a process of the sandbox), so nothing is routed or bridged
//! and the sandbox's network policy is untouched; the bytes are then copied by the runtime. The listener
//! and its connections end when the sandbox goes.

use crate::backend::BackendKind;
use crate::manager::Manager;
use bridge_core::{BridgeBuilder, ErrorCode, ToolCtx, ToolError, ToolSpec, Validate, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Ports one sandbox may expose at once.
const MAX_PER_SANDBOX: usize = 8;
/// Connections one exposed port carries at once.
const MAX_CONNECTIONS: usize = 64;
/// How often a listener checks that its sandbox still exists.
const CHECK_EVERY: Duration = Duration::from_millis(200);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExposeArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// The TCP port a program in the sandbox listens on (on its 127.0.0.1 or 0.0.0.0), 1-65535.
    pub port: u32,
}
impl Validate for ExposeArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::in_range("port", self.port, 1, 65_535)
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Exposed {
    /// An http URL on the host's loopback that reaches the port (any TCP protocol works on host_port).
    pub url: String,
    /// The host's loopback port.
    pub host_port: u16,
    /// The port inside the sandbox.
    pub port: u16,
    /// False when this port was already exposed (the same URL is returned).
    pub new: bool,
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
    if let Some((host_port, _)) = x.map().get(&(s.id, port)) {
        return Ok(Exposed {
            url: format!("http://127.0.0.1:{host_port}/"),
            host_port: *host_port,
            port,
            new: false,
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| ToolError::remote(format!("no loopback port: {e}")))?;
    let host_port = listener
        .local_addr()
        .map_err(|e| ToolError::internal(e.to_string()))?
        .port();
    let stop = CancellationToken::new();
    x.map().insert((s.id, port), (host_port, stop.clone()));
    let id = s.id;
    drop(s);
    tokio::spawn(async move {
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let mut tick = tokio::time::interval(CHECK_EVERY);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = tick.tick() => {
                    if !m.list().iter().any(|s| s.id == id) {
                        break;
                    }
                }
                accepted = listener.accept() => {
                    let Ok((mut outside, _)) = accepted else { continue };
                    let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else { continue };
                    let (ns, stop) = (Arc::clone(&ns), stop.clone());
                    tokio::spawn(async move {
                        let _slot = slot;
                        let Ok(mut inside) = connect_inside(ns, port).await else { return };
                        tokio::select! {
                            () = stop.cancelled() => {}
                            _ = tokio::io::copy_bidirectional(&mut outside, &mut inside) => {}
                        }
                    });
                }
            }
        }
        stop.cancel();
        x.map().remove(&(id, port));
    });
    Ok(Exposed {
        url: format!("http://127.0.0.1:{host_port}/"),
        host_port,
        port,
        new: true,
    })
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    let x = Exposures::default();
    b.tool(
        ToolSpec::new(
            "expose_port",
            "Expose a TCP port a program in the sandbox listens on (e.g. `python3 -m http.server 8000`) as a URL on \
             the host's loopback (127.0.0.1). It stays open until the sandbox is destroyed or expires; \
             exposing the same port again returns the same URL. Namespace backend only, 8 ports a sandbox.",
        )
        .title("Expose Port")
        .idempotent()
        .handler_on((Arc::clone(mgr), x), |(m, x), a: ExposeArgs, _: ToolCtx| async move {
            expose(m, x, a).await
        }),
    );
}
