//! The pods' network: one network namespace per cluster (the "node", holding a bridge) and one
//! per pod, joined to the bridge by a veth pair, with addresses from 198.18.0.0/15 only
//! ([`addr`]). Nothing is added to the host's own network namespace and nothing is named, so
//! several clusters run side by side with the same addresses, and whatever kubesim creates goes
//! away with the handles (at the latest when its process ends).
//!
//! Code in the host's namespace reaches into the cluster through sockets created on a thread that
//! lives in the node's namespace ([`ClusterNet::connect`]): the kubelet's probes, the Service
//! proxy ([`proxy`]) and tests use it.

pub mod addr;
pub mod names;
pub mod ns;
pub mod proxy;
pub mod rootfs;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Deserialize;
use tokio::net::{TcpSocket, TcpStream};

use ns::{FileView, Netns, NsThread, ip_batch};

/// How pods are networked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// Each pod has its own network namespace and address, as in a cluster (needs root).
    #[default]
    Pod,
    /// Every pod's processes share the host's network, as kubesim did before pods had their own
    /// (`status.podIP` is then 127.0.0.1, Services are not forwarded).
    Host,
}

/// The bridge in the node's namespace.
const BRIDGE: &str = "kubesim0";

/// The bridge's own hardware address (locally administered). Set explicitly: a bridge whose
/// address was never set takes the lowest address of its ports, so it would change as pods come
/// and go, and every pod would keep sending to the node at the old address (its ARP entry for
/// the node stays valid for tens of seconds) until it noticed: probes' answers and all traffic to
/// the Services, the API server's included, lost meanwhile. CNI's bridge plugin and Docker set
/// theirs for the same reason.
const BRIDGE_MAC: &str = "02:6b:73:00:00:01";

/// Why the network could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// No namespace could be made: not root.
    #[error(
        "cannot create a network namespace: kubesim gives each pod its own network, which needs \
         root (CAP_SYS_ADMIN and CAP_NET_ADMIN); run as root, or opt out with `network: host`"
    )]
    CreateNamespace(#[source] std::io::Error),
    /// The node's bridge could not be configured.
    #[error("cannot configure the cluster's bridge")]
    ConfigureNode(#[source] std::io::Error),
    /// A pod's interface could not be configured.
    #[error("cannot configure the network of the pod at {ip}")]
    ConfigurePod {
        /// The pod's address.
        ip: Ipv4Addr,
        /// The cause.
        source: std::io::Error,
    },
}

impl NetError {
    /// Stable label of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CreateNamespace(_) => "create_namespace",
            Self::ConfigureNode(_) => "configure_node",
            Self::ConfigurePod { .. } => "configure_pod",
        }
    }
}

/// One cluster's network: the node's namespace with its bridge, and the pod address pool.
#[derive(Debug)]
pub struct ClusterNet {
    /// Runs `ip` in the node's namespace.
    node: NsThread,
    /// Makes sockets in the node's namespace. A thread of its own: `ip` can wait seconds for the
    /// kernel's network lock (held while any namespace on the host is torn down), and probes and
    /// Service relays must not queue behind it.
    sockets: NsThread,
    node_ns: Netns,
    pool: Mutex<addr::IpPool>,
    veths: AtomicU32,
}

/// A pod's own network namespace; dropping it (once its processes are gone) removes the
/// namespace and its veth pair.
#[derive(Debug)]
pub struct PodNet {
    ns: Netns,
}

impl ClusterNet {
    /// Creates the node's namespace and bridge.
    pub fn create() -> Result<ClusterNet, NetError> {
        let node_ns = Netns::create().map_err(NetError::CreateNamespace)?;
        let node = NsThread::start(&node_ns, "kubesim-node").map_err(NetError::ConfigureNode)?;
        let sockets =
            NsThread::start(&node_ns, "kubesim-sockets").map_err(NetError::ConfigureNode)?;
        // Service addresses are local to the node (the proxy listens on them) without one
        // address per Service: a `local` route makes the whole block bindable.
        let setup = format!(
            "link set lo up\n\
             link add {BRIDGE} address {BRIDGE_MAC} type bridge\n\
             addr add {}/{} dev {BRIDGE}\n\
             link set {BRIDGE} up\n\
             route add local {}/{} dev lo table local\n",
            addr::NODE_IP,
            addr::POD_PREFIX,
            addr::SERVICE_NETWORK,
            addr::SERVICE_PREFIX,
        );
        node.call(move || ip_batch(&setup))
            .and_then(|r| r)
            .map_err(NetError::ConfigureNode)?;
        Ok(ClusterNet {
            node,
            sockets,
            node_ns,
            pool: Mutex::new(addr::IpPool::default()),
            veths: AtomicU32::new(0),
        })
    }

    /// A free pod address.
    pub fn allocate(&self) -> Option<Ipv4Addr> {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .allocate()
    }

    /// Gives a pod address back.
    pub fn release(&self, ip: Ipv4Addr) {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .release(ip);
    }

    /// Creates a pod's namespace with `eth0` at `ip` on the bridge, and a route to the Services
    /// through the node. No default route: anything outside the cluster is unreachable at once.
    pub fn pod(&self, ip: Ipv4Addr) -> Result<PodNet, NetError> {
        let fail = |source| NetError::ConfigurePod { ip, source };
        let ns = Netns::create().map_err(fail)?;
        let veth = format!("kv{}", self.veths.fetch_add(1, Ordering::Relaxed));
        let inside = format!(
            "link set lo up\n\
             link add eth0 type veth peer name {veth} netns {}\n\
             addr add {ip}/{} dev eth0\n\
             link set eth0 up\n\
             route add {}/{} via {} dev eth0 onlink\n",
            self.node.tid(),
            addr::POD_PREFIX,
            addr::SERVICE_NETWORK,
            addr::SERVICE_PREFIX,
            addr::NODE_IP,
        );
        ns.run(|| ip_batch(&inside)).map_err(fail)?;
        let outside = format!("link set {veth} master {BRIDGE} up\n");
        self.node
            .call(move || ip_batch(&outside))
            .and_then(|r| r)
            .map_err(fail)?;
        Ok(PodNet { ns })
    }

    /// An unconnected TCP socket in the node's namespace.
    pub fn socket(&self) -> std::io::Result<TcpSocket> {
        self.sockets.call(TcpSocket::new_v4).and_then(|r| r)
    }

    /// Connects to `addr` as seen from the node (a pod IP, a ClusterIP, or the node's own
    /// loopback). Waiting for the socket holds no runtime worker.
    pub async fn connect(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        let socket = self.sockets.call_async(TcpSocket::new_v4).await??;
        socket.connect(addr).await
    }

    /// Runs `f` on a thread inside the node's namespace (the node's view of the network).
    pub fn on_node<R: Send>(
        &self,
        f: impl FnOnce() -> std::io::Result<R> + Send,
    ) -> std::io::Result<R> {
        self.node_ns.run(f)
    }

    /// Stops the node's threads; the namespaces go when the last handle does.
    pub fn shutdown(&self) {
        self.node.stop();
        self.sockets.stop();
    }
}

impl PodNet {
    /// Starts `cmd` inside the pod's network namespace and a mount and UTS namespace of its own
    /// laid out as `view`.
    pub fn spawn(
        &self,
        view: &FileView,
        rt: &tokio::runtime::Handle,
        cmd: &mut tokio::process::Command,
    ) -> std::io::Result<tokio::process::Child> {
        self.ns.run(|| {
            ns::enter_file_view(view)?;
            let _guard = rt.enter();
            cmd.spawn()
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// `ip` can wait seconds for the kernel's network lock while namespaces anywhere on the host
    /// are torn down; a probe's or a Service relay's connection must not wait behind it.
    #[tokio::test]
    async fn connections_are_made_while_the_node_thread_runs_a_slow_job() {
        let net = Arc::new(ClusterNet::create().expect("a cluster network (needs root)"));
        let listener = net
            .socket()
            .and_then(|s| {
                s.bind(SocketAddr::from((addr::NODE_IP, 0)))?;
                s.listen(8)
            })
            .expect("a listener on the node");
        let target = listener.local_addr().expect("its address");
        let (started, running) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        // The slow job holds the node thread until the test lets it go, after the connect.
        let busy = std::thread::spawn({
            let net = net.clone();
            move || {
                net.node.call(move || {
                    let _ = started.send(());
                    let _ = released.recv();
                })
            }
        });
        running.recv().expect("the slow job started");
        // A bound, not a timing: a connect queued behind the job would never finish.
        let connected = tokio::time::timeout(Duration::from_secs(30), net.connect(target)).await;
        drop(release);
        assert!(
            matches!(connected, Ok(Ok(_))),
            "connect waited behind the node thread: {connected:?}"
        );
        busy.join().expect("the slow job ends").expect("it ran");
    }

    fn bridge_mac(net: &ClusterNet) -> String {
        let out = net
            .node
            .call(|| {
                std::process::Command::new("ip")
                    .args(["-br", "link", "show", BRIDGE])
                    .output()
            })
            .and_then(|r| r)
            .expect("ip link show");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace()
            .nth(2)
            .unwrap_or_default()
            .to_owned()
    }

    /// The node's address on the pods' network stays the same as pods come and go, so no pod
    /// sends to a stale one.
    #[test]
    fn the_bridge_keeps_its_address_as_pods_come_and_go() {
        let net = ClusterNet::create().expect("a cluster network (needs root)");
        let first = bridge_mac(&net);
        let mut pods = Vec::new();
        for _ in 0..4 {
            let ip = net.allocate().expect("a pod address");
            pods.push(net.pod(ip).expect("a pod network"));
            assert_eq!(bridge_mac(&net), first, "a pod joined");
        }
        pods.truncate(1);
        assert_eq!(bridge_mac(&net), first, "pods left");
    }
}
