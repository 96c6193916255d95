//! create_sandbox, destroy_sandbox, list_sandboxes (Bouvet's), keepalive (ours).

use crate::manager::Manager;
use crate::time::rfc3339;
use bridge_core::{BridgeBuilder, ToolCtx, ToolError, ToolSpec, Validate, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

// Bouvet's tool: fields beyond these are ignored, as Bouvet ignores them (its clients send extra ones).
#[derive(Debug, Deserialize, JsonSchema)]
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
    /// A template by name: the host's root with packages installed (`mcp-bridges sandbox template build`);
    /// list_templates shows which exist. Not with `image`.
    #[serde(default)]
    pub template: Option<String>,
    /// `none` (only lo: a connection anywhere else fails at once) or `egress` (outbound through a user-mode
    /// network stack, with DNS, limited by network_allow). Default: the server's (SANDBOX_NETWORK).
    #[serde(default)]
    pub network: Option<String>,
    /// With `egress`: where the sandbox may connect: host names (resolved now), addresses or CIDRs, each
    /// with an optional `:port` or `:low-high` (IPv6 in brackets), e.g. ["pypi.org:443",
    /// "files.pythonhosted.org:443", "10.0.0.0/8:8080"]. Default: the server's (SANDBOX_NETWORK_ALLOW);
    /// empty: anywhere but the host's own addresses.
    #[serde(default)]
    pub network_allow: Option<Vec<String>>,
}
impl Validate for CreateArgs {
    fn validate(&self) -> Result<(), ToolError> {
        if let Some(a) = &self.network_allow {
            check::in_range("network_allow", a.len(), 0, crate::network::MAX_ALLOW)?;
        }
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
    /// The network policy in force: `policy` (`none` or `egress`) and, with egress, the allow-list as
    /// resolved.
    pub network: Value,
}

// Bouvet's tool: fields beyond these are ignored, as Bouvet ignores them (its clients send extra ones).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct IdArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
}
impl Validate for IdArgs {}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Success {
    pub success: bool,
}

/// Sandboxes a list_sandboxes page holds unless `limit` says otherwise, and the most it may ask for.
pub const LIST_DEFAULT_LIMIT: usize = 20;
pub const LIST_MAX_LIMIT: usize = 100;

/// Bouvet's list_sandboxes takes no arguments (and ignores any); these are ours.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ListArgs {
    /// Sandboxes per page (default 20, at most 100).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Where to go on from: the `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Only this sandbox, with its whole isolation report.
    #[serde(default)]
    pub sandbox_id: Option<String>,
    /// The whole isolation report on every sandbox (by default, only on the first sandbox of the page with
    /// that report; the others name it with `isolation_as`).
    #[serde(default)]
    pub verbose: bool,
}
impl Validate for ListArgs {
    fn validate(&self) -> Result<(), ToolError> {
        if let Some(l) = self.limit {
            check::in_range("limit", l, 1, LIST_MAX_LIMIT as u32)?;
        }
        if let Some(c) = &self.cursor {
            Cursor::parse(c)?;
        }
        Ok(())
    }
}

/// A page's end: the creation time and id of its last sandbox, the order the list is sorted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Cursor {
    created_ns: u128,
    id: uuid::Uuid,
}

impl Cursor {
    fn of(s: &crate::manager::Sandbox) -> Self {
        Self {
            created_ns: s
                .created_at
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
            id: s.id,
        }
    }

    fn parse(text: &str) -> Result<Self, ToolError> {
        let bad = || {
            ToolError::invalid_argument(
                "cursor",
                format!("{text:?} is not a next_cursor that list_sandboxes returned"),
            )
        };
        let (ns, id) = text.split_once('~').ok_or_else(bad)?;
        Ok(Self {
            created_ns: ns.parse().map_err(|_| bad())?,
            id: uuid::Uuid::parse_str(id).map_err(|_| bad())?,
        })
    }

    fn render(self) -> String {
        format!("{}~{}", self.created_ns, self.id)
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Listed {
    /// `{sandbox_id, state, created_at}` (Bouvet's fields) plus expires_at, backend, image, memory_mib,
    /// vcpu_count, languages, from_pool, and `isolation` (what was really enforced) on the first sandbox of
    /// the page with that report; later ones with the same report (their cgroup paths aside) carry
    /// `isolation_as`, that sandbox's id.
    pub sandboxes: Vec<Value>,
    /// Live sandboxes in all, on every page.
    pub total: usize,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
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
            "Create an isolated sandbox (a fresh Linux environment with python3, node, bash and sh, a \
             writable /workspace; no network unless `network: \"egress\"`, then outbound only, to the \
             `network_allow` list). Returns its sandbox_id. Destroy it when done; unused sandboxes \
             expire.",
        )
        .title("Create Sandbox")
        // A cold microVM boot may take the whole boot timeout: the call waits a little longer, so a slow boot
        // ends with its own reason rather than the tool's timeout.
        .timeout(Duration::from_secs(60).max(mgr.settings.microvm.boot_timeout + Duration::from_secs(30)))
        .handler_on(Arc::clone(mgr), |m, a: CreateArgs, _: ToolCtx| async move {
            let spec = m.spec_with_template(
                a.memory_mib,
                a.vcpu_count,
                a.image.as_deref(),
                a.template.as_deref(),
            )?;
            let network = crate::network::plan(
                &m.settings.network,
                spec.backend,
                a.network.as_deref(),
                a.network_allow.as_deref(),
            )
            .await?;
            let s = m.create_with(spec, network).await?;
            Ok(Created {
                sandbox_id: s.id.to_string(),
                languages: s.instance.hello.languages.clone(),
                backend: format!("{:?}", spec.backend).to_lowercase(),
                from_pool: s.pooled,
                expires_at: rfc3339(s.expires_at(&m.settings)),
                workspace: m.workspace(spec.backend),
                network: s.network.clone(),
            })
        }),
    );
    b.tool(
        ToolSpec::new(
            "destroy_sandbox",
            "Destroy a sandbox: every process in it is killed and its files are gone.",
        )
        .title("Destroy Sandbox")
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
            "List the live sandboxes, oldest first, 20 a page (limit up to 100; pass next_cursor as cursor for \
             the next page): state (running, paused, or dead: its agent exited and it goes within a second), \
             expiry, languages and the isolation really enforced (in full once per distinct report; verbose for \
             every sandbox, or sandbox_id for one).",
        )
        .title("List Sandboxes")
        .read_only()
        .handler_on(Arc::clone(mgr), |m, a: ListArgs, _: ToolCtx| async move {
            list(&m, a)
        }),
    );
    b.tool(
        ToolSpec::new(
            "keepalive",
            "Renew a sandbox's idle timeout (every other call on it renews it too). Its maximum lifetime \
             still applies.",
        )
        .title("Keep Sandbox Alive")
        .idempotent()
        .handler_on(Arc::clone(mgr), |m, a: IdArgs, _: ToolCtx| async move {
            let s = m.get_any(&a.sandbox_id)?;
            Ok(Kept {
                success: true,
                expires_at: rfc3339(s.expires_at(&m.settings)),
            })
        }),
    );
}

fn list(m: &Manager, a: ListArgs) -> Result<Listed, ToolError> {
    let all = m.list();
    let total = all.len();
    let (page, next_cursor) = if let Some(id) = &a.sandbox_id {
        (vec![m.get_any(id)?], None)
    } else {
        let after = a.cursor.as_deref().map(Cursor::parse).transpose()?;
        let limit = a.limit.map_or(LIST_DEFAULT_LIMIT, |l| l as usize);
        let mut rest: Vec<_> = all
            .into_iter()
            .filter(|s| after.is_none_or(|c| Cursor::of(s) > c))
            .collect();
        // The manager lists by creation time; the cursor also orders ties by id.
        rest.sort_by_key(|s| Cursor::of(s));
        let more = rest.len() > limit;
        rest.truncate(limit);
        let next = more
            .then(|| rest.last().map(|s| Cursor::of(s).render()))
            .flatten();
        (rest, next)
    };
    // The isolation report is most of a sandbox's description and the same for most sandboxes: once per page.
    let mut reported: Vec<(Value, String)> = Vec::new();
    let sandboxes = page
        .iter()
        .map(|s| {
            let mut d = s.describe(&m.settings);
            if a.verbose || a.sandbox_id.is_some() {
                return d;
            }
            if let Some(obj) = d.as_object_mut()
                && let Some(report) = obj.remove("isolation")
            {
                let shared = shared_part(&report);
                match reported.iter().find(|(r, _)| *r == shared) {
                    Some((_, first)) => {
                        obj.insert("isolation_as".into(), Value::String(first.clone()));
                    }
                    None => {
                        obj.insert("isolation".into(), report);
                        reported.push((shared, s.id.to_string()));
                    }
                }
            }
            d
        })
        .collect();
    Ok(Listed {
        sandboxes,
        total,
        next_cursor,
        backend: format!("{:?}", m.settings.backend).to_lowercase(),
        microvm: serde_json::to_value(&m.microvm).unwrap_or(Value::Null),
        images: m.image_names(),
    })
}

/// Parts of an isolation report that name the sandbox itself (its cgroups' paths): left out when reports are
/// compared, and shown for a sandbox only with `verbose` or `sandbox_id`.
const OWN_KEYS: [&str; 1] = ["cgroups"];

fn shared_part(report: &Value) -> Value {
    let mut shared = report.clone();
    if let Some(obj) = shared.as_object_mut() {
        for key in OWN_KEYS {
            obj.remove(key);
        }
    }
    shared
}
