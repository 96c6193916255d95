//! The fake game as a program, for interop tests in other languages:
//!
//! `cargo run -p bitburner-fake --bin fake-game -- --connect ws://127.0.0.1:12525 [--version 3.0]`
//!
//! Prints one JSON object per line on stdout: `{"event":"connected"}`, `{"event":"request","frame":...}`,
//! `{"event":"closed","how":...}`, and `{"event":"muted"}` / `{"event":"unmuted"}` once those hold. Reads
//! commands on stdin, one per line: `close`, `mute` (stop answering), `unmute`, `send <text>` (send a raw
//! frame), `reconnect`. Exits when the connection ends, unless `--reconnect-delay-ms` is set (the v3.0
//! auto-reconnect setting).

use bitburner_fake::{Closed, FakeGame, GameVersion, WEB_ORIGIN};
use clap::Parser;
use serde_json::json;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

#[derive(Parser)]
struct Args {
    /// The bridge's game listener, e.g. ws://127.0.0.1:12525
    #[arg(long)]
    connect: String,
    /// Game version to imitate: 2.6, 3.0 or dev
    #[arg(long, default_value = "3.0")]
    version: GameVersion,
    /// Origin header to send; `none` sends none
    #[arg(long, default_value = WEB_ORIGIN)]
    origin: String,
    /// Reconnect this long after the connection ends (v3.0 "Reconnection delay"); 0 exits instead
    #[arg(long, default_value_t = 0)]
    reconnect_delay_ms: u64,
    /// Seed a file on home: NAME=CONTENT (repeatable)
    #[arg(long = "file")]
    files: Vec<String>,
}

fn emit(value: serde_json::Value) {
    println!("{value}");
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let game = FakeGame::new(args.version);
    for spec in &args.files {
        let (name, content) = spec.split_once('=').unwrap_or((spec, ""));
        if let Some(home) = game.world().server_mut("home") {
            let is_script =
                name.ends_with(".js") || name.ends_with(".ts") || name.ends_with(".script");
            home.write(name, content, is_script);
        }
    }
    let origin = (args.origin != "none").then_some(args.origin.as_str());
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut stdin_open = true;
    loop {
        let conn = match game.connect(&args.connect, origin).await {
            Ok(conn) => conn,
            Err(e) => {
                emit(json!({"event": "error", "message": e.to_string()}));
                if args.reconnect_delay_ms == 0 {
                    return std::process::ExitCode::FAILURE;
                }
                tokio::time::sleep(Duration::from_millis(args.reconnect_delay_ms)).await;
                continue;
            }
        };
        emit(json!({"event": "connected"}));
        let mut seen = 0;
        let closed = loop {
            tokio::select! {
                frames = conn.wait_for_frames(seen + 1) => {
                    for frame in frames.iter().skip(seen) {
                        emit(json!({"event": "request", "frame": frame}));
                    }
                    seen = frames.len();
                    if conn.is_closed() {
                        break conn.wait_closed().await;
                    }
                }
                how = conn.wait_closed() => break how,
                line = stdin.next_line(), if stdin_open => match line {
                    Ok(Some(line)) => match line.split_once(' ').unwrap_or((line.as_str(), "")) {
                        ("close", _) => conn.close(),
                        // Said once it holds, so a test can wait for it before sending the request it
                        // must not answer: the request reaches the game by another path than this line.
                        ("mute", _) => {
                            conn.set_answering(false);
                            emit(json!({"event": "muted"}));
                        }
                        ("unmute", _) => {
                            conn.set_answering(true);
                            emit(json!({"event": "unmuted"}));
                        }
                        ("send", text) => conn.send_text(text),
                        ("reconnect", _) => conn.close(),
                        (other, _) => emit(json!({"event": "error", "message": format!("unknown command {other:?}")})),
                    },
                    _ => stdin_open = false,
                },
            }
        };
        let how = match &closed {
            Closed::ByPeer { code, reason } => {
                json!({"by": "bridge", "code": code, "reason": reason})
            }
            Closed::ByUs => json!({"by": "game"}),
            Closed::Dropped(why) => json!({"by": "network", "reason": why}),
        };
        emit(json!({"event": "closed", "how": how}));
        if args.reconnect_delay_ms == 0 {
            return std::process::ExitCode::SUCCESS;
        }
        tokio::time::sleep(Duration::from_millis(args.reconnect_delay_ms)).await;
    }
}
