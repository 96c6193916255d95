//! CPU time of a process from `/proc`: on a shared 2-core box, CPU per call says more about a server's cost
//! than throughput alone, and the client's share shows whether the client is the bottleneck.
//!
//! Read in nanoseconds, each thread's `/proc/<pid>/task/<tid>/schedstat` summed: `/proc/<pid>/stat` counts
//! in 10 ms ticks, and a run of 20 000 calls at 1-4 µs of server CPU each is 2-8 ticks, so one tick more or
//! less moved a server's CPU per call (and its ratio to the baseline) by 12-50 %: the stdio rows at c = 32
//! read 1.40x one run and 1.80x the next for the same binaries. Ticks remain the fallback on a kernel
//! without schedstat. A thread that ends during a run takes its time with it; the servers measured keep
//! their threads for the whole run.

use std::time::Duration;

/// `/proc` reports times in USER_HZ ticks, which Linux fixes at 100 for user space.
const TICKS_PER_SEC: u64 = 100;

/// User plus system CPU time of `pid`, or of this process when `None`: in nanoseconds where the kernel
/// keeps schedstat, else in ticks. One process is always read the same way. A thread's figure is brought
/// up to date when it stops running: the calling thread's own lags by up to a scheduler tick.
pub fn cpu_time(pid: Option<u32>) -> Option<Duration> {
    let dir = match pid {
        Some(pid) => format!("/proc/{pid}"),
        None => "/proc/self".to_owned(),
    };
    threads_cpu_time(&dir).or_else(|| ticks_cpu_time(&dir))
}

/// The sum of the first field (time on a CPU, ns) of each thread's schedstat.
fn threads_cpu_time(dir: &str) -> Option<Duration> {
    let mut total: u64 = 0;
    for task in std::fs::read_dir(format!("{dir}/task")).ok()? {
        let Ok(task) = task else { continue };
        // A thread that ended between the listing and the read counts for nothing, as it would after.
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        total = total.saturating_add(stat.split_whitespace().next()?.parse().ok()?);
    }
    (total > 0).then(|| Duration::from_nanos(total))
}

fn ticks_cpu_time(dir: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
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

    /// Far less than a tick of work shows, once the thread that did it waits (as a server's threads do when
    /// the run's last call has answered): the figures are not counted in 10 ms ticks.
    #[test]
    fn cpu_time_moves_with_less_than_a_tick_of_work() {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (done, finished) = std::sync::mpsc::channel::<u64>();
        let worker = std::thread::spawn(move || {
            while wait.recv().is_ok() {
                let mut x = 0u64;
                for _ in 0..10_000 {
                    x = x.wrapping_add(std::hint::black_box(1));
                }
                if done.send(x).is_err() {
                    return;
                }
            }
        });
        go.send(()).expect("worker waits");
        finished.recv().expect("worker works");
        let before = cpu_time(None).expect("own CPU time");
        go.send(()).expect("worker waits");
        finished.recv().expect("worker works");
        let after = cpu_time(None).expect("own CPU time");
        drop(go);
        worker.join().expect("worker ends");
        assert!(after > before, "{before:?} -> {after:?}");
        assert_ne!(
            after.subsec_nanos() % 10_000_000,
            0,
            "counted in ticks: {after:?}"
        );
    }

    #[test]
    fn load_average_parses() {
        assert!(load_average().is_some_and(|l| l >= 0.0));
    }
}
