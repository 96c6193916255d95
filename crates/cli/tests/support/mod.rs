//! The `mcp-bridges` binary as a child process: its addresses read from its log, MCP clients of both eras
//! over its stdio or HTTP, and a raw ComputerCraft computer on a WebSocket.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::{SinkExt, StreamExt};
use mcp_testkit::{Era, within};
use rmcp::service::RunningService;
use rmcp::{ClientServiceExt, RoleClient};
use serde_json::{Value, json};
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

pub const BIN: &str = env!("CARGO_BIN_EXE_mcp-bridges");

/// The Bitburner bridge served over HTTP, MCP and game ports both chosen by the system.
pub const BITBURNER_OVER_HTTP: &[&str] = &[
    "bitburner",
    "--http",
    "--mcp-port",
    "0",
    "--bitburner-game-port",
    "0",
];

/// What a host sends first over stdio, one message a line: initialize (id 1), initialized, tools/list (id 2).
pub const INIT_AND_LIST_TOOLS: &str = concat!(
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
    "\n",
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    "\n",
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    "\n",
);

/// A running `mcp-bridges` and the lines it has logged so far.
pub struct Server {
    pub child: Child,
    log: watch::Receiver<Vec<String>>,
}

impl Server {
    /// Starts the binary with `args` and none of the developer's environment.
    pub fn spawn(args: &[&str]) -> Self {
        Self::spawn_with_env(args, &[])
    }

    /// Starts the binary with `args` and only the variables `env` (beside logging's).
    pub fn spawn_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn_with(args, env, Stdio::piped())
    }

    /// [`Server::spawn`] with `stdin` as its standard input (`Stdio::null()`: run on its own, as a service).
    pub fn spawn_with(args: &[&str], env: &[(&str, &str)], stdin: Stdio) -> Self {
        let mut child = Command::new(BIN)
            .args(args)
            .env_clear()
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, log) = watch::channel(Vec::new());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tx.send_modify(|log| log.push(line));
            }
        });
        Self { child, log }
    }

    /// The first logged line containing `needle`, waiting for it.
    pub async fn line(&self, needle: &str) -> String {
        let mut log = self.log.clone();
        let what = format!("a log line with {needle:?}");
        let found = within(
            &what,
            log.wait_for(|lines| lines.iter().any(|l| l.contains(needle))),
        )
        .await
        .unwrap_or_else(|_| panic!("the server exited before logging {needle:?}"))
        .iter()
        .find(|l| l.contains(needle))
        .cloned();
        found.unwrap()
    }

    /// The text after `prefix` in the first line containing it, up to the first of `ends`.
    pub async fn after(&self, prefix: &str, ends: &[char]) -> String {
        let line = self.line(prefix).await;
        let rest = &line[line.find(prefix).unwrap() + prefix.len()..];
        rest.split(|c| ends.contains(&c)).next().unwrap().to_owned()
    }

    pub fn log(&self) -> Vec<String> {
        self.log.borrow().clone()
    }

    pub fn stdio(&mut self) -> (ChildStdout, ChildStdin) {
        (
            self.child.stdout.take().unwrap(),
            self.child.stdin.take().unwrap(),
        )
    }

    pub fn sigterm(&self) {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to end and returns its exit code.
    pub async fn exit_code(&mut self) -> Option<i32> {
        within("the server to exit", self.child.wait())
            .await
            .unwrap()
            .code()
    }
}

/// An MCP client of `era` over the child's stdin/stdout.
pub async fn stdio_client(server: &mut Server, era: Era) -> RunningService<RoleClient, ()> {
    let (read, write) = server.stdio();
    within(
        "the stdio handshake",
        ().serve_with_lifecycle((read, write), mcp_testkit::lifecycle(era)),
    )
    .await
    .unwrap()
}

/// A ComputerCraft computer speaking the link protocol by hand: says hello, answers `lua.run` with 42, and
/// forwards the events it is told to send.
pub struct RawComputer {
    pub events: mpsc::UnboundedSender<Value>,
}

impl RawComputer {
    pub async fn link(url: &str, id: u32, label: &str) -> Self {
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let hello = json!({"type": "hello", "computerId": id, "computerLabel": label});
        ws.send(Message::text(hello.to_string())).await.unwrap();
        let (events, mut to_send) = mpsc::unbounded_channel::<Value>();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    frame = ws.next() => {
                        let Some(Ok(Message::Text(text))) = frame else {
                            match frame {
                                Some(Ok(_)) => continue,
                                _ => return,
                            }
                        };
                        let frame: Value = serde_json::from_str(text.as_str()).unwrap();
                        if frame["method"] == "lua.run" {
                            let reply = json!({"type": "response", "id": frame["id"], "ok": true,
                                "result": {"n": 1, "values": [42], "output": ""}});
                            if ws.send(Message::text(reply.to_string())).await.is_err() {
                                return;
                            }
                        }
                    }
                    Some(event) = to_send.recv() => {
                        if ws.send(Message::text(event.to_string())).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Self { events }
    }
}
