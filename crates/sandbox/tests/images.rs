//! Image directories as a sandbox's read-only root (namespace backend): a sandbox asking for an image sees
//! that root file system instead of the host's /usr, says which languages it really has, and the pool keeps
//! images apart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::json;
use support::{assert_sees_image, error_of, start, tiny_image};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_gets_the_image_it_asks_for_and_no_more() {
    let image = tiny_image();
    let flag = format!("tiny={}", image.display());
    let h = start(&["--sandbox-image", &flag]).await;
    let listed = h.ok("list_sandboxes", json!({})).await;
    assert_eq!(listed["images"], json!(["host", "tiny"]));

    let id = assert_sees_image(&h, "tiny", "/usr/bin").await;
    let id = id.as_str();
    let py = error_of(
        &h.call(
            "execute_code",
            json!({"sandbox_id": id, "language": "python", "code": "print(1)"}),
        )
        .await,
    );
    assert!(
        py["message"].as_str().unwrap().contains("python"),
        "a language the image lacks is refused by name: {py}"
    );

    let host = h.ok("create_sandbox", json!({})).await;
    assert!(
        host["languages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "python"),
        "{host}"
    );
    let hid = host["sandbox_id"].as_str().unwrap();
    let marker = h
        .sh(
            hid,
            "test -e /usr/share/marker && echo leaked || echo absent",
        )
        .await;
    assert_eq!(marker["stdout"], "absent\n");
    let listed = h.ok("list_sandboxes", json!({})).await;
    let images: Vec<&str> = listed["sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["image"].as_str().unwrap())
        .collect();
    assert_eq!(images, ["tiny", "host"]);

    let bad = error_of(&h.call("create_sandbox", json!({"image": "nope"})).await);
    let msg = bad["message"].as_str().unwrap();
    assert!(
        msg.contains("image") && msg.contains("nope") && msg.contains("host, tiny"),
        "{bad}"
    );
    assert_eq!(h.manager.len(), 2, "a refused create changes nothing");
    drop(h);
    std::fs::remove_dir_all(&image).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_image_is_the_pools_and_an_unknown_default_is_refused() {
    let image = tiny_image();
    let flag = format!("tiny={}", image.display());
    let h = start(&[
        "--sandbox-image",
        &flag,
        "--sandbox-default-image",
        "tiny",
        "--sandbox-pool-min-size",
        "1",
    ])
    .await;
    support::eventually("a warm sandbox of the default image", || {
        h.manager.pool.idle() == 1
    })
    .await;
    let created = h.ok("create_sandbox", json!({})).await;
    assert_eq!(created["from_pool"], true);
    assert_eq!(created["languages"], json!(["sh"]));
    let env = bridge_core::BridgeEnv::new();
    let err = bridge_sandbox::start(support::args(&["--sandbox-default-image", "missing"]), &env)
        .await
        .err()
        .expect("an unknown default image")
        .to_string();
    assert!(err.contains("missing") && err.contains("host"), "{err}");
    drop(h);
    std::fs::remove_dir_all(&image).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_whose_paths_lead_out_of_it_is_refused_at_start_and_at_create() {
    let evil = std::env::temp_dir().join(format!("evil-image-{}", std::process::id()));
    std::fs::create_dir_all(evil.join("etc/ssl")).unwrap();
    std::os::unix::fs::symlink("/", evil.join("usr")).unwrap();
    let flag = format!("evil={}", evil.display());
    let env = bridge_core::BridgeEnv::new();
    let err = bridge_sandbox::start(support::args(&["--sandbox-image", &flag]), &env)
        .await
        .err()
        .expect("usr -> / is refused")
        .to_string();
    assert!(
        err.contains("evil") && err.contains("leads out of the image"),
        "{err}"
    );

    // An image that turns bad after the start: the next create of it fails and says why.
    let image = tiny_image();
    let flag = format!("tiny={}", image.display());
    let h = start(&["--sandbox-image", &flag]).await;
    std::fs::rename(image.join("usr"), image.join("usr.real")).unwrap();
    std::os::unix::fs::symlink("/", image.join("usr")).unwrap();
    let bad = error_of(&h.call("create_sandbox", json!({"image": "tiny"})).await);
    assert!(
        bad["message"]
            .as_str()
            .unwrap()
            .contains("leads out of the image"),
        "{bad}"
    );
    assert!(h.manager.is_empty());
    drop(h);
    std::fs::remove_dir_all(&image).unwrap();
    std::fs::remove_dir_all(&evil).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_without_merged_usr_works_too() {
    let image = support::split_image();
    let flag = format!("split={}", image.display());
    let h = start(&["--sandbox-image", &flag]).await;
    assert_sees_image(&h, "split", "/bin").await;
    drop(h);
    std::fs::remove_dir_all(&image).unwrap();
}
