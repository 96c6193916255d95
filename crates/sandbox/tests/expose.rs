//! expose_port: a URL on the host's loopback reaches an HTTP server on the sandbox's own loopback (which the
//! host cannot otherwise reach) through the core's access checks, and stops answering once the sandbox is
//! destroyed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use mcp_testkit::{http_get, status_of, until_closed, within};
use serde_json::{Value, json};
use std::time::Duration;
use support::{Harness, error_of, start};
use tokio::io::AsyncWriteExt;

/// Starts `python3 -m http.server 8000` on the sandbox's loopback serving a page, and exposes it.
async fn exposed_server(h: &Harness, id: &str) -> Value {
    h.sh(id, "echo exposed-page > /workspace/index.html").await;
    h.ok(
        "start_process",
        json!({"sandbox_id": id, "command": "cd /workspace && exec python3 -m http.server 8000 --bind 127.0.0.1"}),
    )
    .await;
    let up = h
        .sh(id, "for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8000))' 2>/dev/null && echo up && break; sleep 0.1; done")
        .await;
    assert_eq!(up["stdout"], "up\n", "{up}");
    h.ok("expose_port", json!({"sandbox_id": id, "port": 8000}))
        .await
}

/// Sends `head` (a whole request head) to 127.0.0.1:`port` and reads the response until the server closes.
async fn raw(port: u16, head: String) -> String {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    until_closed(s).await
}

fn port_of(e: &Value) -> u16 {
    e["host_port"].as_u64().unwrap() as u16
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exposed_http_server_answers_until_the_sandbox_is_destroyed() {
    let h = start(&[]).await;
    let id = h.create().await;
    let e = exposed_server(&h, &id).await;
    let host_port = port_of(&e);
    assert_eq!(e["url"], format!("http://127.0.0.1:{host_port}/"));
    assert_eq!(e["token_required"], false);
    let page = http_get(e["url"].as_str().unwrap()).await;
    assert_eq!(page, "exposed-page\n");
    let again = h
        .ok("expose_port", json!({"sandbox_id": id, "port": 8000}))
        .await;
    assert_eq!(again["host_port"], e["host_port"]);
    assert_eq!(again["new"], false);
    let bad = error_of(
        &h.call("expose_port", json!({"sandbox_id": id, "port": 70000}))
            .await,
    );
    assert!(bad.to_string().contains("port"), "{bad}");

    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    // The exposure notices the sandbox is gone on its next check (every 200 ms), later on a loaded machine.
    within("the listener to close", async {
        while tokio::net::TcpStream::connect(("127.0.0.1", host_port))
            .await
            .is_ok()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_header_is_refused_before_the_sandbox() {
    let h = start(&[]).await;
    let id = h.create().await;
    let host_port = port_of(&exposed_server(&h, &id).await);
    let refused = raw(
        host_port,
        "GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n".into(),
    )
    .await;
    assert_eq!(status_of(&refused), 403, "{refused}");
    assert!(refused.contains("Host evil.example"), "{refused}");
    assert!(!refused.contains("exposed-page"), "{refused}");
    let foreign_origin = raw(
        host_port,
        format!(
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:{host_port}\r\nOrigin: http://evil.example\r\n\r\n"
        ),
    )
    .await;
    assert_eq!(status_of(&foreign_origin), 403, "{foreign_origin}");
    let own = raw(
        host_port,
        format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{host_port}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert_eq!(status_of(&own), 200, "{own}");
    assert!(own.contains("exposed-page"), "{own}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_a_request_without_it_is_refused_401_and_with_it_answered() {
    let h = start(&["--sandbox-expose-token", "s3cret"]).await;
    let id = h.create().await;
    let e = exposed_server(&h, &id).await;
    assert_eq!(e["token_required"], true);
    let host_port = port_of(&e);
    let head = |auth: &str| {
        format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{host_port}\r\n{auth}Connection: close\r\n\r\n")
    };
    let without = raw(host_port, head("")).await;
    assert_eq!(status_of(&without), 401, "{without}");
    assert!(without.contains("Authorization: Bearer"), "{without}");
    assert!(!without.contains("exposed-page"), "{without}");
    let wrong = raw(host_port, head("Authorization: Bearer guess\r\n")).await;
    assert_eq!(status_of(&wrong), 401, "{wrong}");
    let with = raw(host_port, head("Authorization: Bearer s3cret\r\n")).await;
    assert_eq!(status_of(&with), 200, "{with}");
    assert!(with.contains("exposed-page"), "{with}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_expose_address_without_a_token_is_refused_at_start() {
    let env = bridge_core::BridgeEnv::new();
    let refused = bridge_sandbox::start(
        support::args(&["--sandbox-expose-address", "0.0.0.0"]),
        &env,
    )
    .await
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        refused.contains("--sandbox-expose-token (SANDBOX_EXPOSE_TOKEN)"),
        "{refused}"
    );
}

/// A server on the sandbox's 127.0.0.1:8001: a request with `Upgrade` gets 101 and then an echo of every byte;
/// `/head` gets the request head it received as its body; any other gets a 200 whose body never ends (a dot
/// every 100 ms).
const STREAMER: &str = r#"
import socket, threading, time
def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        got = c.recv(4096)
        if not got:
            return
        head += got
    if b"upgrade: echo" in head.lower():
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
        while True:
            got = c.recv(4096)
            if not got:
                return
            c.sendall(got)
    if head.startswith(b"GET /head "):
        c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + head)
        c.close()
        return
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nstart")
    while True:
        c.sendall(b".")
        time.sleep(0.1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8001))
s.listen()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// Reads from `s` until `want` has arrived; everything read.
async fn read_until(s: &mut tokio::net::TcpStream, want: &str) -> String {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).contains(want) {
        let n = s.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed before {want:?}: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Starts [`STREAMER`] in the sandbox and exposes its port; the host port.
async fn exposed_streamer(h: &Harness, id: &str) -> u16 {
    h.ok(
        "write_file",
        json!({"sandbox_id": id, "path": "/workspace/streamer.py", "content": STREAMER}),
    )
    .await;
    h.ok(
        "start_process",
        json!({"sandbox_id": id, "command": "exec python3 /workspace/streamer.py"}),
    )
    .await;
    let up = h
        .sh(id, "for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8001))' 2>/dev/null && echo up && break; sleep 0.1; done")
        .await;
    assert_eq!(up["stdout"], "up\n", "{up}");
    port_of(
        &h.ok("expose_port", json!({"sandbox_id": id, "port": 8001}))
            .await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_not_passed_into_the_sandbox() {
    let h = start(&["--sandbox-expose-token", "s3cret"]).await;
    let id = h.create().await;
    let host_port = exposed_streamer(&h, &id).await;
    let got = raw(
        host_port,
        format!("GET /head HTTP/1.0\r\nHost: 127.0.0.1:{host_port}\r\nAuthorization: Bearer s3cret\r\nX-Mark: kept\r\n\r\n"),
    )
    .await;
    assert_eq!(status_of(&got), 200, "{got}");
    let inside = got.split_once("\r\n\r\n").unwrap().1.to_ascii_lowercase();
    assert!(inside.contains("x-mark: kept"), "{inside}");
    assert!(!inside.contains("authorization"), "{inside}");
    assert!(!inside.contains("s3cret"), "{inside}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_passes_through_and_open_connections_end_with_the_sandbox() {
    let h = start(&[]).await;
    let id = h.create().await;
    let host_port = exposed_streamer(&h, &id).await;

    let mut upgraded = tokio::net::TcpStream::connect(("127.0.0.1", host_port))
        .await
        .unwrap();
    upgraded
        .write_all(
            format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{host_port}\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let head = within("the 101", read_until(&mut upgraded, "\r\n\r\n")).await;
    assert_eq!(status_of(&head), 101, "{head}");
    upgraded.write_all(b"ping-through").await.unwrap();
    within("the echo", read_until(&mut upgraded, "ping-through")).await;

    let mut streaming = tokio::net::TcpStream::connect(("127.0.0.1", host_port))
        .await
        .unwrap();
    streaming
        // HTTP/1.0: the body comes back as sent, not in chunks, so its bytes can be looked for as they are.
        .write_all(format!("GET / HTTP/1.0\r\nHost: 127.0.0.1:{host_port}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    within("the stream", read_until(&mut streaming, "start..")).await;

    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    mcp_testkit::within("the upgraded connection to end", until_closed(upgraded)).await;
    mcp_testkit::within("the streaming response to end", until_closed(streaming)).await;
}
