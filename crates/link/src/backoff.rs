//! Reconnect delays for outbound links.
//!
//! Exponential so a dead peer is not hammered, capped so recovery is noticed within `max`, and jittered so
//! many bridges restarted together do not reconnect in lockstep.

use std::time::Duration;

/// Exponential backoff with jitter: the n-th delay (n from 0) is `min(base * 2^n, max)`, scaled by a random
/// factor in `[1 - jitter, 1 + jitter]`. So no delay ever exceeds `max * (1 + jitter)`.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    jitter: f64,
    attempt: u32,
}

impl Backoff {
    /// Jitter used by [`Backoff::new`]: ±20%.
    pub const DEFAULT_JITTER: f64 = 0.2;

    /// `max` below `base` is raised to `base`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max: max.max(base),
            jitter: Self::DEFAULT_JITTER,
            attempt: 0,
        }
    }

    /// Sets the jitter fraction, clamped to `0.0..=1.0` (a NaN means none).
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = if jitter.is_nan() {
            0.0
        } else {
            jitter.clamp(0.0, 1.0)
        };
        self
    }

    /// The delay before the next attempt; advances the attempt count.
    pub fn next_delay(&mut self) -> Duration {
        let nominal = self.nominal(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        if self.jitter == 0.0 {
            return nominal;
        }
        let factor = rand::random_range((1.0 - self.jitter)..=(1.0 + self.jitter));
        // Only a `max` near Duration::MAX can overflow here; then the nominal delay is long enough.
        Duration::try_from_secs_f64(nominal.as_secs_f64() * factor).unwrap_or(nominal)
    }

    /// The un-jittered delay for attempt `n`: `min(base * 2^n, max)`.
    pub fn nominal(&self, n: u32) -> Duration {
        // 2^n overflows Duration quickly; once the factor alone passes max/base we are at the cap anyway.
        let factor = 1u32.checked_shl(n).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// How many delays were handed out since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Back to the first delay; call it once a connection has proved healthy.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}
