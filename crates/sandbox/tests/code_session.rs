//! run_code's persistent Python sessions in real namespace sandboxes, through a real MCP client: state and
//! imports kept between calls, errors and interrupts that leave the session alive, restart, output streamed
//! while a cell runs, the session cap, output bounds, and rich results (matplotlib figures as PNG images, files
//! under the output folder as resource links, DataFrames as text tables).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use mcp_testkit::{start_call, within};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use support::{Harness, error_of, start};

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";
/// bridge_sandbox's MAX_IMAGE_BYTES.
const MAX_IMAGE_BYTES: usize = 256 << 10;

async fn cell(h: &Harness, id: &str, code: &str) -> Value {
    h.ok("run_code", json!({"sandbox_id": id, "code": code}))
        .await
}

fn wire(result: &CallToolResult) -> Value {
    serde_json::to_value(result).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_and_imports_stay_between_calls() {
    let h = start(&[]).await;
    let id = h.create().await;
    let t = std::time::Instant::now();
    let first = cell(&h, &id, "x = 41").await;
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(first["status"], "ok", "{first}");
    assert_eq!(first["new_session"], true);
    assert!(
        first.get("value").is_none(),
        "an assignment has no value: {first}"
    );
    let mut later = Vec::new();
    let mut second = Value::Null;
    for _ in 0..10 {
        let t = std::time::Instant::now();
        second = cell(&h, &id, "x + 1").await;
        later.push(t.elapsed().as_secs_f64() * 1e3);
    }
    later.sort_by(f64::total_cmp);
    eprintln!(
        "run_code through MCP: first (starts the kernel) {first_ms:.1} ms, later p50 {:.1} ms",
        later[later.len() / 2]
    );
    assert_eq!(second["value"], "42", "{second}");
    assert_eq!(second["new_session"], false);
    assert_eq!(second["cell"], 11);
    cell(&h, &id, "import math\ndef half(v):\n    return v / 2").await;
    let third = cell(&h, &id, "print('sqrt', math.sqrt(16))\nhalf(x + 1)").await;
    assert_eq!(third["stdout"], "sqrt 4.0\n", "{third}");
    assert_eq!(third["value"], "21.0");
    // Output of the cell's subprocesses is the cell's output too.
    let sub = cell(
        &h,
        &id,
        "import subprocess\nsubprocess.run(['echo', 'from a child'])\nNone",
    )
    .await;
    assert_eq!(sub["stdout"], "from a child\n", "{sub}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_comes_back_with_its_traceback_and_the_session_lives_on() {
    let h = start(&[]).await;
    let id = h.create().await;
    cell(&h, &id, "kept = 'still here'").await;
    let out = cell(&h, &id, "def f():\n    return 1 / 0\nf()").await;
    assert_eq!(out["status"], "error", "{out}");
    let err = &out["error"];
    assert_eq!(err["type"], "ZeroDivisionError");
    assert_eq!(err["message"], "division by zero");
    let tb = err["traceback"].as_str().unwrap();
    assert!(tb.contains("return 1 / 0"), "the cell's source line: {tb}");
    assert!(tb.contains("<cell 2>"), "{tb}");
    assert!(
        !tb.contains("kernel"),
        "the kernel's own frames are left out: {tb}"
    );
    let after = cell(&h, &id, "kept").await;
    assert_eq!(after["value"], "'still here'", "{after}");
    let syntax = cell(&h, &id, "def (").await;
    assert_eq!(syntax["error"]["type"], "SyntaxError", "{syntax}");
    let exit = cell(&h, &id, "import sys\nsys.exit(3)").await;
    assert_eq!(exit["error"]["type"], "SystemExit", "{exit}");
    assert_eq!(cell(&h, &id, "kept").await["value"], "'still here'");
}

/// Starts run_code in the background, returning its join handle.
fn spawn_cell(h: &Harness, args: Value) -> tokio::task::JoinHandle<CallToolResult> {
    let peer = h.client.service.peer().clone();
    tokio::spawn(async move { mcp_testkit::call(&peer, "run_code", args).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_streams_as_progress_before_a_long_cell_ends() {
    let mut h = start(&[]).await;
    let id = h.create().await;
    // One write: print() writes the text and its newline separately, and an interrupt may fall between them.
    let running = spawn_cell(
        &h,
        json!({"sandbox_id": id, "code": "import sys, time\nsys.stdout.write('started\\n')\ntime.sleep(600)", "timeout_secs": 600}),
    );
    within("progress from the running cell", h.client.progress.recv())
        .await
        .unwrap();
    assert!(!running.is_finished(), "the cell still runs");
    h.ok("interrupt_session", json!({"sandbox_id": id})).await;
    let out = mcp_testkit::ok_of(&within("the cell", running).await.unwrap());
    assert_eq!(out["stdout"], "started\n", "{out}");
    assert_eq!(out["status"], "interrupted", "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_ends_a_busy_loop_and_keeps_the_state() {
    let mut h = start(&[]).await;
    let id = h.create().await;
    cell(&h, &id, "n = 7").await;
    let running = spawn_cell(
        &h,
        json!({"sandbox_id": id, "code": "print('spinning', flush=True)\nwhile True:\n    n += 0"}),
    );
    within("the loop to start", h.client.progress.recv())
        .await
        .unwrap();
    // While the cell runs, another call on the session is refused, not queued behind it.
    let busy = error_of(
        &h.call("run_code", json!({"sandbox_id": id, "code": "1"}))
            .await,
    );
    assert_eq!(busy["code"], "E_BUSY", "{busy}");
    let sent = h.ok("interrupt_session", json!({"sandbox_id": id})).await;
    assert_eq!(sent["action"], "interrupted");
    let out = mcp_testkit::ok_of(&within("the interrupted cell", running).await.unwrap());
    assert_eq!(out["status"], "interrupted", "{out}");
    assert_eq!(out["error"]["type"], "KeyboardInterrupt");
    assert_eq!(cell(&h, &id, "n").await["value"], "7");
    // An interrupt between cells does nothing.
    h.ok("interrupt_session", json!({"sandbox_id": id})).await;
    assert_eq!(cell(&h, &id, "n * 6").await["value"], "42");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_cell_is_interrupted_and_the_session_kept() {
    let mut h = start(&[]).await;
    let id = h.create().await;
    cell(&h, &id, "c = 'kept'").await;
    let args = json!({"sandbox_id": id, "code": "print('looping', flush=True)\nwhile True: pass"});
    let handle = start_call(&h.client, "run_code", args).await;
    within("the loop to start", h.client.progress.recv())
        .await
        .unwrap();
    handle.cancel(Some("stop".into())).await.unwrap();
    // The interrupt travels after the cancel; the session's lock is free once the call has ended, and the next
    // cell runs in the same globals.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let after = loop {
        let r = h
            .call("run_code", json!({"sandbox_id": id, "code": "c"}))
            .await;
        if r.is_error != Some(true) || std::time::Instant::now() > deadline {
            break mcp_testkit::ok_of(&r);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(after["value"], "'kept'", "{after}");
    assert_eq!(after["new_session"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_past_its_timeout_is_interrupted_and_the_session_kept() {
    let h = start(&[]).await;
    let id = h.create().await;
    cell(&h, &id, "k = 'kept'").await;
    let out = h
        .ok(
            "run_code",
            json!({"sandbox_id": id, "code": "while True: pass", "timeout_secs": 1}),
        )
        .await;
    assert_eq!(out["status"], "timed_out", "{out}");
    assert_eq!(cell(&h, &id, "k").await["value"], "'kept'");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_clears_the_state() {
    let h = start(&[]).await;
    let id = h.create().await;
    cell(&h, &id, "y = 1").await;
    let r = h.ok("restart_session", json!({"sandbox_id": id})).await;
    assert_eq!(r["action"], "restarted");
    let gone = cell(&h, &id, "y").await;
    assert_eq!(gone["error"]["type"], "NameError", "{gone}");
    cell(&h, &id, "y = 2").await;
    let again = h
        .ok(
            "run_code",
            json!({"sandbox_id": id, "code": "'y' in globals()", "restart": true}),
        )
        .await;
    assert_eq!(again["value"], "False", "{again}");
    assert_eq!(again["new_session"], true);
    let none = error_of(
        &h.call(
            "restart_session",
            json!({"sandbox_id": id, "session": "never-made"}),
        )
        .await,
    );
    assert_eq!(none["code"], "E_NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_sessions_are_separate_and_capped() {
    let h = start(&["--sandbox-max-sessions", "2"]).await;
    let id = h.create().await;
    let run =
        |session: &str, code: &str| json!({"sandbox_id": id, "code": code, "session": session});
    h.ok("run_code", run("a", "v = 'a'")).await;
    h.ok("run_code", run("b", "v = 'b'")).await;
    assert_eq!(h.ok("run_code", run("a", "v")).await["value"], "'a'");
    assert_eq!(h.ok("run_code", run("b", "v")).await["value"], "'b'");
    let capped = error_of(&h.call("run_code", run("c", "1")).await);
    assert_eq!(capped["code"], "E_SESSION_LIMIT", "{capped}");
    assert_eq!(capped["details"]["limit"], 2);
    assert_eq!(capped["details"]["sessions"], json!(["a", "b"]));
    h.ok("close_session", json!({"sandbox_id": id, "session": "a"}))
        .await;
    assert_eq!(h.ok("run_code", run("c", "6 * 7")).await["value"], "42");
    let bad = error_of(&h.call("run_code", run("no/slash", "1")).await);
    assert_eq!(bad["code"], "E_INVALID_ARGUMENT");
    assert_eq!(bad["details"]["field"], "session");
    let lang = error_of(
        &h.call(
            "run_code",
            json!({"sandbox_id": id, "code": "1", "language": "javascript"}),
        )
        .await,
    );
    assert_eq!(lang["details"]["field"], "language", "{lang}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_bounds_are_hit_and_named() {
    let h = start(&[]).await;
    let id = h.create().await;
    let out = cell(&h, &id, "print('x' * 3_000_000)").await;
    assert_eq!(out["truncated"], true, "{}", out["notes"]);
    assert_eq!(out["stdout_bytes"], 3_000_001);
    let kept = out["stdout"].as_str().unwrap().len();
    assert!(kept < 1 << 20, "kept {kept} bytes");
    let notes = out["notes"].to_string();
    assert!(
        notes.contains("1 MiB") && notes.contains("3000001"),
        "{notes}"
    );
    let value = cell(&h, &id, "'y' * 100_000").await;
    let repr = value["value"].as_str().unwrap();
    assert!(repr.len() < 40_000, "{}", repr.len());
    assert!(
        value["notes"].to_string().contains("32768"),
        "{}",
        value["notes"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matplotlib_figure_arrives_as_a_png_image() {
    let h = start(&[]).await;
    let id = h.create().await;
    let code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.title('a chart')\nNone";
    let result = h
        .call("run_code", json!({"sandbox_id": id, "code": code}))
        .await;
    let out = mcp_testkit::ok_of(&result);
    assert_eq!(out["status"], "ok", "{out}");
    let fig = &out["figures"][0];
    let index = fig["content_index"].as_u64().unwrap() as usize;
    let block = &wire(&result)["content"][index];
    assert_eq!(block["type"], "image", "{block}");
    assert_eq!(block["mimeType"], "image/png");
    let png = STANDARD.decode(block["data"].as_str().unwrap()).unwrap();
    assert!(png.starts_with(PNG_MAGIC));
    assert!(png.len() <= MAX_IMAGE_BYTES, "{} bytes", png.len());
    assert_eq!(fig["bytes"], png.len());
    assert_eq!(
        fig["width"], 640,
        "matplotlib's default 6.4 in at 100 dpi: {fig}"
    );
    eprintln!("a typical chart: {} bytes of PNG", png.len());
    // Figures are closed after a cell, as in a notebook: the next cell returns none.
    assert_eq!(cell(&h, &id, "1").await["figures"], json!([]));

    // A large, incompressible figure is re-rendered smaller until it fits.
    let noise = "import numpy as np\nfig = plt.figure(figsize=(30, 30), dpi=200)\n\
                 plt.imshow(np.random.default_rng(1).random((1500, 1500)))\nNone";
    let result = h
        .call("run_code", json!({"sandbox_id": id, "code": noise}))
        .await;
    let out = mcp_testkit::ok_of(&result);
    let fig = &out["figures"][0];
    assert!(fig["width"].as_u64().unwrap() <= 1600, "{fig}");
    let block = &wire(&result)["content"][fig["content_index"].as_u64().unwrap() as usize];
    let png = STANDARD.decode(block["data"].as_str().unwrap()).unwrap();
    assert!(png.starts_with(PNG_MAGIC));
    assert!(png.len() <= MAX_IMAGE_BYTES, "{} bytes", png.len());
    eprintln!("a 30-inch noise figure: {fig}");
}

/// Debian's matplotlib reads `/etc/matplotlibrc`; the sandbox's own `/etc` carries a copy, so a plain program
/// (not only a session's kernel, which points MATPLOTLIBRC elsewhere) can import it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_code_imports_matplotlib_without_a_session() {
    let h = start(&[]).await;
    let id = h.create().await;
    let out = h
        .ok(
            "execute_code",
            json!({"sandbox_id": id, "language": "python",
                   "code": "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot\nprint('backend', matplotlib.get_backend())"}),
        )
        .await;
    assert_eq!(out["exit_code"], 0, "{out}");
    assert_eq!(out["stdout"], "backend agg\n", "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_under_the_output_folder_comes_back_as_a_resource_link() {
    use rmcp::model::ReadResourceRequestParams;
    let h = start(&[]).await;
    let id = h.create().await;
    let code = "import os\nwith open('/workspace/output/data.csv', 'w') as f:\n    f.write('a,b\\n1,2\\n')\n\
                open('/workspace/elsewhere.txt', 'w').write('not output')";
    let result = h
        .call("run_code", json!({"sandbox_id": id, "code": code}))
        .await;
    let out = mcp_testkit::ok_of(&result);
    assert_eq!(out["files"].as_array().unwrap().len(), 1, "{out}");
    let file = &out["files"][0];
    assert_eq!(file["path"], "/workspace/output/data.csv");
    assert_eq!(file["mime_type"], "text/csv");
    let uri = format!("sandbox://{id}/workspace/output/data.csv");
    assert_eq!(file["uri"], uri.as_str());
    let content = wire(&result)["content"].clone();
    let link = content
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "resource_link")
        .unwrap_or_else(|| panic!("no resource link in {content}"));
    assert_eq!(link["uri"], uri.as_str());
    assert_eq!(link["name"], "data.csv");
    let read = within(
        "resources/read",
        h.client.read_resource(ReadResourceRequestParams::new(uri)),
    )
    .await
    .unwrap();
    let read = serde_json::to_value(&read).unwrap();
    assert_eq!(read["contents"][0]["text"], "a,b\n1,2\n", "{read}");
    let by_tool = h
        .ok(
            "read_file",
            json!({"sandbox_id": id, "path": "/workspace/output/data.csv"}),
        )
        .await;
    assert_eq!(by_tool["content"], "a,b\n1,2\n");
    // An unchanged file is not listed again.
    assert_eq!(cell(&h, &id, "1").await["files"], json!([]));
}

/// The kernel's result file is written in the process the cell runs in, so a cell can forge it (here by
/// replacing `json.dump`): thousands of files, huge notes and a status of its own come back held to the
/// kernel's limits, the bridge's own count of what was left out beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_kernel_result_is_held_to_the_kernels_limits() {
    let h = start(&[]).await;
    let id = h.create().await;
    let code = "import json\n\
                _dump = json.dump\n\
                def forged(obj, f, *a, **k):\n\
                \x20   obj['files'] = [{'path': '/workspace/output/f%d' % i, 'bytes': 1, 'mime_type': 'text/plain'} for i in range(3000)]\n\
                \x20   obj['notes'] = ['n' * 100000 for _ in range(6)] + ['x'] * 100\n\
                \x20   obj['status'] = 'bridge: all good ' * 1000\n\
                \x20   return _dump(obj, f, *a, **k)\n\
                json.dump = forged";
    let result = h
        .call("run_code", json!({"sandbox_id": id, "code": code}))
        .await;
    let out = mcp_testkit::ok_of(&result);
    assert_eq!(
        out["files"].as_array().unwrap().len(),
        20,
        "{}",
        out["files"]
    );
    let links = wire(&result)["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "resource_link")
        .count();
    assert_eq!(links, 20);
    let notes = out["notes"].as_array().unwrap();
    // 20 of the kernel's, the count of the rest, and the bridge's own (the status, the files left out).
    assert!(notes.len() <= 24, "{} notes", notes.len());
    assert!(
        notes.iter().all(|n| n.as_str().unwrap().len() < 1200),
        "a note is too long"
    );
    assert!(
        notes.iter().any(|n| n.as_str().unwrap().contains("2980")),
        "the files left out are counted: {notes:?}"
    );
    assert_eq!(out["status"], "error", "an unknown status is not passed on");
    let sent = serde_json::to_string(&result).unwrap().len();
    assert!(sent < 200_000, "the result is {sent} bytes");
}

/// A cell that forges its figures' sizes (here 1 byte each for eight PNGs of 200 KB) gets images held to
/// the result's image budget by the bytes actually read, not by the sizes it claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_figure_sizes_do_not_pass_the_images_budget() {
    let h = start(&[]).await;
    let id = h.create().await;
    let code = "import json\n\
                for i in range(8):\n\
                \x20   open('/workspace/f%d.png' % i, 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(200000))\n\
                _dump = json.dump\n\
                def forged(obj, f, *a, **k):\n\
                \x20   obj['figures'] = [{'path': '/workspace/f%d.png' % i, 'bytes': 1, 'width': 10, 'height': 10, 'dpi': 72.0} for i in range(8)]\n\
                \x20   return _dump(obj, f, *a, **k)\n\
                json.dump = forged";
    let result = h
        .call("run_code", json!({"sandbox_id": id, "code": code}))
        .await;
    let out = mcp_testkit::ok_of(&result);
    let images: usize = wire(&result)["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "image")
        .map(|b| STANDARD.decode(b["data"].as_str().unwrap()).unwrap().len())
        .sum();
    // bridge_sandbox's MAX_IMAGES_BYTES.
    assert!(images <= 512 << 10, "{images} bytes of images");
    assert_eq!(
        out["figures"].as_array().unwrap().len(),
        2,
        "{}",
        out["figures"]
    );
    assert!(
        out["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("left out")),
        "{}",
        out["notes"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dataframe_and_a_list_of_dicts_come_back_as_text_tables() {
    let h = start(&[]).await;
    let id = h.create().await;
    let out = cell(
        &h,
        &id,
        "import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Bergen'], 'people': [709000, 291000]})",
    )
    .await;
    assert!(out.get("value").is_none(), "{out}");
    let table = out["table"].as_str().unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(
        lines[0].contains("city") && lines[0].contains("people"),
        "{table}"
    );
    assert!(
        lines[1].contains("Oslo") && lines[1].contains("709000"),
        "{table}"
    );
    let rows = cell(&h, &id, "[{'n': 1, 'sq': 1}, {'n': 2, 'sq': 4}]").await;
    let table = rows["table"].as_str().unwrap();
    assert_eq!(table, "n  sq\n-  --\n1  1\n2  4", "{table}");
}

/// Host pids of the kernels of sandbox `id` (their environment names the session directory).
fn kernels_of(id: &str) -> Vec<u32> {
    let marker = "MCP_KERNEL_ROLE=serve";
    let dir = format!("MCP_KERNEL_DIR=/tmp/.mcp-kernel-{id}/");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let env = String::from_utf8_lossy(&env);
            env.split('\0').any(|v| v == marker) && env.split('\0').any(|v| v.starts_with(&dir))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_end_with_their_sandbox() {
    let h = start(&[]).await;
    let id = h.create().await;
    for name in ["one", "two"] {
        h.ok(
            "run_code",
            json!({"sandbox_id": id, "code": "1", "session": name}),
        )
        .await;
    }
    assert_eq!(kernels_of(&id).len(), 2, "two kernels run");
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !kernels_of(&id).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        kernels_of(&id),
        Vec::<u32>::new(),
        "the kernels ended with the sandbox"
    );
    let gone = error_of(
        &h.call("run_code", json!({"sandbox_id": id, "code": "1"}))
            .await,
    );
    assert_eq!(gone["code"], "E_NOT_FOUND");
}

/// The kernel is one more program of the sandbox: its cells run as the unprivileged user, under no_new_privs,
/// the seccomp filter and Landlock, with no terminal, exactly as execute_code's programs do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_runs_as_confined_as_any_sandbox_program() {
    let h = start(&[]).await;
    let id = h.create().await;
    let code = "import os, ctypes, errno\n\
                status = open('/proc/self/status').read()\n\
                fields = dict(l.split(':\\t', 1) for l in status.splitlines() if ':\\t' in l)\n\
                libc = ctypes.CDLL(None, use_errno=True)\n\
                unshare = libc.unshare(0x10000000)\n\
                unshare_errno = ctypes.get_errno()\n\
                try:\n    open('/usr/x', 'w'); usr = 'written'\nexcept OSError as e:\n    usr = errno.errorcode[e.errno]\n\
                try:\n    os.open('/dev/tty', os.O_RDWR); tty = 'opened'\nexcept OSError as e:\n    tty = errno.errorcode[e.errno]\n\
                (os.getuid(), fields['NoNewPrivs'].strip(), fields['Seccomp'].strip(), unshare, \
                errno.errorcode[unshare_errno], usr, tty)";
    let out = cell(&h, &id, code).await;
    assert_eq!(
        out["value"], "(1000, '1', '2', -1, 'EPERM', 'EROFS', 'ENOENT')",
        "{out}"
    );
}
