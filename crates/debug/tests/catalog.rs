//! The catalog generated from `*.meta.yaml`: the golden `tools/list`, the naming rule, strict schemas, and a
//! tool added at run time through `--debug-manifest`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::catalog::{BUILTIN_MANIFEST, Catalog};
use bridge_debug::config::BackendChoice;
use serde_json::{Value, json};
use support::*;

async fn listed(args: bridge_debug::DebugArgs) -> Vec<Value> {
    let c = client(args).await;
    let tools = c.list_all_tools().await.unwrap();
    tools
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect()
}

fn golden(name: &str, actual: &Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    let text = serde_json::to_string_pretty(actual).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == text,
        "tools/list differs from {} (UPDATE_GOLDEN=1 to accept the change)",
        path.display()
    );
}

/// Criterion 1 and 7 on the vscode backend: every enabled VSC-Bridge tool plus the three local ones, with
/// descriptions, schemas and snake_case `thing_action` names; the golden file catches accidental changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_matches_the_golden_file_on_both_backends() {
    let ws = workspace("golden");
    let vscode = listed(args(&ws, BackendChoice::Vscode)).await;
    let names: Vec<&str> = vscode.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 35, "{names:?}");
    for expected in [
        "breakpoint_set",
        "debug_list_variables",
        "test_debug_single",
        "bridge_status",
        "docs_get",
        "search_symbol_search",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for absent in [
        "breakpoint_add",
        "variable_list",
        "breakpoint_remove",
        "debug_tracker",
        "dap_logs",
    ] {
        assert!(!names.contains(&absent), "{absent} must not be listed");
    }
    for t in &vscode {
        let name = t["name"].as_str().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{name}"
        );
        assert!(
            t["description"].as_str().unwrap().len() > 20,
            "{name} has a description"
        );
        assert_eq!(
            t["inputSchema"]["additionalProperties"], false,
            "{name} is strict"
        );
    }
    golden("tools-vscode.json", &json!(vscode));
    let dap = listed(args(&ws, BackendChoice::Dap)).await;
    let dap_names: Vec<&str> = dap.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(
        dap_names.contains(&"dap_logs") && !dap_names.contains(&"editor_goto_line"),
        "{dap_names:?}"
    );
    golden("tools-dap.json", &json!(dap));
}

/// The reference's mapping, made strict, and the metadata where clients show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_carry_types_ranges_enums_defaults_and_hints() {
    let ws = workspace("schema");
    let tools = listed(args(&ws, BackendChoice::Vscode)).await;
    let tool = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    let set = tool("breakpoint_set");
    assert_eq!(
        set["inputSchema"]["required"],
        json!(["line", "path"]),
        "required, in name order"
    );
    assert_eq!(set["inputSchema"]["properties"]["line"]["type"], "integer");
    assert_eq!(set["inputSchema"]["properties"]["line"]["minimum"], 1);
    assert!(
        set["inputSchema"]["properties"]["condition"]["description"]
            .as_str()
            .unwrap()
            .contains("x > 10")
    );
    assert!(set["description"].as_str().unwrap().contains("USE FOR:"));
    assert_eq!(set["annotations"]["idempotentHint"], true);
    assert_eq!(set["annotations"]["readOnlyHint"], false);
    let vars = tool("debug_list_variables");
    assert_eq!(
        vars["inputSchema"]["properties"]["scope"]["enum"],
        json!(["local", "closure", "global", "all"])
    );
    assert_eq!(vars["inputSchema"]["properties"]["scope"]["default"], "all");
    assert_eq!(vars["annotations"]["readOnlyHint"], true);
    let cont = tool("debug_continue");
    assert!(
        cont["description"]
            .as_str()
            .unwrap()
            .contains("Use after: debug_start")
    );
    assert!(
        cont["description"]
            .as_str()
            .unwrap()
            .contains("E_NO_SESSION")
    );
    assert_eq!(
        tool("breakpoint_clear_project")["annotations"]["destructiveHint"],
        true
    );
}

/// Criterion 6: a script added to a manifest at run time appears with exactly its parameters; `mcp.tool`
/// overrides the name and `mcp.enabled: false` hides one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meta_yaml_added_to_a_manifest_appears_with_exactly_its_parameters() {
    let ws = workspace("manifest");
    let dir = ws.join("meta");
    std::fs::create_dir_all(&dir).unwrap();
    // The built-in metadata, plus new files: the folder form of --debug-manifest.
    let builtin: Value = serde_json::from_str(BUILTIN_MANIFEST).unwrap();
    for (alias, entry) in builtin["scripts"].as_object().unwrap() {
        let yaml = serde_norway::to_string(&entry["metadata"]).unwrap();
        std::fs::write(dir.join(format!("{alias}.meta.yaml")), yaml).unwrap();
    }
    std::fs::write(
        dir.join("custom-probe.meta.yaml"),
        "\
alias: custom.memory-probe
name: Memory Probe
category: custom
description: Read a memory range of the paused program.
params:
  address:
    type: string
    required: true
    pattern: '^0x[0-9a-f]+$'
  length:
    type: number
    integer: true
    min: 1
    max: 4096
    default: 64
  format:
    type: enum
    values: [hex, ascii]
response: query
mcp:
  timeout: 7000
  safety: {read_only: true, idempotent: true, destructive: false}
  llm:
    when_to_use: |
      USE FOR: raw memory
",
    )
    .unwrap();
    std::fs::write(
        dir.join("renamed.meta.yaml"),
        "alias: custom.x\ndescription: Renamed.\nmcp: {tool: custom_renamed}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("hidden.meta.yaml"),
        "alias: custom.hidden\ndescription: Hidden.\nmcp: {enabled: false}\n",
    )
    .unwrap();
    let mut a = args(&ws, BackendChoice::Vscode);
    a.manifest = Some(dir.clone());
    let tools = listed(a).await;
    let probe = tools
        .iter()
        .find(|t| t["name"] == "custom_memory_probe")
        .expect("the new tool is listed");
    assert_eq!(
        probe["inputSchema"],
        json!({"type": "object", "additionalProperties": false, "required": ["address"], "properties": {
            "address": {"type": "string", "pattern": "^0x[0-9a-f]+$"},
            "length": {"type": "integer", "minimum": 1, "maximum": 4096, "default": 64},
            "format": {"type": "string", "enum": ["hex", "ascii"]}}})
    );
    assert_eq!(probe["annotations"]["readOnlyHint"], true);
    assert!(tools.iter().any(|t| t["name"] == "custom_renamed"));
    assert!(!tools.iter().any(|t| t["name"] == "custom_hidden"));
    assert_eq!(tools.len(), 37);
    // The manifest.json form too.
    let mut manifest = builtin.clone();
    manifest["scripts"]["custom.memory-probe"] = json!({"metadata": serde_norway::from_str::<Value>(
        &std::fs::read_to_string(dir.join("custom-probe.meta.yaml")).unwrap()).unwrap(), "scriptRelPath": "custom/probe.js"});
    let file = ws.join("manifest.json");
    std::fs::write(&file, manifest.to_string()).unwrap();
    let from_file = Catalog::load(&file).unwrap();
    let t = from_file.get("custom_memory_probe").unwrap();
    assert_eq!(t.timeout_ms, Some(7000));
    assert_eq!(json!(t.input_schema), probe["inputSchema"]);
}

/// Criterion 3: missing and mistyped parameters are refused before anything runs, naming the parameter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_are_refused_naming_the_parameter() {
    let ws = workspace("params");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let (code, e) = support::code(&c, "breakpoint_set", json!({"path": "target.py"})).await;
    assert_eq!(code, "E_INVALID_ARGUMENT");
    assert_eq!(e["details"]["field"], "line");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("missing required parameter `line`")
    );
    let (_, e) = support::code(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": "forty-two"}),
    )
    .await;
    assert_eq!(e["details"]["field"], "line");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("must be an integer, got a string"),
        "{e}"
    );
    let (_, e) = support::code(&c, "debug_list_variables", json!({"scope": "everything"})).await;
    assert!(e["message"].as_str().unwrap().contains("one of"), "{e}");
    let (_, e) = support::code(&c, "debug_wait_for_hit", json!({"timeoutMs": 1})).await;
    assert_eq!(e["details"]["field"], "timeoutMs");
    let (_, e) = support::code(&c, "debug_status", json!({"bogus": 1})).await;
    assert_eq!(e["details"]["field"], "bogus");
    assert!(
        data(&c, "breakpoint_list", json!({})).await["breakpoints"]
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing was set"
    );
}

/// Local tools answer without a backend; tools the backend cannot serve are unlisted but say what they need.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_tools_and_tools_of_the_other_backend() {
    let ws = workspace("local");
    let c = client(args(&ws, BackendChoice::Auto)).await;
    let status = data(&c, "bridge_status", json!({})).await;
    assert_eq!(status["backend"], "dap");
    assert!(
        status["reason"]
            .as_str()
            .unwrap()
            .contains("no .vsc-bridge"),
        "{status}"
    );
    let docs = data(&c, "docs_list", json!({})).await;
    let id = docs["docs"][0]["id"].as_str().unwrap().to_owned();
    assert!(
        data(&c, "docs_get", json!({"id": id})).await["content"]
            .as_str()
            .unwrap()
            .len()
            > 100
    );
    let (code, e) = support::code(
        &c,
        "editor_goto_line",
        json!({"path": "target.py", "line": 1}),
    )
    .await;
    assert_eq!(code, "E_UNSUPPORTED_BACKEND");
    assert_eq!(e["details"]["needs"], json!(["vscode"]));
    assert!(
        e["hint"]
            .as_str()
            .unwrap()
            .contains("--debug-backend vscode")
    );
}
