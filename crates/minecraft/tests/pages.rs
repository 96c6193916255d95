#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 22 item 7: a relay listening beyond loopback answers /health and /metrics only with a valid token
//! (they name clients, games and queue positions); on loopback they stay open for local probes.

mod support;

use support::*;

async fn get(url: &str, token: Option<&str>) -> (u16, String) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn health_and_metrics_need_a_token_beyond_loopback() {
    let relay = start_relay(relay_args(&["--relay-host", "0.0.0.0"])).await;
    let port = relay.addr.port();
    for page in ["health", "metrics"] {
        let url = format!("http://127.0.0.1:{port}/{page}");
        let (status, body) = get(&url, None).await;
        assert_eq!(status, 401, "{page} without a token: {body}");
        assert!(body.contains("AUTH_FAILED"), "{body}");
        assert_eq!(get(&url, Some("wrong")).await.0, 401);
        assert_eq!(get(&url, Some(MCP_TOKEN)).await.0, 200, "{page}");
        assert_eq!(get(&url, Some(READONLY_TOKEN)).await.0, 200, "{page}");
        assert_eq!(get(&url, Some(GAME_TOKEN)).await.0, 200, "{page}");
    }
    relay.stop().await;
}

#[tokio::test]
async fn on_loopback_they_stay_open() {
    let relay = start_relay(relay_args(&[])).await;
    let (status, _) = get(&format!("http://{}/health", relay.addr), None).await;
    assert_eq!(status, 200);
    relay.stop().await;
}
