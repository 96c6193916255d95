//! The RCON client against a double of Minecraft's RCON server (tests/vanilla_double): framing, login, replies
//! over 4096 characters, a wrong password, a connection dropped mid-command, a flood of concurrent commands,
//! the size limits, a server that comes back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::vanilla_double;

use bridge_minecraft::vanilla::rcon::{self, Packet, Rcon, RconError, RconSettings};
use bridge_minecraft::vanilla::rcon_error;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use vanilla_double::{RconDouble, Reply};

fn settings(d: &RconDouble) -> RconSettings {
    let mut s = RconSettings::new(d.addr(), d.password.clone());
    s.timeout = Duration::from_secs(10);
    s.backoff_base = Duration::from_millis(20);
    s.backoff_max = Duration::from_millis(100);
    s
}

fn echo() -> vanilla_double::Handler {
    Arc::new(|cmd: &str| Reply::Text(cmd.strip_prefix("echo ").unwrap_or("").to_owned()))
}

#[tokio::test]
async fn packets_are_little_endian_with_two_nuls() {
    let p = Packet {
        id: 7,
        kind: rcon::TYPE_EXEC,
        body: b"list".to_vec(),
    };
    let bytes = p.encode();
    assert_eq!(
        &bytes[..4],
        &14i32.to_le_bytes(),
        "length counts id, type, body and the two NULs"
    );
    assert_eq!(&bytes[4..8], &7i32.to_le_bytes());
    assert_eq!(&bytes[8..12], &2i32.to_le_bytes());
    assert_eq!(&bytes[12..16], b"list");
    assert_eq!(&bytes[16..], &[0, 0]);
    let mut r = &bytes[..];
    assert_eq!(Packet::read(&mut r, 100).await.unwrap().unwrap(), p);
    // A length over the limit is refused before its body is read.
    let mut huge = Vec::from((1_000_000i32).to_le_bytes());
    huge.extend_from_slice(&[0; 16]);
    let mut r = &huge[..];
    let err = Packet::read(&mut r, rcon::MAX_PACKET_BYTES)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        err,
        RconError::PacketTooLarge {
            len: 1_000_000,
            limit: rcon::MAX_PACKET_BYTES
        }
    );
}

#[tokio::test]
async fn a_command_gets_its_reply() {
    let d = RconDouble::start("s3cret", echo()).await;
    let c = Rcon::start(settings(&d), CancellationToken::new());
    assert_eq!(c.exec("echo hello").await.unwrap(), "hello");
    assert_eq!(
        c.exec("echo ").await.unwrap(),
        "",
        "an empty reply is one empty packet"
    );
    assert!(c.status().connected);
    assert_eq!(d.bad_reads.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_reply_over_4096_characters_is_assembled_from_its_packets() {
    // Multi-byte characters straddle the 4096-character packet boundaries.
    let big: String = (0..10_000)
        .map(|i| {
            if i % 7 == 0 {
                'é'
            } else {
                char::from(b'a' + (i % 26) as u8)
            }
        })
        .collect();
    let expected = big.clone();
    let d = RconDouble::start("pw", Arc::new(move |_: &str| Reply::Text(big.clone()))).await;
    let c = Rcon::start(settings(&d), CancellationToken::new());
    for _ in 0..3 {
        let got = c.exec("data get entity Steve").await.unwrap();
        assert_eq!(got.chars().count(), 10_000);
        assert_eq!(got, expected);
    }
    assert_eq!(
        d.bad_reads.load(Ordering::SeqCst),
        0,
        "the marker never shares a read with the command"
    );
    assert_eq!(d.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_wrong_password_is_auth_failed_naming_the_flag() {
    let d = RconDouble::start("right", echo()).await;
    let mut s = settings(&d);
    s.password = "wrong".into();
    let c = Rcon::start(s, CancellationToken::new());
    let err = c.exec("echo x").await.unwrap_err();
    assert!(matches!(err, RconError::Auth { .. }), "{err:?}");
    let tool = rcon_error(&err);
    assert_eq!(tool.code_name(), "AUTH_FAILED");
    assert!(
        tool.message().contains("--minecraft-rcon-password"),
        "{}",
        tool.message()
    );
    assert!(tool.to_string().contains("MINECRAFT_RCON_PASSWORD"));
    assert!(
        !tool.to_string().contains("wrong"),
        "the password is never echoed"
    );
    assert!(!c.status().connected);
    assert!(
        c.status()
            .last_error
            .unwrap()
            .contains("refused the RCON password")
    );
}

#[tokio::test]
async fn a_connection_dropped_mid_command_fails_that_call_and_the_next_redials() {
    let d = RconDouble::start(
        "pw",
        Arc::new(|cmd: &str| {
            if cmd == "crash" {
                Reply::Drop
            } else {
                Reply::Text(format!("ok {cmd}"))
            }
        }),
    )
    .await;
    let c = Rcon::start(settings(&d), CancellationToken::new());
    assert_eq!(c.exec("one").await.unwrap(), "ok one");
    let err = c.exec("crash").await.unwrap_err();
    assert!(matches!(err, RconError::Dropped { .. }), "{err:?}");
    let tool = rcon_error(&err);
    assert_eq!(tool.code_name(), "CONNECTION_ERROR");
    assert!(tool.message().contains("may or may not have run"));
    assert_eq!(c.exec("two").await.unwrap(), "ok two");
    assert_eq!(d.connections.load(Ordering::SeqCst), 2);
    assert_eq!(c.status().commands_failed, 1);
}

#[tokio::test]
async fn a_server_restarted_between_commands_costs_no_command() {
    let d = RconDouble::start("pw", echo()).await;
    let addr = d.addr;
    let c = Rcon::start(settings(&d), CancellationToken::new());
    assert_eq!(c.exec("echo a").await.unwrap(), "a");
    // The server goes away (its connections with it) and comes back on the same port.
    drop(d);
    let d2 = RconDouble::on(mcp_testkit::net::rebind(addr).await, "pw", echo());
    // The old connection is closed: found before the command is sent, so the command goes out on a new one.
    assert_eq!(c.exec("echo b").await.unwrap(), "b");
    assert_eq!(d2.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_server_down_is_connection_error_and_redialled_with_backoff() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut s = RconSettings::new(addr.to_string(), "pw");
    s.backoff_base = Duration::from_millis(20);
    s.backoff_max = Duration::from_millis(80);
    let c = Rcon::start(s, CancellationToken::new());
    let err = c.exec("list").await.unwrap_err();
    assert!(
        matches!(err, RconError::Down { .. } | RconError::Connect { .. }),
        "{err:?}"
    );
    assert_eq!(rcon_error(&err).code_name(), "CONNECTION_ERROR");
    // It keeps dialling on its own, with capped delays (80 ms apart at most: four take a moment on a quiet
    // machine, longer on a loaded one).
    let guard = tokio::time::Instant::now() + Duration::from_secs(60);
    while c.status().reconnect_attempts < 4 && tokio::time::Instant::now() < guard {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let st = c.status();
    assert!(st.reconnect_attempts >= 4, "redialled: {st:?}");
    let d = RconDouble::on(mcp_testkit::net::rebind(addr).await, "pw", echo());
    for _ in 0..3000 {
        if c.status().connected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        c.status().connected,
        "connected once the server is up, with no command asking"
    );
    assert_eq!(c.exec("echo up").await.unwrap(), "up");
    drop(d);
}

#[tokio::test]
async fn a_flood_of_concurrent_commands_each_gets_its_own_reply() {
    let d = RconDouble::start(
        "pw",
        Arc::new(|cmd: &str| {
            // Every tenth answer is long, so replies of several packets interleave with short ones in time.
            let n: usize = cmd.strip_prefix("echo ").unwrap().parse().unwrap();
            let pad = if n.is_multiple_of(10) {
                "#".repeat(9000)
            } else {
                String::new()
            };
            Reply::Text(format!("{n}{pad}"))
        }),
    )
    .await;
    let mut s = settings(&d);
    s.queue = 1000;
    let c = Rcon::start(s, CancellationToken::new());
    let calls = (0..500).map(|n| {
        let c = c.clone();
        tokio::spawn(async move { (n, c.exec(&format!("echo {n}")).await) })
    });
    for call in futures::future::join_all(calls).await {
        let (n, got) = call.unwrap();
        let got = got.unwrap();
        let expected_len = n.to_string().len() + if n % 10 == 0 { 9000 } else { 0 };
        assert!(
            got.starts_with(&n.to_string()) && got.len() == expected_len,
            "call {n} got another's reply"
        );
    }
    assert_eq!(
        d.bad_reads.load(Ordering::SeqCst),
        0,
        "no two packets ever shared a read"
    );
    assert_eq!(d.connections.load(Ordering::SeqCst), 1);
    assert_eq!(d.commands().len(), 500);
}

#[tokio::test]
async fn the_queue_is_bounded_and_says_its_limit() {
    let d = RconDouble::start(
        "pw",
        Arc::new(|_: &str| Reply::Slow("late".into(), Duration::from_millis(300))),
    )
    .await;
    let mut s = settings(&d);
    s.queue = 2;
    let c = Rcon::start(s, CancellationToken::new());
    let pending: Vec<_> = (0..4)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.exec("x").await })
        })
        .collect();
    let mut full = 0;
    for p in pending {
        if let Err(RconError::QueueFull { limit }) = p.await.unwrap() {
            assert_eq!(limit, 2);
            full += 1;
        }
    }
    assert!(
        full >= 1,
        "past the queue's bound a call is refused at once"
    );
    let tool = rcon_error(&RconError::QueueFull { limit: 2 });
    assert!(tool.message().contains("2 RCON commands"));
}

#[tokio::test]
async fn sizes_over_the_limits_are_errors_naming_the_limit() {
    let d = RconDouble::start("pw", Arc::new(|_: &str| Reply::Text("y".repeat(20_000)))).await;
    let mut s = settings(&d);
    s.max_response_bytes = 10_000;
    let c = Rcon::start(s, CancellationToken::new());
    let long = "say ".to_owned() + &"x".repeat(rcon::MAX_REQUEST_BYTES);
    let err = c.exec(&long).await.unwrap_err();
    assert_eq!(
        err,
        RconError::RequestTooLarge {
            bytes: long.len(),
            limit: 1446
        }
    );
    let tool = rcon_error(&err);
    assert_eq!(tool.code_name(), "INVALID_COMMAND");
    assert!(
        tool.message().contains("at most 1446 bytes"),
        "{}",
        tool.message()
    );
    assert!(d.commands().is_empty(), "nothing over the limit was sent");
    let err = c.exec("data get entity Steve").await.unwrap_err();
    assert_eq!(err, RconError::ResponseTooLarge { limit: 10_000 });
    assert!(
        rcon_error(&err)
            .to_string()
            .contains("--minecraft-rcon-max-response")
    );
    assert!(matches!(
        c.exec("nul\0byte").await.unwrap_err(),
        RconError::Nul
    ));
}

#[tokio::test]
async fn a_slow_server_times_out_and_the_next_command_is_not_answered_with_the_late_reply() {
    let d = RconDouble::start(
        "pw",
        Arc::new(|cmd: &str| {
            if cmd == "slow" {
                Reply::Slow("late".into(), Duration::from_secs(5))
            } else {
                Reply::Text(format!("re {cmd}"))
            }
        }),
    )
    .await;
    let mut s = settings(&d);
    // The next command redials and logs in within this time too, so it is not a fraction of a second.
    s.timeout = Duration::from_secs(2);
    let c = Rcon::start(s, CancellationToken::new());
    let err = c.exec("slow").await.unwrap_err();
    assert!(matches!(err, RconError::Timeout { ms: 2000 }), "{err:?}");
    assert_eq!(rcon_error(&err).code_name(), "TIMEOUT");
    assert_eq!(c.exec("fast").await.unwrap(), "re fast");
}

/// Figures for the note (the times printed, not asserted; each reply whole): round trips of a short command and of a 12 000-character
/// reply (three packets plus the marker's answer) over loopback.
#[tokio::test]
async fn round_trip_figures() {
    let big = "z".repeat(12_000);
    let d = RconDouble::start(
        "pw",
        Arc::new(move |cmd: &str| {
            Reply::Text(if cmd == "big" {
                big.clone()
            } else {
                "ok".into()
            })
        }),
    )
    .await;
    let c = Rcon::start(settings(&d), CancellationToken::new());
    c.exec("warm").await.unwrap();
    for (what, cmd, len) in [("short", "list", 2), ("12000 chars", "big", 12_000)] {
        let mut times = Vec::new();
        for _ in 0..1000 {
            let t = std::time::Instant::now();
            let reply = c.exec(cmd).await.unwrap();
            times.push(t.elapsed());
            // Every call gets its whole reply: a marker answered early would cut the 12 000 characters.
            assert_eq!(reply.len(), len, "{what}");
        }
        times.sort();
        eprintln!(
            "rcon round trip, {what}: p50 {:?} p99 {:?} max {:?} (1000 calls, one connection)",
            times[500], times[990], times[999]
        );
    }
}
