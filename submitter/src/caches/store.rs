//! The objects of one watch by namespace and name: what kube-runtime's reflector store keeps,
//! with the same event semantics (`Init` starts a buffer, `InitApply` fills it, `InitDone` swaps
//! it in whole, `Apply` and `Delete` edit in place), but filled by moving each event's object
//! into its `Arc`. The reflector's store clones every object it is handed and the stream then
//! drops the original: for a pod, a deep copy and a deep drop at every event, and a fresh
//! submission's pod alone is four events.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use kube::ResourceExt;
use kube::runtime::watcher::Event;

/// (namespace, name) of a stored object.
type Key = (String, String);

#[derive(Debug)]
struct Inner<K> {
    live: HashMap<Key, Arc<K>>,
    /// The listing in progress between `Init` and `InitDone`.
    buffer: Option<HashMap<Key, Arc<K>>>,
}

/// The store; cheap to clone (shared).
#[derive(Debug)]
pub struct Store<K> {
    inner: Arc<RwLock<Inner<K>>>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            inner: self.inner.clone(),
        }
    }
}

impl<K> Default for Store<K> {
    fn default() -> Self {
        Store {
            inner: Arc::new(RwLock::new(Inner {
                live: HashMap::new(),
                buffer: None,
            })),
        }
    }
}

fn key_of<K: kube::Resource>(object: &K) -> Key {
    (object.namespace().unwrap_or_default(), object.name_any())
}

impl<K: kube::Resource> Store<K> {
    /// Applies one watcher event; the object stored, for an `Apply` or `InitApply`.
    pub fn apply(&self, event: Event<K>) -> Option<Arc<K>> {
        // A panic while holding the lock leaves at worst one event unapplied: keep serving.
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        match event {
            Event::Apply(object) => {
                let object = Arc::new(object);
                inner.live.insert(key_of(&*object), object.clone());
                Some(object)
            }
            Event::Delete(object) => {
                inner.live.remove(&key_of(&object));
                None
            }
            Event::Init => {
                inner.buffer = Some(HashMap::new());
                None
            }
            Event::InitApply(object) => {
                let object = Arc::new(object);
                inner
                    .buffer
                    .get_or_insert_with(HashMap::new)
                    .insert(key_of(&*object), object.clone());
                Some(object)
            }
            Event::InitDone => {
                let buffer = inner.buffer.take().unwrap_or_default();
                inner.live = buffer;
                None
            }
        }
    }
}

impl<K> Store<K> {
    /// The object `namespace/name`, if held.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner
            .live
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Every object held, in no particular order.
    pub fn state(&self) -> Vec<Arc<K>> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner.live.values().cloned().collect()
    }

    /// How many objects are held.
    pub fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .live
            .len()
    }

    /// Whether no object is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn cm(namespace: &str, name: &str, version: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                resource_version: Some(version.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn version(store: &Store<ConfigMap>, namespace: &str, name: &str) -> Option<String> {
        store
            .get(namespace, name)
            .and_then(|cm| cm.metadata.resource_version.clone())
    }

    #[test]
    fn applies_replace_and_deletes_remove_by_namespace_and_name() {
        let store = Store::default();
        let applied = store.apply(Event::Apply(cm("a", "x", "1")));
        assert_eq!(
            applied.map(|cm| cm.metadata.resource_version.clone()),
            Some(Some("1".into()))
        );
        store.apply(Event::Apply(cm("b", "x", "2")));
        store.apply(Event::Apply(cm("a", "x", "3")));
        assert_eq!(version(&store, "a", "x").as_deref(), Some("3"));
        assert_eq!(version(&store, "b", "x").as_deref(), Some("2"));
        assert_eq!(store.len(), 2);
        assert!(store.apply(Event::Delete(cm("a", "x", "4"))).is_none());
        assert_eq!(version(&store, "a", "x"), None);
        assert_eq!(store.state().len(), 1);
    }

    #[test]
    fn a_relisting_shows_the_old_objects_until_it_is_done_then_only_the_new_ones() {
        let store = Store::default();
        store.apply(Event::Apply(cm("a", "old", "1")));
        store.apply(Event::Init);
        store.apply(Event::InitApply(cm("a", "new", "2")));
        assert_eq!(
            version(&store, "a", "old").as_deref(),
            Some("1"),
            "not swapped in yet"
        );
        assert_eq!(version(&store, "a", "new"), None);
        store.apply(Event::InitDone);
        assert_eq!(version(&store, "a", "old"), None);
        assert_eq!(version(&store, "a", "new").as_deref(), Some("2"));
        assert!(!store.is_empty());
    }
}
