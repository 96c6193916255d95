//! The sandbox's PID 1 holds a descriptor of the host's cgroup directory, so `/proc/1/fd/N/../..` (and
//! `/proc/self/fd/N/..` in a child before its exec) is the host's `/`. Neither a path the caller names nor a
//! symlink a program plants may lead the agent, or a program's working directory, there. Run as root (as
//! CI is): the namespace backend then hands the sandbox a host cgroup directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::json;
use support::{Harness, error_of, start};

/// Enough `..` to climb from any cgroup directory to the host's `/` (extra ones stay at `/`).
const UP: &str = "../../../../../../../../../../../..";
/// The descriptor numbers a program tries: the agent's are a handful past 2.
const FDS: std::ops::RangeInclusive<u32> = 3..=16;

struct Canary {
    dir: std::path::PathBuf,
}

impl Canary {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("sandbox-host-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("secret"), "host-only-secret").unwrap();
        // World-writable, as /tmp is: what the sandbox's mapped uid could write into if it reached it.
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        Self { dir }
    }

    /// The canary directory as seen from the host's `/`, without the leading slash.
    fn rel(&self) -> String {
        self.dir
            .to_string_lossy()
            .trim_start_matches('/')
            .to_owned()
    }

    fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn sandbox() -> (Harness, String) {
    let h = start(&[]).await;
    let id = h.create().await;
    (h, id)
}

/// Reading the canary's secret, listing and writing below `base` (the host's `/` if it leads there) are all
/// refused.
async fn refused_through(h: &Harness, id: &str, base: &str, canary: &Canary) {
    let read = h
        .call(
            "read_file",
            json!({"sandbox_id": id, "path": format!("{base}/{}/secret", canary.rel())}),
        )
        .await;
    assert_eq!(read.is_error, Some(true), "{base}: {read:?}");
    assert!(!format!("{read:?}").contains("host-only-secret"), "{base}");
    let listed = h
        .call("list_directory", json!({"sandbox_id": id, "path": base}))
        .await;
    assert_eq!(listed.is_error, Some(true), "{base}: {listed:?}");
    let written = h
        .call(
            "write_file",
            json!({"sandbox_id": id, "path": format!("{base}/{}/w/x", canary.rel()), "content": "x"}),
        )
        .await;
    assert_eq!(written.is_error, Some(true), "{base}: {written:?}");
}

/// The caller naming `/proc/1/fd/N/...` outright: nothing read, listed or written on the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_through_pid_1_s_descriptors_reaches_nothing_on_the_host() {
    let canary = Canary::new("named");
    let (h, id) = sandbox().await;
    for fd in FDS {
        refused_through(&h, &id, &format!("/proc/1/fd/{fd}/{UP}"), &canary).await;
    }
    assert_eq!(canary.entries(), ["secret"]);
}

/// A program planting symlinks to PID 1's descriptors, for the caller's next read, write or listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_a_program_plants_to_pid_1_s_descriptors_reaches_nothing_on_the_host() {
    let canary = Canary::new("planted");
    let (h, id) = sandbox().await;
    let plant: String = FDS
        .map(|fd| format!("ln -s /proc/1/fd/{fd}/{UP} /workspace/l{fd}; "))
        .collect();
    h.sh(&id, &plant).await;
    for fd in FDS {
        refused_through(&h, &id, &format!("/workspace/l{fd}"), &canary).await;
    }
    assert_eq!(canary.entries(), ["secret"]);
}

/// A program making a symlink to `/proc/self/fd/N/..` the next program's working directory: the child holds
/// the agent's descriptors until its exec, so resolving the path there would start it in the host's `/`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_directory_through_a_descriptor_link_is_refused() {
    let canary = Canary::new("cwd");
    let (h, id) = sandbox().await;
    let plant: String = FDS
        .map(|fd| format!("ln -s /proc/self/fd/{fd}/{UP} /workspace/c{fd}; "))
        .collect();
    h.sh(&id, &plant).await;
    for fd in FDS {
        let ran = h
            .call(
                "run_command",
                json!({
                    "sandbox_id": id,
                    "command": format!("test -e {}/secret && echo ESCAPED; pwd -P", canary.rel()),
                    "cwd": format!("/workspace/c{fd}"),
                    "timeout_secs": 30,
                }),
            )
            .await;
        assert!(!format!("{ran:?}").contains("ESCAPED"), "fd {fd}: {ran:?}");
        let e = error_of(&ran);
        assert!(
            e["message"].as_str().unwrap().contains("working directory"),
            "fd {fd}: {e}"
        );
    }
    // An ordinary directory, and a symlink to one, still work.
    h.sh(
        &id,
        "mkdir -p /workspace/d && ln -s /workspace/d /workspace/dl",
    )
    .await;
    let ran = h
        .ok(
            "run_command",
            json!({"sandbox_id": id, "command": "pwd -P", "cwd": "/workspace/dl", "timeout_secs": 30}),
        )
        .await;
    assert_eq!(
        ran["stdout"].as_str().unwrap().trim(),
        "/workspace/d",
        "{ran}"
    );
}

/// A FIFO a program made would block the agent's read (and one of its threads) for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_is_refused_at_once_not_waited_on() {
    let (h, id) = sandbox().await;
    h.sh(&id, "mkfifo /workspace/pipe").await;
    let read = h
        .call(
            "read_file",
            json!({"sandbox_id": id, "path": "/workspace/pipe"}),
        )
        .await;
    let e = error_of(&read);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{e}"
    );
    let written = h
        .call(
            "write_file",
            json!({"sandbox_id": id, "path": "/workspace/pipe", "content": "x"}),
        )
        .await;
    let e = error_of(&written);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{e}"
    );
}
