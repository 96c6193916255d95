//! One default transport rule for every bridge (issue 25, item 7): launched with no transport flag and stdin a
//! pipe, a bridge answers MCP on stdio at once; a bridge that also serves HTTP by default does so beside stdio,
//! and a busy HTTP port never takes stdio down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-bridges");
/// Generous: a loaded CI machine may take seconds to start the binary; only a hang reaches it.
const ANSWER_LIMIT: Duration = Duration::from_secs(60);

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"transport-default","version":"0"}}}"#;

fn launched_by_a_host(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .env_clear()
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Sends `initialize` on stdin and returns the first line on stdout (or fails after [`ANSWER_LIMIT`]).
fn initialize_over_stdio(child: &mut Child) -> String {
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    stdin.flush().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let answer = rx.recv_timeout(ANSWER_LIMIT);
    // Closing stdin ends the stdio session, and the server with it.
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    answer.unwrap_or_else(|_| panic!("no answer on stdout within {ANSWER_LIMIT:?}"))
}

fn assert_initialized(answer: &str) {
    let v: serde_json::Value = serde_json::from_str(answer.trim())
        .unwrap_or_else(|e| panic!("not JSON-RPC on stdout ({e}): {answer:?}"));
    assert_eq!(v["id"], 1, "{answer}");
    assert!(v["result"]["serverInfo"].is_object(), "{answer}");
}

#[test]
fn computercraft_with_no_transport_flag_answers_on_stdio() {
    let mut child = launched_by_a_host(&[
        "computercraft",
        "--mcp-port",
        "0",
        "--computercraft-link-port",
        "0",
    ]);
    assert_initialized(&initialize_over_stdio(&mut child));
}

#[test]
fn computercraft_answers_on_stdio_when_its_http_port_is_busy() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let mut child = launched_by_a_host(&[
        "computercraft",
        "--mcp-port",
        &port,
        "--computercraft-link-port",
        "0",
    ]);
    assert_initialized(&initialize_over_stdio(&mut child));
}

#[test]
fn every_bridge_with_no_transport_flag_answers_on_stdio() {
    // Only what a bridge refuses to start without, and free ports for its own listeners.
    let bridges: [&[&str]; 5] = [
        &["bitburner", "--bitburner-game-port", "0"],
        &["computercraft", "--computercraft-link-port", "0"],
        &["minecraft", "--minecraft-auth-token", "t"],
        &["sandbox"],
        &["debug"],
    ];
    for args in bridges {
        let bridge = args[0];
        let mut child = launched_by_a_host(&[args, &["--mcp-port", "0"]].concat());
        let answer = initialize_over_stdio(&mut child);
        let v: serde_json::Value = serde_json::from_str(answer.trim())
            .unwrap_or_else(|e| panic!("{bridge}: not JSON-RPC on stdout ({e}): {answer:?}"));
        assert_eq!(v["id"], 1, "{bridge}: {answer}");
    }
}
