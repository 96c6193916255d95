#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 22 item 7: a relay listening beyond loopback answers /health and /metrics only with a valid token
//! (they name clients, games and queue positions); on loopback they stay open for local probes.

use crate::support;

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

/// The hostile run of stop 40: on loopback the open pages answered any `Host`, so a web page that rebinds its
/// own name to 127.0.0.1 (DNS rebinding) could read every client id, game and queue position. They now answer
/// only a loopback `Host` without a token; with a token, any `Host` (a proxy in front of the relay).
#[tokio::test]
async fn on_loopback_the_open_pages_refuse_a_foreign_host() {
    let relay = start_relay(relay_args(&[])).await;
    let client = reqwest::Client::new();
    for page in ["health", "metrics"] {
        let url = format!("http://{}/{page}", relay.addr);
        let foreign = client
            .get(&url)
            .header("Host", "evil.example")
            .send()
            .await
            .unwrap();
        let status = foreign.status().as_u16();
        let body = foreign.text().await.unwrap();
        assert_eq!(status, 403, "{page} for Host evil.example: {body}");
        assert!(body.contains("evil.example"), "names the host: {body}");
        assert!(!body.contains("clients"), "no page in the refusal: {body}");
        for host in ["localhost", "127.0.0.1", "[::1]"] {
            let host = format!("{host}:{}", relay.addr.port());
            let r = client.get(&url).header("Host", &host).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200, "{page} for Host {host}");
        }
        let with_token = client
            .get(&url)
            .header("Host", "relay.example")
            .bearer_auth(MCP_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(with_token.status().as_u16(), 200, "{page} with a token");
    }
    relay.stop().await;
}
