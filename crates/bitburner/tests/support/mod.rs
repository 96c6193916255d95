//! The bridge on loopback ports, the fake game, and MCP clients of both protocol eras.
// Each test file compiles this module on its own and uses a part of it.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

use bitburner_fake::{FakeGame, GameConnection, GameVersion, WEB_ORIGIN};
use bridge_bitburner::link::GameLink;
use bridge_bitburner::{GameArgs, build_bridge, listen};
use bridge_core::serve::{HttpOptions, serve_http};
pub use mcp_testkit::{Client, ERAS, Era, call, error_of, http_client, ok_of, text_of, within};
use std::net::SocketAddr;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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

/// The stdio framing over an in-memory pipe.
pub async fn stdio_client(bridge: bridge_core::Bridge, era: Era) -> Client {
    mcp_testkit::pipe_client(bridge, era, Vec::new()).await
}
