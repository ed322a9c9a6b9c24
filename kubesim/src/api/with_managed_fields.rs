//! An object answered with managedFields it does not hold: serialised from the stored object
//! with the list spliced into its metadata, rather than from a copy of the whole object made
//! to carry them.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// `object` with `metadata.managedFields` set to `entries` (left out when empty), keys in the
/// order the object's own map keeps them.
pub struct WithManagedFields<'a, E: ?Sized> {
    pub object: &'a Value,
    pub entries: &'a E,
}

/// A managedFields list: built, or written as it is serialised ([`crate::patch::CreatedFields`]).
pub trait Entries: Serialize {
    fn is_empty(&self) -> bool;
}

impl Entries for [Value] {
    fn is_empty(&self) -> bool {
        <[Value]>::is_empty(self)
    }
}

impl Entries for crate::patch::CreatedFields<'_> {
    fn is_empty(&self) -> bool {
        crate::patch::CreatedFields::is_empty(self)
    }
}

const KEY: &str = "managedFields";

impl<E: Entries + ?Sized> Serialize for WithManagedFields<'_, E> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Some(top) = self.object.as_object() else {
            return self.object.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(top.len()))?;
        for (k, v) in top {
            match v.as_object() {
                Some(metadata) if k == "metadata" => map.serialize_entry(
                    k,
                    &Metadata {
                        metadata,
                        entries: self.entries,
                    },
                )?,
                _ => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

struct Metadata<'a, E: ?Sized> {
    metadata: &'a Map<String, Value>,
    entries: &'a E,
}

impl<E: Entries + ?Sized> Serialize for Metadata<'_, E> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        let mut pending = !self.entries.is_empty();
        for (k, v) in self.metadata {
            if k == KEY {
                continue;
            }
            // The map keeps its keys sorted: the list goes where inserting it would put it.
            if pending && k.as_str() > KEY {
                map.serialize_entry(KEY, self.entries)?;
                pending = false;
            }
            map.serialize_entry(k, v)?;
        }
        if pending {
            map.serialize_entry(KEY, self.entries)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What the answer must equal: the object copied, the list inserted.
    fn copied(object: &Value, entries: &[Value]) -> String {
        let mut copy = object.clone();
        if !entries.is_empty() {
            copy["metadata"][KEY] = Value::Array(entries.to_vec());
        }
        serde_json::to_string(&copy).unwrap()
    }

    #[test]
    fn the_answer_is_the_object_with_the_list_in_its_metadata_byte_for_byte() {
        let entries = [json!({"manager": "m", "operation": "Update"})];
        for object in [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "uid": "u", "labels": {"x": "y"}}, "spec": {}}),
            json!({"metadata": {"annotations": {}, "generation": 1}}),
            json!({"metadata": {"uid": "u", "resourceVersion": "3"}}),
            json!({"metadata": {}}),
            json!({"kind": "ConfigMap", "data": {"k": "v"}, "metadata": {"name": "n"}}),
        ] {
            for list in [&entries[..], &[]] {
                let spliced = serde_json::to_string(&WithManagedFields {
                    object: &object,
                    entries: list as &[Value],
                })
                .unwrap();
                assert_eq!(spliced, copied(&object, list), "{object}");
            }
        }
    }
}
