//! Every Service with its backends, as the Service proxy and the pods' hosts files see them
//! (pure): the [`ServiceTable`] the Service controller publishes, and the [`ServiceRecord`] a
//! hosts file writes of one Service. It sits below both the controller (`services`), which
//! computes it, and the network (`net`), which reads it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// What a pod's hosts file says about one Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRecord {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The addresses the name resolves to: the ClusterIP, or for a headless Service its ready
    /// pods' IPs.
    pub ips: Vec<Ipv4Addr>,
    /// Headless Services only: (pod IP, pod hostname) of ready pods with `spec.hostname` whose
    /// `spec.subdomain` is this Service (`hostname.svc.ns.svc.cluster.local`).
    pub hostnames: Vec<(Ipv4Addr, String)>,
}

/// One port of a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    /// `name` (may be empty when it is the only port).
    pub name: String,
    /// `port`.
    pub port: u16,
    /// `protocol` (`TCP`, `UDP`, `SCTP`).
    pub protocol: String,
}

/// One backend of a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// The pod's IP.
    pub ip: Ipv4Addr,
    /// Whether the pod is Ready.
    pub ready: bool,
    /// Whether the pod is being deleted.
    pub terminating: bool,
    /// Node of the pod.
    pub node: String,
    /// Pod name and uid.
    pub pod: (String, String),
    /// `spec.hostname` when `spec.subdomain` names this Service.
    pub hostname: Option<String>,
    /// Target port per Service port name (a named targetPort resolved against this pod).
    pub ports: BTreeMap<String, u16>,
}

/// A Service as the proxy and the hosts files see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceEntry {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The ClusterIP; `None` for a headless Service.
    pub cluster_ip: Option<Ipv4Addr>,
    /// Ports.
    pub ports: Vec<ServicePort>,
    /// Backends (ready or not).
    pub backends: Vec<Backend>,
}

impl ServiceEntry {
    /// Ready backends of Service port `port` as (pod IP, target port).
    pub fn ready_targets(&self, port: &ServicePort) -> Vec<(Ipv4Addr, u16)> {
        self.backends
            .iter()
            .filter(|b| b.ready && !b.terminating)
            .filter_map(|b| b.ports.get(&port.name).map(|p| (b.ip, *p)))
            .collect()
    }

    /// How the Service's names resolve in a pod's hosts file.
    pub fn record(&self) -> ServiceRecord {
        let ready = || self.backends.iter().filter(|b| b.ready && !b.terminating);
        let mut ips: Vec<Ipv4Addr> = match self.cluster_ip {
            Some(ip) => vec![ip],
            None => ready().map(|b| b.ip).collect(),
        };
        ips.dedup();
        let hostnames = match self.cluster_ip {
            Some(_) => Vec::new(),
            None => ready()
                .filter_map(|b| b.hostname.clone().map(|h| (b.ip, h)))
                .collect(),
        };
        ServiceRecord {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            ips,
            hostnames,
        }
    }
}

/// Every Service with its backends, as last computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceTable {
    /// By (namespace, name), in shards by a hash of the key, the shards in groups: publishing
    /// a new table copies the groups' pointers, and a change copies only its group's pointers
    /// and its shard, so the cost of a change stays small as Services come by the thousand.
    groups: Vec<Arc<Vec<Arc<Shard>>>>,
}

/// One shard of a [`ServiceTable`].
type Shard = BTreeMap<(String, String), Arc<ServiceEntry>>;

/// Groups of a [`ServiceTable`], and shards per group.
const GROUPS: usize = 64;
const SHARDS_PER_GROUP: usize = 64;

impl Default for ServiceTable {
    fn default() -> Self {
        // Every slot starts as the one empty shard; a write replaces its own slot.
        let empty = Arc::new(Shard::new());
        let group = Arc::new(vec![empty; SHARDS_PER_GROUP]);
        ServiceTable {
            groups: vec![group; GROUPS],
        }
    }
}

impl ServiceTable {
    /// The group and shard of `key`.
    fn slot(key: &(String, String)) -> (usize, usize) {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        let i = (h.finish() % (GROUPS * SHARDS_PER_GROUP) as u64) as usize;
        (i / SHARDS_PER_GROUP, i % SHARDS_PER_GROUP)
    }

    fn shards(&self) -> impl Iterator<Item = &Shard> {
        self.groups
            .iter()
            .flat_map(|g| g.iter().map(|s| s.as_ref()))
    }

    /// Every Service, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &ServiceEntry> {
        self.shards().flat_map(|s| s.values().map(|e| e.as_ref()))
    }

    /// The Service `key` (namespace, name).
    pub fn get(&self, key: &(String, String)) -> Option<&ServiceEntry> {
        let (g, s) = Self::slot(key);
        self.groups[g][s].get(key).map(|e| e.as_ref())
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &(String, String)> {
        self.shards().flat_map(|s| s.keys())
    }

    pub(crate) fn insert(&mut self, key: (String, String), entry: ServiceEntry) {
        let (g, s) = Self::slot(&key);
        Arc::make_mut(&mut Arc::make_mut(&mut self.groups[g])[s]).insert(key, Arc::new(entry));
    }

    pub(crate) fn remove(&mut self, key: &(String, String)) -> bool {
        let (g, s) = Self::slot(key);
        if !self.groups[g][s].contains_key(key) {
            return false;
        }
        Arc::make_mut(&mut Arc::make_mut(&mut self.groups[g])[s]).remove(key);
        true
    }

    /// The hosts-file records of every Service, by namespace and name.
    pub fn records(&self) -> Vec<ServiceRecord> {
        let mut entries: Vec<&ServiceEntry> = self.entries().collect();
        entries.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        entries.into_iter().map(ServiceEntry::record).collect()
    }
}
