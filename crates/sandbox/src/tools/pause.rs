//! pause_sandbox and resume_sandbox: the cgroup freezer stops every process of a sandbox (its agent too)
//! where it stands, and thaws them; nothing else changes (memory, files, connections stay).

use super::lifecycle::IdArgs;
use crate::manager::Manager;
use bridge_core::{BridgeBuilder, ErrorCode, ToolCtx, ToolError, ToolSpec};
use schemars::JsonSchema;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Serialize, JsonSchema)]
pub struct Paused {
    /// The sandbox's id.
    pub sandbox_id: String,
    /// Its state now: `paused` or `running`.
    pub state: String,
    /// How long the kernel took to freeze or thaw every process, in milliseconds (0 when it already was).
    pub latency_ms: f64,
}

async fn set(m: Arc<Manager>, id: &str, pause: bool) -> Result<Paused, ToolError> {
    let s = m.get_any(id)?;
    let latency = if s.instance.is_paused() == pause {
        Duration::ZERO
    } else {
        s.instance.freeze(pause).await.map_err(|why| {
            let code = if s.instance.spec.backend != crate::backend::BackendKind::Process {
                ErrorCode::Remote
            } else {
                ErrorCode::Unsupported
            };
            ToolError::new(code, why).with_code_name(if code == ErrorCode::Unsupported {
                "E_PAUSE_UNSUPPORTED"
            } else {
                "E_REMOTE"
            })
        })?
    };
    Ok(Paused {
        sandbox_id: s.id.to_string(),
        state: if s.instance.is_paused() {
            "paused"
        } else {
            "running"
        }
        .into(),
        latency_ms: latency.as_secs_f64() * 1000.0,
    })
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    b.tool(
        ToolSpec::new(
            "pause_sandbox",
            "Pause a sandbox: every process in it stops where it stands (cgroup freezer; no CPU used, memory \
             and files kept) until resume_sandbox. Meanwhile calls that would run something or touch its \
             files answer E_SANDBOX_PAUSED; list_sandboxes shows state \"paused\"; destroy_sandbox still \
             works. Its expiry still runs. Namespace and microvm backends (a microVM's VMM is frozen whole).",
        )
        .title("Pause Sandbox")
        .idempotent()
        .timeout(Duration::from_secs(15))
        .handler_on(Arc::clone(mgr), |m, a: IdArgs, _: ToolCtx| async move {
            set(m, &a.sandbox_id, true).await
        }),
    );
    b.tool(
        ToolSpec::new(
            "resume_sandbox",
            "Resume a paused sandbox: its processes go on from where they stopped.",
        )
        .title("Resume Sandbox")
        .idempotent()
        .timeout(Duration::from_secs(15))
        .handler_on(Arc::clone(mgr), |m, a: IdArgs, _: ToolCtx| async move {
            set(m, &a.sandbox_id, false).await
        }),
    );
}
