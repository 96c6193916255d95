//! `push <dir>` and `pull <dir>` against the fake game, through the same code as the tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use bitburner_fake::WEB_ORIGIN;
use bridge_bitburner::{SyncArgs, context, listen, sync};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::*;
use tokio_util::sync::CancellationToken;

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bitburner-sync-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn put(root: &Path, relative: &str, content: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

#[tokio::test]
async fn push_waits_for_the_game_then_pull_brings_everything_back() {
    let src = tempdir("src");
    put(
        &src,
        "hack.js",
        "export async function main(ns) { ns.hack('n00dles'); }",
    );
    put(&src, "lib/util.ts", "export const x = 1;");
    put(&src, "notes.txt", "");
    put(&src, "README.md", "not a game file");
    put(&src, "has space.js", "skipped: the game forbids whitespace");
    put(&src, ".git/config", "never entered");
    put(&src, "node_modules/dep/index.js", "never entered");

    let game_args = game_args();
    let shutdown = CancellationToken::new();
    let listener = listen(&game_args, shutdown.clone()).await.unwrap();
    let (_, ctx) = context(listener.link.clone(), &game_args);
    let args = SyncArgs {
        dir: src.clone(),
        server: "home".into(),
        wait: Duration::from_secs(30),
    };
    let push_ctx = ctx.clone();
    let push_args = args.clone();
    let pushing = tokio::spawn(async move { sync::push(&push_ctx, &push_args).await });

    let game = v3();
    let _conn = game
        .connect(&format!("ws://{}", listener.addr), Some(WEB_ORIGIN))
        .await
        .unwrap();
    let report = within("push", pushing).await.unwrap().unwrap();
    assert_eq!(report.done, ["hack.js", "lib/util.ts", "notes.txt"]);
    let skipped: Vec<&str> = report.skipped.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(skipped, ["README.md", "has space.js"]);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    {
        let world = game.world();
        let home = world.server("home").unwrap();
        assert_eq!(
            home.file("lib/util.ts").unwrap().content,
            "export const x = 1;"
        );
        assert!(home.file("node_modules/dep/index.js").is_none());
    }

    let dst = tempdir("dst");
    let pulled = sync::pull(
        &ctx,
        &SyncArgs {
            dir: dst.clone(),
            ..args
        },
    )
    .await
    .unwrap();
    assert_eq!(pulled.done, ["hack.js", "lib/util.ts", "notes.txt"]);
    for f in ["hack.js", "lib/util.ts", "notes.txt"] {
        assert_eq!(
            std::fs::read(dst.join(f)).unwrap(),
            std::fs::read(src.join(f)).unwrap(),
            "{f}"
        );
    }
    shutdown.cancel();
}

#[tokio::test]
async fn push_without_a_game_says_how_to_connect() {
    let src = tempdir("lonely");
    put(&src, "a.js", "1");
    let game_args = game_args();
    let listener = listen(&game_args, CancellationToken::new()).await.unwrap();
    let (_, ctx) = context(listener.link, &game_args);
    let args = SyncArgs {
        dir: src,
        server: "home".into(),
        wait: Duration::from_millis(50),
    };
    let err = sync::push(&ctx, &args)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("E_DISCONNECTED") && err.contains("Options → Remote API"),
        "{err}"
    );
}
