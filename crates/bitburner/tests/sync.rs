//! `push <dir>` and `pull <dir>` against the fake game, through the same code as the tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

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
    assert_eq!(report.pushed, ["hack.js", "lib/util.ts", "notes.txt"]);
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
    assert_eq!(pulled.pulled, ["hack.js", "lib/util.ts", "notes.txt"]);
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
    assert_eq!(report.pushed, ["ok.js"]);
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
    assert_eq!(report.pulled, ["b.js"]);
    assert_eq!(report.conflicts, ["a.js", "c.js"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("a.game.js")).unwrap(),
        "// v2 from the game",
        "the game's side of a conflict is kept next to the local file"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("a.js")).unwrap(),
        "// v1 edited here"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("b.js")).unwrap(),
        "// b from the game"
    );
    assert!(
        matches!(
            report.print("pulled"),
            Err(sync::SyncError::Conflicts { count: 2 })
        ),
        "a conflict makes the command fail"
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
    assert!(forced.conflicts.is_empty());
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
    assert!(again.conflicts.is_empty(), "{again:?}");
    assert_eq!(std::fs::read_to_string(dir.join("a.js")).unwrap(), "// v3");
    shutdown.cancel();
}

/// The player edits a file in the game and the same file locally: push must not overwrite the game's edit.
#[tokio::test]
async fn push_never_overwrites_an_edit_made_in_the_game() {
    let dir = tempdir("conflict-push");
    put(&dir, "a.js", "// v1");
    put(&dir, "b.js", "// b v1");
    put(&dir, "c.js", "// c v1");
    let (shutdown, ctx, game, _conn) = synced_game(GameVersion::V3_0).await;
    sync::push(&ctx, &sync_args(&dir)).await.unwrap();
    {
        let mut world = game.world();
        let home = world.server_mut("home").unwrap();
        home.write("a.js", "// a edited in the game", true);
        home.write("b.js", "// b edited in the game", true);
    }
    put(&dir, "a.js", "// a edited here");
    put(&dir, "c.js", "// c edited here");

    let report = sync::push(&ctx, &sync_args(&dir)).await.unwrap();
    let game_a = game
        .world()
        .server("home")
        .unwrap()
        .file("a.js")
        .unwrap()
        .content
        .clone();
    let game_b = game
        .world()
        .server("home")
        .unwrap()
        .file("b.js")
        .unwrap()
        .content
        .clone();
    let game_c = game
        .world()
        .server("home")
        .unwrap()
        .file("c.js")
        .unwrap()
        .content
        .clone();
    assert_eq!(
        game_a, "// a edited in the game",
        "a conflict leaves the game's file alone"
    );
    assert_eq!(
        game_b, "// b edited in the game",
        "a file unchanged here does not overwrite the game's edit"
    );
    assert_eq!(
        game_c, "// c edited here",
        "a file changed only here is pushed"
    );
    assert_eq!(report.pushed, ["c.js"]);
    assert_eq!(report.conflicts, ["a.js"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("a.js")).unwrap(),
        "// a edited here"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("a.game.js")).unwrap(),
        "// a edited in the game",
        "both versions are kept"
    );
    assert!(
        matches!(
            report.print("pushed"),
            Err(sync::SyncError::Conflicts { count: 1 })
        ),
        "a conflict makes the command fail"
    );

    // The conflict copy is never pushed as a file of its own.
    let again = sync::push(&ctx, &sync_args(&dir)).await.unwrap();
    assert!(
        game.world()
            .server("home")
            .unwrap()
            .file("a.game.js")
            .is_none()
    );
    assert_eq!(again.conflicts, ["a.js"]);

    let forced = sync::push(
        &ctx,
        &SyncArgs {
            force: true,
            ..sync_args(&dir)
        },
    )
    .await
    .unwrap();
    assert!(
        forced.conflicts.is_empty() && forced.print("pushed").is_ok(),
        "{forced:?}"
    );
    let game_a = game
        .world()
        .server("home")
        .unwrap()
        .file("a.js")
        .unwrap()
        .content
        .clone();
    assert_eq!(game_a, "// a edited here");
    shutdown.cancel();
}

/// The game accepts `:` in names (it is not one of its forbidden characters), and so does a Unix directory.
#[cfg(unix)]
#[tokio::test]
async fn pull_brings_names_with_a_colon() {
    let dir = tempdir("colon");
    let (shutdown, ctx, game, _conn) = synced_game(GameVersion::V2_6).await;
    game.world()
        .server_mut("home")
        .unwrap()
        .write("a:b.js", "// colon", true);
    let report = sync::pull(&ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(report.pulled, ["a:b.js"], "{report:?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("a:b.js")).unwrap(),
        "// colon"
    );
    shutdown.cancel();
}

/// A symlink inside DIR is followed; one leading out of DIR is skipped with a word, never silently.
#[cfg(unix)]
#[tokio::test]
async fn push_follows_symlinks_inside_the_directory_and_names_the_others() {
    let outside = tempdir("outside");
    put(&outside, "secret.js", "// outside");
    let dir = tempdir("links");
    put(&dir, "lib/real.js", "// real");
    std::os::unix::fs::symlink(dir.join("lib/real.js"), dir.join("alias.js")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.js"), dir.join("out.js")).unwrap();
    std::os::unix::fs::symlink(dir.join("missing.js"), dir.join("broken.js")).unwrap();
    let (shutdown, ctx, game, _conn) = synced_game(GameVersion::V3_0).await;
    let report = sync::push(&ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(report.pushed, ["alias.js", "lib/real.js"]);
    let skipped: Vec<(&str, &str)> = report
        .skipped
        .iter()
        .map(|(f, why)| (f.as_str(), why.as_str()))
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(
        skipped[0].0 == "broken.js" && skipped[0].1.contains("broken symlink"),
        "{skipped:?}"
    );
    assert!(
        skipped[1].0 == "out.js" && skipped[1].1.contains("outside"),
        "{skipped:?}"
    );
    assert!(
        game.world()
            .server("home")
            .unwrap()
            .file("out.js")
            .is_none()
    );
    shutdown.cancel();
}

/// Names with a tab or a no-break space: the game (v2.6.1 and v3.0) forbids only the plain space.
#[tokio::test]
async fn names_with_other_whitespace_go_through_as_the_game_accepts_them() {
    let dir = tempdir("whitespace");
    put(&dir, "tab\tname.js", "// tab");
    put(&dir, "nbsp\u{a0}name.js", "// nbsp");
    put(&dir, "has space.js", "// refused by the game");
    let (shutdown, ctx, game, _conn) = synced_game(GameVersion::V2_6).await;
    let report = sync::push(&ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(
        report.pushed,
        ["nbsp\u{a0}name.js", "tab\tname.js"],
        "{report:?}"
    );
    let skipped: Vec<&str> = report.skipped.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(skipped, ["has space.js"]);
    assert!(
        game.world()
            .server("home")
            .unwrap()
            .file("tab\tname.js")
            .is_some()
    );
    shutdown.cancel();
}

/// Waits (polling) until `check` holds; the `within` bound fails the test instead of hanging.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    within(what, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// A `sync --watch` session: a local save reaches the game, a game edit reaches the directory, an edit on
/// both sides is a conflict that overwrites neither, and the definitions land in DIR.
#[tokio::test]
async fn watch_pushes_saves_pulls_game_edits_and_keeps_conflicts() {
    use bridge_bitburner::sync::watch::{WatchOptions, watch};
    use std::sync::{Arc, Mutex};
    let dir = tempdir("watch");
    put(&dir, "a.js", "// a v1");
    let (shutdown, ctx, game, _conn) = synced_game(GameVersion::V3_0).await;
    let stop = CancellationToken::new();
    let rounds = Arc::new(Mutex::new(Vec::<sync::SyncReport>::new()));
    let watching = {
        let (ctx, args, stop, rounds) =
            (ctx.clone(), sync_args(&dir), stop.clone(), rounds.clone());
        let options = WatchOptions {
            poll: Duration::from_millis(150),
            debounce: Duration::from_millis(50),
        };
        tokio::spawn(async move {
            watch(&ctx, &args, options, stop, |r| {
                rounds.lock().unwrap().push(r.clone())
            })
            .await
        })
    };
    let game_file = |name: &str| {
        game.world()
            .server("home")
            .unwrap()
            .file(name)
            .map(|f| f.content.clone())
    };
    let local_file = |name: &str| std::fs::read_to_string(dir.join(name)).ok();

    eventually("the first round to push a.js", || {
        game_file("a.js").as_deref() == Some("// a v1")
    })
    .await;
    let definitions = game.world().definitions.clone();
    eventually("the definitions in DIR", || {
        local_file(sync::DEFINITIONS_FILE).as_deref() == Some(definitions.as_str())
    })
    .await;

    // Local save → game.
    put(&dir, "a.js", "// a saved in the editor");
    put(&dir, "lib/new.js", "// new");
    eventually("the save to reach the game", || {
        game_file("a.js").as_deref() == Some("// a saved in the editor")
            && game_file("lib/new.js").as_deref() == Some("// new")
    })
    .await;

    // Game edit → local.
    game.world()
        .server_mut("home")
        .unwrap()
        .write("a.js", "// a edited in the game", true);
    eventually("the game's edit to reach DIR", || {
        local_file("a.js").as_deref() == Some("// a edited in the game")
    })
    .await;

    // Both at once: the game's lock holds any round in flight until both edits are made.
    {
        let mut world = game.world();
        put(&dir, "a.js", "// a, mine");
        world
            .server_mut("home")
            .unwrap()
            .write("a.js", "// a, the game's", true);
    }
    eventually("the conflict copy", || {
        local_file("a.game.js").as_deref() == Some("// a, the game's")
    })
    .await;
    eventually("the conflict to be reported", || {
        rounds
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.conflicts == ["a.js"])
    })
    .await;
    // A few more rounds change nothing and report the conflict once.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(local_file("a.js").as_deref(), Some("// a, mine"));
    assert_eq!(game_file("a.js").as_deref(), Some("// a, the game's"));
    assert!(
        game_file("a.game.js").is_none(),
        "the copy never goes to the game"
    );
    let reported = rounds
        .lock()
        .unwrap()
        .iter()
        .filter(|r| !r.conflicts.is_empty())
        .count();
    assert_eq!(reported, 1);
    assert!(
        game_file(sync::DEFINITIONS_FILE).is_none(),
        "the definitions are never pushed"
    );

    stop.cancel();
    within("watch to stop", watching).await.unwrap().unwrap();
    shutdown.cancel();
}
