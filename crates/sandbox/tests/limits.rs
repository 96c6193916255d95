//! Where a sandbox's cgroups live (under the bridge's own cgroup, gone with the sandbox, a crashed run's
//! found at start), what a create may ask for (checked against the host and the configured maxima), and
//! how a timeout or kill_process ends a program's whole tree (its own cgroup, setsid or not).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use support::{descendants, eventually, start};

/// controller -> this process's cgroup path in that hierarchy (v1 lines; `""` is the v2 hierarchy).
fn own_cgroups(pid: &str) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        for c in controllers.split(',') {
            out.insert(c.to_string(), path.to_string());
        }
    }
    out
}

/// The mount point of the v1 hierarchy holding `controller`.
fn mount_of(controller: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        let (fstype, _, opts) = (r.next()?, r.next()?, r.next()?);
        (fstype == "cgroup" && opts.split(',').any(|o| o == controller))
            .then(|| PathBuf::from(left.split_whitespace().nth(4).unwrap()))
    })
}

fn root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn under(path: &str, own: &str) -> bool {
    let own = own.trim_end_matches('/');
    path.starts_with(&format!("{own}/")) && path.len() > own.len() + 1
}

fn enforced_cgroups(h: &support::Harness, id: &str) -> Vec<PathBuf> {
    h.manager.get(id).unwrap().instance.hello.enforced["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| PathBuf::from(v.as_str().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_s_cgroups_are_under_the_bridge_s_own_and_go_with_it() {
    assert!(root(), "these tests run as root, as CI does");
    let own = own_cgroups("self");
    let h = start(&[]).await;
    let id = h.create().await;
    let launcher = h.launcher_pid(&id);
    let mut pids = descendants(launcher);
    pids.push(launcher);
    let dirs = enforced_cgroups(&h, &id);
    for controller in ["memory", "pids", "cpu"] {
        let Some(mount) = mount_of(controller) else {
            continue;
        };
        let own_dir = mount.join(own[controller].trim_start_matches('/'));
        let dir = dirs
            .iter()
            .find(|d| d.starts_with(&mount))
            .unwrap_or_else(|| panic!("no {controller} group among {dirs:?}"));
        assert!(
            dir.starts_with(own_dir.join("mcp-bridges-sandbox")),
            "{controller}: {} is not under the bridge's own {}",
            dir.display(),
            own_dir.display()
        );
        for pid in &pids {
            let theirs = own_cgroups(&pid.to_string());
            assert!(
                under(&theirs[controller], &own[controller]),
                "{controller}: sandbox process {pid} is in {}, not under the bridge's {}",
                theirs[controller],
                own[controller]
            );
        }
    }
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    for d in &dirs {
        assert!(!d.exists(), "{} left behind", d.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_run_s_groups_under_the_bridge_s_cgroup_are_removed_at_start() {
    assert!(root(), "these tests run as root, as CI does");
    let own = own_cgroups("self");
    let mount = mount_of("memory").expect("a memory hierarchy");
    // A pid that is surely dead: a child we reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    let parent = mount
        .join(own["memory"].trim_start_matches('/'))
        .join("mcp-bridges-sandbox");
    let orphan = parent.join(format!("{gone}-crashed"));
    let nested = orphan.join("p7");
    std::fs::create_dir_all(&nested).unwrap();
    let h = start(&[]).await;
    // Tests run in parallel in the same cgroup: the sweep that took it may be another test's start.
    assert!(!orphan.exists(), "{} left behind", orphan.display());
    drop(h);
}

/// Half of MemTotal in MiB: the default SANDBOX_MAX_MEMORY_MIB.
fn half_the_host_s_memory() -> u64 {
    host_memory() / 2
}

/// MemTotal in MiB.
fn host_memory() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib / 1024
}

fn cpus() -> u32 {
    std::thread::available_parallelism().unwrap().get() as u32
}

/// The sandbox groups of this process under its own cgroups.
fn our_groups() -> Vec<PathBuf> {
    let own = own_cgroups("self");
    let prefix = format!("{}-", std::process::id());
    let mut found = Vec::new();
    for controller in ["memory", "pids", "cpu"] {
        let Some(mount) = mount_of(controller) else {
            continue;
        };
        let parent = mount
            .join(own[controller].trim_start_matches('/'))
            .join("mcp-bridges-sandbox");
        if let Ok(rd) = std::fs::read_dir(parent) {
            found.extend(
                rd.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                    .map(|e| e.path()),
            );
        }
    }
    found.sort();
    found
}

/// A refused create: E_INVALID_ARGUMENT naming `field` and `limit`, and nothing made.
async fn assert_refused(h: &support::Harness, args: serde_json::Value, field: &str, limit: u64) {
    let before = our_groups();
    let r = h.call("create_sandbox", args.clone()).await;
    let e = support::error_of(&r);
    assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{args}: {e}");
    let text = e["message"].as_str().unwrap();
    assert!(
        text.contains(&format!("`{field}`")) && text.contains(&format!("at most {limit}")),
        "{args}: the message names the field and the limit: {text}"
    );
    assert_eq!(e["details"]["field"], field, "{e}");
    assert_eq!(e["details"]["limit"], limit, "{e}");
    assert!(h.manager.is_empty(), "{args}: a sandbox was made");
    // (A spec once created is kept warm by the pool: its groups were there before.)
    assert_eq!(our_groups(), before, "{args}: groups were made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_beyond_half_the_host_is_refused_by_default() {
    let limit = half_the_host_s_memory();
    assert!(limit < 65_536, "this test wants a host under 128 GiB");
    let h = start(&[]).await;
    assert_refused(&h, json!({"memory_mib": 65_536}), "memory_mib", limit).await;
    assert_refused(&h, json!({"memory_mib": limit + 1}), "memory_mib", limit).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_memory_maximum_is_refused_above_and_given_at() {
    let h = start(&["--sandbox-max-memory-mib", "1024"]).await;
    assert_refused(&h, json!({"memory_mib": 1025}), "memory_mib", 1024).await;
    let out = h.ok("create_sandbox", json!({"memory_mib": 1024})).await;
    let id = out["sandbox_id"].as_str().unwrap();
    let memory = enforced_cgroups(&h, id)
        .into_iter()
        .find(|d| d.join("memory.limit_in_bytes").exists())
        .expect("a memory group");
    let bytes = std::fs::read_to_string(memory.join("memory.limit_in_bytes")).unwrap();
    assert_eq!(bytes.trim(), (1024u64 << 20).to_string());
    let r = h
        .sh(id, "head -c 700000000 /dev/zero | tail -c 1 | wc -c")
        .await;
    assert_eq!(
        r["stdout"], "1\n",
        "700 MB passes through a 1 GiB sandbox: {r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vcpus_beyond_the_host_or_the_maximum_are_refused_and_the_maximum_given() {
    let n = cpus();
    let h = start(&[]).await;
    assert_refused(&h, json!({"vcpu_count": n + 1}), "vcpu_count", u64::from(n)).await;
    let out = h.ok("create_sandbox", json!({"vcpu_count": n})).await;
    let id = out["sandbox_id"].as_str().unwrap();
    let cpu = enforced_cgroups(&h, id)
        .into_iter()
        .find(|d| d.join("cpu.cfs_quota_us").exists())
        .expect("a cpu group");
    let quota = std::fs::read_to_string(cpu.join("cpu.cfs_quota_us")).unwrap();
    assert_eq!(quota.trim(), (u64::from(n) * 100_000).to_string());
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;

    let h = start(&["--sandbox-max-vcpus", "1"]).await;
    if n >= 2 {
        assert_refused(&h, json!({"vcpu_count": 2}), "vcpu_count", 1).await;
    }
    h.ok("create_sandbox", json!({"vcpu_count": 1})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_beyond_the_host_or_the_maxima_stop_the_bridge_naming_them() {
    let host = host_memory();
    for (flags, says) in [
        (
            vec![
                "--sandbox-max-memory-mib".to_string(),
                (host + 1).to_string(),
            ],
            format!(
                "SANDBOX_MAX_MEMORY_MIB is {}; this host has {host} MiB",
                host + 1
            ),
        ),
        (
            vec!["--sandbox-max-vcpus".to_string(), (cpus() + 1).to_string()],
            format!(
                "SANDBOX_MAX_VCPUS is {}; this process may run on {}",
                cpus() + 1,
                cpus()
            ),
        ),
        (
            vec![
                "--sandbox-max-memory-mib".into(),
                "256".into(),
                "--sandbox-memory-mib".into(),
                "512".into(),
            ],
            "SANDBOX_MEMORY_MIB is 512; a sandbox may have at most 256 MiB".to_string(),
        ),
        (
            vec![
                "--sandbox-max-memory-mib".into(),
                "300".into(),
                "--sandbox-memory-mib".into(),
                "128".into(),
                "--sandbox-workspace-mib".into(),
                "256".into(),
            ],
            "is 384 MiB of tmpfs in RAM; a sandbox may have at most 300 MiB".to_string(),
        ),
    ] {
        let env = bridge_core::BridgeEnv::new();
        let args = support::args(&support::refs(&flags));
        let e = match bridge_sandbox::start(args, &env).await {
            Ok(_) => panic!("{flags:?} started"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(&says), "{flags:?}: {e}");
    }
}

/// Where the sandbox's /workspace is, as create_sandbox says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_sandbox_says_where_the_workspace_lives() {
    let h = start(&["--sandbox-workspace-mib", "128"]).await;
    let out = h.ok("create_sandbox", json!({})).await;
    assert_eq!(
        out["workspace"],
        json!({"where": "tmpfs in RAM", "mib": 128, "counts_against": "memory"}),
        "{out}"
    );
}

/// Live (not zombie) processes in the sandbox named `comm`, counted from inside through /proc.
async fn live_inside(h: &support::Harness, id: &str, comm: &str) -> String {
    let out = h
        .sh(
            id,
            &format!(
                "cat /proc/[0-9]*/stat 2>/dev/null | awk '$2 == \"({comm})\" && $3 != \"Z\"' | wc -l"
            ),
        )
        .await;
    out["stdout"].as_str().unwrap().trim().to_string()
}

/// Host processes that run `sleep N` with N starting with `prefix` (not a zombie).
fn live_on_host(prefix: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if argv.len() >= 2
            && argv[0] == b"sleep"
            && argv[1].starts_with(prefix.as_bytes())
            && !support::dead(pid)
        {
            found.push(pid);
        }
    }
    found
}

/// `setsid` children (one through a double fork, whose middle process ends at once) outlive the
/// program's process group; a timeout must end them too. `tag` makes the sleeps this test's own.
async fn a_timeout_ends_children_in_new_sessions(extra: &[&str], mode: &str, tag: u32) {
    let h = start(extra).await;
    let id = h.create().await;
    let enforced = &h.manager.get(&id).unwrap().instance.hello.enforced;
    let got = match &enforced["timeout_kill"] {
        serde_json::Value::String(s) => s.clone(),
        other => other["mode"].as_str().unwrap_or_default().to_string(),
    };
    assert_eq!(got, mode, "{enforced:?}");
    let command = format!(
        "setsid sh -c 'sleep {tag}1' & setsid sh -c 'sleep {tag}2' & (setsid sh -c 'sleep {tag}3' &); sleep {tag}4"
    );
    let out = h
        .ok(
            "run_command",
            json!({"sandbox_id": id, "command": command, "timeout_secs": 2}),
        )
        .await;
    assert_eq!(out["timed_out"], true, "{out}");
    all_gone(mode, &tag.to_string(), "the timeout").await;
    no_sleep_inside(&h, &id, mode, "the timeout").await;

    // The same for kill_process of a background process.
    let started = h
        .ok(
            "start_process",
            json!({"sandbox_id": id, "command": command.replace(&format!("sleep {tag}"), &format!("sleep {tag}9"))}),
        )
        .await;
    let needle = format!("{tag}9");
    eventually("the background tree to start", || {
        live_on_host(&needle).len() == 4
    })
    .await;
    h.ok(
        "kill_process",
        json!({"sandbox_id": id, "process_id": started["process_id"]}),
    )
    .await;
    all_gone(mode, &needle, "kill_process").await;
    no_sleep_inside(&h, &id, mode, "kill_process").await;
}

/// No live `sleep` inside the sandbox. In process-tree mode the signals were sent and the host no longer
/// sees the sleeps' command lines, but a sleep that is still exiting keeps its name in `/proc/PID/stat` a
/// moment longer: it is waited for, as [`all_gone`] waits on the host.
async fn no_sleep_inside(h: &support::Harness, id: &str, mode: &str, after: &str) {
    if mode == "cgroup" {
        assert_eq!(
            live_inside(h, id, "sleep").await,
            "0",
            "a sleep survived {after}"
        );
        return;
    }
    // A hang guard, not a claim about speed.
    for _ in 0..600 {
        if live_inside(h, id, "sleep").await == "0" {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("a sleep inside the sandbox survived {after} by 60 s");
}

/// In cgroup mode the answer comes once the group is empty, so nothing may be left at all; in
/// process-tree mode the signals were sent (the processes are dying).
async fn all_gone(mode: &str, prefix: &str, after: &str) {
    if mode == "cgroup" {
        assert_eq!(
            live_on_host(prefix),
            Vec::<u32>::new(),
            "a sleep survived {after}"
        );
    } else {
        eventually(&format!("every sleep to die after {after}"), || {
            live_on_host(prefix).is_empty()
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_or_kill_ends_setsid_children_by_cgroup() {
    assert!(root(), "these tests run as root, as CI does");
    a_timeout_ends_children_in_new_sessions(&[], "cgroup", 4417).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cgroups_a_timeout_or_kill_ends_setsid_children_by_process_tree() {
    a_timeout_ends_children_in_new_sessions(&["--sandbox-cgroups", "false"], "process-tree", 4418)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_s_group_is_inside_the_sandbox_s_and_goes_with_it() {
    let h = start(&[]).await;
    let id = h.create().await;
    h.ok(
        "start_process",
        json!({"sandbox_id": id, "command": "sleep 44191"}),
    )
    .await;
    eventually("the sleep to start", || live_on_host("44191").len() == 1).await;
    let sleep = live_on_host("44191")[0];
    let pids = mount_of("pids").expect("a pids hierarchy");
    let group = own_cgroups(&sleep.to_string())["pids"].clone();
    let dir = pids.join(group.trim_start_matches('/'));
    let sandbox = enforced_cgroups(&h, &id)
        .into_iter()
        .find(|d| d.starts_with(&pids))
        .unwrap();
    assert_eq!(dir.parent(), Some(sandbox.as_path()), "{}", dir.display());
    // A finished program's group goes with it: three commands later only the sleep's is there.
    for _ in 0..3 {
        h.sh(&id, "true").await;
    }
    let groups = || {
        std::fs::read_dir(&sandbox)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().unwrap().is_dir())
            .map(|e| e.path())
            .collect::<Vec<_>>()
    };
    eventually("the finished programs' groups to go", || {
        groups() == [dir.clone()]
    })
    .await;
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    assert!(!sandbox.exists(), "{} left behind", sandbox.display());
}

/// A bridge whose runtime ends with sandboxes alive (a test's end, an exit without SIGTERM's clean-up)
/// leaves no group in its own cgroup: the groups are emptied and removed as the sandboxes drop.
#[test]
fn a_bridge_that_ends_with_live_sandboxes_leaves_no_group() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dirs = rt.block_on(async {
        let h = start(&[]).await;
        let id = h.create().await;
        h.ok(
            "start_process",
            json!({"sandbox_id": id, "command": "sleep 44201"}),
        )
        .await;
        enforced_cgroups(&h, &id)
    });
    assert!(!dirs.is_empty());
    drop(rt);
    let left: Vec<String> = dirs
        .iter()
        .filter(|d| d.exists())
        .map(|d| {
            format!(
                "{} (procs {:?})",
                d.display(),
                std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default()
            )
        })
        .collect();
    assert!(left.is_empty(), "left behind: {left:?} of {dirs:?}");
    assert_eq!(live_on_host("44201"), Vec::<u32>::new());
}

/// Moves this (test) process into a memory group of its own, under its own, with `mib` as the limit;
/// back out when dropped.
struct LimitedMemory {
    own: PathBuf,
    dir: PathBuf,
}

impl LimitedMemory {
    fn new(mib: u64) -> Self {
        let own = mount_of("memory")
            .expect("a memory hierarchy")
            .join(own_cgroups("self")["memory"].trim_start_matches('/'));
        let dir = own.join(format!("limits-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("memory.limit_in_bytes"), (mib << 20).to_string()).unwrap();
        std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()).unwrap();
        Self { own, dir }
    }
}

impl Drop for LimitedMemory {
    fn drop(&mut self) {
        let _ = std::fs::write(
            self.own.join("cgroup.procs"),
            std::process::id().to_string(),
        );
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Sandboxes live under the bridge's cgroup: its memory limit, when below the host's, bounds them too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_s_own_memory_limit_bounds_what_a_sandbox_may_ask() {
    assert!(root(), "these tests run as root, as CI does");
    let _limited = LimitedMemory::new(2048);
    let h = start(&[]).await;
    assert_refused(&h, json!({"memory_mib": 1025}), "memory_mib", 1024).await;
    let e = support::error_of(&h.call("create_sandbox", json!({"memory_mib": 1025})).await);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("half of the bridge's cgroup limit of 2048 MiB"),
        "{e}"
    );
    let out = h.ok("create_sandbox", json!({"memory_mib": 1024})).await;
    h.ok("destroy_sandbox", json!({"sandbox_id": out["sandbox_id"]}))
        .await;
    let env = bridge_core::BridgeEnv::new();
    let e = match bridge_sandbox::start(support::args(&["--sandbox-max-memory-mib", "4096"]), &env)
        .await
    {
        Ok(_) => panic!("a maximum above the bridge's cgroup limit started"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("SANDBOX_MAX_MEMORY_MIB is 4096; the bridge's cgroup allows 2048 MiB"),
        "{e}"
    );
}

/// A bridge restarted with the same pid (pid 1 of a container) finds groups named with its own pid: at its
/// start nothing of its run exists yet, so they are a crashed run's and are removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_run_s_groups_named_with_our_own_pid_are_removed_at_start() {
    assert!(root(), "these tests run as root, as CI does");
    let own = own_cgroups("self");
    let mount = mount_of("memory").expect("a memory hierarchy");
    let parent = mount
        .join(own["memory"].trim_start_matches('/'))
        .join("mcp-bridges-sandbox");
    let orphan = parent.join(format!("{}-crashed", std::process::id()));
    let nested = orphan.join("p7");
    std::fs::create_dir_all(&nested).unwrap();
    let h = start(&[]).await;
    assert!(!orphan.exists(), "{} left behind", orphan.display());
    drop(h);
}

/// The bounds a sandbox's programs meet on the kernel counts its user namespace charges to the bridge's uid
/// (docs/sandbox.md, "Limits"): inotify instances and watches per uid inside (at most 1/16 of the bridge
/// uid's own), queued signals and message queue bytes in all (never above the bridge's own rlimits).
const INOTIFY_INSTANCES: u64 = 8;
const INOTIFY_WATCHES: u64 = 8192;
const SIGPENDING: u64 = 1024;
const MSGQUEUE_BYTES: u64 = 256 << 10;

/// Run inside: takes inotify watches (one instance, one fresh file each), then inotify instances, then
/// queues real-time signals to itself, each until the kernel refuses or `cap` (one past the host's own
/// limit) is reached; prints what it holds as JSON and keeps holding it.
const EXHAUST: &str = r#"
import ctypes, errno, json, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
cap_instances, cap_watches, cap_signals = (int(a) for a in sys.argv[1:4])
def why(r):
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno())) if r < 0 else "cap"
out = {}
first = libc.inotify_init1(0)
assert first >= 0, why(first)
os.makedirs("/tmp/w")
watches, r = 0, 0
while watches < cap_watches:
    p = b"/tmp/w/%d" % watches
    open(p, "w").close()
    r = libc.inotify_add_watch(first, p, 2)
    if r < 0:
        break
    watches += 1
out["watches"], out["watches_error"] = watches, why(r)
fds = [first]
while len(fds) < cap_instances:
    r = libc.inotify_init1(0)
    if r < 0:
        break
    fds.append(r)
out["instances"], out["instances_error"] = len(fds), why(r)
class sigval(ctypes.Union):
    _fields_ = [("i", ctypes.c_int), ("p", ctypes.c_void_p)]
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
queued = 0
while queued < cap_signals:
    r = libc.sigqueue(os.getpid(), signal.SIGRTMIN, sigval(1))
    if r < 0:
        break
    queued += 1
out["signals"], out["signals_error"] = queued, why(r)
print(json.dumps(out), flush=True)
time.sleep(600)
"#;

/// On the host, as this process's uid (the bridge's): an inotify instance with a watch, and a real-time
/// signal queued to the calling thread (blocked there, then taken back). Runs on a thread of its own, whose
/// signal mask no other code shares. Returns every refusal.
fn host_can_still_use_inotify_and_sigqueue() -> Result<(), String> {
    #[allow(unsafe_code)]
    let check = || -> Vec<String> {
        let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
        let mut refused = Vec::new();
        // SAFETY: plain system calls on values owned here; the signal is blocked on this thread alone and
        // taken back before it ends.
        unsafe {
            let fd = libc::inotify_init1(libc::IN_CLOEXEC);
            if fd < 0 {
                refused.push(err("inotify_init1"));
            } else {
                if libc::inotify_add_watch(fd, c"/tmp".as_ptr(), libc::IN_MODIFY) < 0 {
                    refused.push(err("inotify_add_watch"));
                }
                libc::close(fd);
            }
            let sig = libc::SIGRTMIN();
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            let mut info: libc::siginfo_t = std::mem::zeroed();
            info.si_signo = sig;
            info.si_code = -1; // SI_QUEUE, as sigqueue(3) sends it
            let r = libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                libc::getpid(),
                libc::gettid(),
                sig,
                &info as *const libc::siginfo_t,
            );
            if r < 0 {
                refused.push(err("rt_tgsigqueueinfo (sigqueue to itself)"));
            } else {
                let none = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                if libc::sigtimedwait(&set, std::ptr::null_mut(), &none) != sig {
                    refused.push(err("sigtimedwait for the signal just queued"));
                }
            }
        }
        refused
    };
    let refused = std::thread::spawn(check).join().unwrap();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(refused.join("; "))
    }
}

fn host_number(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_exhausting_inotify_and_signal_queues_stops_at_its_sandbox_s_bounds() {
    assert!(root(), "these tests run as root, as CI does");
    host_can_still_use_inotify_and_sigqueue().expect("the host before any sandbox");
    use nix::sys::resource::{Resource, getrlimit};
    let (_, sigpending) = getrlimit(Resource::RLIMIT_SIGPENDING).unwrap();
    let (_, msgqueue) = getrlimit(Resource::RLIMIT_MSGQUEUE).unwrap();
    let host_instances = host_number("/proc/sys/user/max_inotify_instances");
    let host_watches = host_number("/proc/sys/user/max_inotify_watches");
    let caps = [host_instances + 1, host_watches + 1, sigpending + 1];
    let instances = INOTIFY_INSTANCES.min(host_instances / 16).max(1);
    let watches = INOTIFY_WATCHES.min(host_watches / 16).max(1);
    let signals_cap = SIGPENDING.min(sigpending);
    let h = start(&[]).await;
    let id = h.create().await;
    let report = h
        .manager
        .get(&id)
        .unwrap()
        .instance
        .hello
        .enforced
        .get("kernel_counts")
        .cloned();
    h.ok(
        "write_file",
        json!({"sandbox_id": id, "path": "exhaust.py", "content": EXHAUST}),
    )
    .await;
    let started = h
        .ok(
            "start_process",
            json!({"sandbox_id": id, "command": format!("python3 /workspace/exhaust.py {} {} {}", caps[0], caps[1], caps[2])}),
        )
        .await;
    let pid = started["process_id"].clone();
    let mut held = serde_json::Value::Null;
    // A hang guard, not a claim about speed.
    for _ in 0..1200 {
        let out = h
            .ok(
                "process_output",
                json!({"sandbox_id": id, "process_id": pid}),
            )
            .await;
        if let Some(line) = out["stdout"].as_str().and_then(|s| s.lines().next()) {
            held = serde_json::from_str(line).unwrap();
            break;
        }
        assert_eq!(out["running"], true, "the program ended early: {out}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(held.is_object(), "the program never said what it holds");
    // Checked while the program still holds all it could get.
    let host = host_can_still_use_inotify_and_sigqueue();
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    host.unwrap_or_else(|why| {
        panic!("the host's uid lost its own limits to the sandbox ({held}): {why}")
    });
    assert_eq!(held["instances"], instances, "{held}");
    assert_eq!(held["instances_error"], "EMFILE", "{held}");
    assert_eq!(held["watches"], watches, "{held}");
    assert_eq!(held["watches_error"], "ENOSPC", "{held}");
    // The signal cap counts everything queued for the bridge's uid through the sandbox's namespace: a signal
    // pending elsewhere for that uid takes one from it.
    let signals = held["signals"].as_u64().unwrap();
    assert!(
        (signals_cap.saturating_sub(64)..=signals_cap).contains(&signals),
        "queued {signals}, the bound is {signals_cap}: {held}"
    );
    assert_eq!(held["signals_error"], "EAGAIN", "{held}");
    assert_eq!(
        report.unwrap_or_default(),
        json!({
            "inotify_instances": instances,
            "inotify_watches": watches,
            "sigpending": signals_cap,
            "msgqueue_bytes": MSGQUEUE_BYTES.min(msgqueue),
        }),
        "isolation.kernel_counts"
    );
}
