//! The Service controller: the endpoints and endpoint-slice controllers of a real cluster in one.
//! It keeps `Endpoints` and `EndpointSlices` (discovery.k8s.io/v1) of every Service with a
//! selector in step with the pods that match it, and publishes the [`ServiceTable`] the Service
//! proxy and the kubelet's hosts files read. Like the other controllers it consumes the store's
//! event log and writes through the store.
//!
//! Which pods back a Service, and on which port, is decided by [`service_entry`], a pure
//! function.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use crate::api_error::ApiError;
use crate::meta;
use crate::meta::At;
use crate::resources::ResourceType;
use crate::service_table::{Backend, ServiceEntry, ServicePort, ServiceTable};
use crate::store::{DeleteOpts, EventType, Part, Store, WatchFrom, WriteOpts};

/// Label naming the Service of an EndpointSlice.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Label naming the controller that manages an EndpointSlice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

fn port_u16(v: Option<&Value>) -> Option<u16> {
    v.and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
}

fn service_ports(svc: &Value) -> Vec<(ServicePort, Value)> {
    svc.at("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let port = port_u16(p.get("port"))?;
            Some((
                ServicePort {
                    name: p.get("name").and_then(Value::as_str).unwrap_or("").into(),
                    port,
                    protocol: p
                        .get("protocol")
                        .and_then(Value::as_str)
                        .unwrap_or("TCP")
                        .into(),
                },
                p.get("targetPort").cloned().unwrap_or_else(|| json!(port)),
            ))
        })
        .collect()
}

/// A named targetPort resolved against the pod's container ports.
fn resolve_target(pod: &Value, target: &Value) -> Option<u16> {
    match target {
        Value::Number(_) => port_u16(Some(target)),
        Value::String(s) => s.parse().ok().or_else(|| {
            pod.at("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .flat_map(|c| {
                    c.get("ports")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                })
                .find(|p| p.get("name").and_then(Value::as_str) == Some(s.as_str()))
                .and_then(|p| port_u16(p.get("containerPort")))
        }),
        _ => None,
    }
}

fn is_ready(pod: &Value) -> bool {
    pod.at("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Ready")
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

fn selector_matches(selector: &serde_json::Map<String, Value>, pod: &Value) -> bool {
    let labels = pod.at("/metadata/labels").and_then(Value::as_object);
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The entry of Service `svc` given the pods of its namespace (for a Service with a selector)
/// or its Endpoints object (for one without, whose endpoints are someone else's).
pub fn service_entry(svc: &Value, pods: &[&Value], endpoints: Option<&Value>) -> ServiceEntry {
    let ports = service_ports(svc);
    let cluster_ip = svc
        .at("/spec/clusterIP")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok());
    let name = meta::name(svc).to_string();
    let selector = svc
        .at("/spec/selector")
        .and_then(Value::as_object)
        .filter(|s| !s.is_empty());
    let backends = match selector {
        Some(sel) => pods
            .iter()
            .filter(|p| selector_matches(sel, p))
            .filter(|p| {
                !matches!(
                    p.at("/status/phase").and_then(Value::as_str),
                    Some("Succeeded" | "Failed")
                )
            })
            .filter_map(|p| {
                let ip: Ipv4Addr = p
                    .at("/status/podIP")
                    .and_then(Value::as_str)?
                    .parse()
                    .ok()?;
                let spec_str = |f: &str| p.at(&format!("/spec/{f}")).and_then(Value::as_str);
                Some(Backend {
                    ip,
                    ready: is_ready(p),
                    terminating: meta::is_deleting(p),
                    node: spec_str("nodeName").unwrap_or("").into(),
                    pod: (meta::name(p).into(), meta::uid(p).into()),
                    hostname: spec_str("hostname")
                        .filter(|_| spec_str("subdomain") == Some(name.as_str()))
                        .map(str::to_string),
                    ports: ports
                        .iter()
                        .filter_map(|(sp, target)| {
                            resolve_target(p, target).map(|t| (sp.name.clone(), t))
                        })
                        .collect(),
                })
            })
            .collect(),
        None => endpoints.map(backends_of_endpoints).unwrap_or_default(),
    };
    ServiceEntry {
        namespace: meta::meta_str(svc, "namespace").into(),
        name,
        cluster_ip,
        ports: ports.into_iter().map(|(p, _)| p).collect(),
        backends,
    }
}

fn backends_of_endpoints(ep: &Value) -> Vec<Backend> {
    let mut out = Vec::new();
    for subset in ep
        .get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ports: BTreeMap<String, u16> = subset
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| {
                Some((
                    p.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    port_u16(p.get("port"))?,
                ))
            })
            .collect();
        for (field, ready) in [("addresses", true), ("notReadyAddresses", false)] {
            for a in subset
                .get(field)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let Some(ip) = a
                    .get("ip")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse().ok())
                else {
                    continue;
                };
                out.push(Backend {
                    ip,
                    ready,
                    terminating: false,
                    node: a
                        .get("nodeName")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .into(),
                    pod: Default::default(),
                    hostname: a
                        .get("hostname")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    ports: ports.clone(),
                });
            }
        }
    }
    out
}

/// A JSON object of `fields` (serde_json's `json!` would serialise each value again).
fn object<const N: usize>(fields: [(&str, Value); N]) -> serde_json::Map<String, Value> {
    fields
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn target_ref(ns: &str, b: &Backend) -> Value {
    Value::Object(object([
        ("kind", "Pod".into()),
        ("namespace", ns.into()),
        ("name", b.pod.0.as_str().into()),
        ("uid", b.pod.1.as_str().into()),
    ]))
}

/// The `Endpoints` object of a Service with a selector: backends grouped into subsets by their
/// resolved ports; terminating pods left out, unready ones under `notReadyAddresses`.
pub fn endpoints_object(svc: &Value, entry: &ServiceEntry) -> Value {
    // Resolved ports → (ready addresses, unready addresses).
    type Subsets<'a> = BTreeMap<Vec<(&'a str, u16)>, (Vec<Value>, Vec<Value>)>;
    let mut groups = Subsets::new();
    let mut backends: Vec<&Backend> = entry.backends.iter().filter(|b| !b.terminating).collect();
    backends.sort_by_key(|b| b.ip);
    for b in backends {
        let key: Vec<(&str, u16)> = b.ports.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        if key.is_empty() {
            continue;
        }
        let mut addr = object([
            ("ip", b.ip.to_string().into()),
            ("nodeName", b.node.as_str().into()),
            ("targetRef", target_ref(&entry.namespace, b)),
        ]);
        if let Some(h) = &b.hostname {
            addr.insert("hostname".into(), h.as_str().into());
        }
        let slot = groups.entry(key).or_default();
        if b.ready {
            slot.0.push(Value::Object(addr))
        } else {
            slot.1.push(Value::Object(addr))
        }
    }
    let subsets: Vec<Value> = groups
        .into_iter()
        .map(|(ports, (ready, unready))| {
            let ports: Vec<Value> = ports
                .into_iter()
                .map(|(name, port)| {
                    let proto = entry
                        .ports
                        .iter()
                        .find(|p| p.name == name)
                        .map(|p| p.protocol.as_str())
                        .unwrap_or("TCP");
                    let mut v = object([("port", port.into()), ("protocol", proto.into())]);
                    if !name.is_empty() {
                        v.insert("name".into(), name.into());
                    }
                    Value::Object(v)
                })
                .collect();
            let mut s = object([("ports", ports.into())]);
            if !ready.is_empty() {
                s.insert("addresses".into(), ready.into());
            }
            if !unready.is_empty() {
                s.insert("notReadyAddresses".into(), unready.into());
            }
            Value::Object(s)
        })
        .collect();
    let labels = svc
        .at("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    let mut ep = object([
        ("apiVersion", "v1".into()),
        ("kind", "Endpoints".into()),
        (
            "metadata",
            Value::Object(object([
                ("name", entry.name.as_str().into()),
                ("namespace", entry.namespace.as_str().into()),
                ("labels", labels),
            ])),
        ),
    ]);
    if !subsets.is_empty() {
        ep.insert("subsets".into(), subsets.into());
    }
    Value::Object(ep)
}

/// The EndpointSlice of a Service with a selector (one slice: kubesim's Services stay far
/// below the 100 endpoints a slice holds by default).
pub fn endpoint_slice(svc: &Value, entry: &ServiceEntry) -> Value {
    let mut labels = svc
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.insert(SERVICE_NAME_LABEL.into(), entry.name.as_str().into());
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    let mut backends: Vec<&Backend> = entry.backends.iter().collect();
    backends.sort_by_key(|b| b.ip);
    let endpoints: Vec<Value> = backends
        .iter()
        .map(|b| {
            let conditions = object([
                ("ready", (b.ready && !b.terminating).into()),
                ("serving", b.ready.into()),
                ("terminating", b.terminating.into()),
            ]);
            let mut e = object([
                ("addresses", vec![Value::from(b.ip.to_string())].into()),
                ("conditions", Value::Object(conditions)),
                ("nodeName", b.node.as_str().into()),
                ("targetRef", target_ref(&entry.namespace, b)),
            ]);
            if let Some(h) = &b.hostname {
                e.insert("hostname".into(), h.as_str().into());
            }
            Value::Object(e)
        })
        .collect();
    // A named targetPort may resolve differently per pod; the slice carries the first.
    let ports: Vec<Value> = entry
        .ports
        .iter()
        .filter_map(|p| {
            let port = entry.backends.iter().find_map(|b| b.ports.get(&p.name))?;
            Some(Value::Object(object([
                ("name", p.name.as_str().into()),
                ("port", (*port).into()),
                ("protocol", p.protocol.as_str().into()),
            ])))
        })
        .collect();
    let owner = object([
        ("apiVersion", "v1".into()),
        ("kind", "Service".into()),
        ("name", entry.name.as_str().into()),
        ("uid", meta::uid(svc).into()),
        ("controller", true.into()),
        ("blockOwnerDeletion", true.into()),
    ]);
    let metadata = object([
        ("name", slice_name(svc).into()),
        ("namespace", entry.namespace.as_str().into()),
        ("labels", Value::Object(labels)),
        ("ownerReferences", vec![Value::Object(owner)].into()),
    ]);
    Value::Object(object([
        ("apiVersion", "discovery.k8s.io/v1".into()),
        ("kind", "EndpointSlice".into()),
        ("metadata", Value::Object(metadata)),
        ("addressType", "IPv4".into()),
        ("endpoints", endpoints.into()),
        ("ports", ports.into()),
    ]))
}

/// `<service>-<5 characters>` like the controller's generated names, but stable per Service uid
/// so kubesim finds its slice again without a list.
fn slice_name(svc: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h = meta::uid(svc)
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    let mut suffix = String::new();
    for _ in 0..5 {
        suffix.push(char::from(ALPHABET[(h % ALPHABET.len() as u64) as usize]));
        h /= ALPHABET.len() as u64;
    }
    let mut base = meta::name(svc).to_string();
    base.truncate(57);
    format!("{base}-{suffix}")
}

/// Starts the controller; the receiver sees each new table.
pub fn start(store: Arc<Store>) -> watch::Receiver<Arc<ServiceTable>> {
    let (tx, rx) = watch::channel(Arc::new(ServiceTable::default()));
    let registry = store.registry();
    let (Some(ep_rt), Some(slice_rt)) = (
        registry.find("", "v1", "endpoints"),
        registry.find("discovery.k8s.io", "v1", "endpointslices"),
    ) else {
        tracing::error!("endpoints types missing; the Service controller does not run");
        return rx;
    };
    let mut c = Controller {
        store,
        ep_rt,
        slice_rt,
        services: HashMap::new(),
        pods: HashMap::new(),
        pods_by_label: HashMap::new(),
        services_by_anchor: HashMap::new(),
        anchors: HashMap::new(),
        selector_labels: HashMap::new(),
        endpoints: HashMap::new(),
        written: HashMap::new(),
        table: ServiceTable::default(),
        tx,
    };
    tokio::spawn(async move { c.run().await });
    rx
}

type Key = (String, String);

/// A label as (namespace, key, value): what the indexes are keyed by.
type LabelKey = (String, String, String);

struct Controller {
    store: Arc<Store>,
    ep_rt: Arc<ResourceType>,
    slice_rt: Arc<ResourceType>,
    services: HashMap<Key, Arc<Value>>,
    /// Pods by namespace, then name.
    pods: HashMap<String, BTreeMap<String, Arc<Value>>>,
    /// Pod names by each of their labels: the candidates of a selector are the pods carrying
    /// its first label (its anchor), so a Service's endpoints cost the pods it may select, not
    /// the namespace's.
    pods_by_label: HashMap<LabelKey, BTreeSet<String>>,
    /// Service names by the anchor of their selector: a pod's change concerns the Services
    /// anchored on one of its labels (before or after the change), not every Service. Any
    /// label of a selector would do (a selected pod carries them all); the anchor is the one
    /// fewest Services share (see [`Controller::anchor_of`]), e.g. a Spark driver Service's
    /// `spark-app-selector`, not the `spark-role` or `spark-app-name` every driver has.
    services_by_anchor: HashMap<LabelKey, BTreeSet<String>>,
    /// Each Service's anchor, and how many Services' selectors hold each label.
    anchors: HashMap<Key, LabelKey>,
    selector_labels: HashMap<LabelKey, usize>,
    /// Endpoints objects of Services without a selector.
    endpoints: HashMap<Key, Arc<Value>>,
    /// What this controller last wrote per Service.
    written: HashMap<Key, Written>,
    table: ServiceTable,
    tx: watch::Sender<Arc<ServiceTable>>,
}

/// What the Endpoints and EndpointSlice last written for a Service were built from.
struct Written {
    /// The Service object (as the event log shares it) and its entry: the same two build the
    /// same objects, so a pod change that leaves the entry as it was costs no rebuild. (The
    /// objects themselves are not kept: the store keeps them, and answers a write that
    /// changes nothing without an event.)
    svc: Arc<Value>,
    entry: ServiceEntry,
}

/// A Service's non-empty selector.
fn selector_of(svc: &Value) -> Option<&serde_json::Map<String, Value>> {
    svc.at("/spec/selector")
        .and_then(Value::as_object)
        .filter(|s| !s.is_empty())
}

/// The labels of a selector, as index keys (a non-string value selects nothing).
fn selector_keys(ns: &str, selector: &serde_json::Map<String, Value>) -> Vec<LabelKey> {
    selector
        .iter()
        .filter_map(|(k, v)| Some((ns.to_string(), k.clone(), v.as_str()?.to_string())))
        .collect()
}

/// The labels of an object, as index keys.
fn label_keys(ns: &str, obj: &Value) -> Vec<LabelKey> {
    obj.at("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((ns.to_string(), k.clone(), v.as_str()?.to_string())))
        .collect()
}

fn index_remove(index: &mut HashMap<LabelKey, BTreeSet<String>>, key: &LabelKey, name: &str) {
    if let Some(names) = index.get_mut(key) {
        names.remove(name);
        if names.is_empty() {
            index.remove(key);
        }
    }
}

impl Controller {
    async fn run(&mut self) {
        let scope = |g: &str, p: &str, _: &str| {
            g.is_empty() && matches!(p, "services" | "pods" | "endpoints")
        };
        loop {
            let sub = match self.store.subscribe(&scope, WatchFrom::Now) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "Service controller cannot subscribe");
                    return;
                }
            };
            self.services.clear();
            self.pods.clear();
            self.pods_by_label.clear();
            self.services_by_anchor.clear();
            self.anchors.clear();
            self.selector_labels.clear();
            self.endpoints.clear();
            // Everything known so far is looked at again, gone Services included.
            let mut dirty: BTreeSet<Key> = self.table.keys().cloned().collect();
            for ev in &sub.replay {
                self.observe(ev.kind, &ev.plural, &ev.namespace, &ev.object, &mut dirty);
            }
            self.sync(&mut dirty);
            let mut live = sub.live;
            loop {
                let first = live.recv().await;
                let mut batch = vec![first];
                // Take whatever else is queued, so a burst costs one pass per Service.
                while let Ok(ev) = live.try_recv() {
                    batch.push(Ok(ev));
                }
                let mut lagged = false;
                for r in batch {
                    match r {
                        Ok(ev) => {
                            self.observe(ev.kind, &ev.plural, &ev.namespace, &ev.object, &mut dirty)
                        }
                        Err(RecvError::Lagged(n)) => {
                            tracing::warn!(missed = n, "Service controller lagged; resyncing");
                            lagged = true;
                        }
                        Err(RecvError::Closed) => return,
                    }
                }
                if lagged {
                    break;
                }
                self.sync(&mut dirty);
                // Pod status changes come in bursts; a short pause batches them.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }

    /// Takes in one event; marks the Services whose entry it may change.
    fn observe(
        &mut self,
        kind: EventType,
        plural: &str,
        ns: &str,
        obj: &Arc<Value>,
        dirty: &mut BTreeSet<Key>,
    ) {
        let key = (ns.to_string(), meta::name(obj).to_string());
        let deleted = kind == EventType::Deleted;
        match plural {
            "services" => {
                let old = if deleted {
                    self.services.remove(&key)
                } else {
                    self.services.insert(key.clone(), obj.clone())
                };
                if let Some(old) = old.as_deref().and_then(selector_of) {
                    for label in selector_keys(ns, old) {
                        if let Some(n) = self.selector_labels.get_mut(&label) {
                            *n -= 1;
                            if *n == 0 {
                                self.selector_labels.remove(&label);
                            }
                        }
                    }
                }
                if let Some(a) = self.anchors.remove(&key) {
                    index_remove(&mut self.services_by_anchor, &a, &key.1);
                }
                if !deleted && let Some(selector) = selector_of(obj) {
                    let labels = selector_keys(ns, selector);
                    for label in &labels {
                        *self.selector_labels.entry(label.clone()).or_default() += 1;
                    }
                    if let Some(a) = self.anchor_of(labels) {
                        self.services_by_anchor
                            .entry(a.clone())
                            .or_default()
                            .insert(key.1.clone());
                        self.anchors.insert(key.clone(), a);
                    }
                }
                dirty.insert(key);
            }
            "pods" => {
                let pods = self.pods.entry(ns.to_string()).or_default();
                let old = if deleted {
                    pods.remove(&key.1)
                } else {
                    pods.insert(key.1.clone(), obj.clone())
                };
                if !deleted
                    && let Some(old) = &old
                    && old.at("/metadata/labels") == obj.at("/metadata/labels")
                {
                    // Most pod changes are status changes: the same Services, the same index.
                    for label in label_keys(ns, obj) {
                        for svc in self.services_by_anchor.get(&label).into_iter().flatten() {
                            dirty.insert((ns.to_string(), svc.clone()));
                        }
                    }
                    return;
                }
                let old_labels = old
                    .as_deref()
                    .map(|o| label_keys(ns, o))
                    .unwrap_or_default();
                let new_labels = if deleted {
                    Vec::new()
                } else {
                    label_keys(ns, obj)
                };
                for label in old_labels.iter().chain(&new_labels) {
                    for svc in self.services_by_anchor.get(label).into_iter().flatten() {
                        dirty.insert((ns.to_string(), svc.clone()));
                    }
                }
                for label in &old_labels {
                    index_remove(&mut self.pods_by_label, label, &key.1);
                }
                for label in new_labels {
                    self.pods_by_label
                        .entry(label)
                        .or_default()
                        .insert(key.1.clone());
                }
            }
            _ => {
                if deleted {
                    self.endpoints.remove(&key);
                } else {
                    self.endpoints.insert(key.clone(), obj.clone());
                }
                // Our own writes come back here: a Service with a selector takes its entry
                // from the pods, so only the Endpoints of one without a selector matter.
                if self
                    .services
                    .get(&key)
                    .is_none_or(|s| selector_of(s).is_none())
                {
                    dirty.insert(key);
                }
            }
        }
    }

    /// The label a Service is indexed under: of its selector's labels, the one the fewest
    /// Services' selectors hold, then the one the fewest pods carry.
    fn anchor_of(&self, labels: Vec<LabelKey>) -> Option<LabelKey> {
        labels.into_iter().min_by_key(|label| {
            (
                self.selector_labels.get(label).copied().unwrap_or(0),
                self.pods_by_label.get(label).map_or(0, BTreeSet::len),
            )
        })
    }

    /// Recomputes the entries of the dirty Services.
    fn sync(&mut self, dirty: &mut BTreeSet<Key>) {
        if dirty.is_empty() {
            return;
        }
        let mut changed = false;
        for key in std::mem::take(dirty) {
            let Some(svc) = self.services.get(&key).cloned() else {
                changed |= self.table.remove(&key);
                if self.written.remove(&key).is_some() {
                    // The slice goes with its owner (garbage collector); the Endpoints object
                    // has no owner and is removed by its controller, as here.
                    match self
                        .store
                        .delete(&self.ep_rt, &key.0, &key.1, &DeleteOpts::default())
                    {
                        Ok(_) => {}
                        Err(e) if e.code == 404 => {}
                        Err(e) => {
                            tracing::warn!(service = %key.1, ns = %key.0, error = %e, "could not delete endpoints")
                        }
                    }
                }
                continue;
            };
            let selector = selector_of(&svc);
            // The pods carrying the selector's rarest label: a superset of those it selects.
            let rarest = selector.and_then(|selector| {
                selector_keys(&key.0, selector)
                    .iter()
                    .map(|label| self.pods_by_label.get(label))
                    .min_by_key(|names| names.map_or(0, BTreeSet::len))
            });
            let in_ns = self.pods.get(&key.0);
            let candidates: Vec<Arc<Value>> = rarest
                .flatten()
                .into_iter()
                .flatten()
                .filter_map(|name| in_ns.and_then(|pods| pods.get(name)).cloned())
                .collect();
            let pods: Vec<&Value> = candidates.iter().map(|p| p.as_ref()).collect();
            let entry = service_entry(&svc, &pods, self.endpoints.get(&key).map(|e| e.as_ref()));
            if selector.is_some() {
                self.write(&key, &svc, &entry);
            }
            if self.table.get(&key) != Some(&entry) {
                self.table.insert(key, entry);
                changed = true;
            }
        }
        if changed {
            self.tx.send_replace(Arc::new(self.table.clone()));
        }
    }

    fn write(&mut self, key: &Key, svc: &Arc<Value>, entry: &ServiceEntry) {
        if let Some(w) = self.written.get(key)
            && Arc::ptr_eq(&w.svc, svc)
            && w.entry == *entry
        {
            return;
        }
        let ok = self.put(
            &self.ep_rt,
            &key.0,
            &key.1,
            &|| endpoints_object(svc, entry),
            &["subsets"],
        ) && self.put(
            &self.slice_rt,
            &key.0,
            &slice_name(svc),
            &|| endpoint_slice(svc, entry),
            &["endpoints", "ports", "addressType"],
        );
        if ok {
            self.written.insert(
                key.clone(),
                Written {
                    svc: Arc::clone(svc),
                    entry: entry.clone(),
                },
            );
        }
    }

    /// Creates the object `build` makes, or replaces the controller's fields (`fields` and
    /// labels) of the current one; leaves it alone when they already hold what it would write,
    /// as the real controllers do (no new resourceVersion, no watch event).
    fn put(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        build: &dyn Fn() -> Value,
        fields: &[&str],
    ) -> bool {
        let (group, plural) = self.store.storage_key(rt);
        let mut desired = Some(build());
        // A second round only when another writer created or deleted the object between the
        // read and the write.
        let mut result = Ok(());
        for _ in 0..2 {
            let current = self.store.get_shared(&group, &plural, ns, name);
            let mut obj = desired.take().unwrap_or_else(build);
            result = match &current {
                Some(cur) if owns_same(cur, &obj, fields) => return true,
                Some(_) => self
                    .store
                    .modify_shared(rt, ns, name, Part::Main, &WriteOpts::default(), |cur| {
                        Ok(with_fields_of(cur, &mut obj, fields))
                    })
                    .map(drop),
                None => self
                    .store
                    .create_shared(rt, ns, obj, &WriteOpts::default())
                    .map(drop),
            };
            match &result {
                Err(e) if current.is_some() && e.code == 404 => {}
                Err(e) if current.is_none() && e.reason == "AlreadyExists" => {}
                _ => break,
            }
        }
        match result {
            Ok(()) => true,
            Err(ApiError {
                code: 404 | 403, ..
            }) => true,
            Err(e) => {
                tracing::warn!(name, ns, error = %e, "could not write endpoints");
                false
            }
        }
    }
}

/// Whether `cur` already holds the controller's part of `obj`: `fields` and the labels.
fn owns_same(cur: &Value, obj: &Value, fields: &[&str]) -> bool {
    fields.iter().all(|f| cur.get(*f) == obj.get(*f))
        && cur.at("/metadata/labels") == obj.at("/metadata/labels")
}

/// `cur` with the controller's part taken from `obj` (moved out, not copied: the addresses are
/// most of these objects).
fn with_fields_of(cur: &Value, obj: &mut Value, fields: &[&str]) -> Value {
    let mut next = meta::fields_except(cur, fields);
    if let Some(obj) = obj.as_object_mut() {
        for f in fields {
            if let Some(v) = obj.remove(*f) {
                next.insert((*f).to_string(), v);
            }
        }
    }
    let mut next = Value::Object(next);
    if let Some(labels) = obj.pointer_mut("/metadata/labels") {
        next["metadata"]["labels"] = labels.take();
    }
    next
}

#[cfg(test)]
mod tests;
