//! A bound on how often one kind of peer misbehaviour is logged. A peer that floods frames the bridge drops
//! (answers to ids never issued, malformed or binary frames) wrote a warning for each: an attack run made a
//! Bitburner bridge write 130 MB of log in 15 s from any local process, which an MCP host keeps in its log
//! file. Past a burst, lines are counted, and the next line allowed says how many were left out.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines allowed per window, per call site.
const BURST: u32 = 10;
/// The window.
const WINDOW: Duration = Duration::from_secs(10);

/// One call site's budget: a `static` beside the `tracing` call it guards.
pub struct LogLimit {
    state: Mutex<Window>,
}

struct Window {
    start: Option<Instant>,
    logged: u32,
    left_out: u64,
}

impl Default for LogLimit {
    fn default() -> Self {
        Self::new()
    }
}

impl LogLimit {
    pub const fn new() -> Self {
        Self {
            state: Mutex::new(Window {
                start: None,
                logged: 0,
                left_out: 0,
            }),
        }
    }

    /// `Some(n)` when a line may be logged now, `n` being how many were left out since the last one logged
    /// (say it in the line); `None` when this one is to be left out.
    pub fn allow(&self) -> Option<u64> {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> Option<u64> {
        let mut w = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if w.start.is_none_or(|s| now.duration_since(s) >= WINDOW) {
            w.start = Some(now);
            w.logged = 0;
        }
        if w.logged >= BURST {
            w.left_out += 1;
            return None;
        }
        w.logged += 1;
        Some(std::mem::take(&mut w.left_out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_silence_then_a_line_that_counts_what_was_left_out() {
        let limit = LogLimit::new();
        let t = Instant::now();
        let allowed = (0..1000).filter(|_| limit.allow_at(t).is_some()).count();
        assert_eq!(allowed, BURST as usize);
        assert_eq!(limit.allow_at(t + WINDOW), Some(1000 - u64::from(BURST)));
        assert_eq!(limit.allow_at(t + WINDOW), Some(0));
    }
}
