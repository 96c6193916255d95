//! What both sandbox benches share: the release agent, percentiles, host memory of a process tree.
#![allow(dead_code)]

use bridge_sandbox::config::SandboxArgs;
use std::time::Duration;

#[derive(clap::Parser)]
pub struct Cli {
    #[command(flatten)]
    pub args: SandboxArgs,
}

pub fn agent_bin() -> String {
    mcp_testkit::cargo::build_bin("sandbox-agent", "sandbox-agent")
        .to_string_lossy()
        .into_owned()
}

pub fn pct(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    (at(0.5), at(0.99), v[0])
}

pub fn line(what: &str, v: Vec<f64>) {
    let n = v.len();
    let (p50, p99, min) = pct(v);
    println!("{what:<44} n={n:<4} p50 {p50:>8.2} ms   p99 {p99:>8.2} ms   min {min:>7.2} ms");
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Sum of RSS and PSS (kB) over the processes whose pid is in `pids`.
pub fn memory(pids: &[u32]) -> (u64, u64) {
    let mut rss = 0;
    let mut pss = 0;
    for p in pids {
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")) {
            for l in text.lines() {
                let val = || {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0)
                };
                if l.starts_with("Rss:") {
                    rss += val();
                } else if l.starts_with("Pss:") {
                    pss += val();
                }
            }
        }
    }
    (rss, pss)
}

pub fn tree(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) {
            for t in tasks.filter_map(Result::ok) {
                if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
                    out.extend(
                        text.split_whitespace()
                            .filter_map(|c| c.parse::<u32>().ok()),
                    );
                }
            }
        }
        i += 1;
    }
    out
}
