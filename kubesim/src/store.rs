//! The object store: every object as JSON, one resourceVersion counter and one bounded event log
//! from which every watch (clients' and kubesim's own controllers') is served.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::admission;
use crate::api_error::ApiError;
use crate::meta::At;
use crate::meta::{self, metadata_mut};
use crate::resources::{Registry, ResourceType, View};

mod change;
mod delete;
mod history;
mod key;
mod quota;
#[cfg(test)]
mod tests;
mod update;

use change::{same_but_resource_version, tracks_generation};
use history::Histories;
use key::key;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed (including deletion started: `deletionTimestamp` set).
    Modified,
    /// Removed from the store.
    Deleted,
}

impl EventType {
    /// The watch event `type` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One entry of the event log.
#[derive(Debug, Clone)]
pub struct Event {
    /// The resourceVersion this change produced.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// API group of the object.
    pub group: String,
    /// Resource plural of the object.
    pub plural: String,
    /// Namespace of the object (`""` for cluster-scoped).
    pub namespace: String,
    /// The object after the change (before it, for deletions).
    pub object: Arc<Value>,
    /// The object before the change, for modifications (lets watches with selectors turn a change
    /// that leaves the selection into a DELETED event, as Kubernetes does).
    pub previous: Option<Arc<Value>>,
}

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    /// `dryRun=All`: validate and return the result without storing it.
    pub dry_run: bool,
}

/// Which part of an object an update writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main resource: status changes are ignored when the type has a status subresource.
    Main,
    /// The `status` subresource: only status changes are kept.
    Status,
}

/// `DeleteOptions` that matter to kubesim.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `propagationPolicy`: `Background` (default), `Foreground` or `Orphan`.
    pub propagation: Option<String>,
    /// `gracePeriodSeconds` (pods only; 0 deletes at once).
    pub grace_period: Option<i64>,
}

/// Paging and starting point of a list.
#[derive(Debug, Clone, Default)]
pub struct ListOpts {
    /// `limit` (0 = all).
    pub limit: usize,
    /// `continue` token from a previous page.
    pub continue_token: Option<String>,
    /// Whether to count the objects after a page (`remainingItemCount`). The API server
    /// leaves the count unset when the list has a label or field selector (every object is
    /// then counted as selected), and counting means reading every object after the page: a
    /// client paging through N objects with a selector would cost N²/limit reads.
    pub count_remaining: bool,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// Matching objects, ordered by namespace then name (the stored versions, shared).
    pub items: Vec<Arc<Value>>,
    /// The store's resourceVersion at the time of the list.
    pub resource_version: u64,
    /// Token for the next page, if any.
    pub continue_token: Option<String>,
    /// Objects left after this page, when counted (see [`ListOpts::count_remaining`]).
    pub remaining: Option<usize>,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFrom {
    /// `resourceVersion` unset or `0`: synthetic ADDED events for what exists, then changes.
    Now,
    /// Changes after this resourceVersion (410 if history no longer reaches back that far).
    After(u64),
}

/// A subscription to the event log.
pub struct Subscription {
    /// Events to deliver first (synthetic ADDED or replayed history), in order.
    pub replay: Vec<Arc<Event>>,
    /// Live events after the replay.
    pub live: broadcast::Receiver<Arc<Event>>,
    /// Changes when kubesim drops every watch (fault injection).
    pub dropped: tokio::sync::watch::Receiver<u64>,
    /// The store's resourceVersion when the subscription was made: everything up to it has been
    /// replayed or does not concern the subscriber, so it is a safe bookmark.
    pub at: u64,
}

/// A predicate over (group, plural, namespace) choosing which events a subscription wants.
pub type Scope<'a> = &'a dyn Fn(&str, &str, &str) -> bool;

type TypeKey = (String, String);
type ObjKey = (String, String);

struct Inner {
    rv: u64,
    // Objects are shared with the event log: history costs a pointer per event, not a copy.
    objects: HashMap<TypeKey, BTreeMap<ObjKey, Arc<Value>>>,
    /// Each type's recent events, for watch resumption and continue tokens.
    history: Histories,
    registry: Registry,
    /// How many stored Services hold each ClusterIP, kept in step by `commit`: allocating an
    /// address for a new Service looks it up instead of reading every Service (which made a
    /// burst of N Service creations cost N² reads).
    cluster_ips: HashMap<String, usize>,
}

/// The shared object store.
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Event>>,
    drop_tx: tokio::sync::watch::Sender<u64>,
}

/// Capacity of the broadcast channel feeding live watches; a watcher that falls this far behind
/// is closed and resumes from its last resourceVersion, as with a real API server.
const LIVE_CAPACITY: usize = 65_536;

impl Store {
    /// An empty store keeping `history_capacity` events of each type for watch resumption.
    pub fn new(history_capacity: usize) -> Arc<Self> {
        let (tx, _) = broadcast::channel(LIVE_CAPACITY);
        let (drop_tx, _) = tokio::sync::watch::channel(0);
        Arc::new(Self {
            inner: Mutex::new(Inner {
                rv: 1,
                objects: HashMap::new(),
                history: Histories::new(history_capacity),
                registry: Registry::default(),
                cluster_ips: HashMap::new(),
            }),
            tx,
            drop_tx,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-written object (every write replaces
        // a whole value), so a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A copy of the type registry (built-ins plus CRDs).
    pub fn registry(&self) -> Registry {
        self.lock().registry.clone()
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Reads one object.
    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        let inner = self.lock();
        let (stored, view) = inner.storage(rt)?;
        inner
            .object(&stored, ns, name)
            .cloned()
            .map(|o| as_viewed(view, o))
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))
    }

    /// The (group, plural) under which `rt`'s objects are stored, and in which their watch
    /// events come: its own, or for a view the stored type's.
    pub fn storage_key(&self, rt: &ResourceType) -> (String, String) {
        match rt.view() {
            Some(v) => (v.storage.0.to_string(), v.storage.2.to_string()),
            None => type_key(rt),
        }
    }

    /// Reads one object by group/plural without a type handle (controllers).
    pub fn get_raw(&self, group: &str, plural: &str, ns: &str, name: &str) -> Option<Value> {
        let inner = self.lock();
        inner
            .objects
            .get(key(&(group, plural)))
            .and_then(|m| m.get(key(&(ns, name))))
            .map(|o| Value::clone(o))
    }

    /// A shared handle to one object, without copying it (authorizers and controllers on hot
    /// paths).
    pub fn get_shared(
        &self,
        group: &str,
        plural: &str,
        ns: &str,
        name: &str,
    ) -> Option<Arc<Value>> {
        let inner = self.lock();
        inner
            .objects
            .get(key(&(group, plural)))
            .and_then(|m| m.get(key(&(ns, name))))
            .cloned()
    }

    /// Shared handles to the objects of a type, in namespace `ns` or all, without copying them.
    pub fn objects(&self, group: &str, plural: &str, ns: Option<&str>) -> Vec<Arc<Value>> {
        let inner = self.lock();
        let Some(m) = inner.objects.get(key(&(group, plural))) else {
            return Vec::new();
        };
        match ns {
            None => m.values().cloned().collect(),
            Some(ns) => m
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
        }
    }

    /// Lists objects of a type, in one namespace or all, filtered by `keep`.
    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        keep: &dyn Fn(&Value) -> bool,
        opts: &ListOpts,
    ) -> Result<ListPage, ApiError> {
        let inner = self.lock();
        let (stored, view) = inner.storage(rt)?;
        let start = match &opts.continue_token {
            Some(tok) => {
                let (rv, key) = decode_continue(tok)
                    .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
                if rv
                    < inner
                        .history
                        .gone_through(Some((&stored.group, &stored.plural)))
                {
                    return Err(ApiError::gone(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                    ));
                }
                Some(key)
            }
            None => None,
        };
        let empty = BTreeMap::new();
        let all = inner
            .objects
            .get(key(&(stored.group.as_str(), stored.plural.as_str())))
            .unwrap_or(&empty);
        let range: Box<dyn Iterator<Item = (&ObjKey, &Arc<Value>)>> = match &start {
            Some(k) => Box::new(all.range::<ObjKey, _>((
                std::ops::Bound::Excluded(k.clone()),
                std::ops::Bound::Unbounded,
            ))),
            None => Box::new(all.iter()),
        };
        let mut items = Vec::new();
        let mut remaining = 0;
        let mut last_key = None;
        for (k, v) in range {
            if ns.is_some_and(|n| n != k.0) {
                continue;
            }
            if opts.limit > 0 && items.len() == opts.limit {
                // As the API server reads etcd: once the page is full, any object after it,
                // selected or not, makes a continue token, so a selected list's next page may be
                // empty. Only an unselected list reads on, to count what is left.
                remaining += 1;
                if opts.count_remaining {
                    continue;
                }
                break;
            }
            if !keep(v) {
                continue;
            }
            last_key = Some(k.clone());
            items.push(shared_as_viewed(view, Arc::clone(v)));
        }
        let continue_token = (remaining > 0)
            .then(|| last_key.map(|k| encode_continue(inner.rv, &k)))
            .flatten();
        Ok(ListPage {
            items,
            resource_version: inner.rv,
            continue_token,
            remaining: (opts.count_remaining && remaining > 0).then_some(remaining),
        })
    }

    /// Every object of a type (controllers; no filtering, no paging).
    pub fn all_of(&self, group: &str, plural: &str) -> Vec<Value> {
        let inner = self.lock();
        inner
            .objects
            .get(key(&(group, plural)))
            .map(|m| m.values().map(|o| Value::clone(o)).collect())
            .unwrap_or_default()
    }

    /// Creates an object (`generateName` resolved, metadata filled, admission applied).
    pub fn create(
        &self,
        rt: &ResourceType,
        ns: &str,
        obj: Value,
        opts: &WriteOpts,
    ) -> Result<Value, ApiError> {
        self.create_shared(rt, ns, obj, opts)
            .map(Arc::unwrap_or_clone)
    }

    /// [`Store::create`], answering with the stored object itself rather than a copy.
    pub fn create_shared(
        &self,
        rt: &ResourceType,
        ns: &str,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> Result<Arc<Value>, ApiError> {
        let mut inner = self.lock();
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        check_kind(rt, &obj)?;
        // A view's object is kept in the stored type's form (messages still name the view).
        let served = rt;
        let (stored, view) = inner.storage(rt)?;
        let rt: &ResourceType = &stored;
        if let Some(v) = view {
            obj = (v.to_storage)(obj);
        }
        {
            let md = metadata_mut(&mut obj);
            let body_ns = md.get("namespace").and_then(Value::as_str).unwrap_or("");
            if rt.namespaced {
                if !body_ns.is_empty() && body_ns != ns {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                md.insert("namespace".into(), json!(ns));
            } else {
                md.remove("namespace");
            }
            let name = md.get("name").and_then(Value::as_str).unwrap_or("");
            if name.is_empty()
                && let Some(prefix) = md.get("generateName").and_then(Value::as_str)
                && !prefix.is_empty()
            {
                let generated = format!("{prefix}{}", meta::generated_suffix());
                md.insert("name".into(), json!(generated));
            }
        }
        if let Some(v) = view {
            let causes = (v.validate_create)(&obj);
            if !causes.is_empty() {
                let name = meta::name(&obj).to_string();
                return Err(ApiError::invalid(
                    &served.group,
                    &served.kind,
                    &name,
                    causes,
                ));
            }
        }
        if rt.namespaced {
            inner.check_namespace_open(ns)?;
        }
        if rt.status_subresource
            && let Some(o) = obj.as_object_mut()
        {
            // Status belongs to controllers: the API server resets it on create.
            o.remove("status");
        }
        let is_service = rt.group.is_empty() && rt.plural == "services";
        let wants_ip = is_service
            && obj
                .at("/spec/clusterIP")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
        admission::admit_create(rt, &mut obj, &|g, p, n, name| inner.exists(g, p, n, name))?;
        inner.admit_quota(rt, ns, &mut obj)?;
        let name = meta::name(&obj).to_string();
        if wants_ip {
            // Admission hashed the name into the Service network; a ClusterIP another Service
            // already has moves on to the next free one, so the proxy never confuses two.
            inner.assign_cluster_ip(ns, &name, &mut obj)?;
        }
        if inner.object(rt, ns, &name).is_some() {
            return Err(ApiError::already_exists(
                &served.group,
                &served.plural,
                &name,
            ));
        }
        let rv = inner.rv + 1;
        {
            let md = metadata_mut(&mut obj);
            md.insert("uid".into(), json!(meta::new_uid()));
            md.insert("creationTimestamp".into(), json!(meta::now_rfc3339()));
            md.insert("resourceVersion".into(), json!(rv.to_string()));
            if tracks_generation(rt) {
                md.insert("generation".into(), json!(1));
            } else {
                md.remove("generation");
            }
            md.remove("deletionTimestamp");
            md.remove("deletionGracePeriodSeconds");
            md.remove("selfLink");
        }
        obj["apiVersion"] = json!(rt.api_version());
        obj["kind"] = json!(rt.kind);
        if opts.dry_run {
            return Ok(Arc::new(as_viewed(view, obj)));
        }
        if rt.custom || rt.group == "apiextensions.k8s.io" {
            inner.on_crd_write(rt, &obj);
        }
        let stored = inner.commit(&self.tx, rt, ns, &name, EventType::Added, obj);
        Ok(shared_as_viewed(view, stored))
    }

    /// Replaces an object (PUT), honouring a resourceVersion in the body as a precondition.
    pub fn update(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        obj: Value,
        part: Part,
        opts: &WriteOpts,
    ) -> Result<Value, ApiError> {
        self.modify(rt, ns, name, part, opts, |_| Ok(obj))
    }

    /// Read-modify-write under the store lock: `f` gets the current object and returns the new
    /// one; a resourceVersion in the returned object must match the current one.
    pub fn modify(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        part: Part,
        opts: &WriteOpts,
        f: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        self.modify_shared(rt, ns, name, part, opts, f)
            .map(Arc::unwrap_or_clone)
    }

    /// [`Store::modify`], answering with the stored object itself rather than a copy (writers
    /// that only serialise the result, or ignore it).
    pub fn modify_shared(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        part: Part,
        opts: &WriteOpts,
        f: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Arc<Value>, ApiError> {
        let mut inner = self.lock();
        let (stored, view) = inner.storage(rt)?;
        // Shared, not copied: most writes read the current object and build a new one.
        let current = inner
            .shared(&stored, ns, name)
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        let proposed = match view {
            // The change is made to what the client sees, then stored.
            Some(v) => {
                let proposed = f(&(v.from_storage)(Value::clone(&current)))?;
                if proposed.is_object() {
                    check_kind(rt, &proposed)?;
                }
                (v.to_storage)(proposed)
            }
            None => f(&current)?,
        };
        let out =
            inner.write_update(&self.tx, &stored, ns, name, &current, proposed, part, opts)?;
        Ok(shared_as_viewed(view, out))
    }

    /// Create-or-modify under one lock (server-side apply): `f` gets the current object, if any.
    pub fn upsert(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        part: Part,
        opts: &WriteOpts,
        f: impl Fn(Option<&Value>) -> Result<Value, ApiError>,
    ) -> Result<(Value, bool), ApiError> {
        self.upsert_shared(rt, ns, name, part, opts, f)
            .map(|(o, created)| (Arc::unwrap_or_clone(o), created))
    }

    /// [`Store::upsert`], answering with the stored object itself rather than a copy.
    pub fn upsert_shared(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        part: Part,
        opts: &WriteOpts,
        f: impl Fn(Option<&Value>) -> Result<Value, ApiError>,
    ) -> Result<(Arc<Value>, bool), ApiError> {
        let exists = {
            let inner = self.lock();
            let (stored, _) = inner.storage(rt)?;
            inner.object(&stored, ns, name).is_some()
        };
        if !exists {
            let obj = f(None)?;
            match self.create_shared(rt, ns, obj, opts) {
                // Lost a race with another creator: retry as an update below.
                Err(e) if e.reason == "AlreadyExists" => {}
                other => return other.map(|o| (o, true)),
            }
        }
        let obj = self.modify_shared(rt, ns, name, part, opts, |cur| f(Some(cur)))?;
        Ok((obj, false))
    }

    /// Deletes an object, or starts its deletion when finalizers or graceful termination hold it.
    pub fn delete(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        let (stored, view) = inner.storage(rt)?;
        inner
            .delete(&self.tx, &stored, ns, name, opts)
            .map(|o| as_viewed(view, o))
            .map_err(|e| match e.code {
                404 => ApiError::not_found(&rt.group, &rt.plural, name),
                _ => e,
            })
    }

    /// Subscribes to changes of the types `scope` accepts.
    pub fn subscribe(&self, scope: Scope<'_>, from: WatchFrom) -> Result<Subscription, ApiError> {
        self.subscribe_in(None, scope, from)
    }

    /// Subscribes to changes of one type (`group`, `plural`) that `scope` accepts: a resume
    /// needs only that type's history.
    pub fn subscribe_type(
        &self,
        group: &str,
        plural: &str,
        scope: Scope<'_>,
        from: WatchFrom,
    ) -> Result<Subscription, ApiError> {
        self.subscribe_in(Some((group, plural)), scope, from)
    }

    fn subscribe_in(
        &self,
        of_type: Option<(&str, &str)>,
        scope: Scope<'_>,
        from: WatchFrom,
    ) -> Result<Subscription, ApiError> {
        let inner = self.lock();
        let replay = match from {
            WatchFrom::Now => {
                let mut out = Vec::new();
                for ((group, plural), objs) in &inner.objects {
                    for ((ns, _), obj) in objs {
                        if scope(group, plural, ns) {
                            out.push(Arc::new(Event {
                                rv: inner.rv,
                                kind: EventType::Added,
                                group: group.clone(),
                                plural: plural.clone(),
                                namespace: ns.clone(),
                                object: obj.clone(),
                                previous: None,
                            }));
                        }
                    }
                }
                out
            }
            WatchFrom::After(rv) => {
                let gone = inner.history.gone_through(of_type);
                if rv < gone {
                    return Err(ApiError::gone(format!(
                        "too old resource version: {rv} ({gone})"
                    )));
                }
                inner.history.after(of_type, rv, scope)
            }
        };
        Ok(Subscription {
            replay,
            live: self.tx.subscribe(),
            dropped: self.drop_tx.subscribe(),
            at: inner.rv,
        })
    }

    /// Closes every open watch (fault injection); clients resume from their last resourceVersion.
    pub fn drop_watches(&self) {
        self.drop_tx.send_modify(|n| *n += 1);
    }

    /// Forgets all history: any watch or continue token older than now gets 410 Gone.
    pub fn compact(&self) -> u64 {
        let mut inner = self.lock();
        // Advance the counter so that even a client that has seen the newest event must re-list,
        // which is what a test of "resume after compaction" needs to observe.
        inner.rv += 1;
        let rv = inner.rv;
        inner.history.forget_through(rv);
        inner.rv
    }
}

impl Inner {
    /// The type `rt`'s objects are stored as: itself, or for a view the stored type (with the
    /// view, to convert what goes in and out).
    fn storage<'a>(
        &self,
        rt: &'a ResourceType,
    ) -> Result<(std::borrow::Cow<'a, ResourceType>, Option<&'static View>), ApiError> {
        let Some(view) = rt.view() else {
            return Ok((std::borrow::Cow::Borrowed(rt), None));
        };
        let (group, version, plural) = view.storage;
        let stored = self.registry.find(group, version, plural).ok_or_else(|| {
            ApiError::internal(format!(
                "{} is stored as {plural}, which is not served",
                rt.plural
            ))
        })?;
        Ok((
            std::borrow::Cow::Owned(ResourceType::clone(&stored)),
            Some(view),
        ))
    }

    fn shared(&self, rt: &ResourceType, ns: &str, name: &str) -> Option<Arc<Value>> {
        let ns = if rt.namespaced { ns } else { "" };
        self.objects
            .get(key(&(rt.group.as_str(), rt.plural.as_str())))
            .and_then(|m| m.get(key(&(ns, name))))
            .cloned()
    }

    fn object(&self, rt: &ResourceType, ns: &str, name: &str) -> Option<&Value> {
        let ns = if rt.namespaced { ns } else { "" };
        self.objects
            .get(key(&(rt.group.as_str(), rt.plural.as_str())))
            .and_then(|m| m.get(key(&(ns, name))))
            .map(|o| &**o)
    }

    fn assign_cluster_ip(&self, ns: &str, name: &str, obj: &mut Value) -> Result<(), ApiError> {
        let ip = crate::net::addr::service_ip(ns, name, &|ip| {
            self.cluster_ips.contains_key(ip.to_string().as_str())
        })
        .ok_or_else(|| {
            ApiError::internal("failed to allocate a ClusterIP: the Service network is full")
        })?;
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("clusterIP".into(), json!(ip.to_string()));
            spec.insert("clusterIPs".into(), json!([ip.to_string()]));
        }
        Ok(())
    }

    /// Keeps the ClusterIP index in step with a Service leaving (`old`) or entering (`new`)
    /// the store.
    fn index_cluster_ip(&mut self, old: Option<&Value>, new: Option<&Value>) {
        let ip_of = |svc: Option<&Value>| {
            svc.and_then(|s| s.at("/spec/clusterIP"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        if let Some(ip) = ip_of(old)
            && let Some(n) = self.cluster_ips.get_mut(&ip)
        {
            *n -= 1;
            if *n == 0 {
                self.cluster_ips.remove(&ip);
            }
        }
        if let Some(ip) = ip_of(new) {
            *self.cluster_ips.entry(ip).or_default() += 1;
        }
    }

    fn exists(&self, group: &str, plural: &str, ns: &str, name: &str) -> bool {
        self.objects
            .get(key(&(group, plural)))
            .is_some_and(|m| m.contains_key(key(&(ns, name))))
    }

    fn check_namespace_open(&self, ns: &str) -> Result<(), ApiError> {
        match self
            .objects
            .get(key(&("", "namespaces")))
            .and_then(|m| m.get(key(&("", ns))))
        {
            None => Err(ApiError::not_found("", "namespaces", ns)),
            Some(n) if meta::is_deleting(n) => Err(ApiError::forbidden(format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ))),
            Some(_) => Ok(()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn commit(
        &mut self,
        tx: &broadcast::Sender<Arc<Event>>,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        kind: EventType,
        object: Value,
    ) -> Arc<Value> {
        let ns = if rt.namespaced { ns } else { "" };
        self.rv += 1;
        let rv = self.rv;
        let key = (ns.to_string(), name.to_string());
        let map = self.objects.entry(type_key(rt)).or_default();
        let mut object = object;
        // A deletion is a change too: its event carries the deletion's resourceVersion, so a
        // client resuming from the previous version replays it.
        metadata_mut(&mut object).insert("resourceVersion".into(), json!(rv.to_string()));
        let object = Arc::new(object);
        // The version this change replaces comes back from the map as a shared pointer: the
        // log keeps no copy of it.
        let replaced = if kind == EventType::Deleted {
            map.remove(&key)
        } else {
            map.insert(key, object.clone())
        };
        if rt.group.is_empty() && rt.plural == "services" {
            let stored = (kind != EventType::Deleted).then_some(&*object);
            self.index_cluster_ip(replaced.as_deref(), stored);
        }
        let old = replaced.clone();
        let previous = replaced.filter(|_| kind == EventType::Modified);
        let event = Arc::new(Event {
            rv,
            kind,
            group: rt.group.clone(),
            plural: rt.plural.clone(),
            namespace: ns.to_string(),
            object: object.clone(),
            previous,
        });
        self.history.remember(&event);
        // No receivers is fine: nobody is watching.
        let _ = tx.send(event);
        let new = (kind != EventType::Deleted).then_some(&*object);
        self.account(tx, rt, ns, old.as_deref(), new);
        object
    }

    #[allow(clippy::too_many_arguments)]
    fn write_update(
        &mut self,
        tx: &broadcast::Sender<Arc<Event>>,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        current: &Arc<Value>,
        proposed: Value,
        part: Part,
        opts: &WriteOpts,
    ) -> Result<Arc<Value>, ApiError> {
        let proposed = match update::pod_status(rt, ns, name, current, proposed, part, opts) {
            update::Fast::Done(fast) => match fast? {
                Some(proposed) => proposed,
                None => return Ok(Arc::clone(current)),
            },
            update::Fast::NotTaken(proposed) => {
                let proposed = update::updated(rt, ns, name, current, proposed, part)?;
                if opts.dry_run {
                    return Ok(Arc::new(proposed));
                }
                if same_but_resource_version(current, &proposed) {
                    // A no-op write produces no event and keeps the resourceVersion, as in
                    // Kubernetes.
                    return Ok(Arc::clone(current));
                }
                proposed
            }
        };
        if rt.custom || rt.group == "apiextensions.k8s.io" {
            self.on_crd_write(rt, &proposed);
        }
        if meta::is_deleting(&proposed) && self.ready_to_remove(rt, &proposed) {
            self.commit(tx, rt, ns, name, EventType::Deleted, proposed.clone());
            self.after_remove(tx, rt, &proposed);
            return Ok(Arc::new(proposed));
        }
        Ok(self.commit(tx, rt, ns, name, EventType::Modified, proposed))
    }

    fn on_crd_write(&mut self, rt: &ResourceType, obj: &Value) {
        if rt.group == "apiextensions.k8s.io"
            && rt.plural == "customresourcedefinitions"
            && let Some(custom) = crate::resources::from_crd(obj)
        {
            self.registry.register(custom);
        }
    }
}

fn check_kind(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    if let Some(kind) = obj.get("kind").and_then(Value::as_str)
        && kind != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({}) or kind {kind} does not match {}",
            obj.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
            rt.api_version(),
            rt.kind
        )));
    }
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str)
        && av != rt.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    Ok(())
}

/// A stored object as `view` serves it: itself without a view, a converted copy with one.
fn shared_as_viewed(view: Option<&'static View>, obj: Arc<Value>) -> Arc<Value> {
    match view {
        Some(v) => Arc::new((v.from_storage)(Arc::unwrap_or_clone(obj))),
        None => obj,
    }
}

/// A stored object as `view` serves it (unchanged without one).
fn as_viewed(view: Option<&'static View>, obj: Value) -> Value {
    match view {
        Some(v) => (v.from_storage)(obj),
        None => obj,
    }
}

fn type_key(rt: &ResourceType) -> TypeKey {
    (rt.group.clone(), rt.plural.clone())
}

fn encode_continue(rv: u64, key: &ObjKey) -> String {
    let raw = json!([rv, key.0, key.1]).to_string();
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(tok: &str) -> Option<(u64, ObjKey)> {
    if !tok.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..tok.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(tok.get(i..i + 2)?, 16).ok())
        .collect();
    let v: Value = serde_json::from_slice(&bytes?).ok()?;
    Some((
        v.get(0)?.as_u64()?,
        (
            v.get(1)?.as_str()?.to_string(),
            v.get(2)?.as_str()?.to_string(),
        ),
    ))
}
