#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Backoff bounds: each delay within ±20% of min(base*2^n, max), never above max*1.2, reset starts over.

use bridge_link::Backoff;
use std::time::Duration;

const BASE: Duration = Duration::from_millis(100);
const MAX: Duration = Duration::from_secs(5);

fn nominal(n: u32) -> Duration {
    BASE.saturating_mul(2u32.saturating_pow(n)).min(MAX)
}

fn assert_within(d: Duration, n: u32) {
    let nom = nominal(n).as_secs_f64();
    let got = d.as_secs_f64();
    // A hair of slack for the f64 round trip through Duration's nanoseconds.
    let eps = 1e-9;
    assert!(
        got >= nom * 0.8 - eps && got <= nom * 1.2 + eps,
        "attempt {n}: {got}s outside ±20% of {nom}s"
    );
    assert!(
        got <= MAX.as_secs_f64() * 1.2 + eps,
        "attempt {n}: {got}s above max*1.2"
    );
}

#[test]
fn every_delay_is_within_twenty_percent_of_the_capped_exponential() {
    for _ in 0..200 {
        let mut b = Backoff::new(BASE, MAX);
        for n in 0..40 {
            assert_eq!(b.attempt(), n);
            assert_within(b.next_delay(), n);
        }
    }
}

#[test]
fn jitter_actually_varies_the_delay() {
    let samples: Vec<Duration> = (0..100)
        .map(|_| Backoff::new(BASE, MAX).next_delay())
        .collect();
    let lo = samples.iter().min().unwrap();
    let hi = samples.iter().max().unwrap();
    assert!(lo < hi, "100 jittered delays were all {lo:?}");
}

#[test]
fn without_jitter_the_sequence_is_exact() {
    let mut b = Backoff::new(BASE, MAX).with_jitter(0.0);
    let got: Vec<Duration> = (0..8).map(|_| b.next_delay()).collect();
    let want: Vec<Duration> = [100, 200, 400, 800, 1600, 3200, 5000, 5000]
        .into_iter()
        .map(Duration::from_millis)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn reset_starts_from_base_again() {
    let mut b = Backoff::new(BASE, MAX);
    for _ in 0..10 {
        b.next_delay();
    }
    b.reset();
    assert_eq!(b.attempt(), 0);
    assert_within(b.next_delay(), 0);
    assert_within(b.next_delay(), 1);
}

#[test]
fn extreme_settings_do_not_panic() {
    let mut b = Backoff::new(Duration::from_secs(1), Duration::MAX);
    for _ in 0..200 {
        b.next_delay();
    }
    let mut b =
        Backoff::new(Duration::from_millis(10), Duration::from_millis(1)).with_jitter(f64::NAN);
    assert_eq!(
        b.next_delay(),
        Duration::from_millis(10),
        "max below base is raised to base"
    );
}
