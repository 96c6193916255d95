//! The CC shim itself: checks that it reproduces the CC:Tweaked behaviours the client must survive.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;
use support::ccsim::{self, SimConfig};

/// Runs `code` as the player's command, then shuts the computer down; returns what it printed (without the
/// shell's `CraftOS 1.9` banner and the `> ` prompt it shows before the shutdown takes effect).
async fn run_lua(code: &str) -> String {
    let mut cfg = SimConfig::new(7, ccsim::temp_root("shim"));
    cfg.command = Some(format!("{code}\nos.shutdown()"));
    let sim = ccsim::spawn(cfg);
    assert!(
        sim.wait_for(Duration::from_secs(60), |s| s.halted.is_some())
            .await,
        "program did not finish: {}",
        sim.output()
    );
    sim.stop();
    let out = sim.output();
    let out = out.strip_prefix("CraftOS 1.9\n").unwrap_or(&out);
    out.strip_suffix("> ").unwrap_or(out).to_string()
}

#[tokio::test]
async fn label_returns_no_value_when_unset() {
    let out = run_lua(
        "print(select('#', os.getComputerLabel())) print(pcall(tostring, os.getComputerLabel()))",
    )
    .await;
    assert!(out.starts_with("0\nfalse\t"), "{out}");
}

#[tokio::test]
async fn serialize_json_quirks() {
    let out = run_lua(
        r#"
        print(textutils.serializeJSON({}))
        print(textutils.serializeJSON({1, nil, 3}))
        print(textutils.serializeJSON({1, 2, x = "y"}))
        print(textutils.serializeJSON("é"))
        print(textutils.serializeJSON(0/0 ~= 0/0 and 1/0 or 0))
        print(textutils.serializeJSON(42), textutils.serializeJSON(0.1))
        print(pcall(textutils.serializeJSON, { f = print }))
        "#,
    )
    .await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "{}");
    assert_eq!(lines[1], "[1,null,3]");
    assert_eq!(lines[2], r#"{"x":"y"}"#);
    assert_eq!(lines[3], r#""\u00C3\u00A9""#);
    assert_eq!(lines[4], "inf");
    assert_eq!(lines[5], "42\t0.1");
    assert!(
        lines[6].starts_with("false\t") && lines[6].contains("Cannot serialize type function"),
        "{out}"
    );
}

#[tokio::test]
async fn unserialise_json_quirks() {
    let out = run_lua(
        r#"
        local t = textutils.unserialiseJSON('{"a":null,"b":[],"c":"\\ud83d\\ude00"}')
        print(t.a == nil, t.b == textutils.empty_json_array, #t.c)
        print(pcall(function() t.b[1] = 1 end))
        local u = textutils.unserialiseJSON('{"b":[]}', { parse_empty_array = false })
        u.b[1] = 1
        print(u.b[1])
        print(textutils.unserialiseJSON('{"a":'))
        "#,
    )
    .await;
    // The screen is 51 columns wide: the long error wraps onto a second line.
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "true\ttrue\t6");
    assert!(
        lines[1].starts_with("false") && lines[2] == "textutils.empty_json_array",
        "{out}"
    );
    assert_eq!(lines[3], "1");
    assert!(
        lines[4].starts_with("nil\tMalformed JSON at position"),
        "{out}"
    );
}

#[tokio::test]
async fn sleep_discards_other_events() {
    let out = run_lua(
        r#"
        for i = 1, 5 do os.queueEvent("mine", i) end
        sleep(0.1)
        os.queueEvent("marker")
        local ev, n = os.pullEvent()
        print(ev)
        "#,
    )
    .await;
    assert_eq!(out.trim(), "marker");
}

#[tokio::test]
async fn event_queue_holds_at_most_256() {
    let mut cfg = SimConfig::new(1, ccsim::temp_root("cap"));
    cfg.command = Some(
        r#"
        for i = 1, 300 do os.queueEvent("e", i) end
        local timer = os.startTimer(0.5)
        local n = 0
        while true do
          local ev, id = os.pullEvent()
          if ev == "timer" and id == timer then break end
          if ev == "e" then n = n + 1 end
        end
        print(n)
        os.shutdown()
        "#
        .into(),
    );
    let sim = ccsim::spawn(cfg);
    assert!(
        sim.wait_for(Duration::from_secs(60), |s| s.halted.is_some())
            .await
    );
    sim.stop();
    let st = sim.state();
    assert_eq!(st.output, "CraftOS 1.9\n256\n> ");
    assert_eq!(st.dropped_events, 44);
}

#[tokio::test]
async fn fs_round_trips_bytes() {
    let out = run_lua(
        r#"
        print(fs.open("/", "r"))
        local h = fs.open("a/b.bin", "wb")
        h.write(string.char(0, 255, 10, 13))
        h.close()
        print(fs.getSize("a/b.bin"), fs.exists("/a/../a/b.bin"), fs.isDir("a"))
        local r = fs.open("a/b.bin", "rb")
        local s = r.readAll()
        r.close()
        print(#s, s:byte(2))
        print(fs.open("missing", "r"))
        "#,
    )
    .await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "nil\t/: Is a directory");
    assert_eq!(lines[1], "4\ttrue\ttrue");
    assert_eq!(lines[2], "4\t255");
    assert_eq!(lines[3], "nil\t/missing: No such file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_answers_pings_after_the_lua_side_stopped_reading() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut cfg = SimConfig::new(8, ccsim::temp_root("pong"));
    // Opens the socket, then never looks at it again.
    cfg.command = Some(format!(
        "assert(http.websocket('ws://{addr}/')) print('opened') while true do os.pullEvent('never') end"
    ));
    let sim = ccsim::spawn(cfg);
    let (tcp, _) = listener.accept().await.unwrap();
    let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
    assert!(
        sim.wait_for(Duration::from_secs(60), |s| s.output.contains("opened"))
            .await
    );
    ws.send(Message::Ping(b"alive?".to_vec().into()))
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(answer, Message::Pong(b"alive?".to_vec().into()));
    sim.stop();
}
