#![allow(clippy::unwrap_used, clippy::expect_used)]
//! TLS on a guarded listener (`wss://`, `https://`) and on dialled WebSockets: a self-signed certificate made
//! here with rcgen, real sockets on 127.0.0.1:0. The handshake deadline must cut a client that stalls in the
//! middle of the TLS handshake, and a plain client must fail without hurting the listener.

use bridge_core::link::tls::{self, TlsError};
use bridge_core::link::{ListenLimits, OriginPolicy, WsConfig, WsDial, bind, dial, ws_router};
use bridge_core::net::{GuardedListener, ListenStats};
use mcp_testkit::within;
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const LIMITS: ListenLimits = ListenLimits {
    max_connections: 8,
    // Every test client is on 127.0.0.1: the cap per address must not be the one tested here.
    max_per_ip: 1024,
    // The clients that succeed must finish a TLS handshake (rustls in a debug build, beside the server on one
    // thread) within it on a loaded machine; the stalled ones wait it out.
    handshake_timeout: Duration::from_secs(3),
    idle_timeout: Duration::from_secs(3),
};

/// PEM files of a fresh self-signed certificate for `localhost` and 127.0.0.1, in a directory of its own.
struct Pems {
    dir: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Pems {
    fn new() -> Pems {
        Pems::for_names(&["localhost", "127.0.0.1"])
    }

    fn for_names(names: &[&str]) -> Pems {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "bridge-core-tls-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let made = rcgen::generate_simple_self_signed(names).unwrap();
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        Pems { dir, cert, key }
    }
}

impl Drop for Pems {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct Server {
    addr: SocketAddr,
    stats: Arc<ListenStats>,
    links: mpsc::UnboundedReceiver<bridge_core::link::WsConnection>,
    _shutdown: tokio_util::sync::DropGuard,
}

async fn start(pems: &Pems) -> Server {
    let shutdown = CancellationToken::new();
    let (tx, links) = mpsc::unbounded_channel();
    let mut cfg = WsConfig::new(OriginPolicy::any());
    cfg.shutdown = shutdown.clone();
    cfg.ping_interval = Duration::ZERO;
    let router = ws_router(cfg, "/ws", move |c| {
        let _ = tx.send(c);
    })
    .route("/", axum::routing::get(|| async { "ok" }));
    let listener = bind("127.0.0.1:0".parse().unwrap(), "test", "TEST_PORT")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let guarded = GuardedListener::new(listener, LIMITS)
        .with_tls(tls::server_config(&pems.cert, &pems.key).unwrap());
    assert!(guarded.is_tls());
    let stats = guarded.stats();
    tokio::spawn(bridge_core::net::serve_until(
        guarded,
        router,
        shutdown.clone(),
    ));
    Server {
        addr,
        stats,
        links,
        _shutdown: shutdown.drop_guard(),
    }
}

/// `GET /` over TLS, trusting `ca`; the whole response.
async fn https_get(addr: SocketAddr, ca: &std::path::Path) -> String {
    let connector = tokio_rustls::TlsConnector::from(tls::client_config(Some(ca)).unwrap());
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut stream = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Waits until the server closes `stream` (EOF or reset).
async fn closed_by_server(mut stream: TcpStream) {
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[tokio::test]
async fn a_tls_listener_serves_https_and_wss() {
    let pems = Pems::new();
    let mut srv = start(&pems).await;
    let page = within("an https response", https_get(srv.addr, &pems.cert)).await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.ends_with("ok"), "{page}");

    let mut cfg = WsDial::new(format!("wss://localhost:{}/ws", srv.addr.port()));
    cfg.tls = Some(tls::client_config(Some(&pems.cert)).unwrap());
    cfg.ping_interval = Duration::ZERO;
    let stop = CancellationToken::new();
    let conn = within("the wss dial", dial::websocket(&cfg, &stop))
        .await
        .unwrap();
    let mut accepted = within("the accepted link", srv.links.recv()).await.unwrap();
    conn.sender.send_text("over tls".to_owned()).await.unwrap();
    let got = within("the frame", accepted.incoming.recv()).await.unwrap();
    assert_eq!(got, "over tls");
    assert_eq!(srv.stats.timed_out(), 0);
}

#[tokio::test]
async fn a_client_stalled_mid_tls_handshake_is_cut_by_the_handshake_deadline() {
    let pems = Pems::new();
    let srv = start(&pems).await;
    // A TLS record header announcing a ClientHello of 512 bytes, then a few of them, then nothing.
    let mut stalled = TcpStream::connect(srv.addr).await.unwrap();
    stalled
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01])
        .await
        .unwrap();
    // And one that never says a word.
    let silent = TcpStream::connect(srv.addr).await.unwrap();
    let started = tokio::time::Instant::now();
    within("the stalled handshake to be cut", closed_by_server(stalled)).await;
    within("the silent client to be cut", closed_by_server(silent)).await;
    assert!(started.elapsed() >= LIMITS.handshake_timeout - Duration::from_millis(50));
    within("both to be counted as timed out", async {
        while srv.stats.timed_out() < 2 || srv.stats.open() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    // The listener still serves.
    let page = within("an https response", https_get(srv.addr, &pems.cert)).await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
}

#[tokio::test]
async fn a_plain_client_on_a_tls_listener_fails_and_the_listener_keeps_serving() {
    let pems = Pems::new();
    let srv = start(&pems).await;
    let mut cfg = WsDial::new(format!("ws://127.0.0.1:{}/ws", srv.addr.port()));
    cfg.connect_timeout = Duration::from_secs(5);
    let stop = CancellationToken::new();
    let Err(err) = within("the plain dial to fail", dial::websocket(&cfg, &stop)).await else {
        panic!("a plain WebSocket to a TLS listener must fail");
    };
    assert!(!err.to_string().contains("no handshake within"), "{err}");
    within("the failed connection to close", async {
        while srv.stats.open() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let page = within("an https response", https_get(srv.addr, &pems.cert)).await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
}

#[tokio::test]
async fn a_wss_dial_refuses_a_server_its_roots_do_not_vouch_for() {
    let pems = Pems::new();
    let other = Pems::new();
    let srv = start(&pems).await;
    let stop = CancellationToken::new();
    for tls in [None, Some(tls::client_config(Some(&other.cert)).unwrap())] {
        let mut cfg = WsDial::new(format!("wss://localhost:{}/ws", srv.addr.port()));
        cfg.tls = tls;
        let Err(err) = within("the untrusted dial to fail", dial::websocket(&cfg, &stop)).await
        else {
            panic!("an untrusted certificate must be refused");
        };
        let text = err.to_string();
        assert!(text.contains("TLS handshake failed"), "{text}");
        assert!(text.contains("certificate"), "{text}");
    }
}

#[tokio::test]
async fn a_pinned_client_trusts_exactly_that_certificate_whatever_its_name() {
    let pems = Pems::for_names(&["relay.example"]);
    let other = Pems::for_names(&["relay.example"]);
    let mut srv = start(&pems).await;
    let stop = CancellationToken::new();
    let pin = |p: &Pems| {
        let leaf = tls::load_certs(&p.cert).unwrap().remove(0);
        Some(tls::client_config_pinned(leaf).unwrap())
    };
    let mut cfg = WsDial::new(format!("wss://127.0.0.1:{}/ws", srv.addr.port()));
    cfg.ping_interval = Duration::ZERO;
    cfg.tls = pin(&pems);
    within("the pinned dial", dial::websocket(&cfg, &stop))
        .await
        .unwrap();
    within("the accepted link", srv.links.recv()).await.unwrap();
    cfg.tls = pin(&other);
    let Err(err) = within("the other pin to fail", dial::websocket(&cfg, &stop)).await else {
        panic!("a certificate other than the pinned one must be refused");
    };
    assert!(err.to_string().contains("TLS handshake failed"), "{err}");
}

#[test]
fn bad_certificate_and_key_files_are_named_in_the_error() {
    let pems = Pems::new();
    let other = Pems::new();
    let missing = pems.dir.join("missing.pem");

    let err = tls::server_config(&missing, &pems.key).unwrap_err();
    assert!(matches!(err, TlsError::Cert { .. }), "{err}");
    assert!(err.to_string().contains("missing.pem"), "{err}");

    let err = tls::server_config(&pems.cert, &missing).unwrap_err();
    assert!(matches!(err, TlsError::Key { .. }), "{err}");

    // The key where the certificate belongs, and the other way round.
    let err = tls::server_config(&pems.key, &pems.key).unwrap_err();
    assert!(matches!(err, TlsError::NoCert { .. }), "{err}");
    let err = tls::server_config(&pems.cert, &pems.cert).unwrap_err();
    assert!(matches!(err, TlsError::NoKey { .. }), "{err}");

    let err = tls::server_config(&pems.cert, &other.key).unwrap_err();
    assert!(matches!(err, TlsError::Mismatch { .. }), "{err}");
    assert!(err.to_string().contains("do not go together"), "{err}");

    let err = tls::client_config(Some(&missing)).unwrap_err();
    assert!(matches!(err, TlsError::Ca { .. }), "{err}");
    assert!(tls::server_config(&pems.cert, &pems.key).is_ok());
}
