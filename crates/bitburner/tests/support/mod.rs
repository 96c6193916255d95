//! The bridge on loopback ports, the fake game, and MCP clients of both protocol eras.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use bridge_bitburner::fake_game::{FakeGame, GameConnection, GameVersion, WEB_ORIGIN};
use bridge_bitburner::link::GameLink;
use bridge_bitburner::{GameArgs, build_bridge, listen};
use bridge_core::serve::{HttpOptions, serve_http, serve_io};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ProtocolVersion,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// `initialize` handshake, 2025-11-25.
    Legacy,
    /// Stateless, 2026-07-28.
    Modern,
}

pub const ERAS: [Era; 2] = [Era::Legacy, Era::Modern];

pub struct Harness {
    pub game_url: String,
    pub game_addr: SocketAddr,
    pub mcp_addr: SocketAddr,
    pub link: GameLink,
    pub bridge: bridge_core::Bridge,
    pub shutdown: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Defaults as documented, on free loopback ports, with a short RPC timeout so timeout tests stay short.
pub fn game_args() -> GameArgs {
    let mut game = GameArgs::defaults();
    game.port = 0;
    game.rpc_timeout = Duration::from_secs(5);
    game
}

pub async fn start(game: GameArgs) -> Harness {
    let shutdown = CancellationToken::new();
    let listener = listen(&game, shutdown.clone()).await.unwrap();
    let bridge = build_bridge(listener.link.clone(), &game).unwrap();
    let mcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mcp_addr = mcp.local_addr().unwrap();
    let served = bridge.clone();
    let token = shutdown.clone();
    tokio::spawn(async move { serve_http(served, mcp, HttpOptions::default(), &[], token).await });
    Harness {
        game_url: format!("ws://{}", listener.addr),
        game_addr: listener.addr,
        mcp_addr,
        link: listener.link,
        bridge,
        shutdown,
    }
}

impl Harness {
    /// Connects `game` as the browser build would, and waits until the bridge has taken the connection.
    pub async fn connect(&self, game: &FakeGame) -> GameConnection {
        let before = self.link.status().connections_total;
        let conn = game
            .connect(&self.game_url, Some(WEB_ORIGIN))
            .await
            .unwrap();
        within(
            "the bridge to accept the game",
            self.link
                .wait_until(|s| s.connected && s.connections_total > before),
        )
        .await;
        conn
    }
}

pub fn v3() -> FakeGame {
    FakeGame::new(GameVersion::V3_0)
}

#[derive(Clone)]
pub struct Recorder {
    pub updates: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Recorder {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let _ = self.updates.send(params.uri);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }
}

pub struct Client {
    pub service: RunningService<RoleClient, Recorder>,
    pub updates: mpsc::UnboundedReceiver<String>,
}

fn lifecycle(era: Era) -> ClientLifecycleMode {
    match era {
        Era::Legacy => ClientLifecycleMode::Initialize,
        Era::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    }
}

pub async fn http_client(addr: SocketAddr, era: Era) -> Client {
    let (tx, updates) = mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    let service = Recorder { updates: tx }
        .serve_with_lifecycle(transport, lifecycle(era))
        .await
        .unwrap();
    Client { service, updates }
}

/// The stdio framing over an in-memory pipe.
pub async fn stdio_client(bridge: bridge_core::Bridge, era: Era) -> Client {
    let (client_io, server_io) = tokio::io::duplex(4 << 20);
    let (server_read, server_write) = tokio::io::split(server_io);
    tokio::spawn(async move {
        let _ = serve_io(
            bridge,
            server_read,
            server_write,
            &[],
            CancellationToken::new(),
        )
        .await;
    });
    let (tx, updates) = mpsc::unbounded_channel();
    let (client_read, client_write) = tokio::io::split(client_io);
    let service = Recorder { updates: tx }
        .serve_with_lifecycle((client_read, client_write), lifecycle(era))
        .await
        .unwrap();
    Client { service, updates }
}

pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    within(
        tool,
        client
            .service
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args)),
    )
    .await
    .unwrap()
}

/// `structuredContent` of a successful call.
pub fn ok_of(result: &CallToolResult) -> Value {
    assert_ne!(
        result.is_error,
        Some(true),
        "expected success, got {result:?}"
    );
    result
        .structured_content
        .clone()
        .expect("structuredContent")
}

/// `{code, message, hint, details}` of a failed call.
pub fn error_of(result: &CallToolResult) -> Value {
    assert_eq!(
        result.is_error,
        Some(true),
        "expected a tool error, got {result:?}"
    );
    result
        .structured_content
        .clone()
        .expect("error results carry structuredContent")
}

pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}
