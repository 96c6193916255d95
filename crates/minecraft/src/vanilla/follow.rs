//! Follows a server log like `tail -F`: new lines as they are written, across a rotation (the file renamed
//! away and a new one made at the path, which is what vanilla does to logs/latest.log at start before
//! gzipping the old one) and a truncation (the same file cut back), a partial last line held until its end
//! is written, and each line bounded in bytes.

use serde::Serialize;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Longest line kept, unless the follower is told otherwise: longer ones are cut to it (at a character
/// boundary) and counted in `lines_cut`. Chat is at most 256 characters; this leaves room for the header and
/// for plugin lines.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 << 10;
/// Bytes read a poll at most, so a large backlog is read over several polls.
const READ_BUDGET: usize = 4 << 20;
/// How far into a log file `Starting minecraft server version` is looked for when following starts at its end.
pub const HEAD_SCAN_BYTES: u64 = 256 << 10;

/// What `status` shows about the log.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct FollowStatus {
    pub path: String,
    /// The file is open and being read.
    pub following: bool,
    pub lines: u64,
    pub bytes: u64,
    /// Times the path was found to be a new file (rotation).
    pub rotations: u64,
    /// Times the file was found shorter than what was read (truncation).
    pub truncations: u64,
    /// Lines longer than the limit, cut to it.
    pub lines_cut: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The follower; [`Follower::poll`] returns the lines completed since the last call.
pub struct Follower {
    path: PathBuf,
    file: Option<File>,
    /// (device, inode) of the open file.
    identity: Option<(u64, u64)>,
    offset: u64,
    partial: Vec<u8>,
    /// The line being assembled passed the limit: the rest of it is dropped.
    cut: bool,
    max_line: usize,
    /// Open the file at its end the first time (lines written before following started are history).
    from_end: bool,
    pub status: FollowStatus,
}

impl Follower {
    pub fn new(path: impl Into<PathBuf>, max_line: usize) -> Self {
        let path = path.into();
        Follower {
            status: FollowStatus {
                path: path.display().to_string(),
                ..FollowStatus::default()
            },
            path,
            file: None,
            identity: None,
            offset: 0,
            partial: Vec::new(),
            cut: false,
            max_line: max_line.max(1),
            from_end: false,
        }
    }

    /// Opens the file now at its end, if it is there: what it holds is history, and lines written from now on
    /// are read. (A file that appears later, or after a rotation, is read whole.)
    pub fn start_at_end(mut self) -> Self {
        if let Ok(meta) = std::fs::metadata(&self.path) {
            self.from_end = true;
            let mut ignored = Vec::new();
            self.open(&meta, &mut ignored, &mut 0);
        }
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines completed since the last call (without their `\n` or `\r\n`).
    pub fn poll(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let mut budget = READ_BUDGET;
        if self.file.is_some() {
            self.drain(&mut out, &mut budget);
        }
        match std::fs::metadata(&self.path) {
            Ok(meta) => {
                let identity = (meta.dev(), meta.ino());
                match self.identity {
                    Some(known) if known == identity => {
                        if meta.len() < self.offset {
                            self.status.truncations += 1;
                            tracing::info!(path = %self.path.display(), "server log truncated; reading it from the start");
                            self.offset = 0;
                            self.partial.clear();
                            self.cut = false;
                            if let Some(f) = self.file.as_mut()
                                && let Err(e) = f.seek(SeekFrom::Start(0))
                            {
                                self.status.last_error = Some(e.to_string());
                            }
                            self.drain(&mut out, &mut budget);
                        }
                    }
                    Some(_) => {
                        // Rotated: what was written to the old file before it went is read first.
                        self.drain(&mut out, &mut budget);
                        self.finish_partial(&mut out);
                        self.status.rotations += 1;
                        tracing::info!(path = %self.path.display(), "server log rotated; following the new file");
                        self.open(&meta, &mut out, &mut budget);
                    }
                    None => self.open(&meta, &mut out, &mut budget),
                }
            }
            // Between the rename and the new file, or not written yet: keep what is open.
            Err(e) => {
                if self.file.is_none() {
                    self.status.following = false;
                    self.status.last_error = Some(format!("{}: {e}", self.path.display()));
                }
            }
        }
        out
    }

    fn open(&mut self, meta: &std::fs::Metadata, out: &mut Vec<String>, budget: &mut usize) {
        // Whoever writes the server's logs/ can put a FIFO or a device there: opening a FIFO blocks until a
        // writer comes, whose lines would then be events. (A swap between this look and the open stays
        // possible; the open file is checked again below.)
        if !meta.is_file() {
            self.refuse_kind();
            return;
        }
        let identity = (meta.dev(), meta.ino());
        match File::open(&self.path) {
            Ok(f) if !f.metadata().is_ok_and(|m| m.is_file()) => self.refuse_kind(),
            Ok(mut f) => {
                self.offset = 0;
                if std::mem::take(&mut self.from_end) {
                    match f.seek(SeekFrom::End(0)) {
                        Ok(end) => self.offset = end,
                        Err(e) => self.status.last_error = Some(e.to_string()),
                    }
                }
                self.file = Some(f);
                self.identity = Some(identity);
                self.status.following = true;
                self.status.last_error = None;
                self.drain(out, budget);
            }
            Err(e) => {
                self.status.following = false;
                self.status.last_error = Some(format!("{}: {e}", self.path.display()));
            }
        }
    }

    fn refuse_kind(&mut self) {
        self.file = None;
        self.identity = None;
        self.status.following = false;
        self.status.last_error = Some(format!(
            "{} is not a regular file; the server log must be one",
            self.path.display()
        ));
    }

    fn drain(&mut self, out: &mut Vec<String>, budget: &mut usize) {
        let Some(mut f) = self.file.take() else {
            return;
        };
        let mut buf = vec![0u8; 64 << 10];
        while *budget > 0 {
            let want = buf.len().min(*budget);
            match f.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => {
                    *budget -= n;
                    self.offset += n as u64;
                    self.status.bytes += n as u64;
                    self.feed(&buf[..n], out);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.status.last_error = Some(e.to_string());
                    break;
                }
            }
        }
        self.file = Some(f);
    }

    fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<String>) {
        while !bytes.is_empty() {
            let (part, rest, complete) = match bytes.iter().position(|&b| b == b'\n') {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            let room = self.max_line.saturating_sub(self.partial.len());
            if part.len() > room {
                self.partial.extend_from_slice(&part[..room]);
                self.cut = true;
            } else {
                self.partial.extend_from_slice(part);
            }
            if complete {
                self.finish_partial(out);
            }
            bytes = rest;
        }
    }

    fn finish_partial(&mut self, out: &mut Vec<String>) {
        if self.partial.is_empty() && !self.cut {
            return;
        }
        let mut line = std::mem::take(&mut self.partial);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if std::mem::take(&mut self.cut) {
            self.status.lines_cut += 1;
            // Cut at a character boundary: drop a trailing incomplete UTF-8 sequence.
            while !line.is_empty()
                && std::str::from_utf8(&line).is_err_and(|e| e.error_len().is_none())
            {
                line.pop();
            }
        }
        self.status.lines += 1;
        out.push(String::from_utf8_lossy(&line).into_owned());
    }
}

/// The server version named in the first [`HEAD_SCAN_BYTES`] of the log at `path`, if any.
pub fn scan_version(path: &Path) -> Option<String> {
    // Not a FIFO: opening one would block the bridge's start until a writer came.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let f = File::open(path).ok()?;
    let mut head = Vec::new();
    f.take(HEAD_SCAN_BYTES).read_to_end(&mut head).ok()?;
    String::from_utf8_lossy(&head).lines().find_map(|line| {
        let m = super::patterns::match_line(line)?;
        (m.kind == super::patterns::Kind::Version).then(|| m.get("version").map(str::to_owned))?
    })
}
