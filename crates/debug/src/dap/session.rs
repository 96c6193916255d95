//! One debug session: the adapter process, what it told us (run state, stops, output), and the waits on it.
//! Every `stopped` event is queued in arrival order until a wait reports it, so two threads stopping close
//! together are both reported, once each and in order: the program is paused at the stop last reported, and a
//! resume while another thread's stop is still unreported reports that stop instead of resuming (the program is
//! still paused there). A stop whose thread the adapter resumed before it was reported is reported as passed.

use super::breakpoints::Store;
use super::client::DapClient;
use super::journal::{JOURNAL_BYTES, Journal};
use super::launch::AdapterKind;
use crate::envelope::{ScriptError, now_ms};
use serde_json::{Value, json};
use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Variables references handed out during one stop; more are refused (a runaway expansion).
const MAX_REFS: usize = 100_000;
/// Stops queued and not yet reported; past it the oldest are dropped and counted (an agent that never waits on
/// a program stopping in a loop cannot grow the bridge).
pub const MAX_PENDING_STOPS: usize = 10_000;
/// How long a wait after a resume holds the stops that came for the adapter's `continued` announcing it, once the
/// adapter is known to announce resumes (see [`State::awaiting_continued`]). lldb-dap announces one as soon as the
/// program runs, before any stop it leads to; past this the stops are taken as they are (an adapter that
/// announced some resumes and not this one).
const CONTINUED_WITHIN: Duration = Duration::from_secs(3);

/// One `stopped` event.
#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    /// 1 for the session's first stop, then one more per `stopped` event.
    pub seq: u64,
    pub thread_id: i64,
    pub reason: String,
    pub text: Option<String>,
    /// The adapter resumed the thread (a `continued` event) before the stop was reported.
    pub resumed: bool,
}

impl Stop {
    pub fn to_json(&self) -> Value {
        let mut v = json!({"stopSeq": self.seq, "threadId": self.thread_id, "reason": self.reason});
        if let Some(t) = &self.text {
            v["description"] = json!(t);
        }
        v
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Run {
    Starting,
    Running,
    Paused {
        thread_id: i64,
        reason: String,
        text: Option<String>,
    },
    Terminated,
}

#[derive(Debug)]
pub struct State {
    pub run: Run,
    /// Stopped events so far.
    pub stops: u64,
    /// Stops not yet reported, oldest first.
    pub pending: VecDeque<Stop>,
    /// Stops dropped from a full [`MAX_PENDING_STOPS`] queue.
    pub dropped_stops: u64,
    /// The stop the program is paused at (the last one reported, or the first while none was).
    pub current: Option<Stop>,
    /// Threads that stopped and were not resumed since. lldb-dap sends a stopped event for every thread with a
    /// stop reason at each stop, so a thread that stayed stopped while another stepped is announced again; a
    /// thread cannot stop twice without running, so such an event is a repeat, not a stop.
    pub stopped_threads: HashSet<i64>,
    /// Repeated stopped events dropped (see `stopped_threads`).
    pub repeats: u64,
    /// The thread a step request of ours is moving, until the next stop. lldb-dap answers a step with
    /// `continued {allThreadsContinued: true}` though the other threads stay put (lldb steps a line with them
    /// suspended): that echo resumes only the stepping thread here.
    pub stepping: Option<i64>,
    /// Variables references valid now; a resume empties it.
    pub refs: HashSet<i64>,
    /// The thread a resume request of ours resumed, while no `continued` for it came since. lldb-dap sends its
    /// `stopped` events from a thread of its own, one per thread with a stop reason, so one for the pause being
    /// left can cross the request and come after it; its `continued` for the resume comes after those and
    /// before any stop the resume leads to. So while this is set, a stop is not yet known to be news.
    pub awaiting_continued: Option<i64>,
    /// The adapter announced a resume of ours with `continued` (lldb-dap does; the protocol does not require
    /// it): only then do waits hold stops for it.
    pub announces_continued: bool,
    pub exit_code: Option<i64>,
    pub initialized: bool,
    pub closed: Option<String>,
}

pub struct Shared {
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    pub journal: Mutex<Journal>,
}

impl Shared {
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn journal(&self) -> MutexGuard<'_, Journal> {
        self.journal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// Output the bridge read itself rather than from an `output` event (delve leaves the program it runs
    /// writing to delve's own stdout and stderr), journaled as one.
    pub fn output(&self, category: &str, text: &str) {
        self.journal()
            .push(now_ms(), "output", category, text, None);
        self.bump();
    }
}

pub struct Session {
    pub id: String,
    pub adapter: AdapterKind,
    pub config: Value,
    pub client: DapClient,
    pub shared: Arc<Shared>,
    pub capabilities: Mutex<Value>,
    /// This session's own breakpoints: a copy of the bridge's queued ones when it opened, then changed only by
    /// breakpoint tools aimed at it, so two sessions of one program stop independently.
    pub breakpoints: Arc<Mutex<Store>>,
    shutdown: CancellationToken,
    /// What lives as long as this session: js-debug's server process and its parent session.
    companions: Mutex<Vec<Companion>>,
    /// What [`Self::kill_now`] ends: the process groups (the adapter's, debug servers') and socket directories
    /// of this session and of its parent, wherever an ending in progress holds them.
    leftovers: Mutex<Leftovers>,
    /// Everything it started has been ended ([`Self::end`] ran to its end).
    finished: AtomicBool,
}

#[derive(Default)]
struct Leftovers {
    groups: Vec<u32>,
    dirs: Vec<PathBuf>,
}

/// How the session reaches its adapter.
pub enum Link {
    /// The adapter's stdio (debugpy, lldb-dap).
    Child(tokio::process::Command),
    /// A TCP server (debugpy's `--listen`, delve); its `startDebugging` requests go to the sender.
    Tcp {
        addr: String,
        children: tokio::sync::mpsc::Sender<Value>,
    },
    /// A server on a Unix socket (js-debug, in a private directory); `startDebugging` as for `Tcp`.
    Unix {
        path: std::path::PathBuf,
        children: tokio::sync::mpsc::Sender<Value>,
    },
}

pub enum Companion {
    Process(super::adapter::Server),
    Parent(Arc<Session>),
    /// The private directory of js-debug's socket, removed when the session ends.
    Dir(super::jsdebug::PrivateDir),
}

/// The pause a resume request replaced.
pub struct Resumed {
    /// Stops seen before the request: a wait for the stop it causes waits past this.
    pub stops: u64,
    run: Run,
    current: Option<Stop>,
    refs: HashSet<i64>,
    stopped_threads: HashSet<i64>,
}

/// Where a wait ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Paused at `stop`; `passed` are stops reported on the way whose threads had already been resumed.
    Stopped {
        stop: Stop,
        passed: Vec<Stop>,
        /// Reported before (a wait on a program already paused answers where it is).
        repeated: bool,
    },
    Terminated {
        exit_code: Option<i64>,
        passed: Vec<Stop>,
    },
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Session {
    /// Starts the adapter process; events update the state, the journal and the breakpoints' binding. The
    /// session starts with a copy of `queued` (the breakpoints set while no session was live), unbound.
    pub async fn open(
        id: String,
        adapter: AdapterKind,
        config: Value,
        link: Link,
        queued: Arc<Mutex<Store>>,
    ) -> Result<Arc<Self>, ScriptError> {
        let breakpoints = Arc::new(Mutex::new(lock(&queued).fresh_copy()));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                run: Run::Starting,
                stops: 0,
                pending: VecDeque::new(),
                dropped_stops: 0,
                current: None,
                stopped_threads: HashSet::new(),
                repeats: 0,
                stepping: None,
                refs: HashSet::new(),
                awaiting_continued: None,
                announces_continued: false,
                exit_code: None,
                initialized: false,
                closed: None,
            }),
            changed: watch::channel(0).0,
            journal: Mutex::new(Journal::new(JOURNAL_BYTES)),
        });
        let shutdown = CancellationToken::new();
        let on_event = {
            let shared = Arc::clone(&shared);
            let breakpoints = Arc::clone(&breakpoints);
            move |msg: Value| on_event(&shared, &breakpoints, &msg)
        };
        let on_closed = {
            let shared = Arc::clone(&shared);
            move |reason: String| {
                {
                    let mut st = shared.state();
                    st.closed = Some(reason);
                    st.run = Run::Terminated;
                    st.refs.clear();
                }
                shared.bump();
            }
        };
        let client = match link {
            Link::Child(command) => DapClient::spawn(command, &shutdown, on_event, on_closed),
            Link::Tcp { addr, children } => {
                DapClient::tcp(&addr, &shutdown, on_event, on_closed, children).await
            }
            Link::Unix { path, children } => {
                DapClient::unix(&path, &shutdown, on_event, on_closed, children).await
            }
        }
        .map_err(|e| {
            ScriptError::new(
                "E_ADAPTER_NOT_FOUND",
                format!("could not start {}: {e}", adapter.name()),
            )
            .hint(adapter.install_hint())
        })?;
        let leftovers = Leftovers {
            groups: client
                .process()
                .and_then(super::adapter::AdapterProcess::group)
                .into_iter()
                .collect(),
            dirs: Vec::new(),
        };
        Ok(Arc::new(Self {
            id,
            adapter,
            config,
            client,
            shared,
            capabilities: Mutex::new(Value::Null),
            breakpoints,
            shutdown,
            companions: Mutex::new(Vec::new()),
            leftovers: Mutex::new(leftovers),
            finished: AtomicBool::new(false),
        }))
    }

    pub fn run(&self) -> Run {
        self.shared.state().run.clone()
    }

    pub fn is_terminated(&self) -> bool {
        matches!(self.run(), Run::Terminated)
    }

    /// The paused thread, or `E_NOT_PAUSED`.
    pub fn paused_thread(&self) -> Result<i64, ScriptError> {
        match self.run() {
            Run::Paused { thread_id, .. } => Ok(thread_id),
            Run::Terminated => Err(
                ScriptError::new("E_NO_SESSION", "the debug session has ended")
                    .hint("Start a new session with debug_start"),
            ),
            _ => Err(ScriptError::new(
                "E_NOT_PAUSED",
                "the program is running, not paused",
            )),
        }
    }

    /// Marks the program running before a resume request goes out, so the stop it causes (which may arrive
    /// before the request's response) is the one waited for. The returned pause is what [`Self::refused`] puts
    /// back; its `stops` is the count to wait past. `Err` with the next unreported stop when there is one: another
    /// thread stopped while this one was examined, the program is still paused there, and that stop is reported
    /// (and becomes the current one) instead of resuming.
    /// `command` is `continue` (every thread resumes, as adapters do unless told otherwise) or a step of
    /// `thread_id` (that thread; an adapter that resumes the others too says so with a `continued` event).
    pub fn resuming(&self, command: &str, thread_id: i64) -> Result<Resumed, Outcome> {
        let resumed = {
            let mut st = self.shared.state();
            if let Some(outcome) = take_pending(&mut st) {
                drop(st);
                self.shared.bump();
                return Err(outcome);
            }
            let stopped_threads = st.stopped_threads.clone();
            if command == "continue" {
                st.stopped_threads.clear();
                st.stepping = None;
            } else {
                st.stopped_threads.remove(&thread_id);
                st.stepping = Some(thread_id);
            }
            st.awaiting_continued = Some(thread_id);
            Resumed {
                stops: st.stops,
                run: std::mem::replace(&mut st.run, Run::Running),
                current: st.current.take(),
                refs: std::mem::take(&mut st.refs),
                stopped_threads,
            }
        };
        self.shared.bump();
        Ok(resumed)
    }

    /// The adapter refused the resume request, so the program is still paused where it was: the pause and its
    /// references come back, unless a stop or the end arrived meanwhile (then that is the truth). Returns
    /// whether it was put back.
    pub fn refused(&self, before: Resumed) -> bool {
        let restored = {
            let mut st = self.shared.state();
            // Refused: no resume to announce, and a stop that came meanwhile is where the program is.
            st.awaiting_continued = None;
            let untouched = st.stops == before.stops && st.run == Run::Running;
            if untouched {
                st.run = before.run;
                st.current = before.current;
                st.refs = before.refs;
                st.stopped_threads = before.stopped_threads;
                st.stepping = None;
            }
            untouched
        };
        if restored {
            self.shared.bump();
        }
        restored
    }

    /// Waits for the next unreported stop after `after` stops (`None`: also answers at once with the current
    /// pause when nothing new is queued), or the end, or `deadline`. Stops whose threads were resumed before
    /// being reported are collected into the outcome's `passed` on the way. After a resume, stops wait for the
    /// adapter's `continued` for it (at most [`CONTINUED_WITHIN`]) where the adapter announces resumes.
    pub async fn wait_stop(&self, after: Option<u64>, deadline: Instant) -> Option<Outcome> {
        let mut rx = self.shared.changed.subscribe();
        let mut passed = Vec::new();
        // Stops are held until the announcement, [`CONTINUED_WITHIN`] or the caller's deadline, whichever comes
        // first: a stop queued by then is still reported, never left behind an E_TIMEOUT.
        let mut hold_until: Option<Instant> = None;
        loop {
            let holding = {
                let mut st = self.shared.state();
                let awaited = st.awaiting_continued.is_some()
                    && st.announces_continued
                    && !matches!(st.run, Run::Terminated);
                let holding = awaited
                    && Instant::now()
                        < *hold_until.get_or_insert_with(|| {
                            (Instant::now() + CONTINUED_WITHIN).min(deadline)
                        });
                // Not announced in time: this resume's stops, and the next wait's, are not held for it.
                if awaited && !holding {
                    st.awaiting_continued = None;
                    tracing::debug!(session = %self.id, "a resume went unannounced; its stops are taken as they are");
                }
                if let Some(n) = after {
                    // Stops from before the resume request were reported by `resuming` (none are left).
                    while st.pending.front().is_some_and(|s| s.seq <= n) {
                        st.pending.pop_front();
                    }
                }
                let next = if holding { None } else { take_pending(&mut st) };
                match next {
                    Some(Outcome::Stopped {
                        stop, passed: p, ..
                    }) => {
                        passed.extend(p);
                        drop(st);
                        self.shared.bump();
                        return Some(Outcome::Stopped {
                            stop,
                            passed,
                            repeated: false,
                        });
                    }
                    Some(Outcome::Terminated {
                        exit_code,
                        passed: p,
                    }) => {
                        passed.extend(p);
                        return Some(Outcome::Terminated { exit_code, passed });
                    }
                    None => {}
                }
                match (&st.run, &st.current) {
                    (Run::Paused { .. }, Some(stop)) if after.is_none() && !holding => {
                        return Some(Outcome::Stopped {
                            stop: stop.clone(),
                            passed,
                            repeated: true,
                        });
                    }
                    (Run::Terminated, _) => {
                        return Some(Outcome::Terminated {
                            exit_code: st.exit_code,
                            passed,
                        });
                    }
                    _ => {}
                }
                holding
            };
            let until = match hold_until {
                Some(t) if holding => t,
                _ => deadline,
            };
            match tokio::time::timeout_at(until, rx.changed()).await {
                Ok(Ok(())) => {}
                // The hold is over: one more look takes what is queued.
                Err(_) if holding => {}
                // The sender lives as long as the session; no change can come after it is gone.
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }

    /// Takes the next unreported stop (it becomes the current pause), if one is queued.
    pub fn next_pending(&self) -> Option<Outcome> {
        let outcome = take_pending(&mut self.shared.state());
        if outcome.is_some() {
            self.shared.bump();
        }
        outcome
    }

    /// Stops queued and not yet reported.
    pub fn pending_stops(&self) -> usize {
        self.shared.state().pending.len()
    }

    /// Resolves once the session has ended (the program terminated or the adapter went away).
    pub fn ended(&self) -> impl Future<Output = ()> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        let mut rx = self.shared.changed.subscribe();
        async move {
            loop {
                if matches!(shared.state().run, Run::Terminated) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        }
    }

    /// Waits until the adapter sent `initialized`.
    pub async fn wait_initialized(&self, deadline: Instant) -> bool {
        let mut rx = self.shared.changed.subscribe();
        loop {
            {
                let st = self.shared.state();
                if st.initialized {
                    return true;
                }
                if st.closed.is_some() {
                    return false;
                }
            }
            if !matches!(
                tokio::time::timeout_at(deadline, rx.changed()).await,
                Ok(Ok(()))
            ) {
                return false;
            }
        }
    }

    /// Records references handed to the agent during this stop.
    pub fn remember_refs(&self, refs: impl IntoIterator<Item = i64>) {
        remember_bounded(&mut self.shared.state().refs, refs);
    }

    /// `E_STALE_REFERENCE` unless `reference` was handed out during the current stop.
    pub fn check_ref(&self, reference: i64) -> Result<(), ScriptError> {
        if self.shared.state().refs.contains(&reference) {
            Ok(())
        } else {
            Err(ScriptError::new(
                "E_STALE_REFERENCE",
                format!(
                    "variablesReference {reference} is not from the current stop (the program resumed since, or it was never listed)"
                ),
            ))
        }
    }

    pub fn closed_reason(&self) -> Option<String> {
        self.shared.state().closed.clone()
    }

    pub fn keep(&self, companion: Companion) {
        {
            let mut left = lock(&self.leftovers);
            match &companion {
                Companion::Process(server) => left.groups.extend(server.pid()),
                Companion::Dir(dir) => left.dirs.push(dir.path().to_path_buf()),
                Companion::Parent(p) => {
                    let theirs = lock(&p.leftovers);
                    left.groups.extend(&theirs.groups);
                    left.dirs.extend(theirs.dirs.iter().cloned());
                }
            }
        }
        lock(&self.companions).push(companion);
    }

    /// Whether everything the session started has been ended.
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Kills, without asking, every process group this session and its parent started and removes their socket
    /// directories: for an ending that did not finish in time when the bridge exits. A group already gone may
    /// have had its id taken since; the window is the seconds of one shutdown, as for the adapter's own last
    /// kill (`adapter::spawn`).
    pub fn kill_now(&self) {
        let left = std::mem::take(&mut *lock(&self.leftovers));
        for pgid in left.groups {
            super::adapter::kill_group(Some(pgid));
        }
        for dir in left.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
        self.client.close("the bridge is exiting");
        self.shutdown.cancel();
    }

    /// Ends the adapter (and with it the debuggee), then its parent session and server.
    /// An attached program is detached from, never killed: the bridge did not start it.
    pub async fn terminate(&self) {
        self.end(!self.is_attached()).await;
    }

    /// Whether the session attached to a program it did not start (`request: attach`).
    pub fn is_attached(&self) -> bool {
        self.config.get("request").and_then(Value::as_str) == Some("attach")
    }

    /// Disconnects; the program is ended with it when `terminate_debuggee`, else left running (breakpoints
    /// removed, threads resumed, as adapters do on a detach). Then its companions, and theirs (js-debug's parent
    /// session holds the server and the socket's directory), in the order they were kept.
    /// Returns once all of it is gone: an adapter on stdio has exited and its group was killed after it.
    pub async fn end(&self, terminate_debuggee: bool) {
        self.terminate_own(terminate_debuggee).await;
        let mut rest: VecDeque<Companion> = std::mem::take(&mut *lock(&self.companions)).into();
        while let Some(c) = rest.pop_front() {
            match c {
                Companion::Parent(p) => {
                    p.terminate_own(terminate_debuggee).await;
                    rest.extend(std::mem::take(&mut *lock(&p.companions)));
                }
                Companion::Process(mut child) => super::adapter::kill_server(&mut child).await,
                Companion::Dir(dir) => drop(dir),
            }
        }
        if let Some(process) = self.client.process() {
            process.ended().await;
        }
        self.finished.store(true, Ordering::Release);
    }

    /// Counts the session as ended from now on, before its adapter is (see [`Launching`]).
    pub(super) fn mark_ended(&self) {
        {
            let mut st = self.shared.state();
            st.run = Run::Terminated;
            st.refs.clear();
        }
        self.shared.bump();
    }

    async fn terminate_own(&self, terminate_debuggee: bool) {
        if !self.client.is_closed() {
            let _ = self
                .client
                .request(
                    "disconnect",
                    json!({"terminateDebuggee": terminate_debuggee}),
                    Duration::from_secs(3),
                )
                .await;
        }
        self.client.close("session stopped");
        self.shutdown.cancel();
        self.mark_ended();
    }
}

fn on_event(shared: &Shared, breakpoints: &Mutex<Store>, msg: &Value) {
    let event = msg.get("event").and_then(Value::as_str).unwrap_or("");
    let body = msg.get("body").cloned().unwrap_or(Value::Null);
    let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_owned);
    match event {
        "initialized" => shared.state().initialized = true,
        "stopped" => {
            let thread_id = body.get("threadId").and_then(Value::as_i64).unwrap_or(0);
            {
                let mut st = shared.state();
                st.stepping = None;
                if !st.stopped_threads.insert(thread_id) {
                    st.repeats += 1;
                    return;
                }
            }
            let reason = text("reason").unwrap_or_else(|| "pause".into());
            // debugpy puts the exception type in `text` and its message in `description`: keep both.
            let detail = match (text("text"), text("description")) {
                (Some(t), Some(d)) if t != d && !d.contains(&t) => Some(format!("{t}: {d}")),
                (t, d) => d.or(t),
            };
            if reason == "exception" {
                let message = detail.clone().unwrap_or_else(|| "exception".into());
                shared
                    .journal()
                    .push(now_ms(), "exception", &reason, &message, None);
            } else {
                shared.journal().push(
                    now_ms(),
                    "stopped",
                    &reason,
                    detail.as_deref().unwrap_or(""),
                    None,
                );
            }
            let mut st = shared.state();
            st.stops += 1;
            let stop = Stop {
                seq: st.stops,
                thread_id,
                reason,
                text: detail,
                resumed: false,
            };
            // Not paused yet: the program is paused here now, though the stop is still to be reported. Paused
            // already (at a stop being examined): that pause stands, this stop waits its turn.
            if !matches!(st.run, Run::Paused { .. } | Run::Terminated) {
                st.run = stop.run();
                st.current = Some(stop.clone());
                st.refs.clear();
            }
            if st.pending.len() >= MAX_PENDING_STOPS {
                st.pending.pop_front();
                st.dropped_stops += 1;
            }
            st.pending.push_back(stop);
        }
        "continued" => {
            let thread = body.get("threadId").and_then(Value::as_i64);
            let all = body.get("allThreadsContinued").and_then(Value::as_bool) != Some(false);
            let mut st = shared.state();
            let hits = |t: i64| all || thread == Some(t);
            // Only a `continued` that covers the thread we resumed announces our resume.
            if st.awaiting_continued.is_some_and(hits) {
                st.awaiting_continued = None;
                st.announces_continued = true;
            }
            for s in st.pending.iter_mut().filter(|s| hits(s.thread_id)) {
                s.resumed = true;
            }
            if st.stepping.is_none() || st.stepping != thread {
                st.stopped_threads.retain(|t| !hits(*t));
            }
            if let Run::Paused { thread_id, .. } = st.run
                && hits(thread_id)
            {
                st.run = Run::Running;
                st.current = None;
                st.refs.clear();
            }
        }
        "output" => {
            let category = text("category").unwrap_or_else(|| "console".into());
            let output = text("output").unwrap_or_default();
            let source = body
                .pointer("/source/path")
                .and_then(Value::as_str)
                .map(|p| {
                    (
                        p.to_owned(),
                        body.get("line").and_then(Value::as_u64).unwrap_or(0),
                    )
                });
            shared
                .journal()
                .push(now_ms(), "output", &category, &output, source);
        }
        "exited" => {
            let code = body.get("exitCode").and_then(Value::as_i64);
            shared.state().exit_code = code;
            shared.journal().push(
                now_ms(),
                "exited",
                "exit",
                &format!("exit code {}", code.unwrap_or(-1)),
                None,
            );
        }
        "terminated" => {
            let mut st = shared.state();
            st.run = Run::Terminated;
            st.refs.clear();
        }
        "breakpoint" => lock(breakpoints).on_event(&body),
        _ => return,
    }
    shared.bump();
}

impl Stop {
    fn run(&self) -> Run {
        Run::Paused {
            thread_id: self.thread_id,
            reason: self.reason.clone(),
            text: self.text.clone(),
        }
    }
}

/// The next unreported stop whose thread is still paused, which becomes the current pause, with the resumed
/// ones before it as `passed`; once the session ended, `Terminated` with every queued stop as passed. `None`:
/// nothing to report yet (stops already resumed stay queued until a live one or the end comes after them).
fn take_pending(st: &mut State) -> Option<Outcome> {
    if matches!(st.run, Run::Terminated) {
        if st.pending.is_empty() {
            return None;
        }
        return Some(Outcome::Terminated {
            exit_code: st.exit_code,
            passed: st.pending.drain(..).collect(),
        });
    }
    let live = st.pending.iter().position(|s| !s.resumed)?;
    let mut passed: Vec<Stop> = st.pending.drain(..=live).collect();
    let stop = passed.pop()?;
    if st.current.as_ref().is_none_or(|c| c.seq != stop.seq) {
        st.refs.clear();
    }
    st.run = stop.run();
    st.current = Some(stop.clone());
    Some(Outcome::Stopped {
        stop,
        passed,
        repeated: false,
    })
}

/// Adds the positive references to `set`, at most [`MAX_REFS`] in all: an adapter that hands out endless
/// references (a huge array expanded) cannot grow it without bound; past it a reference reads as stale.
fn remember_bounded(set: &mut HashSet<i64>, refs: impl IntoIterator<Item = i64>) {
    for r in refs {
        if r > 0 && set.len() < MAX_REFS {
            set.insert(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ending that does not finish within the shutdown's limit has what its session started killed at once,
    /// before the process exits (here: its runtime is dropped right after, as at the end of `main`): the whole
    /// process group of the adapter, not only the adapter, and the socket directory. The adapter is a shell that
    /// speaks no DAP and runs a `sleep` in its group, as an adapter runs its debuggee; its ending never finishes.
    #[test]
    #[allow(clippy::unwrap_used, clippy::expect_used)]
    fn past_the_limit_an_unfinished_ending_has_its_groups_killed_and_directories_removed() {
        let tmp = std::env::temp_dir().join(format!("dap-kill-now-{}", std::process::id()));
        let dir = tmp.join("socket-dir");
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = tmp.join("debuggee.pid");
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let mut adapter = tokio::process::Command::new("sh");
            adapter.arg("-c").arg(format!(
                "sleep 600 </dev/null >/dev/null 2>&1 & echo $! > '{}'; exec sleep 600",
                pid_file.display()
            ));
            let s = Session::open(
                "t".into(),
                AdapterKind::Debugpy,
                json!({}),
                Link::Child(adapter),
                Arc::new(Mutex::new(Store::default())),
            )
            .await
            .unwrap();
            while std::fs::read_to_string(&pid_file).map_or(true, |p| !p.ends_with('\n')) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            lock(&s.leftovers).dirs.push(dir.clone());
            let endings = super::super::ending::Endings::default();
            endings.stalled(&s);
            endings.finish(Duration::from_millis(50)).await;
        });
        drop(rt);
        assert!(!dir.exists(), "the directory is removed");
        let debuggee: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let alive = || {
            std::fs::read_to_string(format!("/proc/{debuggee}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .is_some_and(|state| state != "Z" && state != "X")
            })
        };
        let begun = std::time::Instant::now();
        while alive() {
            if begun.elapsed() > Duration::from_secs(60) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(debuggee as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                panic!("the debuggee {debuggee} in the adapter's group outlived the bridge");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir_all(&tmp);
    }

    #[test]
    fn remembered_references_stop_at_the_bound_and_only_positive_ones_count() {
        let mut set = HashSet::new();
        remember_bounded(&mut set, [0, -3, 7]);
        assert_eq!(set.len(), 1);
        remember_bounded(&mut set, 1..(MAX_REFS as i64 + 50));
        assert_eq!(set.len(), MAX_REFS);
        assert!(!set.contains(&(MAX_REFS as i64 + 10)));
    }
}
