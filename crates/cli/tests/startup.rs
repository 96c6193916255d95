//! The binary's start-up contract: bad configuration stops it with a message naming the variable and the
//! accepted range; risky settings are warned about; SIGTERM ends it cleanly; what it logs stays small.
//! Every child starts with an empty environment, so a developer's own MCP_* variables cannot change a result.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-bridges");

/// The binary with nothing inherited from the developer's environment.
fn bin() -> Command {
    let mut command = Command::new(BIN);
    command.env_clear().env("NO_COLOR", "1");
    command
}

#[test]
fn bad_values_name_the_variable_and_the_range() {
    let cases = [
        ("MCP_PORT", "abc", "0 to 65535"),
        ("MCP_PORT", "70000", "0 to 65535"),
        ("MCP_HOST", "not-an-ip", "IP address"),
        ("MCP_TOOL_TIMEOUTS", "read_file=0", "from 1ms to 1h"),
        ("MCP_SHUTDOWN_GRACE", "-1s", "from 0s to 10m"),
    ];
    for (var, value, range) in cases {
        let out = bin()
            .args(["bitburner", "--http"])
            .env(var, value)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}={value}: {stderr}");
        assert!(
            stderr.contains(var) && stderr.contains(range),
            "{var}={value}: {stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "nothing on stdout: it is the stdio transport"
        );
    }
}

#[test]
fn an_older_variable_name_is_still_read() {
    for subcommand in [&["bitburner"][..], &["serve", "--bridge", "bitburner"]] {
        let out = Command::new(BIN)
            .args(subcommand)
            .env_clear()
            .env("RPC_TIMEOUT_MS", "0")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{subcommand:?}: {stderr}");
        assert!(
            stderr.contains("RPC_TIMEOUT_MS is deprecated") && stderr.contains("from 1ms to 10m"),
            "{subcommand:?}: {stderr}"
        );
    }
}

/// Reads stderr lines until one contains `needle` or the deadline passes.
fn wait_for_line(reader: &mut impl BufRead, needle: &str) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut line = String::new();
    while Instant::now() < deadline {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line.contains(needle) {
            return Some(line.clone());
        }
    }
    None
}

#[test]
fn listening_beyond_loopback_needs_a_token_and_sigterm_exits_cleanly() {
    let beyond = [
        "bitburner",
        "--http",
        "--mcp-host",
        "0.0.0.0",
        "--mcp-port",
        "0",
        "--bitburner-game-port",
        "0",
    ];
    let out = bin().args(beyond).stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused without a token: {stderr}");
    assert!(
        stderr.contains("--mcp-host") && stderr.contains("MCP_TOKEN"),
        "the refusal names the fix: {stderr}"
    );
    let (mut child, stderr) = serve_http(
        &[&beyond[..], &["--mcp-token", "s3cret"]].concat(),
        &[("MCP_LOG_FORMAT", "text")],
    );
    let mut stderr = BufReader::new(stderr);
    // A token on the command line is in the process list: said before anything is served.
    wait_for_line(&mut stderr, "every local user can read in the process list")
        .expect("a warning about the token on the command line");
    wait_for_line(&mut stderr, "serving MCP at http://").expect("with a token it starts serving");
    assert_eq!(
        terminate(&mut child.0),
        Some(0),
        "graceful shutdown exits 0"
    );
}

/// A child that is killed if the test ends early, so a failing test leaves no bridge running.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts an HTTP bridge with `args` and `env`, its stderr piped for the test to read.
fn serve_http(args: &[&str], env: &[(&str, &str)]) -> (Reaped, std::process::ChildStderr) {
    let mut child = bin()
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    (Reaped(child), stderr)
}

/// Sends SIGTERM and waits for the exit code.
fn terminate(child: &mut Child) -> Option<i32> {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait().unwrap().code()
}

#[test]
fn an_empty_or_blank_token_is_refused_at_start() {
    for value in ["", "   "] {
        let (mut child, mut stderr) =
            serve_http(support::BITBURNER_OVER_HTTP, &[("MCP_TOKEN", value)]);
        // Read on a thread: a bridge that wrongly starts keeps stderr open, and must fail the test, not hang it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            let _ = tx.send(text);
        });
        let stderr = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| {
                panic!("MCP_TOKEN={value:?}: the bridge started instead of refusing")
            });
        assert_eq!(
            child.0.wait().unwrap().code(),
            Some(2),
            "MCP_TOKEN={value:?}: {stderr}"
        );
        assert!(stderr.contains("MCP_TOKEN"), "{stderr}");
    }
}

/// One HTTP/1.1 POST to `/mcp`; returns the status line and body.
fn post_mcp(addr: SocketAddr, headers: &[(&str, &str)], body: &str) -> String {
    let mut tcp = TcpStream::connect(addr).unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    tcp.write_all(request.as_bytes()).unwrap();
    tcp.write_all(body.as_bytes()).unwrap();
    let mut reply = String::new();
    tcp.read_to_string(&mut reply).unwrap();
    reply
}

/// Issue 8 item 12: a 3 MB `clientInfo` was logged verbatim at INFO, and every stateless call wrote three INFO
/// lines (100k calls → up to 125 MB of log).
#[test]
fn logs_stay_small_under_many_calls_and_a_huge_client_name() {
    const CALLS: usize = 200;
    let (mut child, stderr) = serve_http(support::BITBURNER_OVER_HTTP, &[]);
    let mut stderr = BufReader::new(stderr);
    let line = wait_for_line(&mut stderr, "serving MCP at http://").expect("it starts serving");
    let addr: SocketAddr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .parse()
        .unwrap();
    // Drained as it comes, so a bridge that logs too much fails the assertion below instead of blocking on a
    // full pipe.
    let logged = std::thread::spawn(move || {
        let mut logged = Vec::new();
        stderr.read_to_end(&mut logged).unwrap();
        logged.len()
    });

    let huge_name = "n".repeat(3 << 20);
    let init = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"{huge_name}","version":"1"}}}}}}"#
    );
    let reply = post_mcp(addr, &[], &init);
    assert!(
        reply.contains("\"result\""),
        "{}",
        &reply[..reply.len().min(300)]
    );
    for id in 0..CALLS {
        let name = if id == 0 { huge_name.as_str() } else { "agent" };
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"{name}","version":"1"}}}}}}}}"#
        );
        let reply = post_mcp(
            addr,
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/list"),
            ],
            &call,
        );
        assert!(
            reply.contains("read_file"),
            "{}",
            &reply[..reply.len().min(300)]
        );
    }
    assert_eq!(terminate(&mut child.0), Some(0));
    let logged = logged.join().unwrap();
    assert!(
        logged < 4096,
        "{CALLS} calls and one session with a 3 MB client name logged {logged} bytes"
    );
}

/// Issue 8 item 12: schemas said `format: uint64`, which the TypeScript SDK warns about on every `tools/list`.
#[test]
fn no_bridge_schema_uses_a_format_json_schema_does_not_define() {
    const RUST_FORMATS: [&str; 7] = [
        "int8", "int16", "int64", "uint", "uint16", "uint32", "uint64",
    ];
    for (bridge, port_flag) in [
        ("bitburner", "--bitburner-game-port"),
        ("computercraft", "--computercraft-link-port"),
    ] {
        let child = bin()
            .args([bridge, "--stdio", port_flag, "0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = Reaped(child);
        let mut stdin = child.0.stdin.take().unwrap();
        stdin
            .write_all(support::INIT_AND_LIST_TOOLS.as_bytes())
            .unwrap();
        let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
        let listed = wait_for_line(&mut stdout, r#""id":2"#).expect("a tools/list reply");
        drop(stdin);
        assert!(listed.contains("inputSchema"), "{bridge}: {listed}");
        for format in RUST_FORMATS {
            assert!(
                !listed.contains(&format!(r#""format":"{format}""#)),
                "{bridge}: a schema uses format {format}"
            );
        }
    }
}

/// With stdout not a pipe (a log file, a terminal), stdin is read on one of tokio's blocking threads, a read
/// that ends only when the client writes or closes; SIGTERM with stdin still open must end the bridge anyway,
/// not leave it waiting for that read after its work is done.
#[test]
fn sigterm_ends_a_stdio_bridge_whose_stdin_stays_open_and_stdout_is_a_file() {
    let out = std::env::temp_dir().join(format!("mcp-bridges-stdout-{}", std::process::id()));
    let child = bin()
        .args(["bitburner", "--stdio", "--bitburner-game-port", "0"])
        .env("MCP_LOG_FORMAT", "text")
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reaped(child);
    let stdin = child.0.stdin.take();
    let mut stderr = BufReader::new(child.0.stderr.take().unwrap());
    wait_for_line(&mut stderr, "serving MCP on stdio").expect("it serves stdio");
    let pid = child.0.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let _ = tx.send(status);
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(20))
            .unwrap()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status.code();
        }
        assert!(
            Instant::now() < deadline,
            "still running 20 s after SIGTERM, its stdin open"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0));
    drop(stdin);
    let _ = std::fs::remove_file(&out);
}
