//! What `debug_start` may run, and with which environment. The bridge runs as its own user (often root) and
//! holds secrets in its environment (the MCP token), so by default a launch runs only programs inside the
//! workspace (or an allow-listed directory), the adapter and debuggee get a scrubbed environment, and
//! `${env:NAME}` in a launch configuration reads only allow-listed names.

mod code;

use crate::envelope::ScriptError;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use serde_json::{Value, json};
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The environment every adapter (and so every debuggee) gets from the bridge's own, when set; a launch
/// configuration's `env` comes on top.
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "USER", "LOGNAME", "TZ",
];

/// The flag that lets a launch run a program anywhere.
pub const ANYWHERE_FLAG: &str = "--debug-allow-launch-anywhere (DEBUG_ALLOW_LAUNCH_ANYWHERE=true)";

#[derive(Debug, Clone, Default)]
pub struct LaunchPolicy {
    /// Programs anywhere may be launched (and processes attached to).
    pub anywhere: bool,
    /// Directories besides the workspace whose programs may be launched.
    pub allow_dirs: Vec<PathBuf>,
    /// Environment names passed to the adapter and readable by `${env:NAME}`, beside [`BASE_ENV`].
    pub env_allow: Vec<String>,
}

impl LaunchPolicy {
    pub fn env_allowed(&self, name: &str) -> bool {
        BASE_ENV.contains(&name) || self.env_allow.iter().any(|n| n == name)
    }

    /// The scrubbed environment for an adapter process.
    pub fn apply_env(&self, cmd: &mut tokio::process::Command) {
        cmd.env_clear();
        for name in BASE_ENV
            .iter()
            .copied()
            .chain(self.env_allow.iter().map(String::as_str))
        {
            if let Some(v) = std::env::var_os(name) {
                cmd.env(name, v);
            }
        }
    }

    /// Makes `cwd`, `program` and an interpreter path with a `/` (`python`, `pythonPath`, `debugLauncherPython`,
    /// `runtimeExecutable`; an array's first element) absolute, from the configuration's `cwd` (itself from the
    /// workspace), as the policy judges them: debugpy, lldb-dap and js-debug resolve a relative one from the
    /// bridge's own working directory, and would run another program than the one judged (from `/`, a `cwd` of
    /// `tmp` ran `/tmp/x/python`, which any local user may plant: a review's finding).
    pub fn absolute_paths(config: &mut Value, workspace: &Path) {
        let base = match config.get("cwd").and_then(Value::as_str) {
            Some(cwd) => workspace.join(cwd),
            None => workspace.to_path_buf(),
        };
        if let Some(cwd) = config.get_mut("cwd")
            && cwd.is_string()
        {
            *cwd = Value::String(base.display().to_string());
        }
        let absolute = |value: &mut Value, always: bool| {
            if let Some(raw) = value.as_str()
                && Path::new(raw).is_relative()
                && (always || raw.contains('/'))
            {
                *value = Value::String(base.join(raw).display().to_string());
            }
        };
        if let Some(program) = config.get_mut("program") {
            absolute(program, true);
        }
        for key in [
            "python",
            "pythonPath",
            "debugLauncherPython",
            "runtimeExecutable",
        ] {
            match config.get_mut(key) {
                Some(Value::Array(items)) => {
                    if let Some(first) = items.first_mut() {
                        absolute(first, false);
                    }
                }
                Some(value) => absolute(value, false),
                None => {}
            }
        }
    }

    /// Refuses a configuration that would run something outside the workspace and the allow-list, unless the
    /// policy allows anywhere. `program`, and the interpreters a configuration may name (`python`,
    /// `runtimeExecutable`), are checked after symlinks are resolved; `attach` needs the opt-in too. An
    /// interpreter given as a bare name (`node`) is what the adapter finds on PATH: it is judged where the
    /// bridge's PATH (which the adapter gets) and the configuration's `env.PATH`, if any, find it, and refused
    /// when neither does.
    pub fn check(&self, config: &Value, workspace: &Path) -> Result<(), ScriptError> {
        code::bridge_env(config)?;
        if self.anywhere {
            return Ok(());
        }
        if config.get("request").and_then(Value::as_str) == Some("attach") {
            return Err(self.attach_refused("request"));
        }
        let mut roots = vec![canonical(workspace)];
        roots.extend(self.allow_dirs.iter().map(|d| canonical(d)));
        // The adapters resolve a relative `program` (and delve its build) against `cwd`, so `cwd` is judged
        // first and is the base of the others.
        let base = match config.get("cwd").and_then(Value::as_str) {
            Some(cwd) => inside(&roots, "cwd", Path::new(cwd), workspace, workspace)?,
            None => workspace.to_path_buf(),
        };
        // `pythonPath` and `debugLauncherPython` are debugpy's other names for an interpreter.
        for key in [
            "program",
            "python",
            "pythonPath",
            "debugLauncherPython",
            "runtimeExecutable",
        ] {
            let paths: Vec<&str> = match config.get(key) {
                Some(Value::String(s)) => vec![s.as_str()],
                Some(Value::Array(a)) => a.iter().take(1).filter_map(Value::as_str).collect(),
                _ => vec![],
            };
            for raw in paths {
                if key == "program" || raw.contains('/') {
                    inside(&roots, key, Path::new(raw), &base, workspace)?;
                    continue;
                }
                let mut searched = vec![std::env::var_os("PATH").unwrap_or_default()];
                if let Some(own) = config.pointer("/env/PATH").and_then(Value::as_str) {
                    searched.push(own.into());
                }
                for path_var in searched {
                    let Some(found) = on_path(raw, &path_var, &base) else {
                        return Err(refused(
                            format!(
                                "`{key}` `{raw}` is a bare name that PATH ({}) does not find; the adapter would look it up there",
                                path_var.to_string_lossy()
                            ),
                            json!({"field": key, "name": raw}),
                        ));
                    };
                    inside(&roots, key, &found, &base, workspace)?;
                }
            }
        }
        code::check(config, &roots, &base, workspace)
    }

    /// Refuses attaching (`debug_attach`, whose `field` names what the caller gave, or a configuration's
    /// `request: attach`) unless the policy allows anywhere: the allow-list does not open it.
    pub fn attach_allowed(&self, field: &str) -> Result<(), ScriptError> {
        if self.anywhere {
            Ok(())
        } else {
            Err(self.attach_refused(field))
        }
    }

    fn attach_refused(&self, field: &str) -> ScriptError {
        ScriptError::new(
            "E_LAUNCH_REFUSED",
            "attaching reaches a process the bridge did not start, which only the bridge's opt-in allows",
        )
        .hint(format!(
            "Start the bridge with {ANYWHERE_FLAG} to attach, or launch the program with debug_start (inside the workspace)"
        ))
        .details(json!({"field": field, "request": "attach"}))
    }

    /// Where a tool may write a file (`debug_save_variable`): inside the workspace (anywhere with
    /// [`ANYWHERE_FLAG`]), in a directory that exists; the file's own name must not be a symlink or anything but
    /// a regular file. The directory is opened (`O_DIRECTORY|O_NOFOLLOW`) and judged by where that handle really
    /// is (`/proc/self/fd`), and [`OutputFile::write`] writes through the handle, never by path again: a
    /// directory on the way swapped for a link after the check cannot send the file elsewhere.
    pub fn output_path(&self, raw: &str, workspace: &Path) -> Result<OutputFile, ScriptError> {
        let p = Path::new(raw);
        let abs = if p.is_absolute() {
            p.to_path_buf()
        } else {
            workspace.join(p)
        };
        let no_file = || {
            ScriptError::new(
                "E_INVALID_PARAMS",
                format!("outputPath `{raw}` names no file"),
            )
            .details(json!({"field": "outputPath"}))
        };
        let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
            return Err(no_file());
        };
        if name == ".." || name == "." {
            return Err(no_file());
        }
        let not_found = |e: &dyn std::fmt::Display| {
            ScriptError::new(
                "E_FILE_NOT_FOUND",
                format!("outputPath's directory {}: {e}", parent.display()),
            )
            .hint("Write into an existing directory of the workspace")
            .details(json!({"field": "outputPath"}))
        };
        let dir_path = parent.canonicalize().map_err(|e| not_found(&e))?;
        let dir = nix::fcntl::open(
            &dir_path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| not_found(&e))?;
        // Where the handle is, whatever the path says now.
        let real = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd()))
            .map_err(|e| not_found(&e))?;
        let root = canonical(workspace);
        if !self.anywhere && !real.starts_with(&root) {
            return Err(ScriptError::new(
                "E_PATH_REFUSED",
                format!(
                    "outputPath {} is outside the workspace {}",
                    real.join(name).display(),
                    root.display()
                ),
            )
            .hint(format!(
                "Write inside the workspace, or start the bridge with {ANYWHERE_FLAG}"
            ))
            .details(
                json!({"field": "outputPath", "path": real.join(name).display().to_string(),
                "workspace": root.display().to_string()}),
            ));
        }
        let target = real.join(name);
        if let Ok(st) = fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            && SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG
        {
            return Err(ScriptError::new(
                "E_PATH_REFUSED",
                format!(
                    "outputPath {} exists and is not a regular file (a symlink is never followed)",
                    target.display()
                ),
            )
            .hint("Remove it, or write to another name")
            .details(json!({"field": "outputPath", "path": target.display().to_string()})));
        }
        Ok(OutputFile {
            dir,
            name: name.to_owned(),
            path: target,
        })
    }
}

/// A file [`LaunchPolicy::output_path`] allowed: its directory's open handle and its name there.
#[derive(Debug)]
pub struct OutputFile {
    dir: OwnedFd,
    name: OsString,
    path: PathBuf,
}

impl OutputFile {
    /// Where the file is, as judged (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` whole or not at all: a new file beside the name in the judged directory
    /// (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600), renamed over the name (`renameat`: a link planted at the name
    /// is replaced, never followed).
    pub fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        let tmp = format!(
            ".{}.{}.{}.tmp",
            self.name.to_string_lossy(),
            std::process::id(),
            crate::envelope::now_ms()
        );
        let fd = openat(
            &self.dir,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )?;
        let result = std::fs::File::from(fd).write_all(bytes).and_then(|()| {
            Ok(renameat(
                &self.dir,
                tmp.as_str(),
                &self.dir,
                self.name.as_os_str(),
            )?)
        });
        if result.is_err() {
            let _ = unlinkat(&self.dir, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
        }
        result
    }
}

/// The first executable `name` in a PATH value's directories (an empty entry, or a relative one, is `base`'s,
/// as for a process started there).
fn on_path(name: &str, path_var: &OsStr, base: &Path) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .map(|dir| base.join(dir).join(name))
        .find(|c| {
            std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// `raw` (relative to `base`) with its symlinks resolved, refused unless under one of `roots`.
fn inside(
    roots: &[PathBuf],
    key: &str,
    raw: &Path,
    base: &Path,
    workspace: &Path,
) -> Result<PathBuf, ScriptError> {
    let real = resolved(&base.join(raw));
    if let Some(real) = real.filter(|r| roots.iter().any(|root| r.starts_with(root))) {
        return Ok(real);
    }
    let shown = resolved(&base.join(raw)).unwrap_or_else(|| base.join(raw));
    Err(refused(
        format!(
            "`{key}` {} is outside the workspace {} and the launch allow-list",
            shown.display(),
            workspace.display()
        ),
        json!({"field": key, "path": shown.display().to_string(),
            "allowed": roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>()}),
    ))
}

/// `p` with its symlinks resolved. A path that does not exist yet (it may by launch time) is its deepest
/// existing ancestor resolved plus the rest, which may not hold `..`: an adapter that normalises the path
/// lexically (node's `path.resolve`) would climb where `starts_with` did not look. `None` when it does.
fn resolved(p: &Path) -> Option<PathBuf> {
    if let Ok(real) = p.canonicalize() {
        return Some(real);
    }
    let mut rest = Vec::new();
    let mut at = p;
    loop {
        let (Some(parent), Some(name)) = (at.parent(), at.file_name()) else {
            return None;
        };
        // A `..` has no file name: it ends the walk with `None` above.
        rest.push(name);
        if let Ok(real) = parent.canonicalize() {
            return Some(real.join(rest.iter().rev().collect::<PathBuf>()));
        }
        at = parent;
    }
}

fn refused(message: String, details: Value) -> ScriptError {
    ScriptError::new("E_LAUNCH_REFUSED", message)
        .hint(format!(
            "Launch a program inside the workspace, add its directory with --debug-launch-allow DIR (DEBUG_LAUNCH_ALLOW), or start the bridge with {ANYWHERE_FLAG}"
        ))
        .details(details)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_made_absolute_from_the_cwd_the_policy_judged() {
        let ws = Path::new("/ws");
        let mut config = json!({"cwd": "tmp", "program": "a.py", "python": ["x/python", "-u"],
            "runtimeExecutable": "node", "debugLauncherPython": "/usr/bin/python3"});
        LaunchPolicy::absolute_paths(&mut config, ws);
        assert_eq!(config["cwd"], "/ws/tmp");
        assert_eq!(config["program"], "/ws/tmp/a.py");
        assert_eq!(config["python"], json!(["/ws/tmp/x/python", "-u"]));
        // A bare name is PATH's, an absolute path is itself.
        assert_eq!(config["runtimeExecutable"], "node");
        assert_eq!(config["debugLauncherPython"], "/usr/bin/python3");
        let mut config = json!({"program": "t"});
        LaunchPolicy::absolute_paths(&mut config, ws);
        assert_eq!(config, json!({"program": "/ws/t"}));
    }

    #[test]
    fn inside_passes_outside_and_attach_are_refused_unless_allowed() {
        let ws = std::env::temp_dir();
        let p = LaunchPolicy::default();
        assert!(p.check(&json!({"program": "a.py"}), &ws).is_ok());
        let e = p
            .check(&json!({"program": "/usr/bin/env"}), &ws)
            .unwrap_err();
        assert_eq!(e.code, "E_LAUNCH_REFUSED");
        assert!(
            e.hint
                .as_deref()
                .unwrap()
                .contains("--debug-allow-launch-anywhere")
        );
        let e = p
            .check(
                &json!({"program": "a.py", "python": ["/usr/bin/perl"]}),
                &ws,
            )
            .unwrap_err();
        assert_eq!(e.details["field"], "python");
        assert!(
            p.check(&json!({"request": "attach", "processId": 1}), &ws)
                .is_err()
        );
        let allowed = LaunchPolicy {
            allow_dirs: vec!["/usr/bin".into()],
            ..LaunchPolicy::default()
        };
        assert!(
            allowed
                .check(&json!({"program": "/usr/bin/env"}), &ws)
                .is_ok()
        );
        let anywhere = LaunchPolicy {
            anywhere: true,
            ..LaunchPolicy::default()
        };
        assert!(anywhere.check(&json!({"request": "attach"}), &ws).is_ok());
        let e = anywhere
            .check(
                &json!({"program": "a.py", "env": {crate::dap::reap::TAG_VAR: ""}}),
                &ws,
            )
            .unwrap_err();
        assert_eq!(
            e.code, "E_INVALID_PARAMS",
            "the tag is refused whatever the policy"
        );
        assert!(anywhere.attach_allowed("pid").is_ok());
        let e = allowed.attach_allowed("pid").unwrap_err();
        assert_eq!(e.details["field"], "pid");
        assert!(!e.hint.as_deref().unwrap().contains("--debug-launch-allow"));
    }

    /// The adapters resolve a relative `program` against `cwd` (delve builds there, debugpy's launcher runs
    /// there), so a `cwd` outside the workspace ran a program the check had judged inside it.
    #[test]
    fn a_cwd_outside_the_workspace_is_refused_and_relative_programs_resolve_against_it() {
        let ws = std::env::temp_dir().join(format!("policy-cwd-{}", std::process::id()));
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let p = LaunchPolicy::default();
        let e = p
            .check(
                &json!({"type": "go", "program": ".", "cwd": "/usr/bin"}),
                &ws,
            )
            .unwrap_err();
        assert_eq!(e.code, "E_LAUNCH_REFUSED");
        assert_eq!(e.details["field"], "cwd", "{e:?}");
        let e = p
            .check(&json!({"program": "../../usr/bin/env", "cwd": "sub"}), &ws)
            .unwrap_err();
        assert_eq!(e.details["field"], "program", "{e:?}");
        assert!(
            p.check(&json!({"program": "v.py", "cwd": "sub"}), &ws)
                .is_ok()
        );
        let _ = std::fs::remove_dir_all(&ws);
    }

    /// A path that does not exist yet cannot be canonicalized; its `..` were kept and `starts_with` counted
    /// `ws/missing/../../usr/bin/env` as inside, which node's `path.resolve` (js-debug) reads as /usr/bin/env.
    #[test]
    fn a_missing_path_cannot_climb_out_with_dot_dot() {
        let ws = std::env::temp_dir().join(format!("policy-dots-{}", std::process::id()));
        std::fs::create_dir_all(&ws).unwrap();
        let p = LaunchPolicy::default();
        let depth = ws.components().count();
        let climb = format!("missing/{}usr/bin/env", "../".repeat(depth));
        let e = p
            .check(&json!({"type": "pwa-node", "program": climb}), &ws)
            .unwrap_err();
        assert_eq!(e.code, "E_LAUNCH_REFUSED");
        assert_eq!(e.details["field"], "program", "{e:?}");
        let _ = std::fs::remove_dir_all(&ws);
    }

    /// A workspace with a `sub` directory, and a directory outside it, both made fresh for this process.
    fn workspace_and_outside(tag: &str) -> (PathBuf, PathBuf) {
        let ws = std::env::temp_dir().join(format!("policy-{tag}-{}", std::process::id()));
        let outside =
            std::env::temp_dir().join(format!("policy-{tag}-outside-{}", std::process::id()));
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        (ws, outside)
    }

    #[test]
    fn an_output_path_stays_in_the_workspace_and_never_through_a_link() {
        let (ws, outside) = workspace_and_outside("out");
        let p = LaunchPolicy::default();
        let ok = p.output_path("sub/v.json", &ws).unwrap();
        assert!(ok.path().starts_with(ws.canonicalize().unwrap()));
        assert_eq!(
            p.output_path("../x.json", &ws).unwrap_err().code,
            "E_PATH_REFUSED"
        );
        std::os::unix::fs::symlink(&outside, ws.join("out")).unwrap();
        assert_eq!(
            p.output_path("out/x.json", &ws).unwrap_err().code,
            "E_PATH_REFUSED"
        );
        std::os::unix::fs::symlink(outside.join("f"), ws.join("planted.json")).unwrap();
        assert_eq!(
            p.output_path("planted.json", &ws).unwrap_err().code,
            "E_PATH_REFUSED"
        );
        assert_eq!(
            p.output_path("nodir/x.json", &ws).unwrap_err().code,
            "E_FILE_NOT_FOUND"
        );
        let _ = std::fs::remove_dir_all(&ws);
        let _ = std::fs::remove_dir_all(&outside);
    }

    /// The directory was judged by path and written by path: swapped for a link to elsewhere in between, the
    /// file went through the link, outside the workspace.
    #[test]
    fn a_directory_swapped_for_a_link_after_the_check_is_not_followed() {
        let (ws, outside) = workspace_and_outside("swap");
        let p = LaunchPolicy::default();
        let out = p.output_path("sub/v.json", &ws).unwrap();
        std::fs::rename(ws.join("sub"), ws.join("judged")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("sub")).unwrap();
        out.write(b"{}").unwrap();
        assert!(
            !outside.join("v.json").exists(),
            "written through the link swapped in after the check"
        );
        assert_eq!(std::fs::read(ws.join("judged/v.json")).unwrap(), b"{}");
        let _ = std::fs::remove_dir_all(&ws);
        let _ = std::fs::remove_dir_all(&outside);
    }

    /// A bare name (`node`, `python3`) is found by the adapter on PATH, not in the workspace: it was judged as
    /// a file of the workspace (`ws/node`, inside) and passed.
    #[test]
    fn a_bare_interpreter_name_is_judged_where_path_finds_it() {
        let ws = std::env::temp_dir().join(format!("policy-bare-{}", std::process::id()));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("sh"), "").unwrap();
        let p = LaunchPolicy::default();
        for (key, value) in [
            ("runtimeExecutable", json!("sh")),
            ("python", json!(["sh", "-E"])),
        ] {
            let mut config = json!({"program": "a.js"});
            config[key] = value;
            let e = p.check(&config, &ws).unwrap_err();
            assert_eq!(
                (e.code.as_str(), e.details["field"].as_str()),
                ("E_LAUNCH_REFUSED", Some(key)),
                "{e:?}"
            );
        }
        // Where PATH finds it, allowed: it passes.
        let found = on_path("sh", &std::env::var_os("PATH").unwrap(), &ws).unwrap();
        let allowed = LaunchPolicy {
            allow_dirs: vec![found.parent().unwrap().to_path_buf()],
            ..LaunchPolicy::default()
        };
        let config = json!({"program": "a.js", "runtimeExecutable": "sh"});
        assert!(allowed.check(&config, &ws).is_ok());
        let missing = json!({"program": "a.js", "runtimeExecutable": "no-such-interpreter-here"});
        let e = allowed.check(&missing, &ws).unwrap_err();
        assert_eq!(e.details["field"], "runtimeExecutable", "{e:?}");
        let _ = std::fs::remove_dir_all(&ws);
    }
}
