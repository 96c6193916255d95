//! The `vscode` backend: the file protocol, client (the bridge) and host (`debug-host`, the headless extension
//! side) as separate processes, the acceptance criteria end to end on real debuggers, and the protocol's
//! failure modes: a host killed mid-job, a stale host.json, no pickup, cancellation, two clients, large data.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::config::BackendChoice;
use serde_json::{Value, json};
use std::time::Duration;
use support::host::{HostProc, job_dirs, no_jobs_left};
use support::scenarios;
use support::*;

async fn vscode(tag: &str) -> (PathBuf, HostProc, mcp_testkit::Client) {
    let ws = workspace(tag);
    let host = HostProc::start(&ws);
    let c = client(args(&ws, BackendChoice::Auto)).await;
    (ws, host, c)
}

use std::path::PathBuf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_picks_vscode_and_the_python_workflow_runs_through_files() {
    let (ws, _host, c) = vscode("vs-py").await;
    let status = data(&c, "bridge_status", json!({})).await;
    assert_eq!(status["backend"], "vscode", "{status}");
    assert!(
        status["reason"]
            .as_str()
            .unwrap()
            .contains("fresh host.json")
    );
    let names = tool_names(&c).await;
    assert!(
        names.contains(&"editor_goto_line".to_owned()) && names.contains(&"dap_logs".to_owned()),
        "the headless host also runs the journal tools: {names:?}"
    );
    scenarios::python_workflow(&c, &ws).await;
    no_jobs_left(&ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_error_codes_survive_the_file_protocol() {
    let (ws, _host, c) = vscode("vs-errors").await;
    scenarios::errors_without_a_session(&c).await;
    // Criterion 3 on this backend: refused before a job is written.
    let (code, e) = support::code(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": "x"}),
    )
    .await;
    assert_eq!(
        (code.as_str(), &e["details"]["field"]),
        ("E_INVALID_ARGUMENT", &json!("line"))
    );
    assert!(job_dirs(&ws).is_empty(), "nothing reached the host");
    scenarios::stale_reference(&c).await;
    // A tool the headless host cannot run says so, with the host's own code.
    let (code, _) = support::code(
        &c,
        "editor_goto_line",
        json!({"path": "target.py", "line": 1}),
    )
    .await;
    assert_eq!(code, "E_UNSUPPORTED_BACKEND");
    no_jobs_left(&ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_cancellation_write_cancel_and_leave_nothing() {
    let (ws, _host, c) = vscode("vs-cancel").await;
    scenarios::wait_times_out(&c).await;
    scenarios::cancel_a_long_wait(&c).await;
    no_jobs_left(&ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_on_lldb_dap_through_the_host() {
    let (ws, _host, c) = vscode("vs-c").await;
    build_c(&ws);
    // dap_logs is the dap backend's; the C scenario reads the output through it, so run it without that step.
    data(&c, "breakpoint_set", json!({"path": "t.c", "line": C_LINE})).await;
    let started = data(
        &c,
        "debug_start",
        json!({"launch": "c", "wait": true, "timeoutMs": 30000}),
    )
    .await;
    assert_eq!(started["stop"]["line"], C_LINE, "{started}");
    let eval = data(&c, "debug_evaluate", json!({"expression": "total * 2"})).await;
    assert_eq!(eval["result"], "84");
    let set = data(
        &c,
        "debug_set_variable",
        json!({"name": "total", "value": "100"}),
    )
    .await;
    assert_eq!(set["value"], "100");
    let end = data(&c, "debug_continue", json!({"timeoutMs": 30000})).await;
    assert_eq!(end["event"], "terminated");
    no_jobs_left(&ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_host_json_is_e_bridge_unavailable_and_auto_falls_back_to_dap() {
    let ws = workspace("vs-stale");
    let root = ws.join(".vsc-bridge");
    std::fs::create_dir_all(root.join("execute")).unwrap();
    std::fs::write(
        root.join("host.json"),
        r#"{"bridgeId":"extHost-00000000","version":1,"pid":1}"#,
    )
    .unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(120);
    std::fs::File::options()
        .write(true)
        .open(root.join("host.json"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let c = client(args(&ws, BackendChoice::Vscode)).await;
    let (code, e) = support::code(&c, "debug_status", json!({})).await;
    assert_eq!(code, "E_BRIDGE_UNAVAILABLE", "{e}");
    assert!(e["message"].as_str().unwrap().contains("s ago"));
    assert!(job_dirs(&ws).is_empty(), "nothing was written");
    let auto = client(args(&ws, BackendChoice::Auto)).await;
    let status = data(&auto, "bridge_status", json!({})).await;
    assert_eq!(status["backend"], "dap");
    assert!(
        status["reason"]
            .as_str()
            .unwrap()
            .contains("no fresh host.json"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_host_claiming_is_e_pickup_timeout_and_the_job_is_removed() {
    let ws = workspace("vs-pickup");
    let root = ws.join(".vsc-bridge");
    std::fs::create_dir_all(root.join("execute")).unwrap();
    std::fs::write(
        root.join("host.json"),
        format!(
            r#"{{"bridgeId":"extHost-00000000","version":1,"pid":{}}}"#,
            std::process::id()
        ),
    )
    .unwrap();
    let c = client(args(&ws, BackendChoice::Vscode)).await;
    let t = std::time::Instant::now();
    let (code, e) = support::code(&c, "debug_status", json!({})).await;
    assert_eq!(code, "E_PICKUP_TIMEOUT", "{e}");
    // It waited for a pickup (the pickup timeout, 5 s) before giving up: a lower bound, never a claim of speed.
    assert!(t.elapsed() >= Duration::from_secs(4), "{:?}", t.elapsed());
    assert!(
        job_dirs(&ws).is_empty(),
        "an unclaimed job is removed: {:?}",
        job_dirs(&ws)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_mid_job_fails_the_call_and_the_next_host_quarantines_the_job_without_rerunning_it()
 {
    let (ws, mut host, c) = vscode("vs-kill").await;
    data(&c, "debug_start", json!({"launch": "slow"})).await;
    let waiting = {
        let c = c.service.clone();
        tokio::spawn(async move {
            mcp_testkit::call(&c, "debug_wait_for_hit", json!({"timeoutMs": 60000})).await
        })
    };
    let t = std::time::Instant::now();
    while !job_dirs(&ws)
        .iter()
        .any(|d| d.join("claimed.json").exists())
    {
        assert!(t.elapsed() < support::HANG_GUARD, "the host claims the job");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    host.kill();
    let result = mcp_testkit::within("the call to fail", waiting)
        .await
        .unwrap();
    let e = error_of(&result);
    assert_eq!(e["code"], "E_BRIDGE_UNAVAILABLE", "{e}");
    assert!(e["message"].as_str().unwrap().contains("died"));
    let left = job_dirs(&ws);
    assert_eq!(
        left.len(),
        1,
        "the claimed job stays for recovery: {left:?}"
    );
    let job = left[0].clone();
    assert!(!job.join("done").exists());
    let _host2 = HostProc::start(&ws);
    // The new host answered the dead one's job before it wrote host.json.
    let dlq: Value =
        serde_json::from_str(&std::fs::read_to_string(job.join("dlq")).unwrap()).unwrap();
    assert_eq!(dlq["reason"], "E_CRASH_RECOVERY");
    let err: Value =
        serde_json::from_str(&std::fs::read_to_string(job.join("error.json")).unwrap()).unwrap();
    assert_eq!(err["error"]["code"], "E_CRASH_RECOVERY");
    assert!(job.join("done").exists());
    assert!(!job.join("response.json").exists(), "never re-run");
    // The new host serves new calls.
    assert_eq!(data(&c, "debug_status", json!({})).await["isActive"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_at_once_each_get_their_own_answers() {
    let (ws, _host, c1) = vscode("vs-two").await;
    let c2 = client(args(&ws, BackendChoice::Vscode)).await;
    let mut tasks = Vec::new();
    for (i, c) in [c1.service.clone(), c2.service.clone()]
        .into_iter()
        .enumerate()
    {
        tasks.push(tokio::spawn(async move {
            for n in 0..10u64 {
                let line = 1 + (n + i as u64 * 10) % 9;
                let r = mcp_testkit::call(
                    &c,
                    "breakpoint_set",
                    json!({"path": "target.py", "line": line}),
                )
                .await;
                let env = ok_of(&r);
                assert_eq!(env["data"]["details"]["breakpoint"]["line"], line);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let list = data(&c1, "breakpoint_list", json!({})).await;
    assert_eq!(list["total"], 9);
    no_jobs_left(&ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_travels_through_data_json() {
    let ws = workspace("vs-big");
    // A program with a 3 MB string, paused where it is in scope.
    std::fs::write(
        ws.join("big.py"),
        "big = 'x' * 3_000_000\nprint(len(big))\n",
    )
    .unwrap();
    let _host = HostProc::start(&ws);
    let c = client(args(&ws, BackendChoice::Vscode)).await;
    data(&c, "breakpoint_set", json!({"path": "big.py", "line": 2})).await;
    data(&c, "debug_start", json!({"config": {"type": "debugpy", "request": "launch", "program": "${workspaceFolder}/big.py"}, "wait": true})).await;
    // 3 MB is above the core's result cap: asked for whole with the cap's `_meta` field.
    let mut evaluate = rmcp::model::CallToolRequestParams::new("debug_evaluate").with_arguments(
        json!({"expression": "big", "context": "clipboard"})
            .as_object()
            .unwrap()
            .clone(),
    );
    let mut meta = rmcp::model::RequestMetaObject::default();
    let cap = json!(16 << 20);
    meta.0
        .0
        .insert(bridge_core::tool::MAX_RESULT_BYTES_META_KEY.into(), cap);
    evaluate.meta = Some(meta);
    let r = c.call_tool(evaluate).await.unwrap();
    let env = ok_of(&r);
    assert!(
        env["data"]["result"].as_str().unwrap().len() > 2_000_000,
        "the whole value arrived"
    );
    assert!(env.get("dataRef").is_none());
    data(&c, "debug_stop", json!({})).await;
    no_jobs_left(&ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_events_arrive_as_mcp_progress() {
    let (ws, _host, mut c) = vscode("vs-events").await;
    data(&c, "debug_status", json!({})).await;
    let mut seen = Vec::new();
    while let Ok(p) = c.progress.try_recv() {
        seen.push(p);
    }
    assert!(
        seen.contains(&0.0) && seen.contains(&100.0),
        "events.ndjson's progress lines became notifications: {seen:?}"
    );
    no_jobs_left(&ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dap_logs_and_dap_exceptions_work_through_the_headless_host() {
    let (ws, _host, c) = vscode("vs-journal").await;
    data(&c, "debug_start", json!({"launch": "py"})).await;
    let t = std::time::Instant::now();
    while data(&c, "debug_status", json!({})).await["isActive"] == true {
        assert!(t.elapsed() < support::HANG_GUARD, "target.py ends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let logs = data(&c, "dap_logs", json!({})).await;
    assert!(logs.to_string().contains("x = 42"), "{logs}");
    data(&c, "dap_exceptions", json!({})).await;
    no_jobs_left(&ws).await;
}
