//! The bridge on loopback ports (link and MCP over HTTP), an rmcp client, and simulated computers.

use super::ccsim::{self, SimConfig, SimHandle, SimKind};
use bridge_computercraft::state::State;
use bridge_computercraft::{LinkConfig, start};
use bridge_core::serve::{HttpOptions, serve_http};
use rmcp::model::CallToolResult;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub struct Harness {
    pub link_addr: SocketAddr,
    pub mcp_addr: SocketAddr,
    pub state: Arc<State>,
    pub shutdown: CancellationToken,
    /// An initialize-era (2025-11-25) client; its `updates` carry pushed `resources/updated` URIs.
    pub client: mcp_testkit::Client,
    pub token: Option<String>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Settings for tests. The probe timeout also judges whether a computer holding an id is alive, and every
/// "pong" a test expects must come within it from a simulated computer sharing the test's two threads, so it
/// is long; tests that expect a probe to time out set a shorter one.
pub fn test_config() -> LinkConfig {
    LinkConfig {
        probe_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(10),
        ..LinkConfig::default()
    }
}

pub async fn start_bridge(cfg: LinkConfig) -> Harness {
    start_on(cfg, TcpListener::bind("127.0.0.1:0").await.unwrap()).await
}

pub async fn start_on(cfg: LinkConfig, link: TcpListener) -> Harness {
    let token = cfg.token.clone();
    let shutdown = CancellationToken::new();
    let running = start(cfg, link, shutdown.clone()).await.unwrap();
    let mcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mcp_addr = mcp.local_addr().unwrap();
    let bridge = running.bridge.clone();
    let stop = shutdown.clone();
    tokio::spawn(async move { serve_http(bridge, mcp, HttpOptions::default(), &[], stop).await });
    let client = mcp_testkit::http_client(mcp_addr, mcp_testkit::Era::Legacy).await;
    Harness {
        link_addr: running.link_addr,
        mcp_addr,
        state: running.state,
        shutdown,
        client,
        token,
    }
}

impl Harness {
    pub fn link_url(&self) -> String {
        format!("ws://{}/link", self.link_addr)
    }

    /// A computer running the shipped client, pointed at this bridge.
    pub fn computer(&self, id: u32, label: Option<&str>, kind: SimKind) -> SimConfig {
        let mut cfg = SimConfig::new(id, ccsim::temp_root(&format!("c{id}")));
        cfg.label = label.map(str::to_owned);
        cfg.kind = kind;
        if kind == SimKind::Turtle {
            cfg.world.turtle = Some(ccsim::Turtle::default());
        }
        cfg.running_client(&self.link_url(), self.token.as_deref())
    }

    /// Starts `cfg` and waits until the bridge has registered computer `cfg.id` with that label.
    pub async fn link(&self, cfg: SimConfig) -> SimHandle {
        let (id, label) = (cfg.id, cfg.label.clone());
        let sim = ccsim::spawn(cfg);
        self.wait_linked(id, label.as_deref(), &sim).await;
        sim
    }

    pub async fn wait_linked(&self, id: u32, label: Option<&str>, sim: &SimHandle) {
        self.wait_relinked(id, label, sim, None).await;
    }

    /// The id of computer `id`'s current link, if it is linked.
    pub fn link_of(&self, id: u32) -> Option<u64> {
        self.state.registry.get(id).map(|c| c.link_id)
    }

    /// Like `wait_linked`, but a link whose id is `old_link` does not count: after a reboot the old link can
    /// still be registered for a moment, and a probe through it would time out.
    pub async fn wait_relinked(
        &self,
        id: u32,
        label: Option<&str>,
        sim: &SimHandle,
        old_link: Option<u64>,
    ) {
        // A hang guard for loaded machines, not a claim about speed.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(c) = self.state.registry.get(id)
                && c.label().as_deref() == label
                && Some(c.link_id) != old_link
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "computer {id} did not link; its screen:\n{}",
                sim.output()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        mcp_testkit::call(&self.client, tool, args).await
    }
}

#[allow(unused_imports)] // each test file uses a different part
pub use mcp_testkit::{error_of, ok_of, text_of, within};
