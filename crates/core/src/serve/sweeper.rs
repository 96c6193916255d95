//! Forgets expired result texts and tasks on a timer. Both stores also sweep whenever they are used, but an
//! idle server would otherwise keep up to 64 MiB of expired results and 32 MiB of task results, and leave an
//! expired task's work running (its cancellation is the sweep), until the next request touched them.

use super::handler::Shared;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often: well inside the stores' TTLs (minutes), and rare enough to cost nothing on an idle laptop.
pub(crate) const EVERY: Duration = Duration::from_secs(30);

/// Sweeps `shared`'s stores every [`EVERY`] on the current runtime (none: nothing to run on, nothing done),
/// until `shared` is dropped.
pub(crate) fn start(shared: &Arc<Shared>) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(run(Arc::downgrade(shared)));
    }
}

async fn run(shared: Weak<Shared>) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is at once; nothing can have expired yet.
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.results.sweep_expired();
        shared.tasks.sweep_expired();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::serve::results::ResultLimits;
    use crate::serve::tasks::TaskLimits;
    use crate::{Bridge, NoArgs, ToolCtx, ToolError, ToolSpec};
    use rmcp::model::ResourceContents;
    use tokio_util::sync::CancellationToken;

    fn bridge() -> Bridge {
        let mut b = Bridge::builder("idle", "0");
        b.tool(
            ToolSpec::new("noop", "Returns at once.")
                .handler(|_: NoArgs, _: ToolCtx| async { Ok::<_, ToolError>(()) }),
        );
        b.build().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_server_forgets_expired_results_and_cancels_expired_tasks() {
        let shared = super::super::shared(bridge().into(), &[]);
        let task = CancellationToken::new();
        shared.tasks.create(task.clone()).unwrap().unwrap();
        let long = ResourceContents::TextResourceContents {
            uri: "test://long".into(),
            mime_type: None,
            text: "z".repeat(100_000),
            meta: None,
        };
        shared.results.cap_resource(long, 1000).unwrap();
        assert!(shared.results.kept_bytes() >= 100_000);

        // Nobody reads a result or asks about a task from here on.
        tokio::time::sleep(TaskLimits::default().ttl.max(ResultLimits::default().ttl) + EVERY * 2)
            .await;
        assert!(
            task.is_cancelled(),
            "the expired task's work was not cancelled"
        );
        assert_eq!(shared.results.kept_bytes(), 0, "expired results still held");
    }

    #[tokio::test(start_paused = true)]
    async fn the_sweeper_ends_with_its_server() {
        let shared = super::super::shared(bridge().into(), &[]);
        let handle = tokio::spawn(run(Arc::downgrade(&shared)));
        drop(shared);
        tokio::time::sleep(EVERY * 2).await;
        assert!(handle.is_finished());
    }
}
