//! What the link sessions and the tools share: the registry, the settings and the event streams.

use crate::computer::{Computer, Identity};
use crate::config::LinkConfig;
use crate::registry::Registry;
use crate::untrusted;
use bridge_core::ToolError;
use bridge_core::events::{EventHub, EventStream};
use serde_json::{Value, json};
use std::collections::BTreeMap;
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
    reassembly: AtomicUsize,
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
            reassembly: AtomicUsize::new(0),
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

    pub fn reassembly_gauge(&self) -> &AtomicUsize {
        &self.reassembly
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
    pub fn dispute(&self, id: u32, holder_link: u64) {
        let mut d = self.disputes.lock().unwrap_or_else(PoisonError::into_inner);
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
