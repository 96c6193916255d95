#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Black-box tests of the WebSocket listener: a real server on 127.0.0.1:0 and a real tokio-tungstenite client.

use bridge_core::link::{
    LinkError, MissingOrigin, OriginPolicy, WsConfig, WsConnection, bind, serve, ws_router,
};
use futures::{SinkExt, StreamExt};
use mcp_testkit::within;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

type Client = WebSocketStream<MaybeTlsStream<TcpStream>>;

struct Server {
    addr: SocketAddr,
    conns: mpsc::UnboundedReceiver<WsConnection>,
    shutdown: CancellationToken,
    served: tokio::task::JoinHandle<Result<(), LinkError>>,
}

impl Server {
    async fn start(mut cfg: WsConfig) -> Self {
        let shutdown = CancellationToken::new();
        cfg.shutdown = shutdown.clone();
        let (tx, conns) = mpsc::unbounded_channel();
        let router = ws_router(cfg, "/ws", move |c| {
            let _ = tx.send(c);
        })
        .route(
            "/install.lua",
            axum::routing::get(|| async { "print('hi')" }),
        );
        let listener = bind(
            "127.0.0.1:0".parse().unwrap(),
            "another bridge",
            "TEST_PORT",
        )
        .await
        .unwrap();
        let addr = listener.local_addr().unwrap();
        let served = tokio::spawn(serve(listener, router, shutdown.clone()));
        Self {
            addr,
            conns,
            shutdown,
            served,
        }
    }

    fn url(&self, tail: &str) -> String {
        format!("ws://{}/ws{tail}", self.addr)
    }

    async fn next_conn(&mut self) -> WsConnection {
        within("a connection", self.conns.recv()).await.unwrap()
    }
}

fn request(url: &str, headers: &[(&'static str, &str)]) -> tungstenite::handshake::client::Request {
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(*k, v.parse().unwrap());
    }
    req
}

async fn connect(
    url: &str,
    headers: &[(&'static str, &str)],
) -> Result<Client, tungstenite::Error> {
    tokio_tungstenite::connect_async(request(url, headers))
        .await
        .map(|(ws, _)| ws)
}

/// The status and body of a refused handshake.
async fn refused(url: &str, headers: &[(&'static str, &str)]) -> (u16, String) {
    match connect(url, headers).await {
        Err(tungstenite::Error::Http(resp)) => {
            let body = resp
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            (resp.status().as_u16(), body)
        }
        Ok(_) => panic!("handshake to {url} was accepted"),
        Err(e) => panic!("unexpected error {e}"),
    }
}

fn open_config() -> WsConfig {
    WsConfig::new(OriginPolicy::any())
}

/// The next non-ping/pong message from the server, as the client sees it.
async fn next_data(client: &mut Client) -> Option<Message> {
    loop {
        match within("a frame", client.next()).await {
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(m)) => return Some(m),
            Some(Err(_)) | None => return None,
        }
    }
}

#[tokio::test]
async fn text_frames_flow_both_ways_and_metadata_is_exposed() {
    let mut srv = Server::start(open_config()).await;
    let mut client = connect(
        &srv.url("?id=7&token=ignored"),
        &[("origin", "http://localhost:8000")],
    )
    .await
    .unwrap();
    let mut conn = srv.next_conn().await;
    assert_eq!(conn.origin.as_deref(), Some("http://localhost:8000"));
    assert_eq!(conn.query.get("id").map(String::as_str), Some("7"));
    assert!(
        !conn.query.contains_key("token"),
        "the token must not be passed on"
    );
    assert_eq!(conn.peer.unwrap().ip(), client_ip(&client));

    client.send(Message::text("{\"id\":1}")).await.unwrap();
    assert_eq!(
        within("incoming", conn.incoming.recv()).await.unwrap(),
        "{\"id\":1}"
    );

    conn.sender.send_text("{\"result\":2}").await.unwrap();
    assert_eq!(
        next_data(&mut client).await,
        Some(Message::text("{\"result\":2}"))
    );
}

fn client_ip(client: &Client) -> std::net::IpAddr {
    match client.get_ref() {
        MaybeTlsStream::Plain(s) => s.local_addr().unwrap().ip(),
        _ => unreachable!("plain ws only"),
    }
}

#[tokio::test]
async fn plain_http_routes_live_beside_the_socket() {
    let srv = Server::start(open_config()).await;
    let mut tcp = TcpStream::connect(srv.addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tcp.write_all(b"GET /install.lua HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut resp = String::new();
    within("http response", tcp.read_to_string(&mut resp))
        .await
        .unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.ends_with("print('hi')"), "{resp}");
}

#[tokio::test]
async fn disallowed_origin_is_refused_with_403() {
    let policy = OriginPolicy::new(["http://localhost:*"], MissingOrigin::Reject).unwrap();
    let mut srv = Server::start(WsConfig::new(policy)).await;

    let (status, body) = refused(&srv.url(""), &[("origin", "https://evil.example")]).await;
    assert_eq!(status, 403);
    assert!(body.contains("https://evil.example"), "{body}");

    let (status, body) = refused(&srv.url(""), &[]).await;
    assert_eq!(
        status, 403,
        "no Origin must be refused under MissingOrigin::Reject"
    );
    assert!(body.contains("Origin"), "{body}");

    connect(&srv.url(""), &[("origin", "http://localhost:3000")])
        .await
        .unwrap();
    srv.next_conn().await;
}

#[tokio::test]
async fn missing_origin_is_accepted_when_configured() {
    // ComputerCraft sends no Origin header.
    let policy = OriginPolicy::new(["http://localhost:*"], MissingOrigin::Accept).unwrap();
    let mut srv = Server::start(WsConfig::new(policy)).await;
    connect(&srv.url(""), &[]).await.unwrap();
    assert_eq!(srv.next_conn().await.origin, None);
    let (status, _) = refused(&srv.url(""), &[("origin", "http://attacker.test")]).await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn missing_or_wrong_token_is_refused_with_401() {
    let mut cfg = open_config();
    cfg.token = Some("s3cret".to_owned());
    let mut srv = Server::start(cfg).await;

    for (url, headers) in [
        (srv.url(""), vec![]),
        (srv.url("?token=wrong"), vec![]),
        (srv.url(""), vec![("authorization", "Bearer wrong")]),
        (srv.url(""), vec![("authorization", "Basic czNjcmV0")]),
    ] {
        let (status, body) = refused(&url, &headers).await;
        assert_eq!(status, 401, "{url} {headers:?}");
        assert!(!body.contains("s3cret"));
    }

    connect(&srv.url(""), &[("authorization", "Bearer s3cret")])
        .await
        .unwrap();
    let conn = srv.next_conn().await;
    assert!(
        conn.headers.get("authorization").is_none(),
        "credentials must not be passed on"
    );

    connect(&srv.url("?token=s3cret"), &[]).await.unwrap();
    srv.next_conn().await;
}

#[tokio::test]
async fn oversize_frame_closes_the_link() {
    let mut cfg = open_config();
    cfg.max_frame_bytes = 1024;
    let mut srv = Server::start(cfg).await;
    let mut client = connect(&srv.url(""), &[]).await.unwrap();
    let mut conn = srv.next_conn().await;

    client.send(Message::text("x".repeat(1000))).await.unwrap();
    assert_eq!(
        within("incoming", conn.incoming.recv())
            .await
            .unwrap()
            .len(),
        1000
    );

    client.send(Message::text("x".repeat(4096))).await.unwrap();
    within("link close", conn.closed.cancelled()).await;
    assert_eq!(within("incoming end", conn.incoming.recv()).await, None);
    let reason = conn.sender.close_reason().unwrap();
    assert!(reason.contains("1024"), "{reason}");

    match next_data(&mut client).await {
        Some(Message::Close(Some(frame))) => assert_eq!(frame.code, CloseCode::Size),
        other => panic!("expected a 1009 close, got {other:?}"),
    }
    assert!(matches!(
        conn.sender.send_text("late").await,
        Err(LinkError::Disconnected { .. })
    ));
}

#[tokio::test]
async fn peer_that_stops_answering_pings_is_declared_dead() {
    let mut cfg = open_config();
    cfg.ping_interval = Duration::from_millis(50);
    cfg.pong_timeout = Duration::from_millis(100);
    let mut srv = Server::start(cfg).await;
    // Never polled, so tokio-tungstenite never answers the server's pings: a frozen peer whose TCP is alive.
    let _frozen = connect(&srv.url(""), &[]).await.unwrap();
    let mut conn = srv.next_conn().await;

    within("dead-peer detection", conn.closed.cancelled()).await;
    let reason = conn.sender.close_reason().unwrap();
    assert!(reason.contains("ping"), "{reason}");
    assert_eq!(within("incoming end", conn.incoming.recv()).await, None);
    match conn.sender.send_text("x").await {
        Err(LinkError::Disconnected { reason }) => assert!(reason.contains("ping"), "{reason}"),
        other => panic!("expected Disconnected, got {other:?}"),
    }
}

#[tokio::test]
async fn peer_that_answers_pings_stays_connected() {
    let mut cfg = open_config();
    cfg.ping_interval = Duration::from_millis(20);
    // Generous: a probe ends as soon as the pong arrives, so this only has to outlast a loaded machine.
    cfg.pong_timeout = Duration::from_secs(5);
    let mut srv = Server::start(cfg).await;
    let mut client = connect(&srv.url(""), &[]).await.unwrap();
    let mut conn = srv.next_conn().await;

    // A ping is sent only after the previous probe ended with a sign of life, so seeing five pings means four
    // probes judged this peer alive. Reading is what makes tokio-tungstenite answer them.
    let mut pings = 0;
    while pings < 5 {
        match within("a ping", client.next()).await {
            Some(Ok(Message::Ping(_))) => pings += 1,
            other => panic!("expected pings, got {other:?}"),
        }
    }
    assert!(
        !conn.closed.is_cancelled(),
        "{:?}",
        conn.sender.close_reason()
    );
    client.send(Message::text("still here")).await.unwrap();
    assert_eq!(
        within("incoming", conn.incoming.recv()).await.as_deref(),
        Some("still here")
    );
}

#[tokio::test]
async fn peer_close_ends_the_link_and_fails_sends() {
    let mut srv = Server::start(open_config()).await;
    let mut client = connect(&srv.url(""), &[]).await.unwrap();
    let mut conn = srv.next_conn().await;

    client
        .close(Some(CloseFrame {
            code: CloseCode::Library(3000),
            reason: "game stopped".into(),
        }))
        .await
        .unwrap();
    assert_eq!(within("incoming end", conn.incoming.recv()).await, None);
    assert!(conn.closed.is_cancelled());
    let reason = conn.sender.close_reason().unwrap();
    assert!(
        reason.contains("3000") && reason.contains("game stopped"),
        "{reason}"
    );
    assert!(conn.sender.send_text("x").await.is_err());
}

#[tokio::test]
async fn bridge_close_sends_a_normal_close_with_reason() {
    let mut srv = Server::start(open_config()).await;
    let mut client = connect(&srv.url(""), &[]).await.unwrap();
    let mut conn = srv.next_conn().await;

    conn.sender.close("Replaced by new game connection");
    match next_data(&mut client).await {
        Some(Message::Close(Some(frame))) => {
            assert_eq!(frame.code, CloseCode::Normal);
            assert_eq!(frame.reason.as_str(), "Replaced by new game connection");
        }
        other => panic!("expected a close frame, got {other:?}"),
    }
    assert_eq!(within("incoming end", conn.incoming.recv()).await, None);
}

#[tokio::test]
async fn close_goes_out_after_the_frames_queued_before_it() {
    let mut srv = Server::start(open_config()).await;
    let mut client = connect(&srv.url(""), &[]).await.unwrap();
    let conn = srv.next_conn().await;

    for i in 0..50 {
        conn.sender.send_text(format!("answer {i}")).await.unwrap();
    }
    conn.sender.close("refused: bad token");
    assert!(
        conn.sender.send_text("too late").await.is_err(),
        "nothing is queued after the close"
    );
    for i in 0..50 {
        match next_data(&mut client).await {
            Some(Message::Text(t)) => assert_eq!(t.as_str(), format!("answer {i}")),
            other => panic!("expected answer {i}, got {other:?}"),
        }
    }
    match next_data(&mut client).await {
        Some(Message::Close(Some(frame))) => {
            assert_eq!(frame.reason.as_str(), "refused: bad token")
        }
        other => panic!("expected the close frame last, got {other:?}"),
    }
    within("the goodbye to finish", conn.sender.finished()).await;
    assert!(conn.sender.is_closed());
}

#[tokio::test]
async fn binary_frames_are_dropped_and_text_still_flows() {
    let mut srv = Server::start(open_config()).await;
    let mut client = connect(&srv.url(""), &[]).await.unwrap();
    let mut conn = srv.next_conn().await;
    client.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    client.send(Message::text("after")).await.unwrap();
    assert_eq!(
        within("incoming", conn.incoming.recv()).await.as_deref(),
        Some("after")
    );
    assert!(!conn.closed.is_cancelled());
}

#[tokio::test]
async fn shutdown_closes_links_and_stops_the_server() {
    let mut srv = Server::start(open_config()).await;
    let mut client = connect(&srv.url(""), &[]).await.unwrap();
    let mut conn = srv.next_conn().await;

    srv.shutdown.cancel();
    match next_data(&mut client).await {
        Some(Message::Close(Some(frame))) => assert_eq!(frame.code, CloseCode::Away),
        other => panic!("expected a 1001 close, got {other:?}"),
    }
    assert_eq!(within("incoming end", conn.incoming.recv()).await, None);
    within("serve to return", srv.served)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn port_in_use_gives_a_clear_error() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = taken.local_addr().unwrap();
    let err = bind(
        addr,
        "bitburner-filesync or viteburner",
        "BITBURNER_PORT / --port",
    )
    .await
    .unwrap_err();
    assert!(matches!(err, LinkError::AddrInUse { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "port {} on 127.0.0.1 is already in use (is bitburner-filesync or viteburner running?); \
             choose another with BITBURNER_PORT / --port",
            addr.port()
        )
    );
}
