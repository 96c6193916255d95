//! A token bucket per client: `rate` messages a second, bursts of twice that.

use std::time::Instant;

#[derive(Debug)]
pub struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    pub fn new(rate: u32) -> Self {
        let rate = f64::from(rate.max(1));
        Self {
            rate,
            burst: rate * 2.0,
            tokens: rate * 2.0,
            last: Instant::now(),
        }
    }

    /// Takes one token, or says how many ms until one is there.
    pub fn take(&mut self) -> Result<(), u64> {
        let now = Instant::now();
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err((((1.0 - self.tokens) / self.rate) * 1000.0).ceil() as u64)
        }
    }
}
