//! A bound on what the relay's links decode at once. A message's text is bounded (a frame by
//! `--max-message-bytes`, a chunked one by 16 MiB), but decoding it into a JSON tree multiplies it: a 16 MiB
//! answer of one-member objects (`{"a":0},`, 8 bytes each) took the relay to 1.36 GB, and every holder of the
//! game token can send one. Each message reserves what it will take decoded
//! ([`bridge_core::link::json_cost::decoded_bytes`]) before it is decoded and keeps it while it is handled; a
//! link whose message does not fit now waits (its reader stops, so its peer slows down), and one that could
//! never fit is refused. The default bound, 256 MiB (`--max-decoding-bytes`), holds a legitimate unpaged
//! `get_world_info` of radius 16 (some 2 MB of blocks, about 85 MB by the count) three times over.

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a message may take decoded, reserved until it has been handled.
pub type Reserved = OwnedSemaphorePermit;

#[derive(Debug)]
pub struct DecodeBudget {
    bytes: Arc<Semaphore>,
    max: usize,
}

/// A message whose decoding could never fit the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "this message would take some {cost} bytes decoded (its bytes and about 256 for each JSON value), over the \
     relay's bound of {max} bytes for what its links decode at once (--max-decoding-bytes / \
     MINECRAFT_MAX_DECODING_BYTES); send fewer values, or large data as one string"
)]
pub struct TooCostly {
    pub cost: usize,
    pub max: usize,
}

impl DecodeBudget {
    /// A budget of `max` bytes, never less than what one frame of `max_frame` bytes may take decoded, so a
    /// single frame is never refused, only made to wait (the fast event path, which builds no JSON tree, then
    /// takes what the full path takes); at most `u32::MAX`, what one reservation can name.
    pub fn new(max: usize, max_frame: usize) -> Self {
        let value = bridge_core::link::json_cost::DECODED_VALUE_BYTES;
        // Every byte of a text may count as a value (`,,,,`), and the text itself counts as one more.
        let frame = max_frame.saturating_mul(value + 1).saturating_add(value);
        let max = max.max(frame).min(u32::MAX as usize);
        Self {
            bytes: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// Waits for room to decode `text`; refused at once when it could never fit.
    pub async fn reserve(&self, text: &str) -> Result<Reserved, TooCostly> {
        let cost = bridge_core::link::json_cost::decoded_bytes(text.as_bytes());
        if cost > self.max {
            return Err(TooCostly {
                cost,
                max: self.max,
            });
        }
        // Within `max`, which `new` keeps within a u32.
        let permits = u32::try_from(cost).unwrap_or(u32::MAX);
        Arc::clone(&self.bytes)
            .acquire_many_owned(permits)
            .await
            // The semaphore is never closed.
            .map_err(|_| TooCostly {
                cost,
                max: self.max,
            })
    }

    /// Bytes reserved now.
    pub fn held(&self) -> usize {
        self.max.saturating_sub(self.bytes.available_permits())
    }

    pub fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A message that fits waits for room while others hold it, and gets it once they are done; one that could
    /// never fit is refused at once, naming the flag.
    #[tokio::test(start_paused = true)]
    async fn a_message_waits_for_room_and_one_that_never_fits_is_refused() {
        let budget = DecodeBudget::new(4096, 8);
        let small = "[0,0,0]";
        let cost = bridge_core::link::json_cost::decoded_bytes(small.as_bytes());
        let first = budget.reserve(small).await.unwrap();
        assert_eq!(budget.held(), cost);
        let mut held = vec![first];
        while budget.held() + cost <= budget.max() {
            held.push(budget.reserve(small).await.unwrap());
        }
        let waiting = tokio::time::timeout(Duration::from_secs(5), budget.reserve(small)).await;
        assert!(waiting.is_err(), "no room: it waits");
        held.pop();
        let got = tokio::time::timeout(Duration::from_secs(5), budget.reserve(small)).await;
        assert!(matches!(got, Ok(Ok(_))), "room again: it goes on");

        let huge = format!("[{}0]", "{\"a\":0},".repeat(100));
        let refused = budget.reserve(&huge).await.unwrap_err();
        assert!(refused.cost > 4096);
        assert!(
            refused.to_string().contains("--max-decoding-bytes"),
            "{refused}"
        );
    }

    /// The bound is never below what the largest frame may take decoded: a frame is made to wait, never
    /// refused, as the fast event path (no JSON tree) never refuses one.
    #[tokio::test]
    async fn the_largest_frame_always_fits() {
        let frame = 1024;
        let budget = DecodeBudget::new(1, frame);
        let worst = [
            ",".repeat(frame),
            "[".repeat(frame),
            format!("[{}0]", "0,".repeat(frame / 2 - 2)),
        ];
        for text in worst {
            assert!(text.len() <= frame);
            assert!(budget.reserve(&text).await.is_ok(), "{} bytes", text.len());
        }
    }
}
