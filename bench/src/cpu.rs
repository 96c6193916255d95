//! CPU time of a process from `/proc/<pid>/stat`: on a shared 2-core box, CPU per call says more about a
//! server's cost than throughput alone, and the client's share shows whether the client is the bottleneck.

use std::time::Duration;

/// `/proc` reports times in USER_HZ ticks, which Linux fixes at 100 for user space.
const TICKS_PER_SEC: u64 = 100;

/// User plus system CPU time of `pid`, or of this process when `None`.
pub fn cpu_time(pid: Option<u32>) -> Option<Duration> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name may contain spaces and parentheses; the fields after its closing one are fixed.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis(
        (utime + stime) * 1000 / TICKS_PER_SEC,
    ))
}

/// The 1-minute load average, to tell a quiet run from one that shared the machine.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cpu_time_is_readable_and_grows_while_busy() {
        let before = cpu_time(None).expect("own /proc/self/stat");
        // Busy until the kernel has charged at least one tick; the bound only stops a broken parser.
        let give_up = std::time::Instant::now() + Duration::from_secs(30);
        let mut x = 0u64;
        let mut after = before;
        while after <= before && std::time::Instant::now() < give_up {
            for _ in 0..100_000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            after = cpu_time(None).expect("own /proc/self/stat");
        }
        assert!(after > before, "{before:?} -> {after:?} after {x} spins");
    }

    #[test]
    fn load_average_parses() {
        assert!(load_average().is_some_and(|l| l >= 0.0));
    }
}
