//! Templates: named root file systems built ahead of time by `mcp-bridges sandbox template build`, each the
//! host's own root (its /usr, /etc/alternatives, ... hard-linked, so it costs no copy) with Python packages
//! installed by pip into the /usr/local site directory the sandbox's `python3` already searches. A template
//! is then an image like `--sandbox-image` ones (`template:NAME` in `Settings::images`): mounted read-only as
//! the sandbox's root, kept warm per template by the pool (the image is part of the pool's key), and needing
//! no PYTHONPATH, so execute_code, run_command, start_process and run_code all import its packages.
//!
//! A build happens in `templates/.build-NAME-PID` beside its final place and is renamed there at the end;
//! a failed build removes that directory, leaving nothing.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// How a template's image is named among `Settings::images`; `--sandbox-image` names cannot contain ':'.
pub const PREFIX: &str = "template:";
/// The subdirectory of the state dir that holds the templates.
pub const DIR: &str = "templates";
const MANIFEST: &str = "manifest.json";
/// Packages one build may name.
pub const MAX_PACKAGES: usize = 64;
/// The host's paths a template's root carries (what a sandbox's root is mirrored from: `/bin` and the
/// `/lib*` links or directories, and `Settings::ro_binds`).
const ROOT_PATHS: [&str; 10] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ssl/certs",
];

/// `mcp-bridges sandbox <command>`: without one, the MCP server.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum SandboxSub {
    /// Templates: root file systems with packages installed, for `create_sandbox {template}`.
    #[command(subcommand)]
    Template(TemplateCommand),
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum TemplateCommand {
    /// Build template NAME in <state dir>/templates/NAME: the host's root (hard-linked) plus the --pip
    /// packages installed with the host's /usr/bin/python3 -m pip. The bridge lists templates at start.
    Build {
        /// 1 to 32 of a-z, 0-9, - and _.
        name: String,
        /// A pip requirement (pin it: `numpy==2.1.3`). Repeatable.
        #[arg(long = "pip", required = true)]
        pip: Vec<String>,
        /// The root the template starts from; only `host` (this machine's) is supported.
        #[arg(long, default_value = crate::config::HOST_IMAGE)]
        from: String,
    },
    /// The built templates with their packages and sizes, as JSON.
    List,
}

/// What a built template holds, written beside it as manifest.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Manifest {
    /// The template's name, as create_sandbox's `template` takes it.
    pub name: String,
    /// The pip requirements it was built from, as given.
    pub packages: Vec<String>,
    /// Bytes of the installed packages (the hard-linked host files are not counted: they take no space).
    pub size_bytes: u64,
    /// When it was built (RFC 3339, UTC).
    pub built_at: String,
    /// The directory inside the sandbox the packages are in (on `python3`'s own path).
    pub site_packages: String,
    /// The root it was built from (`host`).
    pub from: String,
}

/// A template found in the state dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub manifest: Manifest,
    /// The root file system a sandbox of this template gets.
    pub root: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("{field}: {why}")]
    Invalid { field: &'static str, why: String },
    #[error("template {0:?} exists already ({1}); remove that directory to rebuild it")]
    Exists(String, PathBuf),
    #[error(
        "hard-linking {path} into {into} failed: {why}. A template hard-links the host's files instead of \
         copying them: the state dir (SANDBOX_STATE_DIR) must be on the same file system as /usr, and a \
         builder other than root may be refused by fs.protected_hardlinks"
    )]
    Link {
        path: String,
        into: PathBuf,
        why: String,
    },
    #[error("pip could not install {packages}: {why}")]
    Pip { packages: String, why: String },
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TemplateError + '_ {
    move |e| TemplateError::Io(path.to_path_buf(), e)
}

/// The rule of `--sandbox-image` names.
pub fn check_name(name: &str) -> Result<(), TemplateError> {
    let valid = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if valid {
        Ok(())
    } else {
        Err(TemplateError::Invalid {
            field: "name",
            why: format!("{name:?}: a template name is 1 to 32 of a-z, 0-9, - and _"),
        })
    }
}

fn check_packages(packages: &[String]) -> Result<(), TemplateError> {
    let bad = |why: String| TemplateError::Invalid { field: "pip", why };
    if packages.is_empty() || packages.len() > MAX_PACKAGES {
        return Err(bad(format!(
            "{} packages; a template has 1 to {MAX_PACKAGES}",
            packages.len()
        )));
    }
    for p in packages {
        // A requirement, never an option pip would read (`--index-url ...`, `-r file`).
        if p.is_empty() || p.starts_with('-') || p.chars().any(char::is_whitespace) {
            return Err(bad(format!(
                "{p:?} is not a requirement such as `six==1.16.0`"
            )));
        }
    }
    Ok(())
}

pub fn templates_dir(state_dir: &Path) -> PathBuf {
    state_dir.join(DIR)
}

/// The templates built in `state_dir`, by name. A directory without a readable manifest (a build under way,
/// or a damaged one) is skipped.
pub fn load_all(state_dir: &Path) -> Vec<Template> {
    let Ok(entries) = std::fs::read_dir(templates_dir(state_dir)) else {
        return Vec::new();
    };
    let mut found: Vec<Template> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| {
            let dir = e.path();
            let text = std::fs::read(dir.join(MANIFEST)).ok()?;
            let manifest: Manifest = serde_json::from_slice(&text).ok()?;
            let root = dir.join("root");
            (check_name(&manifest.name).is_ok()
                && e.file_name() == manifest.name.as_str()
                && root.join("usr").is_dir())
            .then_some(Template { manifest, root })
        })
        .collect();
    found.sort_by(|a, b| a.manifest.name.cmp(&b.manifest.name));
    found
}

/// What one build asks for.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    pub name: String,
    pub packages: Vec<String>,
    /// The Python whose pip installs (the sandbox's own `python3`).
    pub python: PathBuf,
    /// Extra environment for pip (e.g. PIP_CERT, PIP_INDEX_URL).
    pub env: Vec<(String, String)>,
}

impl BuildRequest {
    pub fn new(name: &str, packages: &[&str]) -> Self {
        Self {
            name: name.to_owned(),
            packages: packages.iter().map(|p| (*p).to_owned()).collect(),
            python: PathBuf::from("/usr/bin/python3"),
            env: Vec::new(),
        }
    }
}

/// Removes a build directory unless the build finished.
struct Scratch(Option<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Builds template `req.name` in `state_dir` (blocking: it runs cp and pip). Atomic: the template appears
/// complete or not at all.
pub fn build(state_dir: &Path, req: &BuildRequest) -> Result<Template, TemplateError> {
    check_name(&req.name)?;
    check_packages(&req.packages)?;
    let all = templates_dir(state_dir);
    let dir = all.join(&req.name);
    if dir.symlink_metadata().is_ok() {
        return Err(TemplateError::Exists(req.name.clone(), dir));
    }
    std::fs::create_dir_all(&all).map_err(io(&all))?;
    let work = all.join(format!(".build-{}-{}", req.name, std::process::id()));
    if work.symlink_metadata().is_ok() {
        std::fs::remove_dir_all(&work).map_err(io(&work))?;
    }
    std::fs::create_dir(&work).map_err(io(&work))?;
    let mut scratch = Scratch(Some(work.clone()));
    let root = work.join("root");
    for path in ROOT_PATHS {
        let host = Path::new(path);
        if host.symlink_metadata().is_err() {
            continue;
        }
        let to = root.join(&path[1..]);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let out = Command::new("cp")
            .args(["-a", "--link", "--no-target-directory"])
            .arg(host)
            .arg(&to)
            .output()
            .map_err(io(Path::new("cp")))?;
        if !out.status.success() {
            return Err(TemplateError::Link {
                path: path.to_owned(),
                into: work.clone(),
                why: tail(&out.stderr),
            });
        }
    }
    let site = site_dir(&req.python)?;
    let packages = work.join("packages");
    let out = Command::new(&req.python)
        .args([
            "-m",
            "pip",
            "install",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            "--no-input",
            "--target",
        ])
        .arg(&packages)
        .args(&req.packages)
        .envs(req.env.iter().map(|(k, v)| (k, v)))
        .output()
        .map_err(io(&req.python))?;
    if !out.status.success() {
        return Err(TemplateError::Pip {
            packages: req.packages.join(" "),
            why: tail(&out.stderr),
        });
    }
    let size_bytes = du(&packages)?;
    // Moved in entry by entry: a rename replaces no file of the host's (the hard links stay untouched).
    let target = root.join(site.trim_start_matches('/'));
    std::fs::create_dir_all(&target).map_err(io(&target))?;
    for e in std::fs::read_dir(&packages).map_err(io(&packages))? {
        let e = e.map_err(io(&packages))?;
        let to = target.join(e.file_name());
        if to.symlink_metadata().is_ok() {
            return Err(TemplateError::Pip {
                packages: req.packages.join(" "),
                why: format!(
                    "{} is already in the host's {site}; a template adds packages, it does not replace \
                     the host's",
                    e.file_name().to_string_lossy()
                ),
            });
        }
        std::fs::rename(e.path(), &to).map_err(io(&to))?;
    }
    std::fs::remove_dir_all(&packages).map_err(io(&packages))?;
    let manifest = Manifest {
        name: req.name.clone(),
        packages: req.packages.clone(),
        size_bytes,
        built_at: crate::time::rfc3339(SystemTime::now()),
        site_packages: site,
        from: crate::config::HOST_IMAGE.into(),
    };
    let text = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| TemplateError::Io(work.join(MANIFEST), std::io::Error::other(e)))?;
    std::fs::write(work.join(MANIFEST), text).map_err(io(&work))?;
    std::fs::rename(&work, &dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::DirectoryNotEmpty | std::io::ErrorKind::AlreadyExists => {
            TemplateError::Exists(req.name.clone(), dir.clone())
        }
        _ => TemplateError::Io(dir.clone(), e),
    })?;
    // Renamed into place: nothing left to remove.
    scratch.0 = None;
    Ok(Template {
        manifest,
        root: dir.join("root"),
    })
}

/// The site directory under /usr/local that `python` searches (Debian: /usr/local/lib/python3.X/dist-packages),
/// which the host's own packages rarely use.
fn site_dir(python: &Path) -> Result<String, TemplateError> {
    let out = Command::new(python)
        .args([
            "-c",
            "import site; print(next((p for p in site.getsitepackages() if p.startswith('/usr/local/')), ''))",
        ])
        .output()
        .map_err(io(python))?;
    let site = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || site.is_empty() {
        return Err(TemplateError::Invalid {
            field: "python",
            why: format!(
                "{} names no site directory under /usr/local: {}",
                python.display(),
                tail(&out.stderr)
            ),
        });
    }
    Ok(site)
}

/// Bytes of the files under `dir` (links not followed).
fn du(dir: &Path) -> Result<u64, TemplateError> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(io(&d))? {
            let e = e.map_err(io(&d))?;
            let meta = e.path().symlink_metadata().map_err(io(&e.path()))?;
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(6)..].join("\n")
}

/// Runs `mcp-bridges sandbox template ...`.
pub fn run(state_dir: &Path, command: &TemplateCommand) -> Result<(), TemplateError> {
    match command {
        TemplateCommand::Build { name, pip, from } => {
            if from != crate::config::HOST_IMAGE {
                return Err(TemplateError::Invalid {
                    field: "from",
                    why: format!(
                        "{from:?}: a template is built from `{}` only",
                        crate::config::HOST_IMAGE
                    ),
                });
            }
            let packages: Vec<&str> = pip.iter().map(String::as_str).collect();
            let t = build(state_dir, &BuildRequest::new(name, &packages))?;
            println!(
                "{}",
                serde_json::to_string_pretty(&t.manifest).unwrap_or_default()
            );
            Ok(())
        }
        TemplateCommand::List => {
            let all: Vec<Manifest> = load_all(state_dir)
                .into_iter()
                .map(|t| t.manifest)
                .collect();
            println!("{}", serde_json::to_string_pretty(&all).unwrap_or_default());
            Ok(())
        }
    }
}
