//! The live sandboxes by id: create (warm pool first, cold start outside every lock), look up (one generic
//! not-found for unknown and malformed ids alike, as Bouvet), destroy, and the reaper for idle and
//! over-age sandboxes and for those whose agent is gone.

use crate::backend::{self, BackendChoice, BackendKind, Instance, Spec, microvm};
use crate::config::{ConfigError, Settings, image_names};
use crate::pool::Pool;
use crate::time::rfc3339;
use bridge_core::ToolError;
use bridge_core::link::LinkError;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Bouvet's words, for unknown and malformed ids alike: nothing tells a prober which ids exist.
pub const NOT_FOUND: &str = "Sandbox not found or invalid ID";
/// Sandboxes reaped because their agent died, remembered (newest kept) so a later call naming one is told
/// why it is gone; an id is a random UUID its caller was given, so this tells a prober nothing.
const ENDED_REMEMBERED: usize = 256;

/// Set by the first bridge started in this process. Until then nothing named with our pid (`<pid>-...`: a
/// sandbox's groups and folders, a transfer file) is this run's, so such leftovers are an earlier process's
/// that had our pid, as pid 1 of a container has on every restart. A later start in the same process (a
/// library user's second bridge) must leave the first one's alone.
static STARTED_IN_THIS_PROCESS: AtomicBool = AtomicBool::new(false);

pub struct Sandbox {
    pub id: Uuid,
    pub created_at: SystemTime,
    created: Instant,
    last_used: Mutex<Instant>,
    pub instance: Instance,
    pub pooled: bool,
    /// The network policy in force (`network::Plan::report`).
    pub network: Value,
    /// run_code's kernels, which live and die with the sandbox.
    pub sessions: crate::tools::session::Sessions,
}

impl Sandbox {
    pub fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }

    /// When the reaper will take it, as things stand.
    pub fn expires_at(&self, s: &Settings) -> SystemTime {
        let by_idle = s.idle_timeout.saturating_sub(self.idle_for());
        let by_age = s.max_lifetime.saturating_sub(self.created.elapsed());
        SystemTime::now() + by_idle.min(by_age)
    }

    /// A call to the agent that failed on the link: once the link is gone, the sandbox's end (its agent exited,
    /// or it was destroyed while the call ran), not a reconnect, as there is nothing to reconnect.
    pub fn link_error(&self, e: LinkError) -> ToolError {
        if matches!(e, LinkError::Timeout { .. }) {
            return ToolError::from(e);
        }
        match self.instance.client.close_reason() {
            Some(reason) if reason == crate::backend::DESTROYED => ToolError::new(
                bridge_core::ErrorCode::Disconnected,
                format!("sandbox {} was destroyed while this call ran", self.id),
            )
            .with_code_name("E_SANDBOX_ENDED")
            .with_hint("create a new sandbox with create_sandbox")
            .with_details(
                json!({"sandbox_id": self.id.to_string(), "state": "ended", "reason": "destroyed"}),
            ),
            Some(_) => ended(self.id),
            None => ToolError::from(e),
        }
    }

    pub fn describe(&self, s: &Settings) -> Value {
        let state = if self.instance.client.is_closed() {
            "dead"
        } else if self.instance.is_paused() {
            "paused"
        } else {
            "running"
        };
        json!({
            "sandbox_id": self.id.to_string(),
            "state": state,
            "created_at": rfc3339(self.created_at),
            "expires_at": rfc3339(self.expires_at(s)),
            "backend": self.instance.spec.backend,
            "image": s.image_name(self.instance.spec.image),
            "memory_mib": self.instance.spec.memory_mib,
            "vcpu_count": self.instance.spec.vcpus,
            "languages": self.instance.hello.languages,
            "isolation": self.instance.hello.enforced,
            "from_pool": self.pooled,
            "network": self.network,
        })
    }
}

pub struct Manager {
    pub settings: Settings,
    pub pool: Arc<Pool>,
    sandboxes: Mutex<HashMap<Uuid, Arc<Sandbox>>>,
    /// Creates under way, counted against the cap before they finish.
    reserved: AtomicUsize,
    pub microvm: microvm::Probe,
    pub orphans_cleaned: usize,
    /// The templates built before start (each also an image, `template:NAME`).
    pub templates: Vec<crate::template::Template>,
    /// Sandboxes whose agent died.
    ended: Mutex<EndedIds>,
    /// export_workspace's and import_workspace's files, which go with their sandbox.
    pub(crate) transfers: crate::tools::workspace::Store,
}

impl Manager {
    /// Cleans a crashed run's leftovers and settles the backend: `microvm` and `auto` boot a test VM
    /// first; `microvm` refuses to start when it fails, `auto` falls back to namespace.
    pub async fn new(mut settings: Settings) -> Result<Arc<Self>, ConfigError> {
        backend::prepare_state_dir(&settings.state_dir)
            .map_err(|why| ConfigError::StateDir(settings.state_dir.clone(), why))?;
        if let Some(agent) = settings.install_agent {
            crate::agent_bin::install(&settings.agent_bin, agent)
                .map_err(|why| ConfigError::InstallAgent(settings.agent_bin.clone(), why))?;
        }
        let own_pid_gone = !STARTED_IN_THIS_PROCESS.swap(true, Ordering::SeqCst);
        let orphans_cleaned = backend::cleanup_orphans(&settings, own_pid_gone).await;
        if orphans_cleaned > 0 {
            tracing::warn!(
                orphans_cleaned,
                "removed sandboxes left behind by a crashed run"
            );
        }
        let transfers =
            crate::tools::workspace::Store::open(&settings.state_dir, own_pid_gone).await;
        let microvm = match settings.choice {
            BackendChoice::Microvm | BackendChoice::Auto => microvm::self_test(&settings).await,
            BackendChoice::Namespace | BackendChoice::Process => microvm::facts(&settings),
        };
        settings.backend = match (settings.choice, microvm.available) {
            (BackendChoice::Microvm, false) => return Err(ConfigError::Microvm(microvm.reason)),
            (BackendChoice::Auto, true) => BackendKind::Microvm,
            (BackendChoice::Auto, false) => {
                tracing::warn!(reason = %microvm.reason, "microvm unavailable; using namespace");
                BackendKind::Namespace
            }
            (choice, _) => choice.initial(),
        };
        if microvm.self_tested {
            tracing::info!(available = microvm.available, reason = %microvm.reason, "microvm self-test");
        }
        let templates = crate::template::load_all(&settings.state_dir);
        for t in &templates {
            settings.images.push(crate::config::Image {
                name: format!("{}{}", crate::template::PREFIX, t.manifest.name),
                root: Some(t.root.clone()),
            });
        }
        let default = Spec {
            backend: settings.backend,
            image: settings.default_image,
            memory_mib: settings.memory_mib,
            vcpus: settings.vcpus,
        };
        Ok(Arc::new(Self {
            pool: Pool::new(settings.clone(), default),
            microvm,
            settings,
            sandboxes: Mutex::new(HashMap::new()),
            reserved: AtomicUsize::new(0),
            orphans_cleaned,
            templates,
            ended: Mutex::new(EndedIds::default()),
            transfers,
        }))
    }

    fn map(&self) -> MutexGuard<'_, HashMap<Uuid, Arc<Sandbox>>> {
        self.sandboxes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The image names, the default first.
    pub fn image_names(&self) -> Vec<String> {
        let s = &self.settings;
        let default = s.image_name(s.default_image).to_string();
        let rest = s
            .images
            .iter()
            .map(|i| i.name.clone())
            .filter(|n| *n != default && !n.starts_with(crate::template::PREFIX));
        std::iter::once(default.clone()).chain(rest).collect()
    }

    /// The spec a create asks for; an unknown image name is an invalid `image` argument.
    pub fn spec(
        &self,
        memory_mib: Option<u64>,
        vcpus: Option<u32>,
        image: Option<&str>,
    ) -> Result<Spec, ToolError> {
        let image = match image {
            None => self.settings.default_image,
            Some(name) => self
                .settings
                .images
                .iter()
                .position(|i| i.name == name && !name.starts_with(crate::template::PREFIX))
                .and_then(|i| u16::try_from(i).ok())
                .ok_or_else(|| {
                    ToolError::invalid_argument(
                        "image",
                        format!(
                            "no image {name:?}; this server has: {}",
                            image_names(&self.settings.images)
                        ),
                    )
                })?,
        };
        let max = &self.settings.max;
        if let Some(m) = memory_mib
            && m > max.memory_mib
        {
            return Err(ToolError::invalid_argument(
                "memory_mib",
                format!(
                    "`memory_mib` is {m}; a sandbox may have at most {} MiB ({})",
                    max.memory_mib,
                    max.memory_source()
                ),
            )
            .with_details(json!({"limit": max.memory_mib})));
        }
        if let Some(v) = vcpus
            && v > max.vcpus
        {
            return Err(ToolError::invalid_argument(
                "vcpu_count",
                format!(
                    "`vcpu_count` is {v}; a sandbox may have at most {} ({})",
                    max.vcpus,
                    max.vcpus_source()
                ),
            )
            .with_details(json!({"limit": max.vcpus})));
        }
        Ok(Spec {
            backend: self.settings.backend,
            image,
            memory_mib: memory_mib.unwrap_or(self.settings.memory_mib),
            vcpus: vcpus.unwrap_or(self.settings.vcpus),
        })
    }

    /// The spec of a create that may name a template: its image is the template's (built on the host's
    /// root, so `image` cannot be given too).
    pub fn spec_with_template(
        &self,
        memory_mib: Option<u64>,
        vcpus: Option<u32>,
        image: Option<&str>,
        template: Option<&str>,
    ) -> Result<Spec, ToolError> {
        let mut spec = self.spec(memory_mib, vcpus, image)?;
        let Some(name) = template else {
            return Ok(spec);
        };
        if image.is_some() {
            return Err(ToolError::invalid_argument(
                "template",
                "a template is a root file system of its own: give `template` or `image`, not both",
            ));
        }
        let image_name = format!("{}{name}", crate::template::PREFIX);
        spec.image = self
            .settings
            .images
            .iter()
            .position(|i| i.name == image_name)
            .and_then(|i| u16::try_from(i).ok())
            .ok_or_else(|| {
                let built: Vec<&str> = self
                    .templates
                    .iter()
                    .map(|t| t.manifest.name.as_str())
                    .collect();
                let built = if built.is_empty() {
                    "none".to_string()
                } else {
                    built.join(", ")
                };
                ToolError::invalid_argument(
                    "template",
                    format!(
                        "no template {name:?}; this server has: {built} (`mcp-bridges sandbox template build \
                         NAME --pip PKG==VERSION` builds one; the server lists templates when it starts)"
                    ),
                )
            })?;
        Ok(spec)
    }

    /// Where a sandbox's /workspace lives and what its size counts against.
    pub fn workspace(&self, backend: BackendKind) -> Value {
        let mib = self.settings.workspace_mib;
        match backend {
            BackendKind::Namespace => {
                json!({"where": "tmpfs in RAM", "mib": mib, "counts_against": "memory"})
            }
            BackendKind::Microvm => {
                json!({"where": "tmpfs in the guest's RAM", "mib": mib, "counts_against": "memory"})
            }
            BackendKind::Process => json!({
                "where": "a directory on the host's disk",
                "path": self.settings.state_dir.display().to_string(),
                "mib": null,
                "counts_against": "the host's disk (no quota)"
            }),
        }
    }

    pub async fn create(&self, spec: Spec) -> Result<Arc<Sandbox>, ToolError> {
        self.create_with(spec, crate::network::Plan::none()).await
    }

    /// A sandbox with a network: the pool holds only sandboxes without one, so those start cold.
    pub async fn create_with(
        &self,
        spec: Spec,
        network: crate::network::Plan,
    ) -> Result<Arc<Sandbox>, ToolError> {
        let max = self.settings.max_sandboxes;
        let taken = self.reserved.fetch_add(1, Ordering::SeqCst) + self.len();
        let release = Release(&self.reserved);
        if taken >= max {
            return Err(ToolError::busy(format!(
                "{max} sandboxes are alive (the limit, SANDBOX_MAX); destroy one first"
            )));
        }
        let warm = match network.policy {
            crate::network::Policy::None => self.pool.take(spec),
            crate::network::Policy::Egress => None,
        };
        let (instance, pooled) = match warm {
            Some(i) => (i, true),
            None => {
                let i = backend::launch_with(&self.settings, spec, network.launch)
                    .await
                    .map_err(|e| ToolError::remote(e.to_string()))?;
                self.pool.record_boot(i.boot);
                (i, false)
            }
        };
        let sandbox = Arc::new(Sandbox {
            id: Uuid::new_v4(),
            created_at: SystemTime::now(),
            created: Instant::now(),
            last_used: Mutex::new(Instant::now()),
            instance,
            pooled,
            network: network.report,
            sessions: Default::default(),
        });
        self.map().insert(sandbox.id, Arc::clone(&sandbox));
        drop(release);
        Ok(sandbox)
    }

    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sandbox named by `id`, renewed, for a call that talks to its agent: a paused sandbox (its agent
    /// frozen too) is refused with `E_SANDBOX_PAUSED`.
    pub fn get(&self, id: &str) -> Result<Arc<Sandbox>, ToolError> {
        let s = self.get_any(id)?;
        if s.instance.is_paused() {
            return Err(paused(&s));
        }
        Ok(s)
    }

    /// The sandbox named by `id`, renewed, paused or not; any failure is the one generic not-found, but for
    /// a sandbox whose agent died (`E_SANDBOX_ENDED`).
    pub fn get_any(&self, id: &str) -> Result<Arc<Sandbox>, ToolError> {
        let Ok(uuid) = Uuid::parse_str(id.trim()) else {
            return Err(ToolError::not_found(NOT_FOUND));
        };
        let found = self.map().get(&uuid).cloned();
        match found {
            // Dead but not yet reaped (the next tick takes it): a call would only fail on the closed link.
            Some(s) if s.instance.client.is_closed() => Err(ended(uuid)),
            Some(s) => {
                s.touch();
                Ok(s)
            }
            None if self.lock_ended().contains(&uuid) => Err(ended(uuid)),
            None => Err(ToolError::not_found(NOT_FOUND)),
        }
    }

    fn lock_ended(&self) -> MutexGuard<'_, EndedIds> {
        self.ended.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub async fn destroy(&self, id: &str) -> Result<(), ToolError> {
        let removed = Uuid::parse_str(id.trim())
            .ok()
            .and_then(|u| self.map().remove(&u));
        let Some(sandbox) = removed else {
            return Err(ToolError::not_found(NOT_FOUND));
        };
        self.finish(sandbox).await;
        Ok(())
    }

    /// Destroys a sandbox taken out of the map, and its transfers' files; a call still in flight on it fails
    /// at once (its stream is closed).
    async fn finish(&self, sandbox: Arc<Sandbox>) {
        self.transfers.forget_sandbox(sandbox.id);
        sandbox.instance.destroy().await;
    }

    pub fn list(&self) -> Vec<Arc<Sandbox>> {
        let mut all: Vec<_> = self.map().values().cloned().collect();
        all.sort_by_key(|s| s.created_at);
        all
    }

    /// Destroys every sandbox and every warm one.
    pub async fn destroy_all(&self) {
        let all: Vec<_> = self.map().drain().map(|(_, s)| s).collect();
        let warm = self.pool.drain();
        self.transfers.clear();
        let mut tasks = Vec::new();
        for s in all {
            tasks.push(tokio::spawn(async move { s.instance.destroy().await }));
        }
        for i in warm {
            tasks.push(tokio::spawn(async move { i.destroy().await }));
        }
        for t in tasks {
            let _ = t.await;
        }
    }

    /// Every second: destroy sandboxes idle longer than the idle timeout, older than the max lifetime, or
    /// whose agent is gone; drop transfers of sandboxes gone and transfers unused past their TTL.
    pub async fn reap(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            let expired: Vec<(Arc<Sandbox>, Ended)> = {
                let mut map = self.map();
                let ids: Vec<(Uuid, Ended)> = map
                    .values()
                    .filter_map(|s| {
                        let why = if s.instance.client.is_closed() {
                            Ended::AgentExited
                        } else if s.idle_for() >= self.settings.idle_timeout {
                            Ended::Idle
                        } else if s.created.elapsed() >= self.settings.max_lifetime {
                            Ended::Lifetime
                        } else {
                            return None;
                        };
                        Some((s.id, why))
                    })
                    .collect();
                ids.into_iter()
                    .filter_map(|(id, why)| map.remove(&id).map(|s| (s, why)))
                    .collect()
            };
            for (s, why) in expired {
                match why {
                    Ended::AgentExited => {
                        tracing::warn!(sandbox = %s.id, "sandbox ended: its agent exited; destroyed");
                        self.lock_ended().remember(s.id);
                    }
                    Ended::Idle => tracing::info!(sandbox = %s.id, "sandbox expired (idle)"),
                    Ended::Lifetime => {
                        tracing::info!(sandbox = %s.id, "sandbox expired (maximum lifetime)");
                    }
                }
                self.finish(s).await;
            }
            let live: Vec<Uuid> = self.map().keys().copied().collect();
            self.transfers.sweep(&live);
        }
    }

    /// What the isolation really is, from the newest sandbox's agent (or the backend's description).
    pub fn isolation(&self) -> Value {
        let newest = self.list().pop();
        match newest {
            Some(s) => json!(s.instance.hello.enforced),
            None => json!(null),
        }
    }
}

/// The answer of every call that would run something in a paused sandbox.
pub fn paused(s: &Sandbox) -> ToolError {
    ToolError::new(
        bridge_core::ErrorCode::Conflict,
        format!(
            "sandbox {} is paused: nothing runs in it until resume_sandbox",
            s.id
        ),
    )
    .with_code_name("E_SANDBOX_PAUSED")
    .with_hint("call resume_sandbox {sandbox_id} first")
    .with_details(json!({"sandbox_id": s.id.to_string(), "state": "paused"}))
}

/// Why the reaper took a sandbox.
enum Ended {
    AgentExited,
    Idle,
    Lifetime,
}

/// The ids of sandboxes whose agent died, newest `ENDED_REMEMBERED` kept: a fixed few KiB however many die.
#[derive(Default)]
struct EndedIds(VecDeque<Uuid>);

impl EndedIds {
    fn remember(&mut self, id: Uuid) {
        if self.0.len() >= ENDED_REMEMBERED {
            self.0.pop_front();
        }
        self.0.push_back(id);
    }

    fn contains(&self, id: &Uuid) -> bool {
        self.0.contains(id)
    }
}

/// The answer to a call naming a sandbox whose agent died.
fn ended(id: Uuid) -> ToolError {
    ToolError::new(
        bridge_core::ErrorCode::Disconnected,
        format!(
            "sandbox {id} ended: its agent exited (it crashed or was killed), so the sandbox and its files are gone"
        ),
    )
    .with_code_name("E_SANDBOX_ENDED")
    .with_hint("create a new sandbox with create_sandbox")
    .with_details(json!({"sandbox_id": id.to_string(), "state": "ended", "reason": "agent exited"}))
}

struct Release<'a>(&'a AtomicUsize);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ended_ids_keep_the_newest_and_stay_bounded() {
        let mut ended = EndedIds::default();
        let ids: Vec<Uuid> = (0..ENDED_REMEMBERED + 44).map(|_| Uuid::new_v4()).collect();
        for id in &ids {
            ended.remember(*id);
        }
        assert_eq!(ended.0.len(), ENDED_REMEMBERED);
        assert!(ids[..44].iter().all(|id| !ended.contains(id)));
        assert!(ids[44..].iter().all(|id| ended.contains(id)));
    }
}
