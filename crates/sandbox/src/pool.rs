//! Warm sandboxes per spec (backend, memory, vCPUs), so a create is a pop. A pop holds a std mutex for
//! microseconds; boots run in tasks outside every lock, at most `pool_max_boots` at once, woken by a
//! `Notify` (on every take and every finished boot), with exponential backoff after failed boots. A spec
//! asked for once is kept warm (one ready) from then on; the default spec keeps `pool_min` ready.

use crate::backend::{Instance, Spec, launch};
use crate::config::Settings;
use bridge_core::bridge::Metric;
use bridge_core::link::Backoff;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

/// Specs other than the default kept warm at once (each costs one idle sandbox).
const MAX_SPECS: usize = 8;
/// Boot durations kept for the percentiles.
const BOOT_SAMPLES: usize = 1024;

#[derive(Default)]
struct State {
    idle: HashMap<Spec, VecDeque<Instance>>,
    /// Ready sandboxes wanted per spec.
    wanted: HashMap<Spec, usize>,
    booting: HashMap<Spec, usize>,
    backoff_until: Option<Instant>,
    boot_ms: VecDeque<u64>,
    closed: bool,
}

pub struct Pool {
    settings: Settings,
    state: Mutex<State>,
    notify: Notify,
    boots: Arc<Semaphore>,
    backoff: Mutex<Backoff>,
    hits: AtomicU64,
    misses: AtomicU64,
    booted: AtomicU64,
    failures: AtomicU64,
}

impl Pool {
    pub fn new(settings: Settings, default: Spec) -> Arc<Self> {
        let mut st = State::default();
        if settings.pool_enabled && settings.pool_min > 0 {
            st.wanted.insert(default, settings.pool_min);
        }
        Arc::new(Self {
            boots: Arc::new(Semaphore::new(settings.pool_max_boots)),
            settings,
            state: Mutex::new(st),
            notify: Notify::new(),
            backoff: Mutex::new(Backoff::new(
                Duration::from_millis(100),
                Duration::from_secs(30),
            )),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            booted: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ready sandbox of `spec`, if one is warm. Never boots: the caller cold-starts on `None`.
    pub fn take(&self, spec: Spec) -> Option<Instance> {
        if !self.settings.pool_enabled {
            return None;
        }
        let (got, dead) = {
            let mut st = self.lock();
            if !st.wanted.contains_key(&spec) && st.wanted.len() < MAX_SPECS + 1 {
                st.wanted.insert(spec, 1);
            }
            let mut dead = Vec::new();
            let mut got = None;
            if let Some(q) = st.idle.get_mut(&spec) {
                while let Some(i) = q.pop_front() {
                    if i.client.is_closed() {
                        dead.push(i);
                    } else {
                        got = Some(i);
                        break;
                    }
                }
            }
            (got, dead)
        };
        for i in dead {
            tokio::spawn(async move { i.destroy().await });
        }
        if got.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        self.notify.notify_one();
        got
    }

    pub fn record_boot(&self, boot: Duration) {
        let mut st = self.lock();
        if st.boot_ms.len() == BOOT_SAMPLES {
            st.boot_ms.pop_front();
        }
        st.boot_ms.push_back(boot.as_millis() as u64);
    }

    /// Runs until `shutdown`: keeps every wanted spec filled.
    pub async fn fill(self: Arc<Self>, shutdown: CancellationToken) {
        if !self.settings.pool_enabled {
            return;
        }
        loop {
            self.start_boots();
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.notify.notified() => {}
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    fn start_boots(self: &Arc<Self>) {
        let mut st = self.lock();
        // A warm sandbox whose agent died would count as ready and keep the pool from refilling.
        for q in st.idle.values_mut() {
            let before = q.len();
            let (live, dead): (VecDeque<Instance>, VecDeque<Instance>) =
                q.drain(..).partition(|i| !i.client.is_closed());
            *q = live;
            if !dead.is_empty() {
                tracing::warn!(
                    dead = dead.len(),
                    of = before,
                    "warm sandboxes whose agent exited dropped from the pool"
                );
            }
            for i in dead {
                tokio::spawn(async move { i.destroy().await });
            }
        }
        if st.closed || st.backoff_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let wanted: Vec<(Spec, usize)> = st.wanted.iter().map(|(s, n)| (*s, *n)).collect();
        for (spec, n) in wanted {
            let have = st.idle.get(&spec).map_or(0, VecDeque::len)
                + st.booting.get(&spec).copied().unwrap_or(0);
            for _ in have..n {
                let Ok(permit) = Arc::clone(&self.boots).try_acquire_owned() else {
                    return;
                };
                *st.booting.entry(spec).or_default() += 1;
                let pool = Arc::clone(self);
                tokio::spawn(async move {
                    let result = launch(&pool.settings, spec).await;
                    drop(permit);
                    pool.booted(spec, result).await;
                });
            }
        }
    }

    async fn booted(&self, spec: Spec, result: Result<Instance, crate::backend::LaunchError>) {
        let leftover = {
            let mut st = self.lock();
            if let Some(n) = st.booting.get_mut(&spec) {
                *n = n.saturating_sub(1);
            }
            match result {
                Ok(instance) => {
                    self.booted.fetch_add(1, Ordering::Relaxed);
                    self.backoff
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .reset();
                    st.backoff_until = None;
                    if st.boot_ms.len() == BOOT_SAMPLES {
                        st.boot_ms.pop_front();
                    }
                    st.boot_ms.push_back(instance.boot.as_millis() as u64);
                    if st.closed {
                        Some(instance)
                    } else {
                        st.idle.entry(spec).or_default().push_back(instance);
                        None
                    }
                }
                Err(e) => {
                    self.failures.fetch_add(1, Ordering::Relaxed);
                    let delay = self
                        .backoff
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .next_delay();
                    tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "warm sandbox boot failed");
                    st.backoff_until = Some(Instant::now() + delay);
                    None
                }
            }
        };
        if let Some(i) = leftover {
            i.destroy().await;
        }
        self.notify.notify_one();
    }

    /// Stops refilling and hands back every warm sandbox (to be destroyed).
    pub fn drain(&self) -> Vec<Instance> {
        let mut st = self.lock();
        st.closed = true;
        st.idle.drain().flat_map(|(_, q)| q).collect()
    }

    pub fn idle(&self) -> usize {
        self.lock().idle.values().map(VecDeque::len).sum()
    }

    /// The pool's series for `GET /metrics`.
    pub fn metrics(&self) -> Vec<Metric> {
        let stats = self.stats();
        let n = |k: &str| stats[k].as_f64().unwrap_or(0.0);
        let m = |name, help, kind, value| Metric {
            name,
            help,
            kind,
            value,
        };
        vec![
            m(
                "sandbox_pool_hits_total",
                "Creates served warm from the pool.",
                "counter",
                n("hits"),
            ),
            m(
                "sandbox_pool_misses_total",
                "Creates that had to cold-start.",
                "counter",
                n("misses"),
            ),
            m(
                "sandbox_pool_boots_total",
                "Sandboxes booted by the pool.",
                "counter",
                n("boots"),
            ),
            m(
                "sandbox_pool_boot_failures_total",
                "Pool boots that failed.",
                "counter",
                n("boot_failures"),
            ),
            m(
                "sandbox_pool_idle",
                "Warm sandboxes ready now.",
                "gauge",
                n("idle"),
            ),
            m(
                "sandbox_boot_ms_p50",
                "Median boot time (spawn to agent hello), ms.",
                "gauge",
                n("boot_ms_p50"),
            ),
            m(
                "sandbox_boot_ms_p99",
                "99th percentile boot time, ms.",
                "gauge",
                n("boot_ms_p99"),
            ),
        ]
    }

    pub fn stats(&self) -> Value {
        let st = self.lock();
        let mut ms: Vec<u64> = st.boot_ms.iter().copied().collect();
        ms.sort_unstable();
        let pct = |p: f64| -> Option<u64> {
            (!ms.is_empty()).then(|| ms[((ms.len() - 1) as f64 * p).round() as usize])
        };
        json!({
            "enabled": self.settings.pool_enabled,
            "idle": st.idle.values().map(VecDeque::len).sum::<usize>(),
            "booting": st.booting.values().sum::<usize>(),
            "specs": st.wanted.len(),
            "hits": self.hits.load(Ordering::Relaxed),
            "misses": self.misses.load(Ordering::Relaxed),
            "boots": self.booted.load(Ordering::Relaxed),
            "boot_failures": self.failures.load(Ordering::Relaxed),
            "boot_ms_p50": pct(0.5),
            "boot_ms_p99": pct(0.99),
            "backing_off": st.backoff_until.is_some_and(|t| Instant::now() < t),
        })
    }
}
