//! A secondary index over a watch cache: key → the (namespace, name) of the cached objects that
//! carry it.
//!
//! The reflector's store only answers by (namespace, name). A look-up by submission id must not
//! guess object names (a template or `spark.kubernetes.driver.pod.name` may fix them) nor scan
//! every cached pod per request, so the same watcher events that feed the store also feed this
//! index, with the reflector's semantics: `Init` starts a buffer, `InitApply` fills it, `InitDone`
//! swaps it in atomically (so a re-list never shows a half-empty index), `Apply`/`Delete` edit in
//! place. Synchronous and free of I/O; the drive loop calls [`Index::apply_event`].

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use kube::ResourceExt;
use kube::runtime::watcher::Event;

/// (namespace, name) of an indexed object.
pub type ObjectKey = (String, String);

/// The keys an object is found under (none: not indexed).
pub type KeyFn<K> = fn(&K) -> Vec<String>;

#[derive(Debug, Default)]
struct Maps {
    by_key: HashMap<String, BTreeSet<ObjectKey>>,
    by_object: HashMap<ObjectKey, Vec<String>>,
}

impl Maps {
    fn remove(&mut self, object: &ObjectKey) {
        for key in self.by_object.remove(object).unwrap_or_default() {
            if let Some(objects) = self.by_key.get_mut(&key) {
                objects.remove(object);
                if objects.is_empty() {
                    self.by_key.remove(&key);
                }
            }
        }
    }

    fn insert(&mut self, object: ObjectKey, keys: Vec<String>) {
        self.remove(&object);
        if keys.is_empty() {
            return;
        }
        for key in &keys {
            self.by_key
                .entry(key.clone())
                .or_default()
                .insert(object.clone());
        }
        self.by_object.insert(object, keys);
    }
}

#[derive(Debug, Default)]
struct Inner {
    live: Maps,
    /// The listing in progress between `Init` and `InitDone`.
    buffer: Option<Maps>,
    /// A first complete listing has been swapped in.
    synced: bool,
}

/// The index; cheap to clone (shared).
#[derive(Clone)]
pub struct Index<K> {
    inner: Arc<RwLock<Inner>>,
    keys: KeyFn<K>,
}

impl<K> std::fmt::Debug for Index<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").finish_non_exhaustive()
    }
}

impl<K: kube::Resource> Index<K> {
    pub fn new(keys: KeyFn<K>) -> Index<K> {
        Index {
            inner: Arc::default(),
            keys,
        }
    }

    /// Applies one watcher event, as the reflector applies it to the store.
    pub fn apply_event(&self, event: &Event<K>) {
        // A panic while holding the lock cannot leave the maps half-edited in a way that matters
        // more than losing the index; keep serving what is there.
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let object_key = |object: &K| (object.namespace().unwrap_or_default(), object.name_any());
        match event {
            Event::Apply(object) => inner.live.insert(object_key(object), (self.keys)(object)),
            Event::Delete(object) => inner.live.remove(&object_key(object)),
            Event::Init => inner.buffer = Some(Maps::default()),
            Event::InitApply(object) => {
                let keys = (self.keys)(object);
                inner
                    .buffer
                    .get_or_insert_with(Maps::default)
                    .insert(object_key(object), keys);
            }
            Event::InitDone => {
                let buffer = inner.buffer.take().unwrap_or_default();
                inner.live = buffer;
                inner.synced = true;
            }
        }
    }

    /// The objects found under `key`, in (namespace, name) order.
    pub fn get(&self, key: &str) -> Vec<ObjectKey> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner
            .live
            .by_key
            .get(key)
            .map(|objects| objects.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether a first complete listing is in.
    pub fn is_synced(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .synced
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ObjectMeta;

    fn pod(name: &str, id: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                annotations: Some([("id".to_owned(), id.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn by_id(pod: &Pod) -> Vec<String> {
        pod.annotations().get("id").cloned().into_iter().collect()
    }

    fn key(name: &str) -> ObjectKey {
        ("ns".into(), name.into())
    }

    #[test]
    fn follows_apply_change_and_delete() {
        let index = Index::new(by_id as KeyFn<Pod>);
        index.apply_event(&Event::Apply(pod("a", "1")));
        assert_eq!(index.get("1"), [key("a")]);
        index.apply_event(&Event::Apply(pod("a", "2")));
        assert!(index.get("1").is_empty());
        assert_eq!(index.get("2"), [key("a")]);
        index.apply_event(&Event::Delete(pod("a", "2")));
        assert!(index.get("2").is_empty());
    }

    #[test]
    fn relist_swaps_in_at_init_done_only() {
        let index = Index::new(by_id as KeyFn<Pod>);
        assert!(!index.is_synced());
        index.apply_event(&Event::Init);
        index.apply_event(&Event::InitApply(pod("a", "1")));
        assert!(index.get("1").is_empty(), "no half listing is served");
        index.apply_event(&Event::InitDone);
        assert!(index.is_synced());
        assert_eq!(index.get("1"), [key("a")]);
        // A re-list without "a" drops it, but only once complete.
        index.apply_event(&Event::Init);
        index.apply_event(&Event::InitApply(pod("b", "1")));
        assert_eq!(index.get("1"), [key("a")]);
        index.apply_event(&Event::InitDone);
        assert_eq!(index.get("1"), [key("b")]);
    }
}
