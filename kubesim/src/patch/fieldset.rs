//! Field sets in the Kubernetes `FieldsV1` encoding, and path lookups in objects.
//!
//! A path is a list of encoded elements exactly as they appear as FieldsV1
//! keys (`f:name`, `k:{"name":"x"}`, `v:"value"`, `i:0`), so sets round-trip
//! to managedFields without a separate model.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{ListStrategy, list_strategy};

/// One encoded path.
pub(super) type Path = Vec<String>;

/// A tree of owned paths; `dot` marks that the path itself is a member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct FieldSet {
    dot: bool,
    children: BTreeMap<String, FieldSet>,
}

/// Metadata and type fields that no manager owns (they identify the object or are server-assigned).
pub(super) const UNOWNED_TOP: &[&str] = &["apiVersion", "kind"];
pub(super) const UNOWNED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

impl FieldSet {
    /// Parses a `fieldsV1` value; malformed parts are ignored rather than rejected
    /// because managedFields may come from clients.
    pub(super) fn from_fields_v1(v: &Value) -> FieldSet {
        let mut set = Self::parse_node(v);
        set.dot = false;
        set
    }

    fn parse_node(v: &Value) -> FieldSet {
        let Some(m) = v.as_object() else {
            return FieldSet {
                dot: true,
                children: BTreeMap::new(),
            };
        };
        let children: BTreeMap<String, FieldSet> = m
            .iter()
            .filter(|(k, _)| k.as_str() != ".")
            .map(|(k, v)| (k.clone(), Self::parse_node(v)))
            .collect();
        FieldSet {
            dot: m.contains_key(".") || children.is_empty(),
            children,
        }
    }

    /// Encodes the set as a `fieldsV1` object (its keys moved, not copied).
    pub(super) fn into_fields_v1(self) -> Value {
        let mut m = Map::new();
        if self.dot && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (k, c) in self.children {
            m.insert(k, c.into_fields_v1());
        }
        Value::Object(m)
    }

    /// The set of fields an object (or applied configuration) specifies.
    pub(super) fn from_object(obj: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        if let Some(m) = obj.as_object() {
            for (k, v) in m {
                if v.is_null() || UNOWNED_TOP.contains(&k.as_str()) {
                    continue;
                }
                if k == "metadata"
                    && let Some(meta) = v.as_object()
                {
                    let mut node = FieldSet::default();
                    for (mk, mv) in meta {
                        if mv.is_null() || UNOWNED_METADATA.contains(&mk.as_str()) {
                            continue;
                        }
                        collect(mv, mk, node.children.entry(field_key(mk)).or_default());
                    }
                    // Metadata holding only identity fields contributes nothing.
                    if !node.children.is_empty() {
                        set.children.insert("f:metadata".into(), node);
                    }
                    continue;
                }
                collect(v, k, set.children.entry(field_key(k)).or_default());
            }
        }
        set
    }

    pub(super) fn is_empty(&self) -> bool {
        !self.dot && self.children.is_empty()
    }

    #[cfg(test)]
    pub(super) fn insert(&mut self, path: &[String]) {
        let mut node = self;
        for e in path {
            node = node.children.entry(e.clone()).or_default();
        }
        node.dot = true;
    }

    fn node(&self, path: &[String]) -> Option<&FieldSet> {
        path.iter().try_fold(self, |n, e| n.children.get(e))
    }

    pub(super) fn contains(&self, path: &[String]) -> bool {
        !path.is_empty() && self.node(path).is_some_and(|n| n.dot)
    }

    /// Whether the set has `path` or anything below it.
    pub(super) fn touches(&self, path: &[String]) -> bool {
        self.node(path).is_some_and(|n| !n.is_empty())
    }

    /// Removes `path` as a member, pruning emptied branches; descendants stay.
    pub(super) fn remove(&mut self, path: &[String]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        let Some(child) = self.children.get_mut(first) else {
            return;
        };
        if rest.is_empty() {
            child.dot = false;
        } else {
            child.remove(rest);
        }
        if child.is_empty() {
            self.children.remove(first);
        }
    }

    /// All member paths, parents before children.
    pub(super) fn members(&self) -> Vec<Path> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.walk(&mut prefix, &mut out);
        out
    }

    fn walk(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for (k, c) in &self.children {
            prefix.push(k.clone());
            if c.dot {
                out.push(prefix.clone());
            }
            c.walk(prefix, out);
            prefix.pop();
        }
    }

    /// The members of `self` (the set of `after`'s fields) that `after` sets differently from
    /// `before`: a field whose value differs, or a list element `before` lacks.
    ///
    /// One walk down both objects beside the set: looking every member up from the root costs
    /// the depth of the object per field, and a write's cost grew with the object's size squared.
    pub(super) fn changed(&self, after: &Value, before: Option<&Value>) -> FieldSet {
        self.changed_below(Some(after), before)
    }

    fn changed_below(&self, now: Option<&Value>, was: Option<&Value>) -> FieldSet {
        let mut out = FieldSet::default();
        for (k, c) in &self.children {
            let now_c = now.and_then(|v| step(v, k));
            let was_c = was.and_then(|v| step(v, k));
            let mut below = c.changed_below(now_c, was_c);
            if c.dot {
                let was_v = was_c.filter(|v| !v.is_null());
                // Element-presence members (k:/v:) change only by appearing.
                below.dot = if k.starts_with("f:") {
                    now_c.filter(|v| !v.is_null()) != was_v
                } else {
                    was_v.is_none()
                };
            }
            if !below.is_empty() {
                out.children.insert(k.clone(), below);
            }
        }
        out
    }

    /// Removes the members `after` no longer has and those in `taken` (when given); returns
    /// whether any went. Branches left empty are pruned, as [`FieldSet::remove`] does.
    pub(super) fn drop_stale(&mut self, after: &Value, taken: Option<&FieldSet>) -> bool {
        self.drop_stale_below(Some(after), taken)
    }

    fn drop_stale_below(&mut self, now: Option<&Value>, taken: Option<&FieldSet>) -> bool {
        let mut removed = false;
        self.children.retain(|k, c| {
            let now_c = now.and_then(|v| step(v, k));
            let taken_c = taken.and_then(|t| t.children.get(k));
            let was_empty = c.is_empty();
            removed |= c.drop_stale_below(now_c, taken_c);
            if c.dot && (now_c.is_none_or(Value::is_null) || taken_c.is_some_and(|t| t.dot)) {
                c.dot = false;
                removed = true;
            }
            was_empty || !c.is_empty()
        });
        removed
    }

    pub(super) fn union(&mut self, other: &FieldSet) {
        self.dot |= other.dot;
        for (k, c) in &other.children {
            self.children.entry(k.clone()).or_default().union(c);
        }
    }
}

/// The encoded path element of a field (`f:name`), built without the formatting machinery:
/// a create's managedFields make one per field of the object.
fn field_key(name: &str) -> String {
    let mut key = String::with_capacity(name.len() + 2);
    key.push_str("f:");
    key.push_str(name);
    key
}

fn collect(v: &Value, field: &str, node: &mut FieldSet) {
    match v {
        Value::Object(m) => {
            for (k, cv) in m {
                if !cv.is_null() {
                    collect(cv, k, node.children.entry(field_key(k)).or_default());
                }
            }
        }
        Value::Array(items) => match list_kind(field, items) {
            ListStrategy::Keyed(key) => {
                for item in items {
                    if let Some(enc) = key_element(key, item) {
                        let child = node.children.entry(enc).or_default();
                        child.dot = true;
                        if let Value::Object(m) = item {
                            for (k, cv) in m {
                                if !cv.is_null() {
                                    collect(cv, k, child.children.entry(field_key(k)).or_default());
                                }
                            }
                        }
                    }
                }
            }
            ListStrategy::Set => {
                for item in items {
                    node.children.entry(format!("v:{item}")).or_default().dot = true;
                }
            }
            ListStrategy::Atomic => {}
        },
        _ => {}
    }
    if node.children.is_empty() {
        node.dot = true;
    }
}

/// The strategy apply uses for a list: keyed/set only when every element fits,
/// so custom resources with look-alike field names degrade to atomic lists.
pub(super) fn list_kind(field: &str, items: &[Value]) -> ListStrategy {
    match list_strategy(field, &[items]) {
        ListStrategy::Keyed(key)
            if items
                .iter()
                .all(|i| i.get(key).is_some_and(|k| !k.is_null())) =>
        {
            ListStrategy::Keyed(key)
        }
        ListStrategy::Set if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            ListStrategy::Set
        }
        _ => ListStrategy::Atomic,
    }
}

/// `k:{"key":value}` for a keyed list element.
pub(super) fn key_element(key: &str, item: &Value) -> Option<String> {
    let kv = item.get(key)?;
    let mut m = Map::new();
    m.insert(key.to_string(), kv.clone());
    Some(format!("k:{}", Value::Object(m)))
}

enum Elem {
    Field(String),
    Key(Map<String, Value>),
    Value(Value),
    Index(usize),
}

fn decode(e: &str) -> Option<Elem> {
    let (tag, rest) = e.split_once(':')?;
    match tag {
        "f" => Some(Elem::Field(rest.to_string())),
        "k" => serde_json::from_str(rest).ok().map(Elem::Key),
        "v" => serde_json::from_str(rest).ok().map(Elem::Value),
        "i" => rest.parse().ok().map(Elem::Index),
        _ => None,
    }
}

fn key_matches(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(|(k, v)| item.get(k) == Some(v))
}

fn step<'a>(v: &'a Value, e: &str) -> Option<&'a Value> {
    // Fields are most steps: looked up without decoding (and copying) the name.
    if let Some(f) = e.strip_prefix("f:") {
        return v.as_object()?.get(f);
    }
    match decode(e)? {
        Elem::Field(f) => v.as_object()?.get(&f),
        Elem::Key(k) => v.as_array()?.iter().find(|i| key_matches(i, &k)),
        Elem::Value(x) => v.as_array()?.iter().find(|i| **i == x),
        Elem::Index(n) => v.as_array()?.get(n),
    }
}

fn step_mut<'a>(v: &'a mut Value, e: &str) -> Option<&'a mut Value> {
    match decode(e)? {
        Elem::Field(f) => v.as_object_mut()?.get_mut(&f),
        Elem::Key(k) => v.as_array_mut()?.iter_mut().find(|i| key_matches(i, &k)),
        Elem::Value(x) => v.as_array_mut()?.iter_mut().find(|i| **i == x),
        Elem::Index(n) => v.as_array_mut()?.get_mut(n),
    }
}

/// The value at `path`, treating explicit `null` as absent.
pub(super) fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(v, |v, e| step(v, e))
        .filter(|v| !v.is_null())
}

/// Removes whatever sits at `path` (map key or list element); missing paths are a no-op.
pub(super) fn remove(v: &mut Value, path: &[String]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let Some(parent) = parent_path.iter().try_fold(v, |v, e| step_mut(v, e)) else {
        return;
    };
    match decode(last) {
        Some(Elem::Field(f)) => {
            if let Some(m) = parent.as_object_mut() {
                m.remove(&f);
            }
        }
        Some(Elem::Key(k)) => {
            if let Some(a) = parent.as_array_mut() {
                a.retain(|i| !key_matches(i, &k));
            }
        }
        Some(Elem::Value(x)) => {
            if let Some(a) = parent.as_array_mut() {
                a.retain(|i| *i != x);
            }
        }
        Some(Elem::Index(n)) => {
            if let Some(a) = parent.as_array_mut()
                && n < a.len()
            {
                a.remove(n);
            }
        }
        None => {}
    }
}

/// Whether `path` ends in a field that is the merge key of its list element
/// (removing it would orphan the element).
pub(super) fn is_key_field(path: &[String]) -> bool {
    let [.., parent, last] = path else {
        return false;
    };
    match (decode(parent), decode(last)) {
        (Some(Elem::Key(k)), Some(Elem::Field(f))) => k.contains_key(&f),
        _ => false,
    }
}

/// Human-readable path as the apiserver prints it in conflict messages,
/// e.g. `.spec.containers[name="app"].image`.
pub(super) fn display(path: &[String]) -> String {
    let mut out = String::new();
    for e in path {
        match decode(e) {
            Some(Elem::Field(f)) => {
                out.push('.');
                out.push_str(&f);
            }
            Some(Elem::Key(k)) => {
                let parts: Vec<String> = k.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            Some(Elem::Value(v)) => out.push_str(&format!("[={v}]")),
            Some(Elem::Index(n)) => out.push_str(&format!("[{n}]")),
            None => out.push_str(e),
        }
    }
    out
}
