//! Every listener on loopback unless a token is set (issue 25, item 7): the relay listens on 127.0.0.1 by
//! default, and it never starts without the game adapters' token, wherever it binds (MCP servers are
//! admitted only by their own tokens), so an address other machines reach is always token-guarded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bridge_minecraft::relay::config::RelayArgs;
use bridge_minecraft::relay::settings;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    relay: RelayArgs,
}

fn args(argv: &[&str]) -> RelayArgs {
    Cli::try_parse_from(std::iter::once("x").chain(argv.iter().copied()))
        .unwrap()
        .relay
}

#[test]
fn the_relay_listens_on_loopback_by_default() {
    assert!(args(&[]).host.is_loopback());
}

#[test]
fn the_relay_beyond_loopback_without_a_token_is_refused_naming_the_flag() {
    let err = settings(&args(&["--relay-host", "0.0.0.0"]), Vec::new())
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("--minecraft-auth-token") && err.contains("MINECRAFT_AUTH_TOKEN"),
        "{err}"
    );
    settings(
        &args(&[
            "--relay-host",
            "0.0.0.0",
            "--minecraft-auth-token",
            "game-secret",
        ]),
        Vec::new(),
    )
    .expect("with the token it may bind a reachable address");
}
