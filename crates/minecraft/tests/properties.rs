#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The correctness properties of the bridge's design (each stated above its test) that the Rust side
//! implements, each over ≥ 100 generated cases.
//! Properties 6, 7 and 15 belong to the game side (config, whitelist, the mod's logs) and are tested in Java
//! under `adapters/`; Property 4 (latency) is measured by the bench, never asserted in a test.

use crate::support;

use bridge_core::Validate;
use bridge_minecraft::models::{PlayerInfo, ServerInfo, WorldInfo};
use bridge_minecraft::relay::audit;
use bridge_minecraft::relay::config::{McpToken, parse_tokens};
use bridge_minecraft::relay::queue::Queue;
use bridge_minecraft::relay::state::{Client, ClientKey, Relay, Target, select_game};
use bridge_minecraft::tools::args::{MAX_RADIUS, WorldArgs, normalize_item};
use bridge_minecraft::wire::{self, Code, Envelope, EventType, Kind, Source};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

const CASES: u32 = 100;

fn runner() -> TestRunner {
    TestRunner::new(Config::with_cases(CASES))
}

fn event_type() -> impl Strategy<Value = EventType> {
    prop::sample::select(EventType::ALL.to_vec())
}

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_]{1,16}"
}

fn location() -> impl Strategy<Value = Value> {
    // Quarter blocks: exact in binary, so JSON round trips are exact too.
    (name(), -120_000_000i64..120_000_000, -256i64..1280, -120_000_000i64..120_000_000).prop_map(|(w, x, y, z)| {
        json!({"world": format!("minecraft:{w}"), "x": x as f64 / 4.0, "y": y as f64 / 4.0, "z": z as f64 / 4.0})
    })
}

/// A valid GameEvent payload of `ty`.
fn game_event(ty: EventType) -> impl Strategy<Value = Value> {
    (name(), ".{0,40}", location(), prop::option::of(name()), 0u64..4_000_000_000_000).prop_map(
        move |(player, text, loc, killer, ts)| {
            let data = match ty {
                EventType::PlayerJoin | EventType::PlayerQuit => json!({"player": player, "uuid": text}),
                EventType::PlayerChat => json!({"player": player, "message": text}),
                EventType::PlayerDeath => {
                    let mut d = json!({"player": player, "cause": text, "location": loc});
                    if let Some(k) = killer {
                        d["killer"] = json!(k);
                    }
                    d
                }
                EventType::BlockBreak => json!({"player": player, "blockType": format!("minecraft:{text}"), "location": loc}),
            };
            json!({"eventType": ty.as_str(), "timestamp": ts, "data": data})
        },
    )
}

fn any_event() -> impl Strategy<Value = (EventType, Value)> {
    event_type().prop_flat_map(|ty| game_event(ty).prop_map(move |e| (ty, e)))
}

fn event_envelope(seq: u64, payload: Value) -> Envelope {
    let mut e = Envelope::new(Kind::Event, format!("e{seq}"), Source::Minecraft, payload);
    e.seq = Some(seq);
    e
}

fn test_relay(tokens: Vec<McpToken>) -> Relay {
    let args = relay_args(&[]);
    let mut settings = bridge_minecraft::relay::settings(&args, Vec::new()).unwrap();
    settings.mcp_tokens = tokens;
    Relay::new(settings)
}

fn add_client(relay: &Relay, key: &ClientKey, subs: Vec<EventType>) {
    relay.lock().clients.insert(
        key.clone(),
        Client {
            queue: Queue::new(10_000, 1 << 24),
            subscriptions: subs,
            live: None,
            instance: None,
            wake: Arc::new(tokio::sync::Notify::new()),
            sent: 0,
            gone_since: None,
        },
    );
}

fn queued(relay: &Relay, key: &ClientKey) -> Vec<Value> {
    let state = relay.lock();
    state.clients[key]
        .queue
        .after(0, usize::MAX)
        .into_iter()
        .map(|i| serde_json::from_str(&i.text()).unwrap())
        .collect()
}

// Feature: minecraft-mcp-bridge, Property 1: Event notification completeness — every event forwarded to an
// MCP server carries the player, the timestamp and its type's fields.
#[test]
fn property_1_event_notification_completeness() {
    runner()
        .run(&any_event(), |(ty, payload)| {
            let relay = test_relay(vec![McpToken::all("t")]);
            let key: ClientKey = (0, "c".into());
            add_client(&relay, &key, EventType::ALL.to_vec());
            relay.accept_event("g", "i", ty, &event_envelope(1, payload.clone()));
            let out = queued(&relay, &key);
            prop_assert_eq!(out.len(), 1);
            let parsed = wire::parse(&out[0].to_string(), 1 << 20).unwrap().envelope;
            prop_assert_eq!(wire::validate_game_event(&parsed.payload).unwrap(), ty);
            prop_assert!(parsed.payload["data"]["player"].is_string());
            prop_assert!(parsed.payload["timestamp"].is_number());
            prop_assert_eq!(&Value::Object(parsed.payload.clone()), &payload);
            Ok(())
        })
        .unwrap();
}

/// The MCP server with its relay in-process and the simulated game, for properties checked end to end.
struct Stack {
    rt: tokio::runtime::Runtime,
    server: McpServer,
    game: FakeGame,
}

fn stack() -> Stack {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (server, game) = rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port().to_string();
        drop(l);
        let server = McpServer::start(mc_args(&[
            "--minecraft-relay-port",
            &port,
            "--minecraft-auth-token",
            GAME_TOKEN,
        ]))
        .await;
        let game = FakeGame::start(&format!("ws://127.0.0.1:{port}"), "survival");
        game.wait_connected(1).await;
        server.ready(1).await;
        (server, game)
    });
    Stack { rt, server, game }
}

// Feature: minecraft-mcp-bridge, Property 2: Command forwarding and execution — any valid execute_command,
// send_message, teleport_player or give_item reaches the game with its arguments and returns success.
#[test]
fn property_2_command_forwarding_and_execution() {
    let s = stack();
    let strategy = (
        0usize..4,
        name(),
        "[a-z]{1,10}( [a-z]{1,5}){0,3}",
        -1000i32..1000,
        0i32..300,
        -1000i32..1000,
        "[a-z_]{1,20}",
        1u32..6400,
    );
    runner()
        .run(
            &strategy,
            |(tool, text_player, text, x, y, z, item, qty)| {
                s.rt.block_on(async {
                    let before = s.game.commands().len();
                    let player = "Steve";
                    let (name, args) = match tool {
                        0 => ("execute_command", json!({"command": format!("say {text}")})),
                        1 => (
                            "send_message",
                            json!({"message": format!("{text_player} {text}")}),
                        ),
                        2 => (
                            "teleport_player",
                            json!({"player": player, "x": x, "y": y.to_string(), "z": z}),
                        ),
                        _ => (
                            "give_item",
                            json!({"player": player, "item": item, "quantity": qty}),
                        ),
                    };
                    let r = ok_of(&call(&s.server.client, name, args.clone()).await);
                    prop_assert_eq!(&r["success"], &json!(true));
                    let cmds = s.game.commands();
                    prop_assert_eq!(cmds.len(), before + 1);
                    let sent = &cmds[before]["payload"];
                    prop_assert_eq!(&sent["command"], &json!(name));
                    if name == "give_item" {
                        prop_assert_eq!(
                            &sent["args"]["item"],
                            &json!(normalize_item(&item).unwrap())
                        );
                        prop_assert_eq!(&sent["args"]["quantity"], &json!(qty));
                    }
                    if name == "teleport_player" {
                        prop_assert_eq!(sent["args"]["y"].as_f64(), Some(f64::from(y)));
                    }
                    Ok(())
                })
            },
        )
        .unwrap();
    s.game.stop();
}

// Feature: minecraft-mcp-bridge, Property 3: Command failure error responses — a failing command returns an
// error with a descriptive message (and the protocol's code, PROTOCOL.md §7, in the details).
#[test]
fn property_3_command_failure_error_responses() {
    let s = stack();
    let strategy = (
        any::<bool>(),
        "[a-z]{1,12}( [a-z0-9]{1,8}){0,3}",
        "[A-Z][a-z]{3,10}",
    );
    runner()
        .run(&strategy, |(whitelist_case, cmd, ghost)| {
            s.rt.block_on(async {
                let (tool, args, code) = if whitelist_case {
                    // The double allows only say/time query/give.
                    let c = format!("x{cmd}");
                    ("execute_command", json!({"command": c}), "INVALID_COMMAND")
                } else {
                    (
                        "get_player_info",
                        json!({"player": format!("{ghost}9")}),
                        "PLAYER_NOT_FOUND",
                    )
                };
                let e = error_of(&call(&s.server.client, tool, args).await);
                prop_assert_eq!(&e["code"], &json!(code));
                prop_assert!(e["message"].as_str().is_some_and(|m| m.len() > 5));
                prop_assert!(e["hint"].as_str().is_some_and(|m| !m.is_empty()));
                Ok(())
            })
        })
        .unwrap();
    s.game.stop();
}

// Feature: minecraft-mcp-bridge, Property 5: Message routing correctness — a command goes to the named game or
// the only one, never guessed among several; unknown names are refused.
#[test]
fn property_5_message_routing_correctness() {
    let strategy = (
        prop::collection::btree_set(name(), 0..5),
        prop::option::of(name()),
    );
    runner()
        .run(&strategy, |(games, named)| {
            let list: Vec<&str> = games.iter().map(String::as_str).collect();
            let t = select_game(named.as_deref(), list.clone());
            match (&named, list.len()) {
                (Some(n), _) if games.contains(n) => prop_assert_eq!(t, Target::Game(n.clone())),
                (Some(_), _) => {
                    prop_assert!(matches!(t, Target::Refused(Code::ConnectionError, _)))
                }
                (None, 0) => prop_assert!(matches!(t, Target::Refused(Code::ConnectionError, _))),
                (None, 1) => prop_assert_eq!(t, Target::Game(list[0].to_owned())),
                (None, _) => prop_assert!(matches!(t, Target::Refused(Code::InvalidCommand, _))),
            }
            Ok(())
        })
        .unwrap();
}

// Feature: minecraft-mcp-bridge, Property 8: Player list query completeness — get_online_players returns
// exactly the players online.
#[test]
fn property_8_player_list_query_completeness() {
    let s = stack();
    runner()
        .run(&prop::collection::btree_set(name(), 0..12), |players| {
            s.rt.block_on(async {
                let players: Vec<String> = players.into_iter().collect();
                s.game.set_players(players.clone());
                let r = ok_of(&call(&s.server.client, "get_online_players", json!({})).await);
                prop_assert_eq!(&r["players"], &json!(players));
                prop_assert_eq!(&r["count"], &json!(players.len()));
                Ok(())
            })
        })
        .unwrap();
    s.game.stop();
}

fn drop_each_key(v: &Value) -> Vec<Value> {
    v.as_object()
        .unwrap()
        .keys()
        .map(|k| {
            let mut c = v.clone();
            c.as_object_mut().unwrap().remove(k);
            c
        })
        .collect()
}

// Feature: minecraft-mcp-bridge, Property 9: Player info query completeness — a PlayerInfo always has health,
// location, inventory and game mode; an answer missing any field is refused, not passed on half-empty.
#[test]
fn property_9_player_info_query_completeness() {
    let strategy = (
        name(),
        0.0..20.0f64,
        0.0..20.0f64,
        location(),
        "[a-z]{4,10}",
        prop::collection::vec((name(), 1u32..64), 0..5),
    );
    runner()
        .run(&strategy, |(n, health, food, loc, mode, inv)| {
            let v = json!({"name": n, "uuid": "u", "health": health, "foodLevel": food, "location": loc, "gameMode": mode,
                "inventory": inv.iter().map(|(t, q)| json!({"type": t, "quantity": q})).collect::<Vec<_>>()});
            let p: PlayerInfo = serde_json::from_value(v.clone()).unwrap();
            let back = serde_json::to_value(&p).unwrap();
            for key in ["health", "location", "inventory", "gameMode", "foodLevel", "name", "uuid"] {
                prop_assert!(back.get(key).is_some(), "missing {}", key);
            }
            for partial in drop_each_key(&v) {
                prop_assert!(serde_json::from_value::<PlayerInfo>(partial).is_err());
            }
            Ok(())
        })
        .unwrap();
}

// Feature: minecraft-mcp-bridge, Property 10: Server info query completeness — version, time of day, weather and
// player count are always present.
#[test]
fn property_10_server_info_query_completeness() {
    let strategy = (
        "[0-9.]{1,8}",
        0u32..200,
        1u32..200,
        0.0..24000.0f64,
        prop::sample::select(vec!["clear", "rain", "thunder"]),
        0.0..20.0f64,
    );
    runner()
        .run(&strategy, |(version, online, max, time, weather, tps)| {
            let v = json!({"version": version, "onlinePlayers": online, "maxPlayers": max, "timeOfDay": time, "weather": weather, "tps": tps});
            let s: ServerInfo = serde_json::from_value(v.clone()).unwrap();
            let back = serde_json::to_value(&s).unwrap();
            for key in ["version", "timeOfDay", "weather", "onlinePlayers", "maxPlayers", "tps"] {
                prop_assert!(back.get(key).is_some());
            }
            for partial in drop_each_key(&v) {
                prop_assert!(serde_json::from_value::<ServerInfo>(partial).is_err());
            }
            Ok(())
        })
        .unwrap();
}

// Feature: minecraft-mcp-bridge, Property 11: World info query completeness — any coordinates with a radius
// within the cap are accepted and answered with blocks and entities; a larger radius is refused by name.
#[test]
fn property_11_world_info_query_completeness() {
    let strategy = (
        -29_000_000i64..29_000_000,
        -64i64..320,
        -29_000_000i64..29_000_000,
        0u32..40,
        prop::collection::vec((name(), location()), 0..6),
    );
    runner()
        .run(&strategy, |(x, y, z, radius, blocks)| {
            let args = WorldArgs { x, y, z, radius, offset: 0, game: None };
            match args.validate() {
                Ok(()) => prop_assert!(radius <= MAX_RADIUS),
                Err(e) => {
                    prop_assert!(radius > MAX_RADIUS);
                    prop_assert!(e.message().contains("radius"));
                }
            }
            let v = json!({"blocks": blocks.iter().map(|(t, l)| json!({"type": t, "location": l})).collect::<Vec<_>>(),
                           "entities": blocks.iter().map(|(t, l)| json!({"type": t, "location": l, "name": t})).collect::<Vec<_>>()});
            let w: WorldInfo = serde_json::from_value(v).unwrap();
            prop_assert_eq!(w.blocks.len(), blocks.len());
            prop_assert_eq!(w.entities.len(), blocks.len());
            Ok(())
        })
        .unwrap();
}

// Feature: minecraft-mcp-bridge, Property 12: Malformed message resilience — any input is refused with an
// error naming a field, never a panic; on a live link the next valid message still goes through.
#[test]
fn property_12_malformed_message_resilience() {
    runner()
        .run(&prop::collection::vec(any::<u8>(), 0..300), |bytes| {
            let text = String::from_utf8_lossy(&bytes);
            if let Err(e) = wire::parse(&text, 1 << 16) {
                prop_assert!(!e.field.is_empty());
                prop_assert_eq!(&e.reply().payload["code"], &json!("SCHEMA_ERROR"));
            }
            Ok(())
        })
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let relay = start_relay(relay_args(&[])).await;
        let mut game = raw_connect(&relay.url(), Some(GAME_TOKEN)).await.unwrap();
        game.send(&envelope("hello", "h", "minecraft", json!({"name": "s", "instance": "i"}))).await;
        game.recv_kind("welcome").await;
        let mut seq = 0;
        let mut r = runner();
        let garbage = "[^\u{0}]{0,200}";
        for _ in 0..CASES {
            let text = garbage.new_tree(&mut r).unwrap().current();
            if wire::parse(&text, 1 << 16).is_ok() {
                continue;
            }
            game.send_text(text).await;
            assert_eq!(game.recv_kind("error").await["payload"]["code"], "SCHEMA_ERROR");
            seq += 1;
            let mut e = envelope("event", &format!("e{seq}"), "minecraft",
                json!({"eventType": "player_chat", "timestamp": 1, "data": {"player": "S", "message": "m"}}));
            e["seq"] = json!(seq);
            game.send(&e).await;
            assert_eq!(game.recv_kind("ack").await["payload"]["seq"], seq);
        }
        relay.stop().await;
    });
}

// Feature: minecraft-mcp-bridge, Property 13: Connection error recovery — after any connection error the MCP
// server retries under its policy: exponential from the base to the max, with ±20% jitter, without limit.
#[test]
fn property_13_connection_error_recovery() {
    let strategy = (10u64..5_000, 1u64..20, 1u32..40);
    runner()
        .run(&strategy, |(base_ms, factor, attempts)| {
            let base = Duration::from_millis(base_ms);
            let max = base * factor as u32;
            let mut b = bridge_core::link::Backoff::new(base, max).with_jitter(0.2);
            for n in 0..attempts {
                let d = b.next_delay();
                let nominal = b.nominal(n);
                prop_assert!(nominal <= max);
                prop_assert!(
                    d.as_secs_f64() >= nominal.as_secs_f64() * 0.79
                        && d.as_secs_f64() <= nominal.as_secs_f64() * 1.21
                );
            }
            Ok(())
        })
        .unwrap();
    // And a real link keeps trying, with the error in status.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let server = McpServer::start(mc_args(&[
            "--minecraft-relay-url",
            "ws://127.0.0.1:9",
            "--minecraft-relay-token",
            "t",
        ]))
        .await;
        within("several attempts", async {
            loop {
                let s = ok_of(&call(&server.client, "status", json!({})).await);
                if s["reconnect_attempts"].as_u64().unwrap() >= 3 && s["last_error"].is_string() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        server.stop().await;
    });
}

/// Log lines written while `f` runs (current thread).
fn captured<T>(f: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let out = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_writer(move || out.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let value = tracing::subscriber::with_default(sub, f);
    let text = String::from_utf8_lossy(&buf.0.lock().unwrap()).into_owned();
    (value, text)
}

// Feature: minecraft-mcp-bridge, Property 14: Component startup logging — the relay's start-up log has its
// version, its configuration and where it listens.
#[test]
fn property_14_component_startup_logging() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runner()
        .run(&(1usize..100_000, 1024usize..(1 << 24)), |(size, bytes)| {
            let (addr, log) = captured(|| {
                rt.block_on(async {
                    let args = relay_args(&[
                        "--message-queue-size",
                        &size.to_string(),
                        "--message-queue-bytes",
                        &bytes.to_string(),
                    ]);
                    let settings = bridge_minecraft::relay::settings(&args, Vec::new()).unwrap();
                    let stop = tokio_util::sync::CancellationToken::new();
                    let h = bridge_minecraft::relay::start(&args, settings, stop.clone())
                        .await
                        .unwrap();
                    stop.cancel();
                    let _ = h.task.await;
                    h.addr
                })
            });
            let version = format!("version={}", env!("CARGO_PKG_VERSION"));
            let has_version = log.contains(&version) || log.contains(env!("CARGO_PKG_VERSION"));
            prop_assert!(has_version);
            let queue = format!("queue={size} ");
            let has_queue = log.contains(&queue);
            prop_assert!(has_queue, "no {} in {}", queue, log);
            let queue_bytes = format!("queue_bytes={bytes}");
            let has_bytes = log.contains(&queue_bytes);
            prop_assert!(has_bytes);
            let url = format!("ws://{addr}");
            let has_url = log.contains(&url);
            prop_assert!(has_url);
            Ok(())
        })
        .unwrap();
}

// Feature: minecraft-mcp-bridge, Property 16: Message forwarding audit logging — every forwarded message leaves
// one log line with its type, source and destination.
#[test]
fn property_16_message_forwarding_audit_logging() {
    let strategy = (
        any_event(),
        prop::collection::vec(prop::collection::btree_set(event_type(), 0..5), 0..5),
    );
    runner()
        .run(&strategy, |((ty, payload), subs)| {
            let relay = test_relay(vec![McpToken::all("t")]);
            for (i, s) in subs.iter().enumerate() {
                add_client(&relay, &(0, format!("c{i}")), s.iter().copied().collect());
            }
            let ((), log) = captured(|| {
                relay.accept_event("g1", "i", ty, &event_envelope(1, payload.clone()));
            });
            let lines: Vec<&str> = log.lines().filter(|l| l.contains(audit::TARGET)).collect();
            let expected: Vec<usize> = subs
                .iter()
                .enumerate()
                .filter(|(_, s)| s.contains(&ty))
                .map(|(i, _)| i)
                .collect();
            prop_assert_eq!(lines.len(), expected.len());
            for i in expected {
                let want = audit::line("event", "minecraft:g1", &format!("mcp:0/c{i}"), "e1");
                prop_assert!(lines.iter().any(|l| l.contains(&want)), "{}", log);
            }
            Ok(())
        })
        .unwrap();
}

// Feature: minecraft-mcp-bridge, Property 17: Event subscription filtering — an event is queued for a client
// if and only if its type is in the client's subscription.
#[test]
fn property_17_event_subscription_filtering() {
    let strategy = (
        prop::collection::vec(any_event(), 1..20),
        prop::collection::vec(prop::collection::btree_set(event_type(), 0..6), 1..4),
    );
    runner()
        .run(&strategy, |(events, subs)| {
            let relay = test_relay(vec![McpToken::all("t")]);
            for (i, s) in subs.iter().enumerate() {
                add_client(&relay, &(0, format!("c{i}")), s.iter().copied().collect());
            }
            for (n, (ty, payload)) in events.iter().enumerate() {
                relay.accept_event(
                    "g",
                    "i",
                    *ty,
                    &event_envelope(n as u64 + 1, payload.clone()),
                );
            }
            for (i, s) in subs.iter().enumerate() {
                let got: Vec<String> = queued(&relay, &(0, format!("c{i}")))
                    .iter()
                    .map(|v| v["id"].as_str().unwrap().to_owned())
                    .collect();
                let want: Vec<String> = events
                    .iter()
                    .enumerate()
                    .filter(|(_, (t, _))| s.contains(t))
                    .map(|(n, _)| format!("e{}", n + 1))
                    .collect();
                prop_assert_eq!(got, want);
            }
            Ok(())
        })
        .unwrap();
}

// Feature: minecraft-mcp-bridge, Property 18: Authentication enforcement — any connection without a valid
// token is refused with an authentication error (401) before a WebSocket exists.
#[test]
fn property_18_authentication_enforcement() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let relay = rt.block_on(start_relay(relay_args(&[])));
    runner()
        .run(&prop::option::of("[!-~]{0,40}"), |token| {
            if matches!(
                token.as_deref(),
                Some(GAME_TOKEN | MCP_TOKEN | READONLY_TOKEN)
            ) {
                return Ok(());
            }
            let refused = rt.block_on(raw_connect(&relay.url(), token.as_deref()));
            prop_assert_eq!(refused.err(), Some(401));
            Ok(())
        })
        .unwrap();
    rt.block_on(relay.stop());
}

// Feature: minecraft-mcp-bridge, Property 19: Command authorization enforcement — a command type the token may
// not send is refused with PERMISSION_DENIED at the relay; one it may send is not.
#[test]
fn property_19_command_authorization_enforcement() {
    let strategy = (
        prop::collection::btree_set(prop::sample::select(wire::COMMANDS.to_vec()), 0..8),
        prop::sample::select(wire::COMMANDS.to_vec()),
    );
    runner()
        .run(&strategy, |(allowed, command)| {
            let list: Vec<&str> = allowed.iter().copied().collect();
            let spec = if list.is_empty() {
                "t".to_owned()
            } else {
                format!("t={}", list.join("|"))
            };
            let tokens = parse_tokens(&spec).unwrap().0;
            let relay = test_relay(tokens);
            let key: ClientKey = (0, "c".into());
            add_client(&relay, &key, vec![]);
            let cmd = Envelope::new(
                Kind::Command,
                "x1",
                Source::Mcp,
                json!({"command": command, "args": {}}),
            );
            prop_assert!(
                relay.route_command(&key, &cmd).is_none(),
                "no game is connected"
            );
            let out = queued(&relay, &key);
            prop_assert_eq!(out.len(), 1);
            let code = out[0]["payload"]["error"]["code"]
                .as_str()
                .unwrap()
                .to_owned();
            let may = list.is_empty() || allowed.contains(command);
            if may {
                prop_assert_eq!(code, "CONNECTION_ERROR");
            } else {
                prop_assert_eq!(code, "PERMISSION_DENIED");
            }
            Ok(())
        })
        .unwrap();
}

fn any_kind() -> impl Strategy<Value = Kind> {
    prop::sample::select(Kind::ALL.to_vec())
}

// Feature: minecraft-mcp-bridge, Property 20: Message schema version inclusion — every message carries the
// schema version in "MAJOR.MINOR" form.
#[test]
fn property_20_message_schema_version_inclusion() {
    runner()
        .run(
            &(any_kind(), "[a-z0-9-]{1,20}", any::<u32>()),
            |(kind, id, n)| {
                let v: Value = serde_json::from_str(
                    &Envelope::new(kind, id, Source::Relay, json!({"n": n})).to_text(),
                )
                .unwrap();
                let version = v["version"].as_str().unwrap();
                prop_assert_eq!(version, wire::VERSION);
                let (major, minor) = version.split_once('.').unwrap();
                prop_assert!(major.parse::<u32>().is_ok() && minor.parse::<u32>().is_ok());
                Ok(())
            },
        )
        .unwrap();
}

// Feature: minecraft-mcp-bridge, Property 21: Schema validation enforcement — a message missing a required field
// or with one of the wrong type is refused, and the error names that field.
#[test]
fn property_21_schema_validation_enforcement() {
    let fields = vec![
        "version",
        "type",
        "id",
        "timestamp",
        "source",
        "payload",
        "seq",
    ];
    let strategy = (any_event(), prop::sample::select(fields), any::<bool>());
    runner()
        .run(&strategy, |((_, payload), field, drop)| {
            let mut v: Value = serde_json::from_str(&event_envelope(3, payload).to_text()).unwrap();
            if drop {
                v.as_object_mut().unwrap().remove(field);
            } else {
                v[field] = json!([true]);
            }
            let e = wire::parse(&v.to_string(), 1 << 20).unwrap_err();
            prop_assert_eq!(e.field, field);
            Ok(())
        })
        .unwrap();
}

// Feature: minecraft-mcp-bridge, Property 22: Version mismatch handling — a message of another major version is
// flagged (the relay warns) and still processed as 1.0 when it fits; no crash.
#[test]
fn property_22_version_mismatch_handling() {
    let strategy = (any_event(), 0u32..1000, 0u32..1000);
    runner()
        .run(&strategy, |((_, payload), major, minor)| {
            let mut v: Value = serde_json::from_str(&event_envelope(3, payload).to_text()).unwrap();
            v["version"] = json!(format!("{major}.{minor}"));
            let p = wire::parse(&v.to_string(), 1 << 20).unwrap();
            if major == 1 {
                prop_assert_eq!(p.unsupported_version, None);
            } else {
                prop_assert_eq!(p.unsupported_version, Some(format!("{major}.{minor}")));
            }
            prop_assert_eq!(p.envelope.kind, Kind::Event);
            Ok(())
        })
        .unwrap();
}

#[test]
fn item_ids_normalise_whatever_the_namespace_spelling() {
    runner()
        .run(&"[a-z_]{1,20}", |item| {
            prop_assert_eq!(
                normalize_item(&item),
                normalize_item(&format!("minecraft:{item}"))
            );
            prop_assert_eq!(
                normalize_item(&item.to_uppercase()),
                Some(format!("minecraft:{item}"))
            );
            Ok(())
        })
        .unwrap();
}
