//! The split between links and MCP hosting, checked with `cargo tree`: the sandbox agent (PID 1 of every
//! sandbox) links nothing of the MCP or HTTP stack and no WebSocket or TLS; `bridge-link` with all its
//! features still links no MCP and no HTTP server, and with `peers` alone no WebSocket or TLS either.
//!
//! Offline and against the lock file, so it runs in CI after the build without the network.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::process::Command;

/// The crates `cargo tree` lists as normal (linked) dependencies of `package` with `features`.
fn linked(package: &str, features: &[&str]) -> BTreeSet<String> {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["-p", package]);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let crates: BTreeSet<String> = String::from_utf8(out.stdout)
        .expect("cargo tree prints UTF-8")
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    // An empty or unparsed listing must not pass as "nothing forbidden".
    assert!(
        crates.contains(package) && crates.contains("tokio"),
        "cargo tree -p {package} listed {crates:?}"
    );
    crates
}

fn assert_none_of(package: &str, features: &[&str], crates: &BTreeSet<String>, forbidden: &[&str]) {
    let found: Vec<&str> = forbidden
        .iter()
        .copied()
        .filter(|name| crates.contains(*name))
        .collect();
    assert!(
        found.is_empty(),
        "{package} with features {features:?} links {found:?}, which it must not; it links {} crates: {crates:?}",
        crates.len()
    );
}

/// What no link program may pull in: MCP, the HTTP server stack, the CLI parser, the hosting crate.
const MCP_AND_HTTP: [&str; 8] = [
    "rmcp",
    "axum",
    "axum-core",
    "hyper",
    "hyper-util",
    "tower",
    "clap",
    "bridge-core",
];

/// WebSocket and TLS: only the `ws` feature brings them.
const WS_AND_TLS: [&str; 5] = [
    "tungstenite",
    "tokio-tungstenite",
    "rustls",
    "tokio-rustls",
    "webpki-roots",
];

#[test]
fn the_sandbox_agent_links_no_mcp_http_websocket_or_tls() {
    let crates = linked("sandbox-agent", &[]);
    assert!(crates.contains("bridge-link"), "{crates:?}");
    assert_none_of("sandbox-agent", &[], &crates, &MCP_AND_HTTP);
    assert_none_of("sandbox-agent", &[], &crates, &WS_AND_TLS);
}

#[test]
fn bridge_link_by_default_is_the_framings_without_a_runtime() {
    let crates = linked("bridge-link", &[]);
    assert_none_of("bridge-link", &[], &crates, &MCP_AND_HTTP);
    assert_none_of("bridge-link", &[], &crates, &WS_AND_TLS);
    // The framings need no runtime, no random numbers and no logging: the agent chose its own.
    assert_none_of(
        "bridge-link",
        &[],
        &crates,
        &["futures-util", "rand", "tracing", "serde_json"],
    );
}

#[test]
fn bridge_link_with_peers_links_no_mcp_http_websocket_or_tls() {
    let crates = linked("bridge-link", &["peers"]);
    assert_none_of("bridge-link", &["peers"], &crates, &MCP_AND_HTTP);
    assert_none_of("bridge-link", &["peers"], &crates, &WS_AND_TLS);
}

#[test]
fn bridge_link_with_peers_and_ws_links_no_mcp_or_http_server() {
    let features = ["peers", "ws"];
    let crates = linked("bridge-link", &features);
    assert!(crates.contains("tokio-tungstenite"), "{crates:?}");
    assert_none_of("bridge-link", &features, &crates, &MCP_AND_HTTP);
}
