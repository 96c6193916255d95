//! create_sandbox, destroy_sandbox, list_sandboxes (Bouvet's), keepalive (ours).

use crate::manager::Manager;
use crate::time::rfc3339;
use bridge_core::{BridgeBuilder, ToolCtx, ToolError, ToolSpec, Validate, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateArgs {
    /// Memory for the sandbox in MiB (default 512): the address-space limit of each process and, where
    /// cgroups are writable, of the whole sandbox.
    #[serde(default)]
    pub memory_mib: Option<u64>,
    /// CPUs for the sandbox (default 1): a CPU quota where cgroups are writable.
    #[serde(default)]
    pub vcpu_count: Option<u32>,
    /// The read-only root file system, by name: `host` (this machine's /usr) or an image the server was
    /// started with (--sandbox-image); list_sandboxes shows which exist. Default: the server's default image.
    #[serde(default)]
    pub image: Option<String>,
}
impl Validate for CreateArgs {
    fn validate(&self) -> Result<(), ToolError> {
        if let Some(m) = self.memory_mib {
            check::in_range("memory_mib", m, 32, 65_536)?;
        }
        if let Some(v) = self.vcpu_count {
            check::in_range("vcpu_count", v, 1, 64)?;
        }
        Ok(())
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Created {
    /// The new sandbox's id (a UUID); every other tool takes it.
    pub sandbox_id: String,
    /// Languages execute_code can run here.
    pub languages: Vec<String>,
    pub backend: String,
    /// True when the sandbox came warm from the pool.
    pub from_pool: bool,
    pub expires_at: String,
    /// Where /workspace lives (`where`), its size (`mib`) and what it counts against (RAM counts against
    /// the sandbox's memory).
    pub workspace: Value,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
}
impl Validate for IdArgs {}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Success {
    pub success: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}
impl Validate for NoArgs {}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Listed {
    /// `{sandbox_id, state, created_at}` (Bouvet's fields) plus expires_at, backend, memory_mib,
    /// vcpu_count, languages, isolation (what was really enforced), from_pool.
    pub sandboxes: Vec<Value>,
    pub backend: String,
    /// Why the microvm backend is or is not available here.
    pub microvm: Value,
    /// The images create_sandbox can ask for, the default first.
    pub images: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Kept {
    pub success: bool,
    pub expires_at: String,
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    b.tool(
        ToolSpec::new(
            "create_sandbox",
            "Create an isolated sandbox (a fresh Linux environment with python3, node, bash and sh, no \
             network, a writable /workspace). Returns its sandbox_id. Destroy it when done; unused sandboxes \
             expire.",
        )
        // A cold microVM boot may take the whole boot timeout: the call waits a little longer, so a slow boot
        // ends with its own reason rather than the tool's timeout.
        .timeout(Duration::from_secs(60).max(mgr.settings.microvm.boot_timeout + Duration::from_secs(30)))
        .handler_on(Arc::clone(mgr), |m, a: CreateArgs, _: ToolCtx| async move {
            let spec = m.spec(a.memory_mib, a.vcpu_count, a.image.as_deref())?;
            let s = m.create(spec).await?;
            Ok(Created {
                sandbox_id: s.id.to_string(),
                languages: s.instance.hello.languages.clone(),
                backend: format!("{:?}", spec.backend).to_lowercase(),
                from_pool: s.pooled,
                expires_at: rfc3339(s.expires_at(&m.settings)),
                workspace: m.workspace(spec.backend),
            })
        }),
    );
    b.tool(
        ToolSpec::new(
            "destroy_sandbox",
            "Destroy a sandbox: every process in it is killed and its files are gone.",
        )
        .destructive()
        .timeout(Duration::from_secs(30))
        .handler_on(Arc::clone(mgr), |m, a: IdArgs, _: ToolCtx| async move {
            m.destroy(&a.sandbox_id).await?;
            Ok(Success { success: true })
        }),
    );
    b.tool(
        ToolSpec::new(
            "list_sandboxes",
            "List the live sandboxes, with their state, expiry, languages and the isolation really enforced.",
        )
        .read_only()
        .handler_on(Arc::clone(mgr), |m, _: NoArgs, _: ToolCtx| async move {
            Ok(Listed {
                sandboxes: m.list().iter().map(|s| s.describe(&m.settings)).collect(),
                backend: format!("{:?}", m.settings.backend).to_lowercase(),
                microvm: serde_json::to_value(&m.microvm).unwrap_or(Value::Null),
                images: m.image_names(),
            })
        }),
    );
    b.tool(
        ToolSpec::new(
            "keepalive",
            "Renew a sandbox's idle timeout (every other call on it renews it too). Its maximum lifetime \
             still applies.",
        )
        .idempotent()
        .handler_on(Arc::clone(mgr), |m, a: IdArgs, _: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            Ok(Kept {
                success: true,
                expires_at: rfc3339(s.expires_at(&m.settings)),
            })
        }),
    );
}
