//! The Deployment and ReplicaSet controllers (`apps/v1`), written like kubesim's other
//! controllers: they consume the store's event log and write through the store, so every step
//! (a ReplicaSet made, scaled, a pod created or deleted, a status) is visible to watchers in
//! order.
//!
//! - A ReplicaSet keeps `spec.replicas` active pods made from its template (owned by it, so
//!   the garbage collector removes them with it) and reports replicas, ready, available and
//!   fully-labelled counts.
//! - A Deployment owns one ReplicaSet per pod template (named `NAME-HASH`, labelled
//!   `pod-template-hash`). A template change starts a rollout: `RollingUpdate` surges the new
//!   ReplicaSet and scales old ones down within `maxSurge`/`maxUnavailable`; `Recreate` scales
//!   the old ones to zero first. Old ReplicaSets beyond `revisionHistoryLimit` are deleted. Its
//!   status sums its ReplicaSets' with the `Available` and `Progressing` conditions.
//!
//! The rules are pure functions in [`rollout`]; this module feeds them what the store holds.

pub mod rollout;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::meta;
use crate::meta::At;
use crate::resources::ResourceType;
use crate::store::{DeleteOpts, Event, Part, Store, WatchFrom, WriteOpts};
use rollout::{
    DESIRED_REPLICAS, MAX_REPLICAS, POD_TEMPLATE_HASH, REVISION, RsCounts, spec_replicas,
    status_count,
};

/// Pods a ReplicaSet creates or deletes per sync at most (Kubernetes' `burstReplicas`).
const BURST: usize = 500;
/// How soon a sync that could not finish (a failed pod creation) is retried.
const RETRY: Duration = Duration::from_secs(1);

type Key = (String, String);

/// Starts the controllers on the current tokio runtime.
pub fn start(store: Arc<Store>) {
    tokio::spawn(async move {
        let Some(ctl) = Controller::new(store) else {
            tracing::error!("apps controllers: apps/v1 types are not registered");
            return;
        };
        ctl.run().await;
    });
}

fn in_scope(g: &str, p: &str, _ns: &str) -> bool {
    (g.is_empty() && p == "pods") || (g == "apps" && (p == "deployments" || p == "replicasets"))
}

/// The controller owning `obj` if it is of `kind` (`ReplicaSet`, `Deployment`).
fn controller_of<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj.at("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| {
            r.get("controller").and_then(Value::as_bool) == Some(true)
                && r.get("kind").and_then(Value::as_str) == Some(kind)
                && r.get("apiVersion").and_then(Value::as_str) == Some("apps/v1")
        })
}

fn owned_by(obj: &Value, kind: &str, uid: &str) -> bool {
    controller_of(obj, kind)
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
        == Some(uid)
}

fn owner_ref(kind: &str, owner: &Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": kind, "name": meta::name(owner),
        "uid": meta::uid(owner), "controller": true, "blockOwnerDeletion": true})
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

struct Controller {
    store: Arc<Store>,
    pods: Arc<ResourceType>,
    replicasets: Arc<ResourceType>,
    deployments: Arc<ResourceType>,
    events: Arc<ResourceType>,
    dirty_rs: BTreeSet<Key>,
    dirty_deploy: BTreeSet<Key>,
    /// Syncs due later (a pod becoming available after `minReadySeconds`, a retry).
    later: BTreeMap<tokio::time::Instant, Vec<(bool, Key)>>,
}

impl Controller {
    fn new(store: Arc<Store>) -> Option<Self> {
        let reg = store.registry();
        Some(Self {
            pods: reg.find("", "v1", "pods")?,
            replicasets: reg.find("apps", "v1", "replicasets")?,
            deployments: reg.find("apps", "v1", "deployments")?,
            events: reg.find("", "v1", "events")?,
            store,
            dirty_rs: BTreeSet::new(),
            dirty_deploy: BTreeSet::new(),
            later: BTreeMap::new(),
        })
    }

    async fn run(mut self) {
        loop {
            let mut sub = match self.store.subscribe(&in_scope, WatchFrom::Now) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "apps controllers cannot subscribe");
                    return;
                }
            };
            for ev in std::mem::take(&mut sub.replay) {
                self.mark(&ev);
            }
            loop {
                self.sync_dirty();
                let next = self.later.keys().next().copied();
                tokio::select! {
                    r = sub.live.recv() => match r {
                        Ok(ev) => {
                            self.mark(&ev);
                            // Take everything already queued before syncing: one sync per burst.
                            while let Ok(ev) = sub.live.try_recv() {
                                self.mark(&ev);
                            }
                        }
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => return,
                    },
                    () = async {
                        match next {
                            Some(t) => tokio::time::sleep_until(t).await,
                            None => std::future::pending().await,
                        }
                    } => {
                        let now = tokio::time::Instant::now();
                        let due: Vec<_> = self.later.range(..=now).map(|(k, _)| *k).collect();
                        for t in due {
                            for (deploy, key) in self.later.remove(&t).unwrap_or_default() {
                                if deploy {
                                    self.dirty_deploy.insert(key);
                                } else {
                                    self.dirty_rs.insert(key);
                                }
                            }
                        }
                    }
                }
            }
            // Fell behind the event log: resubscribe and look at everything again.
            tracing::warn!("apps controllers lagged; resyncing");
        }
    }

    fn mark(&mut self, ev: &Event) {
        if !in_scope(&ev.group, &ev.plural, &ev.namespace) {
            return;
        }
        let obj = &ev.object;
        let ns = ev.namespace.clone();
        match ev.plural.as_str() {
            "pods" => {
                if let Some(owner) = controller_of(obj, "ReplicaSet")
                    .and_then(|r| r.get("name"))
                    .and_then(Value::as_str)
                {
                    // A `Recreate` rollout waits for old pods to be gone: a pod's removal
                    // concerns its ReplicaSet's Deployment too.
                    if ev.kind == crate::store::EventType::Deleted
                        && let Some(rs) = self.store.get_shared("apps", "replicasets", &ns, owner)
                        && let Some(d) = controller_of(&rs, "Deployment")
                            .and_then(|r| r.get("name"))
                            .and_then(Value::as_str)
                    {
                        self.dirty_deploy.insert((ns.clone(), d.to_string()));
                    }
                    self.dirty_rs.insert((ns, owner.to_string()));
                }
            }
            "replicasets" => {
                self.dirty_rs
                    .insert((ns.clone(), meta::name(obj).to_string()));
                if let Some(owner) = controller_of(obj, "Deployment")
                    .and_then(|r| r.get("name"))
                    .and_then(Value::as_str)
                {
                    self.dirty_deploy.insert((ns, owner.to_string()));
                }
            }
            _ => {
                self.dirty_deploy.insert((ns, meta::name(obj).to_string()));
            }
        }
    }

    fn later(&mut self, after: Duration, deploy: bool, key: Key) {
        let at = tokio::time::Instant::now() + after;
        self.later.entry(at).or_default().push((deploy, key));
    }

    fn sync_dirty(&mut self) {
        // Deployments first: their ReplicaSet writes dirty the ReplicaSets, synced next round.
        for key in std::mem::take(&mut self.dirty_deploy) {
            self.sync_deployment(&key);
        }
        for key in std::mem::take(&mut self.dirty_rs) {
            self.sync_replica_set(&key);
        }
    }

    fn record_event(
        &self,
        involved: &Value,
        kind: &str,
        reason: &str,
        message: &str,
        component: &str,
    ) {
        let now = meta::now_rfc3339();
        let ns = meta::meta_str(involved, "namespace").to_string();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("{}.{nanos:x}", meta::name(involved)), "namespace": ns},
            "involvedObject": {"apiVersion": "apps/v1", "kind": kind, "name": meta::name(involved),
                "namespace": ns, "uid": meta::uid(involved),
                "resourceVersion": meta::meta_str(involved, "resourceVersion")},
            "reason": reason, "message": message, "type": if reason.starts_with("Failed") { "Warning" } else { "Normal" },
            "source": {"component": component},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            "reportingComponent": component, "reportingInstance": "",
        });
        if let Err(e) = self
            .store
            .create(&self.events, &ns, event, &WriteOpts::default())
        {
            tracing::debug!(error = %e, "could not record event");
        }
    }

    fn sync_replica_set(&mut self, key: &Key) {
        let (ns, name) = key;
        let Some(rs) = self.store.get_shared("apps", "replicasets", ns, name) else {
            return;
        };
        if meta::is_deleting(&rs) {
            return;
        }
        let uid = meta::uid(&rs).to_string();
        let pods = self.store.objects("", "pods", Some(ns));
        let active: Vec<&Value> = pods
            .iter()
            .map(|p| p.as_ref())
            .filter(|p| owned_by(p, "ReplicaSet", &uid) && rollout::is_active(p))
            .collect();
        let want = spec_replicas(&rs);
        let have = active.len() as i64;
        let mut failure: Option<(String, String)> = None;
        let mut created = Vec::new();
        if want > have {
            let n = ((want - have) as usize).min(BURST);
            for _ in 0..n {
                match self.create_pod(&rs) {
                    Ok(pod) => created.push(pod),
                    Err(e) => {
                        self.record_event(
                            &rs,
                            "ReplicaSet",
                            "FailedCreate",
                            &format!("Error creating: {}", e.message),
                            "replicaset-controller",
                        );
                        failure = Some(("FailedCreate".into(), e.message.clone()));
                        self.later(RETRY, false, key.clone());
                        break;
                    }
                }
            }
        } else if want < have {
            let n = ((have - want) as usize).min(BURST);
            for pod in rollout::pods_to_delete(&active, n) {
                match self
                    .store
                    .delete(&self.pods, ns, &pod, &DeleteOpts::default())
                {
                    Ok(_) => self.record_event(
                        &rs,
                        "ReplicaSet",
                        "SuccessfulDelete",
                        &format!("Deleted pod: {pod}"),
                        "replicaset-controller",
                    ),
                    Err(e) if e.code == 404 => {}
                    Err(e) => {
                        failure = Some(("FailedDelete".into(), e.message.clone()));
                        self.later(RETRY, false, key.clone());
                    }
                }
            }
        }
        // The status counts what exists after this sync's own changes.
        let pods = if created.is_empty() {
            pods
        } else {
            self.store.objects("", "pods", Some(ns))
        };
        let active: Vec<&Value> = pods
            .iter()
            .map(|p| p.as_ref())
            .filter(|p| owned_by(p, "ReplicaSet", &uid) && rollout::is_active(p))
            .collect();
        let now = now_unix();
        let min_ready = rs
            .at("/spec/minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if min_ready > 0
            && let Some(at) = active
                .iter()
                .filter_map(|p| rollout::available_at(p, min_ready))
                .filter(|t| *t > now)
                .min()
        {
            self.later(Duration::from_secs((at - now) as u64), false, key.clone());
        }
        let status = rollout::replica_set_status(
            &rs,
            &active,
            now,
            &meta::now_rfc3339(),
            failure.as_ref().map(|(r, m)| (r.as_str(), m.as_str())),
        );
        self.write_status(&self.replicasets.clone(), ns, name, &rs, status);
    }

    fn create_pod(&self, rs: &Value) -> Result<Value, crate::api_error::ApiError> {
        let template = rs.at("/spec/template").cloned().unwrap_or(json!({}));
        let mut md = template.get("metadata").cloned().unwrap_or(json!({}));
        if let Some(m) = md.as_object_mut() {
            m.remove("name");
            m.remove("namespace");
            m.insert("generateName".into(), json!(format!("{}-", meta::name(rs))));
            m.insert(
                "ownerReferences".into(),
                json!([owner_ref("ReplicaSet", rs)]),
            );
        }
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": template.get("spec").cloned().unwrap_or(json!({}))});
        let ns = meta::meta_str(rs, "namespace");
        let created = self
            .store
            .create(&self.pods, ns, pod, &WriteOpts::default())?;
        self.record_event(
            rs,
            "ReplicaSet",
            "SuccessfulCreate",
            &format!("Created pod: {}", meta::name(&created)),
            "replicaset-controller",
        );
        Ok(created)
    }

    /// Writes `status` when it differs from what `obj` has.
    fn write_status(&self, rt: &ResourceType, ns: &str, name: &str, obj: &Value, status: Value) {
        if obj.get("status") == Some(&status) {
            return;
        }
        let uid = meta::uid(obj).to_string();
        let written = self
            .store
            .modify(rt, ns, name, Part::Status, &WriteOpts::default(), |cur| {
                if meta::uid(cur) != uid {
                    return Err(crate::api_error::ApiError::not_found(
                        &rt.group, &rt.plural, name,
                    ));
                }
                let mut next = cur.clone();
                next["status"] = status.clone();
                Ok(next)
            });
        if let Err(e) = written
            && e.code != 404
        {
            tracing::warn!(kind = %rt.kind, name, error = %e, "could not write status");
        }
    }

    /// Sets a ReplicaSet's replicas (and the annotations the Deployment controller keeps).
    fn scale(&self, d: &Value, rs: &Value, replicas: i64) {
        let ns = meta::meta_str(rs, "namespace").to_string();
        let name = meta::name(rs).to_string();
        let from = spec_replicas(rs);
        let (surge, _) = rollout::fenceposts(d, spec_replicas(d));
        let desired = spec_replicas(d);
        let res = self.store.modify(
            &self.replicasets,
            &ns,
            &name,
            Part::Main,
            &WriteOpts::default(),
            |cur| {
                let mut next = cur.clone();
                next["spec"]["replicas"] = json!(replicas);
                let md = meta::metadata_mut(&mut next);
                let ann = md.entry("annotations").or_insert_with(|| json!({}));
                ann[DESIRED_REPLICAS] = json!(desired.to_string());
                ann[MAX_REPLICAS] = json!((desired + surge).to_string());
                Ok(next)
            },
        );
        match res {
            Ok(_) if from != replicas => {
                let verb = if replicas > from {
                    "Scaled up"
                } else {
                    "Scaled down"
                };
                self.record_event(
                    d,
                    "Deployment",
                    "ScalingReplicaSet",
                    &format!("{verb} replica set {name} from {from} to {replicas}"),
                    "deployment-controller",
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(rs = %name, error = %e, "could not scale replica set"),
        }
    }

    fn sync_deployment(&mut self, key: &Key) {
        let (ns, name) = key;
        let Some(d) = self.store.get_shared("apps", "deployments", ns, name) else {
            return;
        };
        if meta::is_deleting(&d) {
            return;
        }
        let uid = meta::uid(&d).to_string();
        let mut all: Vec<Arc<Value>> = self
            .store
            .objects("apps", "replicasets", Some(ns))
            .into_iter()
            .filter(|rs| owned_by(rs, "Deployment", &uid) && !meta::is_deleting(rs))
            .collect();
        // Oldest first, as the controller orders them for scaling down.
        all.sort_by(|a, b| {
            meta::meta_str(a, "creationTimestamp")
                .cmp(meta::meta_str(b, "creationTimestamp"))
                .then_with(|| meta::name(a).cmp(meta::name(b)))
        });
        let template = d.at("/spec/template").cloned().unwrap_or(json!({}));
        let new_idx = all.iter().position(|rs| {
            rs.at("/spec/template").map(rollout::without_hash).as_ref() == Some(&template)
        });
        let replicas = spec_replicas(&d);
        let (surge, max_unavailable) = rollout::fenceposts(&d, replicas);
        let recreate = d.at("/spec/strategy/type").and_then(Value::as_str) == Some("Recreate");
        let paused = d.at("/spec/paused").and_then(Value::as_bool) == Some(true);
        let revision_of = |rs: &Value| -> i64 {
            meta::annotation(rs, REVISION)
                .and_then(|r| r.parse().ok())
                .unwrap_or(0)
        };
        let max_revision = all.iter().map(|r| revision_of(r)).max().unwrap_or(0);
        let old: Vec<Arc<Value>> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != new_idx)
            .map(|(_, r)| r.clone())
            .collect();
        let mut new_rs = new_idx.map(|i| all[i].clone());
        let mut created_new = false;

        if !paused {
            if new_rs.is_none() {
                let old_total: i64 = old.iter().map(|r| spec_replicas(r)).sum();
                let start = if recreate {
                    if old_total > 0 || self.old_pods_running(ns, &old) {
                        for r in &old {
                            if spec_replicas(r) > 0 {
                                self.scale(&d, r, 0);
                            }
                        }
                        None
                    } else {
                        Some(replicas)
                    }
                } else {
                    Some(rollout::new_rs_replicas(replicas, surge, old_total, 0))
                };
                if let Some(start) = start {
                    match self.create_replica_set(&d, &template, start, max_revision + 1) {
                        Some(rs) => {
                            created_new = true;
                            new_rs = Some(Arc::new(rs));
                        }
                        None => self.later(RETRY, true, key.clone()),
                    }
                }
            } else if let Some(rs) = new_rs.clone() {
                // Keep the revision current and the template's rollout moving.
                if revision_of(&rs) < max_revision || meta::annotation(&rs, REVISION).is_none() {
                    self.set_revision(&rs, max_revision.max(1));
                }
                let want = if recreate {
                    let old_total: i64 = old.iter().map(|r| spec_replicas(r)).sum();
                    if old_total > 0 || self.old_pods_running(ns, &old) {
                        for r in &old {
                            if spec_replicas(r) > 0 {
                                self.scale(&d, r, 0);
                            }
                        }
                        spec_replicas(&rs)
                    } else {
                        replicas
                    }
                } else {
                    let all_sum: i64 = all.iter().map(|r| spec_replicas(r)).sum();
                    let cur = spec_replicas(&rs);
                    if cur > replicas {
                        replicas
                    } else {
                        rollout::new_rs_replicas(replicas, surge, all_sum, cur)
                    }
                };
                if want != spec_replicas(&rs) {
                    self.scale(&d, &rs, want);
                }
                if !recreate {
                    let counts = |r: &Value| RsCounts {
                        name: meta::name(r).to_string(),
                        spec: spec_replicas(r),
                        available: status_count(r, "availableReplicas"),
                    };
                    let old_counts: Vec<RsCounts> = old.iter().map(|r| counts(r)).collect();
                    for (name, to) in rollout::scale_down_old(
                        replicas,
                        max_unavailable,
                        &counts(&rs),
                        &old_counts,
                    ) {
                        if let Some(r) = old.iter().find(|r| meta::name(r) == name) {
                            self.scale(&d, r, to);
                        }
                    }
                }
            }
            self.cleanup_history(&d, &old);
        } else if let Some(rs) = &new_rs
            && spec_replicas(rs) != replicas
            && old.iter().all(|r| spec_replicas(r) == 0)
        {
            // A paused Deployment still scales.
            self.scale(&d, rs, replicas);
        }

        if let Some(rs) = &new_rs
            && let Some(rev) = meta::annotation(rs, REVISION)
            && meta::annotation(&d, REVISION) != Some(rev)
        {
            let rev = rev.to_string();
            let _ = self.store.modify(
                &self.deployments,
                ns,
                name,
                Part::Main,
                &WriteOpts::default(),
                |cur| {
                    let mut next = cur.clone();
                    let md = meta::metadata_mut(&mut next);
                    let ann = md.entry("annotations").or_insert_with(|| json!({}));
                    ann[REVISION] = json!(rev);
                    Ok(next)
                },
            );
        }
        let Some(d) = self.store.get_shared("apps", "deployments", ns, name) else {
            return;
        };
        let now = meta::now_rfc3339();
        let old_refs: Vec<&Value> = old.iter().map(|r| r.as_ref()).collect();
        let mut status = rollout::deployment_status(&d, new_rs.as_deref(), &old_refs, &now);
        if created_new
            && let Some(rs) = &new_rs
            && let Some(conds) = status.get_mut("conditions").and_then(Value::as_array_mut)
        {
            let mut list = std::mem::take(conds);
            list.retain(|c| c.get("type") != Some(&json!("Progressing")));
            rollout::set_condition(
                &mut list,
                "Progressing",
                "True",
                "NewReplicaSetCreated",
                &format!("Created new replica set \"{}\"", meta::name(rs)),
                &now,
            );
            *conds = list;
        }
        self.write_status(&self.deployments.clone(), ns, name, &d, status);
    }

    /// Whether pods of the old ReplicaSets still run (terminating ones included), which a
    /// `Recreate` rollout waits out before starting new pods.
    fn old_pods_running(&self, ns: &str, old: &[Arc<Value>]) -> bool {
        let uids: Vec<&str> = old.iter().map(|r| meta::uid(r)).collect();
        self.store.objects("", "pods", Some(ns)).iter().any(|p| {
            let owner = controller_of(p, "ReplicaSet")
                .and_then(|r| r.get("uid"))
                .and_then(Value::as_str);
            let finished = matches!(
                p.at("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            );
            owner.is_some_and(|u| uids.contains(&u)) && !finished
        })
    }

    fn create_replica_set(
        &self,
        d: &Value,
        template: &Value,
        replicas: i64,
        revision: i64,
    ) -> Option<Value> {
        let hash = rollout::pod_template_hash(template);
        let name = format!("{}-{hash}", meta::name(d));
        let ns = meta::meta_str(d, "namespace").to_string();
        let mut tmpl = template.clone();
        tmpl["metadata"]["labels"][POD_TEMPLATE_HASH] = json!(hash);
        let mut selector = d.at("/spec/selector").cloned().unwrap_or(json!({}));
        selector["matchLabels"][POD_TEMPLATE_HASH] = json!(hash);
        let mut labels = template
            .at("/metadata/labels")
            .cloned()
            .unwrap_or(json!({}));
        labels[POD_TEMPLATE_HASH] = json!(hash);
        let desired = spec_replicas(d);
        let (surge, _) = rollout::fenceposts(d, desired);
        let mut spec = json!({"replicas": replicas, "selector": selector, "template": tmpl});
        if let Some(m) = d.at("/spec/minReadySeconds") {
            spec["minReadySeconds"] = m.clone();
        }
        let rs = json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": ns, "labels": labels,
                "annotations": {DESIRED_REPLICAS: desired.to_string(),
                    MAX_REPLICAS: (desired + surge).to_string(), REVISION: revision.to_string()},
                "ownerReferences": [owner_ref("Deployment", d)]},
            "spec": spec,
        });
        match self
            .store
            .create(&self.replicasets, &ns, rs, &WriteOpts::default())
        {
            Ok(rs) => {
                self.record_event(
                    d,
                    "Deployment",
                    "ScalingReplicaSet",
                    &format!("Scaled up replica set {name} from 0 to {replicas}"),
                    "deployment-controller",
                );
                Some(rs)
            }
            Err(e) => {
                tracing::warn!(rs = %name, error = %e, "could not create replica set");
                None
            }
        }
    }

    fn set_revision(&self, rs: &Value, revision: i64) {
        let ns = meta::meta_str(rs, "namespace").to_string();
        let name = meta::name(rs).to_string();
        let _ = self.store.modify(
            &self.replicasets,
            &ns,
            &name,
            Part::Main,
            &WriteOpts::default(),
            |cur| {
                let mut next = cur.clone();
                let md = meta::metadata_mut(&mut next);
                let ann = md.entry("annotations").or_insert_with(|| json!({}));
                ann[REVISION] = json!(revision.to_string());
                Ok(next)
            },
        );
    }

    /// Deletes the oldest scaled-down ReplicaSets beyond `revisionHistoryLimit`.
    fn cleanup_history(&self, d: &Value, old: &[Arc<Value>]) {
        let limit = d
            .at("/spec/revisionHistoryLimit")
            .and_then(Value::as_i64)
            .unwrap_or(10);
        let idle: Vec<&Arc<Value>> = old
            .iter()
            .filter(|r| spec_replicas(r) == 0 && status_count(r, "replicas") == 0)
            .collect();
        let excess = idle.len() as i64 - limit;
        for r in idle.into_iter().take(excess.max(0) as usize) {
            let ns = meta::meta_str(r, "namespace");
            if let Err(e) =
                self.store
                    .delete(&self.replicasets, ns, meta::name(r), &DeleteOpts::default())
                && e.code != 404
            {
                tracing::warn!(error = %e, "could not delete old replica set");
            }
        }
    }
}
