//! Every tool end to end through a real MCP client: Bouvet's eight with its fields, the compatible
//! extensions, the limits, over the stdio framing and over HTTP in both protocol eras.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use mcp_testkit::{ERAS, Era};
use serde_json::json;
use support::{Harness, error_of, start, start_era, start_http};

const BOUVET_TOOLS: [&str; 8] = [
    "create_sandbox",
    "destroy_sandbox",
    "list_sandboxes",
    "execute_code",
    "run_command",
    "read_file",
    "write_file",
    "list_directory",
];

async fn lifecycle_and_exec(h: &Harness) {
    let tools = h.client.list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    for t in BOUVET_TOOLS.iter().chain(&[
        "keepalive",
        "start_process",
        "process_status",
        "process_output",
        "kill_process",
    ]) {
        assert!(names.contains(&t.to_string()), "{t} missing from {names:?}");
    }
    let created = h
        .ok(
            "create_sandbox",
            json!({"memory_mib": 256, "vcpu_count": 1}),
        )
        .await;
    let id = created["sandbox_id"].as_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&id).is_ok());
    let langs = created["languages"].as_array().unwrap();
    for l in ["python", "javascript", "bash", "sh"] {
        assert!(langs.contains(&json!(l)), "{l} in {langs:?}");
    }
    let out = h
        .ok(
            "execute_code",
            json!({"sandbox_id": id, "language": "python", "code": "print(6*7)"}),
        )
        .await;
    assert_eq!(out["exit_code"], 0);
    assert_eq!(out["stdout"], "42\n");
    assert_eq!(out["stderr"], "");
    for key in ["signal", "timed_out", "truncated"] {
        assert!(out.get(key).is_some(), "{key} in every result");
    }
    let list = h.ok("list_sandboxes", json!({})).await;
    let s = &list["sandboxes"][0];
    assert_eq!(s["sandbox_id"], id.as_str());
    assert_eq!(s["state"], "running");
    assert!(s["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        h.ok("destroy_sandbox", json!({"sandbox_id": id})).await["success"],
        true
    );
    let again = error_of(&h.call("destroy_sandbox", json!({"sandbox_id": id})).await);
    assert_eq!(again["code"], "E_NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_and_exec_over_stdio_in_both_eras() {
    for era in ERAS {
        let h = start_era(&[], era).await;
        lifecycle_and_exec(&h).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_and_exec_over_http_in_both_eras_with_health() {
    for era in ERAS {
        let h = start_http(&[], era).await;
        lifecycle_and_exec(&h).await;
        let health = mcp_testkit::http_get(&format!("http://{}/health", h.http.unwrap())).await;
        let v: serde_json::Value = serde_json::from_str(&health).unwrap();
        let b = if v["bridges"].is_object() {
            &v["bridges"]["sandbox"]
        } else {
            &v
        };
        let text = b.to_string();
        assert!(text.contains("\"backend\":\"namespace\""), "{text}");
        assert!(text.contains("\"pool\""), "{text}");
        assert!(text.contains("\"microvm\""), "{text}");
        let page = mcp_testkit::http_get(&format!("http://{}/", h.http.unwrap())).await;
        assert!(
            page.contains("<code>create_sandbox</code>") && page.contains("/mcp"),
            "{page}"
        );
        let metrics = mcp_testkit::http_get(&format!("http://{}/metrics", h.http.unwrap())).await;
        assert!(
            metrics.contains("sandbox_pool_misses_total{bridge=\"sandbox\"} 1"),
            "{metrics}"
        );
        assert!(
            metrics.contains("sandbox_boot_ms_p50{bridge=\"sandbox\"}"),
            "{metrics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_malformed_ids_get_the_same_not_found() {
    let h = start(&[]).await;
    let a = error_of(
        &h.call(
            "run_command",
            json!({"sandbox_id": "nope", "command": "true"}),
        )
        .await,
    );
    let b = error_of(
        &h.call(
            "read_file",
            json!({"sandbox_id": uuid::Uuid::new_v4().to_string(), "path": "x"}),
        )
        .await,
    );
    assert_eq!(a["code"], "E_NOT_FOUND");
    assert_eq!(a["message"], b["message"]);
    assert_eq!(a["message"], "Sandbox not found or invalid ID");
}

/// A NUL in a path was answered with the system's bare "Invalid argument", naming no field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_holding_a_nul_is_refused_naming_the_field() {
    let h = start(&[]).await;
    let id = h.create().await;
    for (tool, extra) in [
        ("read_file", json!({})),
        ("write_file", json!({"content": "x"})),
        ("list_directory", json!({})),
    ] {
        let mut args = json!({"sandbox_id": id, "path": "a\u{0}b"});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let e = error_of(&h.call(tool, args).await);
        assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{tool}: {e}");
        assert_eq!(e["details"]["field"], "path", "{tool}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains("NUL"),
            "{tool}: {e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_language_and_the_execution_options() {
    let h = start(&[]).await;
    let id = h.create().await;
    for (lang, code) in [
        ("python", "import sys; print(sys.stdin.read().upper())"),
        (
            "javascript",
            "process.stdin.on('data', d => console.log(String(d).toUpperCase()))",
        ),
        (
            "node",
            "process.stdin.on('data', d => console.log(String(d).toUpperCase()))",
        ),
        ("bash", "read x; echo ${x^^}"),
        ("sh", "read x; echo $x | tr a-z A-Z"),
    ] {
        let out = h
            .ok(
                "execute_code",
                json!({"sandbox_id": id, "language": lang, "code": code, "stdin": "hi"}),
            )
            .await;
        assert_eq!(
            out["stdout"].as_str().unwrap().trim(),
            "HI",
            "{lang}: {out}"
        );
    }
    let out = h
        .ok(
            "run_command",
            json!({"sandbox_id": id, "command": "mkdir -p sub && cd sub && pwd; echo $GREETING; echo oops >&2; exit 3",
                   "env": {"GREETING": "hello"}}),
        )
        .await;
    assert_eq!(out["stdout"], "/workspace/sub\nhello\n");
    assert_eq!(out["stderr"], "oops\n");
    assert_eq!(out["exit_code"], 3);
    let out = h
        .ok(
            "run_command",
            json!({"sandbox_id": id, "command": "pwd", "cwd": "sub"}),
        )
        .await;
    assert_eq!(out["stdout"], "/workspace/sub\n");
    let bad = error_of(
        &h.call(
            "execute_code",
            json!({"sandbox_id": id, "language": "cobol", "code": "x"}),
        )
        .await,
    );
    assert_eq!(bad["code"], "E_INVALID_ARGUMENT");
    assert_eq!(bad["details"]["field"], "language");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_is_reported_and_output_is_kept_head_and_tail() {
    let h = start(&[]).await;
    let id = h.create().await;
    let out = h
        .ok(
            "run_command",
            json!({"sandbox_id": id, "command": "echo before; sleep 30", "timeout_secs": 1}),
        )
        .await;
    assert_eq!(out["timed_out"], true);
    assert_eq!(out["stdout"], "before\n");
    assert_eq!(out["signal"], 15);
    let out = h
        .ok(
            "run_command",
            json!({"sandbox_id": id, "command": "echo FIRST; head -c 5000000 /dev/zero | tr '\\0' y; echo; echo LAST"}),
        )
        .await;
    assert_eq!(out["truncated"], true);
    let s = out["stdout"].as_str().unwrap();
    assert!(s.starts_with("FIRST\n") && s.ends_with("\nLAST\n"));
    // The agent keeps 1 MiB; the result budget (900 KiB on the wire, content counted twice) keeps less.
    assert!(
        s.len() > 32 << 10 && s.len() < bridge_core::tool::RESULT_CAP_BYTES,
        "{} bytes kept",
        s.len()
    );
    assert_eq!(out["stdout_bytes"], 5_000_000 + 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_as_text_and_bytes_with_offsets_append_mode_and_depth() {
    let h = start(&[]).await;
    let id = h.create().await;
    let w = h
        .ok(
            "write_file",
            json!({"sandbox_id": id, "path": "a/b/hello.txt", "content": "héllo"}),
        )
        .await;
    assert_eq!(w["success"], true);
    let r = h
        .ok(
            "read_file",
            json!({"sandbox_id": id, "path": "/workspace/a/b/hello.txt"}),
        )
        .await;
    assert_eq!(r["content"], "héllo");
    h.ok(
        "write_file",
        json!({"sandbox_id": id, "path": "a/b/hello.txt", "content": "!", "append": true}),
    )
    .await;
    let r = h
        .ok(
            "read_file",
            json!({"sandbox_id": id, "path": "a/b/hello.txt", "offset": 1, "length": 3}),
        )
        .await;
    assert_eq!(r["content"], "él");
    assert_eq!(r["size"], 7);
    let bytes: Vec<u8> = (0..=255).collect();
    h.ok(
        "write_file",
        json!({"sandbox_id": id, "path": "bin.dat", "content": STANDARD.encode(&bytes), "encoding": "base64", "mode": "755"}),
    )
    .await;
    let r = h
        .ok(
            "read_file",
            json!({"sandbox_id": id, "path": "bin.dat", "encoding": "base64"}),
        )
        .await;
    assert_eq!(
        STANDARD.decode(r["content"].as_str().unwrap()).unwrap(),
        bytes
    );
    let out = h.sh(&id, "stat -c '%a %U' bin.dat").await;
    assert_eq!(out["stdout"], "755 sandbox\n");
    let l = h
        .ok(
            "list_directory",
            json!({"sandbox_id": id, "path": "/workspace"}),
        )
        .await;
    let names: Vec<_> = l["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["a", "bin.dat"]);
    assert_eq!(l["entries"][1]["size"], 256);
    assert_eq!(l["entries"][0]["is_dir"], true);
    let l = h
        .ok(
            "list_directory",
            json!({"sandbox_id": id, "path": ".", "depth": 3}),
        )
        .await;
    assert!(l.to_string().contains("a/b/hello.txt"));
    let missing = error_of(
        &h.call("read_file", json!({"sandbox_id": id, "path": "nope"}))
            .await,
    );
    assert_eq!(missing["code"], "E_NOT_FOUND");
    let bad = error_of(
        &h.call(
            "write_file",
            json!({"sandbox_id": id, "path": "x", "content": "y", "mode": "9z"}),
        )
        .await,
    );
    assert_eq!(bad["details"]["field"], "mode");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mib_of_code_and_a_ten_mib_file_go_through_and_more_is_refused_over_stdio() {
    big_inputs(&start(&["--sandbox-workspace-mib", "64"]).await).await;
}

/// Over HTTP the request body limit (4 MiB by default) must not stop Bouvet's 10 MB file (docs/protocols/sandbox.md §1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mib_of_code_and_a_ten_mib_file_go_through_and_more_is_refused_over_http() {
    big_inputs(&start_http(&["--sandbox-workspace-mib", "64"], Era::Modern).await).await;
}

async fn big_inputs(h: &Harness) {
    let id = h.create().await;
    let body = "a".repeat((1 << 20) - 64);
    let code = format!("x = '{body}'\nprint(len(x))\n");
    assert!(code.len() <= 1 << 20);
    let out = h
        .ok(
            "execute_code",
            json!({"sandbox_id": id, "language": "python", "code": code}),
        )
        .await;
    assert_eq!(out["stdout"], format!("{}\n", body.len()));
    let too_big = error_of(
        &h.call(
            "execute_code",
            json!({"sandbox_id": id, "language": "python", "code": "#".repeat((1 << 20) + 1)}),
        )
        .await,
    );
    assert_eq!(too_big["code"], "E_TOO_LARGE");
    assert_eq!(too_big["details"]["field"], "code");

    let content: String = (0..10 << 20)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let w = h
        .ok(
            "write_file",
            json!({"sandbox_id": id, "path": "big.txt", "content": content}),
        )
        .await;
    assert_eq!(w["bytes_written"], 10 << 20);
    let out = h
        .sh(&id, "wc -c < big.txt; md5sum big.txt | cut -c1-32")
        .await;
    let host_md5 = {
        let mut child = std::process::Command::new("md5sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(content.as_bytes())
            .unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()[..32].to_string()
    };
    assert_eq!(out["stdout"], format!("{}\n{host_md5}\n", 10 << 20));
    // Read back in pages (256 KiB a call: a result stays under the Python client's 1 MiB SSE event limit).
    let mut back = String::new();
    loop {
        let r = h
            .ok(
                "read_file",
                json!({"sandbox_id": id, "path": "big.txt", "offset": back.len()}),
            )
            .await;
        assert_eq!(r["size"], 10 << 20);
        back.push_str(r["content"].as_str().unwrap());
        if r["truncated"] == false {
            break;
        }
    }
    assert!(back == content, "the 10 MiB file reads back byte for byte");
    let over = error_of(
        &h.call(
            "write_file",
            json!({"sandbox_id": id, "path": "x", "content": "b".repeat((10 << 20) + 1)}),
        )
        .await,
    );
    assert_eq!(over["details"]["field"], "content");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_processes_start_report_and_die() {
    let h = start(&[]).await;
    let id = h.create().await;
    let p = h
        .ok(
            "start_process",
            json!({"sandbox_id": id, "command": "echo up; sleep 60"}),
        )
        .await;
    let pid = p["process_id"].as_u64().unwrap();
    let args = json!({"sandbox_id": id, "process_id": pid});
    // Polled, not slept on: a loaded machine schedules the shell when it can.
    let mut o = h.ok("process_output", args.clone()).await;
    while o["stdout"] != "up\n" {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        o = h.ok("process_output", args.clone()).await;
    }
    let st = h.ok("process_status", args.clone()).await;
    assert_eq!(st["running"], true);
    // It survives other calls: the sandbox is persistent between calls (the shell forks `sleep` after the echo).
    let ps = h
        .sh(
            &id,
            "for i in $(seq 100); do [ \"$(pgrep -x sleep | wc -l)\" = 1 ] && break; sleep 0.1; done; pgrep -x sleep | wc -l",
        )
        .await;
    assert_eq!(ps["stdout"], "1\n");
    h.ok("kill_process", args.clone()).await;
    let mut st = h.ok("process_status", args.clone()).await;
    while st["running"] == true {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        st = h.ok("process_status", args.clone()).await;
    }
    assert_eq!(st["signal"], 9);
    let gone = error_of(
        &h.call(
            "process_status",
            json!({"sandbox_id": id, "process_id": 999_999}),
        )
        .await,
    );
    assert_eq!(gone["code"], "E_NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_streams_as_progress_while_a_command_runs() {
    let mut h = start(&[]).await;
    let id = h.create().await;
    let call = mcp_testkit::call(
        &h.client,
        "run_command",
        json!({"sandbox_id": id, "command": "for i in 1 2 3; do echo tick $i; sleep 0.2; done"}),
    );
    let out = mcp_testkit::ok_of(&call.await);
    assert_eq!(out["stdout"], "tick 1\ntick 2\ntick 3\n");
    let first = mcp_testkit::within("progress", h.client.progress.recv())
        .await
        .unwrap();
    assert!(first > 0.0);
    let mut n = 1;
    while h.client.progress.try_recv().is_ok() {
        n += 1;
    }
    assert!(n >= 2, "output arrived as {n} progress notifications");
}

/// A program that prints as fast as it can is not a flood of notifications: live output is coalesced to
/// one progress notification per 250 ms (the first at once, the latest tail after each interval), so their
/// count is bounded by the run time measured here, whatever the program prints. The output itself is whole
/// in the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_output_is_coalesced_into_one_progress_notification_per_interval() {
    let mut h = start(&[]).await;
    let id = h.create().await;
    let code = "import sys, time\n\
                end = time.monotonic() + 1.5\n\
                while time.monotonic() < end:\n\
                \x20   sys.stdout.write('x' * 99 + '\\n')\n\
                \x20   sys.stdout.flush()\n\
                print('done', flush=True)\n";
    let began = std::time::Instant::now();
    let out = h
        .ok(
            "execute_code",
            json!({"sandbox_id": id, "language": "python", "code": code}),
        )
        .await;
    let took = began.elapsed();
    assert!(out["stdout"].as_str().unwrap().ends_with("done\n"), "{out}");
    // The last notification carries every byte printed: the output held back when the program ended went
    // out before the result. Notifications are handled beside the result, so they are awaited, not assumed.
    let total = out["stdout_bytes"].as_f64().unwrap();
    let mut n = 0u128;
    let mut last = 0.0;
    while last < total {
        match tokio::time::timeout(std::time::Duration::from_secs(30), h.client.progress.recv())
            .await
        {
            Ok(Some(seen)) => {
                n += 1;
                last = seen;
            }
            _ => panic!("the last progress said {last} bytes of {total} printed"),
        }
    }
    // One at once, then at most one per full interval of the run, and the last tail after it.
    let bound = took.as_millis() / 250 + 2;
    assert!(n >= 1, "no progress at all");
    assert!(
        n <= bound,
        "{n} progress notifications in {took:?} (at most {bound} at one per 250 ms); {} bytes printed",
        out["stdout_bytes"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_reports_the_new_expiry() {
    let h = start(&[]).await;
    let id = h.create().await;
    let k = h.ok("keepalive", json!({"sandbox_id": id})).await;
    assert_eq!(k["success"], true);
    assert!(k["expires_at"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_backend_needs_its_unsafe_flag_and_then_works() {
    let env = bridge_core::BridgeEnv::new();
    let refused =
        bridge_sandbox::start(support::args(&["--sandbox-backend", "process"]), &env).await;
    let msg = refused.err().unwrap().to_string();
    assert!(msg.contains("--sandbox-unsafe-no-isolation"), "{msg}");
    let h = start_era(
        &[
            "--sandbox-backend",
            "process",
            "--sandbox-unsafe-no-isolation",
        ],
        Era::Legacy,
    )
    .await;
    let id = h.create().await;
    let out = h
        .ok(
            "execute_code",
            json!({"sandbox_id": id, "language": "sh", "code": "echo plain"}),
        )
        .await;
    assert_eq!(out["stdout"], "plain\n");
    let list = h.ok("list_sandboxes", json!({})).await;
    assert_eq!(list["sandboxes"][0]["isolation"]["isolation"], "none");
}

/// Cancelling a running `execute_code` (MCP notifications/cancelled) kills its program, every time: the core
/// once dropped the call before its kill was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_execute_code_kills_the_program_every_time_over_stdio() {
    cancel_rounds(start(&[]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_execute_code_kills_the_program_every_time_over_http() {
    cancel_rounds(start_http(&[], Era::Legacy).await).await;
}

async fn cancel_rounds(mut h: Harness) {
    use mcp_testkit::start_call;
    const COUNT: &str = "pgrep -x python3 | wc -l";
    let id = h.create().await;
    let rounds = 20;
    let mut killed = 0;
    for round in 0..rounds {
        let code = "import time\nprint('up', flush=True)\ntime.sleep(1000)";
        let args = json!({"sandbox_id": id, "language": "python", "code": code});
        let handle = start_call(&h.client, "execute_code", args).await;
        if round % 2 == 0 {
            // "up" arrives as progress once the program runs. A late "up" of the previous round's program (killed
            // just after it printed) can arrive here too, so the program is also seen running before the cancel.
            mcp_testkit::within("the program to run", h.client.progress.recv())
                .await
                .unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                let before = h.sh(&id, COUNT).await;
                if before["stdout"] == "1\n" {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "round {round}: the program never ran: {before}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        } else {
            // Odd rounds cancel while the program may still be starting.
            let delay = (round as u64 * 37) % 300;
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        handle.cancel(Some("stop".into())).await.unwrap();
        // The kill travels asynchronously. The core drops a handler CANCEL_GRACE (900 ms) after the cancel, and the
        // kill itself waits at most 2 s: a program still running a minute later (a hang guard generous for a
        // loaded machine, not a claim about speed) was left behind.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut left = String::new();
        while std::time::Instant::now() < deadline {
            left = h.sh(&id, COUNT).await["stdout"]
                .as_str()
                .unwrap()
                .to_owned();
            if left == "0\n" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        if left == "0\n" {
            killed += 1;
        } else {
            // Clean up so the next round counts only itself.
            h.sh(&id, "pkill -9 -x python3; true").await;
            eprintln!("round {round}: {left:?} python3 left running");
        }
        while h.client.progress.try_recv().is_ok() {}
    }
    assert_eq!(
        killed, rounds,
        "cancel killed the program in {killed} of {rounds} rounds"
    );
    // A program started after its call was cancelled would show up late.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        h.sh(&id, COUNT).await["stdout"],
        "0\n",
        "a cancelled program started late"
    );
}

/// A running process says so: no exit code (it once reported 128, made up from a missing signal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_output_of_a_running_process_has_no_exit_code() {
    let h = start(&[]).await;
    let id = h.create().await;
    let p = h
        .ok(
            "start_process",
            json!({"sandbox_id": id, "command": "echo up; exec sleep 60"}),
        )
        .await;
    let pid = p["process_id"].as_u64().unwrap();
    let args = json!({"sandbox_id": id, "process_id": pid});
    let mut o = h.ok("process_output", args.clone()).await;
    while o["stdout"] != "up\n" {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        o = h.ok("process_output", args.clone()).await;
    }
    assert_eq!(o["running"], true, "{o}");
    assert!(o["exit_code"].is_null(), "running, yet exit_code: {o}");
    assert!(o["signal"].is_null(), "running, yet signal: {o}");
    let st = h.ok("process_status", args.clone()).await;
    assert_eq!(st["running"], true, "{st}");
    assert!(st["exit_code"].is_null(), "{st}");
    h.ok("kill_process", args.clone()).await;
    let mut o = h.ok("process_output", args.clone()).await;
    while o["running"] == true {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        o = h.ok("process_output", args.clone()).await;
    }
    assert_eq!(o["exit_code"], 137, "{o}");
    assert_eq!(o["signal"], 9, "{o}");
}

/// Every result stays under 1 MiB on the wire (the Python MCP client refuses a bigger SSE event): long or
/// heavily escaped output is cut head-and-tail and says so, and text files page on whole characters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_stay_under_a_mebibyte_and_text_pages_join_whole() {
    let h = start(&[]).await;
    let id = h.create().await;
    let wire = |r: &rmcp::model::CallToolResult| serde_json::to_string(r).unwrap().len();
    for (what, code, total) in [
        (
            "600 KiB",
            "import sys; sys.stdout.write('a' * (600 << 10))",
            600 << 10,
        ),
        // A control byte is six bytes in JSON, seven in the text block's escaped copy.
        (
            "escaped",
            "import sys; sys.stdout.write('\\x01' * (300 << 10))",
            300 << 10,
        ),
    ] {
        let r = h
            .call(
                "execute_code",
                json!({"sandbox_id": id, "language": "python", "code": code}),
            )
            .await;
        assert!(wire(&r) < 1 << 20, "{what}: {} bytes on the wire", wire(&r));
        let out = mcp_testkit::ok_of(&r);
        assert_eq!(out["stdout_bytes"], total, "{what}");
        assert_eq!(out["truncated"], true, "{what}");
        let kept = out["stdout"].as_str().unwrap();
        assert!(
            !kept.is_empty() && kept.len() < total,
            "{what}: {}",
            kept.len()
        );
    }
    // Two- to four-byte characters, so 256 KiB pages end inside characters unless cut on whole ones.
    let text: String = "é€😀\n".repeat(60_000);
    h.ok(
        "write_file",
        json!({"sandbox_id": id, "path": "u.txt", "content": text}),
    )
    .await;
    let mut back = String::new();
    let mut offset = 0u64;
    let mut pages = 0;
    loop {
        let r = h
            .call(
                "read_file",
                json!({"sandbox_id": id, "path": "u.txt", "offset": offset}),
            )
            .await;
        assert!(wire(&r) < 1 << 20);
        let page = mcp_testkit::ok_of(&r);
        back.push_str(page["content"].as_str().unwrap());
        offset += page["bytes"].as_u64().unwrap();
        pages += 1;
        if page["truncated"] == false {
            break;
        }
    }
    assert!(pages > 1, "{} bytes in one page", text.len());
    assert!(back == text, "the pages join into the file's text");
    let over = error_of(
        &h.call(
            "read_file",
            json!({"sandbox_id": id, "path": "u.txt", "length": (256 << 10) + 1}),
        )
        .await,
    );
    assert_eq!(over["details"]["field"], "length");
}

/// list_sandboxes is paged and small: 20 a page by default, each sandbox once across the pages, the isolation
/// report in full once per page (once per distinct report), and whole on request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_sandboxes_is_paged_and_small() {
    let h = start(&[]).await;
    let n = 45;
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(h.create().await);
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = Vec::new();
    loop {
        let args = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = h.ok("list_sandboxes", args).await;
        let bytes = page.to_string().len();
        assert_eq!(page["total"], n);
        let items = page["sandboxes"].as_array().unwrap();
        assert!(items.len() <= 20, "{} on a page", items.len());
        let full = items
            .iter()
            .filter(|s| s.get("isolation").is_some())
            .count();
        assert_eq!(full, 1, "the same report once per page");
        for s in items {
            assert!(s.get("isolation").is_some() || s["isolation_as"] == items[0]["sandbox_id"]);
            seen.push(s["sandbox_id"].as_str().unwrap().to_owned());
        }
        pages.push(bytes);
        match page.get("next_cursor") {
            Some(c) => cursor = Some(c.as_str().unwrap().to_owned()),
            None => break,
        }
    }
    assert_eq!(pages.len(), 3, "45 sandboxes in pages of 20");
    assert_eq!(seen, ids, "every sandbox once, oldest first");
    // The whole listing once took 1.47 KB a sandbox (147 KB for 100); a page of 20 now holds one report.
    let per_sandbox = pages[0] / 20;
    eprintln!("page bytes: {pages:?}");
    assert!(per_sandbox < 600, "{per_sandbox} bytes a sandbox");
    let one = h.ok("list_sandboxes", json!({"sandbox_id": ids[7]})).await;
    assert_eq!(one["sandboxes"].as_array().unwrap().len(), 1);
    assert!(
        one["sandboxes"][0]["isolation"]["namespaces"].is_array()
            || one["sandboxes"][0]["isolation"].is_object()
    );
    let verbose = h
        .ok("list_sandboxes", json!({"limit": 5, "verbose": true}))
        .await;
    let items = verbose["sandboxes"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    assert!(items.iter().all(|s| s["isolation"].is_object()));
    let bad = error_of(&h.call("list_sandboxes", json!({"limit": 101})).await);
    assert_eq!(bad["details"]["field"], "limit");
    let bad = error_of(&h.call("list_sandboxes", json!({"cursor": "nope"})).await);
    assert_eq!(bad["details"]["field"], "cursor");
}

/// Bouvet's spellings: the language in any case with its aliases, and fields Bouvet ignores ignored on each
/// of its eight tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bouvet_spellings_and_extra_fields_are_accepted() {
    let h = start(&[]).await;
    let extra = |mut v: serde_json::Value| {
        v["request_id"] = json!("abc");
        v["timeout"] = json!(30);
        v
    };
    let id = h.ok("create_sandbox", extra(json!({}))).await["sandbox_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (language, code) in [
        ("Python", "print('ok')"),
        ("PYTHON3", "print('ok')"),
        ("JavaScript", "console.log('ok')"),
        ("Node", "console.log('ok')"),
        ("js", "console.log('ok')"),
        ("Bash", "echo ok"),
        ("SH", "echo ok"),
    ] {
        let out = h
            .ok(
                "execute_code",
                extra(json!({"sandbox_id": id, "language": language, "code": code})),
            )
            .await;
        assert_eq!(out["stdout"], "ok\n", "{language}: {out}");
    }
    let bad = error_of(
        &h.call(
            "execute_code",
            json!({"sandbox_id": id, "language": "cobol", "code": "x"}),
        )
        .await,
    );
    assert_eq!(bad["details"]["field"], "language");
    let ran = h
        .ok(
            "run_command",
            extra(json!({"sandbox_id": id, "command": "echo ok"})),
        )
        .await;
    assert_eq!(ran["stdout"], "ok\n");
    h.ok(
        "write_file",
        extra(json!({"sandbox_id": id, "path": "a.txt", "content": "hi"})),
    )
    .await;
    let read = h
        .ok(
            "read_file",
            extra(json!({"sandbox_id": id, "path": "a.txt"})),
        )
        .await;
    assert_eq!(read["content"], "hi");
    let listing = h
        .ok(
            "list_directory",
            extra(json!({"sandbox_id": id, "path": "/workspace"})),
        )
        .await;
    assert!(
        listing["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "a.txt")
    );
    h.ok("list_sandboxes", extra(json!({}))).await;
    let gone = h
        .ok("destroy_sandbox", extra(json!({"sandbox_id": id})))
        .await;
    assert_eq!(gone["success"], true);
}

/// Waits (bounded) until background process `pid` has ended, through process_status; returns its status.
async fn ended(h: &Harness, id: &str, pid: u64) -> serde_json::Value {
    let guard = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let st = h
            .ok(
                "process_status",
                json!({"sandbox_id": id, "process_id": pid}),
            )
            .await;
        if st["running"] == false {
            return st;
        }
        assert!(
            std::time::Instant::now() < guard,
            "process {pid} never ended: {st}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The sandbox still runs a program to its end.
async fn runs_a_program(h: &Harness, id: &str) {
    let out = h
        .ok(
            "execute_code",
            json!({"sandbox_id": id, "language": "sh", "code": "echo ok"}),
        )
        .await;
    assert_eq!(out["stdout"], "ok\n", "{out}");
}

/// Every one of `pids` still runs: none was dropped to make room.
async fn all_running(h: &Harness, id: &str, pids: &[u64]) {
    for pid in pids {
        let st = h
            .ok(
                "process_status",
                json!({"sandbox_id": id, "process_id": pid}),
            )
            .await;
        assert_eq!(st["running"], true, "process {pid} was dropped: {st}");
    }
}

/// The agent tracks 64 processes at once: ended background processes whose end was read make room, so a
/// sandbox can start any number of them over its life (65 used to leave it unable to run anything).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_background_processes_make_room_for_new_ones() {
    let h = start(&[]).await;
    let id = h.create().await;
    for n in 0..65 {
        let r = h
            .call(
                "start_process",
                json!({"sandbox_id": id, "command": "true"}),
            )
            .await;
        assert_ne!(
            r.is_error,
            Some(true),
            "start_process #{}: {}",
            n + 1,
            error_of(&r)
        );
        let pid = support::ok_of(&r)["process_id"].as_u64().unwrap();
        assert_eq!(ended(&h, &id, pid).await["exit_code"], 0);
    }
    runs_a_program(&h, &id).await;
}

/// A running process is never dropped to make room: with 64 running, the next start is refused (busy, naming
/// the limit); once one has been killed and its end read, a start succeeds again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_running_processes_are_the_limit_and_none_is_dropped() {
    let h = start(&[]).await;
    let id = h.create().await;
    let mut pids = Vec::new();
    for _ in 0..64 {
        let p = h
            .ok(
                "start_process",
                json!({"sandbox_id": id, "command": "exec sleep 600"}),
            )
            .await;
        pids.push(p["process_id"].as_u64().unwrap());
    }
    let refused = error_of(
        &h.call(
            "start_process",
            json!({"sandbox_id": id, "command": "true"}),
        )
        .await,
    );
    assert_eq!(refused["code"], "E_BUSY", "a count, not a size: {refused}");
    let msg = refused["message"].as_str().unwrap();
    assert!(msg.contains("64"), "{refused}");
    assert!(msg.contains("kill_process"), "{refused}");
    all_running(&h, &id, &pids).await;
    h.ok(
        "kill_process",
        json!({"sandbox_id": id, "process_id": pids[0]}),
    )
    .await;
    assert_eq!(ended(&h, &id, pids[0]).await["signal"], 9);
    runs_a_program(&h, &id).await;
    all_running(&h, &id, &pids[1..]).await;
}

/// Only output handed over makes an ended process safe to drop: with the table full, a spawn drops the ended
/// process whose output process_output returned, not one whose end process_status merely showed (the usual
/// loop polls process_status until the end, then reads process_output). P2 ends first, so dropping "the
/// first to end among those whose end was seen" would take P2 and its unread output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_alone_does_not_make_an_ended_process_droppable() {
    let h = start(&[]).await;
    let id = h.create().await;
    let start_one = |command: &'static str| {
        let h = &h;
        let id = id.clone();
        async move {
            h.ok(
                "start_process",
                json!({"sandbox_id": id, "command": command}),
            )
            .await["process_id"]
                .as_u64()
                .unwrap()
        }
    };
    let p2 = start_one("echo two").await;
    assert_eq!(ended(&h, &id, p2).await["exit_code"], 0);
    let p1 = start_one("echo one").await;
    assert_eq!(ended(&h, &id, p1).await["exit_code"], 0);
    let read = h
        .ok(
            "process_output",
            json!({"sandbox_id": id, "process_id": p1}),
        )
        .await;
    assert_eq!(read["stdout"], "one\n", "{read}");
    // 62 running beside the two ended: the table's 64 are taken.
    for _ in 0..62 {
        start_one("exec sleep 600").await;
    }
    start_one("exec sleep 600").await;
    let unread = h
        .call(
            "process_output",
            json!({"sandbox_id": id, "process_id": p2}),
        )
        .await;
    assert_ne!(
        unread.is_error,
        Some(true),
        "P2's output, never read, was dropped: {}",
        error_of(&unread)
    );
    let unread = support::ok_of(&unread);
    assert_eq!(unread["stdout"], "two\n", "{unread}");
    assert_eq!(unread["exit_code"], 0, "{unread}");
    let gone = error_of(
        &h.call(
            "process_output",
            json!({"sandbox_id": id, "process_id": p1}),
        )
        .await,
    );
    assert!(
        gone["message"]
            .as_str()
            .unwrap()
            .contains(&format!("no process {p1}")),
        "P1, whose output was read, is the one dropped: {gone}"
    );
}

/// An attack run's finding: `write_file` at an offset of 2^62 succeeded (the agent writes as PID 1, which the
/// sandbox's RLIMIT_FSIZE does not bind), leaving a sparse file of that apparent size; two such files wrapped
/// the export's size check in a release build. An offset that would end past --sandbox-max-file-mib is refused
/// naming `offset` and the limit, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_would_end_past_the_largest_file_is_refused_and_writes_nothing() {
    let h = start(&["--sandbox-max-file-mib", "1"]).await;
    let id = h.create().await;
    for offset in [1u64 << 62, (1 << 20) - 4] {
        let e = error_of(
            &h.call(
                "write_file",
                json!({"sandbox_id": id, "path": "sparse", "content": "hello", "offset": offset}),
            )
            .await,
        );
        assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{offset}: {e}");
        assert_eq!(e["details"]["field"], "offset", "{e}");
        assert_eq!(e["details"]["limit"], 1 << 20, "{e}");
    }
    let e = error_of(
        &h.call("read_file", json!({"sandbox_id": id, "path": "sparse"}))
            .await,
    );
    assert_eq!(e["code"], "E_NOT_FOUND", "nothing was written: {e}");
    // Up to the limit is a write like any other.
    h.ok(
        "write_file",
        json!({"sandbox_id": id, "path": "sparse", "content": "hello", "offset": (1u64 << 20) - 5}),
    )
    .await;
    let listed = h
        .ok(
            "list_directory",
            json!({"sandbox_id": id, "path": "/workspace"}),
        )
        .await;
    assert!(listed.to_string().contains("1048576"), "{listed}");
    // An append starts at the file's end, which only the agent knows: it checks, as PID 1 is not bound by
    // the sandbox's RLIMIT_FSIZE (before, this grew the file past the limit).
    let e = error_of(
        &h.call(
            "write_file",
            json!({"sandbox_id": id, "path": "sparse", "content": "more", "append": true}),
        )
        .await,
    );
    assert_eq!(e["code"], "E_TOO_LARGE", "{e}");
    assert_eq!(e["details"]["field"], "append", "{e}");
    assert_eq!(e["details"]["limit"], 1 << 20, "{e}");
    let listed = h
        .ok(
            "list_directory",
            json!({"sandbox_id": id, "path": "/workspace"}),
        )
        .await;
    assert!(
        listed.to_string().contains("1048576"),
        "unchanged: {listed}"
    );
    // Content larger than the largest file is refused before its first chunk is written.
    let big = "x".repeat((1 << 20) + 1);
    let e = error_of(
        &h.call(
            "write_file",
            json!({"sandbox_id": id, "path": "big", "content": big}),
        )
        .await,
    );
    assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{e}");
    assert_eq!(e["details"]["field"], "content", "{e}");
    let e = error_of(
        &h.call("read_file", json!({"sandbox_id": id, "path": "big"}))
            .await,
    );
    assert_eq!(e["code"], "E_NOT_FOUND", "nothing was written: {e}");
}
