//! export_workspace / import_workspace: a workspace (or a folder of it) as a tar stream in pages, for trees far
//! above write_file's 10 MiB. Export: the tree's metadata comes from `find -printf` inside the sandbox, its
//! files through the agent's `read`, and the archive is written on the host (tar crate) into a file under the
//! state dir, served a page at a time and removed after its last page. Import: pages are appended to a host
//! file under an upload id (nothing reaches the sandbox), and `commit` checks the whole archive on the host
//! (relative paths only, no `..`, no link leaving the target or a path through an archived link, no hard or
//! special links), then streams it into `tar -x` run inside the sandbox as its user, which keeps modes and
//! mtimes. Every buffer is bounded in bytes: a page, the agent's 1 MiB chunks, a 4-chunk queue, and the
//! archive (the workspace's size plus headers).
//!
//! Every file under `<state dir>/transfers/` is either in the map of open transfers or held by an
//! [`Unclaimed`] guard of the call making or consuming it, so a call cut short (cancelled, timed out, its
//! client gone) removes its file. The manager drops a sandbox's transfers with it and sweeps the rest on
//! its reaper's tick; files are named `<bridge pid>-<id>.tar`, so a bridge starting removes a crashed run's
//! and none of another bridge's sharing the state dir.

use crate::manager::Manager;
use bridge_core::{BridgeBuilder, ToolCtx, ToolError, ToolSpec, Validate, check};
use sandbox_agent::protocol::{Body, ExecSpec, MAX_CHUNK_BYTES, Op, Program, b64};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Raw bytes of one page at most (its base64 is 4/3 of it, and a result carries it twice).
const MAX_PAGE_BYTES: usize = 1 << 20;
/// Raw bytes of one page when the call's result cap leaves room for no more: 48 KiB, 64 KiB of base64.
const MIN_PAGE_BYTES: usize = 48 << 10;
/// A transfer nobody touched for this long is dropped with its file.
const TRANSFER_TTL: Duration = Duration::from_secs(15 * 60);
/// Transfers open at once, all sandboxes together.
const MAX_TRANSFERS: usize = 16;
/// Entries an export may hold (the `find` listing is at most 1 MiB as well).
const MAX_ENTRIES: usize = 100_000;
/// Entries left out that a result names, and their JSON's bytes (the rest are counted in `skipped`): every
/// page carries them, beside a page of data sized to the result cap.
const MAX_SKIPPED_NAMED: usize = 20;
const MAX_SKIPPED_NAMED_BYTES: usize = 4 << 10;
const AGENT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExportArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// The folder to export, relative to /workspace (default: all of /workspace). Only on the first call.
    #[serde(default)]
    pub path: Option<String>,
    /// The export to go on with, as the first page returned it; absent: start a new export.
    #[serde(default)]
    pub export_id: Option<String>,
    /// Byte offset in the archive of the page wanted: the previous page's next_offset (default 0).
    #[serde(default)]
    pub offset: Option<u64>,
}
impl Validate for ExportArgs {
    fn validate(&self) -> Result<(), ToolError> {
        if let Some(p) = &self.path {
            relative("path", p)?;
        }
        Ok(())
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExportPage {
    /// Pass back with next_offset for the next page.
    pub export_id: String,
    /// Where this page starts in the archive.
    pub offset: u64,
    /// Raw bytes in this page.
    pub bytes: u64,
    /// This page's bytes of the tar archive, base64.
    pub data: String,
    /// The whole archive's size in bytes.
    pub total_bytes: u64,
    /// Where the next page starts; absent after the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// True on the last page (the export is then forgotten).
    pub done: bool,
    /// Files, folders and symbolic links archived.
    pub entries: u64,
    /// Entries left out: sockets, pipes, devices, and files whose path is not UTF-8.
    pub skipped: u64,
    /// The first entries left out (up to 20, 4 KiB of JSON), each with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped_entries: Vec<SkippedEntry>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SkippedEntry {
    /// Relative to the exported folder; a byte that is not UTF-8 is written `\xNN` and a backslash `\\`.
    pub path: String,
    pub why: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ImportArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// The upload to add to, as the first call returned it; absent: start a new upload.
    #[serde(default)]
    pub upload_id: Option<String>,
    /// Where this chunk goes in the archive: the bytes received so far (default 0). A chunk out of order is
    /// refused and changes nothing.
    #[serde(default)]
    pub offset: Option<u64>,
    /// The next bytes of a tar archive, base64 (at most 1 MiB of bytes a chunk; may be empty with commit).
    #[serde(default)]
    pub data: String,
    /// True on the last chunk: check the archive and unpack it into the sandbox. Before it nothing is
    /// visible in the sandbox.
    #[serde(default)]
    pub commit: bool,
    /// The folder to unpack into, relative to /workspace (default: /workspace itself); made if missing.
    #[serde(default)]
    pub path: Option<String>,
}
impl Validate for ImportArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::max_bytes("data", &self.data, MAX_CHUNK_BYTES.div_ceil(3) * 4)?;
        if let Some(p) = &self.path {
            relative("path", p)?;
        }
        Ok(())
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ImportResult {
    /// Pass back with the next chunk.
    pub upload_id: String,
    /// Bytes of the archive received so far: the next chunk's offset.
    pub received_bytes: u64,
    /// True once the archive was unpacked (after commit).
    pub committed: bool,
    /// With commit: files, folders and links unpacked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entries: Option<u64>,
    /// With commit: where they went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// A relative path under /workspace (a leading `/workspace/` is taken off), without `..`.
fn relative(field: &str, p: &str) -> Result<String, ToolError> {
    let p = p.trim();
    let p = p
        .strip_prefix("/workspace")
        .map_or(p, |r| r.trim_start_matches('/'));
    if p.starts_with('/') {
        return Err(ToolError::invalid_argument(
            field,
            format!("{p:?} must be relative to /workspace"),
        ));
    }
    if Path::new(p)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(ToolError::invalid_argument(
            field,
            format!("{p:?} may not contain `..`"),
        ));
    }
    Ok(p.trim_end_matches('/').to_string())
}

fn under_workspace(rel: &str) -> String {
    if rel.is_empty() || rel == "." {
        "/workspace".into()
    } else {
        format!("/workspace/{rel}")
    }
}

enum Kind {
    Export {
        total: u64,
        entries: u64,
        skipped: u64,
        named: Arc<Vec<SkippedEntry>>,
    },
    Upload {
        received: u64,
        /// Held while a chunk is handled: chunks of one upload are taken one at a time, so a chunk sent
        /// twice at once is refused rather than appended twice.
        turn: Arc<tokio::sync::Mutex<()>>,
    },
}

struct Transfer {
    sandbox: Uuid,
    file: PathBuf,
    touched: Instant,
    kind: Kind,
}

/// The open exports and uploads by id, and the folder of their files; the manager owns it, so its reaper and
/// its destroys reach it.
pub(crate) struct Store {
    open: Mutex<HashMap<Uuid, Transfer>>,
    dir: PathBuf,
}

impl Store {
    /// The store of a bridge whose state dir is `state_dir`; removes what a crashed run left in its folder,
    /// files named with our own pid included when `own_pid_gone` (no transfer of this run exists yet).
    pub(crate) async fn open(state_dir: &Path, own_pid_gone: bool) -> Self {
        let dir = state_dir.join("transfers");
        let cleaning = dir.clone();
        match tokio::task::spawn_blocking(move || remove_leftovers(&cleaning, own_pid_gone)).await {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::warn!(
                files = n,
                "removed transfer files left behind by a crashed run"
            ),
            Ok(Err(why)) => {
                tracing::warn!(dir = %dir.display(), %why, "the transfers folder is not usable; left alone")
            }
            Err(e) => tracing::warn!(error = %e, "cleaning the transfers folder failed"),
        }
        Self {
            open: Mutex::default(),
            dir,
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Transfer>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops transfers of sandboxes not in `live` and transfers untouched past the TTL, with their files.
    pub(crate) fn sweep(&self, live: &[Uuid]) {
        self.remove_where(|t| !live.contains(&t.sandbox) || t.touched.elapsed() > TRANSFER_TTL);
    }

    /// Drops every transfer of sandbox `id`, with its files.
    pub(crate) fn forget_sandbox(&self, id: Uuid) {
        self.remove_where(|t| t.sandbox == id);
    }

    /// Drops every transfer (the bridge is stopping).
    pub(crate) fn clear(&self) {
        self.remove_where(|_| true);
    }

    fn remove_where(&self, gone: impl Fn(&Transfer) -> bool) {
        let files: Vec<PathBuf> = {
            let mut map = self.map();
            let ids: Vec<Uuid> = map
                .iter()
                .filter(|(_, t)| gone(t))
                .map(|(id, _)| *id)
                .collect();
            ids.iter()
                .filter_map(|id| map.remove(id))
                .map(|t| t.file)
                .collect()
        };
        for f in files {
            let _ = std::fs::remove_file(f);
        }
    }

    /// A new transfer's id and its file, made empty (never through a link, never over a file already there),
    /// held by a guard until the map takes it.
    fn new_file(&self) -> Result<(Uuid, Unclaimed, std::fs::File), ToolError> {
        if self.map().len() >= MAX_TRANSFERS {
            return Err(ToolError::busy(format!(
                "{MAX_TRANSFERS} exports and uploads are open (the limit); finish one or wait {} minutes for an \
                 unused one to expire",
                TRANSFER_TTL.as_secs() / 60
            )));
        }
        crate::backend::prepare_state_dir(&self.dir)
            .map_err(|why| ToolError::internal(format!("{}: {why}", self.dir.display())))?;
        let id = Uuid::new_v4();
        let path = self.dir.join(format!("{}-{id}.tar", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| ToolError::internal(format!("{}: {e}", path.display())))?;
        Ok((id, Unclaimed(Some(path)), file))
    }
}

/// A transfer's file that no map entry holds: removed when dropped, unless claimed.
struct Unclaimed(Option<PathBuf>);

impl Unclaimed {
    /// The path, no longer removed on drop: the caller hands it to the map.
    fn claim(mut self) -> PathBuf {
        self.0.take().unwrap_or_default()
    }

    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// At start: removes from `dir` the transfer files of runs that are gone: `<pid>-<uuid>.tar` whose pid no
/// longer runs (or is ours, when `own_pid_gone`: a restarted bridge with the same pid, pid 1 of a container),
/// and `<uuid>.tar` (named before the pid was) untouched past the TTL. Only regular files owned by this
/// process's uid in a folder that is ours and closed to others: a link or anything else is left alone.
/// Returns how many were removed.
fn remove_leftovers(dir: &Path, own_pid_gone: bool) -> Result<usize, String> {
    if std::fs::symlink_metadata(dir).is_err() {
        return Ok(0);
    }
    crate::backend::prepare_state_dir(dir)?;
    let me = nix::unistd::geteuid().as_raw();
    let mut removed = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        let Ok(entry) = entry else { continue };
        // Not followed: a link is its own entry, and is not a regular file.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.file_type().is_file() || meta.uid() != me {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".tar") else {
            continue;
        };
        let left = match stem.split_once('-') {
            Some((pid, id)) if pid.parse::<u32>().is_ok() && Uuid::parse_str(id).is_ok() => {
                crate::backend::orphaned(stem, own_pid_gone)
            }
            _ if Uuid::parse_str(stem).is_ok() => meta
                .modified()
                .ok()
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age > TRANSFER_TTL),
            _ => false,
        };
        if left && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

/// The tools' handle: the manager, whose store holds the transfers.
#[derive(Clone)]
struct Transfers {
    mgr: Arc<Manager>,
}

impl Transfers {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Transfer>> {
        self.mgr.transfers.map()
    }

    fn new_file(&self) -> Result<(Uuid, Unclaimed, std::fs::File), ToolError> {
        let live: Vec<Uuid> = self.mgr.list().iter().map(|s| s.id).collect();
        self.mgr.transfers.sweep(&live);
        self.mgr.transfers.new_file()
    }

    fn max_archive(&self) -> u64 {
        // The workspace's tmpfs size, plus headers and padding for many small files.
        (self.mgr.settings.workspace_mib << 20) + (64 << 20)
    }
}

fn conflict(message: String) -> ToolError {
    ToolError::new(bridge_core::ErrorCode::Conflict, message)
}

fn unknown(field: &str, what: &str) -> ToolError {
    ToolError::invalid_argument(
        field,
        format!(
            "no open {what} with this id in this sandbox (finished, expired after 15 minutes unused, or never started)"
        ),
    )
}

/// One entry of `find -printf`.
struct Found {
    kind: u8,
    mode: u32,
    mtime: u64,
    size: u64,
    /// The name's bytes as the sandbox has them (not necessarily UTF-8; tar carries any bytes).
    path: Vec<u8>,
    link: Vec<u8>,
}

impl Found {
    fn path(&self) -> &Path {
        bytes_path(&self.path)
    }
}

fn bytes_path(b: &[u8]) -> &Path {
    Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b))
}

/// A name for a result: its UTF-8 as is, every other byte as `\xNN` (and `\` as `\\`), so that two names
/// never read the same; long ones shortened in the middle.
fn escaped(name: &[u8]) -> String {
    let mut out = String::new();
    for chunk in name.utf8_chunks() {
        out.push_str(&chunk.valid().replace('\\', "\\\\"));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    bridge_core::text::for_log(&out)
}

/// The bytes of the regular files listed, saturating: sizes are the sandbox's to make up (a sparse file of
/// 2^63 bytes costs it nothing), and a sum that wrapped would pass the export's limit.
fn files_bytes(found: &[Found]) -> u64 {
    found
        .iter()
        .filter(|f| f.kind == b'f')
        .fold(0u64, |total, f| total.saturating_add(f.size))
}

fn parse_find(out: &[u8]) -> Result<Vec<Found>, String> {
    let mut fields = out.split(|b| *b == 0);
    let mut found = Vec::new();
    while let Some(kind) = fields.next() {
        if kind.is_empty() {
            break;
        }
        let mut raw = || -> Result<&[u8], String> {
            fields
                .next()
                .ok_or_else(|| "the listing ends mid-entry".to_string())
        };
        // Numbers are ASCII; a field that is not is refused by the parse that follows.
        let mode = u32::from_str_radix(&String::from_utf8_lossy(raw()?), 8)
            .map_err(|e| format!("mode: {e}"))?;
        let mtime = String::from_utf8_lossy(raw()?)
            .split('.')
            .next()
            .unwrap_or("0")
            .parse::<u64>()
            .unwrap_or(0);
        let size = String::from_utf8_lossy(raw()?)
            .parse::<u64>()
            .map_err(|e| format!("size: {e}"))?;
        let path = raw()?;
        let path = path.strip_prefix(b"./").unwrap_or(path).to_vec();
        let link = raw()?.to_vec();
        found.push(Found {
            kind: kind[0],
            mode,
            mtime,
            size,
            path,
            link,
        });
        if found.len() > MAX_ENTRIES {
            return Err(format!("more than {MAX_ENTRIES} entries"));
        }
    }
    Ok(found)
}

/// What the async side hands the archive writer: an entry, or the next bytes of the file just announced.
enum Msg {
    Entry(Found),
    Data(Vec<u8>),
}

/// A file's content as the writer reads it, from the channel, exactly `left` bytes.
struct ChanReader<'a> {
    rx: &'a std::sync::mpsc::Receiver<Msg>,
    left: u64,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for ChanReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        if self.pos == self.buf.len() {
            match self.rx.recv() {
                Ok(Msg::Data(d)) if !d.is_empty() => {
                    self.buf = d;
                    self.pos = 0;
                }
                _ => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "a file ended early (changed during the export?)",
                    ));
                }
            }
        }
        let n = out
            .len()
            .min(self.buf.len() - self.pos)
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        self.left -= n as u64;
        Ok(n)
    }
}

fn write_archive(file: std::fs::File, rx: std::sync::mpsc::Receiver<Msg>) -> std::io::Result<u64> {
    let out = std::io::BufWriter::new(file);
    let mut b = tar::Builder::new(out);
    b.follow_symlinks(false);
    while let Ok(msg) = rx.recv() {
        let Msg::Entry(f) = msg else {
            return Err(std::io::Error::other("file bytes without an entry"));
        };
        let mut h = tar::Header::new_gnu();
        h.set_mode(f.mode);
        h.set_mtime(f.mtime);
        h.set_uid(1000);
        h.set_gid(1000);
        match f.kind {
            b'd' => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                let mut dir = f.path.clone();
                dir.push(b'/');
                b.append_data(&mut h, bytes_path(&dir), std::io::empty())?;
            }
            b'l' => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                b.append_link(&mut h, f.path(), bytes_path(&f.link))?;
            }
            _ => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(f.size);
                let reader = ChanReader {
                    rx: &rx,
                    left: f.size,
                    buf: Vec::new(),
                    pos: 0,
                };
                b.append_data(&mut h, f.path(), reader)?;
            }
        }
    }
    let mut out = b
        .into_inner()?
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    out.flush()?;
    Ok(out.metadata()?.len())
}

/// Why an entry stays out of an export, if it does. A file is read through the agent, which names paths in
/// UTF-8: one whose path is not UTF-8 could not be named, and its lossy decoding might name another file.
/// Folders and links need no reading and keep their bytes.
fn left_out(f: &Found) -> Option<&'static str> {
    match f.kind {
        b'd' | b'l' => None,
        b'f' if std::str::from_utf8(&f.path).is_ok() => None,
        b'f' => Some("a file whose path is not UTF-8, which the agent cannot name to read it"),
        b's' => Some("a socket"),
        b'p' => Some("a named pipe"),
        b'b' | b'c' => Some("a device"),
        _ => Some("neither a file, a folder nor a symbolic link"),
    }
}

async fn export_start(t: &Transfers, a: &ExportArgs) -> Result<Uuid, ToolError> {
    let s = t.mgr.get(&a.sandbox_id)?;
    let rel = relative("path", a.path.as_deref().unwrap_or(""))?;
    let base = under_workspace(&rel);
    let mut spec = ExecSpec::new(Program::Argv {
        argv: [
            "find",
            ".",
            "-mindepth",
            "1",
            "-printf",
            "%y\\0%m\\0%T@\\0%s\\0%p\\0%l\\0",
        ]
        .map(String::from)
        .to_vec(),
    });
    spec.cwd = Some(base.clone());
    spec.timeout_ms = Some(AGENT_TIMEOUT.as_millis() as u64);
    let report = match s
        .instance
        .client
        .call(
            Op::Exec(Box::new(spec)),
            AGENT_TIMEOUT + Duration::from_secs(5),
        )
        .await?
    {
        Body::Exited(r) => r,
        other => return Err(super::agent_error(other)),
    };
    if report.exit_code != Some(0) {
        let why = String::from_utf8_lossy(&report.stderr);
        let field = if a.path.is_some() {
            "path"
        } else {
            "sandbox_id"
        };
        return Err(ToolError::invalid_argument(
            field,
            format!("{base} could not be listed: {}", why.trim()),
        ));
    }
    if report.truncated {
        return Err(ToolError::too_large(format!(
            "{base} holds too many entries to export at once (its listing passed 1 MiB); export a folder of it \
             with `path`"
        )));
    }
    let found = parse_find(&report.stdout).map_err(ToolError::too_large)?;
    let total_files = files_bytes(&found);
    if total_files > t.max_archive() {
        return Err(ToolError::too_large(format!(
            "{base} holds {total_files} bytes of files, above the {} an export may hold",
            t.max_archive()
        )));
    }
    // Should this call be dropped from here on, the guard removes the file; the writer only holds it open.
    let (id, file, opened) = t.new_file()?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(4);
    let writer = tokio::task::spawn_blocking(move || write_archive(opened, rx));
    let mut entries = 0u64;
    let mut skipped = 0u64;
    let mut named = Vec::new();
    let mut named_bytes = 0;
    let fed: Result<(), ToolError> = async {
        for f in found {
            if let Some(why) = left_out(&f) {
                skipped += 1;
                let entry = SkippedEntry {
                    path: escaped(&f.path),
                    why: why.to_string(),
                };
                let bytes = bridge_core::json_size::json_len(&entry);
                if named.len() < MAX_SKIPPED_NAMED && named_bytes + bytes <= MAX_SKIPPED_NAMED_BYTES
                {
                    named_bytes += bytes;
                    named.push(entry);
                }
                continue;
            }
            entries += 1;
            // Only a file is read by its path, and left_out let through only UTF-8 ones.
            let path = format!("{base}/{}", String::from_utf8_lossy(&f.path));
            let (kind, size) = (f.kind, f.size);
            send(&tx, Msg::Entry(f)).await?;
            if kind != b'f' {
                continue;
            }
            let mut offset = 0u64;
            while offset < size {
                let length = (size - offset).min(MAX_CHUNK_BYTES as u64);
                let op = Op::Read {
                    path: path.clone(),
                    offset,
                    length,
                };
                let data = match s
                    .instance
                    .client
                    .call(op, AGENT_TIMEOUT)
                    .await
                    .map_err(|e| s.link_error(e))?
                {
                    Body::Data { data, .. } => data,
                    other => return Err(super::agent_error(other)),
                };
                if data.is_empty() {
                    return Err(conflict(format!(
                        "{path} shrank during the export; export again"
                    )));
                }
                offset += data.len() as u64;
                send(&tx, Msg::Data(data)).await?;
            }
        }
        Ok(())
    }
    .await;
    drop(tx);
    let written = writer.await.map_err(|e| ToolError::internal(e.to_string()));
    let total = match (fed, written) {
        (Ok(()), Ok(Ok(n))) => n,
        (Err(e), _) | (_, Err(e)) => return Err(e),
        (Ok(()), Ok(Err(e))) => {
            return Err(conflict(format!("the archive could not be written: {e}")));
        }
    };
    t.map().insert(
        id,
        Transfer {
            sandbox: s.id,
            file: file.claim(),
            touched: Instant::now(),
            kind: Kind::Export {
                total,
                entries,
                skipped,
                named: Arc::new(named),
            },
        },
    );
    Ok(id)
}

async fn send(tx: &std::sync::mpsc::SyncSender<Msg>, msg: Msg) -> Result<(), ToolError> {
    // The queue is 4 messages deep: a full one waits for the writer (off the runtime's threads).
    let tx = tx.clone();
    tokio::task::spawn_blocking(move || tx.send(msg))
        .await
        .map_err(|e| ToolError::internal(e.to_string()))?
        .map_err(|_| ToolError::internal("the archive writer stopped"))
}

/// Raw bytes of a page whose result also carries `extra` bytes of JSON (twice, as the data).
fn page_bytes(ctx: &ToolCtx, extra: usize) -> usize {
    let room = ctx.result_cap().saturating_sub((8 << 10) + 2 * extra) / 4 * 3;
    room.clamp(MIN_PAGE_BYTES, MAX_PAGE_BYTES) / 3 * 3
}

async fn export(t: Transfers, a: ExportArgs, ctx: ToolCtx) -> Result<ExportPage, ToolError> {
    let s = t.mgr.get(&a.sandbox_id)?;
    let id = match &a.export_id {
        None => export_start(&t, &a).await?,
        Some(text) => Uuid::parse_str(text.trim()).map_err(|_| unknown("export_id", "export"))?,
    };
    let offset = a.offset.unwrap_or(0);
    let (file, total, entries, skipped, named) = {
        let mut map = t.map();
        let tr = map
            .get_mut(&id)
            .filter(|tr| tr.sandbox == s.id)
            .ok_or_else(|| unknown("export_id", "export"))?;
        let Kind::Export {
            total,
            entries,
            skipped,
            ref named,
        } = tr.kind
        else {
            return Err(unknown("export_id", "export"));
        };
        let named = Arc::clone(named);
        tr.touched = Instant::now();
        (tr.file.clone(), total, entries, skipped, named)
    };
    if offset > total {
        return Err(ToolError::invalid_argument(
            "offset",
            format!("{offset} is past the archive's end ({total} bytes)"),
        )
        .with_details(serde_json::json!({"limit": total})));
    }
    let want = usize::try_from(total - offset)
        .unwrap_or(usize::MAX)
        .min(page_bytes(&ctx, bridge_core::json_size::json_len(&*named)));
    let data = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        use std::io::{Seek, SeekFrom};
        let mut f = std::fs::File::open(&file)?;
        f.seek(SeekFrom::Start(offset))?;
        let mut buf = vec![0u8; want];
        f.read_exact(&mut buf)?;
        Ok(buf)
    })
    .await
    .map_err(|e| ToolError::internal(e.to_string()))?
    .map_err(|e| ToolError::internal(format!("the export's file: {e}")))?;
    let end = offset + data.len() as u64;
    let done = end == total;
    if done && let Some(tr) = t.map().remove(&id) {
        drop(Unclaimed(Some(tr.file)));
    }
    Ok(ExportPage {
        export_id: id.to_string(),
        offset,
        bytes: data.len() as u64,
        data: b64::encode(&data),
        total_bytes: total,
        next_offset: (!done).then_some(end),
        done,
        entries,
        skipped,
        skipped_entries: named.to_vec(),
    })
}

/// Checks every entry of the archive at `file`; returns how many there are.
fn check_archive(file: &Path) -> Result<u64, String> {
    let mut ar = tar::Archive::new(std::io::BufReader::new(
        std::fs::File::open(file).map_err(|e| e.to_string())?,
    ));
    let mut links: Vec<PathBuf> = Vec::new();
    let mut n = 0u64;
    for entry in ar.entries().map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| format!("not a tar archive: {e}"))?;
        let path = entry.path().map_err(|e| e.to_string())?.into_owned();
        let shown = path.display().to_string();
        let mut depth = 0usize;
        for c in path.components() {
            match c {
                Component::Normal(_) => depth += 1,
                Component::CurDir => {}
                _ => return Err(format!("{shown:?}: absolute paths and `..` are refused")),
            }
        }
        if links.iter().any(|l| path.starts_with(l) && path != *l) {
            return Err(format!(
                "{shown:?} goes through a symbolic link of the archive"
            ));
        }
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Directory | tar::EntryType::Continuous => {}
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("{shown:?}: a link without a target"))?;
                // The target is resolved from the link's folder: it must stay inside the import's folder.
                let mut level = depth.saturating_sub(1) as i64;
                for c in target.components() {
                    match c {
                        Component::Normal(_) => level += 1,
                        Component::CurDir => {}
                        Component::ParentDir => level -= 1,
                        _ => {
                            return Err(format!(
                                "{shown:?} links to {:?}: absolute link targets are refused",
                                target.display()
                            ));
                        }
                    }
                    if level < 0 {
                        return Err(format!(
                            "{shown:?} links to {:?}, outside the folder imported into",
                            target.display()
                        ));
                    }
                }
                links.push(path.clone());
            }
            other => {
                return Err(format!(
                    "{shown:?}: entries of type {other:?} are refused (files, folders and symbolic links only)"
                ));
            }
        }
        n += 1;
    }
    Ok(n)
}

async fn import(t: Transfers, a: ImportArgs) -> Result<ImportResult, ToolError> {
    let s = t.mgr.get(&a.sandbox_id)?;
    let data = b64::decode(a.data.trim())
        .map_err(|e| ToolError::invalid_argument("data", format!("not base64: {e}")))?;
    // The base64 bound in `validate` lets through up to two bytes more than a chunk.
    if data.len() > MAX_CHUNK_BYTES {
        return Err(ToolError::too_large(format!(
            "`data` decodes to {} bytes; a chunk is at most {MAX_CHUNK_BYTES}",
            data.len()
        ))
        .with_details(serde_json::json!({"field": "data", "limit": MAX_CHUNK_BYTES})));
    }
    let offset = a.offset.unwrap_or(0);
    let (id, file, turn) = match &a.upload_id {
        None => {
            if offset != 0 {
                return Err(ToolError::invalid_argument(
                    "offset",
                    format!("a new upload starts at offset 0, not {offset}"),
                ));
            }
            let (id, file, _) = t.new_file()?;
            let path = file.path().to_path_buf();
            let turn = Arc::new(tokio::sync::Mutex::new(()));
            t.map().insert(
                id,
                Transfer {
                    sandbox: s.id,
                    file: file.claim(),
                    touched: Instant::now(),
                    kind: Kind::Upload {
                        received: 0,
                        turn: Arc::clone(&turn),
                    },
                },
            );
            (id, path, turn)
        }
        Some(text) => {
            let id = Uuid::parse_str(text.trim()).map_err(|_| unknown("upload_id", "upload"))?;
            let map = t.map();
            let tr = map
                .get(&id)
                .filter(|tr| tr.sandbox == s.id)
                .ok_or_else(|| unknown("upload_id", "upload"))?;
            let Kind::Upload { turn, .. } = &tr.kind else {
                return Err(unknown("upload_id", "upload"));
            };
            (id, tr.file.clone(), Arc::clone(turn))
        }
    };
    let _turn = turn.lock_owned().await;
    // Read under the turn: the previous chunk has been written, or this upload was committed meanwhile.
    let received = match t.map().get(&id).map(|tr| &tr.kind) {
        Some(Kind::Upload { received, .. }) => *received,
        _ => return Err(unknown("upload_id", "upload")),
    };
    if offset != received {
        return Err(ToolError::invalid_argument(
            "offset",
            format!(
                "the upload has {received} bytes; the next chunk's offset must be {received}, not {offset} (a chunk \
                 is missing or sent twice); nothing was changed"
            ),
        )
        .with_details(serde_json::json!({"expected": received})));
    }
    let after = received + data.len() as u64;
    if after > t.max_archive() {
        return Err(ToolError::too_large(format!(
            "the archive would pass {} bytes (the workspace's size plus 64 MiB); nothing was changed",
            t.max_archive()
        )));
    }
    if !data.is_empty() {
        let mut f = tokio::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .await
            .map_err(|e| ToolError::internal(format!("{}: {e}", file.display())))?;
        // A chunk whose write failed half-way left bytes past `received`: its retry replaces them.
        f.set_len(received)
            .await
            .map_err(|e| ToolError::internal(format!("{}: {e}", file.display())))?;
        tokio::io::AsyncWriteExt::write_all(&mut f, &data)
            .await
            .map_err(|e| ToolError::internal(format!("{}: {e}", file.display())))?;
        // tokio's File hands the last write to a blocking thread and returns before it lands: without the
        // flush, the next chunk's set_len or the commit's read could run first (a truncated archive, refused
        // as "unexpected EOF" under load).
        tokio::io::AsyncWriteExt::flush(&mut f)
            .await
            .map_err(|e| ToolError::internal(format!("{}: {e}", file.display())))?;
    }
    if let Some(tr) = t.map().get_mut(&id) {
        if let Kind::Upload { received, .. } = &mut tr.kind {
            *received = after;
        }
        tr.touched = Instant::now();
    }
    if !a.commit {
        return Ok(ImportResult {
            upload_id: id.to_string(),
            received_bytes: after,
            committed: false,
            entries: None,
            path: None,
        });
    }
    // Committed or refused (or this call cut short), the upload is over: its file goes when the guard does.
    let Some(tr) = t.map().remove(&id) else {
        return Err(unknown("upload_id", "upload"));
    };
    let file = Unclaimed(Some(tr.file));
    let (entries, path) = commit(&s, file.path(), a.path.as_deref()).await?;
    Ok(ImportResult {
        upload_id: id.to_string(),
        received_bytes: after,
        committed: true,
        entries: Some(entries),
        path: Some(path),
    })
}

async fn commit(
    s: &crate::manager::Sandbox,
    file: &Path,
    path: Option<&str>,
) -> Result<(u64, String), ToolError> {
    let entries = tokio::task::spawn_blocking({
        let file = file.to_path_buf();
        move || check_archive(&file)
    })
    .await
    .map_err(|e| ToolError::internal(e.to_string()))?
    .map_err(|why| {
        ToolError::invalid_argument(
            "data",
            format!("the archive was refused, nothing was unpacked: {why}"),
        )
    })?;
    let dest = under_workspace(&relative("path", path.unwrap_or(""))?);
    let mut spec = ExecSpec::new(Program::Argv {
        argv: [
            "sh",
            "-c",
            "mkdir -p -- \"$1\" && exec tar -x -p --no-same-owner -f - -C \"$1\"",
            "sh",
            &dest,
        ]
        .map(String::from)
        .to_vec(),
    });
    spec.background = true;
    spec.close_stdin = false;
    let client = &s.instance.client;
    let (target, pending) = client.start(Op::Exec(Box::new(spec)), None).await?;
    match pending.wait(AGENT_TIMEOUT).await? {
        Body::Started { .. } => {}
        other => return Err(super::agent_error(other)),
    }
    let fed = feed(client, target, file).await;
    // Whatever happened, tar's end is awaited (it ends at end of input or when killed).
    if fed.is_err() {
        let _ = client
            .call(
                Op::Signal {
                    target,
                    signal: libc::SIGKILL,
                },
                AGENT_TIMEOUT,
            )
            .await;
    }
    let started = Instant::now();
    let version = s.instance.hello.version;
    let report = loop {
        // While tar runs, its state alone (polled every 20 ms, its output would travel each time); once it
        // ended, its output too, for what it said.
        let running = match client
            .call(Op::status(target, true, version), AGENT_TIMEOUT)
            .await?
        {
            Body::Status(r) | Body::Exited(r) => r.running,
            other => return Err(super::agent_error(other)),
        };
        if !running {
            let op = Op::Status {
                target,
                state_only: false,
            };
            match client.call(op, AGENT_TIMEOUT).await? {
                Body::Status(r) | Body::Exited(r) => break r,
                other => return Err(super::agent_error(other)),
            }
        }
        if started.elapsed() > AGENT_TIMEOUT {
            return Err(ToolError::timeout(
                "tar did not finish unpacking within a minute",
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let _ = client.call(Op::Forget { target }, AGENT_TIMEOUT).await;
    if report.exit_code == Some(0) {
        fed?;
    } else {
        return Err(ToolError::remote(format!(
            "tar stopped unpacking into {dest} (exit {:?}): {}; what it unpacked before stays",
            report.exit_code,
            String::from_utf8_lossy(&report.stderr).trim()
        )));
    }
    Ok((entries, dest))
}

/// Streams the archive at `file` into the stdin of process `target`, 1 MiB a request, each acknowledged
/// once written into the pipe (so tar sets the pace), then closes it.
async fn feed(
    client: &crate::client::AgentClient,
    target: u64,
    file: &Path,
) -> Result<(), ToolError> {
    use tokio::io::AsyncReadExt;
    let mut f = tokio::fs::File::open(file)
        .await
        .map_err(|e| ToolError::internal(format!("{}: {e}", file.display())))?;
    let mut buf = vec![0u8; MAX_CHUNK_BYTES];
    let mut first = true;
    loop {
        let n = f
            .read(&mut buf)
            .await
            .map_err(|e| ToolError::internal(format!("{}: {e}", file.display())))?;
        let eof = n == 0;
        // The agent hands the process's stdin over a moment after `started`: the first write retries.
        for attempt in 0..100 {
            let op = Op::Stdin {
                target,
                data: buf[..n].to_vec(),
                eof,
            };
            match client.call(op, AGENT_TIMEOUT).await? {
                Body::Ok { .. } => break,
                Body::Error { message, .. }
                    if first && attempt < 99 && message.contains("is closed") =>
                {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                // tar stops reading at the archive's end marker and may be gone before the close: its exit
                // status says whether all went well.
                Body::Error { .. } if eof => return Ok(()),
                other => return Err(super::agent_error(other)),
            }
        }
        first = false;
        if eof {
            return Ok(());
        }
    }
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    let t = Transfers {
        mgr: Arc::clone(mgr),
    };
    b.tool(
        ToolSpec::new(
            "export_workspace",
            "Export a sandbox's /workspace (or a folder of it, `path`) as a tar archive, in pages of base64: the \
             first call returns export_id and the first page; call again with export_id and offset = \
             next_offset until done. Files, folders and symbolic links with their modes and mtimes; no size \
             limit but the workspace's. import_workspace takes the archive back.",
        )
        .title("Export Workspace")
        .read_only()
        .timeout(Duration::from_secs(300))
        .handler_on(t.clone(), |t, a: ExportArgs, ctx: ToolCtx| async move {
            export(t, a, ctx).await
        }),
    );
    b.tool(
        ToolSpec::new(
            "import_workspace",
            "Import a tar archive into a sandbox's /workspace (or `path` under it), in chunks of base64 of at \
             most 1 MiB: the first call (no upload_id) returns upload_id; send each next chunk with upload_id and \
             offset = received_bytes, and commit: true with the last. Nothing changes in the sandbox before \
             commit; then the archive is checked (relative paths without `..`, links staying inside, files, \
             folders and symbolic links only) and unpacked with its modes and mtimes.",
        )
        .title("Import Workspace")
        .timeout(Duration::from_secs(300))
        .handler_on(t, |t, a: ImportArgs, _: ToolCtx| async move { import(t, a).await }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_sizes_add_up_without_wrapping() {
        let file = |size| Found {
            kind: b'f',
            mode: 0o644,
            mtime: 0,
            size,
            path: b"a".to_vec(),
            link: Vec::new(),
        };
        let dir = Found {
            kind: b'd',
            ..file(7)
        };
        assert_eq!(files_bytes(&[file(3), dir, file(4)]), 7);
        // Two sparse files of 2^63 - 1 bytes and one of 3 wrapped to 1, under every limit.
        let huge = [file(i64::MAX as u64), file(i64::MAX as u64), file(3)];
        assert_eq!(files_bytes(&huge), u64::MAX);
    }
}
