//! Driver pods by owner: the cached drivers of one application without scanning the namespace's
//! pods (a reconcile would otherwise cost more with every driver the cluster holds).
//!
//! Fed by the same watch events as the pod cache, with the reflector's semantics: `Init` starts
//! a buffer, `InitApply` fills it, `InitDone` swaps it in (a re-list never shows a half index),
//! `Apply`/`Delete` edit in place. Synchronous and free of I/O.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube_runtime::watcher::Event;

/// (namespace, name) of a pod.
pub type PodKey = (String, String);

#[derive(Debug, Default)]
struct Maps {
    /// Owner uid → the pods it owns.
    by_owner: HashMap<String, BTreeSet<PodKey>>,
    /// Pod → its owners' uids (to undo an entry when the pod changes or goes).
    owners_of: HashMap<PodKey, Vec<String>>,
}

/// An index of watched objects, kept by [`Relisted`].
pub trait Indexed<K>: Default {
    /// Adds `object`, replacing what was indexed of it.
    fn insert(&mut self, object: &K);
    /// Removes what was indexed of `object`.
    fn remove(&mut self, object: &K);
}

/// An index fed by a watch's events with the reflector's semantics: `Init` starts a buffer,
/// `InitApply` fills it, `InitDone` swaps it in (a re-list never shows a half index),
/// `Apply`/`Delete` edit in place.
#[derive(Debug, Default)]
pub struct Relisted<M> {
    live: M,
    buffer: Option<M>,
}

impl<M> Relisted<M> {
    pub fn apply<K>(&mut self, event: &Event<K>)
    where
        M: Indexed<K>,
    {
        match event {
            Event::Apply(object) => self.live.insert(object),
            Event::Delete(object) => self.live.remove(object),
            Event::Init => self.buffer = Some(M::default()),
            Event::InitApply(object) => self.buffer.get_or_insert_with(M::default).insert(object),
            Event::InitDone => self.live = self.buffer.take().unwrap_or_default(),
        }
    }

    /// The index as of the last complete listing and the changes since.
    pub fn live(&self) -> &M {
        &self.live
    }
}

impl Indexed<Pod> for Maps {
    fn insert(&mut self, pod: &Pod) {
        self.put(key(pod), owners(pod));
    }

    fn remove(&mut self, pod: &Pod) {
        self.take(&key(pod));
    }
}

impl Maps {
    fn take(&mut self, pod: &PodKey) {
        for owner in self.owners_of.remove(pod).unwrap_or_default() {
            if let Some(pods) = self.by_owner.get_mut(&owner) {
                pods.remove(pod);
                if pods.is_empty() {
                    self.by_owner.remove(&owner);
                }
            }
        }
    }

    fn put(&mut self, pod: PodKey, owners: Vec<String>) {
        self.take(&pod);
        if owners.is_empty() {
            return;
        }
        for owner in &owners {
            self.by_owner
                .entry(owner.clone())
                .or_default()
                .insert(pod.clone());
        }
        self.owners_of.insert(pod, owners);
    }
}

/// The index; cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct OwnerIndex {
    inner: Arc<RwLock<Relisted<Maps>>>,
}

fn key(pod: &Pod) -> PodKey {
    (pod.namespace().unwrap_or_default(), pod.name_any())
}

fn owners(pod: &Pod) -> Vec<String> {
    pod.owner_references()
        .iter()
        .map(|owner| owner.uid.clone())
        .collect()
}

impl OwnerIndex {
    /// Applies one watcher event, as the reflector applies it to the pod cache.
    pub fn apply(&self, event: &Event<Pod>) {
        // A panic under the lock cannot leave the maps worse than stale; keep serving them.
        self.inner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .apply(event);
    }

    /// The pods owned by the object with `uid`.
    pub fn owned_by(&self, uid: &str) -> Vec<PodKey> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner
            .live()
            .by_owner
            .get(uid)
            .map(|pods| pods.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// One driver pod cache and its owner index, fed by the same watch.
#[derive(Debug, Clone)]
pub struct DriverCache {
    pub store: kube_runtime::reflector::Store<Pod>,
    pub owners: OwnerIndex,
}

impl DriverCache {
    /// The cached pods an application's driver is found among (`observe::find_driver`): the
    /// pods owned by `uid`, and the pod `named` (its status' driver, which may be a previous
    /// run's, owned or not), in `namespace`. A look-up, not a scan of the namespace's pods.
    pub fn candidates(&self, namespace: &str, uid: &str, named: &str) -> Vec<Arc<Pod>> {
        use kube_runtime::reflector::ObjectRef;
        let mut keys = self.owners.owned_by(uid);
        if !named.is_empty() {
            let key = (namespace.to_owned(), named.to_owned());
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys.into_iter()
            .filter(|(ns, _)| ns == namespace)
            .filter_map(|(ns, name)| self.store.get(&ObjectRef::new(&name).within(&ns)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owners: &[&str]) -> Pod {
        let refs: Vec<_> = owners
            .iter()
            .map(|uid| json!({"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication", "name": "a", "uid": uid}))
            .collect();
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "ns", "ownerReferences": refs}}),
        )
        .unwrap()
    }

    fn keys(names: &[&str]) -> Vec<PodKey> {
        names
            .iter()
            .map(|n| ("ns".to_owned(), (*n).to_owned()))
            .collect()
    }

    #[test]
    fn follows_owners_through_changes_and_deletes() {
        let index = OwnerIndex::default();
        index.apply(&Event::Apply(pod("d1", &["app-1"])));
        index.apply(&Event::Apply(pod("d2", &["app-1"])));
        index.apply(&Event::Apply(pod("d3", &["app-2"])));
        assert_eq!(index.owned_by("app-1"), keys(&["d1", "d2"]));
        // An owner reference removed (orphaned) or changed moves the pod.
        index.apply(&Event::Apply(pod("d2", &[])));
        assert_eq!(index.owned_by("app-1"), keys(&["d1"]));
        index.apply(&Event::Delete(pod("d1", &["app-1"])));
        assert!(index.owned_by("app-1").is_empty());
        assert_eq!(index.owned_by("app-2"), keys(&["d3"]));
    }

    #[test]
    fn a_relist_swaps_in_whole() {
        let index = OwnerIndex::default();
        index.apply(&Event::Apply(pod("old", &["app"])));
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(pod("new", &["app"])));
        assert_eq!(index.owned_by("app"), keys(&["old"]), "no half listing");
        index.apply(&Event::InitDone);
        assert_eq!(index.owned_by("app"), keys(&["new"]));
    }
}
