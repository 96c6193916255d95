//! `ccsim`: a simulated CC:Tweaked computer that runs the real Lua client in an embedded Lua 5.2 (mlua,
//! vendored), so the bridge is tested against the code players install.
//!
//! Which real behaviour each part copies (the facts and their upstream files: docs/protocols/computercraft.md;
//! CC's ROM is not copied):
//! * this file: the computer's executor (§1): one top-level coroutine resumed with one event at a time,
//!   honouring the filter it yielded (`CobaltLuaMachine`: non-matching events are dropped, except
//!   `terminate`); an event queue that silently drops events beyond 256 (`ComputerExecutor.QUEUE_LIMIT`),
//!   timer events included; timers rounded to 50 ms ticks; "Too long without yielding" thrown once per resume
//!   after 7 s and a hard abort 1.5 s later (`TimeoutState`); `os.reboot()` tearing down the Lua state and its
//!   websockets and booting again.
//! * `os.rs`: the `os` API (§1, §2) and the native terminal (§4), a 51×19 grid whose writes are also logged.
//! * `prelude.lua`: bios and ROM Lua (§1, §3, §4): `os.pullEvent`, `sleep` discarding other events,
//!   `term.redirect`, word-wrapping `write`, `textutils.pagedPrint` waiting for a key, `parallel`, `loadfile`
//!   and `os.run`, `require`/`package` per program, the shell (programs get `shell`/`require`/`package` in
//!   their environment, not in `_G`; `terminate` at the prompt ends it; `exit`; startup before the first
//!   prompt; shutdown when the first shell ends), the synchronous `http.websocket`/`http.get` loops, turtle
//!   commands yielding for `turtle_response`.
//! * `json.rs`: `textutils` JSON quirks (§6). `fs.rs`: the `fs` API (§7). `net.rs`: `http.websocket` on a real
//!   WebSocket connection (§5: frame limit 128 KiB both ways, URL-keyed events, max 4 sockets, pings answered
//!   by the runtime whether or not Lua still reads the socket, as tungstenite does while the socket task
//!   runs). `world.rs`: turtle, peripherals, redstone (§8).
//!
//! What it cannot model is listed in §9 of that page.

#![allow(dead_code)]

pub mod fs;
pub mod json;
pub mod natives;
pub mod net;
mod os;
pub mod world;

use mlua::thread::ThreadStatus;
use mlua::{
    Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Thread, Value, VmState,
};
use serde_json::Value as Json;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[allow(unused_imports)]
pub use world::{Peripheral, Turtle, World};

/// `ComputerExecutor.QUEUE_LIMIT`.
pub const QUEUE_LIMIT: usize = 256;
/// `TimeoutState.TIMEOUT`.
const YIELD_TIMEOUT: Duration = Duration::from_secs(7);
/// `TimeoutState.ABORT_TIMEOUT`: after the soft abort, how long before the computer is stopped.
const ABORT_TIMEOUT: Duration = Duration::from_millis(1500);
const TICK: Duration = Duration::from_millis(50);

/// The client as shipped.
pub const CLIENT_LUA: &str = include_str!("../../../lua/client.lua");
const PRELUDE: &str = include_str!("prelude.lua");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimKind {
    Computer,
    Turtle,
    Pocket,
}

#[derive(Debug, Clone)]
pub struct SimConfig {
    pub id: u32,
    pub label: Option<String>,
    pub kind: SimKind,
    /// The computer's file system; created if missing.
    pub root: PathBuf,
    /// What the player runs when there is no `startup.lua`: Lua source run by the first shell before its
    /// prompt, like a program (its environment has `shell`, `require`, `package`).
    pub command: Option<String>,
    pub world: World,
    /// How long a turtle command takes before its `turtle_response` (CC: a few ticks).
    pub turtle_delay: Duration,
    /// "Too long without yielding" after this long in one resume (CC: 7 s).
    pub yield_timeout: Duration,
    /// When set, the same rule counted in Lua VM instructions per resume instead of time: the soft abort
    /// after this many, the hard abort after twice as many. A deterministic budget for tests, whatever the
    /// load on the machine (CC's rule is time; a small instruction budget stands for a slow computer).
    pub yield_instructions: Option<u64>,
    /// The computer's disk space (`computer_space_limit`, CC: 1,000,000 bytes).
    pub space_limit: u64,
}

impl SimConfig {
    pub fn new(id: u32, root: impl Into<PathBuf>) -> Self {
        Self {
            id,
            label: None,
            kind: SimKind::Computer,
            root: root.into(),
            command: None,
            world: World::default(),
            turtle_delay: Duration::from_millis(100),
            yield_timeout: YIELD_TIMEOUT,
            yield_instructions: None,
            space_limit: fs::SPACE_LIMIT,
        }
    }

    /// Copies the shipped client into the computer and makes it the player's command.
    pub fn running_client(mut self, link_url: &str, token: Option<&str>) -> Self {
        let dir = self.root.join("mcp");
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join("client.lua"), CLIENT_LUA);
        let token = token.map_or("nil".to_string(), |t| format!("{t:?}"));
        self.command = Some(format!(
            "shell.run('/mcp/client.lua', {link_url:?}, {token})"
        ));
        self
    }
}

/// A value in a queued event, independent of any Lua state.
#[derive(Debug, Clone)]
pub enum Ev {
    Nil,
    Bool(bool),
    Num(f64),
    Str(Vec<u8>),
    Json(Json),
    /// Becomes a websocket handle table for this URL.
    WsHandle(String),
    /// Becomes an HTTP response handle.
    Http {
        code: u16,
        body: Vec<u8>,
    },
}

impl From<&str> for Ev {
    fn from(s: &str) -> Self {
        Ev::Str(s.as_bytes().to_vec())
    }
}

pub type Event = Vec<Ev>;

pub struct Shared {
    pub cfg: SimConfig,
    pub label: Option<String>,
    pub world: World,
    queue: VecDeque<Event>,
    pub dropped_events: u64,
    timers: BTreeMap<u64, Instant>,
    delayed: Vec<(Instant, Event)>,
    next_timer: u64,
    pub output: String,
    pub screen: os::Screen,
    booted_at: Instant,
    reboot: bool,
    /// Bumped on every boot so callbacks from the previous boot's sockets are ignored.
    pub generation: u64,
    pub sockets: BTreeMap<String, net::SocketCmd>,
    pub boots: u32,
    pub halted: Option<String>,
    turtle_ongoing: usize,
    /// Largest WebSocket message received from / sent to the bridge, in bytes.
    pub max_frame_in: usize,
    pub max_frame_out: usize,
}

impl Shared {
    /// Queues an event the way CC does: silently dropped once 256 are waiting.
    pub fn push(&mut self, ev: Event) {
        if self.queue.len() >= QUEUE_LIMIT {
            self.dropped_events += 1;
        } else {
            self.queue.push_back(ev);
        }
    }

    /// Whether a WebSocket message containing `needle` is queued and not yet taken by the computer: lets a
    /// test know a frame reached a computer that is busy (not yielding) before it lets it go on.
    pub fn queued_message(&self, needle: &str) -> bool {
        self.queue.iter().any(|ev| {
            matches!(ev.first(), Some(Ev::Str(name)) if name == b"websocket_message")
                && matches!(ev.get(2), Some(Ev::Str(body))
                    if body.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
    }

    fn fire_due(&mut self, now: Instant) {
        let due: Vec<u64> = self
            .timers
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.timers.remove(&id);
            self.push(vec!["timer".into(), Ev::Num(id as f64)]);
        }
        let mut later = Vec::new();
        for (at, ev) in std::mem::take(&mut self.delayed) {
            if at <= now {
                if ev
                    .first()
                    .is_some_and(|e| matches!(e, Ev::Str(s) if s == b"turtle_response"))
                {
                    self.turtle_ongoing = self.turtle_ongoing.saturating_sub(1);
                }
                self.push(ev);
            } else {
                later.push((at, ev));
            }
        }
        self.delayed = later;
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.timers
            .values()
            .chain(self.delayed.iter().map(|(at, _)| at))
            .min()
            .copied()
    }
}

/// Controls a running simulated computer. Dropping it does not stop the computer; call [`SimHandle::stop`].
#[derive(Clone)]
pub struct SimHandle {
    pub shared: Arc<Mutex<Shared>>,
    wake: Arc<Notify>,
    stop: CancellationToken,
    pub done: Arc<Notify>,
}

fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SimHandle {
    pub fn state(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }

    /// Queues an event as if the world caused it (redstone change, peripheral attached, ...).
    pub fn queue_event(&self, ev: Event) {
        self.state().push(ev);
        self.wake.notify_one();
    }

    pub fn output(&self) -> String {
        self.state().output.clone()
    }

    /// The player typing a line at the computer's keyboard and pressing Enter (`char` events, then `key`
    /// with GLFW's code for Enter, 257, as CC:T ≥ 1.16 sends).
    pub fn type_line(&self, line: &str) {
        let mut s = self.state();
        for c in line.chars() {
            s.push(vec!["char".into(), Ev::Str(c.to_string().into_bytes())]);
        }
        s.push(vec!["key".into(), Ev::Num(257.0), Ev::Bool(false)]);
        drop(s);
        self.wake.notify_one();
    }

    /// The player holding Ctrl+T: CC queues a `terminate` event.
    pub fn terminate(&self) {
        self.queue_event(vec!["terminate".into()]);
    }

    /// What the screen shows now, one string per row.
    pub fn screen(&self) -> Vec<String> {
        self.state().screen.rows()
    }

    pub fn reboot(&self) {
        self.state().reboot = true;
        self.wake.notify_one();
    }

    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Waits until `cond` holds on the shared state, re-checking every 20 ms, for at most `limit`.
    pub async fn wait_for(&self, limit: Duration, cond: impl Fn(&Shared) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if cond(&self.state()) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (for at most `limit`) until the computer has made the file `name` in its root, which is how a
    /// test's Lua says it got somewhere; panics with `what` and the computer's output if it never does.
    pub async fn wait_file(&self, limit: Duration, name: &str, what: &str) {
        let path = self.state().cfg.root.join(name);
        assert!(
            self.wait_for(limit, |_| path.exists()).await,
            "{what}: {}",
            self.output()
        );
    }
}

/// Starts a simulated computer on the current tokio runtime.
pub fn spawn(cfg: SimConfig) -> SimHandle {
    let _ = std::fs::create_dir_all(&cfg.root);
    let shared = Arc::new(Mutex::new(Shared {
        label: cfg.label.clone(),
        world: cfg.world.clone(),
        cfg,
        queue: VecDeque::new(),
        dropped_events: 0,
        timers: BTreeMap::new(),
        delayed: Vec::new(),
        next_timer: 0,
        output: String::new(),
        screen: os::Screen::default(),
        booted_at: Instant::now(),
        reboot: false,
        generation: 0,
        sockets: BTreeMap::new(),
        boots: 0,
        halted: None,
        turtle_ongoing: 0,
        max_frame_in: 0,
        max_frame_out: 0,
    }));
    let handle = SimHandle {
        shared,
        wake: Arc::new(Notify::new()),
        stop: CancellationToken::new(),
        done: Arc::new(Notify::new()),
    };
    let h = handle.clone();
    let root = TempRoot(h.state().cfg.root.clone());
    tokio::spawn(async move {
        // Dropped when the computer stops or the test's runtime shuts down, whichever comes first.
        let _root = root;
        drive(&h).await;
        let mut s = h.state();
        for (_, sock) in std::mem::take(&mut s.sockets) {
            sock.close();
        }
        drop(s);
        h.done.notify_waiters();
    });
    handle
}

async fn drive(h: &SimHandle) {
    // When the current resume started, whether it has had its soft abort, and the instructions it ran.
    let started = Arc::new(Mutex::new((Instant::now(), false, 0u64)));
    'boot: loop {
        let (lua, main) = {
            let mut s = h.state();
            s.generation += 1;
            s.boots += 1;
            s.queue.clear();
            s.timers.clear();
            s.delayed.clear();
            s.turtle_ongoing = 0;
            s.reboot = false;
            s.halted = None;
            s.booted_at = Instant::now();
            s.screen = os::Screen::default();
            for (_, sock) in std::mem::take(&mut s.sockets) {
                sock.close();
            }
            drop(s);
            match boot(h, &started) {
                Ok(pair) => pair,
                Err(e) => {
                    h.state().halted = Some(format!("boot failed: {e}"));
                    return;
                }
            }
        };
        let mut filter: Option<Vec<u8>> = None;
        let mut first = true;
        loop {
            if h.stop.is_cancelled() {
                return;
            }
            if h.state().reboot {
                continue 'boot;
            }
            let ev = {
                let mut s = h.state();
                s.fire_due(Instant::now());
                if first {
                    Some(Vec::new())
                } else {
                    s.queue.pop_front()
                }
            };
            let Some(ev) = ev else {
                let next = h.state().next_deadline();
                let sleep = async {
                    match next {
                        Some(at) => tokio::time::sleep_until(at.into()).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = h.wake.notified() => {}
                    () = sleep => {}
                    () = h.stop.cancelled() => return,
                }
                continue;
            };
            if main.status() != ThreadStatus::Resumable {
                continue;
            }
            let name = match ev.first() {
                Some(Ev::Str(s)) => Some(s.clone()),
                _ => None,
            };
            let matches = first
                || match (&filter, &name) {
                    (None, _) => true,
                    (Some(f), Some(n)) => f == n || n == b"terminate",
                    (Some(_), None) => false,
                };
            first = false;
            if !matches {
                continue;
            }
            let args = match to_lua_event(&lua, &ev) {
                Ok(a) => a,
                Err(e) => {
                    h.state()
                        .output
                        .push_str(&format!("event conversion failed: {e}\n"));
                    continue;
                }
            };
            *started
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = (Instant::now(), false, 0);
            match resume(&main, args) {
                Ok(yielded) => {
                    filter = match yielded.front() {
                        Some(Value::String(s)) => Some(s.as_bytes().to_vec()),
                        _ => None,
                    };
                    if main.status() == ThreadStatus::Finished {
                        h.state().halted = Some("program finished".into());
                    }
                }
                Err(e) => {
                    let mut s = h.state();
                    s.output.push_str(&format!("{e}\n"));
                    s.halted = Some(e.to_string());
                }
            }
        }
    }
}

/// One resume of the top-level coroutine, which runs as long as the Lua does before it yields (a loop that never
/// yields: until CC's abort). CC runs Lua on a thread of its own; here it runs on a runtime worker, so on a
/// multi-threaded runtime the worker's other tasks are handed to another thread meanwhile (`block_in_place`).
/// Without that, a task parked on this worker waited for the loop: a test's cancel reached the computer only
/// once CC's abort ended the loop.
fn resume(main: &Thread, args: MultiValue) -> mlua::Result<MultiValue> {
    let flavor = tokio::runtime::Handle::current().runtime_flavor();
    if flavor == tokio::runtime::RuntimeFlavor::MultiThread {
        tokio::task::block_in_place(|| main.resume::<MultiValue>(args))
    } else {
        main.resume::<MultiValue>(args)
    }
}

/// Builds a fresh Lua state with the CC shim and the top-level coroutine (bios + shell).
type ResumeClock = Arc<Mutex<(Instant, bool, u64)>>;

fn boot(h: &SimHandle, started: &ResumeClock) -> mlua::Result<(Lua, Thread)> {
    let lua = Lua::new_with(
        StdLib::COROUTINE | StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::BIT,
        LuaOptions::default(),
    )?;
    let g = lua.globals();
    // Cobalt has neither of these.
    g.set("collectgarbage", Value::Nil)?;
    let string: Table = g.get("string")?;
    string.set("dump", Value::Nil)?;
    let (cfg, generation) = {
        let s = h.state();
        (s.cfg.clone(), s.generation)
    };
    g.set("_HOST", "ComputerCraft 1.113.1 (ccsim)")?;
    os::install_os(&lua, h)?;
    let textutils = lua.create_table()?;
    g.set("textutils", textutils.clone())?;
    fs::install(&lua, cfg.root.clone(), cfg.space_limit)?;
    let sim = lua.create_table()?;
    sim.set(
        "kind",
        match cfg.kind {
            SimKind::Computer => "computer",
            SimKind::Turtle => "turtle",
            SimKind::Pocket => "pocket",
        },
    )?;
    os::install_output(&lua, &sim, h)?;
    net::install(&lua, &sim, h, generation)?;
    natives::install_world(&lua, &sim, h)?;
    if let Some(command) = &cfg.command {
        sim.set("command", command.as_str())?;
    }
    g.set("_SIM", sim)?;
    let f: Function = lua.load(PRELUDE).set_name("=prelude").call(())?;
    let make_ws: Function = lua.globals().get::<Table>("_SIM")?.get("make_ws_handle")?;
    lua.set_named_registry_value("ccsim_make_ws", make_ws)?;
    json::install(&lua, &textutils)?;
    g.set("_SIM", Value::Nil)?;
    // Set before the top-level thread exists: mlua gives its global hook to threads created after it, and
    // coroutines inherit it. CobaltLuaMachine: the soft abort ("Too long without yielding") is thrown once per resume, so code
    // that catches it runs on; TimeoutState.ABORT_TIMEOUT (1.5 s) later the computer is hard-aborted.
    // The budget counts from the top-level resume: a yield that stays inside the computer's own coroutines
    // (a parent resuming its child at once) does not reset it; only a yield back to the executor does.
    let hook_start = started.clone();
    let (yield_timeout, yield_instructions) = {
        let s = h.state();
        (s.cfg.yield_timeout, s.cfg.yield_instructions)
    };
    let every = yield_instructions.map_or(20_000, |n| (n / 20).clamp(100, 20_000));
    let hook_handle = h.clone();
    lua.set_global_hook(
        HookTriggers::new().every_nth_instruction(u32::try_from(every).unwrap_or(20_000)),
        move |_, _| {
            let mut st = hook_start
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            st.2 += every;
            let elapsed = st.0.elapsed();
            let (soft, hard) = match yield_instructions {
                Some(n) => (st.2 > n, st.2 > 2 * n),
                None => (
                    elapsed > yield_timeout,
                    elapsed > yield_timeout + ABORT_TIMEOUT,
                ),
            };
            if hard {
                hook_handle.state().halted = Some("hard abort".into());
                hook_handle.stop.cancel();
                return Err(mlua::Error::runtime("Too long without yielding"));
            }
            if soft && !st.1 {
                st.1 = true;
                return Err(mlua::Error::runtime("Too long without yielding"));
            }
            Ok(VmState::Continue)
        },
    )?;
    let main = lua.create_thread(f)?;
    Ok((lua, main))
}

fn to_lua_event(lua: &Lua, ev: &Event) -> mlua::Result<MultiValue> {
    ev.iter()
        .map(|e| {
            Ok(match e {
                Ev::Nil => Value::Nil,
                Ev::Bool(b) => Value::Boolean(*b),
                Ev::Num(n) => Value::Number(*n),
                Ev::Str(s) => Value::String(lua.create_string(s)?),
                Ev::Json(j) => natives::from_json(lua, j)?,
                Ev::WsHandle(url) => {
                    let make: Function = lua.named_registry_value("ccsim_make_ws")?;
                    make.call::<Value>(url.as_str())?
                }
                Ev::Http { code, body } => net::http_handle(lua, *code, body.clone())?,
            })
        })
        .collect()
}

/// Removes a computer's directory made by [`temp_root`] when the computer is gone.
struct TempRoot(PathBuf);

impl Drop for TempRoot {
    fn drop(&mut self) {
        let ours = self.0.starts_with(std::env::temp_dir())
            && self
                .0
                .components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with("ccsim-"));
        if ours {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A fresh, empty directory under the system temp dir for one simulated computer.
pub fn temp_root(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ccsim-{}-{}-{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

pub fn read_file(root: &Path, path: &str) -> Option<Vec<u8>> {
    std::fs::read(root.join(path)).ok()
}
