//! Every tool end to end: a real MCP client over HTTP → bridge → WebSocket → the shipped Lua client in a
//! simulated CC computer or turtle.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use support::ccsim::{Peripheral, SimKind, Turtle};
use support::harness::{Harness, error_of, ok_of, start_bridge, test_config, text_of};

async fn turtle_world(h: &Harness) -> support::ccsim::SimHandle {
    let mut cfg = h.computer(3, Some("digger"), SimKind::Turtle);
    let mut t = Turtle::default();
    t.blocks.insert((0, 0, -1), "minecraft:stone".into());
    t.blocks.insert((0, -1, 0), "minecraft:bedrock".into());
    t.slots[0] = Some(("minecraft:coal".into(), 4));
    cfg.world.turtle = Some(t);
    cfg.world.peripherals.insert(
        "left".into(),
        Peripheral::Chest {
            items: BTreeMap::from([(1, ("minecraft:dirt".to_string(), 12))]),
        },
    );
    cfg.world
        .peripherals
        .insert("right".into(), Peripheral::Speaker { played: vec![] });
    h.link(cfg).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_computers_shows_kind_and_label() {
    let h = start_bridge(test_config()).await;
    let _t = turtle_world(&h).await;
    let _c = h.link(h.computer(8, None, SimKind::Computer)).await;
    let out = ok_of(&h.call("list_computers", json!({})).await);
    assert_eq!(out["count"], 2);
    assert_eq!(out["computers"][0]["id"], 3);
    assert_eq!(out["computers"][0]["kind"], "turtle");
    assert_eq!(out["computers"][0]["label"], "digger");
    assert_eq!(out["computers"][1]["kind"], "computer");
    assert_eq!(out["computers"][1]["label"], Value::Null);
    assert!(
        out["computers"][1]["host"]
            .as_str()
            .unwrap()
            .contains("ComputerCraft")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_lua_values_output_errors_and_quirks() {
    let h = start_bridge(test_config()).await;
    let mut lab = h.computer(1, Some("lab"), SimKind::Computer);
    lab.yield_timeout = std::time::Duration::from_millis(500);
    let c = h.link(lab).await;

    let r = h.call("run_lua", json!({"computer": 1, "code": "print('hi', 2) write('x') return 1, nil, 'é€', {}, 0/0, nil"})).await;
    let out = ok_of(&r);
    assert_eq!(out["output"], "hi\t2\nx");
    assert_eq!(out["values"], json!([1, null, "é€", {}, "nan", null]));

    let r = h
        .call(
            "run_lua",
            json!({"computer": 1, "code": "print('before') error('boom')"}),
        )
        .await;
    let e = error_of(&r);
    assert_eq!(e["code"], "E_REMOTE");
    assert!(e["message"].as_str().unwrap().contains("boom"), "{e}");
    assert_eq!(e["details"]["output"], "before\n");
    // The model reads the text, where the output printed before the error is too.
    let text = text_of(&r);
    assert!(
        text.contains("boom")
            && text.contains("printed before the error:\n```program-output\nbefore\n\n```"),
        "{text}"
    );

    let e = error_of(
        &h.call("run_lua", json!({"computer": 1, "code": "return +"}))
            .await,
    );
    assert_eq!(e["code"], "E_REMOTE");
    assert_eq!(e["details"]["kind"], "syntax");

    // The computer stops code at the deadline, frees the slot, and the agent learns why.
    let e = error_of(
        &h.call(
            "run_lua",
            json!({"computer": 1, "code": "sleep(30)", "timeout_ms": 300}),
        )
        .await,
    );
    assert_eq!(e["code"], "E_TIMEOUT");

    // A reply over one frame travels in chunks and is reassembled.
    // 200 KB is above the core's result cap: asked for whole with the cap's `_meta` field.
    let mut big = rmcp::model::CallToolRequestParams::new("run_lua").with_arguments(
        json!({"computer": 1, "code": "return string.rep('ab', 100000)"})
            .as_object()
            .unwrap()
            .clone(),
    );
    big.meta = Some(Default::default());
    let cap = json!(1 << 20);
    big.meta
        .as_mut()
        .unwrap()
        .0
        .0
        .insert(bridge_core::tool::MAX_RESULT_BYTES_META_KEY.into(), cap);
    let out = ok_of(&h.client.call_tool(big).await.unwrap());
    assert_eq!(out["values"][0].as_str().unwrap().len(), 200_000);
    assert!(
        c.state().max_frame_out <= 65_536,
        "{}",
        c.state().max_frame_out
    );

    let e = error_of(
        &h.call("run_lua", json!({"computer": 99, "code": "return 1"}))
            .await,
    );
    assert_eq!(e["code"], "E_NOT_FOUND");
    assert_eq!(e["details"]["linked"], json!([1]));
    let e = error_of(
        &h.call("run_lua", json!({"computer": 1, "code": "  "}))
            .await,
    );
    assert_eq!(e["code"], "E_INVALID_ARGUMENT");
    let e = error_of(
        &h.call(
            "run_lua",
            json!({"computer": 1, "code": "return 1", "bogus": 1}),
        )
        .await,
    );
    assert_eq!(e["code"], "E_INVALID_ARGUMENT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_tools_round_trip_text_and_binary() {
    let h = start_bridge(test_config()).await;
    let c = h.link(h.computer(2, None, SimKind::Computer)).await;

    let w = ok_of(
        &h.call(
            "fs_write",
            json!({"computer": 2, "path": "docs/hello.txt", "content": "héllo €\n"}),
        )
        .await,
    );
    assert_eq!(w["size"], 11);
    assert_eq!(
        std::fs::read(c.state().cfg.root.join("docs/hello.txt")).unwrap(),
        "héllo €\n".as_bytes()
    );
    let r = ok_of(
        &h.call("fs_read", json!({"computer": 2, "path": "docs/hello.txt"}))
            .await,
    );
    assert_eq!(r["encoding"], "utf8");
    assert_eq!(r["content"], "héllo €\n");

    // 300 KB of every byte value: several chunks each way, no frame over the limit.
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let b64 = bridge_computercraft::b64::encode(&data);
    let w = ok_of(
        &h.call(
            "fs_write",
            json!({"computer": 2, "path": "big.bin", "content": b64, "encoding": "base64"}),
        )
        .await,
    );
    assert_eq!(w["size"], 300_000);
    assert!(w["chunks"].as_u64().unwrap() >= 6, "{w}");
    assert!(!c.state().cfg.root.join("big.bin.mcp-part").exists());
    // 400 KB of base64 is above the core's result cap: asked for whole with the cap's `_meta` field.
    let mut read = rmcp::model::CallToolRequestParams::new("fs_read").with_arguments(
        json!({"computer": 2, "path": "big.bin"})
            .as_object()
            .unwrap()
            .clone(),
    );
    read.meta = Some(Default::default());
    let cap = json!(1 << 20);
    read.meta
        .as_mut()
        .unwrap()
        .0
        .0
        .insert(bridge_core::tool::MAX_RESULT_BYTES_META_KEY.into(), cap);
    let r = ok_of(&h.client.call_tool(read).await.unwrap());
    assert_eq!(r["encoding"], "base64");
    assert_eq!(
        bridge_computercraft::b64::decode(r["content"].as_str().unwrap()).unwrap(),
        data
    );

    let l = ok_of(&h.call("fs_list", json!({"computer": 2})).await);
    let names: Vec<&str> = l["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"big.bin") && names.contains(&"docs"), "{l}");
    let l = ok_of(
        &h.call("fs_list", json!({"computer": 2, "path": "docs"}))
            .await,
    );
    assert_eq!(
        l["entries"],
        json!([{"name": "hello.txt", "dir": false, "size": 11}])
    );

    let empty = ok_of(
        &h.call(
            "fs_write",
            json!({"computer": 2, "path": "empty", "content": ""}),
        )
        .await,
    );
    assert_eq!(empty["size"], 0);
    let e = error_of(
        &h.call("fs_list", json!({"computer": 2, "path": "missing_dir"}))
            .await,
    );
    assert_eq!(e["code"], "E_NOT_FOUND");

    ok_of(
        &h.call("fs_delete", json!({"computer": 2, "path": "big.bin"}))
            .await,
    );
    assert!(!c.state().cfg.root.join("big.bin").exists());
    let e = error_of(
        &h.call("fs_read", json!({"computer": 2, "path": "big.bin"}))
            .await,
    );
    assert_eq!(e["code"], "E_NOT_FOUND");
    let e = error_of(
        &h.call("fs_delete", json!({"computer": 2, "path": "nope"}))
            .await,
    );
    assert_eq!(e["code"], "E_NOT_FOUND");
    let e = error_of(
        &h.call("fs_read", json!({"computer": 2, "path": "docs"}))
            .await,
    );
    assert_eq!(e["code"], "E_CONFLICT");
    let e = error_of(
        &h.call(
            "fs_write",
            json!({"computer": 2, "path": "x", "content": "%%", "encoding": "base64"}),
        )
        .await,
    );
    assert_eq!(e["code"], "E_INVALID_ARGUMENT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turtle_tools_act_on_the_world() {
    let h = start_bridge(test_config()).await;
    let t = turtle_world(&h).await;

    let m = ok_of(
        &h.call(
            "turtle_move",
            json!({"computer": 3, "direction": "forward"}),
        )
        .await,
    );
    assert_eq!(m, json!({"success": false, "reason": "Out of fuel"}));
    let inv = ok_of(&h.call("turtle_inventory", json!({"computer": 3})).await);
    assert_eq!(
        inv["slots"],
        json!([{"slot": 1, "name": "minecraft:coal", "count": 4}])
    );
    assert_eq!(inv["selected"], 1);
    let f = ok_of(
        &h.call("turtle_refuel", json!({"computer": 3, "count": 1}))
            .await,
    );
    assert_eq!(f["success"], true);
    assert_eq!(f["fuel_level"], 80);

    let d = ok_of(&h.call("turtle_detect", json!({"computer": 3})).await);
    assert_eq!(d["block_present"], true);
    let i = ok_of(
        &h.call("turtle_inspect", json!({"computer": 3, "side": "front"}))
            .await,
    );
    assert_eq!(i["block"]["name"], "minecraft:stone");
    let m = ok_of(
        &h.call(
            "turtle_move",
            json!({"computer": 3, "direction": "forward"}),
        )
        .await,
    );
    assert_eq!(m["reason"], "Movement obstructed");
    let g = ok_of(&h.call("turtle_dig", json!({"computer": 3})).await);
    assert_eq!(g["success"], true);
    let g = ok_of(
        &h.call("turtle_dig", json!({"computer": 3, "side": "down"}))
            .await,
    );
    assert_eq!(g["reason"], "Cannot break unbreakable block");
    let i = ok_of(&h.call("turtle_inspect", json!({"computer": 3})).await);
    assert_eq!(i, json!({"block": null, "reason": "No block to inspect"}));
    let m = ok_of(
        &h.call(
            "turtle_move",
            json!({"computer": 3, "direction": "forward"}),
        )
        .await,
    );
    assert_eq!(m["success"], true);
    ok_of(
        &h.call("turtle_turn", json!({"computer": 3, "direction": "left"}))
            .await,
    );
    let s = ok_of(
        &h.call("turtle_select", json!({"computer": 3, "slot": 2}))
            .await,
    );
    assert_eq!(s["success"], true);
    let p = ok_of(
        &h.call("turtle_place", json!({"computer": 3, "side": "up"}))
            .await,
    );
    assert_eq!(p["success"], true, "the dug stone went to slot 2: {p}");
    {
        let st = t.state();
        let turtle = st.world.turtle.as_ref().unwrap();
        assert_eq!(turtle.pos, (0, 0, -1));
        assert_eq!(turtle.facing, 3);
        assert_eq!(
            turtle.blocks.get(&(0, 1, -1)).map(String::as_str),
            Some("minecraft:stone")
        );
    }
    let e = error_of(
        &h.call("turtle_select", json!({"computer": 3, "slot": 17}))
            .await,
    );
    assert_eq!(e["code"], "E_INVALID_ARGUMENT");

    // A turtle tool aimed at a plain computer says so, without a round trip.
    let _pc = h.link(h.computer(4, Some("desk"), SimKind::Computer)).await;
    let e = error_of(
        &h.call("turtle_move", json!({"computer": 4, "direction": "up"}))
            .await,
    );
    assert_eq!(e["code"], "E_UNSUPPORTED");
    assert!(e["message"].as_str().unwrap().contains("not a turtle"));
    let out = ok_of(
        &h.call(
            "run_lua",
            json!({"computer": 4, "code": "return turtle == nil"}),
        )
        .await,
    );
    assert_eq!(out["values"], json!([true]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peripheral_and_redstone_tools() {
    let h = start_bridge(test_config()).await;
    let t = turtle_world(&h).await;

    let l = ok_of(&h.call("peripheral_list", json!({"computer": 3})).await);
    assert_eq!(l["peripherals"][0]["name"], "left");
    assert_eq!(
        l["peripherals"][0]["types"],
        json!(["minecraft:chest", "inventory"])
    );
    assert_eq!(
        l["peripherals"][1]["methods"],
        json!(["playNote", "playSound"])
    );
    let c = ok_of(
        &h.call(
            "peripheral_call",
            json!({"computer": 3, "name": "left", "method": "list"}),
        )
        .await,
    );
    assert_eq!(
        c["values"],
        json!([[{"name": "minecraft:dirt", "count": 12}]])
    );
    let c = ok_of(
        &h.call(
            "peripheral_call",
            json!({"computer": 3, "name": "right", "method": "playNote", "args": ["harp", 1, 12]}),
        )
        .await,
    );
    assert_eq!(c["values"], json!([true]));
    assert!(
        matches!(&t.state().world.peripherals["right"], Peripheral::Speaker { played } if played == &["harp"])
    );
    let e = error_of(
        &h.call(
            "peripheral_call",
            json!({"computer": 3, "name": "right", "method": "explode"}),
        )
        .await,
    );
    assert_eq!(e["code"], "E_NOT_FOUND");
    let e = error_of(
        &h.call(
            "peripheral_call",
            json!({"computer": 3, "name": "top", "method": "list"}),
        )
        .await,
    );
    assert_eq!(e["code"], "E_NOT_FOUND");

    let s = ok_of(
        &h.call(
            "redstone_set",
            json!({"computer": 3, "side": "back", "strength": 7}),
        )
        .await,
    );
    assert_eq!(
        s,
        json!({"side": "back", "input": false, "analog_input": 0, "output": true, "analog_output": 7})
    );
    assert_eq!(t.state().world.redstone_out.get("back"), Some(&7));
    ok_of(
        &h.call(
            "redstone_set",
            json!({"computer": 3, "side": "top", "on": true}),
        )
        .await,
    );
    t.state().world.redstone_in.insert("left".into(), 15);
    let g = ok_of(&h.call("redstone_get", json!({"computer": 3})).await);
    assert_eq!(g["sides"].as_array().unwrap().len(), 6);
    let g = ok_of(
        &h.call("redstone_get", json!({"computer": 3, "side": "left"}))
            .await,
    );
    assert_eq!(g["sides"][0]["input"], true);
    assert_eq!(g["sides"][0]["analog_input"], 15);
    let e = error_of(
        &h.call("redstone_set", json!({"computer": 3, "side": "top"}))
            .await,
    );
    assert_eq!(e["code"], "E_INVALID_ARGUMENT");
    let e = error_of(
        &h.call(
            "redstone_set",
            json!({"computer": 3, "side": "top", "strength": 16}),
        )
        .await,
    );
    assert_eq!(e["code"], "E_INVALID_ARGUMENT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_pushed_and_pullable() {
    let mut h = start_bridge(test_config()).await;
    let uri = "computercraft://events/computer_events";
    // The initialize-era subscription (the harness client negotiates 2025-11-25).
    #[allow(deprecated)]
    h.client
        .subscribe(rmcp::model::SubscribeRequestParams::new(uri))
        .await
        .unwrap();
    let t = turtle_world(&h).await;
    // The bridge lists a computer once it has sent `hello-ok`, and the client forwards events only once it has
    // read it: an event queued before that is dropped (this test lost `redstone` so, 2 runs in about 20 on a
    // loaded machine). Frames are read in order, so an answered request means `hello-ok` was read.
    ok_of(
        &h.call("turtle_select", json!({"computer": 3, "slot": 1}))
            .await,
    );

    // The world changes: CC queues these events; the client forwards them.
    t.state().world.redstone_in.insert("left".into(), 9);
    t.queue_event(vec!["redstone".into()]);
    t.state()
        .world
        .peripherals
        .insert("top".into(), Peripheral::Speaker { played: vec![] });
    t.queue_event(vec!["peripheral".into(), "top".into()]);
    ok_of(&h.call("turtle_refuel", json!({"computer": 3})).await); // inventory changes → turtle_inventory

    let pushed =
        support::harness::within("a resources/updated push", h.client.updates.recv()).await;
    assert_eq!(pushed.as_deref(), Some(uri));

    // Paged from where the last page ended, so each poll waits for what is new (from the start, a poll answers
    // at once with what is there, and a hundred of them can pass before a loaded machine's turtle reports).
    let mut seen = Vec::new();
    let mut since = 0;
    for _ in 0..100 {
        let page = ok_of(
            &h.call(
                "poll_events",
                json!({"stream": "computer_events", "since": since, "wait_ms": 2000}),
            )
            .await,
        );
        since = page["next_since"].as_u64().unwrap();
        seen.extend(
            page["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["data"]["event"].as_str().unwrap().to_owned()),
        );
        if seen.iter().any(|e| e == "turtle_inventory") {
            break;
        }
    }
    assert_eq!(
        seen.get(..3),
        Some(&["redstone", "peripheral", "turtle_inventory"].map(String::from)[..]),
        "{seen:?}"
    );
    let page = ok_of(
        &h.call("poll_events", json!({"stream": "computer_events"}))
            .await,
    );
    assert_eq!(page["events"][1]["data"]["args"], json!(["top"]));
    assert_eq!(page["events"][0]["data"]["computer"], 3);

    let links = ok_of(&h.call("poll_events", json!({"stream": "computers"})).await);
    assert_eq!(links["events"][0]["data"]["event"], "connected");
    assert_eq!(links["events"][0]["data"]["kind"], "turtle");
    t.stop();
    let mut last = Value::Null;
    for _ in 0..100 {
        let links = ok_of(
            &h.call(
                "poll_events",
                json!({"stream": "computers", "since": 1, "wait_ms": 2000}),
            )
            .await,
        );
        if let Some(e) = links["events"].as_array().unwrap().first() {
            last = e["data"].clone();
            break;
        }
    }
    assert_eq!(last["event"], "disconnected");
    assert_eq!(last["computer"], 3);
}
