//! The managedFields of a create, serialised straight from the created object.
//!
//! [`super::created_entries`] builds a [`super::fieldset::FieldSet`] (a map node and a key
//! string per field), turns it into a `Value` (another map and key per field), then the answer
//! serialises that and drops both trees: 5-6% of kubesim's instructions per submission. With
//! nothing before a create, its entry owns every field of the object, so the `fieldsV1` tree is
//! the object's own shape and can be written while walking the object: the same bytes, no tree.

use std::fmt;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

use super::ListStrategy;
use super::fieldset::{UNOWNED_METADATA, UNOWNED_TOP, key_element, list_kind};

/// The managedFields list a create by `manager` records (what [`super::created_entries`]
/// returns, serialised without being built): empty when the object sets no field.
pub struct CreatedFields<'a> {
    object: &'a Value,
    manager: &'a str,
    api_version: Option<&'a Value>,
    time: &'a str,
    empty: bool,
}

/// [`CreatedFields`] for `obj`, or `None` when only [`super::created_entries`] computes them
/// exactly: the object carries managedFields of its own (the starting point then), or a keyed
/// list holds two elements with the same key (their fields are merged into one element's).
pub fn created_fields<'a>(
    obj: &'a Value,
    manager: &'a str,
    now_rfc3339: &'a str,
) -> Option<CreatedFields<'a>> {
    let top = obj.as_object()?;
    if obj
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .is_some_and(|f| !f.is_null())
    {
        return None;
    }
    let mut owned = false;
    for (k, v) in top {
        if v.is_null() || UNOWNED_TOP.contains(&k.as_str()) {
            continue;
        }
        if k == "metadata"
            && let Some(meta) = v.as_object()
        {
            for (mk, mv) in owned_metadata(meta) {
                owned = true;
                if merges(mv, mk) {
                    return None;
                }
            }
            continue;
        }
        owned = true;
        if merges(v, k) {
            return None;
        }
    }
    Some(CreatedFields {
        object: obj,
        manager,
        api_version: obj.get("apiVersion").filter(|v| v.is_string()),
        time: now_rfc3339,
        empty: !owned,
    })
}

impl CreatedFields<'_> {
    /// Whether the list is empty (the object sets no field a manager owns).
    pub fn is_empty(&self) -> bool {
        self.empty
    }
}

/// Metadata fields a manager owns.
fn owned_metadata(
    meta: &serde_json::Map<String, Value>,
) -> impl Iterator<Item = (&String, &Value)> {
    meta.iter()
        .filter(|(k, v)| !v.is_null() && !UNOWNED_METADATA.contains(&k.as_str()))
}

/// Whether two elements of a keyed list under `v` share a key: the field set then merges them
/// into one member, which the walk below does not do.
fn merges(v: &Value, field: &str) -> bool {
    match v {
        Value::Object(m) => m.iter().any(|(k, cv)| !cv.is_null() && merges(cv, k)),
        Value::Array(items) => match list_kind(field, items) {
            ListStrategy::Keyed(key) => {
                let mut keys: Vec<String> =
                    items.iter().filter_map(|i| key_element(key, i)).collect();
                keys.sort_unstable();
                keys.windows(2).any(|w| w[0] == w[1]) || items.iter().any(merges_fields)
            }
            ListStrategy::Set | ListStrategy::Atomic => false,
        },
        _ => false,
    }
}

fn merges_fields(item: &Value) -> bool {
    item.as_object()
        .is_some_and(|m| m.iter().any(|(k, cv)| !cv.is_null() && merges(cv, k)))
}

impl Serialize for CreatedFields<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(usize::from(!self.empty)))?;
        if !self.empty {
            seq.serialize_element(&Entry(self))?;
        }
        seq.end()
    }
}

/// The one `Update` entry, its keys in the order a `Value` map keeps them (sorted).
struct Entry<'a>(&'a CreatedFields<'a>);

impl Serialize for Entry<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let mut map = serializer.serialize_map(None)?;
        if let Some(v) = f.api_version {
            map.serialize_entry("apiVersion", v)?;
        }
        map.serialize_entry("fieldsType", "FieldsV1")?;
        map.serialize_entry("fieldsV1", &Root(f.object))?;
        map.serialize_entry("manager", f.manager)?;
        map.serialize_entry("operation", "Update")?;
        map.serialize_entry("time", f.time)?;
        map.end()
    }
}

/// The object's field set: every field but the unowned ones, metadata only when it holds an
/// owned field.
struct Root<'a>(&'a Value);

impl Serialize for Root<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (k, v) in self.0.as_object().into_iter().flatten() {
            if v.is_null() || UNOWNED_TOP.contains(&k.as_str()) {
                continue;
            }
            if k == "metadata"
                && let Some(meta) = v.as_object()
            {
                if owned_metadata(meta).next().is_some() {
                    map.serialize_entry(&FieldKey(k), &Metadata(meta))?;
                }
                continue;
            }
            map.serialize_entry(&FieldKey(k), &Node { v, field: k })?;
        }
        map.end()
    }
}

struct Metadata<'a>(&'a serde_json::Map<String, Value>);

impl Serialize for Metadata<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (k, v) in owned_metadata(self.0) {
            map.serialize_entry(&FieldKey(k), &Node { v, field: k })?;
        }
        map.end()
    }
}

/// The members under one field: its non-null fields for a map, its elements for a keyed or set
/// list, nothing (`{}`) for anything else.
struct Node<'a> {
    v: &'a Value,
    field: &'a str,
}

impl Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self.v {
            Value::Object(m) => {
                for (k, v) in m {
                    if !v.is_null() {
                        map.serialize_entry(&FieldKey(k), &Node { v, field: k })?;
                    }
                }
            }
            Value::Array(items) => match list_kind(self.field, items) {
                ListStrategy::Keyed(key) => {
                    let mut elements: Vec<(String, &Value)> = items
                        .iter()
                        .filter_map(|i| Some((key_element(key, i)?, i)))
                        .collect();
                    elements.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    for (k, item) in &elements {
                        map.serialize_entry(k, &Element(item))?;
                    }
                }
                ListStrategy::Set => {
                    let mut values: Vec<String> = items.iter().map(|i| format!("v:{i}")).collect();
                    values.sort_unstable();
                    values.dedup();
                    for k in &values {
                        map.serialize_entry(k, &Empty)?;
                    }
                }
                ListStrategy::Atomic => {}
            },
            _ => {}
        }
        map.end()
    }
}

/// A keyed list element: itself a member (`.`) when it has fields below it, and its fields.
struct Element<'a>(&'a Value);

impl Serialize for Element<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        let fields = self.0.as_object().into_iter().flatten();
        let mut fields = fields.filter(|(_, v)| !v.is_null()).peekable();
        if fields.peek().is_some() {
            map.serialize_entry(".", &Empty)?;
        }
        for (k, v) in fields {
            map.serialize_entry(&FieldKey(k), &Node { v, field: k })?;
        }
        map.end()
    }
}

struct Empty;

impl Serialize for Empty {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_map(Some(0))?.end()
    }
}

/// `f:NAME`, written into the output as it is escaped (no string built per field).
struct FieldKey<'a>(&'a str);

impl Serialize for FieldKey<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for FieldKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("f:")?;
        f.write_str(self.0)
    }
}
