//! A real Redis Cluster on loopback for the Redis store's tests and benchmark: three masters and
//! three replicas of `redis-server --cluster-enabled yes`, each on free loopback ports (client and
//! cluster bus), persistence off, in a folder of its own. The fixture forms the cluster itself
//! (`CLUSTER MEET`, `ADDSLOTSRANGE`, `REPLICATE`) so it knows which node replicates which, and
//! hands it over only once the cluster says it is whole: every node answers `cluster_state:ok`,
//! every node's `CLUSTER SLOTS` shows the same three shards of one master and one replica, and
//! every replica's link to its master is up. Every wait polls the cluster's own answers, bounded.
//!
//! Nodes can be killed (SIGKILL, a crash), restarted on the same ports with their cluster
//! configuration (they rejoin; a replaced master comes back as a replica, empty) and paused
//! (SIGSTOP, a node that stops reading its sockets). While a node is down its ports stay bound
//! (not listening) by the fixture: clients that still know the node get "connection refused",
//! as from a crashed node, and never another process that picked the freed port meanwhile.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use redis::Value;

use crate::redis::{StartRedisError, spawn_ready};

/// Masters of the cluster; each has one replica.
pub const MASTERS: usize = 3;
/// Nodes of the cluster: the masters first, then their replicas in the same order.
pub const NODES: usize = MASTERS * 2;
/// Hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// How long forming the cluster, a failover or a rejoin may take before it counts as failed.
const SETTLE_BOUND: Duration = Duration::from_secs(60);
/// The pause between two polls of the cluster's answers.
const POLL_PAUSE: Duration = Duration::from_millis(20);
/// A node's answer to one admin command; a paused node must not hang the fixture.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// How the nodes are configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOptions {
    /// `cluster-node-timeout`: how long a node may be unreachable before the others mark it
    /// failing; a failover follows within about twice this.
    pub node_timeout: Duration,
    /// `cluster-replica-validity-factor`: a replica cut off from its master for longer than this
    /// many node timeouts does not fail over (0: it always may).
    pub replica_validity_factor: u32,
}

impl Default for ClusterOptions {
    /// A 3 s node timeout (a failover within seconds, yet no spurious one on a loaded machine)
    /// and Redis' default validity factor of 10.
    fn default() -> Self {
        ClusterOptions {
            node_timeout: Duration::from_secs(3),
            replica_validity_factor: 10,
        }
    }
}

/// Why the cluster could not be started or did not reach the state a test waited for.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot make the cluster's folder")]
    Dir(#[source] std::io::Error),
    #[error("cannot start node {node}")]
    Start {
        node: usize,
        #[source]
        source: StartRedisError,
    },
    #[error("node {node} (port {port}) refused {command}")]
    Command {
        node: usize,
        port: u16,
        command: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("node {node} answered {command} with something unexpected: {answer}")]
    Answer {
        node: usize,
        command: String,
        answer: String,
    },
    #[error("{what} did not happen within {bound:?}; last seen: {last}")]
    NotSettled {
        what: String,
        bound: Duration,
        last: String,
    },
    #[error("cannot signal node {node}")]
    Signal {
        node: usize,
        #[source]
        source: nix::Error,
    },
}

impl ClusterError {
    /// A stable label for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Dir(_) => "dir",
            Self::Start { .. } => "start",
            Self::Command { .. } => "command",
            Self::Answer { .. } => "answer",
            Self::NotSettled { .. } => "not_settled",
            Self::Signal { .. } => "signal",
        }
    }
}

/// One shard as a node's `CLUSTER SLOTS` shows it: a slot range, its master and its replicas
/// (by client port).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Shard {
    pub first: u16,
    pub last: u16,
    pub master: u16,
    pub replicas: Vec<u16>,
}

struct Node {
    child: Option<Child>,
    port: u16,
    bus_port: u16,
    id: String,
    /// The ports, held while the node is down.
    held: Vec<socket2::Socket>,
}

/// Three masters and three replicas on loopback; every node is killed when dropped.
pub struct RedisCluster {
    nodes: Vec<Node>,
    binary: PathBuf,
    options: ClusterOptions,
    dir: tempfile::TempDir,
}

impl RedisCluster {
    /// Starts and forms a cluster of `redis-server` from `PATH` with the default options.
    pub fn start() -> Result<RedisCluster, ClusterError> {
        RedisCluster::start_with(Path::new("redis-server"), ClusterOptions::default())
    }

    /// Starts six nodes of `binary`, forms the cluster and waits until it is whole.
    pub fn start_with(
        binary: &Path,
        options: ClusterOptions,
    ) -> Result<RedisCluster, ClusterError> {
        let dir = tempfile::Builder::new()
            .prefix("redis-cluster-")
            .tempdir()
            .map_err(ClusterError::Dir)?;
        let mut cluster = RedisCluster {
            nodes: Vec::with_capacity(NODES),
            binary: binary.to_owned(),
            options,
            dir,
        };
        for node in 0..NODES {
            let started = cluster.spawn_on_free_ports(node)?;
            cluster.nodes.push(started);
        }
        cluster.form()?;
        Ok(cluster)
    }

    /// `redis+cluster://` with every node as a seed, for the store.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}/", seeds.join(","))
    }

    /// The client port of node `node`.
    pub fn port(&self, node: usize) -> u16 {
        self.nodes[node].port
    }

    /// The cluster id of node `node`.
    pub fn id(&self, node: usize) -> &str {
        &self.nodes[node].id
    }

    /// The node listening on `port`.
    pub fn node_on(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port == port)
    }

    /// A fresh connection to node `node`, with bounded reads and writes.
    pub fn connection(&self, node: usize) -> Result<redis::Connection, ClusterError> {
        let port = self.nodes[node].port;
        let failed = |source| ClusterError::Command {
            node,
            port,
            command: "connect".to_owned(),
            source,
        };
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(failed)?;
        let conn = client
            .get_connection_with_timeout(COMMAND_TIMEOUT)
            .map_err(failed)?;
        conn.set_read_timeout(Some(COMMAND_TIMEOUT))
            .map_err(failed)?;
        conn.set_write_timeout(Some(COMMAND_TIMEOUT))
            .map_err(failed)?;
        Ok(conn)
    }

    /// Runs one command on node `node`.
    pub fn command<T: redis::FromRedisValue>(
        &self,
        node: usize,
        args: &[&str],
    ) -> Result<T, ClusterError> {
        let mut cmd = redis::Cmd::new();
        for arg in args {
            cmd.arg(*arg);
        }
        cmd.query(&mut self.connection(node)?)
            .map_err(|source| ClusterError::Command {
                node,
                port: self.nodes[node].port,
                command: args.join(" "),
                source,
            })
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`, as the cluster hashes it).
    pub fn slot_of(&self, key: &str) -> Result<u16, ClusterError> {
        let node = self.live_node()?;
        self.command(node, &["CLUSTER", "KEYSLOT", key])
    }

    /// The shards as node `node` sees them, sorted by their first slot.
    pub fn shards(&self, node: usize) -> Result<Vec<Shard>, ClusterError> {
        let value: Value = self.command(node, &["CLUSTER", "SLOTS"])?;
        let bad = |answer: &Value| ClusterError::Answer {
            node,
            command: "CLUSTER SLOTS".to_owned(),
            answer: format!("{answer:?}"),
        };
        let Value::Array(ranges) = &value else {
            return Err(bad(&value));
        };
        let mut shards = Vec::new();
        for range in ranges {
            let Value::Array(fields) = range else {
                return Err(bad(range));
            };
            let number = |v: Option<&Value>| match v {
                Some(Value::Int(n)) => u16::try_from(*n).ok(),
                _ => None,
            };
            let port = |v: &Value| match v {
                Value::Array(node) => number(node.get(1)),
                _ => None,
            };
            let (Some(first), Some(last)) = (number(fields.first()), number(fields.get(1))) else {
                return Err(bad(range));
            };
            let ports: Option<Vec<u16>> = fields.iter().skip(2).map(port).collect();
            let Some((master, replicas)) = ports.as_deref().and_then(<[u16]>::split_first) else {
                return Err(bad(range));
            };
            let mut replicas = replicas.to_vec();
            replicas.sort_unstable();
            shards.push(Shard {
                first,
                last,
                master: *master,
                replicas,
            });
        }
        shards.sort();
        Ok(shards)
    }

    /// The node that is master of `slot`, as a live node sees it.
    pub fn master_of(&self, slot: u16) -> Result<usize, ClusterError> {
        let shard = self.shard_of(slot)?;
        self.node_on(shard.master)
            .ok_or_else(|| ClusterError::Answer {
                node: self.live_node().unwrap_or(0),
                command: "CLUSTER SLOTS".to_owned(),
                answer: format!("master port {} is not a node of the fixture", shard.master),
            })
    }

    /// The replica of the master of `slot`, as a live node sees it.
    pub fn replica_of(&self, slot: u16) -> Result<usize, ClusterError> {
        let shard = self.shard_of(slot)?;
        shard
            .replicas
            .first()
            .and_then(|port| self.node_on(*port))
            .ok_or_else(|| ClusterError::Answer {
                node: self.live_node().unwrap_or(0),
                command: "CLUSTER SLOTS".to_owned(),
                answer: format!("slot {slot} has no replica: {shard:?}"),
            })
    }

    fn shard_of(&self, slot: u16) -> Result<Shard, ClusterError> {
        let node = self.live_node()?;
        self.shards(node)?
            .into_iter()
            .find(|s| (s.first..=s.last).contains(&slot))
            .ok_or_else(|| ClusterError::Answer {
                node,
                command: "CLUSTER SLOTS".to_owned(),
                answer: format!("no shard serves slot {slot}"),
            })
    }

    /// A node that runs (for questions any node can answer).
    fn live_node(&self) -> Result<usize, ClusterError> {
        (0..self.nodes.len())
            .find(|n| self.nodes[*n].child.is_some() && self.ping(*n))
            .ok_or_else(|| ClusterError::NotSettled {
                what: "a live node".to_owned(),
                bound: Duration::ZERO,
                last: "every node is down".to_owned(),
            })
    }

    fn ping(&self, node: usize) -> bool {
        self.command::<String>(node, &["PING"]).is_ok()
    }

    /// Kills node `node` with SIGKILL: a crash, as the cluster and the clients see it.
    pub fn kill(&mut self, node: usize) {
        let node = &mut self.nodes[node];
        if let Some(mut child) = node.child.take() {
            // Best effort: it may have exited on its own.
            let _ = child.kill();
            let _ = child.wait();
            // Best effort too: without the hold, the node is still down, only less isolated.
            node.held = [node.port, node.bus_port]
                .into_iter()
                .filter_map(|port| hold(port).ok())
                .collect();
        }
    }

    /// Starts node `node` again on its ports with its cluster configuration; it rejoins the
    /// cluster (empty: persistence is off).
    pub fn restart(&mut self, node: usize) -> Result<(), ClusterError> {
        self.kill(node);
        self.nodes[node].held.clear();
        let (port, bus_port) = (self.nodes[node].port, self.nodes[node].bus_port);
        let child = self
            .spawn(node, port, bus_port)
            .map_err(|source| ClusterError::Start { node, source })?;
        self.nodes[node].child = Some(child);
        Ok(())
    }

    /// Stops node `node` (SIGSTOP): it answers nothing and reads none of its sockets.
    pub fn pause(&self, node: usize) -> Result<(), ClusterError> {
        self.signal(node, Signal::SIGSTOP)
    }

    /// Lets a paused node go on (SIGCONT).
    pub fn resume(&self, node: usize) -> Result<(), ClusterError> {
        self.signal(node, Signal::SIGCONT)
    }

    fn signal(&self, node: usize, signal: Signal) -> Result<(), ClusterError> {
        let Some(child) = &self.nodes[node].child else {
            return Ok(());
        };
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        kill(pid, signal).map_err(|source| ClusterError::Signal { node, source })
    }

    /// Waits until node `node` is a master serving slots, as it says itself (`ROLE`) and as its
    /// cluster says (`cluster_state:ok`).
    pub fn wait_master(&self, node: usize) -> Result<(), ClusterError> {
        self.poll(&format!("node {node} becoming a master"), || {
            let role: Value = self.command(node, &["ROLE"]).ok()?;
            let is_master = matches!(&role, Value::Array(f) if f.first() == Some(&bulk("master")));
            (is_master && self.state_ok(node)).then_some(())
        })
    }

    /// Waits until node `node` replicates `master` with its link up (`ROLE`), and `master` lists
    /// it as an online replica.
    pub fn wait_replica(&self, node: usize, master: usize) -> Result<(), ClusterError> {
        let master_port = i64::from(self.nodes[master].port);
        self.poll(&format!("node {node} replicating node {master}"), || {
            let role: Value = self.command(node, &["ROLE"]).ok()?;
            let Value::Array(fields) = role else {
                return None;
            };
            let linked = fields.first() == Some(&bulk("slave"))
                && fields.get(2) == Some(&Value::Int(master_port))
                && fields.get(3) == Some(&bulk("connected"));
            let info: String = self.command(master, &["INFO", "replication"]).ok()?;
            let online = info.contains(&format!("port={},state=online", self.nodes[node].port));
            (linked && online).then_some(())
        })
    }

    /// Waits until the cluster is whole again: every running node answers `cluster_state:ok` and
    /// shows the same three shards, each of one master and one replica, covering every slot, and
    /// every replica's link is up.
    pub fn wait_whole(&self) -> Result<(), ClusterError> {
        let mut shards = Vec::new();
        self.poll("the cluster becoming whole", || {
            let running: Vec<usize> = (0..self.nodes.len())
                .filter(|n| self.nodes[*n].child.is_some())
                .collect();
            let first = self.shards(*running.first()?).ok()?;
            let covered: u32 = first.iter().map(|s| u32::from(s.last - s.first) + 1).sum();
            let whole = first.len() == MASTERS
                && covered == u32::from(SLOTS)
                && first.iter().all(|s| s.replicas.len() == 1);
            let agreed = running
                .iter()
                .all(|n| self.state_ok(*n) && self.shards(*n).ok().as_ref() == Some(&first));
            if !(whole && agreed) {
                return None;
            }
            shards = first;
            Some(())
        })?;
        for shard in &shards {
            let node_of = |port: u16| {
                self.node_on(port).ok_or_else(|| ClusterError::Answer {
                    node: 0,
                    command: "CLUSTER SLOTS".to_owned(),
                    answer: format!("port {port} is not a node of the fixture"),
                })
            };
            let master = node_of(shard.master)?;
            for replica in &shard.replicas {
                self.wait_replica(node_of(*replica)?, master)?;
            }
        }
        Ok(())
    }

    fn state_ok(&self, node: usize) -> bool {
        self.command::<String>(node, &["CLUSTER", "INFO"])
            .is_ok_and(|info| info.lines().any(|l| l.trim() == "cluster_state:ok"))
    }

    /// Polls `ready` until it answers, at most [`SETTLE_BOUND`].
    fn poll<T>(&self, what: &str, mut ready: impl FnMut() -> Option<T>) -> Result<T, ClusterError> {
        let started = Instant::now();
        loop {
            if let Some(value) = ready() {
                return Ok(value);
            }
            if started.elapsed() > SETTLE_BOUND {
                return Err(ClusterError::NotSettled {
                    what: what.to_owned(),
                    bound: SETTLE_BOUND,
                    last: self.describe(),
                });
            }
            std::thread::sleep(POLL_PAUSE);
        }
    }

    /// Every node's view, for a failure message.
    fn describe(&self) -> String {
        (0..self.nodes.len())
            .map(|n| match &self.nodes[n].child {
                None => format!("node {n}: down"),
                Some(_) => format!(
                    "node {n} (port {}): {:?}",
                    self.nodes[n].port,
                    self.shards(n).map_err(|e| e.to_string())
                ),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Meets every node with node 0, gives each master a third of the slots, makes node
    /// `MASTERS + i` replicate master `i`, and waits until the cluster is whole.
    fn form(&mut self) -> Result<(), ClusterError> {
        for node in 0..NODES {
            let id: String = self.command(node, &["CLUSTER", "MYID"])?;
            self.nodes[node].id = id;
            // Distinct config epochs from the start, as `redis-cli --cluster create` sets them,
            // so no two masters claim slots under one epoch.
            let epoch = (node + 1).to_string();
            self.command::<()>(node, &["CLUSTER", "SET-CONFIG-EPOCH", &epoch])?;
        }
        for node in 1..NODES {
            let (port, bus) = (self.nodes[node].port, self.nodes[node].bus_port);
            self.command::<()>(
                0,
                &[
                    "CLUSTER",
                    "MEET",
                    "127.0.0.1",
                    &port.to_string(),
                    &bus.to_string(),
                ],
            )?;
        }
        let per_master = SLOTS / MASTERS as u16;
        for master in 0..MASTERS {
            let first = per_master * master as u16;
            let last = if master + 1 == MASTERS {
                SLOTS - 1
            } else {
                first + per_master - 1
            };
            self.command::<()>(
                master,
                &[
                    "CLUSTER",
                    "ADDSLOTSRANGE",
                    &first.to_string(),
                    &last.to_string(),
                ],
            )?;
        }
        // A replica can follow only a master it knows.
        self.poll("every node knowing every other", || {
            (0..NODES)
                .all(|n| {
                    self.command::<String>(n, &["CLUSTER", "NODES"])
                        .is_ok_and(|nodes| {
                            nodes.lines().count() == NODES && !nodes.contains("handshake")
                        })
                })
                .then_some(())
        })?;
        for master in 0..MASTERS {
            let id = self.nodes[master].id.clone();
            self.command::<()>(MASTERS + master, &["CLUSTER", "REPLICATE", &id])?;
        }
        self.wait_whole()
    }

    /// Spawns node `node` on two free ports (its client port and its cluster bus), retrying on
    /// other ports when one was taken in between.
    fn spawn_on_free_ports(&self, node: usize) -> Result<Node, ClusterError> {
        let mut last = None;
        for _ in 0..5 {
            let (port, bus_port) = free_ports().map_err(|e| ClusterError::Start {
                node,
                source: StartRedisError::PickPort(e),
            })?;
            match self.spawn(node, port, bus_port) {
                Ok(child) => {
                    return Ok(Node {
                        child: Some(child),
                        port,
                        bus_port,
                        id: String::new(),
                        held: Vec::new(),
                    });
                }
                Err(source @ StartRedisError::Spawn { .. }) => {
                    return Err(ClusterError::Start { node, source });
                }
                Err(source) => last = Some(source),
            }
        }
        Err(ClusterError::Start {
            node,
            source: last.unwrap_or(StartRedisError::NotReady {
                tail: String::new(),
            }),
        })
    }

    fn spawn(&self, node: usize, port: u16, bus_port: u16) -> Result<Child, StartRedisError> {
        let dir = self.dir.path();
        let options = [
            ("--cluster-enabled", "yes".to_owned()),
            ("--cluster-port", bus_port.to_string()),
            (
                "--cluster-config-file",
                dir.join(format!("nodes-{node}.conf")).display().to_string(),
            ),
            (
                "--cluster-node-timeout",
                self.options.node_timeout.as_millis().to_string(),
            ),
            (
                "--cluster-replica-validity-factor",
                self.options.replica_validity_factor.to_string(),
            ),
            ("--dir", dir.display().to_string()),
            // A replica's first sync starts at once instead of waiting 5 s for more replicas.
            ("--repl-diskless-sync-delay", "0".to_owned()),
            // `CLUSTER SLOTS` lists a replica once its replication offset is past 0; on an idle
            // master only these pings move it (every 10 s by default).
            ("--repl-ping-replica-period", "1".to_owned()),
        ];
        let extra: Vec<String> = options
            .into_iter()
            .flat_map(|(name, value)| [name.to_owned(), value])
            .collect();
        spawn_ready(&self.binary, port, &extra)
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                // Best effort: it may have exited on its own. SIGKILL ends a paused one too.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Binds `port` on loopback without listening: connecting is refused, and the kernel hands the
/// port to no one asking for a free one. `SO_REUSEADDR`, as redis-server's own, so the bind
/// succeeds beside the killed node's connections still in `TIME_WAIT`.
fn hold(port: u16) -> std::io::Result<socket2::Socket> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())?;
    Ok(socket)
}

/// Two distinct free loopback ports.
fn free_ports() -> std::io::Result<(u16, u16)> {
    let a = TcpListener::bind("127.0.0.1:0")?;
    let b = TcpListener::bind("127.0.0.1:0")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

fn bulk(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}
