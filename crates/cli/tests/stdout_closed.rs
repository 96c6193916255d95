//! A host that closes the bridge's stdout has left, even when it keeps stdin open: the bridge used to serve
//! on, writing into a closed pipe, until stdin closed too (a sandbox bridge kept its sandboxes meanwhile).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::Server;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_the_session_though_stdin_stays_open() {
    let mut server = Server::spawn(&["bitburner", "--stdio", "--bitburner-game-port", "0"]);
    let (stdout, mut stdin) = server.stdio();
    let send = |line: String| line + "\n";
    stdin
        .write_all(
            send(
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#
                    .into(),
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let answer = lines.next_line().await.unwrap().unwrap();
    assert!(answer.contains(r#""id":1"#), "{answer}");
    drop(lines);
    for id in 2..6 {
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"status","arguments":{{}}}}}}"#
        );
        stdin.write_all(send(call).as_bytes()).await.unwrap();
    }
    // stdin stays open: only the answers' failed writes say the host is gone.
    let code = server.exit_code().await;
    assert_eq!(code, Some(0), "{:?}", server.log());
    drop(stdin);
}
