//! Templates (namespace backend): a template built with pip from PyPI is a sandbox's read-only root when
//! create_sandbox names it, its packages import in every way code runs, list_templates shows its size, the
//! pool keeps it warm, and a failed build leaves nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_sandbox::template::{self, BuildRequest, TemplateError};
use serde_json::json;
use std::path::PathBuf;
use support::{error_of, start};

/// Pure Python, no dependencies, and not among the host's packages (Debian ships `six`), so a sandbox without
/// the template cannot import it.
const PACKAGE: &str = "inflection==0.5.1";

fn state_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("templates-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn request(name: &str, packages: &[&str]) -> BuildRequest {
    let mut req = BuildRequest::new(name, packages);
    // The host's CA bundle (a TLS-inspecting proxy's CA is there, where CI has one), as network.rs's pip.
    req.env.push((
        "PIP_CERT".into(),
        "/etc/ssl/certs/ca-certificates.crt".into(),
    ));
    req
}

async fn build(
    dir: &std::path::Path,
    req: BuildRequest,
) -> Result<template::Template, TemplateError> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || template::build(&dir, &req))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_imports_its_packages_read_only_and_is_listed_with_its_size() {
    let dir = state_dir("use");
    let built = build(&dir, request("words", &[PACKAGE])).await.unwrap();
    assert!(built.manifest.size_bytes > 1000, "{:?}", built.manifest);
    let state = dir.display().to_string();
    let h = start(&["--sandbox-state-dir", &state]).await;

    let listed = h.ok("list_templates", json!({})).await;
    let templates = listed["templates"].as_array().unwrap();
    assert_eq!(templates.len(), 1, "{listed}");
    assert_eq!(templates[0]["name"], "words");
    assert_eq!(templates[0]["packages"], json!([PACKAGE]));
    assert_eq!(
        templates[0]["size_bytes"],
        json!(built.manifest.size_bytes),
        "{listed}"
    );
    let images = h.ok("list_sandboxes", json!({})).await;
    assert_eq!(
        images["images"],
        json!(["host"]),
        "templates are not images"
    );

    let created = h.ok("create_sandbox", json!({"template": "words"})).await;
    let id = created["sandbox_id"].as_str().unwrap();
    let out = h
        .sh(
            id,
            "python3 -c 'import inflection; print(inflection.__version__, inflection.camelize(\"a_b\"))'",
        )
        .await;
    assert_eq!(out["stdout"], "0.5.1 AB\n", "{out}");
    let site = &built.manifest.site_packages;
    let write = h
        .sh(
            id,
            &format!(
                "python3 -c 'import errno\ntry:\n  open(\"{site}/x.py\", \"w\")\nexcept OSError as e: print(errno.errorcode[e.errno])'"
            ),
        )
        .await;
    assert_eq!(
        write["stdout"], "EROFS\n",
        "the template is read-only: {write}"
    );
    let cell = h
        .ok(
            "run_code",
            json!({"sandbox_id": id, "code": "import inflection\ninflection.titleize('x_y')"}),
        )
        .await;
    assert_eq!(cell["status"], "ok", "{cell}");
    assert!(cell["value"].to_string().contains("X Y"), "{cell}");

    let plain = h.create().await;
    let without = h
        .sh(&plain, "python3 -c 'import inflection' 2>&1 | tail -1")
        .await;
    assert!(
        without["stdout"]
            .as_str()
            .unwrap()
            .contains("No module named 'inflection'"),
        "a sandbox without the template lacks its packages: {without}"
    );
    let described = h.ok("list_sandboxes", json!({"sandbox_id": id})).await;
    assert_eq!(described["sandboxes"][0]["image"], "template:words");

    // The pool keeps a template asked for once warm: the next one comes from it, packages and all.
    mcp_testkit::within("a warm sandbox of the template", async {
        while h.manager.pool.idle() == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    let warm = h.ok("create_sandbox", json!({"template": "words"})).await;
    assert_eq!(warm["from_pool"], true, "{warm}");
    let out = h
        .sh(
            warm["sandbox_id"].as_str().unwrap(),
            "python3 -c 'import inflection; print(inflection.__version__)'",
        )
        .await;
    assert_eq!(out["stdout"], "0.5.1\n", "{out}");

    for (args, says) in [
        (json!({"template": "nope"}), "words"),
        (json!({"template": "words", "image": "host"}), "not both"),
    ] {
        let bad = error_of(&h.call("create_sandbox", args.clone()).await);
        let msg = bad["message"].as_str().unwrap();
        assert!(
            msg.contains("template") && msg.contains(says),
            "{args}: {bad}"
        );
    }
    let bad = error_of(
        &h.call("create_sandbox", json!({"image": "template:words"}))
            .await,
    );
    assert!(
        bad["message"].as_str().unwrap().contains("image"),
        "a template is not an image name: {bad}"
    );
    drop(h);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_build_leaves_nothing_and_bad_requests_name_the_field() {
    let dir = state_dir("fail");
    let e = build(
        &dir,
        request("broken", &["no-such-package-mcp-bridges-test==0.0.1"]),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, TemplateError::Pip { .. }), "{e}");
    assert!(e.to_string().contains("no-such-package"), "{e}");
    let left: Vec<_> = std::fs::read_dir(dir.join(template::DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "a failed build leaves nothing: {left:?}");
    assert!(template::load_all(&dir).is_empty());

    for (req, field) in [
        (request("Bad Name", &[PACKAGE]), "name"),
        (request("ok", &[]), "pip"),
        (request("ok", &["--index-url=http://x"]), "pip"),
    ] {
        let e = build(&dir, req).await.unwrap_err();
        assert!(
            matches!(e, TemplateError::Invalid { field: f, .. } if f == field),
            "{e}"
        );
    }
    let state = dir.display().to_string();
    let h = start(&["--sandbox-state-dir", &state]).await;
    let listed = h.ok("list_templates", json!({})).await;
    assert_eq!(listed["templates"], json!([]), "{listed}");
    let bad = error_of(
        &h.call("create_sandbox", json!({"template": "broken"}))
            .await,
    );
    let msg = bad["message"].as_str().unwrap();
    assert!(msg.contains("template") && msg.contains("none"), "{bad}");
    drop(h);
    std::fs::remove_dir_all(&dir).unwrap();
}
