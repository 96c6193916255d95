//! Which backend runs the tools (`--debug-backend auto|vscode|dap`), and the one call path into either.

use crate::catalog::{BackendKind, ToolDef};
use crate::config::{BackendChoice, DebugArgs};
use crate::dap::{DapBackend, DapConfig};
use crate::envelope::{self, ScriptError};
use crate::fsbridge::client::{FsClient, RunCtx};
use crate::fsbridge::{bridge_root, host_json_age, trust};
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant as StdInstant;
use tokio::time::Instant;

/// A `host.json` touched less than this long ago means a live extension host (VSC-Bridge's 30 s window).
pub const FRESH_HOST: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Clone)]
pub enum Backend {
    Dap(Arc<DapBackend>),
    Vscode(Arc<FsClient>),
}

/// The backend in use and why it was chosen (`bridge_status` shows both).
#[derive(Clone)]
pub struct Chosen {
    pub backend: Backend,
    pub reason: String,
    /// The vscode backend's host is `mcp-bridges debug host` (`host.json` says `headless: true`), which also
    /// runs the `dap_*` journal tools VS Code's extension has disabled.
    pub headless: bool,
}

impl Chosen {
    /// Whether `def` is served (listed and run) here.
    pub fn serves(&self, def: &ToolDef) -> bool {
        def.serves(self.backend.kind()) || (self.headless && def.serves(BackendKind::Dap))
    }
}

impl Backend {
    pub fn kind(&self) -> BackendKind {
        match self {
            Self::Dap(_) => BackendKind::Dap,
            Self::Vscode(_) => BackendKind::Vscode,
        }
    }

    pub fn dap(&self) -> Option<Arc<DapBackend>> {
        match self {
            Self::Dap(d) => Some(Arc::clone(d)),
            Self::Vscode(_) => None,
        }
    }

    /// Runs one script; the success envelope, or the script's error.
    pub async fn execute(
        &self,
        def: &ToolDef,
        params: Map<String, Value>,
        deadline: Instant,
        ctx: RunCtx,
    ) -> Result<Value, ScriptError> {
        match self {
            Self::Dap(dap) => {
                let started = StdInstant::now();
                let id = crate::fsbridge::ids::job_id(envelope::now_ms());
                let data = dap.execute(&def.alias, &params, deadline).await?;
                Ok(envelope::success(&id, data, started))
            }
            Self::Vscode(client) => {
                client
                    .run(&def.alias, Value::Object(params), deadline, ctx)
                    .await
            }
        }
    }
}

fn dap_config(args: &DebugArgs) -> DapConfig {
    DapConfig {
        workspace: workspace(args),
        python: args.python.clone(),
        lldb_dap: args.lldb_dap.clone(),
        js_debug: args.js_debug.clone(),
        policy: policy(args),
    }
}

pub fn policy(args: &DebugArgs) -> crate::dap::policy::LaunchPolicy {
    crate::dap::policy::LaunchPolicy {
        anywhere: args.allow_launch_anywhere,
        allow_dirs: args.launch_allow.clone(),
        env_allow: args.env_allow.clone(),
    }
}

pub fn workspace(args: &DebugArgs) -> PathBuf {
    let w = args
        .workspace
        .canonicalize()
        .unwrap_or_else(|_| args.workspace.clone());
    if w.is_absolute() {
        w
    } else {
        std::env::current_dir().map(|d| d.join(&w)).unwrap_or(w)
    }
}

/// The bridge directory these flags name (the workspace's own `.vsc-bridge/`, or `--debug-bridge-dir`).
pub fn root_of(args: &DebugArgs) -> PathBuf {
    bridge_root(&workspace(args), args.bridge_dir.as_deref())
}

pub fn choose(args: &DebugArgs) -> Result<Chosen, std::io::Error> {
    let root = root_of(args);
    let headless = host_is_headless(&root);
    let exists = std::fs::symlink_metadata(&root).is_ok();
    let trusted = trust::check_root(&root);
    let fresh = host_json_age(&root).filter(|age| *age < FRESH_HOST);
    let dap = || {
        Backend::Dap(Arc::new(
            DapBackend::new(dap_config(args)).max_sessions(args.max_sessions),
        ))
    };
    let vscode = |root: PathBuf| {
        Backend::Vscode(Arc::new(
            FsClient::new(root).max_data_bytes(args.max_data_bytes),
        ))
    };
    let mut chosen = match (args.backend, trusted, fresh) {
        (BackendChoice::Dap, _, _) => Chosen {
            headless: false,
            backend: dap(),
            reason: "--debug-backend dap".into(),
        },
        (BackendChoice::Vscode, _, _) => Chosen {
            headless: false,
            reason: format!("--debug-backend vscode (bridge at {})", root.display()),
            backend: vscode(root),
        },
        (BackendChoice::Auto, Err(e), _) if exists => Chosen {
            headless: false,
            backend: dap(),
            reason: format!("auto: {e}; refused (E_BRIDGE_UNTRUSTED): headless DAP"),
        },
        (BackendChoice::Auto, Ok(()), Some(age)) => Chosen {
            headless: false,
            reason: format!(
                "auto: {} has a fresh host.json ({} ms old)",
                root.display(),
                age.as_millis()
            ),
            backend: vscode(root),
        },
        (BackendChoice::Auto, Ok(()), None) => Chosen {
            headless: false,
            backend: dap(),
            reason: format!(
                "auto: {} has no fresh host.json (none, or older than 30 s): headless DAP",
                root.display()
            ),
        },
        (BackendChoice::Auto, Err(_), _) => Chosen {
            headless: false,
            backend: dap(),
            reason: format!(
                "auto: no .vsc-bridge/ at {} (the workspace's own; parents are never used): headless DAP",
                root.display()
            ),
        },
    };
    chosen.headless = matches!(chosen.backend, Backend::Vscode(_)) && headless;
    Ok(chosen)
}

/// `host.json` written by our headless host.
fn host_is_headless(root: &std::path::Path) -> bool {
    crate::fsbridge::io::read_json(
        &root.join(crate::fsbridge::HOST_JSON),
        crate::fsbridge::io::SMALL_FILE_BYTES,
    )
    .ok()
    .and_then(|v| v.get("headless").and_then(Value::as_bool))
    .unwrap_or(false)
}
