//! Every listener on loopback unless a token is set (issue 25, item 7): the computers' link listens on
//! 127.0.0.1 by default, and an address other machines can reach is refused at start without `--computercraft-link-token`,
//! with an error naming both flags.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bridge_computercraft::{CcArgs, ComputerCraft};
use bridge_core::{BridgeEntry, BridgeEnv};
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    cc: CcArgs,
}

fn args(argv: &[&str]) -> CcArgs {
    Cli::try_parse_from(std::iter::once("x").chain(argv.iter().copied()))
        .unwrap()
        .cc
}

#[test]
fn the_link_listens_on_loopback_by_default() {
    assert!(args(&[]).link.host.is_loopback());
}

#[tokio::test]
async fn the_link_beyond_loopback_without_a_token_is_refused_naming_both_flags() {
    for argv in [
        &[
            "--computercraft-link-host",
            "0.0.0.0",
            "--computercraft-link-port",
            "0",
        ][..],
        &[
            "--computercraft-link-host",
            "::",
            "--computercraft-link-port",
            "0",
            "--computercraft-link-token",
            "",
        ],
    ] {
        let env = BridgeEnv::new();
        let err = ComputerCraft::start(args(argv).link, &env)
            .await
            .err()
            .expect("refused");
        let msg = err.to_string();
        assert!(
            msg.contains("--computercraft-link-host")
                && msg.contains("--computercraft-link-token")
                && msg.contains("COMPUTERCRAFT_LINK_TOKEN"),
            "{argv:?}: {msg}"
        );
        env.close(std::time::Duration::from_secs(5)).await;
    }
}

#[tokio::test]
async fn the_link_beyond_loopback_with_a_token_starts() {
    let env = BridgeEnv::new();
    let argv = [
        "--computercraft-link-host",
        "0.0.0.0",
        "--computercraft-link-port",
        "0",
        "--computercraft-link-token",
        "s3cret",
    ];
    ComputerCraft::start(args(&argv).link, &env)
        .await
        .expect("a token makes a reachable address acceptable");
    env.shutdown().cancel();
    env.close(std::time::Duration::from_secs(5)).await;
}
