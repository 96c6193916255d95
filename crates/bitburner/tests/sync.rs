//! `push <dir>` and `pull <dir>` against the fake game, through the same code as the tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use bitburner_fake::{FakeGame, GameConnection, GameVersion, WEB_ORIGIN};
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
        force: false,
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
        force: false,
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

async fn synced_game(
    version: GameVersion,
) -> (
    CancellationToken,
    bridge_bitburner::tools::Ctx,
    FakeGame,
    GameConnection,
) {
    let game_args = game_args();
    let shutdown = CancellationToken::new();
    let listener = listen(&game_args, shutdown.clone()).await.unwrap();
    let (_, ctx) = context(listener.link.clone(), &game_args);
    let game = FakeGame::new(version);
    let conn = game
        .connect(&format!("ws://{}", listener.addr), Some(WEB_ORIGIN))
        .await
        .unwrap();
    within(
        "the game to connect",
        listener.link.wait_until(|s| s.connected),
    )
    .await;
    (shutdown, ctx, game, conn)
}

fn sync_args(dir: &Path) -> SyncArgs {
    SyncArgs {
        dir: dir.to_path_buf(),
        server: "home".into(),
        wait: Duration::from_secs(30),
        force: false,
    }
}

#[tokio::test]
async fn a_push_with_a_failed_file_fails() {
    let src = tempdir("partly");
    put(&src, "ok.js", "1");
    // v2.6 stores no .css: the game refuses it, the bridge cannot know in advance.
    put(&src, "style.css", "a {}");
    let (shutdown, ctx, _game, _conn) = synced_game(GameVersion::V2_6).await;
    let report = sync::push(&ctx, &sync_args(&src)).await.unwrap();
    assert_eq!(report.done, ["ok.js"]);
    assert_eq!(report.failed.len(), 1, "{report:?}");
    let outcome = report.print("pushed");
    assert!(
        matches!(
            outcome,
            Err(sync::SyncError::Incomplete {
                failed: 1,
                total: 2
            })
        ),
        "{outcome:?}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn pull_keeps_local_edits_unless_forced() {
    let dir = tempdir("edits");
    put(&dir, "a.js", "// v1");
    put(&dir, "b.js", "// b");
    let (shutdown, ctx, game, _conn) = synced_game(GameVersion::V3_0).await;
    sync::push(&ctx, &sync_args(&dir)).await.unwrap();
    assert!(
        game.world()
            .server("home")
            .unwrap()
            .file(".bitburner-sync.json")
            .is_none(),
        "the manifest is never pushed"
    );
    {
        let mut world = game.world();
        let home = world.server_mut("home").unwrap();
        home.write("a.js", "// v2 from the game", true);
        home.write("b.js", "// b from the game", true);
        home.write("c.js", "// c from the game", true);
    }
    // The player edits a.js locally and has an unrelated c.js the manifest never saw; b.js is untouched.
    put(&dir, "a.js", "// v1 edited here");
    put(&dir, "c.js", "// my own c");

    let report = sync::pull(&ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(report.done, ["b.js"]);
    assert_eq!(report.kept, ["a.js", "c.js"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("a.js")).unwrap(),
        "// v1 edited here"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("b.js")).unwrap(),
        "// b from the game"
    );
    assert!(
        report.print("pulled").is_ok(),
        "kept files are not failures"
    );

    let forced = sync::pull(
        &ctx,
        &SyncArgs {
            force: true,
            ..sync_args(&dir)
        },
    )
    .await
    .unwrap();
    assert!(forced.kept.is_empty());
    assert_eq!(
        std::fs::read_to_string(dir.join("a.js")).unwrap(),
        "// v2 from the game"
    );
    // What a pull wrote is the new baseline: the next pull may replace it again.
    game.world()
        .server_mut("home")
        .unwrap()
        .write("a.js", "// v3", true);
    let again = sync::pull(&ctx, &sync_args(&dir)).await.unwrap();
    assert!(again.kept.is_empty(), "{again:?}");
    assert_eq!(std::fs::read_to_string(dir.join("a.js")).unwrap(), "// v3");
    shutdown.cancel();
}
