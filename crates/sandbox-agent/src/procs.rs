//! Processes the agent started, and the one place that waits for children.
//!
//! As PID 1 the agent inherits every orphan of the sandbox, so it reaps with `waitpid(-1)`: a status for a
//! pid in the table goes to that process, any other is an orphan and is dropped. Spawning and reaping both
//! hold the table's lock, so a child that dies at once cannot be reaped before it is in the table.
//!
//! The table holds `MAX_PROCESSES`. A foreground run leaves it when it ends; an ended background process
//! stays (its output is still wanted) until a spawn finds the table full: it then makes room by dropping one
//! ended background process: one whose output was handed over after its end (a `status` with its output),
//! the earliest handed over first; else, when none was, the one that ended first. A `state_only` status (a
//! poll for the end) hands nothing over: the caller typically reads the output next. A running process is
//! never dropped: with the table full of them a spawn is refused.

use crate::outbuf::OutBuf;
use crate::protocol::{ErrorKind, Limits, MAX_PROCESSES, ProcReport};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::watch;

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

#[derive(Debug)]
pub struct ProcState {
    pub out: OutBuf,
    pub err: OutBuf,
    pub timed_out: bool,
    pub ended_at: Option<Instant>,
    /// When a report with its output was first sent after it ended: from then on dropping it loses nothing
    /// the caller was not given.
    pub delivered: Option<Instant>,
}

#[derive(Debug)]
pub struct Proc {
    pub pid: i32,
    pub started: Instant,
    pub background: bool,
    pub state: Mutex<ProcState>,
    /// Its whole tree (its own cgroup, or its descendants), which a signal reaches.
    tree: crate::tree::Tree,
    exit_tx: watch::Sender<Option<Exit>>,
}

impl Proc {
    pub fn state(&self) -> MutexGuard<'_, ProcState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn exit(&self) -> Option<Exit> {
        *self.exit_tx.borrow()
    }

    /// Resolves when the process has been reaped.
    pub async fn wait(&self) -> Exit {
        let mut rx = self.exit_tx.subscribe();
        loop {
            if let Some(exit) = *rx.borrow_and_update() {
                return exit;
            }
            if rx.changed().await.is_err() {
                return Exit::Signal(Signal::SIGKILL as i32);
            }
        }
    }

    /// Signals the whole tree: the process group (the process is its group's leader) and every process
    /// that left it (`tree`); SIGKILL until none is left.
    pub fn signal(&self, sig: Signal) {
        self.tree.signal(self.pid, sig);
    }

    /// Its state, with its output unless `state_only`; a report with the output of an ended process marks
    /// that output as delivered.
    pub fn report(&self, state_only: bool) -> ProcReport {
        let exit = self.exit();
        let mut st = self.state();
        if exit.is_some() && !state_only && st.delivered.is_none() {
            st.delivered = Some(Instant::now());
        }
        let end = st.ended_at.unwrap_or_else(Instant::now);
        let (stdout, stderr) = match state_only {
            true => (Vec::new(), Vec::new()),
            false => (st.out.snapshot(), st.err.snapshot()),
        };
        ProcReport {
            pid: self.pid,
            running: exit.is_none(),
            exit_code: match exit {
                Some(Exit::Code(c)) => Some(c),
                _ => None,
            },
            signal: match exit {
                Some(Exit::Signal(s)) => Some(s),
                _ => None,
            },
            timed_out: st.timed_out,
            truncated: st.out.truncated() || st.err.truncated(),
            stdout,
            stderr,
            stdout_bytes: st.out.total(),
            stderr_bytes: st.err.total(),
            duration_ms: end.duration_since(self.started).as_millis() as u64,
        }
    }
}

#[derive(Debug, Default)]
struct Table {
    by_id: HashMap<u64, Arc<Proc>>,
    by_pid: HashMap<i32, u64>,
}

impl Table {
    /// Drops one ended background process to make room: the one whose output was delivered earliest, else
    /// (none was) the one that ended first. False when every process still runs (or is a foreground run still
    /// being answered).
    fn evict_one(&mut self) -> bool {
        let victim = self
            .by_id
            .iter()
            .filter(|(_, p)| p.background && p.exit().is_some())
            .map(|(id, p)| {
                let st = p.state();
                (st.delivered.is_none(), st.delivered.or(st.ended_at), *id)
            })
            .min();
        match victim {
            Some((_, _, id)) => {
                self.by_id.remove(&id);
                true
            }
            None => false,
        }
    }
}

#[derive(Debug, Default)]
pub struct Procs {
    table: Mutex<Table>,
}

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SpawnError {
    pub kind: ErrorKind,
    pub message: String,
}

impl Procs {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spawns `command` in its own process group with `limits` applied in the child, and records it under
    /// `id`.
    pub fn spawn(
        &self,
        id: u64,
        mut command: Command,
        limits: &Limits,
        max_output: usize,
        background: bool,
    ) -> Result<(Arc<Proc>, Child), SpawnError> {
        let tree = crate::tree::Tree::prepare(id).map_err(|e| SpawnError {
            kind: ErrorKind::Spawn,
            message: format!("could not make the program's cgroup: {e}"),
        })?;
        // SAFETY: the hook runs between fork and exec in the child, before the closures that apply Landlock
        // and seccomp (which could refuse it), and only makes system calls (see `tree::join`).
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(tree.hook());
        }
        let limits = limits.clone();
        let filter = limits.seccomp.then(crate::seccomp::program);
        let mut fence = match limits.landlock {
            true => Some(crate::confine::ruleset().map_err(|e| SpawnError {
                kind: ErrorKind::Spawn,
                message: format!("could not build the Landlock ruleset: {e}"),
            })?),
            false => None,
        };
        // SAFETY: the closure runs between fork and exec in the child; it only calls setsid, close_range,
        // setrlimit, prctl, seccomp and landlock_restrict_self, which are async-signal-safe system calls,
        // allocates nothing (the filter and the ruleset were built before the fork) and touches no lock.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || {
                // Its own session (and so its own process group, which signals address).
                crate::confine::detach()?;
                apply_limits(&limits)?;
                // Before seccomp, whose deny-list may include the Landlock system calls.
                if let Some(ruleset) = fence.take() {
                    crate::confine::restrict(ruleset)?;
                }
                match &filter {
                    Some(f) => crate::seccomp::install(f),
                    None => Ok(()),
                }
            });
        }
        let mut table = self.lock();
        if table.by_id.contains_key(&id) {
            return Err(SpawnError {
                kind: ErrorKind::Invalid,
                message: format!("request id {id} is already a running process"),
            });
        }
        if table.by_id.len() >= MAX_PROCESSES && !table.evict_one() {
            return Err(SpawnError {
                kind: ErrorKind::Busy,
                message: format!(
                    "{MAX_PROCESSES} processes are running in this sandbox (the most one sandbox runs at once); \
                     end one (kill_process) before starting another"
                ),
            });
        }
        let child = command.spawn().map_err(|e| SpawnError {
            kind: ErrorKind::Spawn,
            message: format!("could not start the program: {e}"),
        })?;
        let pid = child.id() as i32;
        let (exit_tx, _) = watch::channel(None);
        let proc = Arc::new(Proc {
            pid,
            started: Instant::now(),
            background,
            tree,
            state: Mutex::new(ProcState {
                out: OutBuf::new(max_output),
                err: OutBuf::new(max_output),
                timed_out: false,
                ended_at: None,
                delivered: None,
            }),
            exit_tx,
        });
        table.by_id.insert(id, Arc::clone(&proc));
        table.by_pid.insert(pid, id);
        Ok((proc, child))
    }

    pub fn get(&self, id: u64) -> Option<Arc<Proc>> {
        self.lock().by_id.get(&id).cloned()
    }

    /// Drops a finished process from the table; a running one stays.
    pub fn forget(&self, id: u64) -> bool {
        let mut table = self.lock();
        match table.by_id.get(&id) {
            Some(p) if p.exit().is_some() => {
                table.by_id.remove(&id);
                true
            }
            _ => false,
        }
    }

    pub fn all(&self) -> Vec<Arc<Proc>> {
        self.lock().by_id.values().cloned().collect()
    }

    /// Reaps every child that has ended; returns how many were orphans (not ours).
    pub fn reap(&self) -> usize {
        let mut table = self.lock();
        let mut orphans = 0;
        loop {
            let (pid, exit) = match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) => (pid, Exit::Code(code)),
                Ok(WaitStatus::Signaled(pid, sig, _)) => (pid, Exit::Signal(sig as i32)),
                Ok(WaitStatus::StillAlive) | Err(_) => return orphans,
                Ok(_) => continue,
            };
            match table.by_pid.remove(&pid.as_raw()) {
                Some(id) => {
                    if let Some(proc) = table.by_id.get(&id) {
                        proc.state().ended_at = Some(Instant::now());
                        proc.exit_tx.send_replace(Some(exit));
                    }
                }
                None => orphans += 1,
            }
        }
    }
}

fn apply_limits(limits: &Limits) -> std::io::Result<()> {
    use nix::sys::resource::{Resource, setrlimit};
    let pairs = [
        (Resource::RLIMIT_DATA, limits.data),
        (Resource::RLIMIT_NPROC, limits.processes),
        (Resource::RLIMIT_CPU, limits.cpu_secs),
        (Resource::RLIMIT_FSIZE, limits.file_size),
        (Resource::RLIMIT_NOFILE, limits.open_files),
    ];
    for (resource, value) in pairs {
        if let Some(v) = value {
            setrlimit(resource, v, v).map_err(std::io::Error::from)?;
        }
    }
    nix::sys::prctl::set_no_new_privs().map_err(std::io::Error::from)?;
    Ok(())
}

/// Reaps on every SIGCHLD (and every half second, in case a signal was coalesced away) until the process
/// ends.
pub async fn reaper(procs: Arc<Procs>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigchld = match signal(SignalKind::child()) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("sandbox-agent: no SIGCHLD handler ({e}); reaping by polling");
            None
        }
    };
    loop {
        procs.reap();
        match sigchld.as_mut() {
            Some(s) => {
                let _ = tokio::time::timeout(std::time::Duration::from_millis(500), s.recv()).await;
            }
            None => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    }
}
