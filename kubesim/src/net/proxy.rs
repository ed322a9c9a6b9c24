//! The Service proxy, as kube-proxy's userspace mode did it: for every Service port with a
//! ready endpoint, a listener on ClusterIP:port in the node's namespace that relays each
//! connection to one ready endpoint (round robin) at its pod IP and target port. A Service port
//! without ready endpoints has no listener, so a connection is refused at once, as kube-proxy's
//! REJECT rule does. Only TCP is forwarded.
//!
//! It also relays the node's address at the API server's port to the API server, which listens
//! in the host's namespace: that is the `default/kubernetes` Service's endpoint.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::ClusterNet;
use super::addr::NODE_IP;
use crate::service_table::ServiceTable;

/// Where a relayed connection goes.
#[derive(Clone)]
enum Upstream {
    /// Ready endpoints inside the cluster network, chosen in turn.
    Pods(Arc<RwLock<Vec<SocketAddr>>>, Arc<AtomicUsize>),
    /// An address in the host's namespace (the API server).
    Host(SocketAddr),
}

struct Listener {
    task: JoinHandle<()>,
    targets: Arc<RwLock<Vec<SocketAddr>>>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the proxy; it runs until the table's sender goes. `api` is the API server's address
/// in the host's namespace.
pub fn start(
    net: Arc<ClusterNet>,
    mut table: watch::Receiver<Arc<ServiceTable>>,
    api: SocketAddr,
) -> std::io::Result<JoinHandle<()>> {
    let node_api = SocketAddr::V4(SocketAddrV4::new(NODE_IP, api.port()));
    let api_listener = listen(&net, node_api)?;
    let relay = tokio::spawn(serve(net.clone(), api_listener, Upstream::Host(api)));
    Ok(tokio::spawn(async move {
        let _relay = AbortOnDrop(relay);
        let mut listeners: HashMap<SocketAddr, Listener> = HashMap::new();
        loop {
            let current = table.borrow_and_update().clone();
            reconcile(&net, &current, &mut listeners);
            if table.changed().await.is_err() {
                return;
            }
        }
    }))
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn reconcile(
    net: &Arc<ClusterNet>,
    table: &ServiceTable,
    listeners: &mut HashMap<SocketAddr, Listener>,
) {
    let mut wanted: HashMap<SocketAddr, Vec<SocketAddr>> = HashMap::new();
    for entry in table.entries() {
        let Some(ip) = entry.cluster_ip else { continue };
        for port in entry.ports.iter().filter(|p| p.protocol == "TCP") {
            let targets: Vec<SocketAddr> = entry
                .ready_targets(port)
                .into_iter()
                .map(|(ip, p)| SocketAddr::V4(SocketAddrV4::new(ip, p)))
                .collect();
            if !targets.is_empty() {
                wanted.insert(SocketAddr::V4(SocketAddrV4::new(ip, port.port)), targets);
            }
        }
    }
    listeners.retain(|addr, _| wanted.contains_key(addr));
    for (addr, targets) in wanted {
        if let Some(l) = listeners.get(&addr) {
            *l.targets.write().unwrap_or_else(|p| p.into_inner()) = targets;
            continue;
        }
        match listen(net, addr) {
            Ok(listener) => {
                let shared = Arc::new(RwLock::new(targets));
                let up = Upstream::Pods(shared.clone(), Arc::new(AtomicUsize::new(0)));
                let task = tokio::spawn(serve(net.clone(), listener, up));
                listeners.insert(
                    addr,
                    Listener {
                        task,
                        targets: shared,
                    },
                );
            }
            Err(e) => tracing::warn!(%addr, error = %e, "cannot listen for a Service"),
        }
    }
}

/// A listener on `addr` in the node's namespace.
fn listen(net: &ClusterNet, addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = net.socket()?;
    // A Service that loses and regains its endpoints gets its port back at once.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

async fn serve(net: Arc<ClusterNet>, listener: TcpListener, upstream: Upstream) {
    loop {
        let (mut client, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "Service proxy accept failed");
                tokio::task::yield_now().await;
                continue;
            }
        };
        let net = net.clone();
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let server = match &upstream {
                Upstream::Host(addr) => TcpStream::connect(addr).await,
                Upstream::Pods(targets, next) => {
                    let pick = {
                        let t = targets.read().unwrap_or_else(|p| p.into_inner());
                        (!t.is_empty()).then(|| t[next.fetch_add(1, Ordering::Relaxed) % t.len()])
                    };
                    match pick {
                        Some(addr) => net.connect(addr).await,
                        None => Err(std::io::ErrorKind::ConnectionRefused.into()),
                    }
                }
            };
            match server {
                Ok(mut server) => {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
                // The client sees its connection closed, as with a REJECTed one.
                Err(e) => tracing::debug!(error = %e, "Service proxy could not reach an endpoint"),
            }
        });
    }
}

/// Whether `ip` is the node's own address (probes with that host reach the node).
pub fn is_node(ip: Ipv4Addr) -> bool {
    ip == NODE_IP
}
