//! The catalog as MCP tools: every tool validated against its generated schema, then answered locally
//! (`bridge_status`, `docs_*`) or by the backend, with the effective timeout and cancellation.

use crate::backend::{Chosen, FRESH_HOST};
use crate::catalog::{Catalog, ToolDef};
use crate::config::DebugArgs;
use crate::docs::PAGES;
use crate::envelope::ScriptError;
use crate::fsbridge::client::RunCtx;
use bridge_core::tool::{Content, ToolOutput};
use bridge_core::{BridgeBuilder, ToolCtx, ToolError, ToolSpec};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Room past a tool's own deadline for the cancel-and-wait-for-done step, before the core's deadline fires.
const CORE_GRACE: Duration = Duration::from_secs(5);
/// How long past its deadline a `dap` call is cut short. Every wait inside one ends at the deadline itself and
/// answers with what it waited for (`the adapter never sent initialized`); cutting it at that same instant
/// answered a bare timeout instead. Less than [`CORE_GRACE`], so the bridge still answers before the core.
const DAP_BACKSTOP: Duration = Duration::from_secs(2);
/// A `timeoutMs` parameter gets this much more than its own wait (VSC-Bridge's tool timeouts were shorter than
/// their own `timeoutMs` defaults, so the MCP side gave up first).
const PARAM_SLACK: Duration = Duration::from_secs(2);
/// The largest `timeoutMs` the catalog allows.
const MAX_PARAM_TIMEOUT: Duration = Duration::from_secs(300);
/// Results above this many estimated tokens (chars / 4) are shown as a preview, as VSC-Bridge does.
/// None since the core cuts every result at RESULT_CAP_BYTES and keeps the whole text readable (a preview here
/// would leave only 1000 bytes reachable).
const MAX_RESULT_TOKENS: usize = usize::MAX / 4;

struct Shared {
    chosen: Chosen,
    args: DebugArgs,
    tool_count: usize,
}

pub fn register(b: &mut BridgeBuilder, catalog: &Catalog, args: &DebugArgs, chosen: Chosen) {
    let shared = Arc::new(Shared {
        tool_count: catalog.tools.iter().filter(|t| chosen.serves(t)).count(),
        chosen,
        args: args.clone(),
    });
    for def in &catalog.tools {
        let base = def.timeout(args.timeout);
        let core_timeout = if def.has_timeout_param() {
            base.max(MAX_PARAM_TIMEOUT + PARAM_SLACK)
        } else {
            base
        } + CORE_GRACE;
        let mut spec = ToolSpec::new(def.name.clone(), def.description.clone())
            .title(def.title.clone())
            .timeout(core_timeout);
        if def.has_timeout_param() {
            spec = spec.task_support(bridge_core::tool::TaskSupport::Optional); // waits: continue, step, wait_for_hit
        }
        if def.read_only {
            spec = spec.read_only();
        }
        if def.idempotent {
            spec = spec.idempotent();
        }
        if def.destructive {
            spec = spec.destructive();
        }
        if !shared.chosen.serves(def) {
            spec = spec.unlisted();
        }
        let def = Arc::new(def.clone());
        let shared = Arc::clone(&shared);
        let schema = def.input_schema.clone();
        spec = spec.raw_handler(schema, move |raw, ctx| {
            let def = Arc::clone(&def);
            let shared = Arc::clone(&shared);
            async move { call(&def, &shared, raw, ctx).await }
        });
        b.tool(spec);
    }
}

async fn call(
    def: &ToolDef,
    shared: &Shared,
    raw: Value,
    ctx: ToolCtx,
) -> Result<ToolOutput, ToolError> {
    let params = crate::catalog::validate::check(&def.input_schema, raw)?;
    if def.local {
        return local(def, shared, &params).map(|data| {
            output(
                data.clone(),
                json!({"ok": true, "type": "success", "data": data}),
            )
        });
    }
    let kind = shared.chosen.backend.kind();
    if !shared.chosen.serves(def) {
        let need: Vec<&str> = def.backends.iter().map(|b| b.as_str()).collect();
        let why = crate::docs::vscode_only(&def.alias);
        return Err(ScriptError::new(
            "E_UNSUPPORTED_BACKEND",
            format!("`{}` needs the {} backend; this server runs the {} backend{}", def.name, need.join(" or "), kind.as_str(),
                why.map(|w| format!(": only with VS Code, because {w}")).unwrap_or_default()),
        )
        .hint(if need.contains(&"vscode") {
            "Run VS Code with VSC-Bridge in this workspace (or `mcp-bridges debug host`) and start the server with --debug-backend vscode"
        } else {
            "Start the server with --debug-backend dap"
        })
        .details(json!({"backend": kind.as_str(), "needs": need, "why": why}))
        .into_tool_error(Some(def)));
    }
    let mut wait = def.timeout(shared.args.timeout);
    if let Some(ms) = params.get("timeoutMs").and_then(Value::as_u64) {
        wait = wait.max(Duration::from_millis(ms) + PARAM_SLACK);
    }
    let deadline = Instant::now() + wait;
    let cancel = ctx.cancellation();
    let run_ctx = RunCtx {
        cancel: cancel.clone(),
        tool: Some(ctx),
    };
    let backend = shared.chosen.backend.clone();
    let run = backend.execute(def, params, deadline, run_ctx);
    let result = if matches!(backend, crate::backend::Backend::Vscode(_)) {
        // The file client handles cancellation itself: it writes `cancel` and waits for `done`.
        run.await
    } else {
        // Dropping `run` here is safe: a launch cut short ends what it started (`dap::ending::Launching`).
        tokio::select! {
            r = run => r,
            () = cancel.cancelled() => Err(ScriptError::new("E_CANCELLED", "the call was cancelled")),
            () = tokio::time::sleep_until(deadline + DAP_BACKSTOP) => Err(ScriptError::new("E_TIMEOUT", format!("{} did not finish within {} ms", def.name, wait.as_millis()))),
        }
    };
    match result {
        Ok(envelope) => {
            let data = envelope.get("data").cloned().unwrap_or(Value::Null);
            Ok(output(data, envelope))
        }
        Err(e) => Err(e.into_tool_error(Some(def))),
    }
}

fn output(data: Value, envelope: Value) -> ToolOutput {
    let mut text = data.to_string();
    if text.len() / 4 > MAX_RESULT_TOKENS {
        let mut cut = 1000.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text = format!(
            "The result is about {} tokens, too large to show; structuredContent has it whole. Preview:\n{}",
            text.len() / 4,
            &text[..cut]
        );
    }
    ToolOutput {
        structured: Some(envelope),
        content: vec![Content::Text(text)],
    }
}

fn local(def: &ToolDef, shared: &Shared, p: &Map<String, Value>) -> Result<Value, ToolError> {
    match def.alias.as_str() {
        "bridge.status" => Ok(bridge_status(shared)),
        "docs.list" => crate::docs::list(p),
        "docs.get" => {
            let id = p.get("id").and_then(Value::as_str).unwrap_or_default();
            PAGES
                .iter()
                .find(|page| page.id == id)
                .map(|page| json!({"id": page.id, "title": page.title, "content": page.text}))
                .ok_or_else(|| {
                    ToolError::not_found(format!("no doc page `{id}`")).with_hint(format!(
                        "use one of: {}",
                        PAGES.iter().map(|p| p.id).collect::<Vec<_>>().join(", ")
                    ))
                })
        }
        other => Err(ToolError::internal(format!("no local tool for `{other}`"))),
    }
}

fn bridge_status(shared: &Shared) -> Value {
    let ws = crate::backend::workspace(&shared.args);
    let root = crate::backend::root_of(&shared.args);
    let untrusted = crate::fsbridge::trust::check_root(&root)
        .err()
        .filter(|e| std::fs::symlink_metadata(&e.path).is_ok());
    let age = crate::fsbridge::host_json_age(&root);
    let python = shared
        .args
        .python
        .clone()
        .or_else(|| crate::dap::launch::find_program(&["python3"], &[]));
    let lldb = shared.args.lldb_dap.clone().or_else(|| {
        crate::dap::launch::find_program(
            &["lldb-dap", "lldb-dap-22", "lldb-dap-19"],
            &[
                "/usr/lib/llvm-22/bin/lldb-dap",
                "/usr/lib/llvm-19/bin/lldb-dap",
            ],
        )
    });
    let mut v = json!({
        "backend": shared.chosen.backend.kind().as_str(),
        "reason": shared.chosen.reason,
        "workspace": ws.display().to_string(),
        "bridgeRoot": root.display().to_string(),
        "bridgeRootRefused": untrusted.as_ref().map(|e| e.reason.clone()),
        "hostJsonAgeMs": age.map(|a| a.as_millis() as u64),
        "vscodeHealthy": untrusted.is_none() && age.is_some_and(|a| a < FRESH_HOST),
        "tools": shared.tool_count,
        "debuggers": {"python": python.map(|p| p.display().to_string()), "lldbDap": lldb.map(|p| p.display().to_string())},
        "version": env!("CARGO_PKG_VERSION"),
    });
    // The backend in use, judged now: a vscode backend whose directory is refused or whose host stopped
    // beating fails every call, and says so here rather than "healthy".
    let problem = match (&shared.chosen.backend, &untrusted, age) {
        (crate::backend::Backend::Dap(_), _, _) => None,
        (_, Some(e), _) => Some(format!("E_BRIDGE_UNTRUSTED: {e}")),
        (_, None, None) => Some(format!(
            "no host.json in {}: VS Code with VSC-Bridge (or `mcp-bridges debug host`) is not running there",
            root.display()
        )),
        (_, None, Some(a)) if a >= FRESH_HOST => Some(format!(
            "the host's heartbeat (host.json) is {} s old: the host is not running",
            a.as_secs()
        )),
        _ => None,
    };
    v["healthy"] = json!(problem.is_none());
    v["problem"] = json!(problem);
    if let Some(dap) = shared.chosen.backend.dap() {
        v["session"] = dap.status();
    }
    v
}
