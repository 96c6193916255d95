//! Every read of the file protocol is bounded before it happens: a `command.json` over 1 MiB is refused by the
//! host and a `data.json` over the client's cap (16 MiB by default) by the client, each with a coded error naming
//! the file and the limit, and neither process grows by the file's size (peak RSS, `VmHWM`, of the process under
//! test). nextest runs each test in its own process, so the client's `VmHWM` is this test's alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::fsbridge::client::{FsClient, RunCtx};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;
use support::host::HostProc;
use support::*;
use tokio_util::sync::CancellationToken;

/// Peak resident set of `pid`, in bytes, from `/proc/<pid>/status`.
fn vm_hwm(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// A file of `len` zero bytes that costs no disk (the bound is what keeps it from costing memory).
fn sparse(path: &Path, len: u64) {
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

const MIB: u64 = 1 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_json_over_1_mib_is_refused_by_the_host_without_reading_it() {
    let ws = workspace("bound-cmd");
    let host = HostProc::start(&ws);
    let pid = host.child.id().to_string();
    let before = vm_hwm(&pid);
    let id = "20260101T000000000Z-0001-aaaa";
    let dir = ws.join(".vsc-bridge/execute").join(id);
    std::fs::create_dir(&dir).unwrap();
    // Written beside, then renamed in: the host sees it whole.
    sparse(&ws.join("command.tmp"), 200 * MIB);
    std::fs::rename(ws.join("command.tmp"), dir.join("command.json")).unwrap();
    let t = std::time::Instant::now();
    while !dir.join("done").exists() {
        assert!(t.elapsed() < support::HANG_GUARD, "the job is answered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("error.json")).unwrap()).unwrap();
    assert_eq!(err["error"]["code"], "E_PAYLOAD_TOO_LARGE", "{err}");
    assert_eq!(err["error"]["details"]["field"], "command.json");
    assert_eq!(err["error"]["details"]["limit"], MIB);
    let after = vm_hwm(&pid);
    assert!(
        after < before + 32 * MIB,
        "the host's peak RSS grew from {before} to {after} bytes for a 200 MiB command.json"
    );
}

/// A host that answers every job with `dataRef` to a `data.json` of `len` bytes.
fn fake_host_with_data(ws: &Path, len: u64) -> std::thread::JoinHandle<()> {
    let root = ws.join(".vsc-bridge");
    std::fs::create_dir_all(root.join("execute")).unwrap();
    for d in [&root, &root.join("execute")] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::fs::write(
        root.join("host.json"),
        format!(
            r#"{{"bridgeId":"extHost-00000001","version":1,"pid":{}}}"#,
            std::process::id()
        ),
    )
    .unwrap();
    let execute = root.join("execute");
    std::thread::spawn(move || {
        let t = std::time::Instant::now();
        while t.elapsed() < support::HANG_GUARD {
            for e in std::fs::read_dir(&execute).unwrap().flatten() {
                let dir = e.path();
                if dir.join("command.json").exists() && !dir.join("claimed.json").exists() {
                    std::fs::write(dir.join("claimed.json"), "{}").unwrap();
                    sparse(&dir.join("data.json"), len);
                    std::fs::write(
                        dir.join("response.json"),
                        json!({"ok": true, "type": "success", "dataRef": "data.json", "meta": {}})
                            .to_string(),
                    )
                    .unwrap();
                    std::fs::write(dir.join("done"), "").unwrap();
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_json_over_the_cap_is_e_data_too_large_without_reading_it() {
    let ws = workspace("bound-data");
    let fake = fake_host_with_data(&ws, 64 * MIB);
    let before = vm_hwm("self");
    let client = FsClient::new(ws.join(".vsc-bridge"));
    let ctx = RunCtx {
        cancel: CancellationToken::new(),
        tool: None,
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let err = client
        .run("debug.status", json!({}), deadline, ctx)
        .await
        .unwrap_err();
    fake.join().unwrap();
    assert_eq!(err.code, "E_DATA_TOO_LARGE", "{err:?}");
    assert_eq!(err.details["field"], "data.json");
    assert_eq!(err.details["limit"], 16 * MIB);
    assert!(
        err.message.contains("over the 16777216-byte limit"),
        "{}",
        err.message
    );
    let after = vm_hwm("self");
    assert!(
        after < before + 32 * MIB,
        "the client's peak RSS grew from {before} to {after} bytes for a 64 MiB data.json"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_cap_is_configurable() {
    let ws = workspace("bound-cap");
    let fake = fake_host_with_data(&ws, 2 * MIB);
    let client = FsClient::new(ws.join(".vsc-bridge")).max_data_bytes(MIB);
    let ctx = RunCtx {
        cancel: CancellationToken::new(),
        tool: None,
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let err = client
        .run("debug.status", json!({}), deadline, ctx)
        .await
        .unwrap_err();
    fake.join().unwrap();
    assert_eq!(err.code, "E_DATA_TOO_LARGE", "{err:?}");
    assert_eq!(err.details["limit"], MIB);
}

/// utime + stime of `pid`, in clock ticks (`/proc/<pid>/stat` fields 14 and 15).
fn cpu_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_host_uses_no_cpu() {
    let ws = workspace("idle");
    let host = HostProc::start(&ws);
    let pid = host.child.id().to_string();
    // Past start-up, then 5 s of nothing to do.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = cpu_ticks(&pid);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let used = cpu_ticks(&pid) - before;
    // 10 ticks is 100 ms of CPU in 5 s (2%); a host scanning on its own reads spins a whole core.
    assert!(used <= 10, "the idle host used {used} ticks of CPU in 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_flooding_stderr_without_newlines_costs_the_bridge_no_memory() {
    use bridge_debug::config::BackendChoice;
    let ws = workspace("bound-flood");
    let python = ws.join("flood-python");
    // `-c 'import debugpy'` is the bridge's check; the adapter writes 300 MiB to stderr in one line, then exits.
    std::fs::write(
        &python,
        "#!/bin/sh\n[ \"$1\" = -c ] && exit 0\nexec python3 -c \"import sys\nb = b'x' * (1 << 20)\nfor _ in range(300): sys.stderr.buffer.write(b)\nsys.stderr.buffer.write(b'the-last-words')\nsys.stderr.flush()\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut a = args(&ws, BackendChoice::Dap);
    a.python = Some(python);
    let c = client(a).await;
    let before = vm_hwm("self");
    let (code, e) = support::code(
        &c,
        "debug_start",
        json!({"launch": "py", "timeoutMs": 60000}),
    )
    .await;
    assert_eq!(code, "E_LAUNCH_FAILED", "{e}");
    let after = vm_hwm("self");
    assert!(
        after < before + 64 * MIB,
        "the bridge's peak RSS grew from {before} to {after} bytes for 300 MiB of adapter stderr"
    );
    assert!(
        e["message"].as_str().unwrap().contains("the-last-words"),
        "the tail of the adapter's stderr says why it failed: {e}"
    );
}

fn threads(pid: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_share_one_watcher_no_thread_per_job_on_either_side() {
    let ws = workspace("threads");
    let host = HostProc::start(&ws);
    let pid = host.child.id().to_string();
    let client = std::sync::Arc::new(FsClient::new(ws.join(".vsc-bridge")));
    let run = |script: &'static str, params: Value, ms: u64| {
        let client = std::sync::Arc::clone(&client);
        async move {
            let ctx = RunCtx {
                cancel: CancellationToken::new(),
                tool: None,
            };
            let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
            client.run(script, params, deadline, ctx).await
        }
    };
    run("debug.start", json!({"launch": "slow"}), 30_000)
        .await
        .unwrap();
    run("debug.status", json!({}), 5_000).await.unwrap();
    let (host_before, client_before) = (threads(&pid), threads("self"));
    let waits: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn(run(
                "debug.wait-for-hit",
                json!({"timeoutMs": 3000}),
                10_000,
            ))
        })
        .collect();
    let t = std::time::Instant::now();
    while support::host::job_dirs(&ws)
        .iter()
        .filter(|d| d.join("claimed.json").exists())
        .count()
        < 8
    {
        assert!(t.elapsed() < support::HANG_GUARD, "8 jobs are claimed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (host_during, client_during) = (threads(&pid), threads("self"));
    for w in waits {
        assert_eq!(w.await.unwrap().unwrap_err().code, "E_TIMEOUT");
    }
    assert!(
        host_during <= host_before + 1,
        "the host went from {host_before} to {host_during} threads with 8 jobs running"
    );
    assert!(
        client_during <= client_before + 1,
        "the client went from {client_before} to {client_during} threads with 8 jobs waiting"
    );
    run("debug.stop", json!({}), 10_000).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_flooding_output_events_is_held_to_the_journal_bound() {
    use bridge_debug::config::BackendChoice;
    let ws = workspace("bound-output");
    let mut a = args(&ws, BackendChoice::Dap);
    a.python = Some(python_running(&ws, "flood_dap.py", ""));
    let c = client(a).await;
    let before = vm_hwm("self");
    let (code, e) = support::code(
        &c,
        "debug_start",
        json!({"launch": "py", "timeoutMs": 60000}),
    )
    .await;
    assert_eq!(code, "E_LAUNCH_FAILED", "{e}");
    let after = vm_hwm("self");
    assert!(
        after < before + 96 * MIB,
        "the bridge's peak RSS grew from {before} to {after} bytes for 500 MiB of output events"
    );
    let logs = data(&c, "dap_logs", json!({})).await;
    assert!(
        logs.to_string().contains("yyyy"),
        "the output was journaled"
    );
    assert!(
        logs.to_string().len() < 8 * MIB as usize,
        "the journal keeps its bound: {} bytes",
        logs.to_string().len()
    );
}

/// An attack run's finding: `dap_search` copied each match's context into its reply before the result was cut,
/// so a thousand matches with a hundred lines of context each built about 500 MB from 1 MB of output. The reply
/// is built from at most 1 MiB of lines now, and says it was cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_with_wide_context_builds_a_bounded_reply() {
    let ws = workspace("search-bounded");
    std::fs::write(
        ws.join("lines.py"),
        "for i in range(1000):\n    print('z' * 1000)\n",
    )
    .unwrap();
    let c = client(args(&ws, bridge_debug::config::BackendChoice::Dap)).await;
    let config =
        json!({"type": "debugpy", "request": "launch", "program": "${workspaceFolder}/lines.py"});
    data(&c, "debug_start", json!({"config": config})).await;
    let t = std::time::Instant::now();
    loop {
        let summary = data(&c, "dap_summary", json!({"compact": true})).await;
        if summary["journalBytes"].as_u64().unwrap_or(0) >= 1000 * 1000 {
            break;
        }
        assert!(
            t.elapsed() < HANG_GUARD,
            "the output never reached the journal: {summary}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let me = std::process::id().to_string();
    let before = vm_hwm(&me);
    let found = data(
        &c,
        "dap_search",
        json!({"pattern": "z", "limit": 1000, "contextLines": 100}),
    )
    .await;
    let grown = vm_hwm(&me).saturating_sub(before);
    assert_eq!(found["cut"]["limitBytes"], 1 << 20, "{}", found["cut"]);
    let total = found["total"].as_u64().unwrap();
    assert!(total > 0 && total < 1000, "{total}");
    assert!(
        grown < 100 << 20,
        "searching 1 MB of output grew the bridge by {} MB",
        grown >> 20
    );
}
