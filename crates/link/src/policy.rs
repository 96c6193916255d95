//! Connection policies: which peers a bridge keeps when more than one connects.
//!
//! - [`SinglePeer`]: one peer at a time, the newest wins (Bitburner: a game reloaded or reconnected replaces
//!   the old connection, whose requests fail at once).
//! - [`PeerRegistry`]: many peers by id (ComputerCraft computers). A second peer claiming an id that is held
//!   is either let in, replacing the holder ([`OnDuplicate::Replace`]), or — when the holder still answers a
//!   liveness probe — refused ([`OnDuplicate::RefuseIfLive`]), so two live machines with one id do not take
//!   turns replacing each other. [`PeerRegistry::judge`] decides ([`Admission`]), the bridge tells the
//!   newcomer, then [`PeerRegistry::insert`] registers it.

use crate::peer::Peer;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

// Never held across an await or user code that could panic mid-update; a poisoned lock holds a valid state.
fn lock<S>(m: &Mutex<S>) -> MutexGuard<'_, S> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The current peer of a [`SinglePeer`] with what the bridge keeps about it.
pub struct Current<T, M> {
    pub peer: Peer<T>,
    pub since: SystemTime,
    pub meta: M,
}

struct Single<T, M> {
    current: Option<Current<T, M>>,
    connections_total: u64,
    last_end: Option<(SystemTime, String)>,
}

/// At most one peer; a new one replaces the old. Cheap to clone; clones share state.
pub struct SinglePeer<T, M> {
    state: Arc<Mutex<Single<T, M>>>,
    /// Bumped on every connect and disconnect (and by [`notify`](Self::notify)).
    generation: Arc<watch::Sender<u64>>,
}

impl<T, M> Clone for SinglePeer<T, M> {
    fn clone(&self) -> Self {
        Self {
            state: Arc::clone(&self.state),
            generation: Arc::clone(&self.generation),
        }
    }
}

impl<T: Send + 'static, M> Default for SinglePeer<T, M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send + 'static, M> SinglePeer<T, M> {
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(Single {
                current: None,
                connections_total: 0,
                last_end: None,
            })),
            generation: Arc::new(watch::Sender::new(0)),
        }
    }

    /// Makes `peer` the current one. The one it replaces is closed with `replaced` (its requests fail with
    /// that reason at once) and becomes the last disconnect.
    pub fn install(&self, peer: Peer<T>, meta: M, replaced: &str) {
        let previous = {
            let mut state = lock(&self.state);
            state.connections_total += 1;
            let previous = state.current.replace(Current {
                peer,
                since: SystemTime::now(),
                meta,
            });
            if previous.is_some() {
                state.last_end = Some((SystemTime::now(), replaced.to_owned()));
            }
            previous
        };
        if let Some(old) = previous {
            tracing::info!(
                old = old.peer.id(),
                "a newer connection replaces the older one"
            );
            old.peer.close(replaced);
            old.peer
                .correlator()
                .close(crate::LinkError::disconnected(replaced));
        }
        self.notify();
    }

    /// Forgets link `link_id` if it is still the current one (not already replaced), recording `reason`.
    pub fn forget(&self, link_id: u64, reason: &str) {
        let mut state = lock(&self.state);
        if state
            .current
            .as_ref()
            .is_some_and(|c| c.peer.id() == link_id)
        {
            state.current = None;
            state.last_end = Some((SystemTime::now(), reason.to_owned()));
            drop(state);
            self.notify();
        }
    }

    /// Serves a new link under this policy: installs `peer` now, and returns the future (spawn it) that runs
    /// [`Peer::serve`] over `incoming` with `on_frame` and forgets the peer when its link ends, resolving to
    /// the close reason.
    pub fn run(
        &self,
        peer: Peer<T>,
        meta: M,
        replaced: &str,
        incoming: crate::Incoming,
        on_frame: impl FnMut(String) + Send + 'static,
    ) -> impl Future<Output = crate::LinkError> + Send + 'static
    where
        M: Send + 'static,
    {
        self.install(peer.clone(), meta, replaced);
        let slot = self.clone();
        async move {
            let err = peer.serve(incoming, on_frame).await;
            slot.forget(peer.id(), &err.to_string());
            err
        }
    }

    /// Wakes everyone waiting on this slot's changes.
    pub fn notify(&self) {
        self.generation.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// A receiver that sees every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    pub fn current(&self) -> Option<Peer<T>> {
        lock(&self.state).current.as_ref().map(|c| c.peer.clone())
    }

    pub fn is_connected(&self) -> bool {
        lock(&self.state).current.is_some()
    }

    /// Runs `f` on the current peer and its data (`None` when there is none), under the slot's lock: keep it
    /// short and do not await in it.
    pub fn with_current<R>(&self, f: impl FnOnce(Option<&mut Current<T, M>>) -> R) -> R {
        f(lock(&self.state).current.as_mut())
    }

    /// Runs `f` on the current peer only if its link is `link_id`.
    pub fn with_link<R>(&self, link_id: u64, f: impl FnOnce(&mut Current<T, M>) -> R) -> Option<R> {
        lock(&self.state)
            .current
            .as_mut()
            .filter(|c| c.peer.id() == link_id)
            .map(f)
    }

    pub fn connections_total(&self) -> u64 {
        lock(&self.state).connections_total
    }

    /// When and why the last peer went away (replaced or disconnected).
    pub fn last_end(&self) -> Option<(SystemTime, String)> {
        lock(&self.state).last_end.clone()
    }

    /// Waits until a peer is connected, at most `wait`; returns whether one is.
    pub async fn wait_connected(&self, wait: Duration) -> bool {
        let mut rx = self.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if self.is_connected() {
                return true;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                _ => return self.is_connected(),
            }
        }
    }
}

/// What a [`PeerRegistry`] entry must offer: the link it lives on, and a way to close it.
pub trait Registered: Send + Sync {
    fn link_id(&self) -> u64;
    fn close(&self, reason: &str);
}

/// What to do when a peer claims an id that is already held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDuplicate {
    /// The newcomer replaces the holder (a rebooted computer relinks before its old link timed out).
    #[default]
    Replace,
    /// Ask the holder for a sign of life first: if it answers, the newcomer is refused; if not, it replaces
    /// the holder. Two live peers with one id then stay put instead of replacing each other forever.
    RefuseIfLive,
}

/// What [`PeerRegistry::judge`] decided about a peer claiming an id.
#[derive(Debug)]
pub enum Admission<V> {
    /// The id is free: [`insert`](PeerRegistry::insert) the newcomer.
    Free,
    /// The id is held and the newcomer may take it: `insert` replaces (and closes) the holder.
    Replace(Arc<V>),
    /// The holder answered its liveness probe and keeps the id: do not insert the newcomer; tell it why and
    /// close its link.
    Refused { holder: Arc<V> },
}

/// Many peers by id. Cheap to share behind an `Arc`.
pub struct PeerRegistry<K, V> {
    entries: Mutex<BTreeMap<K, Arc<V>>>,
    /// Newcomers refused per id held now: the ids claimed by more than one live peer. Forgotten with the
    /// holder, so it holds at most one entry a held id.
    refused: Mutex<BTreeMap<K, u64>>,
    /// Ids whose holder is being probed now: one probe at a time per id (an attack run had hundreds at once
    /// for one id, which took every slot the holder had and let newcomers in while it was busy answering).
    judging: Mutex<BTreeSet<K>>,
}

impl<K, V> Default for PeerRegistry<K, V> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(BTreeMap::new()),
            refused: Mutex::new(BTreeMap::new()),
            judging: Mutex::new(BTreeSet::new()),
        }
    }
}

/// Takes an id out of [`PeerRegistry::judging`] however its judge ends (a newcomer's link may drop midway).
struct Judging<'a, K: Ord> {
    judging: &'a Mutex<BTreeSet<K>>,
    key: K,
}

impl<K: Ord> Drop for Judging<'_, K> {
    fn drop(&mut self) {
        lock(self.judging).remove(&self.key);
    }
}

impl<K: Ord + Copy + std::fmt::Debug, V: Registered> PeerRegistry<K, V> {
    /// Registers `value` under `key`, replacing (and closing, with `replaced`) any holder. Returns the holder.
    pub fn insert(&self, key: K, value: Arc<V>, replaced: &str) -> Option<Arc<V>> {
        let old = lock(&self.entries).insert(key, value);
        if let Some(old) = &old {
            lock(&self.refused).remove(&key);
            old.close(replaced);
        }
        old
    }

    /// Decides, following `policy`, whether a newcomer may take `key`. For [`OnDuplicate::RefuseIfLive`]
    /// the holder is asked `is_live` (outside any lock; bound its time yourself). Nothing is registered: the
    /// caller welcomes the newcomer and then [`insert`](Self::insert)s it, so no request reaches a peer that
    /// has not been told it is in.
    pub async fn judge<F, Fut>(&self, key: K, policy: OnDuplicate, is_live: F) -> Admission<V>
    where
        F: FnOnce(Arc<V>) -> Fut,
        Fut: Future<Output = bool>,
    {
        let Some(holder) = self.get(key) else {
            return Admission::Free;
        };
        if policy != OnDuplicate::RefuseIfLive {
            return Admission::Replace(holder);
        }
        // Another newcomer's judge is probing this holder now: this one waits for no second probe.
        let refused_at_once = !lock(&self.judging).insert(key);
        let live = refused_at_once || {
            let _judging = Judging {
                judging: &self.judging,
                key,
            };
            is_live(Arc::clone(&holder)).await
        };
        if live {
            *lock(&self.refused).entry(key).or_default() += 1;
            tracing::warn!(
                ?key,
                holder = holder.link_id(),
                "a second live peer claims a held id; refused"
            );
            return Admission::Refused { holder };
        }
        Admission::Replace(holder)
    }

    /// Removes `key` if its entry is still on link `link_id` (not a newer replacement).
    pub fn remove_link(&self, key: K, link_id: u64) -> bool {
        let mut entries = lock(&self.entries);
        if entries.get(&key).is_some_and(|v| v.link_id() == link_id) {
            entries.remove(&key);
            lock(&self.refused).remove(&key);
            return true;
        }
        false
    }

    pub fn get(&self, key: K) -> Option<Arc<V>> {
        lock(&self.entries).get(&key).cloned()
    }

    /// Every entry, ordered by key.
    pub fn snapshot(&self) -> Vec<Arc<V>> {
        lock(&self.entries).values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ids a second live peer claimed, with how many times it was refused.
    pub fn refused(&self) -> Vec<(K, u64)> {
        lock(&self.refused).iter().map(|(k, n)| (*k, *n)).collect()
    }
}
