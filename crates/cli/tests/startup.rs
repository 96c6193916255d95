//! The binary's start-up contract: bad configuration stops it with a message naming the variable and the
//! accepted range; risky settings are warned about; SIGTERM ends it cleanly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-bridges");

#[test]
fn bad_values_name_the_variable_and_the_range() {
    let cases = [
        ("MCP_PORT", "abc", "0 to 65535"),
        ("MCP_PORT", "70000", "0 to 65535"),
        ("MCP_HOST", "not-an-ip", "IP address"),
        ("MCP_TOOL_TIMEOUTS", "read_file=0", "1 to 3600000"),
        ("MCP_SHUTDOWN_GRACE_MS", "-1", "0 to 600000"),
    ];
    for (var, value, range) in cases {
        let out = Command::new(BIN)
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
            stderr.contains("BITBURNER_RPC_TIMEOUT_MS") && stderr.contains("1 to 600000"),
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
fn listening_beyond_loopback_without_a_token_is_warned_about_and_sigterm_exits_cleanly() {
    let mut child = Command::new(BIN)
        .args([
            "bitburner",
            "--http",
            "--mcp-host",
            "0.0.0.0",
            "--mcp-port",
            "0",
            "--game-port",
            "0",
        ])
        .env("MCP_LOG_FORMAT", "text")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let warning = wait_for_line(&mut stderr, "WITHOUT a token");
    assert!(
        warning.is_some_and(|w| w.contains("MCP_TOKEN")),
        "a loud warning naming the fix"
    );
    wait_for_line(&mut stderr, "serving MCP at http://").expect("it starts serving");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0), "graceful shutdown exits 0");
            break;
        }
        assert!(Instant::now() < deadline, "did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}
