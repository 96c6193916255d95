//! The headless host's own rules, in process with short limits: capacity, lease renewal on a long job (it is
//! never quarantined or re-run while it runs), and garbage collection of finished jobs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::dap::DapConfig;
use bridge_debug::envelope::ScriptError;
use bridge_debug::fsbridge::client::{FsClient, RunCtx};
use bridge_debug::fsbridge::host::{HostOptions, serve};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use support::*;
use tokio_util::sync::CancellationToken;

struct InProcessHost {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    client: std::sync::Arc<FsClient>,
}

impl InProcessHost {
    async fn start(ws: &Path, opts: HostOptions) -> Self {
        let stop = CancellationToken::new();
        let cfg = DapConfig {
            workspace: ws.to_path_buf(),
            python: Some(python()),
            lldb_dap: None,
            js_debug: None,
            policy: Default::default(),
        };
        let (ws2, stop2) = (ws.to_path_buf(), stop.clone());
        let task = tokio::spawn(async move {
            serve(&ws2, opts, cfg, stop2).await.unwrap();
        });
        let root = ws.join(".vsc-bridge");
        while !root.join("host.json").exists() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Self {
            stop,
            task,
            client: std::sync::Arc::new(FsClient::new(root)),
        }
    }

    async fn run(&self, script: &str, params: Value, ms: u64) -> Result<Value, ScriptError> {
        let ctx = RunCtx {
            cancel: CancellationToken::new(),
            tool: None,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
        self.client.run(script, params, deadline, ctx).await
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task.await.unwrap();
    }
}

fn claimed_dirs(ws: &Path) -> Vec<PathBuf> {
    support::host::job_dirs(ws)
        .into_iter()
        .filter(|d| d.join("claimed.json").exists())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_refuses_and_a_long_job_renews_its_lease_instead_of_being_rerun() {
    let ws = workspace("host-cap");
    let opts = HostOptions {
        capacity: 1,
        lease_renew: Duration::from_millis(100),
        stale_after: Duration::from_millis(400),
        ..HostOptions::default()
    };
    let host = std::sync::Arc::new(InProcessHost::start(&ws, opts).await);
    mcp_testkit::within(
        "debug.start",
        host.run("debug.start", json!({"launch": "slow"}), 30_000),
    )
    .await
    .unwrap();
    let long = {
        let host = std::sync::Arc::clone(&host);
        tokio::spawn(async move {
            // Long enough to be running still after the refused call and the wait below on a loaded machine.
            host.run("debug.wait-for-hit", json!({"timeoutMs": 6000}), 15_000)
                .await
        })
    };
    mcp_testkit::within("the wait's job to be claimed", async {
        while claimed_dirs(&ws).is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let claimed = claimed_dirs(&ws)[0].join("claimed.json");
    let first = std::fs::metadata(&claimed).unwrap().modified().unwrap();
    let refused = mcp_testkit::within(
        "the refused status",
        host.run("debug.status", json!({}), 5_000),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code, "E_CAPACITY");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let later = std::fs::metadata(&claimed).unwrap().modified().unwrap();
    assert!(later > first, "the running job touched claimed.json");
    assert!(
        !claimed.with_file_name("dlq").exists(),
        "a live job past stale_after is not quarantined"
    );
    let answer = mcp_testkit::within("the wait's answer", long)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        answer.code, "E_TIMEOUT",
        "the wait's own answer, once: {answer:?}"
    );
    assert!(
        host.run("debug.status", json!({}), 5_000).await.is_ok(),
        "capacity is free again"
    );
    mcp_testkit::within("debug.stop", host.run("debug.stop", json!({}), 10_000))
        .await
        .unwrap();
    mcp_testkit::within(
        "the host to stop",
        std::sync::Arc::into_inner(host).unwrap().stop(),
    )
    .await;
    assert!(
        !ws.join(".vsc-bridge/host.lock").exists(),
        "the lock goes with the host"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_removes_finished_jobs_but_keeps_kept_and_quarantined_ones() {
    let ws = workspace("host-gc");
    let execute = ws.join(".vsc-bridge/execute");
    std::fs::create_dir_all(&execute).unwrap();
    let old = SystemTime::now() - Duration::from_secs(3600);
    let job = |name: &str, files: &[&str]| {
        let dir = execute.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("command.json"), "{}").unwrap();
        for f in files {
            std::fs::write(dir.join(f), "{}").unwrap();
        }
        std::fs::File::options()
            .write(true)
            .open(dir.join("done"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        dir
    };
    let finished = job(
        "20250101T000000000Z-0001-aaaa",
        &["claimed.json", "response.json", "done"],
    );
    let kept = job(
        "20250101T000000000Z-0002-bbbb",
        &["claimed.json", "response.json", "done", "keep"],
    );
    let quarantined = job(
        "20250101T000000000Z-0003-cccc",
        &["claimed.json", "error.json", "dlq", "done"],
    );
    let opts = HostOptions {
        gc_interval: Duration::from_millis(50),
        gc_age: Duration::from_secs(600),
        ..HostOptions::default()
    };
    let host = InProcessHost::start(&ws, opts).await;
    let t = std::time::Instant::now();
    while finished.exists() {
        assert!(
            t.elapsed() < support::HANG_GUARD,
            "GC did not remove the finished job"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(kept.exists(), "keep preserves");
    assert!(
        quarantined.exists(),
        "a quarantined job is kept 7 times as long"
    );
    host.stop().await;
}

/// Breaks a running job's lease (its `claimed.json` becomes a link to a directory, which no one can open for
/// writing) so
/// the host fails it with its own `E_INTERNAL`.
async fn fail_one_job_internally(host: &InProcessHost, ws: &Path) {
    let before: Vec<PathBuf> = support::host::job_dirs(ws);
    let job = host.run("debug.wait-for-hit", json!({"timeoutMs": 5000}), 10_000);
    let breaker = async {
        let claimed = loop {
            if let Some(d) = claimed_dirs(ws).into_iter().find(|d| !before.contains(d)) {
                break d.join("claimed.json");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        // Swapped in by one rename: a removed claim would be claimed again by the host's scan.
        let job_dir = claimed.parent().unwrap().to_path_buf();
        let link = ws.join("claimed-swap");
        std::os::unix::fs::symlink(&job_dir, &link).unwrap();
        std::fs::rename(&link, &claimed).unwrap();
    };
    let (answer, ()) = tokio::join!(job, breaker);
    let err = answer.unwrap_err();
    assert_eq!(err.code, "E_INTERNAL", "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_failures_open_the_circuit_which_refuses_then_closes_after_the_window() {
    let ws = workspace("host-circuit");
    // Both failures and the two refused calls after them must fall in one window, which counts from the first
    // failure: each is a round of job files, seconds apart on a loaded machine.
    let window = Duration::from_secs(6);
    let opts = HostOptions {
        lease_renew: Duration::from_millis(50),
        circuit_threshold: 2,
        circuit_window: window,
        ..HostOptions::default()
    };
    let host = InProcessHost::start(&ws, opts).await;
    host.run("debug.start", json!({"launch": "slow"}), 30_000)
        .await
        .unwrap();
    // A script's own error is an answer, not a host failure: it never counts.
    for _ in 0..2 {
        let timeout = host
            .run("debug.wait-for-hit", json!({"timeoutMs": 100}), 5_000)
            .await
            .unwrap_err();
        assert_eq!(timeout.code, "E_TIMEOUT");
    }
    assert!(host.run("debug.status", json!({}), 5_000).await.is_ok());
    fail_one_job_internally(&host, &ws).await;
    assert!(
        host.run("debug.status", json!({}), 5_000).await.is_ok(),
        "one failure is under the threshold"
    );
    fail_one_job_internally(&host, &ws).await;
    let opened = std::time::Instant::now();
    let refused = host
        .run("debug.status", json!({}), 5_000)
        .await
        .unwrap_err();
    assert_eq!(refused.code, "E_CIRCUIT_OPEN", "{refused:?}");
    let retry = refused.details["retryAfter"].as_u64().unwrap();
    assert!(
        retry > 0 && retry <= window.as_millis() as u64,
        "retryAfter {retry} ms is within the window"
    );
    let again = host
        .run("debug.status", json!({}), 5_000)
        .await
        .unwrap_err();
    assert_eq!(again.code, "E_CIRCUIT_OPEN", "still open: {again:?}");
    tokio::time::sleep(window.saturating_sub(opened.elapsed()) + Duration::from_millis(100)).await;
    assert!(
        host.run("debug.status", json!({}), 5_000).await.is_ok(),
        "the circuit closes once the failures leave the window"
    );
    host.run("debug.stop", json!({}), 10_000).await.unwrap();
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_jobs_are_each_claimed_once_and_never_again_after_done() {
    let ws = workspace("host-1000");
    let host = std::sync::Arc::new(InProcessHost::start(&ws, HostOptions::default()).await);
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let host = std::sync::Arc::clone(&host);
        tasks.push(tokio::spawn(async move {
            for _ in 0..250 {
                host.run("debug.status", json!({}), 10_000).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // A finished job claimed again while its client removes it gets a second claim, answer and `done`
    // written into the half-removed directory, which then stays behind.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let left = support::host::job_dirs(&ws);
    assert!(left.is_empty(), "re-claimed jobs left behind: {left:?}");
    std::sync::Arc::into_inner(host).unwrap().stop().await;
}
