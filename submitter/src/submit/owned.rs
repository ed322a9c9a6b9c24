//! An object serialized with the driver pod as its owner, without copying it first: the
//! dependents created once the pod exists carry `ownerReferences` from their first write.

use serde_json::Value;

/// An object serialized with `ownerReferences` set in its metadata, without copying it.
pub struct Owned<'a> {
    pub object: &'a Value,
    pub owner: &'a Value,
}

impl serde::Serialize for Owned<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Value::Object(fields) = self.object else {
            return self.object.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(fields.len()))?;
        for (key, value) in fields {
            match value {
                Value::Object(metadata) if key == "metadata" => {
                    map.serialize_entry(
                        key,
                        &WithOwner {
                            metadata,
                            owner: self.owner,
                        },
                    )?;
                }
                _ => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

/// Metadata with `ownerReferences` replaced by `owner`.
struct WithOwner<'a> {
    metadata: &'a serde_json::Map<String, Value>,
    owner: &'a Value,
}

impl serde::Serialize for WithOwner<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.metadata {
            if key != "ownerReferences" {
                map.serialize_entry(key, value)?;
            }
        }
        map.serialize_entry("ownerReferences", self.owner)?;
        map.end()
    }
}
