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

fn target_ref(ns: &str, b: &Backend) -> Value {
    json!({"kind": "Pod", "namespace": ns, "name": b.pod.0, "uid": b.pod.1})
}

/// The `Endpoints` object of a Service with a selector: backends grouped into subsets by their
/// resolved ports; terminating pods left out, unready ones under `notReadyAddresses`.
pub fn endpoints_object(svc: &Value, entry: &ServiceEntry) -> Value {
    // Resolved ports → (ready addresses, unready addresses).
    type Subsets = BTreeMap<Vec<(String, u16)>, (Vec<Value>, Vec<Value>)>;
    let mut groups = Subsets::new();
    let mut backends: Vec<&Backend> = entry.backends.iter().filter(|b| !b.terminating).collect();
    backends.sort_by_key(|b| b.ip);
    for b in backends {
        let key: Vec<(String, u16)> = b.ports.iter().map(|(k, v)| (k.clone(), *v)).collect();
        if key.is_empty() {
            continue;
        }
        let mut addr = json!({"ip": b.ip.to_string(), "nodeName": b.node,
                              "targetRef": target_ref(&entry.namespace, b)});
        if let Some(h) = &b.hostname {
            addr["hostname"] = json!(h);
        }
        let slot = groups.entry(key).or_default();
        if b.ready {
            slot.0.push(addr)
        } else {
            slot.1.push(addr)
        }
    }
    let subsets: Vec<Value> = groups
        .into_iter()
        .map(|(ports, (ready, unready))| {
            let ports: Vec<Value> = ports
                .iter()
                .map(|(name, port)| {
                    let proto = entry
                        .ports
                        .iter()
                        .find(|p| &p.name == name)
                        .map(|p| p.protocol.as_str())
                        .unwrap_or("TCP");
                    let mut v = json!({"port": port, "protocol": proto});
                    if !name.is_empty() {
                        v["name"] = json!(name);
                    }
                    v
                })
                .collect();
            let mut s = json!({"ports": ports});
            if !ready.is_empty() {
                s["addresses"] = json!(ready);
            }
            if !unready.is_empty() {
                s["notReadyAddresses"] = json!(unready);
            }
            s
        })
        .collect();
    let labels = svc
        .at("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut ep = json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": entry.name, "namespace": entry.namespace, "labels": labels},
    });
    if !subsets.is_empty() {
        ep["subsets"] = json!(subsets);
    }
    ep
}

/// The EndpointSlice of a Service with a selector (one slice: kubesim's Services stay far
/// below the 100 endpoints a slice holds by default).
pub fn endpoint_slice(svc: &Value, entry: &ServiceEntry) -> Value {
    let mut labels = svc
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.insert(SERVICE_NAME_LABEL.into(), json!(entry.name));
    labels.insert(MANAGED_BY_LABEL.into(), json!(MANAGED_BY));
    let mut backends: Vec<&Backend> = entry.backends.iter().collect();
    backends.sort_by_key(|b| b.ip);
    let endpoints: Vec<Value> = backends
        .iter()
        .map(|b| {
            let mut e = json!({
                "addresses": [b.ip.to_string()],
                "conditions": {"ready": b.ready && !b.terminating, "serving": b.ready,
                               "terminating": b.terminating},
                "nodeName": b.node,
                "targetRef": target_ref(&entry.namespace, b),
            });
            if let Some(h) = &b.hostname {
                e["hostname"] = json!(h);
            }
            e
        })
        .collect();
    // A named targetPort may resolve differently per pod; the slice carries the first.
    let ports: Vec<Value> = entry
        .ports
        .iter()
        .filter_map(|p| {
            let port = entry.backends.iter().find_map(|b| b.ports.get(&p.name))?;
            Some(json!({"name": p.name, "port": port, "protocol": p.protocol}))
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": slice_name(svc),
            "namespace": entry.namespace,
            "labels": labels,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": entry.name,
                                  "uid": meta::uid(svc), "controller": true,
                                  "blockOwnerDeletion": true}],
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    })
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
        let ep = endpoints_object(svc, entry);
        let slice = endpoint_slice(svc, entry);
        let ok = self.upsert(&self.ep_rt, &key.0, &key.1, &ep, &["subsets"])
            && self.upsert(
                &self.slice_rt,
                &key.0,
                &slice_name(svc),
                &slice,
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

    /// Creates `obj` or replaces the controller's fields (`fields` and labels) of the current one.
    fn upsert(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        obj: &Value,
        fields: &[&str],
    ) -> bool {
        let result =
            self.store
                .upsert_shared(rt, ns, name, Part::Main, &WriteOpts::default(), |cur| {
                    let Some(cur) = cur else {
                        return Ok(obj.clone());
                    };
                    // The addresses (most of these objects) are replaced, not copied first.
                    let mut next = crate::meta::fields_except(cur, fields);
                    for f in fields {
                        if let Some(v) = obj.get(*f) {
                            next.insert((*f).to_string(), v.clone());
                        }
                    }
                    let mut next = Value::Object(next);
                    if let Some(labels) = obj.at("/metadata/labels") {
                        next["metadata"]["labels"] = labels.clone();
                    }
                    Ok(next)
                });
        match result {
            Ok(_) => true,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ip: &str, ready: bool, labels: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"), "labels": labels},
               "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
               "status": {"phase": "Running", "podIP": ip,
                          "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}})
    }

    fn svc(selector: Value, cluster_ip: &str) -> Value {
        json!({"metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid"},
               "spec": {"clusterIP": cluster_ip, "selector": selector,
                        "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                                  {"name": "raw", "port": 81, "targetPort": 9000, "protocol": "TCP"}]}})
    }

    #[test]
    fn endpoints_follow_selector_readiness_and_named_ports() {
        let a = pod("a", "198.18.0.2", true, json!({"app": "web"}));
        let b = pod("b", "198.18.0.3", false, json!({"app": "web"}));
        let other = pod("c", "198.18.0.4", true, json!({"app": "db"}));
        let mut gone = pod("d", "198.18.0.5", true, json!({"app": "web"}));
        gone["status"]["phase"] = json!("Succeeded");
        let s = svc(json!({"app": "web"}), "198.19.1.2");
        let entry = service_entry(&s, &[&a, &b, &other, &gone], None);
        assert_eq!(entry.backends.len(), 2);
        let http = &entry.ports[0];
        assert_eq!(
            entry.ready_targets(http),
            vec![(Ipv4Addr::new(198, 18, 0, 2), 8080)]
        );
        assert_eq!(
            entry.ready_targets(&entry.ports[1]),
            vec![(Ipv4Addr::new(198, 18, 0, 2), 9000)]
        );
        let ep = endpoints_object(&s, &entry);
        assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "198.18.0.2");
        assert_eq!(ep["subsets"][0]["notReadyAddresses"][0]["ip"], "198.18.0.3");
        assert_eq!(ep["subsets"][0]["addresses"][0]["targetRef"]["name"], "a");
        let slice = endpoint_slice(&s, &entry);
        assert_eq!(slice["metadata"]["labels"][SERVICE_NAME_LABEL], "web");
        assert_eq!(slice["endpoints"][1]["conditions"]["ready"], false);
        assert_eq!(
            slice["ports"][0],
            json!({"name": "http", "port": 8080, "protocol": "TCP"})
        );
        assert_eq!(slice["metadata"]["ownerReferences"][0]["uid"], "svc-uid");
        assert!(
            slice["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("web-") && n.len() == 9)
        );
        let rec = entry.record();
        assert_eq!(rec.ips, vec![Ipv4Addr::new(198, 19, 1, 2)]);
    }

    #[test]
    fn headless_services_resolve_to_ready_pods() {
        let a = pod("a", "198.18.0.2", true, json!({"app": "web"}));
        let b = pod("b", "198.18.0.3", false, json!({"app": "web"}));
        let entry = service_entry(&svc(json!({"app": "web"}), "None"), &[&a, &b], None);
        assert_eq!(entry.cluster_ip, None);
        assert_eq!(entry.record().ips, vec![Ipv4Addr::new(198, 18, 0, 2)]);
    }

    #[test]
    fn selectorless_services_take_their_endpoints_object() {
        let s = json!({"metadata": {"name": "kubernetes", "namespace": "default"},
                       "spec": {"clusterIP": "198.19.0.1", "ports": [{"name": "https", "port": 443}]}});
        let ep = json!({"subsets": [{"addresses": [{"ip": "198.18.0.1"}], "ports": [{"name": "https", "port": 6443}]}]});
        let entry = service_entry(&s, &[], Some(&ep));
        assert_eq!(
            entry.ready_targets(&entry.ports[0]),
            vec![(Ipv4Addr::new(198, 18, 0, 1), 6443)]
        );
    }
}
