//! What a launch configuration runs besides its program. Every adapter takes fields that run code or commands
//! of their own (an attack run ran `id` as the bridge's user through each of these, with the default policy):
//! debugpy's `code`, `module`, `pythonArgs` and `sudo`, lldb-dap's `*Commands`, js-debug's `runtimeArgs`,
//! delve's `buildFlags` (`-toolexec`) and `dlvFlags`, and environment variables through which a loader or an
//! interpreter runs what they name. Outside `--debug-allow-launch-anywhere` they are judged as a program is:
//! refused, naming the field, unless what they run is inside the workspace or the allow-list.

use super::{inside, refused};
use crate::envelope::ScriptError;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Fields that carry code or a command line of their own: refused whatever they hold.
const RUNS_WHAT_IT_HOLDS: &[&str] = &[
    "code",
    "sudo",
    "runtimeArgs",
    "buildFlags",
    "dlvFlags",
    "envFile",
];
/// lldb-dap's `initCommands`, `preRunCommands`, `launchCommands`, `attachCommands`, `stopCommands`,
/// `exitCommands`, `terminateCommands`, ...: lldb commands, `platform shell` and `script` among them.
const COMMANDS_SUFFIX: &str = "Commands";
/// Variables through which the dynamic loader, an interpreter or a tool the program starts runs code or a
/// program they name: `NODE_OPTIONS` takes `--import=data:...`, `GOFLAGS` `-toolexec`, `PYTHONWARNINGS` imports
/// the module a warning category names (`antigravity` then runs `$BROWSER`: a review's proof), `PYTHONBREAKPOINT`
/// names a callable, `CC` and `GOTOOLCHAIN` are what `go build` runs. A list of the known ways, not a proof that
/// no other exists: `envFile` is refused above, as its variables are not seen here.
const CODE_ENV: &[&str] = &[
    "NODE_OPTIONS",
    "PYTHONSTARTUP",
    "PYTHONWARNINGS",
    "PYTHONBREAKPOINT",
    "PYTHONHOME",
    "PYTHONINSPECT",
    "BROWSER",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "BASH_ENV",
    "ENV",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "PROMPT_COMMAND",
    "GOFLAGS",
    "GOENV",
    "GOTOOLCHAIN",
    "CC",
    "CXX",
    "PERL5OPT",
    "RUBYOPT",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "GCONV_PATH",
];
/// Prefixes of such variables: the loader's (`LD_PRELOAD`, `LD_AUDIT`; `LD_LIBRARY_PATH` is let through),
/// git's configuration (`core.fsmonitor` runs a command), bash's exported functions, cgo's flags.
const CODE_ENV_PREFIXES: &[&str] = &["LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_", "CGO_"];

/// Python options that run nothing: `pythonArgs` may hold these (and `-X ...`); `-c` and `-m` run code, and `-W`
/// imports the module a warning category names.
const SAFE_PYTHON_FLAGS: &[&str] = &[
    "-B", "-E", "-I", "-O", "-OO", "-P", "-R", "-S", "-b", "-bb", "-d", "-q", "-s", "-u", "-v",
    "-vv",
];

/// Refuses what `config` runs besides its program, unless inside `roots` (a `module`).
pub(super) fn check(
    config: &Value,
    roots: &[PathBuf],
    base: &Path,
    workspace: &Path,
) -> Result<(), ScriptError> {
    let Some(fields) = config.as_object() else {
        return Ok(());
    };
    for (key, value) in fields {
        let holds_nothing = value.is_null()
            || value == &Value::Bool(false)
            || value.as_array().is_some_and(Vec::is_empty)
            || value.as_str() == Some("");
        if !holds_nothing
            && (RUNS_WHAT_IT_HOLDS.contains(&key.as_str()) || key.ends_with(COMMANDS_SUFFIX))
        {
            return Err(runs(key, "runs code or commands of its own"));
        }
    }
    if let Some(args) = config.get("pythonArgs")
        && !python_args_run_nothing(args)
    {
        return Err(runs(
            "pythonArgs",
            "holds an option that runs code (only -X ... and flags such as -B, -u, -O are taken)",
        ));
    }
    if let Some(module) = config.get("module") {
        let Some(name) = module.as_str() else {
            return Err(runs("module", "is not a module name"));
        };
        module_inside(name, roots, base, workspace)?;
        module_found_from_cwd(config)?;
    }
    for name in env_names(config.get("env")) {
        let by_prefix = CODE_ENV_PREFIXES.iter().any(|p| name.starts_with(p));
        if CODE_ENV.contains(&name.as_str()) || (by_prefix && name != "LD_LIBRARY_PATH") {
            return Err(refused(
                format!("`env.{name}` makes a loader or an interpreter run code it names"),
                json!({"field": format!("env.{name}")}),
            ));
        }
    }
    Ok(())
}

/// Whether `pythonArgs` holds only options that run nothing: [`SAFE_PYTHON_FLAGS`] and `-X` options (`-Xdev`, or
/// `-X` then its value).
fn python_args_run_nothing(args: &Value) -> bool {
    let Some(args) = args.as_array() else {
        return false;
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let Some(arg) = arg.as_str() else {
            return false;
        };
        let safe = match arg {
            "-X" => args
                .next()
                .and_then(Value::as_str)
                .is_some_and(|value| !value.starts_with('-')),
            _ => SAFE_PYTHON_FLAGS.contains(&arg) || (arg.starts_with("-X") && arg.len() > 2),
        };
        if !safe {
            return false;
        }
    }
    true
}

/// A `module` runs when it is the workspace's (or an allowed directory's): `a.b` as `a/b.py`, `a/b/__main__.py`
/// or `a/b/__init__.py` under `base`; any other (`http.server`) is a program outside it.
fn module_inside(
    name: &str,
    roots: &[PathBuf],
    base: &Path,
    workspace: &Path,
) -> Result<(), ScriptError> {
    let valid = !name.is_empty()
        && name
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_'));
    if !valid {
        return Err(runs("module", "is not a module name"));
    }
    // Python takes a module it has already loaded, a built-in or a frozen one before it searches `cwd`: under
    // debugpy's launcher, `runpy`, `json` or `threading` are loaded, and `-m runpy` ran the standard library's
    // whatever the workspace held (a review's finding, checked on CPython 3.11).
    let top = name.split('.').next().unwrap_or(name);
    if python_owns(top) {
        return Err(refused(
            format!(
                "`module` {name} is named like Python's own module {top}, which Python runs instead of the \
                 workspace's; launch the file as `program`"
            ),
            json!({"field": "module", "module": name}),
        ));
    }
    let path: PathBuf = name.split('.').collect();
    let candidates = [
        path.with_extension("py"),
        path.join("__main__.py"),
        path.join("__init__.py"),
    ];
    match candidates.iter().find(|c| base.join(c).is_file()) {
        Some(found) => inside(roots, "module", found, base, workspace).map(drop),
        None => Err(refused(
            format!(
                "`module` {name} is not a module of the workspace ({} has no {}.py or {}/__main__.py); an installed module is a program outside it",
                base.display(),
                path.display(),
                path.display()
            ),
            json!({"field": "module", "module": name}),
        )),
    }
}

/// Whether Python may find `top` (a module's top-level name) before the workspace: a standard library module
/// or debugpy's own, which its launcher has loaded.
fn python_owns(top: &str) -> bool {
    const STDLIB: &str = include_str!("python_stdlib.txt");
    let debugger = ["debugpy", "pydevd", "_pydev", "pydev"]
        .iter()
        .any(|p| top.starts_with(p));
    debugger
        || STDLIB
            .lines()
            .filter(|l| !l.starts_with('#'))
            .any(|l| l == top)
}

/// A `module` is judged where Python finds it first, in `cwd`; `-P` and `-I` (and `PYTHONSAFEPATH`) drop `cwd`
/// from the search, so an installed module of the same name would run instead of the one judged.
fn module_found_from_cwd(config: &Value) -> Result<(), ScriptError> {
    let args = config.get("pythonArgs").and_then(Value::as_array);
    if let Some(flag) = args
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|a| matches!(*a, "-P" | "-I"))
    {
        return Err(runs(
            "pythonArgs",
            &format!(
                "holds {flag}, with which Python no longer finds `module` in `cwd` but an installed module of the name"
            ),
        ));
    }
    if env_names(config.get("env"))
        .iter()
        .any(|n| n == "PYTHONSAFEPATH")
    {
        return Err(refused(
            "`env.PYTHONSAFEPATH` makes Python look for `module` outside `cwd`, where it was judged".into(),
            json!({"field": "env.PYTHONSAFEPATH"}),
        ));
    }
    Ok(())
}

/// Refuses a configuration that sets the variable the bridge tags its processes with ([`super::super::reap`]):
/// with it cleared or changed, what the program starts would outlive its session. Whatever the policy.
pub(super) fn bridge_env(config: &Value) -> Result<(), ScriptError> {
    let tag = super::super::reap::TAG_VAR;
    if env_names(config.get("env")).iter().any(|n| n == tag) {
        return Err(ScriptError::new(
            "E_INVALID_PARAMS",
            format!(
                "`env.{tag}` is the bridge's own: it finds what a session started by it, to end it"
            ),
        )
        .hint(format!("Remove {tag} from the configuration's env"))
        .details(json!({"field": format!("env.{tag}")})));
    }
    Ok(())
}

/// The names a configuration's `env` sets: an object's keys, or lldb-dap's `["NAME=value", ...]`.
fn env_names(env: Option<&Value>) -> Vec<String> {
    match env {
        Some(Value::Object(map)) => map.keys().cloned().collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|s| s.split_once('=').map_or(s, |(name, _)| name).to_owned())
            .collect(),
        _ => Vec::new(),
    }
}

fn runs(key: &str, why: &str) -> ScriptError {
    refused(
        format!(
            "`{key}` {why}: only the configuration's program runs without {}",
            super::ANYWHERE_FLAG
        ),
        json!({"field": key}),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn judged(config: Value) -> Result<(), ScriptError> {
        let ws = std::env::temp_dir().join(format!("policy-code-{}", std::process::id()));
        std::fs::create_dir_all(ws.join("pkg")).unwrap();
        // Decoys: the workspace's own files named like the standard library's and debugpy's modules.
        std::fs::write(ws.join("runpy.py"), "").unwrap();
        std::fs::create_dir_all(ws.join("json")).unwrap();
        std::fs::write(ws.join("json/tool.py"), "").unwrap();
        std::fs::write(ws.join("debugpy.py"), "").unwrap();
        std::fs::write(ws.join("pkg/__main__.py"), "").unwrap();
        std::fs::write(ws.join("tool.py"), "").unwrap();
        let ws = ws.canonicalize().unwrap();
        check(&config, std::slice::from_ref(&ws), &ws, &ws)
    }

    fn refused_field(config: Value) -> String {
        let e = judged(config.clone()).unwrap_err();
        assert_eq!(e.code, "E_LAUNCH_REFUSED", "{config}");
        e.details["field"].as_str().unwrap().to_owned()
    }

    #[test]
    fn fields_that_run_code_of_their_own_are_refused_naming_the_field() {
        for (config, field) in [
            (json!({"code": "import os"}), "code"),
            (json!({"sudo": true}), "sudo"),
            (
                json!({"initCommands": ["platform shell id"]}),
                "initCommands",
            ),
            (
                json!({"preRunCommands": ["script import os"]}),
                "preRunCommands",
            ),
            (
                json!({"launchCommands": ["process launch"]}),
                "launchCommands",
            ),
            (json!({"runtimeArgs": ["-e", "1"]}), "runtimeArgs"),
            (json!({"buildFlags": "-toolexec=/x"}), "buildFlags"),
            (json!({"dlvFlags": ["--init=/x"]}), "dlvFlags"),
            (json!({"envFile": "/x/.env"}), "envFile"),
            (json!({"pythonArgs": ["-c", "import os"]}), "pythonArgs"),
            (json!({"pythonArgs": ["-W", "ignore::x.Y"]}), "pythonArgs"),
            (json!({"module": "http.server"}), "module"),
            (json!({"module": "../x"}), "module"),
            (json!({"env": {"LD_PRELOAD": "/x.so"}}), "env.LD_PRELOAD"),
            (
                json!({"env": ["NODE_OPTIONS=--import=data:,1"]}),
                "env.NODE_OPTIONS",
            ),
            (json!({"env": {"GOFLAGS": "-toolexec=/x"}}), "env.GOFLAGS"),
            (
                json!({"env": {"PYTHONWARNINGS": "ignore::antigravity.X"}}),
                "env.PYTHONWARNINGS",
            ),
            (
                json!({"env": {"GIT_CONFIG_KEY_0": "core.fsmonitor"}}),
                "env.GIT_CONFIG_KEY_0",
            ),
            (
                json!({"env": {"BASH_FUNC_ls%%": "() { id; }"}}),
                "env.BASH_FUNC_ls%%",
            ),
            (json!({"module": "runpy"}), "module"),
            (json!({"module": "json.tool"}), "module"),
            (json!({"module": "debugpy"}), "module"),
            (json!({"module": "pkg", "pythonArgs": ["-P"]}), "pythonArgs"),
            (json!({"module": "pkg", "pythonArgs": ["-I"]}), "pythonArgs"),
            (
                json!({"module": "pkg", "env": {"PYTHONSAFEPATH": "1"}}),
                "env.PYTHONSAFEPATH",
            ),
        ] {
            assert_eq!(refused_field(config), field);
        }
    }

    #[test]
    fn what_runs_nothing_else_or_is_the_workspaces_passes() {
        for config in [
            json!({"program": "tool.py", "args": ["-c", "x"], "stopOnEntry": true}),
            json!({"pythonArgs": ["-X", "dev"]}),
            json!({"pythonArgs": ["-Xdev", "-u", "-B"]}),
            json!({"module": "pkg"}),
            json!({"module": "tool"}),
            json!({"sudo": false, "initCommands": [], "code": null, "runtimeArgs": [], "buildFlags": ""}),
            json!({"env": {"PYTHONPATH": "src", "LD_LIBRARY_PATH": "lib", "FOO": "1"}}),
            json!({"program": "tool.py", "pythonArgs": ["-I", "-P"], "env": {"PYTHONSAFEPATH": "1"}}),
        ] {
            assert!(judged(config.clone()).is_ok(), "{config}");
        }
    }

    #[test]
    fn the_bridges_tag_variable_is_refused_whatever_the_policy() {
        let tag = crate::dap::reap::TAG_VAR;
        for env in [json!({tag: ""}), json!([format!("{tag}=x")])] {
            let e = bridge_env(&json!({"env": env})).unwrap_err();
            assert_eq!(e.code, "E_INVALID_PARAMS");
            assert_eq!(e.details["field"], format!("env.{tag}"));
        }
        assert!(bridge_env(&json!({"env": {"FOO": "1"}})).is_ok());
    }
}
