//! Link behaviour: no lost requests, reconnection, replacement, malformed frames, the in-flight cap, tokens
//! and the one-command installer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use futures::{SinkExt, StreamExt};
use mcp_testkit::http_get;
use serde_json::{Value, json};
use std::time::Duration;
use support::ccsim::{self, SimConfig, SimKind};
use support::harness::{error_of, ok_of, start_bridge, start_on, test_config, text_of, within};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_is_lost_while_another_sleeps_or_a_turtle_moves() {
    let h = start_bridge(test_config()).await;
    let mut cfg = h.computer(5, Some("busy"), SimKind::Turtle);
    cfg.world.turtle.as_mut().unwrap().fuel = 100;
    cfg.turtle_delay = Duration::from_millis(400);
    let _t = h.link(cfg).await;

    // In CC, sleep() and turtle actions discard every event reaching their coroutine; the client's scheduler
    // must keep reading the link meanwhile.
    let sleeper = h.call(
        "run_lua",
        json!({"computer": 5, "code": "sleep(1.5) return 'slept'"}),
    );
    let mover = h.call("turtle_move", json!({"computer": 5, "direction": "up"}));
    let quick = async {
        let mut answers = Vec::new();
        for i in 0..10 {
            let r = h
                .call(
                    "run_lua",
                    json!({"computer": 5, "code": format!("return {i} * 2")}),
                )
                .await;
            answers.push(ok_of(&r)["values"][0].clone());
            let p = h.call("probe-computers", json!({})).await;
            assert_eq!(text_of(&p), "pong from 5 (Label: busy)");
        }
        answers
    };
    let (slept, moved, answers) = tokio::join!(sleeper, mover, quick);
    assert_eq!(ok_of(&slept)["values"], json!(["slept"]));
    assert_eq!(ok_of(&moved)["success"], true);
    assert_eq!(answers, (0..10).map(|i| json!(i * 2)).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_sent_while_the_computer_is_busy_are_not_lost() {
    // While Lua runs without yielding, CC queues incoming messages (at most 256, the rest silently dropped).
    // The in-flight cap keeps the bridge far below that, so a burst at a busy computer loses nothing.
    let h = start_bridge(test_config()).await;
    let c = h.link(h.computer(6, None, SimKind::Computer)).await;
    let busy = h.call("run_lua", json!({"computer": 6, "code": "local t = os.clock() while os.clock() - t < 1 do end return 'done'"}));
    let burst = async {
        // Fire once the busy call is in flight; on a loaded machine it may already be over when this task
        // first runs, so give up waiting after a while rather than forever.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while h.state.registry.get(6).unwrap().in_flight() < 1
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let calls = (0..100).map(|i| {
            h.call(
                "run_lua",
                json!({"computer": 6, "code": format!("return {i}")}),
            )
        });
        futures::future::join_all(calls).await
    };
    let (busy, burst) = tokio::join!(busy, burst);
    assert_eq!(ok_of(&busy)["values"], json!(["done"]));
    let values: Vec<Value> = burst
        .iter()
        .map(|r| ok_of(r)["values"][0].clone())
        .collect();
    assert_eq!(values, (0..100).map(|i| json!(i)).collect::<Vec<_>>());
    assert_eq!(c.state().dropped_events, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relabelled_computer_tells_the_bridge() {
    let h = start_bridge(test_config()).await;
    let c = h.link(h.computer(17, None, SimKind::Computer)).await;
    ok_of(
        &h.call(
            "run_lua",
            json!({"computer": 17, "code": "os.setComputerLabel('renamed')"}),
        )
        .await,
    );
    h.wait_linked(17, Some("renamed"), &c).await;
    let list = ok_of(&h.call("list_computers", json!({})).await);
    assert_eq!(list["computers"][0]["label"], "renamed");
    let links = ok_of(&h.call("poll_events", json!({"stream": "computers"})).await);
    let last = links["events"].as_array().unwrap().last().unwrap()["data"].clone();
    assert_eq!(
        (last["event"].as_str(), last["label"].as_str()),
        (Some("relabelled"), Some("renamed"))
    );
    c.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_relinks_after_the_bridge_restarts() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let first = start_on(test_config(), listener).await;
    let sim = first
        .link(first.computer(21, Some("phoenix"), SimKind::Computer))
        .await;
    let cfg_url = first.link_url();
    first.shutdown.cancel();
    drop(first);
    assert!(
        sim.wait_for(Duration::from_secs(60), |s| s.output.contains("link down"))
            .await,
        "the client did not notice: {}",
        sim.output()
    );

    // Same port, new process state: the client's backoff brings it back.
    let listener = mcp_testkit::net::rebind(addr).await;
    let second = start_on(test_config(), listener).await;
    assert_eq!(second.link_url(), cfg_url);
    second.wait_linked(21, Some("phoenix"), &sim).await;
    let p = second.call("probe-computers", json!({})).await;
    assert_eq!(text_of(&p), "pong from 21 (Label: phoenix)");
    sim.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_hello_with_the_same_id_replaces_a_link_that_no_longer_answers() {
    let mut cfg = test_config();
    cfg.pong_timeout = Duration::from_millis(300);
    let h = start_bridge(cfg).await;
    // The old link: a hello, then silence (a computer whose chunk froze; nothing reads, so no pong). Two live
    // machines with one id are refused instead (tests/runtime.rs).
    let mut old = raw(&h.link_url()).await;
    old.send(Message::text(
        json!({"type": "hello", "protocol": 1, "computerId": 7, "computerLabel": "old", "kind": "computer"})
            .to_string(),
    ))
    .await
    .unwrap();
    // A hang guard for loaded machines, not a claim about speed.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while h.link_of(7).is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the raw hello did not link"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let new = h.link(h.computer(7, Some("new"), SimKind::Computer)).await;
    let list = ok_of(&h.call("list_computers", json!({})).await);
    assert_eq!(list["count"], 1);
    assert_eq!(list["computers"][0]["label"], "new");
    let links = ok_of(&h.call("poll_events", json!({"stream": "computers"})).await);
    let events: Vec<(String, String)> = links["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["data"]["event"].as_str().unwrap().into(),
                e["data"]["label"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        &events[..3],
        [
            ("connected".into(), "old".into()),
            ("replaced".into(), "old".into()),
            ("connected".into(), "new".into())
        ]
    );
    assert!(
        !events
            .iter()
            .any(|(e, l)| e == "disconnected" && l == "new"),
        "{events:?}"
    );
    let p = h.call("probe-computers", json!({})).await;
    assert_eq!(text_of(&p), "pong from 7 (Label: new)");
    new.stop();
}

async fn raw(
    url: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

async fn next_text(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) -> Option<Value> {
    loop {
        match within("a frame", ws.next()).await {
            Some(Ok(Message::Text(t))) => return Some(serde_json::from_str(t.as_str()).unwrap()),
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
            Some(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_never_crash_the_bridge() {
    let mut cfg = test_config();
    // The fuzz computer's probe times out: short, as the good one answers well within it.
    cfg.probe_timeout = Duration::from_secs(3);
    let h = start_bridge(cfg).await;
    let good = h.link(h.computer(1, Some("good"), SimKind::Computer)).await;

    // Garbage before a hello: refused with a reason, link closed.
    let mut ws = raw(&h.link_url()).await;
    ws.send(Message::text("{not json")).await.unwrap();
    let rejected = next_text(&mut ws).await.unwrap();
    assert_eq!(rejected["type"], "hello-rejected");
    assert!(next_text(&mut ws).await.is_none());

    let mut ws = raw(&h.link_url()).await;
    ws.send(Message::text(r#"{"type":"hello","computerId":"nine"}"#))
        .await
        .unwrap();
    assert_eq!(next_text(&mut ws).await.unwrap()["type"], "hello-rejected");

    let mut ws = raw(&h.link_url()).await;
    ws.send(Message::text(
        r#"{"type":"hello","protocol":99,"computerId":9}"#,
    ))
    .await
    .unwrap();
    let r = next_text(&mut ws).await.unwrap();
    assert!(
        r["error"].as_str().unwrap().contains("protocol version 99"),
        "{r}"
    );

    // After a good hello: every kind of nonsense is dropped and the link stays up.
    let mut ws = raw(&h.link_url()).await;
    ws.send(Message::text(
        r#"{"type":"hello","computerId":9,"computerLabel":"fuzz"}"#,
    ))
    .await
    .unwrap();
    assert_eq!(next_text(&mut ws).await.unwrap()["type"], "hello-ok");
    // hello-ok goes out before the bridge registers the computer, so nothing reaches it unwelcomed.
    within("computer 9's registration", async {
        while h.link_of(9).is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    for junk in [
        "",
        "null",
        "[1,2]",
        r#"{"type":"response"}"#,
        r#"{"type":"response","id":"999","ok":true,"result":1}"#,
        r#"{"type":"response","id":"-1","ok":false}"#,
        r#"{"type":"chunk","id":"5","seq":3,"last":true,"data":"x"}"#,
        r#"{"type":"chunk","id":"6","seq":0,"last":true,"data":"{oops"}"#,
        r#"{"type":"event","event":"redstone","args":7}"#,
        r#"{"type":"hello","computerId":10}"#,
        "\u{0}\u{1}",
    ] {
        ws.send(Message::text(junk)).await.unwrap();
    }
    ws.send(Message::binary(vec![0u8, 159, 146, 150]))
        .await
        .unwrap();
    // The fuzz computer still gets (and, here, ignores) requests: a probe shows it as silent, not broken.
    let p = h.call("probe-computers", json!({})).await;
    assert_eq!(
        text_of(&p),
        "pong from 1 (Label: good)\ntimeout from 9 (Label: fuzz)"
    );
    // And it can still answer one.
    let call = h.call("run_lua", json!({"computer": 9, "code": "return 1"}));
    let answer = async {
        // The probe's ping and its cancel (it timed out) come first.
        let req = loop {
            let f = next_text(&mut ws).await.unwrap();
            if f["method"] == "lua.run" {
                break f;
            }
            assert!(f["method"] == "ping" || f["type"] == "cancel", "{f}");
        };
        let id = req["id"].as_str().unwrap().to_owned();
        let reply = json!({"type": "response", "id": id, "ok": true, "result": {"n": 1, "values": [42], "output": ""}});
        ws.send(Message::text(reply.to_string())).await.unwrap();
    };
    let (r, ()) = tokio::join!(call, answer);
    assert_eq!(ok_of(&r)["values"], json!([42]));

    let health: Value =
        serde_json::from_str(&http_get(&format!("http://{}/health", h.mcp_addr)).await).unwrap();
    assert!(
        health["malformed_frames"].as_u64().unwrap() >= 5,
        "{health}"
    );
    assert_eq!(health["computers"], 2);
    good.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_computer_has_a_cap_on_requests_in_flight() {
    let mut cfg = test_config();
    cfg.max_in_flight = 2;
    let h = start_bridge(cfg).await;
    let _c = h.link(h.computer(11, None, SimKind::Computer)).await;

    // Six calls at once: the bridge lets two reach the computer at a time; the others wait for a slot.
    let code = "_G.active = (_G.active or 0) + 1 _G.peak = math.max(_G.peak or 0, _G.active) sleep(0.3) \
                _G.active = _G.active - 1 return _G.peak";
    let calls = (0..6).map(|_| h.call("run_lua", json!({"computer": 11, "code": code})));
    let results = futures::future::join_all(calls).await;
    let peaks: Vec<u64> = results
        .iter()
        .map(|r| ok_of(r)["values"][0].as_u64().unwrap())
        .collect();
    assert_eq!(peaks.iter().max(), Some(&2), "{peaks:?}");

    // With both slots held, a call that cannot wait long enough is refused as busy.
    let long1 = h.call("run_lua", json!({"computer": 11, "code": "sleep(2)"}));
    let long2 = h.call("run_lua", json!({"computer": 11, "code": "sleep(2)"}));
    let short = async {
        // Let the long calls take their slots first.
        while h.state.registry.get(11).unwrap().in_flight() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        h.call(
            "run_lua",
            json!({"computer": 11, "code": "return 1", "timeout_ms": 200}),
        )
        .await
    };
    let (a, b, c) = tokio::join!(long1, long2, short);
    ok_of(&a);
    ok_of(&b);
    let e = error_of(&c);
    assert_eq!(e["code"], "E_BUSY");
    assert_eq!(e["details"]["max_in_flight"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_token_keeps_strangers_out() {
    let mut cfg = test_config();
    cfg.token = Some("s3cret".into());
    let h = start_bridge(cfg).await;

    let mut wrong = SimConfig::new(31, ccsim::temp_root("wrong"));
    wrong = wrong.running_client(&h.link_url(), Some("guess"));
    let wrong = ccsim::spawn(wrong);
    assert!(
        wrong
            .wait_for(Duration::from_secs(60), |s| s.output.contains("401"))
            .await,
        "{}",
        wrong.output()
    );
    assert!(h.state.registry.get(31).is_none());
    wrong.stop();

    let err = tokio_tungstenite::connect_async(h.link_url())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("401"), "{err}");

    let _right = h
        .link(h.computer(32, Some("trusted"), SimKind::Computer))
        .await;
    let p = h.call("probe-computers", json!({})).await;
    assert_eq!(text_of(&p), "pong from 32 (Label: trusted)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wget_run_install_links_on_every_boot() {
    let mut cfg = test_config();
    cfg.token = Some("tok".into());
    let h = start_bridge(cfg).await;
    let mut sim = SimConfig::new(40, ccsim::temp_root("install"));
    sim.label = Some("fresh".into());
    let root = sim.root.clone();
    // The player already has a startup.lua; then runs `wget run <url> tok`: download, load, run with arguments.
    sim.command = Some(format!(
        r#"local f = fs.open("startup.lua", "w") f.write("print('my old startup ran')") f.close()
        local r = assert(http.get("http://{}/install.lua"))
        local code = r.readAll() r.close()
        assert(load(code, "=install", "t", _ENV))("tok")"#,
        h.link_addr
    ));
    let sim = ccsim::spawn(sim);
    h.wait_linked(40, Some("fresh"), &sim).await;
    assert!(sim.state().boots >= 2, "the installer reboots the computer");
    let startup = std::fs::read_to_string(root.join("startup.lua")).unwrap();
    assert!(startup.starts_with("-- mcp-bridges link"), "{startup}");
    assert!(
        startup.contains(&format!("ws://{}/link", h.link_addr)) && startup.contains("\"tok\""),
        "{startup}"
    );
    assert!(root.join("mcp/client.lua").exists());
    assert!(
        sim.wait_for(Duration::from_secs(60), |s| s
            .output
            .contains("my old startup ran"))
            .await,
        "{}",
        sim.output()
    );

    // Every boot links again.
    let boots = sim.state().boots;
    let before = h.link_of(40);
    sim.reboot();
    assert!(
        sim.wait_for(Duration::from_secs(60), |s| s.boots > boots)
            .await
    );
    h.wait_relinked(40, Some("fresh"), &sim, before).await;
    let p = h.call("probe-computers", json!({})).await;
    assert_eq!(text_of(&p), "pong from 40 (Label: fresh)");
    sim.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_port_serves_the_client_and_installer() {
    let h = start_bridge(test_config()).await;
    let install = http_get(&format!("http://{}/install.lua", h.link_addr)).await;
    assert!(
        install.contains(&format!("\"ws://{}/link\"", h.link_addr)),
        "{install}"
    );
    assert!(!install.contains("__MCP_"));
    let client = http_get(&format!("http://{}/client.lua", h.link_addr)).await;
    assert_eq!(client, bridge_computercraft::assets::CLIENT_LUA);
}

/// The installer and the index name the Host they were asked with: no cache may keep one for another Host.
#[tokio::test]
async fn pages_built_from_the_host_are_not_cached() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let h = start_bridge(test_config()).await;
    for path in ["/install.lua", "/"] {
        let mut stream = tokio::net::TcpStream::connect(h.link_addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: cache.example:8080\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        within("the page", stream.read_to_string(&mut response))
            .await
            .unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let head = head.to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{path}: {head}");
        assert!(
            head.contains("\r\ncache-control: no-store"),
            "{path}: {head}"
        );
        assert!(head.contains("\r\nvary: host"), "{path}: {head}");
        assert!(
            body.contains("ws://cache.example:8080/link"),
            "{path}: {body}"
        );
    }
}
