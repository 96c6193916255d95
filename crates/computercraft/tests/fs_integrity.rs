//! Files stay whole whatever else happens on the computer: two writes to one path, a write cancelled half-way,
//! a file that changes while it is read, names CC would cut short, and the root given to `fs_delete`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use mcp_testkit::start_call;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use support::ccsim::SimKind;
use support::harness::{Harness, error_of, ok_of, start_bridge, test_config};

/// Temp files a write leaves beside `name` in `dir` (on the host side of the simulated disk).
fn parts_of(dir: &Path, name: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{name}.mcp-part")))
        .collect()
}

/// A call whose result may be larger than the core's default cap (the test checks every byte).
async fn call_whole(h: &Harness, tool: &str, args: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().unwrap().clone());
    params.meta = Some(Default::default());
    params.meta.as_mut().unwrap().0.0.insert(
        bridge_core::tool::MAX_RESULT_BYTES_META_KEY.into(),
        json!(4 << 20),
    );
    support::harness::within(tool, h.client.call_tool(params))
        .await
        .unwrap()
}

fn filled(byte: u8, len: usize) -> Vec<u8> {
    // Varied within the file, so a spliced file cannot look like either whole one.
    (0..len)
        .map(|i| byte.wrapping_add((i / 7 % 5) as u8))
        .collect()
}

/// Two writes to one path at once leave exactly one of them, and a call that says it succeeded wrote
/// the bytes that are there (or the last of the two to finish did).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writes_to_one_path_never_splice() {
    let h = start_bridge(test_config()).await;
    let mut cfg = h.computer(70, None, SimKind::Computer);
    cfg.space_limit = 4_000_000;
    let sim = h.link(cfg).await;
    let root = sim.state().cfg.root.clone();
    for round in 0..3 {
        let a = filled(b'a', 300_000);
        let b = filled(b'K', 300_000);
        let write = |data: &[u8]| {
            h.call(
                "fs_write",
                json!({"computer": 70, "path": "same.bin", "content": bridge_computercraft::b64::encode(data), "encoding": "base64"}),
            )
        };
        let (ra, rb) = tokio::join!(write(&a), write(&b));
        let on_disk = std::fs::read(root.join("same.bin")).unwrap();
        assert!(
            on_disk == a || on_disk == b,
            "round {round}: the file is neither write ({} bytes; a: {:?}, b: {:?})",
            on_disk.len(),
            ra.structured_content,
            rb.structured_content
        );
        for (r, mine) in [(&ra, &a), (&rb, &b)] {
            if r.is_error == Some(true) {
                let e = error_of(r);
                assert!(
                    e["message"].as_str().unwrap().contains("same.bin"),
                    "a failed write says which file: {e}"
                );
            } else {
                assert_eq!(ok_of(r)["size"], 300_000);
                // A write that succeeded is the file, unless the other one also succeeded (after it).
                let both_ok = ra.is_error != Some(true) && rb.is_error != Some(true);
                assert!(
                    on_disk == *mine || both_ok,
                    "round {round}: a success that is not on disk"
                );
            }
        }
        assert!(
            ra.is_error != Some(true) || rb.is_error != Some(true),
            "round {round}: both failed: {ra:?} {rb:?}"
        );
        assert_eq!(
            parts_of(&root, "same.bin"),
            Vec::<String>::new(),
            "round {round}"
        );
    }
    sim.stop();
}

/// An `fs_write` cancelled half-way leaves no temp file behind (on a 1 MB disk it would hold the space the
/// player's own programs need), and the file it was replacing is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_write_leaves_no_temp_file() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(71, None, SimKind::Computer)).await;
    let root = sim.state().cfg.root.clone();
    std::fs::write(root.join("keep.bin"), b"old").unwrap();
    // While this run lasts, the second chunk of the write waits inside `fs.open` (its own coroutine yields,
    // the computer goes on), so the cancel lands mid-write every time. The run's change to `fs` is undone
    // when it ends.
    let holder = h.call(
        "run_lua",
        json!({"computer": 71, "timeout_ms": 60000, "code": r#"
            local open = fs.open
            fs.open = function(path, mode)
              if mode == "ab" and path:find("keep%.bin%.mcp%-part") then
                local h = open("held", "w") h.write("1") h.close()
                os.pullEvent("never")
              end
              return open(path, mode)
            end
            os.pullEvent("release")
            return true
        "#}),
    );
    let data = filled(b'z', 300_000);
    let args = json!({"computer": 71, "path": "keep.bin", "content": bridge_computercraft::b64::encode(&data), "encoding": "base64"});
    let canceller = async {
        let handle = start_call(&h.client, "fs_write", args).await;
        sim.wait_file(
            Duration::from_secs(30),
            "held",
            "the write never reached its second chunk",
        )
        .await;
        assert!(
            !parts_of(&root, "keep.bin").is_empty(),
            "the first chunk is on disk"
        );
        handle.cancel(Some("changed my mind".into())).await.unwrap();
        // A hang guard: the clean-up follows the cancel within milliseconds on a quiet machine.
        sim.wait_for(Duration::from_secs(60), |_| {
            parts_of(&root, "keep.bin").is_empty()
        })
        .await;
        sim.queue_event(vec!["release".into()]);
    };
    let (held, ()) = tokio::join!(holder, canceller);
    assert_eq!(ok_of(&held)["values"], json!([true]));
    assert_eq!(
        parts_of(&root, "keep.bin"),
        Vec::<String>::new(),
        "temp file left"
    );
    assert_eq!(std::fs::read(root.join("keep.bin")).unwrap(), b"old");
    sim.stop();
}

/// A file replaced while it is read comes back whole (one version or the other) or as an `E_CONFLICT`
/// naming it; never spliced from two versions, never cut short as a success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_changing_while_read_is_read_whole_or_refused() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(72, None, SimKind::Computer)).await;
    let a = "A".repeat(200_000);
    let b = "B".repeat(150_000);
    std::fs::write(sim.state().cfg.root.join("flip.txt"), &a).unwrap();
    // Replaces the file every 100 ms until told to stop.
    let writer = h.call(
        "run_lua",
        json!({"computer": 72, "timeout_ms": 100000, "code": r#"
            local a, b = string.rep("A", 200000), string.rep("B", 150000)
            local n = 0
            while not fs.exists("stop") do
              sleep(0.1)
              n = n + 1
              local h = fs.open("flip.txt", "wb") h.write(n % 2 == 0 and a or b) h.close()
            end
            return n
        "#}),
    );
    let reader = async {
        let mut seen = (0, 0, 0);
        for _ in 0..10 {
            let r = call_whole(&h, "fs_read", json!({"computer": 72, "path": "flip.txt"})).await;
            if r.is_error == Some(true) {
                let e = error_of(&r);
                assert_eq!(e["code"], "E_CONFLICT", "{e}");
                let msg = e["message"].as_str().unwrap();
                assert!(msg.contains("flip.txt") && msg.contains("changed"), "{msg}");
                seen.2 += 1;
                continue;
            }
            let out = ok_of(&r);
            let content = out["content"].as_str().unwrap();
            if content == a {
                seen.0 += 1;
            } else if content == b {
                seen.1 += 1;
            } else {
                let kinds: std::collections::BTreeSet<char> = content.chars().collect();
                panic!(
                    "a torn read reported as success: {} bytes of {kinds:?}",
                    content.len()
                );
            }
        }
        std::fs::write(sim.state().cfg.root.join("stop"), b"1").unwrap();
        seen
    };
    let (w, seen) = tokio::join!(writer, reader);
    let swaps = ok_of(&w)["values"][0].as_u64().unwrap();
    eprintln!(
        "all A {}, all B {}, refused {}; {swaps} swaps",
        seen.0, seen.1, seen.2
    );
    // The file stands still again: it reads back whole.
    let r = call_whole(&h, "fs_read", json!({"computer": 72, "path": "flip.txt"})).await;
    let content = ok_of(&r)["content"].as_str().unwrap().to_owned();
    assert!(content == a || content == b);
    sim.stop();
}

/// A file rewritten between every chunk (the run below swaps it whenever the client yields, as it does while
/// it encodes each chunk) reads as exactly one version: the one it had when its first chunk was read, since the
/// client copies the whole file in one step and serves every chunk from that copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_rewritten_between_every_chunk_reads_as_one_version() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(74, None, SimKind::Computer)).await;
    let a = "A".repeat(200_000);
    std::fs::write(sim.state().cfg.root.join("flip.txt"), &a).unwrap();
    let flipper = h.call(
        "run_lua",
        json!({"computer": 74, "timeout_ms": 60000, "code": r#"
            local a, b = string.rep("A", 200000), string.rep("B", 150000)
            local h0 = fs.open("hooked", "w") h0.close()
            local n = 0
            while true do
              local ev = os.pullEvent()
              if ev == "release" then break end
              if ev == "mcp_breathe" then
                n = n + 1
                local h = fs.open("flip.txt", "wb") h.write(n % 2 == 0 and a or b) h.close()
              end
            end
            return n
        "#}),
    );
    let reader = async {
        sim.wait_file(Duration::from_secs(30), "hooked", "the run never started")
            .await;
        let r = call_whole(&h, "fs_read", json!({"computer": 74, "path": "flip.txt"})).await;
        sim.queue_event(vec!["release".into()]);
        r
    };
    let (flips, r) = tokio::join!(flipper, reader);
    let out = ok_of(&r);
    let content = out["content"].as_str().unwrap();
    assert!(
        content == a,
        "not the version of the first chunk: {} bytes of {:?}",
        content.len(),
        content
            .chars()
            .collect::<std::collections::BTreeSet<char>>()
    );
    let flips = ok_of(&flips)["values"][0].as_u64().unwrap();
    assert!(
        flips >= 4,
        "the file was rewritten only {flips} times while it was read"
    );
    sim.stop();
}

/// A log a program keeps appending to reads whole, as it was at the first chunk, instead of failing with
/// E_CONFLICT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_appended_to_between_chunks_reads_as_of_its_first_chunk() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(77, None, SimKind::Computer)).await;
    let root = sim.state().cfg.root.clone();
    let initial: String = (0..10_000).map(|i| format!("entry {i:05}\n")).collect();
    std::fs::write(root.join("log.txt"), &initial).unwrap();
    let appender = h.call(
        "run_lua",
        json!({"computer": 77, "timeout_ms": 60000, "code": r#"
            local h0 = fs.open("hooked", "w") h0.close()
            local n = 0
            while true do
              local ev = os.pullEvent()
              if ev == "release" then break end
              if ev == "mcp_breathe" then
                n = n + 1
                local h = fs.open("log.txt", "a") h.write(("appended %d\n"):format(n)) h.close()
              end
            end
            return n
        "#}),
    );
    let reader = async {
        sim.wait_file(Duration::from_secs(30), "hooked", "the run never started")
            .await;
        let r = call_whole(&h, "fs_read", json!({"computer": 77, "path": "log.txt"})).await;
        sim.queue_event(vec!["release".into()]);
        r
    };
    let (appended, r) = tokio::join!(appender, reader);
    let out = ok_of(&r);
    assert_eq!(out["size"], initial.len());
    assert!(
        out["content"].as_str().unwrap() == initial,
        "not the log as it was at the first chunk"
    );
    let appended = ok_of(&appended)["values"][0].as_u64().unwrap();
    assert!(appended >= 4, "appended only {appended} times");
    let now = std::fs::read_to_string(root.join("log.txt")).unwrap();
    assert!(now.len() > initial.len() && now.starts_with(&initial));
    sim.stop();
}

/// The client's copy of a file being read is dropped when the read is cancelled, and the copies it keeps are
/// bounded (four at most, 8 MiB in all): a read that finds no room is served without a copy rather than take
/// one from a read under way; a file over 8 MiB gets no copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_copies_are_dropped_on_cancel_and_bounded() {
    let h = start_bridge(test_config()).await;
    let mut cfg = h.computer(78, None, SimKind::Computer);
    cfg.space_limit = 40_000_000;
    // The cancelled read below is held by a loop that must not yield (a yield would let the client take the
    // cancel early), while the test waits for the cancel to reach the computer: on a loaded CI machine that
    // took past CC's 7 s, and the abort ended the run first. No limit on yielding is under test here; a minute
    // still ends a hold that went wrong before the test's own limit does.
    cfg.yield_timeout = Duration::from_secs(60);
    let sim = h.link(cfg).await;
    let root = sim.state().cfg.root.clone();
    let big = filled(b'a', 100_000);
    std::fs::write(root.join("big.bin"), &big).unwrap();
    let comp = h.state.registry.get(78).unwrap();
    let read = |path: &str, id: &str, offset: usize, length: usize| {
        comp.request(
            "fs.read",
            json!({"path": path, "offset": offset, "length": length, "read": id}),
            Duration::from_secs(10),
        )
    };
    let data = |v: &Value| bridge_computercraft::b64::decode(v["data"].as_str().unwrap()).unwrap();
    for id in ["t1", "t2", "t3", "t4"] {
        let r = read("big.bin", id, 0, 1000).await.unwrap();
        assert_eq!(r["read"], id, "{id}: the client kept no copy: {r}");
        assert_eq!(data(&r), big[..1000]);
    }
    // A fifth read while four are under way takes none of their copies: it is served without one.
    let r = read("big.bin", "t5", 0, 1000).await.unwrap();
    assert!(r.get("read").is_none(), "a fifth copy was kept: {r}");
    assert_eq!(data(&r), big[..1000]);
    for id in ["t1", "t2", "t3", "t4"] {
        let r = read("big.bin", id, 1000, 1000).await.unwrap();
        assert_eq!(data(&r), big[1000..2000], "{id}");
    }
    // The last chunk drops its copy.
    let r = read("big.bin", "t2", 99_000, 1000).await.unwrap();
    assert_eq!(r["eof"], true);
    let e = read("big.bin", "t2", 99_000, 1000).await.unwrap_err();
    assert_eq!(e.code(), bridge_core::ErrorCode::Conflict, "{e:?}");
    assert!(e.message().contains("big.bin"), "{e:?}");
    assert_eq!(e.details()["read"], "dropped", "{e:?}");

    // Bytes: a second 5 MB copy does not fit in 8 MiB beside the first, which a read under way still uses.
    std::fs::write(root.join("five.bin"), filled(b'f', 5_000_000)).unwrap();
    assert_eq!(read("five.bin", "m1", 0, 10).await.unwrap()["read"], "m1");
    assert!(
        read("five.bin", "m2", 0, 10)
            .await
            .unwrap()
            .get("read")
            .is_none()
    );
    assert_eq!(
        data(&read("five.bin", "m1", 10, 10).await.unwrap()),
        filled(b'f', 20)[10..]
    );
    // Over 8 MiB: no copy at all (the bridge refuses such a file by its size).
    std::fs::write(root.join("nine.bin"), vec![b'9'; 9 << 20]).unwrap();
    let r = read("nine.bin", "n1", 0, 10).await.unwrap();
    assert_eq!(r["size"], 9 << 20);
    assert!(r.get("read").is_none(), "{r}");
    let e = error_of(
        &h.call("fs_read", json!({"computer": 78, "path": "nine.bin"}))
            .await,
    );
    assert_eq!(e["code"], "E_TOO_LARGE", "{e}");

    // Cancelled mid-read: the run below learns the read's id from the request (every task may see the link's
    // events) and keeps the computer from answering until the cancel has reached it.
    let holder = h.call(
        "run_lua",
        json!({"computer": 78, "timeout_ms": 60000, "code": r#"
            local h0 = fs.open("hooked", "w") h0.close()
            while true do
              local _, _, text = os.pullEvent("websocket_message")
              local id = type(text) == "string" and text:find('"fs.read"', 1, true) and text:match('"read":"(%w+)"')
              if id then
                local h = fs.open("read-id", "w") h.write(id) h.close()
                while not fs.exists("go") do end
                return id
              end
            end
        "#}),
    );
    let canceller = async {
        sim.wait_file(Duration::from_secs(30), "hooked", "the run never started")
            .await;
        let call = start_call(
            &h.client,
            "fs_read",
            json!({"computer": 78, "path": "big.bin"}),
        )
        .await;
        sim.wait_file(
            Duration::from_secs(30),
            "read-id",
            "the read never reached the computer",
        )
        .await;
        call.cancel(Some("changed my mind".into())).await.unwrap();
        assert!(
            sim.wait_for(Duration::from_secs(30), |s| s.queued_message("\"cancel\""))
                .await,
            "the cancel never reached the computer"
        );
        std::fs::write(root.join("go"), b"1").unwrap();
    };
    let (held, ()) = tokio::join!(holder, canceller);
    let id = ok_of(&held)["values"][0].as_str().unwrap().to_owned();
    assert_eq!(std::fs::read_to_string(root.join("read-id")).unwrap(), id);
    let e = read("big.bin", &id, 45 * 1024, 1000).await.unwrap_err();
    assert_eq!(
        e.details()["read"],
        "dropped",
        "the cancelled read's copy is still held: {e:?}"
    );
    sim.stop();
}

/// CC cuts a name of 255 characters or more to 255, so a longer name (or one whose temp name would be)
/// is refused before anything is written; and `fs_delete` refuses the root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_cc_would_cut_and_the_root_are_refused() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(73, None, SimKind::Computer)).await;
    let root = sim.state().cfg.root.clone();
    let at_limit = "x".repeat(255);
    std::fs::write(root.join(&at_limit), b"keep me").unwrap();
    std::fs::write(root.join("other.txt"), b"still here").unwrap();
    for path in [
        at_limit.clone(),
        "x".repeat(300),
        format!("dir/{}", "y".repeat(250)),
        format!("{}/f.txt", "d".repeat(256)),
    ] {
        let e = error_of(
            &h.call(
                "fs_write",
                json!({"computer": 73, "path": path, "content": "new"}),
            )
            .await,
        );
        assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{}: {e}", path.len());
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains("path") && msg.contains("255"), "{msg}");
    }
    assert_eq!(std::fs::read(root.join(&at_limit)).unwrap(), b"keep me");
    let e = error_of(
        &h.call("fs_read", json!({"computer": 73, "path": "x".repeat(300)}))
            .await,
    );
    assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{e}");
    // A name just short enough for its temp file still goes through.
    let fits = "w".repeat(200);
    ok_of(
        &h.call(
            "fs_write",
            json!({"computer": 73, "path": fits, "content": "fits"}),
        )
        .await,
    );
    assert_eq!(std::fs::read(root.join(&fits)).unwrap(), b"fits");

    for path in ["/", ".", "a/..", "./", "\\"] {
        let e = error_of(
            &h.call("fs_delete", json!({"computer": 73, "path": path}))
                .await,
        );
        assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{path:?}: {e}");
        assert!(e["message"].as_str().unwrap().contains("root"), "{e}");
    }
    assert_eq!(
        std::fs::read(root.join("other.txt")).unwrap(),
        b"still here"
    );
    sim.stop();
}

/// A write cancelled between its chunks while every request slot of the computer is taken (the
/// bridge's and the client's: 32 long runs) still has its temp file deleted: the bridge's `fs.abort` waits for no
/// slot and the client does not refuse it as busy. The next write to the file then leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cancelled_while_the_computer_is_full_leaves_no_temp_file() {
    let mut cfg = test_config();
    // The client's own cap is 32 too: the bridge fills both.
    cfg.max_in_flight = 32;
    // The held first chunk must outlast the 30 runs' start: on a loaded machine that took past a short limit.
    cfg.request_timeout = Duration::from_secs(60);
    let h = start_bridge(cfg).await;
    let sim = h.link(h.computer(75, None, SimKind::Computer)).await;
    let root = sim.state().cfg.root.clone();
    std::fs::create_dir_all(root.join("started")).unwrap();
    std::fs::write(root.join("keep.bin"), b"old").unwrap();
    // Holds the write's first chunk inside `fs.open` until "go", so the runs below can take every other slot.
    let holder = h.call(
        "run_lua",
        json!({"computer": 75, "timeout_ms": 60000, "code": r#"
            local open = fs.open
            fs.open = function(path, mode)
              if mode == "wb" and path:find("keep%.bin%.mcp%-part") then
                local h = open("held", "w") h.write("1") h.close()
                os.pullEvent("go")
              end
              return open(path, mode)
            end
            local h = open("hooked", "w") h.close()
            os.pullEvent("release")
            return true
        "#}),
    );
    let filler = |n: String| {
        format!(
            r#"local h = fs.open("started/{n}", "w") h.close() os.pullEvent("release") return "{n}""#
        )
    };
    let started = || std::fs::read_dir(root.join("started")).unwrap().count();
    let comp = h.state.registry.get(75).unwrap();
    let driver = async {
        sim.wait_file(Duration::from_secs(30), "hooked", "the run never started")
            .await;
        let data = filled(b'z', 60_000);
        let args = json!({"computer": 75, "path": "keep.bin", "content": bridge_computercraft::b64::encode(&data), "encoding": "base64"});
        let write = start_call(&h.client, "fs_write", args).await;
        sim.wait_file(Duration::from_secs(30), "held", "the write never started")
            .await;
        // 30 runs: with the holder and the held chunk, all 32 slots.
        let fillers = futures::future::join_all((0..30).map(|n| {
            h.call(
                "run_lua",
                json!({"computer": 75, "timeout_ms": 60000, "code": filler(n.to_string())}),
            )
        }));
        let rest = async {
            assert!(
                sim.wait_for(Duration::from_secs(30), |_| started() == 30)
                    .await,
                "the runs did not all start: {}",
                sim.output()
            );
            assert_eq!(comp.in_flight(), 32);
            // One more run, queued for a slot before the first chunk ends: the slot that chunk frees is its, so the
            // write's second chunk finds none.
            let extra = comp.request(
                "lua.run",
                json!({"code": filler("extra".into())}),
                Duration::from_secs(60),
            );
            tokio::pin!(extra);
            assert!(futures::poll!(extra.as_mut()).is_pending());
            sim.queue_event(vec!["go".into()]);
            let cancel_when_full = async {
                assert!(
                    sim.wait_for(Duration::from_secs(30), |_| started() == 31)
                        .await,
                    "the extra run never started: {}",
                    sim.output()
                );
                assert!(
                    !parts_of(&root, "keep.bin").is_empty(),
                    "the first chunk is on disk"
                );
                write.cancel(Some("changed my mind".into())).await.unwrap();
                // The temp file goes while every slot is still taken.
                let gone = sim
                    .wait_for(Duration::from_secs(20), |_| {
                        parts_of(&root, "keep.bin").is_empty()
                    })
                    .await;
                sim.queue_event(vec!["release".into()]);
                gone
            };
            let (extra, gone) = tokio::join!(extra, cancel_when_full);
            assert!(extra.is_ok(), "{extra:?}");
            gone
        };
        let (fillers, gone) = tokio::join!(fillers, rest);
        for r in &fillers {
            ok_of(r);
        }
        gone
    };
    let (held, gone) = tokio::join!(holder, driver);
    assert_eq!(ok_of(&held)["values"], json!([true]));
    assert!(
        gone,
        "the cancelled write's temp file stayed while the computer was full: {:?}",
        parts_of(&root, "keep.bin")
    );
    assert_eq!(std::fs::read(root.join("keep.bin")).unwrap(), b"old");
    // The next write to the file leaves nothing behind either.
    ok_of(
        &h.call(
            "fs_write",
            json!({"computer": 75, "path": "keep.bin", "content": "new"}),
        )
        .await,
    );
    assert_eq!(parts_of(&root, "keep.bin"), Vec::<String>::new());
    assert_eq!(std::fs::read(root.join("keep.bin")).unwrap(), b"new");
    sim.stop();
}

/// A write whose end the computer never heard of (its abort lost) leaves a temp file; the next write
/// to that file deletes it, whatever the client still thinks of it, since the bridge runs one write per file at a
/// time. Other files' temp files and names that only look alike stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_write_deletes_the_temp_files_of_writes_before_it() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(76, None, SimKind::Computer)).await;
    let root = sim.state().cfg.root.clone();
    let comp = h.state.registry.get(76).unwrap();
    let chunk = |part: &str, data: &str| {
        comp.request(
            "fs.write",
            json!({"path": "a/f.txt", "data": bridge_computercraft::b64::encode(data.as_bytes()), "part": part, "write": "lost1"}),
            Duration::from_secs(10),
        )
    };
    // The first chunk of a write the bridge then lost track of.
    let r = chunk("first", "half of it").await.unwrap();
    assert_eq!(r["done"], false);
    let dir = root.join("a");
    std::fs::write(dir.join("f.txt.mcp-part"), b"from an old bridge").unwrap();
    std::fs::write(dir.join("f.txt.mcp-partner"), b"a file of its own").unwrap();
    std::fs::write(dir.join("g.txt.mcp-part-x1"), b"another file's write").unwrap();
    ok_of(
        &h.call(
            "fs_write",
            json!({"computer": 76, "path": "/a//f.txt", "content": "whole"}),
        )
        .await,
    );
    assert_eq!(std::fs::read(dir.join("f.txt")).unwrap(), b"whole");
    let mut left = parts_of(&dir, "f.txt");
    left.sort();
    assert_eq!(left, ["f.txt.mcp-partner"]);
    assert!(dir.join("g.txt.mcp-part-x1").exists());
    // The lost write is forgotten: its last chunk finds no write in progress.
    let e = chunk("last", "rest").await.unwrap_err();
    assert_eq!(e.code(), bridge_core::ErrorCode::Conflict, "{e:?}");
    assert_eq!(std::fs::read(dir.join("f.txt")).unwrap(), b"whole");
    sim.stop();
}

/// Writes to one file spelt three ways (`a/b.txt`, `/a//b.txt`, `a/./b.txt`) take turns: each
/// finds no other write's temp file beside its own at any chunk, and all three succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_to_one_file_spelt_differently_take_turns() {
    let h = start_bridge(test_config()).await;
    let mut cfg = h.computer(79, None, SimKind::Computer);
    cfg.space_limit = 4_000_000;
    let sim = h.link(cfg).await;
    let root = sim.state().cfg.root.clone();
    let holder = h.call(
        "run_lua",
        json!({"computer": 79, "timeout_ms": 60000, "code": r#"
            local open, list = fs.open, fs.list
            fs.open = function(path, mode)
              local name = type(path) == "string" and path:match("^a/(b%.txt%.mcp%-part.*)$")
              if name and (mode == "wb" or mode == "ab") then
                for _, n in ipairs(list("a")) do
                  if n ~= name and n:find("b.txt.mcp-part", 1, true) == 1 then
                    local h = open("overlap", "a") h.write(n .. " beside " .. name .. "\n") h.close()
                  end
                end
              end
              return open(path, mode)
            end
            local h = open("hooked", "w") h.close()
            os.pullEvent("release")
            return true
        "#}),
    );
    let writes = async {
        sim.wait_file(Duration::from_secs(30), "hooked", "the run never started")
            .await;
        let contents = [
            filled(b'a', 150_000),
            filled(b'K', 150_000),
            filled(b'q', 150_000),
        ];
        let write = |path: &'static str, data: &[u8]| {
            h.call(
                "fs_write",
                json!({"computer": 79, "path": path, "content": bridge_computercraft::b64::encode(data), "encoding": "base64"}),
            )
        };
        let rs = tokio::join!(
            write("a/b.txt", &contents[0]),
            write("/a//b.txt", &contents[1]),
            write("a/./b.txt", &contents[2]),
        );
        sim.queue_event(vec!["release".into()]);
        (contents, [rs.0, rs.1, rs.2])
    };
    let (held, (contents, results)) = tokio::join!(holder, writes);
    ok_of(&held);
    for r in &results {
        assert_eq!(ok_of(r)["size"], 150_000);
    }
    let overlap = std::fs::read_to_string(root.join("overlap")).unwrap_or_default();
    assert!(
        overlap.is_empty(),
        "two writes to a/b.txt at once:\n{overlap}"
    );
    let on_disk = std::fs::read(root.join("a/b.txt")).unwrap();
    assert!(contents.contains(&on_disk), "a/b.txt is none of the writes");
    assert_eq!(parts_of(&root.join("a"), "b.txt"), Vec::<String>::new());
    sim.stop();
}

/// Reads under way never take each other's copies: six large files read at once (more than the four copies the
/// client keeps) all come back whole, some served from a copy, the others checked chunk by chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_large_files_read_at_once_all_come_back_whole() {
    let h = start_bridge(test_config()).await;
    let mut cfg = h.computer(79, None, SimKind::Computer);
    cfg.space_limit = 40_000_000;
    let sim = h.link(cfg).await;
    let root = sim.state().cfg.root.clone();
    let files: Vec<(String, String)> = (0..6u8)
        .map(|i| {
            (
                format!("f{i}.log"),
                char::from(b'a' + i).to_string().repeat(1_000_000),
            )
        })
        .collect();
    for (name, content) in &files {
        std::fs::write(root.join(name), content).unwrap();
    }
    let reads = files
        .iter()
        .map(|(name, _)| call_whole(&h, "fs_read", json!({"computer": 79, "path": name})));
    let results = futures::future::join_all(reads).await;
    for ((name, content), r) in files.iter().zip(&results) {
        assert!(r.is_error != Some(true), "{name}: {}", error_of(r));
        assert!(
            ok_of(r)["content"].as_str() == Some(content.as_str()),
            "{name} not read whole"
        );
    }
    sim.stop();
}
