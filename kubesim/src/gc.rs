//! The garbage collector (ownerReferences, background/foreground/orphan deletion) and the
//! namespace controller (default service account, namespace termination), both driven by the
//! store's event log and writing through the store like any client.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::meta;
use crate::meta::At;
use crate::resources::ResourceType;
use crate::store::{DeleteOpts, Event, EventType, Part, Store, WatchFrom, WriteOpts};

/// Where an object lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    group: String,
    plural: String,
    namespace: String,
    name: String,
}

impl Key {
    fn of(ev: &Event) -> Self {
        Self {
            group: ev.group.clone(),
            plural: ev.plural.clone(),
            namespace: ev.namespace.clone(),
            name: meta::name(&ev.object).to_string(),
        }
    }
}

/// The collector's view: which uids exist, and who depends on whom.
#[derive(Default)]
struct Graph {
    by_uid: HashMap<String, Key>,
    dependents: HashMap<String, HashSet<Key>>,
    owners_of: HashMap<Key, Vec<String>>,
}

impl Graph {
    fn observe(&mut self, key: &Key, obj: &Value, deleted: bool) {
        let uid = meta::uid(obj).to_string();
        if !deleted
            && self.by_uid.get(&uid) == Some(key)
            && self.owners_of.get(key).map_or(&[][..], Vec::as_slice) == owner_uids(obj).as_slice()
        {
            // Most changes leave an object's owners as they were: nothing to re-index.
            return;
        }
        if let Some(old) = self.owners_of.remove(key) {
            for o in old {
                if let Some(d) = self.dependents.get_mut(&o) {
                    d.remove(key);
                    if d.is_empty() {
                        self.dependents.remove(&o);
                    }
                }
            }
        }
        if deleted {
            self.by_uid.remove(&uid);
            return;
        }
        self.by_uid.insert(uid, key.clone());
        let owners = owner_uids(obj);
        for o in &owners {
            self.dependents
                .entry(o.clone())
                .or_default()
                .insert(key.clone());
        }
        if !owners.is_empty() {
            self.owners_of.insert(key.clone(), owners);
        }
    }
}

fn owner_uids(obj: &Value) -> Vec<String> {
    obj.at("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Starts the collector and the namespace controller on the current tokio runtime.
pub fn start(store: Arc<Store>) {
    tokio::spawn(async move {
        let mut gc = Collector {
            store,
            graph: Graph::default(),
        };
        gc.run().await;
    });
}

struct Collector {
    store: Arc<Store>,
    graph: Graph,
}

impl Collector {
    async fn run(&mut self) {
        loop {
            let sub = match self.store.subscribe(&|_, _, _| true, WatchFrom::Now) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "garbage collector cannot subscribe");
                    return;
                }
            };
            self.graph = Graph::default();
            let mut live = sub.live;
            for ev in &sub.replay {
                let key = Key::of(ev);
                self.graph.observe(&key, &ev.object, false);
            }
            for ev in &sub.replay {
                self.handle(ev);
            }
            loop {
                match live.recv().await {
                    Ok(ev) => {
                        let key = Key::of(&ev);
                        self.graph
                            .observe(&key, &ev.object, ev.kind == EventType::Deleted);
                        self.handle(&ev);
                    }
                    // Fell behind: rebuild the graph from a fresh snapshot.
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "garbage collector lagged; resyncing");
                        break;
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        }
    }

    fn rt(&self, group: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.store
            .registry()
            .all()
            .iter()
            .find(|t| t.group == group && t.plural == plural)
            .cloned()
    }

    fn handle(&mut self, ev: &Event) {
        let obj = &ev.object;
        let uid = meta::uid(obj).to_string();
        let is_ns = ev.group.is_empty() && ev.plural == "namespaces";
        match ev.kind {
            EventType::Deleted => {
                for dep in self.graph.dependents.get(&uid).cloned().unwrap_or_default() {
                    self.delete(&dep, None);
                }
                if !ev.namespace.is_empty() {
                    self.check_namespace_empty(&ev.namespace);
                }
            }
            EventType::Added | EventType::Modified => {
                if is_ns && ev.kind == EventType::Added {
                    self.ensure_default_service_account(meta::name(obj));
                }
                if is_ns && meta::is_deleting(obj) {
                    self.terminate_namespace(meta::name(obj));
                }
                let finalizers = meta::finalizers(obj);
                if meta::is_deleting(obj) {
                    if finalizers.iter().any(|f| f == "orphan") {
                        self.orphan_dependents(&uid);
                        self.remove_finalizer(&Key::of(ev), "orphan");
                    }
                    if finalizers.iter().any(|f| f == "foregroundDeletion") {
                        let deps = self.graph.dependents.get(&uid).cloned().unwrap_or_default();
                        if deps.is_empty() {
                            self.remove_finalizer(&Key::of(ev), "foregroundDeletion");
                        } else {
                            for dep in deps {
                                self.delete(&dep, Some("Foreground"));
                            }
                        }
                    }
                }
                self.collect_if_orphaned(&Key::of(ev), obj);
                // A dependent that went away may unblock its owner's foreground deletion.
                if meta::is_deleting(obj) || ev.kind == EventType::Modified {
                    self.unblock_foreground_owners(obj);
                }
            }
        }
        if ev.kind == EventType::Deleted {
            self.unblock_foreground_owners(obj);
        }
    }

    /// Kubernetes collects a dependent whose owners all no longer exist (by uid).
    fn collect_if_orphaned(&self, key: &Key, obj: &Value) {
        let owners = owner_uids(obj);
        if owners.is_empty() || meta::is_deleting(obj) {
            return;
        }
        if owners.iter().all(|o| !self.graph.by_uid.contains_key(o)) {
            tracing::debug!(name = %key.name, resource = %key.plural, "collecting object whose owners are gone");
            self.delete(key, None);
        }
    }

    fn unblock_foreground_owners(&self, obj: &Value) {
        for owner_uid in owner_uids(obj) {
            let Some(owner) = self.graph.by_uid.get(&owner_uid) else {
                continue;
            };
            // Shared, not copied: most owners are not being deleted.
            let Some(o) =
                self.store
                    .get_shared(&owner.group, &owner.plural, &owner.namespace, &owner.name)
            else {
                continue;
            };
            let waiting = meta::is_deleting(&o)
                && meta::finalizers(&o)
                    .iter()
                    .any(|f| f == "foregroundDeletion");
            let remaining = self
                .graph
                .dependents
                .get(&owner_uid)
                .is_some_and(|d| !d.is_empty());
            if waiting && !remaining {
                self.remove_finalizer(owner, "foregroundDeletion");
            }
        }
    }

    fn delete(&self, key: &Key, propagation: Option<&str>) {
        let Some(rt) = self.rt(&key.group, &key.plural) else {
            return;
        };
        let opts = DeleteOpts {
            propagation: propagation.map(str::to_string),
            ..DeleteOpts::default()
        };
        if let Err(e) = self.store.delete(&rt, &key.namespace, &key.name, &opts)
            && e.code != 404
        {
            tracing::warn!(name = %key.name, error = %e, "garbage collector delete failed");
        }
    }

    fn orphan_dependents(&self, owner_uid: &str) {
        for dep in self
            .graph
            .dependents
            .get(owner_uid)
            .cloned()
            .unwrap_or_default()
        {
            let Some(rt) = self.rt(&dep.group, &dep.plural) else {
                continue;
            };
            let _ = self.store.modify(
                &rt,
                &dep.namespace,
                &dep.name,
                Part::Main,
                &WriteOpts::default(),
                |cur| {
                    let mut next = cur.clone();
                    if let Some(refs) = next
                        .pointer_mut("/metadata/ownerReferences")
                        .and_then(Value::as_array_mut)
                    {
                        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
                    }
                    Ok(next)
                },
            );
        }
    }

    fn remove_finalizer(&self, key: &Key, finalizer: &str) {
        let Some(rt) = self.rt(&key.group, &key.plural) else {
            return;
        };
        let _ = self.store.modify(
            &rt,
            &key.namespace,
            &key.name,
            Part::Main,
            &WriteOpts::default(),
            |cur| {
                let mut next = cur.clone();
                let kept: Vec<String> = meta::finalizers(cur)
                    .into_iter()
                    .filter(|f| f != finalizer)
                    .collect();
                meta::metadata_mut(&mut next).insert("finalizers".into(), json!(kept));
                Ok(next)
            },
        );
    }

    fn ensure_default_service_account(&self, ns: &str) {
        let Some(rt) = self.rt("", "serviceaccounts") else {
            return;
        };
        if self
            .store
            .get_raw("", "serviceaccounts", ns, "default")
            .is_some()
        {
            return;
        }
        let sa =
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
        if let Err(e) = self.store.create(&rt, ns, sa, &WriteOpts::default())
            && e.code != 409
        {
            tracing::warn!(namespace = %ns, error = %e, "cannot create default service account");
        }
    }

    /// Deletes everything in a terminating namespace, then releases it.
    fn terminate_namespace(&self, ns: &str) {
        let types: Vec<Arc<ResourceType>> = self
            .store
            .registry()
            .all()
            .iter()
            .filter(|t| t.namespaced)
            .cloned()
            .collect();
        for rt in types {
            for obj in self.store.all_of(&rt.group, &rt.plural) {
                if meta::meta_str(&obj, "namespace") == ns && !meta::is_deleting(&obj) {
                    let _ = self
                        .store
                        .delete(&rt, ns, meta::name(&obj), &DeleteOpts::default());
                }
            }
        }
        self.check_namespace_empty(ns);
    }

    fn check_namespace_empty(&self, ns: &str) {
        let Some(nsobj) = self.store.get_raw("", "namespaces", "", ns) else {
            return;
        };
        if !meta::is_deleting(&nsobj) {
            return;
        }
        let registry = self.store.registry();
        let empty = registry.all().iter().filter(|t| t.namespaced).all(|t| {
            self.store
                .all_of(&t.group, &t.plural)
                .iter()
                .all(|o| meta::meta_str(o, "namespace") != ns)
        });
        if !empty {
            return;
        }
        let Some(rt) = self.rt("", "namespaces") else {
            return;
        };
        let _ = self
            .store
            .modify(&rt, "", ns, Part::Main, &WriteOpts::default(), |cur| {
                let mut next = cur.clone();
                next["spec"]["finalizers"] = json!([]);
                Ok(next)
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_tracks_dependents_and_forgets_deleted_owners() {
        let mut g = Graph::default();
        let owner = Key {
            group: String::new(),
            plural: "pods".into(),
            namespace: "ns".into(),
            name: "p".into(),
        };
        let dep = Key {
            group: String::new(),
            plural: "configmaps".into(),
            namespace: "ns".into(),
            name: "c".into(),
        };
        g.observe(
            &owner,
            &json!({"metadata": {"name": "p", "uid": "u1"}}),
            false,
        );
        g.observe(
            &dep,
            &json!({"metadata": {"name": "c", "uid": "u2", "ownerReferences": [{"uid": "u1"}]}}),
            false,
        );
        assert!(g.dependents["u1"].contains(&dep));
        g.observe(
            &dep,
            &json!({"metadata": {"name": "c", "uid": "u2"}}),
            false,
        );
        assert!(!g.dependents.contains_key("u1"));
        g.observe(
            &owner,
            &json!({"metadata": {"name": "p", "uid": "u1"}}),
            true,
        );
        assert!(!g.by_uid.contains_key("u1"));
    }
}
