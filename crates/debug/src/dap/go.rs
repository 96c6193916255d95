//! Go on delve (`dlv dap`): Debian's delve 1.20 serves DAP on a TCP listener only (no stdio mode), to one
//! client, and builds the program itself (`mode: debug`, the default) with the Go toolchain on PATH. The server
//! lives as long as the session.

use super::backend::DapBackend;
use super::jsdebug::free_port;
use super::launch::AdapterKind;
use super::session::{Companion, Link, Session};
use crate::envelope::ScriptError;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;

impl DapBackend {
    pub(super) async fn launch_go(
        &self,
        id: String,
        mut command: tokio::process::Command,
        config: Value,
        deadline: Instant,
    ) -> Result<Arc<Session>, ScriptError> {
        let failed = |msg: String| {
            ScriptError::new("E_LAUNCH_FAILED", msg).hint(
                "Check the configuration's program (a main package's directory or .go file; `mode: exec` for a built binary) and that `go build` works there",
            )
        };
        let port = free_port().map_err(|e| failed(format!("no free local port: {e}")))?;
        let addr = format!("127.0.0.1:{port}");
        // delve runs `go build` (and writes its __debug_bin) in its own working directory, not the
        // configuration's `cwd`: a module is found only from there.
        // A relative `cwd` is the workspace's, as the launch policy judged it, not the bridge's own.
        if let Some(cwd) = config.get("cwd").and_then(Value::as_str) {
            command.current_dir(self.cfg.workspace.join(cwd));
        }
        let mut server = command
            .args(["dap", "--listen", addr.as_str()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                ScriptError::new("E_ADAPTER_NOT_FOUND", format!("could not start dlv: {e}"))
                    .hint(AdapterKind::Delve.install_hint())
            })?;
        // delve sends no reverse requests; the channel only completes the link.
        let (tx, _children) = mpsc::channel::<Value>(1);
        let session = self
            .open_when_listening(
                id,
                AdapterKind::Delve,
                &config,
                || Link::Tcp {
                    addr: addr.clone(),
                    children: tx.clone(),
                },
                &mut server,
                deadline,
            )
            .await
            .map_err(|why| failed(format!("dlv dap did not listen on {addr}: {why}")))?;
        session.keep(Companion::Process(server));
        self.register(Arc::clone(&session));
        match self.handshake(&session, config, deadline).await {
            Ok(()) => Ok(session),
            Err(e) => {
                session.terminate().await;
                Err(e)
            }
        }
    }
}
