//! The scheduler and kubelet: controllers that consume the store's event log for pods, bind
//! unscheduled pods to simulated nodes and move bound pods through their life, writing through
//! the store like any client so watchers see every step in order.
//!
//! The per-pod logic is a pure state machine ([`machine`]) and the phase a pure function
//! ([`phase::pod_phase`]); this module is the shell that feeds them time, volume checks and
//! process exits, and writes what they render. One task does all of it, one tick at a time, so
//! a pod's changes within a tick become a single status write.

mod atomic;
mod env;
mod image;
mod machine;
mod phase;
mod probe;
mod process;
pub mod spark_image;
mod volumes;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{Notify, mpsc};

pub use machine::{EXIT_CODE, NEVER_START, RUN_SECONDS};
pub use phase::{Phase, pod_phase};

use crate::api_error::ApiError;
use crate::auth::{Authenticator, BoundPod, IssueError, TokenSpec};
use crate::net::addr::NODE_IP;
use crate::net::names::{PodHosts, hosts_file, resolv_conf, service_env};
use crate::net::ns::FileView;
use crate::net::rootfs::{Mount, MountKind};
use crate::net::{ClusterNet, PodNet};
use crate::resources::{NameRule, ResourceType};
use crate::services::ServiceTable;
use crate::store::{DeleteOpts, Event, EventType, Part, Store, WatchFrom, WriteOpts};
use crate::{kubeconfig, meta, node_token};
use image::ImageRun;
use machine::{Action, Behaviour, CRef, Machine, Section, Signal, StartFailure};
use process::ProcHandle;
use spark_image::SparkImage;

/// The address of every simulated node (and so every pod's `hostIP`) when pods share the host's
/// network; with their own network the node is [`NODE_IP`].
pub const HOST_IP: &str = "127.0.0.1";

/// Where a container finds its service-account token, `ca.crt` and `namespace`.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// How the kubelet runs.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Node names; each becomes a `Node` object.
    pub nodes: Vec<String>,
    /// Images that run as real local processes (by exact image, or repository without tag).
    pub images: BTreeMap<String, ImageCommand>,
    /// Where real-process pods get their folders: `<work_dir>/<namespace>/<pod>/`.
    pub work_dir: PathBuf,
    /// One scheduling/startup step: pods move at most one stage per tick, and each tick's
    /// changes to a pod are written together.
    pub tick: Duration,
    /// The API server's URL (`http://127.0.0.1:PORT`): real processes get a kubeconfig naming
    /// it. `None` (a kubelet without a server) writes no kubeconfig.
    pub api_url: Option<String>,
    /// The cluster network; `None` runs every pod in the host's network (`network: host`).
    pub network: Option<Arc<ClusterNet>>,
    /// The Services and their endpoints (hosts files); `None` without a Service controller.
    pub services: Option<tokio::sync::watch::Receiver<Arc<ServiceTable>>>,
    /// The CA certificate (PEM) that signs the API server's certificate, written as `ca.crt`
    /// into every service-account volume. `None` while kubesim serves plain HTTP: no `ca.crt`.
    pub ca_pem: Option<String>,
    /// The Spark image, run from the local Spark distribution; `None`: Spark images are
    /// scripted like any unmapped image.
    pub spark: Option<Arc<SparkImage>>,
    /// Issues pods' service-account tokens (bound to the pod, for its `serviceAccountName`).
    /// `None` (a kubelet without an API server), and pods on the host's network, get the
    /// node token instead.
    pub tokens: Option<Arc<Authenticator>>,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            nodes: (1..=3).map(|i| format!("kubesim-node-{i}")).collect(),
            images: BTreeMap::new(),
            work_dir: std::env::temp_dir().join(format!("kubesim-{}", std::process::id())),
            tick: Duration::from_millis(20),
            api_url: None,
            network: None,
            services: None,
            ca_pem: None,
            spark: None,
            tokens: None,
        }
    }
}

/// The local command an image runs as.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
pub struct ImageCommand {
    /// The image's entrypoint (replaced by a container's `command`; its `args` are appended).
    pub command: Vec<String>,
    /// The image's environment (below the container's own).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// Why [`Kubelet::kill`] failed.
#[derive(Debug, thiserror::Error)]
pub enum KillError {
    /// No pod of that name runs on a kubesim node.
    #[error("pods \"{pod}\" not found in namespace \"{namespace}\"")]
    PodNotFound {
        /// Namespace.
        namespace: String,
        /// Pod name.
        pod: String,
    },
    /// The pod has no such container.
    #[error("container \"{container}\" not found in pod \"{pod}\"")]
    ContainerNotFound {
        /// Pod name.
        pod: String,
        /// Container name.
        container: String,
    },
    /// The container is not running.
    #[error("container \"{container}\" of pod \"{pod}\" is not running")]
    NotRunning {
        /// Pod name.
        pod: String,
        /// Container name.
        container: String,
    },
}

impl KillError {
    /// A stable machine-readable kind (`PodNotFound`, `ContainerNotFound`, `NotRunning`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::PodNotFound { .. } => "PodNotFound",
            Self::ContainerNotFound { .. } => "ContainerNotFound",
            Self::NotRunning { .. } => "NotRunning",
        }
    }
}

/// What process tasks report back to the controller.
enum Msg {
    Exited {
        uid: String,
        cref: CRef,
        instance: u64,
        code: i32,
    },
    Probe {
        uid: String,
        cref: CRef,
        instance: u64,
        kind: probe::ProbeKind,
        report: probe::Report,
    },
}

struct NodeState {
    name: String,
    /// Read without the state lock by the API server on every request from a node's process;
    /// written only under the state lock, so the kubelet sees it change together with the
    /// orphans it governs.
    partitioned: AtomicBool,
}

impl NodeState {
    fn is_partitioned(&self) -> bool {
        self.partitioned.load(Ordering::Acquire)
    }
}

/// A pod bound to one of our nodes.
struct PodEntry {
    ns: String,
    name: String,
    uid: String,
    node: String,
    /// The latest object seen (fieldRefs, deletion grace period), shared with the store's
    /// event rather than copied on every change of the pod.
    pod: Arc<Value>,
    machine: Machine,
    procs: HashMap<CRef, ProcHandle>,
    ip: String,
    /// The pod's own network namespace (real-process pods with their own network).
    net: Option<PodNet>,
    /// The resolved environment of each running container (exec probes run with it).
    envs: HashMap<CRef, Vec<(String, String)>>,
    /// Events recorded so far, by (reason, message, fieldPath): name and count, so a repeated
    /// event is counted as the kubelet's recorder does, not written again.
    events: HashMap<(String, String, String), (String, i64)>,
    /// Whether a ConfigMap or Secret the pod mounts changed since its volumes were written.
    volumes_stale: bool,
    start_time: String,
    /// What we last wrote, to skip writes that would change nothing.
    last_written: Option<Value>,
    mount_event_sent: bool,
    has_process: bool,
    /// The pod folder, once materialised (real-process pods only).
    root: Option<PathBuf>,
    /// The service-account token its processes present, once issued.
    token: Option<PodToken>,
    materialise_failed: bool,
    delete_requested: bool,
    delete_sent: bool,
}

#[derive(Default)]
struct State {
    pods: HashMap<String, PodEntry>,
    /// (namespace, name) → uid of the pod we run under that name.
    names: HashMap<(String, String), String>,
    /// Pods waiting for a node: (namespace, name) → uid.
    unscheduled: BTreeMap<(String, String), String>,
    /// Pods removed from the API while their node was partitioned: their processes keep
    /// running (the node has not heard of the removal) until the node heals.
    orphans: Vec<PodEntry>,
    /// The Service table the hosts files were last written from.
    hosts_version: Option<Arc<ServiceTable>>,
}

/// The simulated nodes' scheduler and kubelet.
pub struct Kubelet {
    store: Arc<Store>,
    pods_rt: Arc<ResourceType>,
    events_rt: Arc<ResourceType>,
    nodes_rt: Arc<ResourceType>,
    config: KubeletConfig,
    rt: tokio::runtime::Handle,
    /// One per configured node, fixed at start.
    nodes: Vec<NodeState>,
    state: Mutex<State>,
    wake: Notify,
    msgs: mpsc::UnboundedSender<Msg>,
    /// Set by [`Kubelet::shutdown`]: the controller loop ends.
    stopped: AtomicBool,
}

/// The core v1 type `plural`, from the store's registry (or built in, should a registry lack it).
fn core_type(store: &Store, plural: &str, kind: &str, namespaced: bool) -> Arc<ResourceType> {
    store.registry().find("", "v1", plural).unwrap_or_else(|| {
        Arc::new(ResourceType {
            group: String::new(),
            version: "v1".into(),
            plural: plural.into(),
            singular: kind.to_ascii_lowercase(),
            kind: kind.into(),
            namespaced,
            status_subresource: plural != "events",
            short_names: Vec::new(),
            custom: false,
            name_rule: NameRule::Subdomain,
        })
    })
}

/// Merges the kubelet's part of the status into the current one: its fields replace, its
/// conditions replace same-typed ones (keeping `lastTransitionTime` when the status did not
/// change) and every other field and condition is kept.
fn merge_status(current: Option<&Value>, ours: &Value, now: &str) -> Value {
    let mut status = current
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut conditions = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(o) = ours.as_object() {
        for (k, v) in o {
            if k != "conditions" {
                status.insert(k.clone(), v.clone());
            }
        }
    }
    for c in ours
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut c = c.clone();
        let kind = c.get("type").cloned();
        match conditions
            .iter_mut()
            .find(|e| e.get("type") == kind.as_ref())
        {
            Some(existing) => {
                let same = existing.get("status") == c.get("status");
                c["lastTransitionTime"] = match existing.get("lastTransitionTime") {
                    Some(t) if same => t.clone(),
                    _ => json!(now),
                };
                *existing = c;
            }
            None => {
                c["lastTransitionTime"] = json!(now);
                conditions.push(c);
            }
        }
    }
    status.insert("conditions".into(), Value::Array(conditions));
    Value::Object(status)
}

fn node_object(name: &str) -> Value {
    let now = meta::now_rfc3339();
    let resources =
        json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
        }},
        "spec": {},
        "status": {
            "conditions": [node_ready(true, &now)],
            "addresses": [
                {"type": "InternalIP", "address": HOST_IP},
                {"type": "Hostname", "address": name},
            ],
            "capacity": resources,
            "allocatable": resources,
            "nodeInfo": {
                "kubeletVersion": "v1.34.0",
                "kubeProxyVersion": "v1.34.0",
                "containerRuntimeVersion": concat!("kubesim://", env!("CARGO_PKG_VERSION")),
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "kubesim",
                "kernelVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
            "phase": "Running",
        },
    })
}

fn node_ready(ready: bool, now: &str) -> Value {
    if ready {
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
               "message": "kubelet is posting ready status",
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    } else {
        json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
               "message": "Kubelet stopped posting node status.",
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    }
}

/// The grace period for stopping a pod's processes: the deletion's, else the spec's.
fn grace_period(pod: &Value) -> Duration {
    let secs = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .max(0);
    Duration::from_secs(secs.unsigned_abs())
}

fn stop(entry: &PodEntry, cref: CRef, signal: Signal, rt: &tokio::runtime::Handle) {
    if let Some(h) = entry.procs.get(&cref) {
        match signal {
            Signal::Kill => h.kill_now(),
            Signal::Term => h.terminate(grace_period(&entry.pod), rt),
        }
    }
}

const KUBECONFIG: &str = "KUBECONFIG";

/// Where a real-process pod's kubeconfig lives, relative to the pod root.
pub const POD_KUBECONFIG: &str = ".kubesim/kubeconfig";

/// Writes the pod's kubeconfig (atomically: a sibling container may be reading it while a
/// restarting one rewrites it) and returns its path.
fn write_pod_kubeconfig(
    root: &std::path::Path,
    url: &str,
    token: Option<&str>,
    ca_pem: Option<&str>,
    namespace: &str,
) -> std::io::Result<PathBuf> {
    let path = root.join(POD_KUBECONFIG);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let text = match ca_pem {
        Some(ca) if url.starts_with("https://") => {
            let credentials = match token {
                Some(t) => kubeconfig::Credentials::Token(t),
                None => kubeconfig::Credentials::Anonymous,
            };
            kubeconfig::render_https(url, ca, credentials, namespace)
        }
        _ => kubeconfig::render_with_token(url, token),
    };
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

fn container_spec(pod: &Value, cref: CRef) -> Option<&Value> {
    let field = match cref.section {
        Section::Init => "initContainers",
        Section::Main => "containers",
    };
    pod.pointer(&format!("/spec/{field}/{}", cref.index))
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // Every critical section leaves the state consistent between statements that could panic,
    // so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Kubelet {
    /// Creates the nodes and starts the scheduler and kubelet on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(store: Arc<Store>, config: KubeletConfig) -> Arc<Kubelet> {
        let (tx, rx) = mpsc::unbounded_channel();
        let kubelet = Arc::new(Kubelet {
            pods_rt: core_type(&store, "pods", "Pod", true),
            events_rt: core_type(&store, "events", "Event", true),
            nodes_rt: core_type(&store, "nodes", "Node", false),
            nodes: config
                .nodes
                .iter()
                .map(|n| NodeState {
                    name: n.clone(),
                    partitioned: AtomicBool::new(false),
                })
                .collect(),
            state: Mutex::new(State::default()),
            store,
            config,
            rt: tokio::runtime::Handle::current(),
            wake: Notify::new(),
            msgs: tx,
            stopped: AtomicBool::new(false),
        });
        for name in &kubelet.config.nodes {
            match kubelet.store.create(
                &kubelet.nodes_rt,
                "",
                node_object(name),
                &WriteOpts::default(),
            ) {
                Ok(_) => {}
                // A second kubelet on the same store (or a restart) takes the node over.
                Err(e) if e.reason == "AlreadyExists" => kubelet.write_node_ready(name, true),
                Err(e) => tracing::error!(node = %name, error = %e, "could not create node"),
            }
        }
        match kubelet.store.subscribe(
            &|g, p, _ns| g.is_empty() && matches!(p, "pods" | "configmaps" | "secrets"),
            WatchFrom::Now,
        ) {
            Ok(sub) => {
                let me = kubelet.clone();
                kubelet.rt.spawn(async move { me.run(sub, rx).await });
            }
            Err(e) => tracing::error!(error = %e, "kubelet could not watch pods"),
        }
        kubelet
    }

    /// The node names.
    pub fn nodes(&self) -> Vec<String> {
        self.config.nodes.clone()
    }

    /// The log of a container's current instance, `None` for an unknown pod or container.
    pub fn logs(&self, namespace: &str, pod: &str, container: &str) -> Option<String> {
        let path = {
            let st = lock(&self.state);
            let uid = st.names.get(&(namespace.to_string(), pod.to_string()))?;
            let e = st.pods.get(uid)?;
            let cref = e.machine.find(container)?;
            let c = e.machine.container(cref)?;
            match c.behaviour {
                Behaviour::Scripted { .. } => {
                    let mut out = c.log.join("\n");
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    return Some(out);
                }
                Behaviour::Process => self.log_path(namespace, pod, container),
            }
        };
        // A container that has not started yet has no log file: an empty log.
        Some(std::fs::read_to_string(path).unwrap_or_default())
    }

    /// Terminates a running container now with `exit_code` (`container` `None` = the first
    /// regular container); a real process is SIGKILLed and reported with `exit_code`.
    pub fn kill(
        &self,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
        exit_code: i32,
    ) -> Result<(), KillError> {
        let mut st = lock(&self.state);
        let not_found = || KillError::PodNotFound {
            namespace: namespace.to_string(),
            pod: pod.to_string(),
        };
        let uid = st
            .names
            .get(&(namespace.to_string(), pod.to_string()))
            .cloned()
            .ok_or_else(not_found)?;
        let e = st.pods.get_mut(&uid).ok_or_else(not_found)?;
        let cref = match container {
            Some(name) => e
                .machine
                .find(name)
                .ok_or_else(|| KillError::ContainerNotFound {
                    pod: pod.to_string(),
                    container: name.to_string(),
                })?,
            None => CRef {
                section: Section::Main,
                index: 0,
            },
        };
        let name = e
            .machine
            .container(cref)
            .map(|c| c.name.clone())
            .unwrap_or_default();
        match e.machine.kill(cref, exit_code, SystemTime::now()) {
            Ok(Some(Action::Stop { cref, signal })) => stop(e, cref, signal, &self.rt),
            Ok(_) => {}
            Err(machine::NotRunning) => {
                return Err(KillError::NotRunning {
                    pod: pod.to_string(),
                    container: name,
                });
            }
        }
        drop(st);
        self.wake.notify_one();
        Ok(())
    }

    /// Cuts a node off: its pods keep running, but their status stops updating and the node
    /// turns `Ready=Unknown`. `false` for an unknown node.
    pub fn partition(&self, node: &str) -> bool {
        self.set_partitioned(node, true)
    }

    /// Reconnects a node: its pods' status catches up and pending deletions finish.
    pub fn heal(&self, node: &str) -> bool {
        self.set_partitioned(node, false)
    }

    /// Whether `node` is cut off now (`false` for an unknown node). Lock-free: the API server
    /// asks on every request that carries a node token.
    pub fn is_partitioned(&self, node: &str) -> bool {
        self.nodes
            .iter()
            .any(|n| n.name == node && n.is_partitioned())
    }

    fn set_partitioned(&self, node: &str, partitioned: bool) -> bool {
        let Some(n) = self.nodes.iter().find(|n| n.name == node) else {
            return false;
        };
        {
            let mut st = lock(&self.state);
            if n.is_partitioned() == partitioned {
                return true;
            }
            n.partitioned.store(partitioned, Ordering::Release);
            if !partitioned {
                // The node hears of the pods removed while it was cut off and stops them.
                let (gone, kept) = std::mem::take(&mut st.orphans)
                    .into_iter()
                    .partition(|o| o.node == node);
                st.orphans = kept;
                for o in gone {
                    self.dispose(&st.names, o);
                }
            }
        }
        self.write_node_ready(node, !partitioned);
        self.wake.notify_one();
        true
    }

    fn write_node_ready(&self, node: &str, ready: bool) {
        let now = meta::now_rfc3339();
        let result = self.store.modify(
            &self.nodes_rt,
            "",
            node,
            Part::Status,
            &WriteOpts::default(),
            |cur| {
                let mut next = cur.clone();
                let ours = json!({"conditions": [node_ready(ready, &now)]});
                next["status"] = merge_status(cur.get("status"), &ours, &now);
                Ok(next)
            },
        );
        if let Err(e) = result {
            tracing::warn!(node, error = %e, "could not update node status");
        }
    }

    fn pod_dir(&self, ns: &str, pod: &str) -> Option<PathBuf> {
        volumes::safe_join(&self.config.work_dir, ns).and_then(|d| volumes::safe_join(&d, pod))
    }

    fn log_path(&self, ns: &str, pod: &str, container: &str) -> PathBuf {
        self.pod_dir(ns, pod)
            .unwrap_or_else(|| self.config.work_dir.clone())
            .join("logs")
            .join(format!("{container}.log"))
    }

    /// What a container of `image` runs: an image listed under `images` (exact, then by
    /// repository), else the Spark image when it is one.
    fn image_run(&self, image: &str) -> Option<ImageRun<'_>> {
        let listed = self
            .config
            .images
            .get(image)
            .or_else(|| self.config.images.get(image::repository(image)));
        match (listed, &self.config.spark) {
            (Some(c), _) => Some(ImageRun::from(c)),
            (None, Some(spark)) if spark.matches(image) => Some(spark.run()),
            _ => None,
        }
    }

    async fn run(
        self: Arc<Self>,
        mut sub: crate::store::Subscription,
        mut rx: mpsc::UnboundedReceiver<Msg>,
    ) {
        for ev in std::mem::take(&mut sub.replay) {
            if ev.plural == "pods" {
                self.on_event(&ev);
            }
        }
        let mut interval = tokio::time::interval(self.config.tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while !self.stopped.load(Ordering::Acquire) {
            tokio::select! {
                r = sub.live.recv() => match r {
                    Ok(ev) => {
                        if ev.group.is_empty() && ev.plural == "pods" {
                            self.on_event(&ev);
                        } else if ev.kind != EventType::Deleted {
                            self.on_object_changed(&ev);
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "kubelet fell behind the event log; rescanning pods");
                        self.rescan();
                    }
                    Err(RecvError::Closed) => break,
                },
                Some(m) = rx.recv() => self.on_msg(m),
                _ = interval.tick() => self.tick(),
                () = self.wake.notified() => self.tick(),
            }
        }
    }

    /// A ConfigMap or Secret changed: the pods that mount it get their volumes rewritten.
    fn on_object_changed(&self, ev: &Event) {
        let name = meta::name(&ev.object);
        let mut st = lock(&self.state);
        for e in st.pods.values_mut() {
            // Only real-process pods have volumes on disk; the cheap test first.
            if e.root.is_some() && e.ns == ev.namespace && volumes::uses(&e.pod, &ev.plural, name) {
                e.volumes_stale = true;
            }
        }
    }

    fn on_event(&self, ev: &Event) {
        let mut st = lock(&self.state);
        match ev.kind {
            EventType::Deleted => self.forget(&mut st, &ev.object),
            EventType::Added | EventType::Modified => self.observe(&mut st, &ev.object),
        }
    }

    fn rescan(&self) {
        let pods = self.store.objects("", "pods", None);
        let mut st = lock(&self.state);
        let live: std::collections::HashSet<&str> = pods.iter().map(|p| meta::uid(p)).collect();
        let gone: Vec<Arc<Value>> = st
            .pods
            .values()
            .filter(|e| !live.contains(e.uid.as_str()))
            .map(|e| e.pod.clone())
            .collect();
        for pod in &gone {
            self.forget(&mut st, pod);
        }
        st.unscheduled.retain(|_, uid| live.contains(uid.as_str()));
        for pod in &pods {
            self.observe(&mut st, pod);
        }
    }

    fn observe(&self, st: &mut State, pod: &Arc<Value>) {
        let uid = meta::uid(pod).to_string();
        let key = (
            meta::meta_str(pod, "namespace").to_string(),
            meta::name(pod).to_string(),
        );
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if node.is_empty() {
            if meta::is_deleting(pod) {
                st.unscheduled.remove(&key);
            } else {
                st.unscheduled.insert(key, uid);
            }
            return;
        }
        if st.unscheduled.get(&key) == Some(&uid) {
            st.unscheduled.remove(&key);
        }
        if let Some(e) = st.pods.get_mut(&uid) {
            if e.root.is_some() && e.pod.get("metadata") != pod.get("metadata") {
                // Labels and annotations reach downward API volumes.
                e.volumes_stale = true;
            }
            e.pod = Arc::clone(pod);
            e.delete_requested |= meta::is_deleting(pod);
            return;
        }
        if !self.nodes.iter().any(|n| n.name == node) {
            return;
        }
        // A kubelet never reruns a pod that already finished (e.g. seen again after a restart).
        let phase = pod.pointer("/status/phase").and_then(Value::as_str);
        if matches!(phase, Some("Succeeded" | "Failed")) {
            return;
        }
        let ip = match &self.config.network {
            Some(net) => match net.allocate() {
                Some(ip) => ip.to_string(),
                None => {
                    tracing::error!(pod = %key.1, ns = %key.0, "no pod address is free");
                    return;
                }
            },
            None => HOST_IP.to_string(),
        };
        let machine = Machine::new(
            pod,
            &|image| self.image_run(image).is_some(),
            self.config.tick.saturating_mul(5),
        );
        let has_process = machine
            .all()
            .any(|(_, c)| c.behaviour == Behaviour::Process);
        let entry = PodEntry {
            ns: key.0.clone(),
            name: key.1.clone(),
            uid: uid.clone(),
            node: node.to_string(),
            pod: pod.clone(),
            machine,
            procs: HashMap::new(),
            ip,
            net: None,
            envs: HashMap::new(),
            events: HashMap::new(),
            volumes_stale: false,
            start_time: meta::now_rfc3339(),
            last_written: None,
            mount_event_sent: false,
            has_process,
            root: None,
            token: None,
            materialise_failed: false,
            delete_requested: meta::is_deleting(pod),
            delete_sent: false,
        };
        st.names.insert(key, uid.clone());
        st.pods.insert(uid, entry);
    }

    fn forget(&self, st: &mut State, pod: &Value) {
        let uid = meta::uid(pod);
        let key = (
            meta::meta_str(pod, "namespace").to_string(),
            meta::name(pod).to_string(),
        );
        if st.unscheduled.get(&key).is_some_and(|u| u == uid) {
            st.unscheduled.remove(&key);
        }
        let Some(e) = st.pods.remove(uid) else {
            return;
        };
        if st.names.get(&key).is_some_and(|u| u == uid) {
            st.names.remove(&key);
        }
        let partitioned = self.is_partitioned(&e.node);
        if partitioned && !e.procs.values().all(ProcHandle::has_exited) {
            // A force-deleted pod on a cut-off node lives on as a zombie until the node heals,
            // which is exactly what fencing has to cope with.
            st.orphans.push(e);
            return;
        }
        self.dispose(&st.names, e);
    }

    /// Kills what is left of a pod that is gone from the API and removes its folder.
    fn dispose(&self, names: &HashMap<(String, String), String>, e: PodEntry) {
        for h in e.procs.values() {
            h.kill_now();
        }
        // The namespace goes once the killed processes have left it; the address is free now
        // (the pool hands it out again only after every other one).
        if let (Some(net), Ok(ip)) = (&self.config.network, e.ip.parse()) {
            net.release(ip);
        }
        if e.root.is_none() {
            return;
        }
        let aside = self.aside_dir(&e.ns, &e.name, &e.uid);
        let dir = match aside {
            Some(a) if a.exists() => Some(a),
            // The folder is still under the pod's name unless a successor took the name.
            _ if !names.contains_key(&(e.ns.clone(), e.name.clone())) => {
                self.pod_dir(&e.ns, &e.name)
            }
            _ => None,
        };
        if let Some(dir) = dir
            && let Err(err) = std::fs::remove_dir_all(&dir)
        {
            tracing::debug!(dir = %dir.display(), error = %err, "could not remove pod folder");
        }
    }

    /// Where a zombie's folder goes when a new pod of the same name needs the name's folder.
    fn aside_dir(&self, ns: &str, pod: &str, uid: &str) -> Option<PathBuf> {
        volumes::safe_join(&self.config.work_dir, ns).map(|d| d.join(format!(".{pod}.{uid}")))
    }

    /// Makes the pod folder free for a new pod: a zombie predecessor's folder is moved aside
    /// (its processes keep their open files, working directory and relative links), anything
    /// else left over is removed.
    fn clear_pod_dir(
        &self,
        orphans: &[PodEntry],
        ns: &str,
        name: &str,
        dir: &std::path::Path,
    ) -> std::io::Result<()> {
        if !dir.exists() {
            return Ok(());
        }
        let zombie = orphans
            .iter()
            .find(|o| o.ns == ns && o.name == name && o.root.is_some());
        match zombie.and_then(|z| self.aside_dir(ns, name, &z.uid)) {
            Some(aside) => std::fs::rename(dir, aside),
            None => std::fs::remove_dir_all(dir),
        }
    }

    fn on_msg(&self, m: Msg) {
        let now = SystemTime::now();
        let mut st = lock(&self.state);
        match m {
            Msg::Exited {
                uid,
                cref,
                instance,
                code,
            } => {
                if let Some(e) = st.pods.get_mut(&uid) {
                    e.machine.on_process_exit(cref, instance, code, now);
                }
            }
            Msg::Probe {
                uid,
                cref,
                instance,
                kind,
                report,
            } => {
                if let Some(e) = st.pods.get_mut(&uid)
                    && e.machine
                        .container(cref)
                        .is_some_and(|c| c.instance == instance)
                {
                    self.on_probe(e, cref, instance, kind, report, now);
                }
            }
        }
    }

    fn tick(&self) {
        let now = SystemTime::now();
        let now_str = meta::now_rfc3339();
        let mut guard = lock(&self.state);
        self.schedule(&mut guard);
        self.refresh_worlds(&mut guard);
        let State { pods, orphans, .. } = &mut *guard;
        for e in pods.values_mut() {
            if e.machine.is_finished() && !e.machine.is_changed() && !e.delete_requested {
                continue;
            }
            // Nothing is due and nothing came from outside: stepping would change nothing.
            if !e.delete_requested
                && !e.has_process
                && e.machine.quiet_until().is_some_and(|until| now < until)
            {
                continue;
            }
            let healthy = self
                .nodes
                .iter()
                .any(|n| n.name == e.node && !n.is_partitioned());
            if e.delete_requested && healthy {
                e.machine.begin_delete();
            }
            let mounts_ready = e.machine.wants_mounts() && self.check_mounts(e, orphans);
            for action in e.machine.step(now, mounts_ready) {
                match action {
                    Action::Start { cref, instance } => self.start_process(e, cref, instance, now),
                    Action::Stop { cref, signal } => stop(e, cref, signal, &self.rt),
                }
            }
            if !healthy {
                // No status leaves a partitioned node; the change stays pending until heal.
                continue;
            }
            if e.machine.take_changed() {
                let ours = e
                    .machine
                    .render(&e.uid, &e.ip, self.host_ip(), &e.start_time);
                if e.last_written.as_ref() != Some(&ours) {
                    match self.write_status(e, &ours, &now_str) {
                        Ok(()) => e.last_written = Some(ours),
                        Err(err) if err.code == 404 || err.code == 409 => {}
                        Err(err) => {
                            tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "pod status write failed");
                            e.machine.mark_changed();
                        }
                    }
                }
            }
            if e.machine.removable() && !e.delete_sent {
                e.delete_sent = true;
                let opts = DeleteOpts {
                    grace_period: Some(0),
                    uid: Some(e.uid.clone()),
                    ..DeleteOpts::default()
                };
                if let Err(err) = self.store.delete(&self.pods_rt, &e.ns, &e.name, &opts)
                    && err.code != 404
                    && err.code != 409
                {
                    tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "pod delete failed");
                }
            }
        }
    }

    fn write_status(&self, e: &PodEntry, ours: &Value, now: &str) -> Result<(), ApiError> {
        self.store
            .modify_shared(
                &self.pods_rt,
                &e.ns,
                &e.name,
                Part::Status,
                &WriteOpts::default(),
                |cur| {
                    if meta::uid(cur) != e.uid {
                        return Err(ApiError::conflict(
                            "",
                            "pods",
                            &e.name,
                            "the pod was replaced",
                        ));
                    }
                    // A status write keeps only the status of what it is given: the rest of
                    // the pod is not copied just to be discarded.
                    Ok(json!({"status": merge_status(cur.get("status"), ours, now)}))
                },
            )
            .map(|_| ())
    }

    /// Binds unscheduled pods, least-loaded healthy node first.
    fn schedule(&self, st: &mut State) {
        if st.unscheduled.is_empty() {
            return;
        }
        // Active pods per node, counted in one pass over the pods (not one per node); the
        // node list is short, so a scan of it beats hashing each pod's node name.
        let mut active = vec![0usize; self.nodes.len()];
        for e in st.pods.values().filter(|e| e.machine.is_active()) {
            if let Some(i) = self.nodes.iter().position(|n| n.name == e.node) {
                active[i] += 1;
            }
        }
        let mut load: Vec<(usize, usize)> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.is_partitioned())
            .map(|(i, _)| (active[i], i))
            .collect();
        if load.is_empty() {
            return;
        }
        // Each node's labels, as the Node objects say now (users may label nodes).
        let labels: Vec<Value> = self
            .nodes
            .iter()
            .map(|n| {
                self.store
                    .get_shared("", "nodes", "", &n.name)
                    .and_then(|o| o.pointer("/metadata/labels").cloned())
                    .unwrap_or(Value::Null)
            })
            .collect();
        let mut waiting = BTreeMap::new();
        for ((ns, name), uid) in std::mem::take(&mut st.unscheduled) {
            // The pod's nodeSelector: only nodes carrying every one of its labels fit, as with
            // the real scheduler; a pod no healthy node fits stays Pending and is tried again.
            let selector = self
                .store
                .get_shared("", "pods", &ns, &name)
                .and_then(|p| p.pointer("/spec/nodeSelector").cloned())
                .and_then(|s| s.as_object().cloned())
                .unwrap_or_default();
            let fits = |i: usize| selector.iter().all(|(k, v)| labels[i].get(k) == Some(v));
            let Some(slot) = load.iter_mut().filter(|(_, i)| fits(*i)).min() else {
                self.mark_unschedulable(&ns, &name, &uid, load.len());
                waiting.insert((ns, name), uid);
                continue;
            };
            let node = self.nodes[slot.1].name.clone();
            let result = self.store.modify_shared(
                &self.pods_rt,
                &ns,
                &name,
                Part::Main,
                &WriteOpts::default(),
                |cur| {
                    let bound = cur
                        .pointer("/spec/nodeName")
                        .and_then(Value::as_str)
                        .is_some_and(|n| !n.is_empty());
                    if meta::uid(cur) != uid || bound || meta::is_deleting(cur) {
                        return Err(ApiError::conflict(
                            "",
                            "pods",
                            &name,
                            "the pod changed before binding",
                        ));
                    }
                    let mut next = cur.clone();
                    next["spec"]["nodeName"] = json!(node);
                    Ok(next)
                },
            );
            match result {
                Ok(pod) => {
                    slot.0 += 1;
                    // Take the pod on now so this tick's status write carries PodScheduled
                    // together with the kubelet's first status.
                    self.observe(st, &pod);
                }
                Err(e) if e.code == 404 || e.code == 409 => {}
                Err(e) => tracing::warn!(pod = %name, ns = %ns, error = %e, "binding failed"),
            }
        }
        st.unscheduled.extend(waiting);
    }

    /// A pod no node fits, as the scheduler reports it: the `PodScheduled` condition `False`
    /// with reason `Unschedulable` and the fit error as its message, and a `FailedScheduling`
    /// Warning event; both once, when the condition is first written.
    /// `healthy` of the nodes are reachable (none of them fits); the others carry the
    /// unreachable taint.
    fn mark_unschedulable(&self, ns: &str, name: &str, uid: &str, healthy: usize) {
        let nodes = self.nodes.len();
        let mut reasons = Vec::new();
        if healthy > 0 {
            reasons.push(format!(
                "{healthy} node(s) didn't match Pod's node affinity/selector"
            ));
        }
        if nodes > healthy {
            reasons.push(format!(
                "{} node(s) had untolerated taint {{node.kubernetes.io/unreachable: }}",
                nodes - healthy
            ));
        }
        // The scheduler lists the reasons sorted, then what preemption found.
        reasons.sort();
        let message = format!(
            "0/{nodes} nodes are available: {}. preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling.",
            reasons.join(", ")
        );
        let now = meta::now_rfc3339();
        let written = self.store.modify(
            &self.pods_rt,
            ns,
            name,
            Part::Status,
            &WriteOpts::default(),
            |cur| {
                let conditions = cur
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let marked = conditions
                    .iter()
                    .any(|c| c["type"] == "PodScheduled" && c["status"] == "False");
                if meta::uid(cur) != uid || marked {
                    return Err(ApiError::conflict("", "pods", name, "nothing to mark"));
                }
                let mut next = cur.clone();
                let mut kept: Vec<Value> = conditions
                    .into_iter()
                    .filter(|c| c["type"] != "PodScheduled")
                    .collect();
                kept.push(json!({"type": "PodScheduled", "status": "False",
                    "reason": "Unschedulable", "message": message,
                    "lastProbeTime": null, "lastTransitionTime": now}));
                next["status"]["conditions"] = json!(kept);
                if next["status"].get("phase").is_none() {
                    next["status"]["phase"] = json!("Pending");
                }
                Ok(next)
            },
        );
        if written.is_err() {
            return;
        }
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": format!("{name}.{nanos:x}"), "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name,
                               "namespace": ns, "uid": uid},
            "reason": "FailedScheduling",
            "message": message,
            "type": "Warning",
            "source": {"component": "default-scheduler"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": "default-scheduler",
        });
        if let Err(err) = self
            .store
            .create(&self.events_rt, ns, event, &WriteOpts::default())
        {
            tracing::debug!(pod = %name, error = %err, "could not record event");
        }
    }

    /// Whether every volume of the pod can be mounted; records `FailedMount` once when not, and
    /// materialises the pod folder for real processes when so.
    fn check_mounts(&self, e: &mut PodEntry, orphans: &[PodEntry]) -> bool {
        let exists =
            |plural: &str, name: &str| self.store.get_raw("", plural, &e.ns, name).is_some();
        if let Some((_, message)) = volumes::missing_volume(&e.pod, &exists) {
            if !e.mount_event_sent {
                e.mount_event_sent = true;
                self.record_event(e, "Warning", "FailedMount", &message, None);
            }
            return false;
        }
        if e.has_process && e.root.is_none() {
            let Some(dir) = self.pod_dir(&e.ns, &e.name) else {
                return false;
            };
            // The token volume is mounted with the others: without a token (its service
            // account gone) the pod does not start, as on a kubelet.
            let token = match self.pod_token(e) {
                Ok(t) => t,
                Err(err) => {
                    if !e.materialise_failed {
                        e.materialise_failed = true;
                        let msg = format!(
                            "MountVolume.SetUp failed for volume \"{TOKEN_VOLUME}\" : failed to fetch token: {err}"
                        );
                        self.record_event(e, "Warning", "FailedMount", &msg, None);
                    }
                    return false;
                }
            };
            let lookup = |plural: &str, name: &str| self.store.get_raw("", plural, &e.ns, name);
            let addrs = env::PodAddrs {
                pod_ip: &e.ip,
                host_ip: self.host_ip(),
            };
            let made = self
                .clear_pod_dir(orphans, &e.ns, &e.name, &dir)
                .and_then(|()| volumes::materialise(&e.pod, &dir, &lookup, addrs))
                .and_then(|root| {
                    self.write_pod_world(e, &dir, token.as_deref())
                        .map(|()| root)
                });
            let root = match made {
                Ok(root) => root,
                Err(err) => {
                    if !e.materialise_failed {
                        e.materialise_failed = true;
                        tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not materialise pod volumes");
                        let msg = format!("MountVolume.SetUp failed: {err}");
                        self.record_event(e, "Warning", "FailedMount", &msg, None);
                    }
                    return false;
                }
            };
            // The sandbox (the pod's network) comes after the volumes, as on a kubelet.
            if let Some(net) = &self.config.network
                && e.net.is_none()
            {
                match net.pod(e.ip.parse().unwrap_or(NODE_IP)) {
                    Ok(n) => e.net = Some(n),
                    Err(err) => {
                        tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not create the pod's network");
                        if !e.materialise_failed {
                            e.materialise_failed = true;
                            let msg =
                                format!("Failed to create pod sandbox: {}", error_chain(&err));
                            self.record_event(e, "Warning", "FailedCreatePodSandBox", &msg, None);
                        }
                        return false;
                    }
                }
            }
            e.root = Some(root);
        }
        true
    }

    /// Records an event about the pod (or one of its containers, by `fieldPath`); a repeat of
    /// the same event raises its count, as the kubelet's recorder does.
    fn record_event(
        &self,
        e: &mut PodEntry,
        kind: &str,
        reason: &str,
        message: &str,
        field_path: Option<&str>,
    ) {
        let now = meta::now_rfc3339();
        let key = (
            reason.to_string(),
            message.to_string(),
            field_path.unwrap_or("").to_string(),
        );
        if let Some((name, count)) = e.events.get_mut(&key) {
            *count += 1;
            let count = *count;
            let bumped = self.store.modify(
                &self.events_rt,
                &e.ns,
                name,
                Part::Main,
                &WriteOpts::default(),
                |cur| {
                    let mut next = cur.clone();
                    next["count"] = json!(count);
                    next["lastTimestamp"] = json!(now);
                    Ok(next)
                },
            );
            if bumped.is_ok() {
                return;
            }
        }
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let name = format!("{}.{nanos:x}", e.name);
        let mut involved = json!({"apiVersion": "v1", "kind": "Pod", "name": e.name,
                                  "namespace": e.ns, "uid": e.uid});
        if let Some(f) = field_path {
            involved["fieldPath"] = json!(f);
        }
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": e.ns},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": "kubelet", "host": e.node},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": "kubelet",
            "reportingInstance": e.node,
        });
        match self
            .store
            .create(&self.events_rt, &e.ns, event, &WriteOpts::default())
        {
            Ok(_) => {
                e.events.insert(key, (name, 1));
            }
            Err(err) => tracing::debug!(pod = %e.name, error = %err, "could not record event"),
        }
    }

    /// The nodes' address as pods see it.
    fn host_ip(&self) -> &'static str {
        if self.config.network.is_some() {
            NODE_IP_STR
        } else {
            HOST_IP
        }
    }

    /// The URL a pod's processes reach the API server at: the `kubernetes` Service with their
    /// own network (HTTPS when the API server has a CA, as in a cluster), kubesim's own address
    /// without.
    fn in_cluster_url(&self) -> Option<String> {
        let url = self.config.api_url.as_ref()?;
        if self.config.network.is_none() {
            return Some(url.clone());
        }
        let scheme = match self.config.ca_pem {
            Some(_) => "https",
            None => url.split("://").next().unwrap_or("http"),
        };
        Some(format!(
            "{scheme}://{}:{}",
            crate::net::addr::KUBERNETES_SERVICE_IP,
            crate::net::addr::KUBERNETES_SERVICE_PORT
        ))
    }

    /// Writes the files a pod's processes see at their real paths (`/etc/hosts`,
    /// `/etc/resolv.conf`, `/etc/hostname`, the service-account volume) under `<dir>/world/`.
    fn write_pod_world(
        &self,
        e: &PodEntry,
        dir: &std::path::Path,
        token: Option<&str>,
    ) -> std::io::Result<()> {
        if self.config.network.is_none() {
            return Ok(());
        }
        let world = dir.join("world");
        std::fs::create_dir_all(&world)?;
        let records = self
            .config
            .services
            .as_ref()
            .map(|s| s.borrow().records())
            .unwrap_or_default();
        let hosts = PodHosts::of(&e.pod, &e.ip);
        std::fs::write(world.join("hosts"), hosts_file(&hosts, &records))?;
        std::fs::write(world.join("resolv.conf"), resolv_conf(&e.ns))?;
        std::fs::write(world.join("hostname"), format!("{}\n", hosts.hostname))?;
        // Mounted over the host's `/var/run/secrets` even when empty, so a pod without a
        // token never sees the host's.
        std::fs::create_dir_all(world.join("secrets"))?;
        if let Some(token) = token {
            atomic::write(
                &world.join(SERVICE_ACCOUNT_VOLUME),
                &self.service_account_files(e, token),
            )?;
        }
        Ok(())
    }

    /// Whether the pod gets its service-account token: not when the pod, or else its service
    /// account, turns automounting off.
    fn automounts(&self, e: &PodEntry) -> bool {
        let sa = service_account_name(&e.pod);
        e.pod
            .pointer("/spec/automountServiceAccountToken")
            .and_then(Value::as_bool)
            .or_else(|| {
                self.store
                    .get_raw("", "serviceaccounts", &e.ns, sa)?
                    .get("automountServiceAccountToken")?
                    .as_bool()
            })
            .unwrap_or(true)
    }

    /// The service-account volume's files: `token`, `namespace` and, with a CA, `ca.crt`.
    fn service_account_files(&self, e: &PodEntry, token: &str) -> atomic::Files {
        let mut files = atomic::Files::new();
        files.insert("token".into(), token.as_bytes().to_vec());
        files.insert("namespace".into(), e.ns.clone().into_bytes());
        if let Some(ca) = &self.config.ca_pem {
            files.insert("ca.crt".into(), ca.clone().into_bytes());
        }
        files
    }

    /// What the pod's processes authenticate with; `None`: nothing (the token is not mounted).
    ///
    /// With their own network: a service-account token for the pod's `serviceAccountName`,
    /// bound to the pod (it dies with the pod) and naming its node (a partition cuts its
    /// requests off), issued on first use and renewed by [`Self::renew_token`]. On the host's
    /// network (kept for compatibility), or without an authenticator: the node token, which
    /// stays privileged.
    fn pod_token(&self, e: &mut PodEntry) -> Result<Option<String>, IssueError> {
        let Some(auth) = self.service_account_tokens() else {
            return Ok(Some(node_token::for_pod(&e.node, &e.ns, &e.name)));
        };
        if !self.automounts(e) {
            return Ok(None);
        }
        if let Some(t) = &e.token {
            return Ok(Some(t.token.clone()));
        }
        let t = issue_pod_token(auth, e, SystemTime::now())?;
        let token = t.token.clone();
        e.token = Some(t);
        Ok(Some(token))
    }

    /// The authenticator, when pods get service-account tokens (their own network).
    fn service_account_tokens(&self) -> Option<&Authenticator> {
        self.config
            .tokens
            .as_deref()
            .filter(|_| self.config.network.is_some())
    }

    /// Renews a pod's token when it is due, as the kubelet's token manager does: the new token
    /// replaces the old in the service-account volume (one rename, so readers see one or the
    /// other) and in the pod's kubeconfig. A failed renewal keeps the old token (it stays
    /// valid far beyond its renewal time) and is tried again a minute later.
    fn renew_token(&self, e: &mut PodEntry, dir: &std::path::Path, now: SystemTime) {
        let (Some(auth), Some(current)) = (self.service_account_tokens(), &e.token) else {
            return;
        };
        if now < current.refresh_at {
            return;
        }
        let renewed = match issue_pod_token(auth, e, now) {
            Ok(t) => t,
            Err(err) => {
                tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not renew the service-account token");
                if let Some(t) = e.token.as_mut() {
                    t.refresh_at = now + TOKEN_RETRY;
                }
                return;
            }
        };
        let files = self.service_account_files(e, &renewed.token);
        if let Err(err) = atomic::write(&dir.join("world").join(SERVICE_ACCOUNT_VOLUME), &files) {
            tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not write the renewed token");
        }
        if let (Some(url), Some(root)) = (self.in_cluster_url(), &e.root)
            && let Err(err) = write_pod_kubeconfig(
                root,
                &url,
                Some(&renewed.token),
                self.config.ca_pem.as_deref(),
                &e.ns,
            )
        {
            tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not write the renewed kubeconfig");
        }
        e.token = Some(renewed);
    }

    /// Keeps what running pods see up to date: hosts files when Services change, mounted
    /// ConfigMaps and Secrets when they do.
    fn refresh_worlds(&self, st: &mut State) {
        let table = self.config.services.as_ref().map(|s| s.borrow().clone());
        let hosts_changed = match (&table, &st.hosts_version) {
            (Some(t), Some(old)) => !Arc::ptr_eq(t, old),
            (Some(_), None) => true,
            _ => false,
        };
        // Only pods with a root on disk (real processes) have a hosts file to rewrite: a
        // cluster of scripted pods does not pay for the records of every Service per change.
        let any_rooted = st.pods.values().any(|e| e.root.is_some());
        let records = match (
            &table,
            hosts_changed && self.config.network.is_some() && any_rooted,
        ) {
            (Some(t), true) => Some(t.records()),
            _ => None,
        };
        if hosts_changed {
            st.hosts_version = table;
        }
        let now = SystemTime::now();
        for e in st.pods.values_mut() {
            let Some(dir) = e.root.as_ref().and_then(|r| r.parent()).map(PathBuf::from) else {
                continue;
            };
            self.renew_token(e, &dir, now);
            if let Some(records) = &records {
                let text = hosts_file(&PodHosts::of(&e.pod, &e.ip), records);
                // In place: the file is bind-mounted, so it must stay the same file.
                if let Err(err) = write_in_place(&dir.join("world/hosts"), text.as_bytes()) {
                    tracing::debug!(pod = %e.name, error = %err, "could not update the hosts file");
                }
            }
            if std::mem::take(&mut e.volumes_stale) {
                let lookup = |plural: &str, name: &str| self.store.get_raw("", plural, &e.ns, name);
                let addrs = env::PodAddrs {
                    pod_ip: &e.ip,
                    host_ip: self.host_ip(),
                };
                if let Err(err) = volumes::refresh(&e.pod, &dir, &lookup, addrs) {
                    tracing::warn!(pod = %e.name, ns = %e.ns, error = %err, "could not update pod volumes");
                }
            }
        }
    }

    /// A probe worker's report.
    fn on_probe(
        &self,
        e: &mut PodEntry,
        cref: CRef,
        instance: u64,
        kind: probe::ProbeKind,
        report: probe::Report,
        now: SystemTime,
    ) {
        let Some(c) = e.machine.container(cref) else {
            return;
        };
        let name = c.name.clone();
        let field = format!(
            "spec.{}{{{name}}}",
            match cref.section {
                Section::Init => "initContainers",
                Section::Main => "containers",
            }
        );
        match (kind, report) {
            (_, probe::Report::Failed(text)) => {
                let msg = format!("{} probe failed: {text}", kind.word());
                self.record_event(e, "Warning", "Unhealthy", &msg, Some(&field));
            }
            (probe::ProbeKind::Startup, probe::Report::Result(true)) => {
                e.machine.on_probe_passed(cref, instance);
                self.start_probes(e, cref, instance, false);
            }
            (probe::ProbeKind::Readiness, probe::Report::Result(ready)) => {
                e.machine.on_readiness(cref, instance, ready);
            }
            (probe::ProbeKind::Startup | probe::ProbeKind::Liveness, probe::Report::Result(_)) => {
                let msg = format!(
                    "Container {name} failed {} probe, will be restarted",
                    kind.word().to_ascii_lowercase()
                );
                self.record_event(e, "Normal", "Killing", &msg, Some(&field));
                if let Some(Action::Stop { cref, signal }) = e.machine.on_unhealthy(cref, instance)
                {
                    stop(e, cref, signal, &self.rt);
                }
                let _ = now;
            }
        }
    }

    /// Starts the probe workers of a running instance: its startup probe alone (`startup`), or
    /// its readiness and liveness probes (none until a startup probe has passed).
    fn start_probes(&self, e: &mut PodEntry, cref: CRef, instance: u64, startup: bool) {
        let (Some(spec), Some(handle)) = (container_spec(&e.pod, cref), e.procs.get(&cref)) else {
            return;
        };
        let probes = probe::probes_of(spec);
        let target = probe::Target {
            pod_ip: e.ip.clone(),
            net: self.config.network.clone(),
            pid: handle.pid,
            env: e.envs.get(&cref).cloned().unwrap_or_default(),
            cwd: e.root.clone().unwrap_or_else(std::env::temp_dir),
            exited: handle.exited_flag(),
        };
        for p in probes {
            let is_startup = p.kind == probe::ProbeKind::Startup;
            if startup != is_startup {
                continue;
            }
            if startup && is_startup && p.check == probe::Check::Unsupported {
                // A probe kubesim cannot run must not hold the container forever.
                e.machine.on_probe_passed(cref, instance);
                continue;
            }
            let tx = self.msgs.clone();
            let uid = e.uid.clone();
            let kind = p.kind;
            self.rt
                .spawn(probe::run_worker(p, target.clone(), move |report| {
                    let _ = tx.send(Msg::Probe {
                        uid: uid.clone(),
                        cref,
                        instance,
                        kind,
                        report,
                    });
                }));
        }
    }

    fn start_process(&self, e: &mut PodEntry, cref: CRef, instance: u64, now: SystemTime) {
        let fail = |e: &mut PodEntry, why: StartFailure| {
            e.machine.on_start_failed(cref, instance, why, now)
        };
        let Some(c) = container_spec(&e.pod, cref).cloned() else {
            return fail(
                e,
                StartFailure::Exec("container not in the pod spec".into()),
            );
        };
        let name = c
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let Some(run) = self.image_run(image) else {
            return fail(
                e,
                StartFailure::Exec(format!("no command for image {image}")),
            );
        };
        let Some(root) = e.root.clone() else {
            return fail(e, StartFailure::Config("pod volumes are not ready".into()));
        };
        if !run.files.is_empty() && e.net.is_none() {
            // Without a mount namespace the image's files would have to be the host's.
            return fail(
                e,
                StartFailure::Config(format!(
                    "image {image} brings its own files ({}), which needs a mount namespace per \
                     container: kubesim's pod network (network: pod)",
                    run.files
                        .iter()
                        .map(|(at, _)| at.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            );
        }
        let mut base: Vec<(String, String)> = run.env.clone().into_iter().collect();
        base.push(("HOSTNAME".into(), e.name.clone()));
        base.push(("KUBESIM_POD_ROOT".into(), root.display().to_string()));
        // The Services as they are when the container starts, as the kubelet sets them.
        let links = e
            .pod
            .pointer("/spec/enableServiceLinks")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        base.extend(service_env(
            &e.ns,
            links,
            &self.store.all_of("", "services"),
        ));
        if let Some(url) = self.in_cluster_url() {
            let token = match self.pod_token(e) {
                Ok(t) => t,
                Err(err) => {
                    return fail(
                        e,
                        StartFailure::Config(format!(
                            "cannot fetch the service-account token: {err}"
                        )),
                    );
                }
            };
            let written = write_pod_kubeconfig(
                &root,
                &url,
                token.as_deref(),
                self.config.ca_pem.as_deref(),
                &e.ns,
            );
            match written {
                // With their own network, processes find the API server as in a cluster (the
                // service-account files and KUBERNETES_SERVICE_*); the kubeconfig stays in the
                // pod folder for tools that take one. On the host's network they are pointed
                // at it, unless the image's env names another kubeconfig (it wins, as it would
                // over any default; the container's env replaces the winner).
                Ok(path) if self.config.network.is_none() && !run.env.contains_key(KUBECONFIG) => {
                    base.push((KUBECONFIG.into(), path.display().to_string()));
                }
                Ok(_) => {}
                Err(err) => {
                    return fail(
                        e,
                        StartFailure::Config(format!("cannot write the pod's kubeconfig: {err}")),
                    );
                }
            }
        }
        let lookup = |plural: &str, obj: &str| self.store.get_raw("", plural, &e.ns, obj);
        let addrs = env::PodAddrs {
            pod_ip: &e.ip,
            host_ip: self.host_ip(),
        };
        let vars = match env::resolve_env(&e.pod, &c, &base, &lookup, addrs) {
            Ok(v) => v,
            Err(msg) => return fail(e, StartFailure::Config(msg)),
        };
        let argv = env::command_line(&c, run.command, &vars);
        let view = root
            .parent()
            .map(|dir| self.file_view(e, dir, &c, cref, run));
        // The working directory is the container's or the image's where the container has a
        // file system of its own; otherwise the pod root, where its mounts are.
        let cwd = match &view {
            Some(v) if e.net.is_some() => v.working_dir.clone().unwrap_or_else(|| root.clone()),
            _ => root.clone(),
        };
        let spec = process::SpawnSpec {
            argv,
            env: vars.clone(),
            cwd,
            log: self.log_path(&e.ns, &e.name, &name),
        };
        let tx = self.msgs.clone();
        let uid = e.uid.clone();
        let net = &e.net;
        let launch = |cmd: &mut tokio::process::Command| match (net, &view) {
            (Some(net), Some(view)) => net.spawn(view, &self.rt, cmd),
            _ => cmd.spawn(),
        };
        let spawned = process::spawn(spec, &self.rt, launch, move |code| {
            // The controller is gone only when kubesim shuts down; the exit no longer matters.
            let _ = tx.send(Msg::Exited {
                uid,
                cref,
                instance,
                code,
            });
        });
        match spawned {
            Ok(handle) => {
                tracing::debug!(pod = %e.name, container = %name, pid = handle.pid, "started process");
                if let Some(old) = e.procs.insert(cref, handle) {
                    old.kill_now();
                }
                e.envs.insert(cref, vars);
                let startup = e.machine.container(cref).is_some_and(|c| c.needs_probe);
                self.start_probes(e, cref, instance, startup);
            }
            Err(err) => fail(
                e,
                StartFailure::Exec(format!("failed to start container \"{name}\": {err}")),
            ),
        }
    }

    /// The file system of a container of the pod whose folder is `dir`: the image's layers, then
    /// the container's volumes at their mount paths and the kubelet's files, parents first.
    fn file_view(
        &self,
        e: &PodEntry,
        dir: &std::path::Path,
        container: &Value,
        cref: CRef,
        run: ImageRun<'_>,
    ) -> FileView {
        let layers = run.files.iter().map(|(at, from)| Mount {
            source: from.clone(),
            target: at.clone(),
            kind: MountKind::Layer,
        });
        let mut mounts: Vec<Mount> =
            volumes::container_mounts(&e.pod, container, &dir.join("volumes"));
        let world = dir.join("world");
        for (file, target) in [
            ("hosts", "/etc/hosts"),
            ("resolv.conf", "/etc/resolv.conf"),
            ("hostname", "/etc/hostname"),
        ] {
            // A bind mount needs something to mount on; a host without the file keeps none.
            if std::path::Path::new(target).exists() {
                mounts.push(Mount {
                    source: world.join(file),
                    target: PathBuf::from(target),
                    kind: MountKind::Bind { read_only: false },
                });
            }
        }
        let secrets = world.join("secrets");
        if secrets.exists() && ensure_mount_point(SECRETS_MOUNT_POINT).is_ok() {
            mounts.push(Mount {
                source: secrets,
                target: PathBuf::from(SECRETS_MOUNT_POINT),
                kind: MountKind::Bind { read_only: false },
            });
        }
        // Volumes and files over the image, parents first (a stable sort keeps spec order).
        mounts.sort_by_key(|m| crate::net::rootfs::depth(&m.target));
        let working_dir = container
            .get("workingDir")
            .and_then(Value::as_str)
            .filter(|w| !w.is_empty())
            .or(run.working_dir)
            .map(PathBuf::from);
        let section = match cref.section {
            Section::Init => "init",
            Section::Main => "main",
        };
        FileView {
            mounts: layers.chain(mounts).collect(),
            scratch: dir.join("rootfs").join(format!("{section}-{}", cref.index)),
            working_dir,
            hostname: PodHosts::of(&e.pod, &e.ip).hostname.to_string(),
            read_only_root: container
                .pointer("/securityContext/readOnlyRootFilesystem")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }
    }

    /// Stops every pod's processes and lets their networks go (the cluster is shutting down).
    pub fn shutdown(&self) {
        let mut st = lock(&self.state);
        let pods: Vec<PodEntry> = st.pods.drain().map(|(_, e)| e).collect();
        let orphans = std::mem::take(&mut st.orphans);
        let names = std::mem::take(&mut st.names);
        for e in pods.into_iter().chain(orphans) {
            self.dispose(&names, e);
        }
        self.stopped.store(true, Ordering::Release);
        self.wake.notify_one();
    }
}

/// `198.18.0.1` as text.
const NODE_IP_STR: &str = "198.18.0.1";

/// Where the service-account volume is mounted: `/var/run/secrets`, so the pod sees
/// `kubernetes.io/serviceaccount/{token,ca.crt,namespace}` below it and nothing of the host's.
const SECRETS_MOUNT_POINT: &str = "/var/run/secrets";

/// A bind mount needs a folder to mount on: the one thing kubesim may add to the host is this
/// empty folder, and only when the host has none.
fn ensure_mount_point(path: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(path)
}

/// Where the service-account volume lives below a pod's `world/` folder (and so below
/// `/var/run/secrets` in its containers).
const SERVICE_ACCOUNT_VOLUME: &str = "secrets/kubernetes.io/serviceaccount";

/// The name events give the service-account token volume (a real pod's is
/// `kube-api-access-<random>`, added by admission).
const TOKEN_VOLUME: &str = "kube-api-access";

/// How long a failed token renewal waits before the next try.
const TOKEN_RETRY: Duration = Duration::from_secs(60);

/// A pod's service-account token and when the kubelet renews it.
struct PodToken {
    token: String,
    refresh_at: SystemTime,
}

/// The pod's service account (`default` when it names none).
fn service_account_name(pod: &Value) -> &str {
    pod.pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
}

/// Issues the pod's token as the kubelet asks for it: the API server's audience, an hour and
/// 7 s, bound to the pod and its node.
fn issue_pod_token(
    auth: &Authenticator,
    e: &PodEntry,
    now: SystemTime,
) -> Result<PodToken, IssueError> {
    let issued = auth.issue(&TokenSpec {
        namespace: e.ns.clone(),
        service_account: service_account_name(&e.pod).to_string(),
        audiences: Vec::new(),
        expiration_seconds: crate::auth::KUBELET_EXPIRATION_SECONDS,
        bound_pod: Some(BoundPod {
            name: e.name.clone(),
            uid: e.uid.clone(),
            node: Some(e.node.clone()),
        }),
    })?;
    let lifetime = Duration::from_secs(crate::auth::KUBELET_EXPIRATION_SECONDS.unsigned_abs());
    Ok(PodToken {
        token: issued.token,
        refresh_at: now + token_refresh_after(lifetime),
    })
}

/// How long after issuing the kubelet renews a token of `lifetime`: at 80% of it, and at least
/// daily (the kubelet's token manager).
fn token_refresh_after(lifetime: Duration) -> Duration {
    (lifetime / 5 * 4).min(Duration::from_secs(24 * 3600))
}

/// Rewrites `path` keeping its inode (a bind mount holds the inode, not the name).
fn write_in_place(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.write_all(bytes)?;
    f.set_len(bytes.len() as u64)?;
    Ok(())
}

/// An error with its causes, for event messages.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
}
