//! The scheduler and kubelet: controllers that consume the store's event log for pods, bind
//! unscheduled pods to simulated nodes and move bound pods through their life, writing through
//! the store like any client so watchers see every step in order.
//!
//! The per-pod logic is a pure state machine ([`machine`]) and the phase a pure function
//! ([`phase::pod_phase`]); this module is the shell that feeds them time, volume checks and
//! process exits, and writes what they render. One task does all of it, one tick at a time, so
//! a pod's changes within a tick become a single status write.

mod atomic;
mod container_log;
mod env;
mod image;
mod launch;
mod logs;
mod machine;
mod node;
mod phase;
mod pod_world;
mod probe;
mod process;
mod recorder;
mod safe_path;
mod scheduler;
pub mod spark_image;
mod volumes;
mod wakeups;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{Notify, mpsc};

pub use container_log::ReadOptions;
pub use logs::{ContainerLog, LogRequest, OpenLogError};
pub use machine::{EXIT_CODE, NEVER_START, RUN_SECONDS};
pub use phase::{Phase, pod_phase};

use crate::api_error::ApiError;
use crate::auth::Authenticator;
use crate::meta;
use crate::meta::At;
use crate::net::{ClusterNet, PodNet};
use crate::resources::{NameRule, ResourceType};
use crate::service_table::ServiceTable;
use crate::store::{DeleteOpts, Event, EventType, Part, Store, WatchFrom, WriteOpts};
use image::ImageRun;
use machine::{Action, Behaviour, CRef, Machine, Section, Signal};
use process::ProcHandle;
use spark_image::SparkImage;
use wakeups::Wakeups;

use node::{NodeState, node_object};
pub use pod_world::POD_KUBECONFIG;
use pod_world::{KUBECONFIG, PodToken, write_pod_kubeconfig};

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

/// A pod bound to one of our nodes.
struct PodEntry {
    ns: String,
    name: String,
    uid: String,
    node: String,
    /// The node's index in [`Kubelet::nodes`].
    node_index: usize,
    /// Whether the pod is counted in [`State::active`] (it runs or may still run).
    counted_active: bool,
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
    /// Rung when the pod's status is written or a container writes to its log: followers of
    /// its logs wake on it.
    bell: Arc<Notify>,
    /// The service-account token its processes present, once issued.
    token: Option<PodToken>,
    materialise_failed: bool,
    delete_requested: bool,
    delete_sent: bool,
}

#[derive(Default)]
struct State {
    pods: HashMap<String, PodEntry>,
    /// Which pods the next tick looks at.
    wakeups: Wakeups,
    /// Pods with a real process: looked at on every tick (their processes and probes report
    /// on their own), and the only ones with a folder to keep up to date.
    processes: BTreeSet<String>,
    /// Pods bound to each node (by index) that are not finished: what the scheduler balances.
    active: Vec<usize>,
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
    let empty = serde_json::Map::new();
    let current = current.and_then(Value::as_object).unwrap_or(&empty);
    let ours = ours.as_object().unwrap_or(&empty);
    let our_conditions: &[Value] = ours
        .get("conditions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    fn kind(c: &Value) -> Option<&Value> {
        c.get("type")
    }
    // Built from the current status field by field and condition by condition, so what the
    // kubelet replaces (its fields and conditions, most of a pod's status) is never copied.
    let mut conditions: Vec<Value> = current
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(
            |existing| match our_conditions.iter().find(|c| kind(c) == kind(existing)) {
                Some(c) => {
                    let same = existing.get("status") == c.get("status");
                    let mut c = c.clone();
                    c["lastTransitionTime"] = match existing.get("lastTransitionTime") {
                        Some(t) if same => t.clone(),
                        _ => json!(now),
                    };
                    c
                }
                None => existing.clone(),
            },
        )
        .collect();
    for c in our_conditions {
        if !conditions.iter().any(|e| kind(e) == kind(c)) {
            let mut c = c.clone();
            c["lastTransitionTime"] = json!(now);
            conditions.push(c);
        }
    }
    let mut status = serde_json::Map::new();
    let mut conditions = Some(Value::Array(conditions));
    for (k, v) in current {
        let v = match (k.as_str(), ours.get(k)) {
            ("conditions", _) => conditions.take().unwrap_or_default(),
            (_, Some(o)) => o.clone(),
            (_, None) => v.clone(),
        };
        status.insert(k.clone(), v);
    }
    for (k, v) in ours {
        if k != "conditions" && !current.contains_key(k) {
            status.insert(k.clone(), v.clone());
        }
    }
    if let Some(c) = conditions {
        status.insert("conditions".into(), c);
    }
    Value::Object(status)
}

/// Keeps a pod's node's count of unfinished pods in step with its machine.
fn count_active(active: &mut [usize], e: &mut PodEntry) {
    let is_active = e.machine.is_active();
    if is_active != e.counted_active {
        e.counted_active = is_active;
        if is_active {
            active[e.node_index] += 1;
        } else {
            active[e.node_index] -= 1;
        }
    }
}

/// The grace period for stopping a pod's processes: the deletion's, else the spec's.
fn grace_period(pod: &Value) -> Duration {
    let secs = pod
        .at("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .or_else(|| {
            pod.at("/spec/terminationGracePeriodSeconds")
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

fn container_spec(pod: &Value, cref: CRef) -> Option<&Value> {
    let field = match cref.section {
        Section::Init => "initContainers",
        Section::Main => "containers",
    };
    pod.at(&format!("/spec/{field}/{}", cref.index))
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
            state: Mutex::new(State {
                active: vec![0; config.nodes.len()],
                ..State::default()
            }),
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
    pub fn logs(self: &Arc<Self>, namespace: &str, pod: &str, container: &str) -> Option<String> {
        let req = LogRequest {
            container: container.to_string(),
            ..LogRequest::default()
        };
        match self.open_log(namespace, pod, &req) {
            Ok(log) => Some(log.read_now().unwrap_or_default()),
            Err(OpenLogError::PodNotFound { .. } | OpenLogError::ContainerNotAvailable { .. }) => {
                None
            }
            // A container that has not started yet has no log: an empty one.
            Err(_) => Some(String::new()),
        }
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
        st.wakeups.wake(&uid);
        drop(st);
        self.wake.notify_one();
        Ok(())
    }

    fn pod_dir(&self, ns: &str, pod: &str) -> Option<PathBuf> {
        safe_path::safe_join(&self.config.work_dir, ns).and_then(|d| safe_path::safe_join(&d, pod))
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
        let mut guard = lock(&self.state);
        let State {
            pods, processes, ..
        } = &mut *guard;
        // Only real-process pods have volumes on disk.
        for uid in processes.iter() {
            let Some(e) = pods.get_mut(uid) else {
                continue;
            };
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
            .at("/spec/nodeName")
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
            st.wakeups.wake(&uid);
            return;
        }
        let Some(node_index) = self.nodes.iter().position(|n| n.name == node) else {
            return;
        };
        // A kubelet never reruns a pod that already finished (e.g. seen again after a restart).
        let phase = pod.at("/status/phase").and_then(Value::as_str);
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
            node_index,
            counted_active: false,
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
            bell: Arc::new(Notify::new()),
            token: None,
            materialise_failed: false,
            delete_requested: meta::is_deleting(pod),
            delete_sent: false,
        };
        st.names.insert(key, uid.clone());
        st.wakeups.wake(&uid);
        if has_process {
            st.processes.insert(uid.clone());
        }
        let entry = st.pods.entry(uid).insert_entry(entry).into_mut();
        count_active(&mut st.active, entry);
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
        let Some(mut e) = st.pods.remove(uid) else {
            return;
        };
        st.wakeups.forget(uid);
        st.processes.remove(uid);
        if std::mem::take(&mut e.counted_active) {
            st.active[e.node_index] -= 1;
        }
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
        e.bell.notify_waiters();
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
        safe_path::safe_join(&self.config.work_dir, ns).map(|d| d.join(format!(".{pod}.{uid}")))
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
                    st.wakeups.wake(&uid);
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
                    st.wakeups.wake(&uid);
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
        let State {
            pods,
            orphans,
            wakeups,
            processes,
            active,
            ..
        } = &mut *guard;
        let mut due = wakeups.take_due(now);
        due.extend(processes.iter().cloned());
        for uid in &due {
            let Some(e) = pods.get_mut(uid) else {
                continue;
            };
            self.step_pod(e, orphans, now, &now_str);
            count_active(active, e);
            // When to look at the pod again, if nothing happens to it before.
            if e.delete_requested || e.has_process {
                wakeups.wake(uid);
            } else if !e.machine.is_finished() || e.machine.is_changed() {
                match e.machine.quiet_until() {
                    Some(until) => wakeups.wake_at(uid, until),
                    None => wakeups.wake(uid),
                }
            }
        }
    }

    /// Moves one pod on to `now`: steps its machine, starts and stops its processes, and writes
    /// what changed.
    fn step_pod(&self, e: &mut PodEntry, orphans: &[PodEntry], now: SystemTime, now_str: &str) {
        if e.machine.is_finished() && !e.machine.is_changed() && !e.delete_requested {
            return;
        }
        // Nothing is due and nothing came from outside: stepping would change nothing.
        if !e.delete_requested
            && !e.has_process
            && e.machine.quiet_until().is_some_and(|until| now < until)
        {
            return;
        }
        let healthy = !self.nodes[e.node_index].is_partitioned();
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
            return;
        }
        if e.machine.take_changed() {
            let ours = e
                .machine
                .render(&e.uid, &e.ip, self.host_ip(), &e.start_time);
            if e.last_written.as_ref() != Some(&ours) {
                match self.write_status(e, &ours, now_str) {
                    Ok(()) => {
                        e.last_written = Some(ours);
                        e.bell.notify_waiters();
                    }
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
                    // the pod is not copied just to be discarded (nor the status copied again,
                    // as `json!` would copy a `Value` put in it).
                    let mut pod = serde_json::Map::new();
                    pod.insert("status".into(), merge_status(cur.get("status"), ours, now));
                    Ok(Value::Object(pod))
                },
            )
            .map(|_| ())
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
