//! Server-side apply and managedFields tracking for ordinary writes.
//!
//! This is a deliberately small model of structured-merge-diff: ownership is
//! tracked per leaf field (scalars, atomic lists, empty maps) plus keyed/set
//! list elements, which is what clients observe through managedFields and
//! conflicts.

use serde_json::{Map, Value, json};

use super::fieldset::{self, FieldSet, Path};
use super::{ApplyError, ListStrategy};

/// A parsed managedFields entry; `raw` is kept so untouched entries round-trip verbatim.
struct Entry {
    raw: Value,
    manager: Option<String>,
    operation: Option<String>,
    set: FieldSet,
    dirty: bool,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str) -> bool {
        self.manager.as_deref() == Some(manager) && self.operation.as_deref() == Some(operation)
    }

    fn same_manager(&self, manager: &str) -> bool {
        self.manager.as_deref() == Some(manager)
    }
}

fn read_entries(obj: Option<&Value>) -> Vec<Entry> {
    let Some(list) = obj
        .and_then(|o| o.get("metadata"))
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .map(|raw| {
            let s = |k: &str| raw.get(k).and_then(Value::as_str).map(str::to_string);
            Entry {
                manager: s("manager"),
                operation: s("operation"),
                set: raw
                    .get("fieldsV1")
                    .map(FieldSet::from_fields_v1)
                    .unwrap_or_default(),
                raw: raw.clone(),
                dirty: false,
            }
        })
        .collect()
}

/// Re-encodes changed entries and drops the ones left owning nothing, as the apiserver does.
fn write_entries(obj: &mut Value, entries: Vec<Entry>) {
    let mut list = Vec::new();
    write_entries_into(&mut list, entries);
    if let Some(root) = obj.as_object_mut() {
        let meta = root.entry("metadata").or_insert_with(|| json!({}));
        if !meta.is_object() {
            *meta = json!({});
        }
        if let Some(meta) = meta.as_object_mut() {
            if list.is_empty() {
                meta.remove("managedFields");
            } else {
                meta.insert("managedFields".into(), Value::Array(list));
            }
        }
    }
}

/// The managedFields list of `entries`: changed ones re-encoded, those left owning nothing
/// dropped.
fn write_entries_into(list: &mut Vec<Value>, entries: Vec<Entry>) {
    list.extend(
        entries
            .into_iter()
            .filter(|e| !e.dirty || !e.set.is_empty())
            .map(|mut e| {
                if e.dirty
                    && let Some(m) = e.raw.as_object_mut()
                {
                    m.insert("fieldsType".into(), json!("FieldsV1"));
                    m.insert(
                        "fieldsV1".into(),
                        std::mem::take(&mut e.set).into_fields_v1(),
                    );
                }
                e.raw
            }),
    );
}

fn new_entry(manager: &str, operation: &str, api_version: Option<&Value>, now: &str) -> Entry {
    let mut raw = json!({"manager": manager, "operation": operation});
    if let (Some(m), Some(v)) = (raw.as_object_mut(), api_version) {
        m.insert("apiVersion".into(), v.clone());
    }
    if let Some(m) = raw.as_object_mut() {
        m.insert("time".into(), json!(now));
    }
    Entry {
        raw,
        manager: Some(manager.into()),
        operation: Some(operation.into()),
        set: FieldSet::default(),
        dirty: true,
    }
}

/// Refreshes `apiVersion`/`time` of an entry this write touched.
fn stamp(entry: &mut Entry, api_version: Option<&Value>, now: &str) {
    if let Some(m) = entry.raw.as_object_mut() {
        if let Some(v) = api_version {
            m.insert("apiVersion".into(), v.clone());
        }
        m.insert("time".into(), json!(now));
    }
    entry.dirty = true;
}

fn api_version<'a>(primary: &'a Value, fallback: Option<&'a Value>) -> Option<&'a Value> {
    primary
        .get("apiVersion")
        .filter(|v| v.is_string())
        .or_else(|| {
            fallback
                .and_then(|f| f.get("apiVersion"))
                .filter(|v| v.is_string())
        })
}

fn is_field_path(path: &[String]) -> bool {
    path.last().is_some_and(|e| e.starts_with("f:"))
}

/// Server-side apply of `applied` (the complete intent of `manager`) onto `existing`.
///
/// Fields `manager` applied before but omits now are removed (unless another
/// manager also owns them), every field in `applied` is set (maps merged,
/// keyed lists merged by key, other lists replaced), and `manager`'s `Apply`
/// entry in `metadata.managedFields` is rewritten. Fields owned by other
/// managers whose value would change are conflicts unless `force`, in which
/// case ownership moves to `manager`.
pub fn apply(
    existing: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    now_rfc3339: &str,
) -> Result<Value, ApplyError> {
    if !applied.is_object() {
        return Err(ApplyError::Invalid(
            "apply patch must be a JSON object".into(),
        ));
    }
    if manager.is_empty() {
        return Err(ApplyError::Invalid(
            "fieldManager: Required value: is required for apply patch".into(),
        ));
    }
    let base = match existing {
        None => json!({}),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => {
            return Err(ApplyError::Invalid(
                "existing object is not a JSON object".into(),
            ));
        }
    };
    let mut entries = read_entries(Some(&base));
    let new_set = FieldSet::from_object(applied);
    let mine = entries.iter().position(|e| e.is(manager, "Apply"));
    let prev_set = mine.map(|i| entries[i].set.clone()).unwrap_or_default();

    let mut conflicts = Vec::new();
    let mut taken: Vec<(usize, Path)> = Vec::new();
    for path in new_set.members() {
        // Element-presence paths (k:/v:) only say "this item exists"; sharing them never conflicts.
        if !is_field_path(&path) || fieldset::get(applied, &path) == fieldset::get(&base, &path) {
            continue;
        }
        for (i, e) in entries.iter().enumerate() {
            if !e.same_manager(manager) && e.set.contains(&path) {
                conflicts.push((
                    e.manager.clone().unwrap_or_default(),
                    fieldset::display(&path),
                ));
                taken.push((i, path.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(ApplyError::Conflict { conflicts });
    }
    for (i, path) in &taken {
        entries[*i].set.remove(path);
        entries[*i].dirty = true;
    }

    let mut others = FieldSet::default();
    for (i, e) in entries.iter().enumerate() {
        if Some(i) != mine {
            others.union(&e.set);
        }
    }
    let mut result = base;
    for path in prev_set.members() {
        // Shared fields survive: another manager still wants them.
        if new_set.contains(&path) || others.touches(&path) || fieldset::is_key_field(&path) {
            continue;
        }
        fieldset::remove(&mut result, &path);
        // Like structured-merge-diff, maps/lists emptied by pruning disappear instead of lingering as `{}`/`[]`.
        let mut cur: &[String] = &path;
        while let Some((_, parent)) = cur.split_last() {
            let emptied = match fieldset::get(&result, parent) {
                Some(Value::Object(m)) => m.is_empty(),
                Some(Value::Array(a)) => a.is_empty(),
                _ => false,
            };
            if parent.is_empty() || !emptied || new_set.touches(parent) || others.contains(parent) {
                break;
            }
            fieldset::remove(&mut result, parent);
            cur = parent;
        }
    }

    merge_applied(&mut result, applied, "");

    let version = api_version(applied, existing);
    let idx = match mine {
        Some(i) => i,
        None => {
            entries.push(new_entry(manager, "Apply", version, now_rfc3339));
            entries.len() - 1
        }
    };
    stamp(&mut entries[idx], version, now_rfc3339);
    entries[idx].set = new_set;
    write_entries(&mut result, entries);
    Ok(result)
}

/// Server-owned metadata that an applied configuration must not overwrite.
const APPLY_SKIPPED_METADATA: &[&str] = &["managedFields", "resourceVersion"];

fn merge_applied(target: &mut Value, applied: &Value, field: &str) {
    match (&mut *target, applied) {
        (Value::Object(t), Value::Object(a)) => {
            for (k, av) in a {
                if av.is_null()
                    || (field == "metadata" && APPLY_SKIPPED_METADATA.contains(&k.as_str()))
                {
                    continue;
                }
                match t.get_mut(k) {
                    Some(tv) => merge_applied(tv, av, k),
                    None => {
                        let mut fresh = Value::Null;
                        merge_applied(&mut fresh, av, k);
                        t.insert(k.clone(), fresh);
                    }
                }
            }
        }
        (Value::Array(t), Value::Array(a)) => match fieldset::list_kind(field, a) {
            ListStrategy::Keyed(key) => {
                for ae in a {
                    let kv = ae.get(key);
                    match t.iter_mut().find(|te| te.get(key) == kv) {
                        Some(te) => merge_applied(te, ae, ""),
                        None => t.push(strip_nulls(ae)),
                    }
                }
            }
            ListStrategy::Set => {
                for ae in a {
                    if !t.contains(ae) {
                        t.push(ae.clone());
                    }
                }
            }
            ListStrategy::Atomic => *target = strip_nulls(applied),
        },
        (_, Value::Object(a)) => {
            *target = Value::Object(Map::new());
            for (k, av) in a {
                if av.is_null()
                    || (field == "metadata" && APPLY_SKIPPED_METADATA.contains(&k.as_str()))
                {
                    continue;
                }
                if let Value::Object(t) = target {
                    t.insert(k.clone(), strip_nulls(av));
                }
            }
        }
        _ => *target = strip_nulls(applied),
    }
}

/// Applied nulls mean "not specified", so they never reach the stored object.
fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// Records a non-apply write (create/update/patch) by `manager` in `after`'s managedFields.
///
/// Fields added or changed relative to `before` become owned by `manager`'s
/// `Update` entry and are taken from every other entry; ownership of fields
/// that no longer exist is dropped. If `after` carries `metadata.managedFields`
/// they are the starting point (clients may reset them), otherwise `before`'s are.
pub fn record_update(
    before: Option<&Value>,
    after: &Value,
    manager: &str,
    now_rfc3339: &str,
) -> Value {
    if !after.is_object() {
        return after.clone();
    }
    let sent = after
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .is_some_and(|f| !f.is_null());
    let mut entries = read_entries(if sent { Some(after) } else { before });

    let changed = FieldSet::from_object(after).changed(after, before);
    let mine = entries.iter().position(|e| e.is(manager, "Update"));
    for (i, e) in entries.iter_mut().enumerate() {
        // Others lose what this write changed; everyone loses what no longer exists.
        let taken = (Some(i) != mine).then_some(&changed);
        if e.set.drop_stale(after, taken) {
            e.dirty = true;
        }
    }

    let version = api_version(after, before);
    if !changed.is_empty() {
        let idx = match mine {
            Some(i) => i,
            None => {
                entries.push(new_entry(manager, "Update", version, now_rfc3339));
                entries.len() - 1
            }
        };
        stamp(&mut entries[idx], version, now_rfc3339);
        entries[idx].set.union(&changed);
    }

    let mut result = after.clone();
    write_entries(&mut result, entries);
    result
}

/// The managedFields [`record_update`] records for a create by `manager`: one `Update` entry
/// owning every field the object sets (none when it sets none), computed without copying the
/// object. `None` when the object carries managedFields of its own: those are the starting
/// point, and [`record_update`] must be used.
pub fn created_entries(obj: &Value, manager: &str, now_rfc3339: &str) -> Option<Vec<Value>> {
    if obj
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .is_some_and(|f| !f.is_null())
    {
        return None;
    }
    // With nothing before it, every field of the object is one this write changed.
    let set = FieldSet::from_object(obj);
    if set.is_empty() {
        return Some(Vec::new());
    }
    let mut entry = new_entry(manager, "Update", api_version(obj, None), now_rfc3339);
    entry.set = set;
    let mut list = Vec::new();
    write_entries_into(&mut list, vec![entry]);
    Some(list)
}
