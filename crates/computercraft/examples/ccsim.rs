//! Simulated ComputerCraft computers running the shipped Lua client (the test shim in tests/support/ccsim),
//! for driving a running bridge from outside Rust (tests/interop) or by hand:
//!
//!   cargo run -p bridge-computercraft --example ccsim -- ws://127.0.0.1:3001/link 12:base-turtle:turtle 0
//!
//! Arguments: the link URL, then computers as `id[:label[:kind]]` (kind: computer, turtle, pocket; an empty
//! label means none). `--token T` sets the link token. Prints `linked <id>` when a computer's client reports
//! its link, and runs until stdin closes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/ccsim/mod.rs"]
mod ccsim;

use std::io::Write;
use std::time::Duration;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let token = args.iter().position(|a| a == "--token").map(|i| {
        let t = args.remove(i + 1);
        args.remove(i);
        t
    });
    let Some(url) = (!args.is_empty()).then(|| args.remove(0)) else {
        eprintln!("usage: ccsim <ws://host:port/link> [--token T] id[:label[:kind]]...");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let root = ccsim::temp_root("example");
        let mut sims = Vec::new();
        for spec in &args {
            let mut parts = spec.split(':');
            let id: u32 = parts
                .next()
                .and_then(|p| p.parse().ok())
                .expect("computer id");
            let mut cfg = ccsim::SimConfig::new(id, root.join(id.to_string()));
            cfg.label = parts.next().filter(|l| !l.is_empty()).map(str::to_owned);
            cfg.kind = match parts.next() {
                Some("turtle") => ccsim::SimKind::Turtle,
                Some("pocket") => ccsim::SimKind::Pocket,
                _ => ccsim::SimKind::Computer,
            };
            if cfg.kind == ccsim::SimKind::Turtle {
                let mut t = ccsim::Turtle {
                    fuel: 100,
                    ..Default::default()
                };
                t.blocks.insert((0, 0, -1), "minecraft:stone".into());
                cfg.world.turtle = Some(t);
            }
            let sim = ccsim::spawn(cfg.running_client(&url, token.as_deref()));
            sims.push((id, sim));
        }
        for (id, sim) in &sims {
            if sim
                .wait_for(Duration::from_secs(60), |s| {
                    s.output.contains("[mcp] linked")
                })
                .await
            {
                println!("linked {id}");
            } else {
                println!("failed {id}: {}", sim.output().replace('\n', " | "));
            }
            let _ = std::io::stdout().flush();
        }
        let _ = tokio::task::spawn_blocking(|| std::io::stdin().lines().count()).await;
        for (_, sim) in &sims {
            sim.stop();
        }
        let _ = std::fs::remove_dir_all(root);
    });
}
