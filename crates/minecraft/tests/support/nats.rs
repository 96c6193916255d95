//! A three-node NATS cluster with JetStream on loopback (Debian's `nats-server`, installed by
//! scripts/install-peers), each node with its own free ports and its store in a temporary directory; and
//! relays that can be killed like a process (their own runtime, shut down without a drain).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bridge_minecraft::relay::{self, RelayArgs};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `n` distinct free loopback ports, from below the kernel's ephemeral range (32768-60999 on Linux by default):
/// a port from port 0 is released before its node binds it, and meanwhile any outgoing connection of a test
/// running beside this one may take it as its local port (two tests open a thousand sockets each). Here only
/// another explicit bind can, and a node that loses its port anyway restarts the cluster ([`Cluster::start`]).
/// Every listener is held until all are picked, so the ports are distinct.
fn free_ports(n: usize) -> Vec<u16> {
    const RANGE: std::ops::Range<u16> = 20_000..32_000;
    let mut held = Vec::new();
    let mut tries = 0;
    while held.len() < n {
        tries += 1;
        assert!(tries < 10_000, "no {n} free loopback ports in {RANGE:?}");
        let port = RANGE.start + (rand_u64() % u64::from(RANGE.end - RANGE.start)) as u16;
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            held.push(l);
        }
    }
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// Why a cluster is not ready: only a node that exited (its port taken before it bound it) is worth starting
/// the cluster again for.
enum NotReady {
    Exited(String),
    TimedOut(String),
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotReady::Exited(why) | NotReady::TimedOut(why) => f.write_str(why),
        }
    }
}

pub struct Node {
    pub name: String,
    pub port: u16,
    cluster_port: u16,
    config: PathBuf,
    child: Option<Child>,
}

pub struct Cluster {
    pub dir: PathBuf,
    pub nodes: Vec<Node>,
}

/// `nats-server` from PATH or /usr/sbin (Debian installs it there); a missing one fails the test.
fn server_binary() -> PathBuf {
    for dir in std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .chain(["/usr/sbin", "/usr/bin"])
    {
        let p = PathBuf::from(dir).join("nats-server");
        if p.is_file() {
            return p;
        }
    }
    panic!("nats-server is not installed: run scripts/install-peers (Debian package nats-server)");
}

impl Cluster {
    /// Starts three nodes and waits until JetStream answers with a meta leader. A free port can still be taken
    /// by another process before its node binds it: a node that exits while the cluster starts is named with
    /// its log, and the cluster starts again on new ports (three tries).
    pub async fn start() -> Cluster {
        let mut tries = 0;
        loop {
            tries += 1;
            let mut cluster = Cluster::start_once();
            match cluster.ready_within(Duration::from_secs(60)).await {
                Ok(()) => return cluster,
                Err(NotReady::Exited(why)) if tries < 3 => {
                    eprintln!(
                        "NATS cluster start {tries} failed, starting again on new ports: {why}"
                    );
                }
                Err(why) => panic!("the NATS cluster did not start: {why}"),
            }
        }
    }

    fn start_once() -> Cluster {
        let bin = server_binary();
        let dir =
            std::env::temp_dir().join(format!("mc-nats-{}-{:x}", std::process::id(), rand_u64()));
        std::fs::create_dir_all(&dir).unwrap();
        let picked = free_ports(6);
        let ports: Vec<(u16, u16)> = picked.chunks(2).map(|p| (p[0], p[1])).collect();
        let routes: Vec<String> = ports
            .iter()
            .map(|(_, c)| format!("\"nats-route://127.0.0.1:{c}\""))
            .collect();
        let mut nodes = Vec::new();
        for (i, (port, cluster_port)) in ports.iter().enumerate() {
            let name = format!("n{}", i + 1);
            let store = dir.join(&name);
            std::fs::create_dir_all(&store).unwrap();
            let config = dir.join(format!("{name}.conf"));
            std::fs::write(
                &config,
                format!(
                    "server_name: {name}\nlisten: 127.0.0.1:{port}\n\
                     jetstream {{ store_dir: \"{}\", max_memory_store: 64MB, max_file_store: 2GB }}\n\
                     cluster {{ name: mc, listen: 127.0.0.1:{cluster_port}, routes: [{}] }}\n",
                    store.display(),
                    routes.join(", ")
                ),
            )
            .unwrap();
            let mut node = Node {
                name,
                port: *port,
                cluster_port: *cluster_port,
                config,
                child: None,
            };
            node.spawn(&bin);
            nodes.push(node);
        }
        Cluster { dir, nodes }
    }

    /// Every node's client URL, comma-separated (the relay's `--bus`).
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("nats://127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Waits until a stream of three replicas can be created (a meta leader and every peer known).
    pub async fn wait_ready(&mut self) {
        if let Err(why) = self.ready_within(Duration::from_secs(60)).await {
            panic!("the NATS cluster did not come back: {why}");
        }
    }

    /// Whether a stream of three replicas can be created within `limit`; if not, why: a node that exited
    /// (with the end of its log), or what JetStream last answered and every node's log.
    async fn ready_within(&mut self, limit: Duration) -> Result<(), NotReady> {
        let deadline = tokio::time::Instant::now() + limit;
        // The node takes a moment to listen.
        let mut connecting = Box::pin(
            async_nats::ConnectOptions::new()
                .retry_on_initial_connect()
                .connect(format!("127.0.0.1:{}", self.nodes[0].port)),
        );
        let client = loop {
            tokio::select! {
                client = &mut connecting => break client.unwrap(),
                () = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
            self.check_nodes()?;
            if tokio::time::Instant::now() >= deadline {
                return Err(NotReady::TimedOut(format!(
                    "node n1 never answered on its port\n{}",
                    self.logs()
                )));
            }
        };
        let js = async_nats::jetstream::new(client);
        loop {
            let made = js
                .create_stream(async_nats::jetstream::stream::Config {
                    name: "READY".into(),
                    subjects: vec!["ready.check".into()],
                    num_replicas: 3,
                    ..Default::default()
                })
                .await;
            if made.is_ok() {
                let _ = js.delete_stream("READY").await;
                return Ok(());
            }
            self.check_nodes()?;
            if tokio::time::Instant::now() >= deadline {
                return Err(NotReady::TimedOut(format!(
                    "no JetStream leader within {limit:?}: {made:?}\n{}",
                    self.logs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Every started node still runs; the first that exited, with the end of its log.
    fn check_nodes(&mut self) -> Result<(), NotReady> {
        for node in &mut self.nodes {
            if let Some(child) = node.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(NotReady::Exited(format!(
                    "node {} exited ({status}) on ports {}/{}: {}",
                    node.name,
                    node.port,
                    node.cluster_port,
                    node.log_tail()
                )));
            }
        }
        Ok(())
    }

    fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("{}: {}", n.name, n.log_tail()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The index of the node leading `stream`'s replicas.
    pub async fn leader_of(&self, stream: &str) -> usize {
        let client = async_nats::connect(format!("127.0.0.1:{}", self.nodes[0].port))
            .await
            .unwrap();
        let js = async_nats::jetstream::new(client);
        let mut s = js.get_stream(stream).await.unwrap();
        let info = s.info().await.unwrap();
        let leader = info
            .cluster
            .as_ref()
            .and_then(|c| c.leader.clone())
            .expect("a stream leader");
        self.nodes
            .iter()
            .position(|n| n.name == leader)
            .expect("the leader is one of the nodes")
    }

    /// Kills node `i` (SIGKILL: no goodbye to its peers).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts node `i` again on its ports and store.
    pub fn restart(&mut self, i: usize) {
        let bin = server_binary();
        self.nodes[i].spawn(&bin);
    }
}

impl Node {
    /// The last lines of the node's log.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.config.with_extension("log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n  ")
    }

    fn spawn(&mut self, bin: &PathBuf) {
        let log = std::fs::File::create(self.config.with_extension("log")).unwrap();
        let child = Command::new(bin)
            .arg("-c")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start nats-server: {e}"));
        self.child = Some(child);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
        if std::env::var_os("KEEP_NATS_DIR").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    h.finish()
}

/// A relay on a runtime of its own, so killing it ends every task and socket it had at once, the way a
/// process dies: no drain, no close frames, nothing handed on.
pub struct ProcessRelay {
    pub addr: SocketAddr,
    pub relay: relay::Relay,
    runtime: Option<tokio::runtime::Runtime>,
}

impl ProcessRelay {
    /// The value of `/metrics`' line `name` (labels included, as [`super::metric_in`]).
    pub fn metric(&self, name: &str) -> u64 {
        super::metric_in(&self.relay.metrics(), name)
    }

    pub async fn start(args: RelayArgs) -> ProcessRelay {
        Self::try_start(args).await.unwrap()
    }

    /// Starts one, or says why not (the port still held by a relay just killed).
    pub async fn try_start(args: RelayArgs) -> Result<ProcessRelay, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let started = runtime.spawn(async move {
            let settings = relay::settings(&args, Vec::new()).unwrap();
            let stop = CancellationToken::new();
            let handle = relay::start(&args, settings, stop.clone()).await;
            // The stop token lives as long as the runtime: the relay runs until killed.
            std::mem::forget(stop);
            handle.map(|h| (h.addr, h.relay))
        });
        let (addr, relay) = match started.await {
            Ok(Ok(v)) => v,
            failed => {
                runtime.shutdown_background();
                return Err(format!("{failed:?}"));
            }
        };
        Ok(ProcessRelay {
            addr,
            relay,
            runtime: Some(runtime),
        })
    }

    pub fn url(&self) -> String {
        format!("ws://{}/", self.addr)
    }

    /// Kills it: every task of its runtime dropped where it stood.
    pub fn kill(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for ProcessRelay {
    fn drop(&mut self) {
        self.kill();
    }
}
