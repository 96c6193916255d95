//! How sessions end when the call that ends them may not live to see it: [`Endings`] runs each ending in a
//! task of its own that the bridge's shutdown waits for, and [`Launching`] ends what a launch cut short opened.

use super::session::{Session, lock};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::task::TaskTracker;

/// How [`Endings::end`] ends a session.
#[derive(Clone, Copy)]
pub enum Ending {
    /// As [`Session::terminate`]: a launched program ends with it, an attached one is detached from.
    Terminate,
    /// As [`Session::end`]`(false)`: the program is left running where the adapter allows.
    Detach,
}

/// The endings of sessions in progress, each in a task of its own: a call that asked for one and went away
/// (cancelled, past its deadline, dropped by the shutdown's drain) cannot cut it short, and the bridge's
/// shutdown waits for them all ([`Self::finish`]) before the process exits.
#[derive(Clone, Default)]
pub struct Endings(Arc<EndingsInner>);

#[derive(Default)]
struct EndingsInner {
    tasks: TaskTracker,
    /// The sessions being ended now.
    ending: Mutex<Vec<Arc<Session>>>,
}

impl Endings {
    /// Ends `sessions` one after the other, in a task of its own; await the handle to wait for it.
    pub fn end(&self, sessions: Vec<Arc<Session>>, how: Ending) -> tokio::task::JoinHandle<()> {
        self.end_on(&tokio::runtime::Handle::current(), sessions, how)
    }

    fn end_on(
        &self,
        rt: &tokio::runtime::Handle,
        sessions: Vec<Arc<Session>>,
        how: Ending,
    ) -> tokio::task::JoinHandle<()> {
        lock(&self.0.ending).extend(sessions.iter().cloned());
        let inner = Arc::clone(&self.0);
        self.0.tasks.spawn_on(
            async move {
                for s in &sessions {
                    match how {
                        Ending::Terminate => s.terminate().await,
                        Ending::Detach => s.end(false).await,
                    }
                }
                let mut ending = lock(&inner.ending);
                for s in &sessions {
                    if let Some(at) = ending.iter().position(|e| Arc::ptr_eq(e, s)) {
                        ending.swap_remove(at);
                    }
                }
            },
            rt,
        )
    }

    /// Whether `session` is being ended now.
    pub fn is_ending(&self, session: &Arc<Session>) -> bool {
        lock(&self.0.ending).iter().any(|e| Arc::ptr_eq(e, session))
    }

    /// Waits for every ending in progress, at most `limit`; past it kills what they have not ended yet
    /// ([`Session::kill_now`]), so nothing outlives the bridge.
    pub async fn finish(&self, limit: Duration) {
        self.0.tasks.close();
        if tokio::time::timeout(limit, self.0.tasks.wait())
            .await
            .is_err()
        {
            let left = lock(&self.0.ending).clone();
            tracing::warn!(
                sessions = left.len(),
                "debug sessions still ending {} ms into the shutdown; killing what they started",
                limit.as_millis()
            );
            for s in left {
                s.kill_now();
            }
        }
    }
}

/// The sessions one launch (`debug_start`, `debug_restart`, `debug_attach`) opened, until the caller has the
/// one it made. Every launch path opens its sessions through this, so none can outlive a launch that did not
/// finish: dropped before [`Self::settle`] (the launch failed, or the call was cancelled, ran past its deadline
/// or lost its client while the launch waited on the debugger), it ends them. They stop counting as live at
/// once (a `--debug-max-sessions` slot is free again); their adapters, debug servers, socket directories and
/// what those started are ended through the backend's [`Endings`], which a dropped call cannot cut short and
/// the bridge's shutdown waits for.
pub struct Launching {
    opened: Vec<Arc<Session>>,
    endings: Endings,
}

impl Launching {
    pub fn new(endings: &Endings) -> Self {
        Self {
            opened: Vec::new(),
            endings: endings.clone(),
        }
    }

    /// A session this launch opened: ended unless the launch settles.
    pub fn opened(&mut self, session: &Arc<Session>) {
        self.opened.push(Arc::clone(session));
    }

    /// The caller has the session: nothing is ended.
    pub fn settle(mut self) {
        self.opened.clear();
    }
}

impl Drop for Launching {
    fn drop(&mut self) {
        let mut opened = std::mem::take(&mut self.opened);
        if opened.is_empty() {
            return;
        }
        for s in &opened {
            s.mark_ended();
        }
        match tokio::runtime::Handle::try_current() {
            // The last opened first: js-debug's program session ends its parent, server and directory after it.
            Ok(rt) => {
                opened.reverse();
                drop(self.endings.end_on(&rt, opened, Ending::Terminate));
            }
            // No runtime left to disconnect on: what they started is killed.
            Err(_) => {
                for s in &opened {
                    s.kill_now();
                }
            }
        }
    }
}

#[cfg(test)]
impl Endings {
    /// An ending of `session` that never finishes, as against a debugger that never answers.
    pub(super) fn stalled(&self, session: &Arc<Session>) {
        lock(&self.0.ending).push(Arc::clone(session));
        self.0.tasks.spawn(std::future::pending::<()>());
    }
}
