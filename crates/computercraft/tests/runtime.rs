//! Issue 12: what broke on the real CC runtime (CraftOS-PC) where the simulator used to fake it: the player's
//! shell, the terminal, paths, table shapes and limits. Each test drives the shipped client through the
//! bridge, on a simulator that now behaves like CC there (see `support/ccsim`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use mcp_testkit::http_get;
use serde_json::json;
use std::time::Duration;
use support::ccsim::{self, SimConfig, SimHandle, SimKind};
use support::harness::{Harness, error_of, ok_of, start_bridge, start_on, test_config, text_of};

/// A computer set up the way `wget run .../install.lua` leaves it: the installer's startup.lua links in the
/// background beside the player's shell.
async fn installed(h: &Harness, id: u32, label: &str) -> SimHandle {
    let mut sim = SimConfig::new(id, ccsim::temp_root("installed"));
    sim.label = Some(label.into());
    sim.command = Some(format!(
        r#"local r = assert(http.get("http://{}/install.lua"))
        local code = r.readAll() r.close()
        assert(load(code, "=install", "t", _ENV))()"#,
        h.link_addr
    ));
    let sim = ccsim::spawn(sim);
    h.wait_linked(id, Some(label), &sim).await;
    sim
}

async fn wait_output(sim: &SimHandle, needle: &str, times: usize) {
    assert!(
        sim.wait_for(Duration::from_secs(60), |s| s
            .output
            .matches(needle)
            .count()
            >= times)
            .await,
        "waited for {needle:?} x{times}; screen log:\n{}",
        sim.output()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_survives_exit_and_ctrl_t_at_the_players_shell() {
    let h = start_bridge(test_config()).await;
    let sim = installed(&h, 50, "desk").await;
    let link = h.link_of(50);
    // The player's shell is at its prompt; `exit` ends it.
    wait_output(&sim, "> ", 1).await;
    sim.type_line("exit");
    wait_output(&sim, "Starting a new shell", 1).await;
    // Ctrl+T at the new prompt terminates that shell.
    sim.terminate();
    wait_output(&sim, "Terminated", 1).await;
    wait_output(&sim, "Starting a new shell", 2).await;
    // The same link still answers, through the client, not only through the runtime's automatic pongs.
    assert_eq!(h.link_of(50), link);
    let p = h.call("probe-computers", json!({})).await;
    assert_eq!(text_of(&p), "pong from 50 (Label: desk)");
    let r = ok_of(
        &h.call("run_lua", json!({"computer": 50, "code": "return 6 * 7"}))
            .await,
    );
    assert_eq!(r["values"], json!([42]));
    sim.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_closes_its_socket() {
    let h = start_bridge(test_config()).await;
    // Run from the shell (the player typed `client <url>`), Ctrl+T stops the client.
    let sim = h.link(h.computer(51, None, SimKind::Computer)).await;
    sim.terminate();
    wait_output(&sim, "client stopped", 1).await;
    // The socket is closed, so the bridge drops the computer instead of keeping a link the runtime still
    // answers pings on.
    // A hang guard for loaded machines, not a claim about speed.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while h.link_of(51).is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the bridge still lists computer 51: {}",
            sim.output()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let p = h.call("probe-computers", json!({})).await;
    assert_eq!(text_of(&p), "No computers connected.");
    sim.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_lua_sees_the_shells_program_environment_and_not_more() {
    let h = start_bridge(test_config()).await;
    let sim = installed(&h, 52, "env").await;
    ok_of(
        &h.call(
            "fs_write",
            json!({"computer": 52, "path": "lib/answer.lua", "content": "return { value = 42 }"}),
        )
        .await,
    );
    let r = ok_of(&h.call("run_lua", json!({"computer": 52, "code":
        "return type(shell), type(require), type(package), rawget(_G, 'shell'), rawget(_G, 'require'), \
         require('lib.answer').value, multishell"})).await);
    assert_eq!(
        r["values"],
        json!(["table", "function", "table", null, null, 42, null])
    );
    sim.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_run_leaves_the_terminal_globals_and_apis_as_they_were() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let first = start_on(test_config(), listener).await;
    let sim = installed(&first, 53, "pager").await;
    // pagedPrint redirects the terminal to a paging copy that waits for a key once the screen is full: the
    // run is still waiting when its deadline passes.
    let e = error_of(
        &first
            .call(
                "run_lua",
                json!({"computer": 53, "timeout_ms": 500, "code":
                    "_G.leaked = 1 os.pullEvent = os.pullEventRaw \
                     textutils.pagedPrint(('page\\n'):rep(40))"}),
            )
            .await,
    );
    assert_eq!(e["code"], "E_TIMEOUT", "{e}");
    // The pager waited in the run's own captured terminal (issue 24): the player's screen stays clean.
    assert!(
        !sim.screen()
            .iter()
            .any(|r| r == "Press any key to continue" || r == "page"),
        "{:?}",
        sim.screen()
    );
    let r = ok_of(
        &first
            .call(
                "run_lua",
                json!({"computer": 53, "code":
        "local _, y = term.current().getCursorPos() return y == 1, leaked, os.pullEvent == os.pullEventRaw"}),
            )
            .await,
    );
    assert_eq!(r["values"], json!([true, null, false]));

    // The client's own messages go to a plain terminal: after a bridge restart it says "link down" and
    // relinks instead of waiting on "Press any key".
    first
        .call(
            "run_lua",
            json!({"computer": 53, "timeout_ms": 300, "code": "textutils.pagedPrint(('again\\n'):rep(40))"}),
        )
        .await;
    first.shutdown.cancel();
    drop(first);
    let listener = mcp_testkit::net::rebind(addr).await;
    let second = start_on(test_config(), listener).await;
    second.wait_linked(53, Some("pager"), &sim).await;
    let p = second.call("probe-computers", json!({})).await;
    assert_eq!(text_of(&p), "pong from 53 (Label: pager)");
    sim.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_with_integer_keys_have_one_shape() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(54, None, SimKind::Computer)).await;
    let r = ok_of(
        &h.call(
            "run_lua",
            json!({"computer": 54, "code":
        "return {[1]='a', [27]='b'}, {[1]='a', [5]='b'}, {1, 2, 3}, {[2]='x'}, {}"}),
        )
        .await,
    );
    assert_eq!(
        r["values"],
        json!([{"1": "a", "27": "b"}, {"1": "a", "5": "b"}, [1, 2, 3], {"2": "x"}, {}])
    );
    sim.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_paths_are_invalid_arguments_that_name_the_path() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(55, None, SimKind::Computer)).await;
    ok_of(
        &h.call(
            "fs_write",
            json!({"computer": 55, "path": "notes.txt", "content": "x"}),
        )
        .await,
    );
    for (tool, path, names) in [
        ("fs_read", "../x", "../x"),
        ("fs_list", "../", "../"),
        ("fs_delete", "a/../../x", "a/../../x"),
        ("fs_read", "notes.txt/inner", "notes.txt"),
        ("fs_list", "notes.txt/inner", "notes.txt"),
    ] {
        let e = error_of(&h.call(tool, json!({"computer": 55, "path": path})).await);
        assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{tool} {path}: {e}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(names), "{tool} {path}: {msg}");
        assert!(!msg.contains("client"), "{tool} {path}: {msg}");
    }
    let e = error_of(
        &h.call(
            "fs_write",
            json!({"computer": 55, "path": "notes.txt/inner", "content": "y"}),
        )
        .await,
    );
    assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{e}");
    sim.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_that_never_yields_is_reported_as_it_really_ends() {
    let h = start_bridge(test_config()).await;
    let mut cfg = h.computer(56, None, SimKind::Computer);
    cfg.yield_timeout = Duration::from_millis(800);
    let sim = h.link(cfg).await;
    let tools = h.client.list_all_tools().await.unwrap();
    let run = tools.iter().find(|t| t.name == "run_lua").unwrap();
    let text = run.description.as_deref().unwrap();
    assert!(text.contains("never yields cannot be stopped"), "{text}");
    assert!(text.contains("Too long without yielding"), "{text}");
    // The loop runs on past the deadline until CC aborts it, then the computer serves requests again. (The
    // simulated loop holds one of the test runtime's two threads, so whether the bridge's 200 ms deadline
    // or the abort's reply wins varies here; on a real computer the deadline comes first.)
    let e = error_of(
        &h.call(
            "run_lua",
            json!({"computer": 56, "timeout_ms": 200, "code": "while true do end"}),
        )
        .await,
    );
    let aborted = e["code"] == "E_REMOTE"
        && e["message"]
            .as_str()
            .unwrap()
            .contains("Too long without yielding");
    assert!(e["code"] == "E_TIMEOUT" || aborted, "{e}");
    let r = h
        .call("run_lua", json!({"computer": 56, "code": "return 'back'"}))
        .await;
    assert_eq!(r.is_error, Some(false), "{r:?}\n{}", sim.output());
    assert_eq!(ok_of(&r)["values"], json!(["back"]));
    sim.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_code_limit_is_on_the_escaped_frame() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(57, None, SimKind::Computer)).await;
    let limit = bridge_computercraft::protocol::MAX_FRAME - 1024;
    // Quotes escape to two bytes each: just under the limit once escaped, the code runs.
    let quotes = (limit - 40) / 2;
    let code = format!("return #[[{}]]", "\"".repeat(quotes));
    let r = ok_of(
        &h.call("run_lua", json!({"computer": 57, "code": code}))
            .await,
    );
    assert_eq!(r["values"], json!([quotes]));
    // Just over it, the error says which limit and why.
    let code = format!("return #[[{}]]", "\"".repeat(limit / 2 + 8));
    let e = error_of(
        &h.call("run_lua", json!({"computer": 57, "code": code}))
            .await,
    );
    assert_eq!(e["code"], "E_TOO_LARGE", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("escaped") && msg.contains(&limit.to_string()),
        "{msg}"
    );
    sim.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installer_names_its_real_address_and_escapes_a_public_url() {
    let h = start_bridge(test_config()).await;
    let install = http_get(&format!("http://{}/install.lua", h.link_addr)).await;
    let header = install.lines().next().unwrap();
    assert!(
        header.ends_with(&format!(
            "wget run http://{}/install.lua [token]",
            h.link_addr
        )),
        "{header}"
    );

    let hostile = "http://mc.example/\"]] os.shutdown() --[[\\\nprint('x')";
    let mut cfg = test_config();
    cfg.public_url = Some(hostile.into());
    let h = start_bridge(cfg).await;
    let install = http_get(&format!("http://{}/install.lua", h.link_addr)).await;
    assert_eq!(
        install.lines().count(),
        bridge_computercraft::assets::INSTALL_LUA.lines().count()
    );
    // The installer, run with an `http.get` that records its URL, asks for exactly the configured base.
    let lua = mlua::Lua::new();
    lua.load(
        r#"asked = nil
        http = { get = function(url) asked = url return nil, "stop here" end }"#,
    )
    .exec()
    .unwrap();
    let err = lua.load(install.as_str()).exec().unwrap_err().to_string();
    assert!(err.contains("stop here"), "{err}");
    let asked: String = lua.globals().get("asked").unwrap();
    assert_eq!(asked, format!("{hostile}/client.lua"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_machine_with_the_same_id_is_refused_shown_and_never_called() {
    let h = start_bridge(test_config()).await;
    let first = h
        .link(h.computer(60, Some("first"), SimKind::Computer))
        .await;
    let link = h.link_of(60);
    // A copy of computer 60 (creative mode, or another world on the same bridge) starts up.
    let second = ccsim::spawn(h.computer(60, Some("second"), SimKind::Computer));
    // The refusal is shown, then the retry scheduled: wait for the retry's line, the last of the two.
    wait_output(&second, "retrying in 300.0s", 1).await;
    let screen = second.output();
    assert!(
        screen.contains("already linked") && screen.contains("retrying in 300.0s"),
        "{screen}"
    );

    let out = ok_of(&h.call("list_computers", json!({})).await);
    assert_eq!(out["count"], 1);
    assert_eq!(out["computers"][0]["label"], "first");
    assert_eq!(out["duplicate_ids"], json!([{"id": 60, "refusals": 1}]));
    let health: serde_json::Value =
        serde_json::from_str(&http_get(&format!("http://{}/health", h.mcp_addr)).await).unwrap();
    assert_eq!(
        health["duplicate_ids"],
        json!([{"id": 60, "refusals": 1}]),
        "{health}"
    );
    // Every call reaches the listed machine; the refused one does not come back to fight over the id.
    for _ in 0..5 {
        let r = ok_of(
            &h.call(
                "run_lua",
                json!({"computer": 60, "code": "return os.getComputerLabel()"}),
            )
            .await,
        );
        assert_eq!(r["values"], json!(["first"]));
    }
    assert_eq!(h.link_of(60), link);
    assert_eq!(h.state.registry.refused(), vec![(60, 1)]);
    first.stop();
    second.stop();
}

/// Issue 24: CC's timing rule (TimeoutState, docs/protocols/computercraft.md §1) in the simulator, with a
/// small deterministic budget: work that yields back to the computer's event loop between pieces finishes;
/// the same work in one piece is killed with "Too long without yielding", and so is work that only yields
/// inside its own coroutines (the budget counts from the computer's resume, not the innermost coroutine's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coroutine_that_runs_too_long_without_yielding_is_killed() {
    let h = start_bridge(test_config()).await;
    let mut cfg = h.computer(57, None, SimKind::Computer);
    cfg.yield_instructions = Some(200_000);
    let sim = h.link(cfg).await;
    let piece = "local x = 0 for i = 1, 20000 do x = x + i end";
    let yielding = format!(
        "for n = 1, 20 do {piece} os.queueEvent('t57') os.pullEvent('t57') end return 'done'"
    );
    let r = h
        .call("run_lua", json!({"computer": 57, "code": yielding}))
        .await;
    assert_eq!(ok_of(&r)["values"], json!(["done"]), "{}", sim.output());

    let blocking = format!("for n = 1, 20 do {piece} end return 'done'");
    let e = error_of(
        &h.call("run_lua", json!({"computer": 57, "code": blocking}))
            .await,
    );
    assert_eq!(e["code"], "E_REMOTE", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("Too long without yielding"),
        "{e}"
    );

    let nested = format!(
        "local co = coroutine.wrap(function() for n = 1, 20 do {piece} coroutine.yield() end end) \
         for n = 1, 20 do co() end return 'done'"
    );
    let e = error_of(
        &h.call("run_lua", json!({"computer": 57, "code": nested}))
            .await,
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("Too long without yielding"),
        "{e}"
    );
    // The computer serves requests again.
    let r = h
        .call("run_lua", json!({"computer": 57, "code": "return 'back'"}))
        .await;
    assert_eq!(ok_of(&r)["values"], json!(["back"]), "{}", sim.output());
    sim.stop();
}

/// Issue 24: the installed startup supervises the client: when it dies (here its event loop raises, as it
/// did with "Too long without yielding" on a busy server) it is started again and the computer relinks by
/// itself, and why it stopped is in /mcp/client.log, not on the player's screen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_startup_restarts_a_client_that_died_and_it_relinks() {
    let h = start_bridge(test_config()).await;
    let sim = installed(&h, 58, "miner").await;
    let old = h.link_of(58);
    // The run yields straight to the client's loop (a bare coroutine.yield: sleep would call the broken
    // os.pullEventRaw itself, as bios.lua's os.pullEvent does), so the loop calls it and dies.
    let _ = h
        .call(
            "run_lua",
            json!({"computer": 58, "timeout_ms": 2000,
                   "code": "os.pullEventRaw = function() error('client killed by the test', 0) end coroutine.yield()"}),
        )
        .await;
    h.wait_relinked(58, Some("miner"), &sim, old).await;
    let r = ok_of(
        &h.call("run_lua", json!({"computer": 58, "code": "return 6 * 7"}))
            .await,
    );
    assert_eq!(r["values"], json!([42]));
    let log = String::from_utf8(
        ccsim::read_file(&sim.state().cfg.root, "mcp/client.log").expect("a log"),
    )
    .unwrap();
    assert!(log.contains("client killed by the test"), "{log}");
    assert!(log.contains("restarting in 1s"), "{log}");
    sim.stop();
}

/// Issue 24: typing `startup` again at the shell starts a second supervisor on the same computer; it waits
/// for the running client instead of linking a second time, so the bridge sees no duplicate computer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_startup_again_is_not_a_second_computer() {
    let h = start_bridge(test_config()).await;
    let sim = installed(&h, 59, "desk").await;
    let link = h.link_of(59);
    wait_output(&sim, "> ", 1).await;
    sim.type_line("startup");
    // The nested startup's shell is at its prompt: its supervisor has run and is waiting.
    wait_output(&sim, "> ", 2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.link_of(59), link, "{}", sim.output());
    assert!(h.state.registry.refused().is_empty());
    let body = http_get(&format!("http://{}/health", h.mcp_addr)).await;
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["refused_links"], 0, "{health}");
    let p = h.call("probe-computers", json!({})).await;
    assert_eq!(text_of(&p), "pong from 59 (Label: desk)");
    sim.stop();
}

/// Issue 24 item 6: a program run with shell.run prints into the result's `output`, not on the player's
/// screen, and the client in the background writes its status lines to its log, not the screen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn program_output_is_captured_and_the_screen_stays_clean() {
    let h = start_bridge(test_config()).await;
    let sim = installed(&h, 61, "desk").await;
    ok_of(
        &h.call(
            "fs_write",
            json!({"computer": 61, "path": "hello.lua", "content": "print('from program') term.write('raw') print() write('a\\nb')"}),
        )
        .await,
    );
    let r = ok_of(
        &h.call(
            "run_lua",
            json!({"computer": 61, "code": "local ok = shell.run('hello') print('after') return ok"}),
        )
        .await,
    );
    assert_eq!(r["values"], json!([true]));
    assert_eq!(r["output"], "from program\nraw\na\nbafter\n", "{r}");
    let screen = sim.screen().join("\n");
    assert!(!screen.contains("from program"), "{screen}");
    assert!(!screen.contains("[mcp]"), "{screen}");
    sim.stop();
}

/// Issue 24 item 6: a path that climbs above the root is refused however it is spelled; one that climbs
/// back inside is normalised.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_above_the_root_are_refused_however_spelled() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(62, None, SimKind::Computer)).await;
    for bad in ["/../x", "a/../../x", "..", "\\..\\x"] {
        let e = error_of(
            &h.call("fs_read", json!({"computer": 62, "path": bad}))
                .await,
        );
        assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{bad}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains("climbs above"),
            "{e}"
        );
        let e = error_of(
            &h.call(
                "fs_write",
                json!({"computer": 62, "path": bad, "content": "x"}),
            )
            .await,
        );
        assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{bad}: {e}");
    }
    ok_of(
        &h.call(
            "fs_write",
            json!({"computer": 62, "path": "a/../b.txt", "content": "in"}),
        )
        .await,
    );
    let r = ok_of(
        &h.call("fs_read", json!({"computer": 62, "path": "/b.txt"}))
            .await,
    );
    assert_eq!(r["content"], "in");
    sim.stop();
}

/// The client counts climbs as CC's `sanitizePath` reads a path (`...` names nothing), not trusting
/// `fs.combine`: CraftOS-PC's drops a leading `..`, which would make `.../../x` the file `x`. The bridge
/// refuses such a path first, so this asks the client directly, with `fs.combine` made to drop as CraftOS-PC's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_counts_climbs_as_cc_reads_a_path_whatever_fs_combine_does() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(64, None, SimKind::Computer)).await;
    let root = sim.state().cfg.root.clone();
    std::fs::write(root.join("x"), b"inside").unwrap();
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::write(root.join("a/b.txt"), b"in a").unwrap();
    // The hook lasts as long as the run that sets it (the client puts back what runs change).
    let holder = h.call(
        "run_lua",
        json!({"computer": 64, "timeout_ms": 60000, "code": r#"
            local combine = fs.combine
            fs.combine = function(...)
              local r = combine(...)
              while r == ".." or r:sub(1, 3) == "../" do r = r == ".." and "" or r:sub(4) end
              return r
            end
            local h = fs.open("hooked", "w") h.close()
            os.pullEvent("release")
            return fs.combine(".../../x")
        "#}),
    );
    let comp = h.state.registry.get(64).unwrap();
    let read = |path: &str| {
        comp.request(
            "fs.read",
            json!({"path": path, "offset": 0, "length": 100}),
            Duration::from_secs(30),
        )
    };
    let asker = async {
        sim.wait_file(Duration::from_secs(60), "hooked", "the run never started")
            .await;
        for bad in [".../../x", "a/.../../../x", " .. /x", "a/..../../../x"] {
            let e = read(bad).await.unwrap_err();
            assert!(e.message().contains("climbs above"), "{bad}: {e:?}");
        }
        let r = read("a/.../b.txt").await.unwrap();
        assert_eq!(
            bridge_computercraft::b64::decode(r["data"].as_str().unwrap()).unwrap(),
            b"in a"
        );
        // CC keeps DEL in a name: `..` and DEL is a name, which the `..` after it takes back; and it counts.
        let r = read("..\u{7f}/../x").await.unwrap();
        assert_eq!(
            bridge_computercraft::b64::decode(r["data"].as_str().unwrap()).unwrap(),
            b"inside"
        );
        let e = read(&format!("{}\u{7f}", "n".repeat(255)))
            .await
            .unwrap_err();
        assert!(e.message().contains("CC cuts names at 255"), "{e:?}");
        sim.queue_event(vec!["release".into()]);
    };
    let (held, ()) = tokio::join!(holder, asker);
    assert_eq!(
        ok_of(&held)["values"],
        json!(["x"]),
        "fs.combine dropped the climb during the run"
    );
    sim.stop();
}

/// Issue 24 item 6: an error raised with a table reads as its contents, and numbers come back exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_errors_are_readable_and_numbers_exact() {
    let h = start_bridge(test_config()).await;
    let sim = h.link(h.computer(63, None, SimKind::Computer)).await;
    let e = error_of(
        &h.call(
            "run_lua",
            json!({"computer": 63, "code": "error({reason = 'jammed', slot = 3})"}),
        )
        .await,
    );
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("\"reason\":\"jammed\"") && msg.contains("\"slot\":3"),
        "{e}"
    );
    assert!(!msg.contains("table: "), "{e}");
    let r = ok_of(
        &h.call(
            "run_lua",
            json!({"computer": 63, "code": "return 0.1 + 0.2, 1/3, 2^53, 123456789012345678, math.pi * 1e200, 3, {x = 0.1 + 0.2}"}),
        )
        .await,
    );
    let v = r["values"].as_array().unwrap();
    assert_eq!(v[0].as_f64(), Some(0.1 + 0.2));
    assert_eq!(v[1].as_f64(), Some(1.0 / 3.0));
    assert_eq!(v[2].as_f64(), Some(9_007_199_254_740_992.0));
    assert_eq!(v[3].as_f64(), Some(123_456_789_012_345_678.0));
    assert_eq!(v[4].as_f64(), Some(std::f64::consts::PI * 1e200));
    assert_eq!(v[5], json!(3));
    assert_eq!(v[6]["x"].as_f64(), Some(0.1 + 0.2));
    sim.stop();
}
