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
    std::fs::remove_dir_all(&dir).unwrap();
}
