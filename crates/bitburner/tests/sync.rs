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

/// The way out of a conflict the report gives: merge the game's version into the file, delete the copy, push.
/// Deleting the copy says the game's version it held was seen, so the merged file goes to the game without
/// `--force`; a game that changed again since the copy was taken is a new conflict, not overwritten.
#[tokio::test]
async fn deleting_a_conflict_copy_resolves_its_conflict_and_the_merge_is_pushed() {
    let dir = tempdir("resolve");
    put(&dir, "a.js", "// v1");
    put(&dir, "b.js", "// b");
    let rig = Rig::new(GameVersion::V3_0).await;
    sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    rig.game_write("a.js", "// v2 from the game");
    rig.game_write("b.js", "// b2 from the game");
    put(&dir, "a.js", "// v1 edited here");
    put(&dir, "b.js", "// b edited here");
    let report = sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(report.conflicts, ["a.js", "b.js"], "{report:?}");

    // a.js merged and its copy deleted; b.js's copy kept: still a conflict.
    let merged = "// v1 edited here\n// v2 from the game";
    put(&dir, "a.js", merged);
    std::fs::remove_file(dir.join("a.game.js")).unwrap();
    let report = sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(report.pushed, ["a.js"], "{report:?}");
    assert_eq!(report.resolved, ["a.js"], "{report:?}");
    assert_eq!(report.conflicts, ["b.js"], "{report:?}");
    assert_eq!(rig.game_file("a.js").as_deref(), Some(merged));
    // The game's version it pushed over is kept first (the copy may have gone by a cleanup, not a merge), and
    // the line says so.
    let (name, kept) = &report.replaced[0];
    assert_eq!(name, "a.js");
    assert_eq!(read(&dir, kept).as_deref(), Some("// v2 from the game"));
    let said = report.lines("pushed").join("\n");
    assert!(
        said.contains("its conflict copy was deleted") && said.contains(kept.as_str()),
        "{said}"
    );
    assert_eq!(
        rig.game_file("b.js").as_deref(),
        Some("// b2 from the game")
    );
    let again = sync::reconcile(&rig.ctx, &sync_args(&dir), sync::Direction::Both)
        .await
        .unwrap();
    assert!(
        again.pushed.is_empty() && again.pulled.is_empty(),
        "{again:?}"
    );

    // The game changed b.js after its copy was taken: deleting the copy resolves nothing the player saw.
    rig.game_write("b.js", "// b3 from the game");
    std::fs::remove_file(dir.join("b.game.js")).unwrap();
    let report = sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(report.conflicts, ["b.js"], "{report:?}");
    assert_eq!(
        rig.game_file("b.js").as_deref(),
        Some("// b3 from the game")
    );
    assert_eq!(
        read(&dir, "b.game.js").as_deref(),
        Some("// b3 from the game")
    );
    let _ = std::fs::remove_dir_all(&dir);
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

/// An attack run's finding: a game edit made between the listing and the look the push takes right before
/// writing left the local edit unpushed, with no line for the file, "0 pushed, 0 skipped, 0 failed" and a
/// success. The file is now reported failed (the push did not finish), and the game's edit is kept.
#[tokio::test]
async fn a_game_edit_made_during_a_push_is_kept_and_the_file_reported() {
    let dir = tempdir("edit-during-push");
    put(&dir, "a.js", "// v1");
    let (shutdown, ctx, game, conn) = synced_game(GameVersion::V3_0).await;
    sync::push(&ctx, &sync_args(&dir)).await.unwrap();
    put(&dir, "a.js", "// edited here");
    conn.hold();
    let push = tokio::spawn({
        let ctx = ctx.clone();
        let args = sync_args(&dir);
        async move { sync::push(&ctx, &args).await }
    });
    // Requests of this push only: the first one's are in the history too.
    let before = |method: &str| conn.requests(method).len();
    let (listings, looks) = (before("getAllFiles"), before("getFile"));
    let seen = |method: &str, n: usize| {
        let method = method.to_owned();
        let conn = &conn;
        async move {
            while conn.requests(&method).len() <= n {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    within("the push's listing", seen("getAllFiles", listings)).await;
    // The listing is answered; the look before writing is held while the game changes the file.
    conn.release();
    conn.hold();
    within("the push's look before writing", seen("getFile", looks)).await;
    game.world()
        .server_mut("home")
        .unwrap()
        .write("a.js", "// edited in the game meanwhile", true);
    conn.release();
    let report = within("the push", push).await.unwrap().unwrap();
    assert!(report.pushed.is_empty(), "{report:?}");
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert_eq!(report.failed[0].0, "a.js", "{report:?}");
    assert!(
        report.failed[0].1.contains("changed in the game"),
        "{report:?}"
    );
    assert!(report.print("pushed").is_err(), "the push did not finish");
    assert_eq!(
        game.world()
            .server("home")
            .unwrap()
            .file("a.js")
            .unwrap()
            .content,
        "// edited in the game meanwhile"
    );
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
    // The player's own declarations: replaced by the game's, but kept first (an attack run's finding: this was
    // the only local overwrite the sync made without a copy).
    put(
        &dir,
        sync::DEFINITIONS_FILE,
        "// my own tweaked declarations",
    );
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
    let kept: Vec<String> = std::fs::read_dir(dir.join(".bitburner-sync/replaced"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(kept, ["// my own tweaked declarations"]);

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

/// A bridge on a free port with `version` connected, and the means to connect another game to it.
struct Rig {
    shutdown: CancellationToken,
    ctx: bridge_bitburner::tools::Ctx,
    link: bridge_bitburner::link::GameLink,
    url: String,
    game: FakeGame,
    conn: GameConnection,
}

impl Rig {
    async fn new(version: GameVersion) -> Self {
        let game_args = game_args();
        let shutdown = CancellationToken::new();
        let listener = listen(&game_args, shutdown.clone()).await.unwrap();
        let (_, ctx) = context(listener.link.clone(), &game_args);
        let url = format!("ws://{}", listener.addr);
        let game = FakeGame::new(version);
        let conn = game.connect(&url, Some(WEB_ORIGIN)).await.unwrap();
        within(
            "the game to connect",
            listener.link.wait_until(|s| s.connected),
        )
        .await;
        Rig {
            shutdown,
            ctx,
            link: listener.link,
            url,
            game,
            conn,
        }
    }

    /// Another game (another save, another build) takes over the connection.
    async fn switch_to(&mut self, game: FakeGame) {
        let before = self.link.status().connections_total;
        self.conn = game.connect(&self.url, Some(WEB_ORIGIN)).await.unwrap();
        within(
            "the new game to connect",
            self.link
                .wait_until(|s| s.connected && s.connections_total > before),
        )
        .await;
        self.game = game;
    }

    fn game_file(&self, name: &str) -> Option<String> {
        self.game
            .world()
            .server("home")
            .unwrap()
            .file(name)
            .map(|f| f.content.clone())
    }

    fn game_write(&self, name: &str, content: &str) {
        self.game
            .world()
            .server_mut("home")
            .unwrap()
            .write(name, content, true);
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn read(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}

/// B1: the game went back to an older synced version (restarted from an older save, another build): that is
/// no edit, so it is never pulled over the newer local file; the local one goes back to the game.
#[tokio::test]
async fn a_game_restarted_from_an_older_save_keeps_local_edits() {
    let dir = tempdir("rollback");
    put(&dir, "a.js", "v1");
    let mut rig = Rig::new(GameVersion::V3_0).await;
    sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    put(&dir, "a.js", "v2");
    let pushed = sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(pushed.pushed, ["a.js"]);

    // A game whose save still has v1 connects.
    let older = FakeGame::new(GameVersion::V3_0);
    older
        .world()
        .server_mut("home")
        .unwrap()
        .write("a.js", "v1", true);
    rig.switch_to(older).await;

    // `pull` alone must not take v1 either.
    let pulled = sync::pull(&rig.ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(read(&dir, "a.js").as_deref(), Some("v2"), "{pulled:?}");
    assert!(pulled.pulled.is_empty(), "{pulled:?}");
    assert_eq!(pulled.rolled_back, ["a.js"]);
    let said = pulled.lines("pulled").join("\n");
    assert!(
        said.contains("went back to an older version of a.js") && said.contains("push"),
        "{said}"
    );

    let report = sync::reconcile(&rig.ctx, &sync_args(&dir), sync::Direction::Both)
        .await
        .unwrap();
    assert_eq!(read(&dir, "a.js").as_deref(), Some("v2"), "{report:?}");
    assert_eq!(rig.game_file("a.js").as_deref(), Some("v2"));
    assert_eq!(report.rolled_back, ["a.js"]);
    assert_eq!(report.pushed, ["a.js"]);
    assert!(report.print("synced").is_ok(), "{report:?}");
    let said = report.lines("synced").join("\n");
    assert!(
        said.contains("went back to an older version of a.js")
            && said.contains("pushed the local one"),
        "{said}"
    );
    // The game's older version is kept before the push replaces it: a revert made in the game on purpose
    // costs nothing either.
    let kept = report
        .replaced
        .iter()
        .find(|(name, _)| name == "a.js")
        .map(|(_, kept)| kept.clone())
        .unwrap_or_else(|| panic!("the game's older version was not kept: {report:?}"));
    assert_eq!(read(&dir, &kept).as_deref(), Some("v1"));
    assert!(said.contains(&kept), "{said}");
}

/// What a game sends never lands where the scan does not read back: the sync's own folder (whose kept files a
/// planted name would push out of its bounds), other hidden folders, node_modules, the record.
#[tokio::test]
async fn a_game_never_writes_where_the_sync_keeps_its_own_files() {
    let dir = tempdir("own-files");
    put(&dir, "a.js", "mine");
    let rig = Rig::new(GameVersion::V3_0).await;
    sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    rig.game_write("a.js", "the game's");
    // A real kept file, made by a pull.
    let first = sync::pull(&rig.ctx, &sync_args(&dir)).await.unwrap();
    let (_, real) = first.replaced[0].clone();
    let planted = [
        ".bitburner-sync/replaced/99999999999999999999-x.js",
        ".git/hooks/x.js",
        "node_modules/x.js",
        ".bitburner-sync.json",
    ];
    for name in planted {
        rig.game_write(name, "planted");
    }
    let report = sync::pull(&rig.ctx, &sync_args(&dir)).await.unwrap();
    for name in planted {
        let skipped = report
            .skipped
            .iter()
            .any(|(n, _)| n.trim_start_matches('/') == name);
        assert!(skipped, "{name} not skipped: {report:?}");
        assert_ne!(
            read(&dir, name).as_deref(),
            Some("planted"),
            "{name} written"
        );
    }
    assert_eq!(
        read(&dir, &real).as_deref(),
        Some("mine"),
        "the real kept file"
    );
}

/// A conflict copy the sync wrote and nobody edited is replaced when the game's version changes again, but
/// the version it held is kept first: the game may have replaced it without a sync, so it is nowhere else.
#[tokio::test]
async fn an_untouched_conflict_copy_is_kept_before_it_is_replaced() {
    let dir = tempdir("copy-kept");
    put(&dir, "a.js", "base");
    let rig = Rig::new(GameVersion::V3_0).await;
    sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    put(&dir, "a.js", "mine");
    rig.game_write("a.js", "g1");
    let first = sync::reconcile(&rig.ctx, &sync_args(&dir), sync::Direction::Both)
        .await
        .unwrap();
    assert_eq!(first.conflicts, ["a.js"], "{first:?}");
    assert_eq!(read(&dir, "a.game.js").as_deref(), Some("g1"));
    rig.game_write("a.js", "g0");
    let second = sync::reconcile(&rig.ctx, &sync_args(&dir), sync::Direction::Both)
        .await
        .unwrap();
    assert_eq!(second.conflicts, ["a.js"], "{second:?}");
    let kept: Vec<String> = std::fs::read_dir(dir.join(".bitburner-sync/replaced"))
        .map(|r| {
            r.filter_map(Result::ok)
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        kept.iter().any(|c| c == "g1"),
        "g1 is nowhere: copy {:?}, kept {kept:?}",
        read(&dir, "a.game.js")
    );
}

/// B1's safety net: whatever a pull replaces locally is kept under `.bitburner-sync/replaced/`, and the
/// report says where.
#[tokio::test]
async fn a_pull_keeps_the_local_content_it_replaces() {
    let dir = tempdir("replaced");
    put(&dir, "lib/a.js", "mine");
    let rig = Rig::new(GameVersion::V3_0).await;
    sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    rig.game_write("lib/a.js", "edited in the game");
    let report = sync::pull(&rig.ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(report.pulled, ["lib/a.js"]);
    assert_eq!(
        read(&dir, "lib/a.js").as_deref(),
        Some("edited in the game")
    );
    assert_eq!(report.replaced.len(), 1, "{report:?}");
    let (name, kept) = &report.replaced[0];
    assert_eq!(name, "lib/a.js");
    assert!(kept.starts_with(".bitburner-sync/replaced/"), "{kept}");
    assert_eq!(read(&dir, kept).as_deref(), Some("mine"));
    let said = report.lines("pulled").join("\n");
    assert!(said.contains(kept.as_str()), "{said}");
    // The kept copies are never pushed.
    let again = sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    assert!(again.pushed.is_empty(), "{again:?}");
}

/// B2: a symlink in DIR never lets a write leave it: not a pull through a symlinked directory, not a conflict
/// copy, not the record.
#[cfg(unix)]
#[tokio::test]
async fn pull_never_writes_through_a_symlink_out_of_the_directory() {
    let outside = tempdir("victim");
    put(&outside, "victim.txt", "keep");
    put(&outside, "record.txt", "keep");
    let dir = tempdir("symlinked");
    put(&dir, "a.js", "mine");
    std::os::unix::fs::symlink(&outside, dir.join("lib")).unwrap();
    std::os::unix::fs::symlink(outside.join("victim.txt"), dir.join("a.game.js")).unwrap();
    std::os::unix::fs::symlink(outside.join("record.txt"), dir.join(".bitburner-sync.json"))
        .unwrap();
    let rig = Rig::new(GameVersion::V3_0).await;
    rig.game_write("lib/x.js", "// from the game");
    rig.game_write("a.js", "the game's");

    for direction in [sync::Direction::Pull, sync::Direction::Both] {
        let report = sync::reconcile(&rig.ctx, &sync_args(&dir), direction)
            .await
            .unwrap();
        assert!(!outside.join("x.js").exists(), "{report:?}");
        assert_eq!(read(&outside, "victim.txt").as_deref(), Some("keep"));
        assert_eq!(read(&outside, "record.txt").as_deref(), Some("keep"));
        let why = report
            .skipped
            .iter()
            .find(|(f, _)| f == "lib/x.js")
            .map(|(_, why)| why.as_str());
        assert!(
            why.is_some_and(|w| w.contains("symlink")),
            "lib/x.js must be reported skipped with a reason: {report:?}"
        );
        assert_eq!(report.conflicts, ["a.js"], "{report:?}");
        assert_eq!(read(&dir, "a.js").as_deref(), Some("mine"));
    }
}

/// B2: `--watch` never writes the definitions through a symlink.
#[cfg(unix)]
#[tokio::test]
async fn watch_never_writes_the_definitions_through_a_symlink() {
    use bridge_bitburner::sync::watch::{WatchOptions, watch};
    use std::sync::{Arc, Mutex};
    let outside = tempdir("rc");
    put(&outside, "bashrc", "keep");
    let dir = tempdir("defs-link");
    put(&dir, "a.js", "// a");
    std::os::unix::fs::symlink(outside.join("bashrc"), dir.join(sync::DEFINITIONS_FILE)).unwrap();
    let rig = Rig::new(GameVersion::V3_0).await;
    let stop = CancellationToken::new();
    let rounds = Arc::new(Mutex::new(Vec::<sync::SyncReport>::new()));
    let watching = {
        let (ctx, args, stop, rounds) = (
            rig.ctx.clone(),
            sync_args(&dir),
            stop.clone(),
            rounds.clone(),
        );
        let options = WatchOptions {
            poll: Duration::from_millis(100),
            debounce: Duration::from_millis(20),
        };
        tokio::spawn(async move {
            watch(&ctx, &args, options, stop, |r| {
                rounds.lock().unwrap().push(r.clone())
            })
            .await
        })
    };
    // The definitions are written (or refused) before the first round's report.
    eventually("the first round", || !rounds.lock().unwrap().is_empty()).await;
    assert_eq!(read(&outside, "bashrc").as_deref(), Some("keep"));
    let first = rounds.lock().unwrap()[0].clone();
    assert!(
        first
            .skipped
            .iter()
            .any(|(f, why)| f == sync::DEFINITIONS_FILE && why.contains("symlink")),
        "{first:?}"
    );
    stop.cancel();
    within("watch to stop", watching).await.unwrap().unwrap();
}

/// B3: a real game file named like a conflict copy is an ordinary file; a conflict never writes into it, and
/// it is never pushed over with the game's other file.
#[tokio::test]
async fn a_game_file_named_like_a_conflict_copy_survives_a_conflict() {
    let dir = tempdir("copy-name");
    let rig = Rig::new(GameVersion::V3_0).await;
    rig.game_write("a.js", "a v1");
    rig.game_write("a.game.js", "Q");
    sync::pull(&rig.ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(read(&dir, "a.game.js").as_deref(), Some("Q"));
    put(&dir, "a.js", "a, mine");
    rig.game_write("a.js", "a, the game's");

    let report = sync::reconcile(&rig.ctx, &sync_args(&dir), sync::Direction::Both)
        .await
        .unwrap();
    assert_eq!(report.conflicts, ["a.js"], "{report:?}");
    assert_eq!(
        rig.game_file("a.game.js").as_deref(),
        Some("Q"),
        "{report:?}"
    );
    assert_eq!(read(&dir, "a.game.js").as_deref(), Some("Q"));
    assert_eq!(read(&dir, "a.js").as_deref(), Some("a, mine"));
    assert_eq!(read(&dir, "a.game.1.js").as_deref(), Some("a, the game's"));
    let said = report.lines("synced").join("\n");
    assert!(said.contains("a.game.1.js"), "{said}");
    // The copy this sync wrote is never pushed.
    sync::reconcile(&rig.ctx, &sync_args(&dir), sync::Direction::Both)
        .await
        .unwrap();
    assert_eq!(rig.game_file("a.game.1.js"), None);
    assert_eq!(rig.game_file("a.game.js").as_deref(), Some("Q"));
}

/// B3: the player merging inside the conflict copy keeps that edit however many rounds run.
#[tokio::test]
async fn an_edit_inside_a_conflict_copy_is_kept() {
    let dir = tempdir("copy-edit");
    put(&dir, "a.js", "v1");
    let rig = Rig::new(GameVersion::V3_0).await;
    sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    put(&dir, "a.js", "mine");
    rig.game_write("a.js", "the game's");
    let args = sync_args(&dir);
    let both = || sync::reconcile(&rig.ctx, &args, sync::Direction::Both);
    let first = both().await.unwrap();
    assert_eq!(first.conflicts, ["a.js"]);
    assert_eq!(read(&dir, "a.game.js").as_deref(), Some("the game's"));

    put(&dir, "a.game.js", "merging here");
    for _ in 0..3 {
        let round = both().await.unwrap();
        assert_eq!(round.conflicts, ["a.js"], "{round:?}");
    }
    assert_eq!(read(&dir, "a.game.js").as_deref(), Some("merging here"));
    assert_eq!(read(&dir, "a.js").as_deref(), Some("mine"));
    assert_eq!(
        rig.game_file("a.game.js"),
        None,
        "a copy never goes to the game"
    );

    // The game changes again: its new version goes to a new copy, the edited one stays.
    rig.game_write("a.js", "the game's, again");
    let round = both().await.unwrap();
    assert_eq!(round.conflicts, ["a.js"]);
    assert_eq!(read(&dir, "a.game.js").as_deref(), Some("merging here"));
    assert_eq!(
        read(&dir, "a.game.1.js").as_deref(),
        Some("the game's, again")
    );
}

/// A record that cannot be read is unknown, not empty: nothing local is overwritten, and the report says so.
#[tokio::test]
async fn an_unreadable_record_overwrites_nothing_and_says_so() {
    let dir = tempdir("bad-record");
    put(&dir, "a.js", "v1");
    let rig = Rig::new(GameVersion::V3_0).await;
    sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    rig.game_write("a.js", "v2 from the game");
    put(&dir, ".bitburner-sync.json", "{ not json");

    let report = sync::pull(&rig.ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(read(&dir, "a.js").as_deref(), Some("v1"), "{report:?}");
    assert_eq!(report.conflicts, ["a.js"]);
    let said = report.lines("pulled").join("\n");
    assert!(
        said.contains(".bitburner-sync.json") && said.contains("cannot be read"),
        "{said}"
    );
    // The unreadable record is kept aside for the player, not silently replaced.
    let aside = dir.join(".bitburner-sync").join("unreadable-record.json");
    assert_eq!(
        std::fs::read_to_string(aside).ok().as_deref(),
        Some("{ not json")
    );
}

/// Runs the rest of a test as an ordinary user when it runs as root, who reads any file whatever its mode:
/// `dir` is given to uid 65534 and the effective uid becomes it (root's capabilities go with it). Dropping the
/// guard gives root back: only the effective uid changed, so the saved one is still root.
#[cfg(unix)]
struct NotRoot(bool);

#[cfg(unix)]
impl NotRoot {
    const NOBODY: u32 = 65534;

    fn over(dir: &Path) -> Self {
        if !nix::unistd::geteuid().is_root() {
            return Self(false);
        }
        // The uid is the whole process's: no other test may run in it meanwhile.
        let alone = std::env::var("NEXTEST_EXECUTION_MODE").as_deref() == Ok("process-per-test")
            || std::env::var("RUST_TEST_THREADS").as_deref() == Ok("1");
        assert!(
            alone,
            "this test changes the process's effective uid: run it under cargo nextest (a process per test), \
             or with RUST_TEST_THREADS=1"
        );
        fn give(path: &Path) {
            std::os::unix::fs::lchown(path, Some(NotRoot::NOBODY), Some(NotRoot::NOBODY)).unwrap();
            if path.is_dir() && !path.is_symlink() {
                for entry in std::fs::read_dir(path).unwrap() {
                    give(&entry.unwrap().path());
                }
            }
        }
        give(dir);
        nix::unistd::seteuid(nix::unistd::Uid::from_raw(Self::NOBODY)).unwrap();
        Self(true)
    }
}

#[cfg(unix)]
impl Drop for NotRoot {
    fn drop(&mut self) {
        if self.0 {
            let _ = nix::unistd::seteuid(nix::unistd::Uid::from_raw(0));
        }
    }
}

/// An attack run's finding: a FIFO named like a game file (or as the record) hung pull, push and sync for good,
/// past SIGTERM. It is now a file that cannot be read: reported, left alone, and the rest of the sync goes on.
#[cfg(unix)]
#[tokio::test]
async fn a_fifo_named_like_a_game_file_is_reported_not_read() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempdir("fifo");
    put(&dir, "b.js", "// b");
    let rig = Rig::new(GameVersion::V3_0).await;
    rig.game_write("x.js", "the game's x");
    nix::unistd::mkfifo(
        &dir.join("x.js"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    for direction in [
        sync::Direction::Pull,
        sync::Direction::Push,
        sync::Direction::Both,
    ] {
        let report = within(
            "a sync beside a FIFO",
            sync::reconcile(&rig.ctx, &sync_args(&dir), direction),
        )
        .await
        .unwrap();
        assert!(!report.pulled.iter().any(|f| f == "x.js"), "{report:?}");
        if direction != sync::Direction::Push {
            assert!(
                report
                    .failed
                    .iter()
                    .any(|(f, why)| f == "x.js" && why.contains("regular")),
                "{direction:?}: {report:?}"
            );
        }
    }
    assert!(
        std::fs::symlink_metadata(dir.join("x.js"))
            .unwrap()
            .file_type()
            .is_fifo(),
        "left as it was"
    );
    // The record too.
    std::fs::remove_file(dir.join(".bitburner-sync.json")).unwrap();
    nix::unistd::mkfifo(
        &dir.join(".bitburner-sync.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let report = within(
        "a sync beside a FIFO record",
        sync::reconcile(&rig.ctx, &sync_args(&dir), sync::Direction::Pull),
    )
    .await
    .unwrap();
    assert!(
        report
            .lines("pulled")
            .join("\n")
            .contains(".bitburner-sync.json"),
        "{report:?}"
    );
}

/// A local file that exists but cannot be read is reported and left alone: never taken for a file deleted
/// here, pulled over with nothing kept.
#[cfg(unix)]
#[tokio::test]
async fn a_local_file_that_cannot_be_read_is_never_pulled_over() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir("unreadable-file");
    put(&dir, "a.js", "mine");
    put(&dir, "b.js", "// b");
    let rig = Rig::new(GameVersion::V3_0).await;
    sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    rig.game_write("a.js", "edited in the game");
    let a = dir.join("a.js");
    let user = NotRoot::over(&dir);
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o000)).unwrap();
    assert!(std::fs::read(&a).is_err(), "the test needs a.js unreadable");

    let report = sync::pull(&rig.ctx, &sync_args(&dir)).await.unwrap();
    let reconciled = sync::reconcile(&rig.ctx, &sync_args(&dir), sync::Direction::Both)
        .await
        .unwrap();
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(user);

    assert_eq!(read(&dir, "a.js").as_deref(), Some("mine"), "{report:?}");
    for report in [&report, &reconciled] {
        assert!(!report.pulled.iter().any(|f| f == "a.js"), "{report:?}");
        assert!(report.replaced.is_empty(), "{report:?}");
        assert_eq!(
            report.failed.iter().filter(|(f, _)| f == "a.js").count(),
            1,
            "said once, as failed: {report:?}"
        );
    }
    assert_eq!(rig.game_file("a.js").as_deref(), Some("edited in the game"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A conflict copy that could not be looked at for a while (its directory unreadable for a round) was not
/// deleted: its conflict stays, and the game's edit is not pushed over.
#[cfg(unix)]
#[tokio::test]
async fn a_conflict_copy_that_cannot_be_looked_at_is_not_taken_for_deleted() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir("unreadable-copy");
    put(&dir, "s/a.js", "// v1");
    let rig = Rig::new(GameVersion::V3_0).await;
    sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    rig.game_write("s/a.js", "// v2 from the game");
    put(&dir, "s/a.js", "// v1 edited here");
    let report = sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(report.conflicts, ["s/a.js"], "{report:?}");
    let sub = dir.join("s");
    let user = NotRoot::over(&dir);
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o000)).unwrap();
    assert!(
        std::fs::read_dir(&sub).is_err(),
        "the test needs s/ unreadable"
    );
    let blind = sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
    drop(user);
    assert!(
        blind.pushed.is_empty() && blind.resolved.is_empty(),
        "{blind:?}"
    );

    let report = sync::push(&rig.ctx, &sync_args(&dir)).await.unwrap();
    assert_eq!(report.conflicts, ["s/a.js"], "{report:?}");
    assert!(report.pushed.is_empty(), "{report:?}");
    assert_eq!(
        rig.game_file("s/a.js").as_deref(),
        Some("// v2 from the game")
    );
    assert_eq!(
        read(&dir, "s/a.game.js").as_deref(),
        Some("// v2 from the game")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A subdirectory that cannot be read (here: its path is longer than the system allows) is skipped with a
/// reason; the rest syncs, so `--watch` goes on.
#[cfg(unix)]
#[tokio::test]
async fn an_unreadable_subdirectory_is_skipped_not_fatal() {
    let dir = tempdir("deep");
    put(&dir, "a.js", "// a");
    // 20 levels of 240 characters: past PATH_MAX (4096) even for root, made with relative paths.
    let level = "d".repeat(240);
    let script = format!("for i in $(seq 20); do mkdir {level} && cd -P {level} || exit 1; done");
    let made = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(&dir)
        .status()
        .unwrap();
    assert!(made.success());
    let rig = Rig::new(GameVersion::V3_0).await;
    let report = sync::reconcile(&rig.ctx, &sync_args(&dir), sync::Direction::Both)
        .await
        .unwrap();
    assert_eq!(report.pushed, ["a.js"]);
    assert!(
        report
            .skipped
            .iter()
            .any(|(f, why)| f.starts_with(&level) && why.contains("cannot be read")),
        "{report:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

type Rounds = std::sync::Arc<std::sync::Mutex<Vec<sync::SyncReport>>>;

/// Starts `sync --watch` on `dir`; every round's report lands in the returned list.
fn start_watch(
    rig: &Rig,
    dir: &Path,
    poll: Duration,
    debounce: Duration,
) -> (
    CancellationToken,
    Rounds,
    tokio::task::JoinHandle<Result<(), sync::SyncError>>,
) {
    use bridge_bitburner::sync::watch::{WatchOptions, watch};
    let stop = CancellationToken::new();
    let rounds = Rounds::default();
    let (ctx, args, token, seen) = (
        rig.ctx.clone(),
        sync_args(dir),
        stop.clone(),
        rounds.clone(),
    );
    let options = WatchOptions { poll, debounce };
    let task = tokio::spawn(async move {
        watch(&ctx, &args, options, token, |r| {
            seen.lock().unwrap().push(r.clone())
        })
        .await
    });
    (stop, rounds, task)
}

/// Every `pushFile` the game received, as (filename, content), in order.
fn pushes(conn: &GameConnection) -> Vec<(String, String)> {
    conn.requests("pushFile")
        .iter()
        .map(|p| {
            let field = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or("").to_owned();
            (field("filename"), field("content"))
        })
        .collect()
}

fn pushed_contents(conn: &GameConnection, name: &str) -> Vec<String> {
    pushes(conn)
        .into_iter()
        .filter(|(f, _)| f == name)
        .map(|(_, c)| c)
        .collect()
}

/// Holds the game's answers and waits until the watch's next round is in flight (its `getAllFiles` held):
/// that round has listed the directory and reads the local files only once it is released.
async fn hold_next_round(conn: &GameConnection) {
    conn.hold();
    let before = conn.requests("getAllFiles").len();
    eventually("a round to ask the game for its files", || {
        conn.requests("getAllFiles").len() > before
    })
    .await;
}

/// The finding: an editor that saves in place truncates the file, then writes it. A round that reads the file
/// in between must not push the empty or partial content, even when the pause is longer than the poll interval.
#[tokio::test]
async fn watch_never_pushes_a_half_saved_file() {
    let dir = tempdir("half-save");
    put(&dir, "a.js", "// v1\n");
    let rig = Rig::new(GameVersion::V3_0).await;
    let poll = Duration::from_millis(100);
    // Far above the editor's pause below, so a loaded machine's delays in it do not make the half save settled.
    let debounce = Duration::from_secs(4);
    let (stop, rounds, watching) = start_watch(&rig, &dir, poll, debounce);
    eventually("the first push of a.js", || {
        rig.game_file("a.js").as_deref() == Some("// v1\n")
    })
    .await;

    // A round is in flight when the editor truncates a.js and writes the first part.
    hold_next_round(&rig.conn).await;
    {
        use std::io::Write;
        let mut f = std::fs::File::create(dir.join("a.js")).unwrap();
        f.write_all(b"// v2, first ").unwrap();
    }
    rig.conn.release();
    // The editor's pause: longer than the poll interval, well within the debounce.
    tokio::time::sleep(poll * 3).await;
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("a.js"))
            .unwrap();
        f.write_all(b"half and the rest\n").unwrap();
    }
    eventually("the whole save to reach the game", || {
        rig.game_file("a.js").as_deref() == Some("// v2, first half and the rest\n")
    })
    .await;
    assert_eq!(
        pushed_contents(&rig.conn, "a.js"),
        ["// v1\n", "// v2, first half and the rest\n"],
        "only whole saves reach the game: {:?}",
        rounds.lock().unwrap()
    );
    stop.cancel();
    within("watch to stop", watching).await.unwrap().unwrap();
}

/// Editors that save through a temporary file and a rename (JetBrains' safe write, vim with
/// `backupcopy=no`), and their swap, backup, lock and probe files: none of those names reaches the game, and a
/// rename-save is one change of the target (never a failure, never a restore of the old version meanwhile).
#[cfg(unix)]
#[tokio::test]
async fn watch_takes_a_rename_save_as_one_change_and_never_pushes_editor_files() {
    let dir = tempdir("rename-save");
    put(&dir, "a.js", "// v1\n");
    // What editors leave beside a file they have open.
    put(&dir, ".a.js.swp", "b0VIM 9.0");
    put(&dir, "a.js~", "// v0 backup");
    put(&dir, "#a.js#", "// emacs auto-save");
    put(&dir, "._a.js", "\u{5}\u{16}\u{7}\0AppleDouble");
    put(&dir, "flycheck_a.js", "// emacs flycheck's copy");
    put(&dir, "a_flymake.js", "// emacs flymake's copy");
    std::os::unix::fs::symlink("user@host.1234:1700000000", dir.join(".#a.js")).unwrap();
    let rig = Rig::new(GameVersion::V3_0).await;
    let (stop, rounds, watching) = start_watch(
        &rig,
        &dir,
        Duration::from_millis(100),
        Duration::from_millis(1000),
    );
    eventually("the first push of a.js", || {
        rig.game_file("a.js").as_deref() == Some("// v1\n")
    })
    .await;

    // JetBrains: write a.js___jb_tmp___, rename a.js to a.js___jb_old___, rename the temp to a.js, delete
    // the old one. Rounds run between the steps.
    hold_next_round(&rig.conn).await;
    put(&dir, "a.js___jb_tmp___", "// v2 from the IDE\n");
    std::fs::rename(dir.join("a.js"), dir.join("a.js___jb_old___")).unwrap();
    rig.conn.release();
    hold_next_round(&rig.conn).await; // this round listed the directory without a.js
    rig.conn.release();
    hold_next_round(&rig.conn).await; // and the one before it is over
    std::fs::rename(dir.join("a.js___jb_tmp___"), dir.join("a.js")).unwrap();
    std::fs::remove_file(dir.join("a.js___jb_old___")).unwrap();
    rig.conn.release();
    eventually("the IDE's save to reach the game", || {
        rig.game_file("a.js").as_deref() == Some("// v2 from the IDE\n")
    })
    .await;

    // vim with backupcopy=no: probe file 4913, rename to a.js~, write a new a.js, drop the backup.
    put(&dir, "4913", "");
    std::fs::remove_file(dir.join("4913")).unwrap();
    std::fs::rename(dir.join("a.js"), dir.join("a.js~")).unwrap();
    put(&dir, "a.js", "// v3 from vim\n");
    std::fs::remove_file(dir.join("a.js~")).unwrap();
    eventually("vim's save to reach the game", || {
        rig.game_file("a.js").as_deref() == Some("// v3 from vim\n")
    })
    .await;

    let rounds = rounds.lock().unwrap().clone();
    for r in &rounds {
        assert!(
            r.failed.is_empty() && r.pulled.is_empty() && r.conflicts.is_empty(),
            "a save in progress is neither a failure nor a deletion to undo: {r:?}"
        );
    }
    let names: std::collections::BTreeSet<String> =
        pushes(&rig.conn).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["a.js"],
        "no editor file reaches the game"
    );
    assert_eq!(
        pushed_contents(&rig.conn, "a.js"),
        ["// v1\n", "// v2 from the IDE\n", "// v3 from vim\n"],
        "each save is one push"
    );
    assert_eq!(read(&dir, "a.js").as_deref(), Some("// v3 from vim\n"));
    let skipped: Vec<&str> = rounds
        .iter()
        .flat_map(|r| r.skipped.iter().map(|(f, _)| f.as_str()))
        .collect();
    assert!(
        skipped.is_empty(),
        "an editor's own files are passed over without a line each: {skipped:?}"
    );
    stop.cancel();
    within("watch to stop", watching).await.unwrap().unwrap();
}

/// A file that never holds still (a tool rewriting it all the time) is never pushed half-written, is
/// reported, and does not stop the watch from pulling the game's edits meanwhile.
#[tokio::test]
async fn watch_reports_a_file_that_never_settles_and_goes_on() {
    let dir = tempdir("never-settles");
    put(&dir, "b.js", "// 0\n");
    let rig = Rig::new(GameVersion::V3_0).await;
    let (stop, rounds, watching) = start_watch(
        &rig,
        &dir,
        Duration::from_millis(100),
        Duration::from_millis(200),
    );
    let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let (dir, writing, written) = (dir.clone(), writing.clone(), written.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while writing.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                std::fs::write(dir.join("b.js"), format!("// {n}\n")).unwrap();
                written.store(n, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // The writer has been at it for longer than the debounce and the poll interval.
    eventually("the writer to get going", || {
        written.load(std::sync::atomic::Ordering::Relaxed) >= 20
    })
    .await;
    rig.game_write("c.js", "// c from the game");
    eventually("the game's edit to be pulled meanwhile", || {
        read(&dir, "c.js").as_deref() == Some("// c from the game")
    })
    .await;
    eventually("b.js to be reported as still changing", || {
        rounds
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.still_changing.iter().any(|(f, _)| f == "b.js"))
    })
    .await;
    let said = rounds
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| r.lines("synced"))
        .filter(|l| l.starts_with("WAITING b.js"))
        .collect::<Vec<_>>();
    assert_eq!(said.len(), 1, "said once while it lasts: {said:?}");
    assert!(said[0].contains("never half-written"), "{said:?}");
    writing.store(false, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    let last = read(&dir, "b.js").unwrap();
    eventually("b.js to be pushed once it holds still", || {
        rig.game_file("b.js").as_deref() == Some(last.as_str())
    })
    .await;
    for content in pushed_contents(&rig.conn, "b.js") {
        assert!(
            content.starts_with("// ") && content.ends_with('\n'),
            "only whole versions are pushed: {content:?}"
        );
    }
    stop.cancel();
    within("watch to stop", watching).await.unwrap().unwrap();
}
