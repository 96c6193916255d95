//! What the link sessions and the tools share: the registry, the settings and the event streams.

use crate::computer::{Computer, Identity};
use crate::config::LinkConfig;
use crate::registry::Registry;
use crate::untrusted;
use bridge_core::ToolError;
use bridge_core::events::{EventHub, EventStream};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Events kept per stream for pulling.
const STREAM_CAPACITY: usize = 1000;

pub struct State {
    pub registry: Registry,
    pub cfg: LinkConfig,
    /// Where the link listener is bound.
    pub listen: SocketAddr,
    /// `computercraft://events/computers`: connected / disconnected / replaced / relabelled.
    pub computers: EventStream,
    /// `computercraft://events/computer_events`: CC events computers forward (redstone, turtle_inventory,
    /// peripheral, peripheral_detach, disk, monitor_touch, ...).
    pub computer_events: EventStream,
    malformed: AtomicU64,
    /// Hellos refused (duplicate id, wrong protocol, malformed hello), since start.
    refused: AtomicU64,
    /// Ids a second live machine claims right now: id → (the holder's link, refusals since the dispute began).
    /// An entry goes when the holder's link goes, so the warning lasts as long as the dispute.
    disputes: Mutex<BTreeMap<u32, (u64, u64)>>,
    /// Bytes held by chunked replies being reassembled, over all links.
    reassembly: Arc<AtomicUsize>,
    /// `fs_write` calls in progress, one at a time per file.
    pub writes: Writes,
}

impl State {
    pub fn new(cfg: LinkConfig, listen: SocketAddr, hub: &EventHub) -> Arc<Self> {
        Arc::new(Self {
            registry: Registry::default(),
            cfg,
            listen,
            computers: hub.stream(
                "computers",
                "Computers linking and unlinking: {event: connected|disconnected|replaced|relabelled, computer, label, kind, reason?}",
                STREAM_CAPACITY,
            ),
            computer_events: hub.stream(
                "computer_events",
                "CC events forwarded by computers: {computer, label, event, args} for redstone, turtle_inventory, \
                 peripheral, peripheral_detach, disk, disk_eject, monitor_touch, monitor_resize",
                STREAM_CAPACITY,
            ),
            malformed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            disputes: Mutex::new(BTreeMap::new()),
            reassembly: Arc::default(),
            writes: Writes::new(),
        })
    }

    /// The linked computer `id`, or `E_NOT_FOUND` listing the ones that are linked.
    pub fn computer(&self, id: u32) -> Result<Arc<Computer>, ToolError> {
        self.registry.get(id).ok_or_else(|| {
            let linked: Vec<u32> = self.registry.snapshot().iter().map(|c| c.id()).collect();
            ToolError::not_found(format!("computer {id} is not linked"))
                .with_hint(
                    "call list_computers for the linked ids; a computer links when it boots with the client \
                     installed (see the README)",
                )
                .with_details(json!({"computer": id, "linked": linked}))
        })
    }

    /// The in-game command that installs the client, for telling a player.
    pub fn install_command(&self) -> String {
        let base = match &self.cfg.public_url {
            Some(url) => url.clone(),
            None if self.listen.ip().is_unspecified() => {
                format!("http://<this-host>:{}", self.listen.port())
            }
            None => format!("http://{}", self.listen),
        };
        let token = if self.cfg.token.is_some() {
            " <link token>"
        } else {
            ""
        };
        format!("wget run {base}/install.lua{token}")
    }

    pub fn publish_link(&self, event: &str, who: &Identity, reason: Option<&str>) {
        let mut data = json!({
            "event": event,
            "computer": who.id,
            "label": who.label,
            "kind": who.kind,
        });
        if let Value::Object(map) = &mut data {
            if let Some(r) = reason {
                map.insert("reason".into(), r.into());
            }
            untrusted::mark_link_event(map);
        }
        self.computers.publish(data);
    }

    pub fn count_malformed(&self) -> u64 {
        self.malformed.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn reassembly_gauge(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.reassembly)
    }

    /// Bytes held by chunked replies being reassembled right now (ids and data), over all links.
    pub fn reassembly_bytes(&self) -> usize {
        self.reassembly.load(Ordering::Relaxed)
    }

    pub fn malformed_frames(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }

    pub fn count_refused(&self) -> u64 {
        self.refused.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn refused_links(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// A newcomer claiming `id` was refused because link `holder_link` holds it and answers.
    /// Not recorded when the holder has left meanwhile: nothing would settle it (a review's finding).
    pub fn dispute(&self, id: u32, holder_link: u64) {
        let mut d = self.disputes.lock().unwrap_or_else(PoisonError::into_inner);
        if self.registry.get(id).map(|c| c.link_id) != Some(holder_link) {
            return;
        }
        let entry = d.entry(id).or_insert((holder_link, 0));
        if entry.0 != holder_link {
            *entry = (holder_link, 0);
        }
        entry.1 += 1;
    }

    /// Link `link` no longer holds `id`: a dispute over it with that holder is over.
    pub fn settle(&self, id: u32, link: u64) {
        let mut d = self.disputes.lock().unwrap_or_else(PoisonError::into_inner);
        if d.get(&id).is_some_and(|(holder, _)| *holder == link) {
            d.remove(&id);
        }
    }

    /// Ids claimed by two live machines right now, with the refusals since the dispute began.
    pub fn disputes(&self) -> Vec<(u32, u64)> {
        let d = self.disputes.lock().unwrap_or_else(PoisonError::into_inner);
        d.iter().map(|(id, (_, n))| (*id, *n)).collect()
    }
}

/// `fs_write` calls take turns per (computer, file): two writes to one file at once would race to replace
/// it, and both would fill the disk with a temp file. Each write also gets an id of its own, which names its
/// temp file on the computer.
pub struct Writes {
    turns: Mutex<HashMap<(u32, String), Turn>>,
    next_id: AtomicU64,
}

impl Writes {
    fn new() -> Self {
        Self {
            turns: Mutex::new(HashMap::new()),
            // Started from the clock, so a temp file a previous run of the bridge left behind never has the
            // name of a new write's.
            next_id: AtomicU64::new(crate::computer::now_ms()),
        }
    }

    /// A fresh write id: at most 16 lowercase hex digits.
    pub fn next_id(&self) -> String {
        format!("{:x}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Waits for the turn to write `file` (CC's normalised path) on `computer`; the turn ends when the
    /// returned value is dropped, or when the wait is given up. Spellings that differ only in case share a
    /// turn: on a case-insensitive disk (a server on Windows or macOS) they are one file, and where they are
    /// two, taking turns costs only a wait.
    pub async fn turn(&self, computer: u32, file: String) -> WriteTurn<'_> {
        let key = (computer, file.to_lowercase());
        let lock = self
            .turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.clone())
            .or_default()
            .clone();
        // Built before the wait, so a caller dropped while waiting still forgets its entry.
        let mut turn = WriteTurn {
            writes: self,
            key,
            lock: Some(lock.clone()),
            held: None,
        };
        turn.held = Some(lock.lock_owned().await);
        turn
    }

    /// Files with a write in progress or waiting for its turn.
    pub fn files_in_turn(&self) -> usize {
        self.turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// One file's turn: held by the write in progress, waited for by the next ones.
type Turn = Arc<tokio::sync::Mutex<()>>;

pub struct WriteTurn<'a> {
    writes: &'a Writes,
    key: (u32, String),
    lock: Option<Turn>,
    held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for WriteTurn<'_> {
    fn drop(&mut self) {
        self.held.take();
        let mut turns = self
            .writes
            .turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.lock.take();
        // Only the table's own reference left: nobody writes or waits for this file.
        if turns
            .get(&self.key)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            turns.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Writes;

    #[tokio::test]
    async fn writes_to_one_file_take_turns_and_leave_nothing_behind() {
        let writes = Writes::new();
        let first = writes.turn(1, "a.txt".into()).await;
        // Another file, or the same name on another computer, does not wait.
        let other = writes.turn(1, "b.txt".into()).await;
        let elsewhere = writes.turn(2, "a.txt".into()).await;
        {
            // A write given up while it waits leaves its place.
            let given_up = writes.turn(1, "a.txt".into());
            tokio::pin!(given_up);
            assert!(futures::poll!(given_up.as_mut()).is_pending());
        }
        drop((other, elsewhere));
        assert_eq!(writes.files_in_turn(), 1);
        let waiting = writes.turn(1, "a.txt".into());
        tokio::pin!(waiting);
        assert!(
            futures::poll!(waiting.as_mut()).is_pending(),
            "the second write to a.txt waits for the first"
        );
        let other_case = writes.turn(1, "A.TXT".into());
        tokio::pin!(other_case);
        assert!(
            futures::poll!(other_case.as_mut()).is_pending(),
            "A.TXT may be a.txt on the server's disk: it waits too"
        );
        drop(first);
        let second = waiting.await;
        drop(second);
        drop(other_case.await);
        assert_eq!(writes.files_in_turn(), 0, "no entry outlives its writes");
        assert_ne!(writes.next_id(), writes.next_id());
        assert!(writes.next_id().len() <= 16);
    }
}
