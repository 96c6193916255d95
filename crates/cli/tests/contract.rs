//! The contract every bridge keeps, checked on each one the same way (issue 25 item 2): the real binary,
//! started over stdio with no live system behind it.
//!
//! - stdout carries nothing but JSON-RPC 2.0 messages (read raw, line by line: an SDK client would hide a
//!   stray line);
//! - tool schemas are strict (no boolean schemas, no `type` unions, no schema that constrains nothing), every
//!   tool has a title and every input field a description;
//! - with no peer, every tool called with minimal valid arguments (made from its schema) answers a coded error
//!   of the one shape: text `[CODE] message — hint`, and `_meta[ERROR_META_KEY]` = `{code, message, hint,
//!   details}` with the same code, never repeated inside `details`;
//! - `--help` names every flag's environment variable, and every variable follows the one naming rule
//!   (`bridge_core::config::env_name`): a bridge's own flag is `--<bridge>-<name>` and its variable that flag
//!   in upper snake case, an older flag name still works and warns once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bridge_core::BridgeEntry;
use bridge_core::config::follows_rule;
use bridge_core::error::ERROR_META_KEY;
use bridge_core::serve::McpArgs;
use mcp_testkit::within;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-bridges");

/// Each bridge, and the flags that start it over stdio with nothing to talk to (free ports, loopback).
fn bridges(scratch: &std::path::Path) -> Vec<(&'static str, Vec<String>)> {
    let s = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let workspace = scratch.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    vec![
        ("bitburner", s(&["--bitburner-game-port", "0"])),
        (
            "computercraft",
            s(&[
                "--computercraft-link-host",
                "127.0.0.1",
                "--computercraft-link-port",
                "0",
            ]),
        ),
        (
            "debug",
            vec![
                "--debug-backend".into(),
                "vscode".into(),
                "--debug-workspace".into(),
                workspace.display().to_string(),
            ],
        ),
        (
            "minecraft",
            s(&[
                "--minecraft-relay-port",
                "0",
                "--minecraft-auth-token",
                "contract-game-token",
            ]),
        ),
        (
            "sandbox",
            vec![
                "--sandbox-pool-enabled".into(),
                "false".into(),
                "--sandbox-state-dir".into(),
                scratch.join("sandbox-state").display().to_string(),
            ],
        ),
    ]
}

/// Tools that answer without a live system, and why. Everything else must answer a coded error.
const ANSWER_WITHOUT_PEER: &[(&str, &str, &str)] = &[
    ("bitburner", "status", "says whether the game is connected"),
    (
        "computercraft",
        "list_computers",
        "lists the linked computers: none",
    ),
    (
        "computercraft",
        "probe-computers",
        "asks the linked computers: none",
    ),
    ("debug", "bridge_status", "says which backend is up"),
    ("debug", "docs_list", "the bridge's own documents"),
    (
        "minecraft",
        "status",
        "says whether the relay and a game are connected",
    ),
    (
        "sandbox",
        "list_sandboxes",
        "the sandbox bridge is its own peer: sandboxes run on this host",
    ),
    (
        "sandbox",
        "create_sandbox",
        "the sandbox bridge is its own peer: sandboxes run on this host",
    ),
    (
        "sandbox",
        "list_templates",
        "lists the templates built on this host: none",
    ),
];

/// The MCP client side of a child's stdio, read raw.
struct Raw {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    bridge: String,
    stderr: PathBuf,
}

impl Raw {
    fn spawn(bridge: &str, args: &[String], scratch: &std::path::Path) -> Self {
        let mut child = Command::new(BIN)
            .arg(bridge)
            .arg("--stdio")
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", scratch)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(scratch.join(format!("{bridge}.stderr"))).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            stdout,
            next_id: 1,
            bridge: bridge.to_owned(),
            stderr: scratch.join(format!("{bridge}.stderr")),
        }
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Sends a request and reads stdout until its response; every line read on the way must be JSON-RPC 2.0.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let what = format!("{}: the answer to {method}", self.bridge);
        loop {
            let line = within(&what, self.stdout.next_line())
                .await
                .unwrap()
                .unwrap_or_else(|| {
                    let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
                    panic!(
                        "{}: stdout closed before {method} was answered; stderr:\n{log}",
                        self.bridge
                    )
                });
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!(
                    "{}: stdout carried a line that is not JSON ({e}): {line:?}",
                    self.bridge
                )
            });
            assert_eq!(
                message["jsonrpc"], "2.0",
                "{}: stdout carried something else than JSON-RPC 2.0: {line}",
                self.bridge
            );
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                if let Some(error) = message.get("error") {
                    panic!(
                        "{}: {method} failed at the protocol level: {error}",
                        self.bridge
                    );
                }
                return message["result"].clone();
            }
            assert!(
                message.get("method").is_some(),
                "{}: a response to no request of ours: {line}",
                self.bridge
            );
        }
    }

    async fn initialize(&mut self) {
        let result = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "contract", "version": "0"}
                }),
            )
            .await;
        assert!(
            result["serverInfo"].is_object(),
            "{}: {result}",
            self.bridge
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    async fn tools(&mut self) -> Vec<Value> {
        let mut tools = Vec::new();
        let mut cursor: Option<Value> = None;
        loop {
            let params = cursor.map_or_else(|| json!({}), |c| json!({ "cursor": c }));
            let page = self.request("tools/list", params).await;
            tools.extend(page["tools"].as_array().cloned().unwrap_or_default());
            match page.get("nextCursor") {
                Some(c) if !c.is_null() => cursor = Some(c.clone()),
                _ => return tools,
            }
        }
    }

    async fn stop(mut self) {
        drop(self.stdin);
        let _ = within("the bridge to exit", self.child.wait()).await;
    }
}

/// What the MCP Inspector's `--strict` lint objects to, and what the project forbids besides: a boolean where a
/// schema belongs, a `type` array, a schema that constrains nothing.
fn lint(schema: &Value, keyword: Option<&str>, path: &str, found: &mut Vec<String>) {
    const BOOLEAN_VALUED: [&str; 4] = [
        "additionalProperties",
        "unevaluatedProperties",
        "additionalItems",
        "unevaluatedItems",
    ];
    const ONE: [&str; 12] = [
        "items",
        "contains",
        "not",
        "propertyNames",
        "if",
        "then",
        "else",
        "additionalProperties",
        "unevaluatedProperties",
        "additionalItems",
        "unevaluatedItems",
        "contentSchema",
    ];
    const LIST: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
    const MAP: [&str; 5] = [
        "properties",
        "patternProperties",
        "dependentSchemas",
        "$defs",
        "definitions",
    ];
    const CONSTRAINING: [&str; 16] = [
        "type",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "$ref",
        "properties",
        "items",
        "required",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "prefixItems",
    ];
    match schema {
        Value::Bool(_) if !keyword.is_some_and(|k| BOOLEAN_VALUED.contains(&k)) => {
            found.push(format!("{path}: boolean schema"));
        }
        Value::Object(node) => {
            if node.get("type").is_some_and(Value::is_array) {
                found.push(format!("{path}: type union {}", node["type"]));
            }
            if keyword != Some("not") && !node.keys().any(|k| CONSTRAINING.contains(&k.as_str())) {
                found.push(format!("{path}: constrains nothing"));
            }
            for key in MAP {
                if let Some(Value::Object(map)) = node.get(key) {
                    for (name, sub) in map {
                        lint(sub, Some(key), &format!("{path}.{key}.{name}"), found);
                    }
                }
            }
            for key in LIST {
                if let Some(Value::Array(subs)) = node.get(key) {
                    for (i, sub) in subs.iter().enumerate() {
                        lint(sub, Some(key), &format!("{path}.{key}[{i}]"), found);
                    }
                }
            }
            for key in ONE {
                if let Some(sub) = node.get(key) {
                    lint(sub, Some(key), &format!("{path}.{key}"), found);
                }
            }
        }
        _ => {}
    }
}

/// Input properties (at any depth) without a description.
fn undescribed(schema: &Value, path: &str, found: &mut Vec<String>) {
    if let Some(Value::Object(props)) = schema.get("properties") {
        for (name, sub) in props {
            let here = format!("{path}.{name}");
            let described = sub
                .get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| !d.trim().is_empty());
            if !described {
                found.push(here.clone());
            }
            undescribed(sub, &here, found);
        }
    }
    if let Some(items) = schema.get("items") {
        undescribed(items, &format!("{path}[]"), found);
    }
}

/// The smallest value `schema` accepts that we can make without knowing the tool: required fields only.
fn minimal(schema: &Value, root: &Value) -> Value {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let target = reference
            .strip_prefix("#/")
            .map(|p| p.split('/').fold(root, |node, key| &node[key]));
        return target.map_or(Value::Null, |t| minimal(t, root));
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(first) = schema.get(key).and_then(|e| e.get(0)) {
            return minimal(first, root);
        }
    }
    if let Some(Value::Array(all)) = schema.get("allOf") {
        let mut merged = Map::new();
        for part in all {
            if let Value::Object(o) = minimal(part, root) {
                merged.extend(o);
            }
        }
        return Value::Object(merged);
    }
    let number = |default: i64| {
        let low = schema.get("minimum").and_then(Value::as_f64).or_else(|| {
            schema
                .get("exclusiveMinimum")
                .and_then(Value::as_f64)
                .map(|m| m + 1.0)
        });
        low.map_or(default as f64, |m| {
            m.max(default as f64).min(
                schema
                    .get("maximum")
                    .and_then(Value::as_f64)
                    .unwrap_or(f64::MAX),
            )
        })
    };
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => {
            let len = schema
                .get("minLength")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1);
            Value::String("x".repeat(usize::try_from(len).unwrap()))
        }
        Some("integer") => json!(number(1) as i64),
        Some("number") => json!(number(1)),
        Some("boolean") => json!(false),
        Some("null") => Value::Null,
        Some("array") => {
            let n = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = schema.get("items").map_or(json!("x"), |i| minimal(i, root));
            Value::Array((0..n).map(|_| item.clone()).collect())
        }
        _ => {
            let mut object = Map::new();
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for name in required {
                let sub = &schema["properties"][name];
                object.insert(name.to_owned(), minimal(sub, root));
            }
            Value::Object(object)
        }
    }
}

/// Checks the one error shape on a failed call's result; returns its code.
fn coded_error(bridge: &str, tool: &str, result: &Value) -> String {
    let at = format!("{bridge}/{tool}");
    assert_eq!(result["isError"], true, "{at}: not an error: {result}");
    assert!(
        result.get("structuredContent").is_none_or(Value::is_null),
        "{at}: an error carries no structuredContent: {result}"
    );
    let error = &result["_meta"][ERROR_META_KEY];
    let code = error["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{at}: _meta[{ERROR_META_KEY}].code missing: {result}"));
    assert!(
        !code.is_empty()
            && code
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
        "{at}: the code {code:?} is not a CODE"
    );
    for field in ["message", "hint"] {
        assert!(
            error[field].as_str().is_some_and(|s| !s.is_empty()),
            "{at}: _meta error has no {field}: {error}"
        );
    }
    assert!(
        error["details"].is_object(),
        "{at}: details is not an object: {error}"
    );
    assert!(
        error["details"].get("code").is_none(),
        "{at}: the code is at `code`, not repeated in details: {error}"
    );
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with(&format!("[{code}] ")),
        "{at}: the text the model reads starts with the code: {text:?}"
    );
    code.to_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("contract-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Lists `raw`'s tools and calls each one; what breaks the contract goes to `problems`. `allowed(tool)` says
/// whether a tool may answer without a peer.
async fn check_tools(
    raw: &mut Raw,
    label: &str,
    allowed: impl Fn(&str) -> bool,
    problems: &mut Vec<String>,
) {
    raw.initialize().await;
    let tools = raw.tools().await;
    assert!(!tools.is_empty(), "{label}: no tools");
    let mut codes = BTreeMap::new();
    for tool in &tools {
        let name = tool["name"].as_str().unwrap().to_owned();
        let at = format!("{label}/{name}");
        if tool["title"].as_str().is_none_or(|t| t.trim().is_empty()) {
            problems.push(format!("{at}: no title"));
        }
        for key in ["inputSchema", "outputSchema"] {
            if let Some(schema) = tool.get(key) {
                lint(schema, None, &format!("{at}.{key}"), problems);
            }
        }
        undescribed(&tool["inputSchema"], &format!("{at}.inputSchema"), problems);

        let input = &tool["inputSchema"];
        let arguments = minimal(input, input);
        let result = raw
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        if result["isError"] == true {
            let code = coded_error(label, &name, &result);
            codes.insert(name, code);
        } else if !allowed(&name) {
            let text: String = result["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(200)
                .collect();
            problems.push(format!(
                "{at}: answered with no peer, args {arguments}: {text}"
            ));
        }
    }
    eprintln!("{label}: {codes:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_bridge_keeps_the_contract_over_stdio_with_no_peer() {
    let scratch = scratch("stdio");
    let mut problems = Vec::new();
    for (bridge, args) in bridges(&scratch) {
        let mut raw = Raw::spawn(bridge, &args, &scratch);
        let allowed = |tool: &str| {
            ANSWER_WITHOUT_PEER
                .iter()
                .any(|(b, t, _)| *b == bridge && *t == tool)
        };
        check_tools(&mut raw, bridge, allowed, &mut problems).await;
        raw.stop().await;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The same through `serve` with every bridge mounted: the core's mount keeps the shape (tools are named
/// `<bridge>_<tool>` there).
#[tokio::test(flavor = "multi_thread")]
async fn serve_with_every_bridge_keeps_the_contract_too() {
    let scratch = scratch("serve");
    let mut args = Vec::new();
    for (bridge, own) in bridges(&scratch) {
        args.extend(["--bridge".to_owned(), bridge.to_owned()]);
        args.extend(own);
    }
    let mut raw = Raw::spawn("serve", &args, &scratch);
    let allowed = |tool: &str| {
        ANSWER_WITHOUT_PEER
            .iter()
            .any(|(b, t, _)| tool == format!("{b}_{t}"))
    };
    let mut problems = Vec::new();
    check_tools(&mut raw, "serve", allowed, &mut problems).await;
    raw.stop().await;
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A command's flags as clap knows them: `(long, env, repeatable, id)`, subcommands included.
fn flags(command: &clap::Command, out: &mut Vec<(String, Option<String>, bool, String, String)>) {
    for arg in command.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let repeatable = matches!(arg.get_action(), clap::ArgAction::Append)
            || arg.get_value_delimiter().is_some();
        out.push((
            long.to_owned(),
            arg.get_env().map(|e| e.to_string_lossy().into_owned()),
            repeatable,
            arg.get_id().to_string(),
            command.get_name().to_owned(),
        ));
    }
    for sub in command.get_subcommands() {
        flags(sub, out);
    }
}

fn model<B: BridgeEntry>() -> clap::Command {
    <B::Command as clap::Args>::augment_args(clap::Command::new(B::NAME))
}

fn check_names<B: BridgeEntry>(problems: &mut Vec<String>) -> BTreeSet<String> {
    let mcp_ids: BTreeSet<String> = <McpArgs as clap::Args>::augment_args(clap::Command::new("x"))
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect();
    let mut all = Vec::new();
    flags(&model::<B>(), &mut all);
    let mut envs = BTreeSet::new();
    for (long, env, repeatable, id, command) in all {
        let top = command == B::NAME;
        let Some(env) = env else {
            // The transport switches have MCP_TRANSPORT; a sub-subcommand's one-shot options need none.
            if top && !["http", "stdio"].contains(&long.as_str()) {
                problems.push(format!("{}: --{long} has no environment variable", B::NAME));
            }
            continue;
        };
        let mcp = mcp_ids.contains(&id);
        let prefix = if mcp { "MCP" } else { B::NAME };
        // The bridge's own flags start with its name, so that mounted side by side in `serve` no two can
        // collide; its commands that are not MCP servers (`bitburner push`, `debug host`) keep their names.
        if top && !mcp && !long.starts_with(&format!("{}-", B::NAME)) {
            problems.push(format!(
                "{}: --{long} does not start with --{}-",
                B::NAME,
                B::NAME
            ));
        }
        if !follows_rule(prefix, &long, &env, repeatable) {
            problems.push(format!(
                "{}: --{long} reads {env}, the rule gives {}",
                B::NAME,
                bridge_core::config::env_name(prefix, &long)
            ));
        }
        envs.insert(env);
    }
    for (new, old) in B::ENV_ALIASES {
        if !envs.contains(*new) {
            problems.push(format!(
                "{}: ENV_ALIASES names {new} (for {old}), which no flag reads",
                B::NAME
            ));
        }
    }
    envs
}

/// `mcp-bridges <bridge> --help`'s `[env: NAME...]` mentions.
fn help_envs(args: &[&str]) -> BTreeSet<String> {
    let out = std::process::Command::new(BIN)
        .args(args)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?} --help failed");
    let text = String::from_utf8_lossy(&out.stdout);
    text.match_indices("[env: ")
        .map(|(i, _)| {
            text[i + 6..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn every_variable_follows_the_rule_and_help_names_them_all() {
    let mut problems = Vec::new();
    let mut every = BTreeSet::new();
    let per_bridge: Vec<(&str, BTreeSet<String>, clap::Command)> = vec![
        (
            "bitburner",
            check_names::<bridge_bitburner::Bitburner>(&mut problems),
            model::<bridge_bitburner::Bitburner>(),
        ),
        (
            "computercraft",
            check_names::<bridge_computercraft::ComputerCraft>(&mut problems),
            model::<bridge_computercraft::ComputerCraft>(),
        ),
        (
            "debug",
            check_names::<bridge_debug::Debug>(&mut problems),
            model::<bridge_debug::Debug>(),
        ),
        (
            "minecraft",
            check_names::<bridge_minecraft::Minecraft>(&mut problems),
            model::<bridge_minecraft::Minecraft>(),
        ),
        (
            "sandbox",
            check_names::<bridge_sandbox::Sandbox>(&mut problems),
            model::<bridge_sandbox::Sandbox>(),
        ),
    ];
    for (bridge, envs, command) in per_bridge {
        // The bridge's own help (its sub-subcommands have theirs) names every variable of its top level.
        let shown = help_envs(&[bridge]);
        for arg in command.get_arguments() {
            if let Some(env) = arg.get_env().map(|e| e.to_string_lossy().into_owned())
                && !shown.contains(&env)
            {
                problems.push(format!("{bridge} --help does not name {env}"));
            }
        }
        every.extend(envs);
    }
    // `serve` mounts them all: nothing there that no bridge (or the MCP side) has.
    for env in help_envs(&["serve"]) {
        if !every.contains(&env) && !env.starts_with("MCP_") {
            problems.push(format!("serve --help names {env}, which no bridge reads"));
        }
    }
    for (new, old) in McpArgs::ENV_ALIASES {
        if !every.contains(*new) {
            problems.push(format!(
                "McpArgs::ENV_ALIASES names {new} (for {old}), which no flag reads"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// An older name still works and says once that it is deprecated.
#[test]
fn an_older_duration_flag_works_and_warns_once() {
    let out = std::process::Command::new(BIN)
        .args(["bitburner", "--rpc-timeout-ms", "0"])
        .env_clear()
        .env("BITBURNER_PING_INTERVAL_MS", "0")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.matches("--rpc-timeout-ms is deprecated").count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches("BITBURNER_PING_INTERVAL_MS is deprecated")
            .count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("(--bitburner-rpc-timeout) must be from 1ms to 10m"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

/// Each bridge's flags under their names from before the prefix rule, with what they are now: every one
/// parses and says once on stderr which flag to use instead.
#[test]
fn older_flag_names_work_and_warn_once_each() {
    /// A bridge, the command line with older names, and each older name with the one it now has.
    type Case<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        (
            "bitburner",
            &[
                "--game-port",
                "0",
                "--save-dir",
                ".",
                "--connect-wait",
                "0s",
            ],
            &[
                ("--game-port", "--bitburner-game-port"),
                ("--save-dir", "--bitburner-save-dir"),
                ("--connect-wait", "--bitburner-connect-wait"),
            ],
        ),
        (
            "computercraft",
            &["--stdio", "--link-host", "127.0.0.1", "--link-port", "0"],
            &[
                ("--link-host", "--computercraft-link-host"),
                ("--link-port", "--computercraft-link-port"),
            ],
        ),
        (
            "debug",
            &[
                "--backend",
                "vscode",
                "--workspace",
                ".",
                "--allow-launch-anywhere",
                "--bridge-dir",
                "./.vsc-bridge",
            ],
            &[
                ("--backend", "--debug-backend"),
                ("--workspace", "--debug-workspace"),
                ("--allow-launch-anywhere", "--debug-allow-launch-anywhere"),
                ("--bridge-dir", "--debug-bridge-dir"),
            ],
        ),
        (
            "minecraft",
            &[
                "--relay-port",
                "0",
                "--client-id",
                "contract",
                "--minecraft-auth-token",
                "contract-game-token",
            ],
            &[
                ("--relay-port", "--minecraft-relay-port"),
                ("--client-id", "--minecraft-client-id"),
            ],
        ),
    ];
    for (bridge, args, renamed) in cases {
        let dir = scratch(&format!("older-{bridge}"));
        let out = std::process::Command::new(BIN)
            .arg(bridge)
            .args(*args)
            .current_dir(&dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // stdin at its end: the bridge served stdio, saw no client and stopped, with every flag accepted.
        assert!(out.status.success(), "{bridge}: {stderr}");
        for (old, new) in *renamed {
            assert_eq!(
                stderr
                    .matches(&format!(
                        "{old} is deprecated and will be removed: use {new} ("
                    ))
                    .count(),
                1,
                "{bridge} {old}: {stderr}"
            );
        }
        assert_eq!(
            stderr.matches("is deprecated").count(),
            renamed.len(),
            "{bridge}: {stderr}"
        );
    }
}
