//! Output kept from one stream of a process: the first half of the budget as it came, the last half as a
//! ring, and the count of everything seen. A process printing gigabytes holds at most `max` bytes here.

use std::collections::VecDeque;

#[derive(Debug)]
pub struct OutBuf {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_max: usize,
    tail_max: usize,
    total: u64,
}

impl OutBuf {
    pub fn new(max: usize) -> Self {
        let head_max = max / 2;
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_max,
            tail_max: max - head_max,
            total: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_max - self.head.len();
        if room > 0 {
            let n = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() >= self.tail_max {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_max..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_max);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// Bytes seen, kept or not.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// True when bytes were dropped from the middle.
    pub fn truncated(&self) -> bool {
        self.total > (self.head.len() + self.tail.len()) as u64
    }

    /// Head then tail, with no marker in between (the `truncated` flag says it).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.head.len() + self.tail.len());
        out.extend_from_slice(&self.head);
        out.extend(self.tail.iter());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_and_counts_everything() {
        let mut b = OutBuf::new(8);
        b.push(b"abcdef");
        assert!(!b.truncated());
        assert_eq!(b.snapshot(), b"abcdef");
        b.push(b"ghijklmnop");
        assert_eq!(b.total(), 16);
        assert!(b.truncated());
        assert_eq!(b.snapshot(), b"abcdmnop");
        b.push(&[b'z'; 100]);
        assert_eq!(b.snapshot(), b"abcdzzzz");
    }

    #[test]
    fn a_small_output_is_kept_whole() {
        let mut b = OutBuf::new(1 << 20);
        b.push(b"hello\n");
        assert_eq!(b.snapshot(), b"hello\n");
        assert!(!b.truncated());
    }
}
