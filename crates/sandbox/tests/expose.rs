//! expose_port: a URL on the host's loopback reaches a server on the sandbox's own loopback (which the host
//! cannot otherwise reach), and stops answering once the sandbox is destroyed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use std::io::{Read, Write};
use std::time::Duration;
use support::{error_of, start};

/// One HTTP GET of `/` on 127.0.0.1:`port`; the response's text, or the error.
fn get(port: u16) -> Result<String, String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exposed_http_server_answers_until_the_sandbox_is_destroyed() {
    let h = start(&[]).await;
    let id = h.create().await;
    h.sh(&id, "echo exposed-page > /workspace/index.html").await;
    h.ok(
        "start_process",
        json!({"sandbox_id": id, "command": "cd /workspace && exec python3 -m http.server 8000 --bind 127.0.0.1"}),
    )
    .await;
    let up = h
        .sh(&id, "for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8000))' 2>/dev/null && echo up && break; sleep 0.1; done")
        .await;
    assert_eq!(up["stdout"], "up\n", "{up}");

    let e = h
        .ok("expose_port", json!({"sandbox_id": id, "port": 8000}))
        .await;
    let host_port = e["host_port"].as_u64().unwrap() as u16;
    assert_eq!(e["url"], format!("http://127.0.0.1:{host_port}/"));
    let page = tokio::task::spawn_blocking(move || get(host_port))
        .await
        .unwrap()
        .unwrap();
    assert!(page.starts_with("HTTP/1.0 200"), "{page}");
    assert!(page.contains("exposed-page"), "{page}");
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
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after = tokio::task::spawn_blocking(move || get(host_port))
        .await
        .unwrap();
    assert!(
        after.is_err() || after.as_deref() == Ok(""),
        "still answering: {after:?}"
    );
    let refused = std::net::TcpStream::connect(("127.0.0.1", host_port));
    assert!(refused.is_err(), "the listener is closed");
}
