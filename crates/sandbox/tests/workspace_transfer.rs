//! export_workspace / import_workspace: a tree with binary files (one above write_file's 10 MiB) goes out as a
//! paged tar stream and back into a new sandbox byte for byte, with modes and mtimes; an archive with `../x`
//! or a link to /etc is refused and changes nothing; chunks out of order are refused by name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use support::{Harness, error_of, start};

/// Type, mode, mtime, size, path and link target of every entry, and each file's sha256.
const SNAPSHOT: &str = "cd /workspace && find . -mindepth 1 -printf '%y %m %T@ %s %p %l\\n' | sort && \
                        find . -type f -exec sha256sum {} + | sort";

async fn export_all(h: &Harness, id: &str) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut pages = 0;
    let mut args = json!({"sandbox_id": id});
    loop {
        let page = h.ok("export_workspace", args.clone()).await;
        assert_eq!(page["offset"].as_u64().unwrap(), out.len() as u64);
        out.extend(STANDARD.decode(page["data"].as_str().unwrap()).unwrap());
        pages += 1;
        if page["done"].as_bool().unwrap() {
            assert_eq!(out.len() as u64, page["total_bytes"].as_u64().unwrap());
            return (out, pages);
        }
        args = json!({"sandbox_id": id, "export_id": page["export_id"], "offset": page["next_offset"]});
    }
}

/// Sends `archive` in 1 MiB chunks; the last with commit. Returns the last call's result.
async fn import_all(h: &Harness, id: &str, archive: &[u8]) -> rmcp::model::CallToolResult {
    let chunks: Vec<&[u8]> = archive.chunks(1 << 20).collect();
    let mut upload: Option<Value> = None;
    let mut offset = 0u64;
    for (i, c) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len();
        let mut args =
            json!({"sandbox_id": id, "offset": offset, "data": STANDARD.encode(c), "commit": last});
        if let Some(u) = &upload {
            args["upload_id"] = u.clone();
        }
        let r = h.call("import_workspace", args).await;
        if last {
            return r;
        }
        let v = support::ok_of(&r);
        upload = Some(v["upload_id"].clone());
        offset = v["received_bytes"].as_u64().unwrap();
    }
    unreachable!("an archive has at least one chunk")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_destroy_create_import_round_trips_a_tree_byte_for_byte() {
    let h = start(&[]).await;
    let id = h.create().await;
    let made = h
        .sh(
            &id,
            "cd /workspace && mkdir -p a/b private && head -c 12000000 /dev/urandom > big.bin && \
             head -c 3000000 /dev/urandom > a/three.bin && head -c 5 /dev/zero > a/b/zeros && \
             printf '#!/bin/sh\\necho hi\\n' > a/run.sh && echo secret > private/key && \
             ln -s ../big.bin a/link && chmod 751 a/run.sh && chmod 600 private/key && chmod 700 private && \
             chmod 640 a/three.bin && find . -mindepth 1 -exec touch -h -d @1600000000 {} + && \
             touch -h -d @1500000123 a/three.bin a/link && touch -d @1400000000 a/b private && echo ok",
        )
        .await;
    assert_eq!(made["stdout"], "ok\n", "{made}");
    let before = h.sh(&id, SNAPSHOT).await["stdout"]
        .as_str()
        .unwrap()
        .to_string();

    let started = std::time::Instant::now();
    let (archive, pages) = export_all(&h, &id).await;
    let exported = started.elapsed();
    assert!(archive.len() > 15_000_000, "{}", archive.len());
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;

    let id = h.create().await;
    let started = std::time::Instant::now();
    let r = support::ok_of(&import_all(&h, &id, &archive).await);
    let imported = started.elapsed();
    assert_eq!(r["committed"], true, "{r}");
    let after = h.sh(&id, SNAPSHOT).await["stdout"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(after, before, "the same tree, modes, mtimes and contents");
    println!(
        "{} bytes of tar: export {pages} pages in {exported:?}, import {} chunks in {imported:?}",
        archive.len(),
        archive.len().div_ceil(1 << 20)
    );
}

fn host_tar(dir: &std::path::Path, args: &[&str]) -> Vec<u8> {
    let out = std::process::Command::new("tar")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_leaving_the_workspace_are_refused_and_change_nothing() {
    let h = start(&[]).await;
    let id = h.create().await;
    let dir = std::env::temp_dir().join(format!("evil-tar-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("in")).unwrap();
    std::fs::write(dir.join("x"), b"outside").unwrap();
    std::fs::write(dir.join("in/ok"), b"fine").unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("in/etc")).unwrap();
    std::os::unix::fs::symlink("../../x", dir.join("in/up")).unwrap();

    let dotdot = host_tar(&dir.join("in"), &["-c", "-P", "-f", "-", "ok", "../x"]);
    let e = error_of(&import_all(&h, &id, &dotdot).await);
    assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{e}");
    assert!(
        e.to_string().contains("../x") && e.to_string().contains("`..`"),
        "{e}"
    );

    let to_etc = host_tar(&dir.join("in"), &["-c", "-f", "-", "ok", "etc"]);
    let e = error_of(&import_all(&h, &id, &to_etc).await);
    assert!(
        e.to_string().contains("/etc") && e.to_string().contains("absolute"),
        "{e}"
    );

    let up = host_tar(&dir.join("in"), &["-c", "-f", "-", "ok", "up"]);
    let e = error_of(&import_all(&h, &id, &up).await);
    assert!(e.to_string().contains("outside"), "{e}");

    let listing = h.sh(&id, "ls -A /workspace | wc -l").await;
    assert_eq!(listing["stdout"], "0\n", "nothing was unpacked");

    // Chunks: nothing is visible before commit, and one out of order is refused naming `offset`.
    let good = host_tar(&dir.join("in"), &["-c", "-f", "-", "ok"]);
    let first = h
        .ok(
            "import_workspace",
            json!({"sandbox_id": id, "data": STANDARD.encode(&good[..1024])}),
        )
        .await;
    assert_eq!(h.sh(&id, "ls -A /workspace | wc -l").await["stdout"], "0\n");
    let skipped = error_of(
        &h.call(
            "import_workspace",
            json!({"sandbox_id": id, "upload_id": first["upload_id"], "offset": 2048,
                   "data": STANDARD.encode(&good[2048..])}),
        )
        .await,
    );
    assert_eq!(skipped["code"], "E_INVALID_ARGUMENT", "{skipped}");
    assert!(
        skipped.to_string().contains("offset") && skipped.to_string().contains("1024"),
        "{skipped}"
    );
    // The same chunk sent twice at once: one is taken, the other refused naming `offset`.
    let twice = json!({"sandbox_id": id, "upload_id": first["upload_id"], "offset": 1024,
                       "data": STANDARD.encode(&good[1024..2048])});
    let (a, b) = tokio::join!(
        h.call("import_workspace", twice.clone()),
        h.call("import_workspace", twice)
    );
    let taken = [&a, &b].iter().filter(|r| r.is_error != Some(true)).count();
    assert_eq!(taken, 1, "{a:?} {b:?}");
    let other = if a.is_error == Some(true) { &a } else { &b };
    assert!(error_of(other).to_string().contains("offset"), "{other:?}");
    let done = h
        .ok(
            "import_workspace",
            json!({"sandbox_id": id, "upload_id": first["upload_id"], "offset": 2048,
                   "data": STANDARD.encode(&good[2048..]), "commit": true}),
        )
        .await;
    assert_eq!(done["committed"], true);
    assert_eq!(h.sh(&id, "cat /workspace/ok").await["stdout"], "fine");
    let bad = error_of(
        &h.call(
            "import_workspace",
            json!({"sandbox_id": id, "data": "not base64!"}),
        )
        .await,
    );
    assert!(bad.to_string().contains("data"), "{bad}");
    // Base64 of a chunk's bytes and two more passes the text's bound; its bytes are counted too.
    let over = error_of(
        &h.call(
            "import_workspace",
            json!({"sandbox_id": id, "data": STANDARD.encode(vec![0u8; (1 << 20) + 2])}),
        )
        .await,
    );
    assert_eq!(over["code"], "E_TOO_LARGE", "{over}");
    assert_eq!(over["details"]["field"], "data", "{over}");
    assert_eq!(over["details"]["limit"], 1 << 20, "{over}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A state dir of this test's own, so the transfer files counted are only its own.
fn state_dir(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("transfers-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `.tar` files in `<state dir>/transfers/`.
fn tars(state: &std::path::Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(state.join("transfers")) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tar"))
        .collect()
}

/// An export cancelled while its archive is being written leaves no file behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_cut_short_leaves_no_archive() {
    use mcp_testkit::start_call;
    let state = state_dir("cut");
    let h = start(&["--sandbox-state-dir", state.to_str().unwrap()]).await;
    let id = h.create().await;
    // Sparse: 300 MiB to read through the agent, taking no memory, so the export runs long enough to be cut.
    let made = h
        .sh(
            &id,
            "truncate -s 150M /workspace/a && truncate -s 150M /workspace/b && echo ok",
        )
        .await;
    assert_eq!(made["stdout"], "ok\n", "{made}");
    let handle = start_call(&h.client, "export_workspace", json!({"sandbox_id": id})).await;
    support::eventually("the export to start its archive", || {
        !tars(&state).is_empty()
    })
    .await;
    handle.cancel(Some("stop".into())).await.unwrap();
    support::eventually("the cut export's archive to be removed", || {
        tars(&state).is_empty()
    })
    .await;
    // The sandbox still exports.
    assert!(h.sh(&id, "rm /workspace/a /workspace/b").await["exit_code"] == 0);
    let (archive, _) = export_all(&h, &id).await;
    assert!(!archive.is_empty());
    assert!(tars(&state).is_empty(), "{:?}", tars(&state));
    drop(h);
    let _ = std::fs::remove_dir_all(&state);
}

/// An export whose pages were not all read goes with its sandbox, with no other export or import to sweep it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destroyed_sandbox_s_unread_export_is_removed() {
    let state = state_dir("destroy");
    let h = start(&["--sandbox-state-dir", state.to_str().unwrap()]).await;
    let id = h.create().await;
    h.sh(&id, "head -c 300000 /dev/urandom > /workspace/r")
        .await;
    let page = h.ok("export_workspace", json!({"sandbox_id": id})).await;
    assert_eq!(page["done"], false, "more than one page");
    assert_eq!(tars(&state).len(), 1);
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    support::eventually("the destroyed sandbox's export to be removed", || {
        tars(&state).is_empty()
    })
    .await;
    drop(h);
    let _ = std::fs::remove_dir_all(&state);
}

/// At start the bridge removes a crashed run's transfer files, and nothing else: not another live bridge's,
/// not a link (nor what it points at), not a folder, not a file of another name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_runs_transfer_files_are_removed_at_start_and_nothing_else() {
    use std::os::unix::fs::{DirBuilderExt, symlink};
    let state = state_dir("leftovers");
    let dir = state.join("transfers");
    std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let name = |pid: u32| format!("{pid}-{}.tar", uuid::Uuid::new_v4());
    let crashed = dir.join(name(dead));
    std::fs::write(&crashed, b"partial").unwrap();
    // A live bridge's (this process is alive; so is pid 1).
    let live = dir.join(name(1));
    std::fs::write(&live, b"in use").unwrap();
    let target = state.join("precious");
    std::fs::write(&target, b"keep").unwrap();
    let link = dir.join(name(dead));
    symlink(&target, &link).unwrap();
    let folder = dir.join(name(dead));
    std::fs::create_dir(&folder).unwrap();
    let other = dir.join(format!("{dead}-notes.txt"));
    std::fs::write(&other, b"x").unwrap();

    let h = start(&["--sandbox-state-dir", state.to_str().unwrap()]).await;
    assert!(!crashed.exists(), "the crashed run's file is removed");
    assert!(live.exists());
    assert!(
        std::fs::symlink_metadata(&link).is_ok(),
        "the link is left alone"
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    assert!(folder.is_dir());
    assert!(other.exists());
    drop(h);

    // A transfers folder that is a link is not cleaned through.
    let state2 = state_dir("leftovers-link");
    let elsewhere = state_dir("leftovers-elsewhere");
    let planted = elsewhere.join(name(dead));
    std::fs::write(&planted, b"not ours to remove").unwrap();
    symlink(&elsewhere, state2.join("transfers")).unwrap();
    let h = start(&["--sandbox-state-dir", state2.to_str().unwrap()]).await;
    assert!(planted.exists(), "nothing removed through a linked folder");
    let id = h.create().await;
    let e = error_of(&h.call("export_workspace", json!({"sandbox_id": id})).await);
    assert!(e.to_string().contains("symlink"), "{e}");
    drop(h);
    for d in [state, state2, elsewhere] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A bridge that is pid 1 of its container has the same pid on every restart: at its start nothing of its run
/// exists yet, so the transfer files and the `process-`/`vm-` folders named with its own pid in a state dir
/// that outlived it are a crashed run's, and are removed (a link of that name still is not). A second bridge
/// started in the same process is not a restart: it leaves the first one's files and sandboxes alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_run_with_our_own_pid_is_cleaned_at_start_but_not_by_a_second_bridge() {
    use std::os::unix::fs::{DirBuilderExt, symlink};
    let state = state_dir("own-pid");
    let dir = state.join("transfers");
    std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    let me = std::process::id();
    let name = || format!("{me}-{}", uuid::Uuid::new_v4());
    let tar = dir.join(format!("{}.tar", name()));
    std::fs::write(&tar, b"partial").unwrap();
    let process_dir = state.join(format!("process-{}", name()));
    std::fs::create_dir_all(process_dir.join("workspace")).unwrap();
    std::fs::write(process_dir.join("workspace/left"), b"x").unwrap();
    let vm_dir = state.join(format!("vm-{}", name()));
    std::fs::create_dir(&vm_dir).unwrap();
    let target = state.join("precious");
    std::fs::write(&target, b"keep").unwrap();
    let link = dir.join(format!("{}.tar", name()));
    symlink(&target, &link).unwrap();

    let h = start(&["--sandbox-state-dir", state.to_str().unwrap()]).await;
    assert!(!tar.exists(), "{} is a crashed run's", tar.display());
    assert!(
        !process_dir.exists(),
        "{} is a crashed run's",
        process_dir.display()
    );
    assert!(!vm_dir.exists(), "{} is a crashed run's", vm_dir.display());
    assert!(
        std::fs::symlink_metadata(&link).is_ok(),
        "the link is left alone"
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    std::fs::remove_file(&link).unwrap();

    // The first bridge's export, unread, and its sandbox outlive a second bridge's start on the same state dir.
    let id = h.create().await;
    h.sh(&id, "head -c 300000 /dev/urandom > /workspace/r")
        .await;
    let page = h.ok("export_workspace", json!({"sandbox_id": id})).await;
    assert_eq!(page["done"], false, "more than one page");
    let before = tars(&state);
    assert_eq!(before.len(), 1, "{before:?}");
    let second = start(&["--sandbox-state-dir", state.to_str().unwrap()]).await;
    assert_eq!(
        tars(&state),
        before,
        "the first bridge's export was removed"
    );
    assert_eq!(h.sh(&id, "echo alive").await["stdout"], "alive\n");
    drop(second);
    drop(h);
    let _ = std::fs::remove_dir_all(&state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_are_not_utf8_never_fail_an_export_nor_take_another_file_s_content() {
    use std::collections::BTreeMap;
    let h = start(&[]).await;
    let id = h.create().await;
    // `bad\xff` and `a\xff` are not UTF-8; `a\u{FFFD}` is what `a\xff` becomes decoded lossily; a folder
    // `d\xfe` holds a file; a link named in UTF-8 points at `bad\xff`.
    let made = h
        .sh(
            &id,
            r#"cd /workspace && printf bad > "$(printf 'bad\377')" && printf wrong > "$(printf 'a\377')" && \
               printf right > "a$(printf '\357\277\275')" && mkdir "$(printf 'd\376')" && \
               printf inner > "$(printf 'd\376')/inner" && ln -s "$(printf 'bad\377')" link && echo ok"#,
        )
        .await;
    assert_eq!(made["stdout"], "ok\n", "{made}");
    let in_sandbox: BTreeMap<Vec<u8>, &str> = [
        (b"bad\xff".to_vec(), "bad"),
        (b"a\xff".to_vec(), "wrong"),
        ("a\u{FFFD}".as_bytes().to_vec(), "right"),
        (b"d\xfe/inner".to_vec(), "inner"),
    ]
    .into();

    let first = h.ok("export_workspace", json!({"sandbox_id": id})).await;
    let mut archive = Vec::new();
    let mut page = first.clone();
    loop {
        archive.extend(STANDARD.decode(page["data"].as_str().unwrap()).unwrap());
        if page["done"].as_bool().unwrap() {
            break;
        }
        page = h
            .ok(
                "export_workspace",
                json!({"sandbox_id": id, "export_id": page["export_id"], "offset": page["next_offset"]}),
            )
            .await;
    }
    let mut files = BTreeMap::new();
    let mut links = BTreeMap::new();
    let mut dirs = Vec::new();
    let mut ar = tar::Archive::new(&archive[..]);
    for entry in ar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path_bytes().into_owned();
        match entry.header().entry_type() {
            tar::EntryType::Regular => {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
                files.insert(name, text);
            }
            tar::EntryType::Symlink => {
                links.insert(name, entry.link_name_bytes().unwrap().into_owned());
            }
            tar::EntryType::Directory => dirs.push(name),
            other => panic!("unexpected entry type {other:?}"),
        }
    }
    let shown = |name: &[u8]| String::from_utf8_lossy(name).into_owned();
    // Every file archived has its own content: none stands in for another whose name decodes the same.
    for (name, text) in &files {
        assert_eq!(
            in_sandbox.get(name).copied(),
            Some(text.as_str()),
            "{} was archived with another file's content",
            shown(name)
        );
    }
    assert_eq!(
        files.get("a\u{FFFD}".as_bytes()).map(String::as_str),
        Some("right")
    );
    // Every file left out is named, with why.
    let skipped: Vec<String> = first["skipped_entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no skipped_entries: {first}"))
        .iter()
        .map(|s| {
            assert!(s["why"].as_str().unwrap().contains("UTF-8"), "{s}");
            s["path"].as_str().unwrap().to_string()
        })
        .collect();
    for (name, escaped) in [
        (&b"bad\xff"[..], "bad\\xff"),
        (b"a\xff", "a\\xff"),
        (b"d\xfe/inner", "d\\xfe/inner"),
    ] {
        assert!(
            files.contains_key(name) || skipped.iter().any(|s| s == escaped),
            "{escaped} is neither archived nor named as skipped: {skipped:?}"
        );
    }
    assert_eq!(
        first["skipped"].as_u64().unwrap(),
        skipped.len() as u64,
        "{first}"
    );
    // Folders and links carry their names and targets byte for byte.
    assert!(dirs.iter().any(|d| d == b"d\xfe/"), "{dirs:?}");
    assert_eq!(
        links.get(&b"link"[..]).map(Vec::as_slice),
        Some(&b"bad\xff"[..])
    );
}
