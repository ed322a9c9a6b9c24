//! Fault injection and request accounting: what the `/sim/v1` control API changes and reports.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The verbs kubesim counts, as Kubernetes' audit log names them.
pub const VERBS: [&str; 8] = [
    "create",
    "get",
    "list",
    "watch",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// What one API request was, for counting and fault matching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// One of [`VERBS`].
    pub verb: &'static str,
    /// API group.
    pub group: String,
    /// Resource plural (with `/subresource` when one is addressed, e.g. `pods/status`).
    pub resource: String,
    /// Namespace (`""` when none).
    pub namespace: String,
    /// Object name (`""` for collections).
    pub name: String,
    /// Whether it is a watch.
    pub watch: bool,
}

/// One row of `GET /sim/v1/requests`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestCount {
    /// The verb.
    pub verb: String,
    /// API group.
    pub group: String,
    /// Resource plural (with `/subresource`).
    pub resource: String,
    /// Namespace (`""` when none).
    pub namespace: String,
    /// Whether these were watches.
    pub watch: bool,
    /// How many.
    pub count: u64,
}

/// One row of `GET /sim/v1/authz`: how often an identity asked for a verb on a resource (or a
/// non-resource path) in a namespace, and whether it was allowed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthzCount {
    /// The user name (`system:serviceaccount:ns:sa`, `kubernetes-admin`, ...).
    pub user: String,
    /// The verb (`get`, `list`, ... or the lower-case HTTP method for non-resource paths).
    pub verb: String,
    /// API group (`""` for core and for non-resource paths).
    pub group: String,
    /// Resource plural with `/subresource`, or the path of a non-resource request.
    pub resource: String,
    /// Namespace (`""` when none).
    pub namespace: String,
    /// Whether authorization allowed it.
    pub allowed: bool,
    /// How many.
    pub count: u64,
}

/// A rule that fails matching requests (`POST /sim/v1/faults`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRule {
    /// Verb to match (any when absent).
    #[serde(default)]
    pub verb: Option<String>,
    /// Group to match (any when absent).
    #[serde(default)]
    pub group: Option<String>,
    /// Resource to match, e.g. `pods` or `configmaps` (any when absent).
    #[serde(default)]
    pub resource: Option<String>,
    /// Namespace to match (any when absent).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Object name to match (any when absent).
    #[serde(default)]
    pub name: Option<String>,
    /// How many matching requests fail (then the rule is spent).
    #[serde(default = "one")]
    pub count: u64,
    /// HTTP status to answer with (default 500).
    #[serde(default = "internal")]
    pub code: u16,
    /// Message of the `Status` (a default names the fault).
    #[serde(default)]
    pub message: Option<String>,
    /// `before` (default): the request fails without effect. `after`: the request takes effect,
    /// then the client gets the error, as when a response is lost.
    #[serde(default)]
    pub when: FaultTiming,
    /// Delay before answering, in milliseconds (a slow API server or a timeout).
    #[serde(default)]
    pub delay_ms: u64,
}

fn one() -> u64 {
    1
}

fn internal() -> u16 {
    500
}

/// When an injected failure strikes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultTiming {
    /// Fail without effect.
    #[default]
    Before,
    /// Apply, then fail the response.
    After,
}

/// A latency rule (`POST /sim/v1/latency`): matching requests wait before being served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyRule {
    /// Verb to match (any when absent).
    #[serde(default)]
    pub verb: Option<String>,
    /// Resource to match (any when absent).
    #[serde(default)]
    pub resource: Option<String>,
    /// Added delay in milliseconds.
    pub millis: u64,
}

impl FaultRule {
    fn matches(&self, r: &RequestInfo) -> bool {
        let m = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        m(&self.verb, r.verb)
            && m(&self.group, &r.group)
            && m(&self.resource, &r.resource)
            && m(&self.namespace, &r.namespace)
            && m(&self.name, &r.name)
    }
}

/// A fault that fired for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    /// Status code to answer with.
    pub code: u16,
    /// Message for the `Status`.
    pub message: Option<String>,
    /// Before or after applying the request.
    pub when: FaultTiming,
    /// Delay before answering.
    pub delay: Duration,
}

/// One mutating request as the client sent it (`GET /sim/v1/journal`): lets conformance tests
/// compare what a client (e.g. real `spark-submit`) sent with what our code sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournalEntry {
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// `Content-Type` header.
    pub content_type: String,
    /// The body, decoded as JSON when it is JSON (or YAML), else as a string.
    pub body: serde_json::Value,
}

fn decode_body(body: &[u8]) -> serde_json::Value {
    if body.is_empty() {
        return serde_json::Value::Null;
    }
    serde_json::from_slice(body)
        .or_else(|_| yaml_serde::from_slice(body))
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(body).into_owned()))
}

/// How many mutating requests the journal keeps (oldest dropped first).
const JOURNAL_CAPACITY: usize = 2_000;

/// Counter key: (verb, group, resource, namespace, watch).
type CountKey = (String, String, String, String, bool);

/// Counters and fault rules, shared by every request handler.
#[derive(Debug, Default)]
pub struct Control {
    // Raw bodies: decoding every mutating request on the hot path cost more than serving it;
    // they are decoded only when someone reads the journal.
    journal: Mutex<std::collections::VecDeque<(JournalEntry, bytes::Bytes)>>,
    counts: Mutex<BTreeMap<CountKey, u64>>,
    faults: Mutex<Vec<FaultRule>>,
    latency: Mutex<Vec<LatencyRule>>,
    /// Requests from a partitioned node's processes waiting for the heal, by node.
    held: Mutex<BTreeMap<String, u64>>,
    /// Authorization decisions by identity, keyed by the NUL-joined (user, verb, group,
    /// resource, namespace, allowed).
    authz: Mutex<std::collections::HashMap<String, u64>>,
    /// Resource requests being served now (watches excluded), and the most there were at once
    /// since the last reset: how many connections a client keeps busy.
    in_flight: std::sync::atomic::AtomicUsize,
    peak_in_flight: std::sync::atomic::AtomicUsize,
    /// Wakes [`Control::counted`] after each counted request.
    counted: tokio::sync::Notify,
}

/// Counts a request as in flight while it lives (see [`Control::serving`]).
pub struct Serving<'a> {
    control: &'a Control,
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        self.control
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Counts a request as held for its node while it lives (dropped when it is served or the
/// client goes away).
pub struct Held<'a> {
    control: &'a Control,
    node: String,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut held = lock(&self.control.held);
        if let Some(n) = held.get_mut(&self.node) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.node);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Counters and rule lists stay valid whatever a panicking holder did.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Control {
    /// Marks a (non-watch) resource request as being served until the guard drops.
    pub fn serving(&self) -> Serving<'_> {
        use std::sync::atomic::Ordering;
        let now = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        self.peak_in_flight.fetch_max(now, Ordering::AcqRel);
        Serving { control: self }
    }

    /// The most resource requests (watches excluded) served at once since the last
    /// [`Control::reset_counts`].
    pub fn peak_in_flight(&self) -> usize {
        self.peak_in_flight
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Counts a request and returns the fault that fires for it, if any.
    pub fn observe(&self, r: &RequestInfo) -> (Option<Fired>, Duration) {
        *lock(&self.counts)
            .entry((
                r.verb.to_string(),
                r.group.clone(),
                r.resource.clone(),
                r.namespace.clone(),
                r.watch,
            ))
            .or_default() += 1;
        self.counted.notify_waiters();
        let fired = {
            let mut faults = lock(&self.faults);
            let hit = faults.iter_mut().find(|f| f.count > 0 && f.matches(r));
            let fired = hit.map(|f| {
                f.count -= 1;
                Fired {
                    code: f.code,
                    message: f.message.clone(),
                    when: f.when,
                    delay: Duration::from_millis(f.delay_ms),
                }
            });
            faults.retain(|f| f.count > 0);
            fired
        };
        let delay = lock(&self.latency)
            .iter()
            .filter(|l| {
                l.verb.as_deref().is_none_or(|v| v == r.verb)
                    && l.resource.as_deref().is_none_or(|x| x == r.resource)
            })
            .map(|l| Duration::from_millis(l.millis))
            .sum();
        (fired, delay)
    }

    /// The counters, one row per (verb, group, resource, namespace, watch).
    pub fn counts(&self) -> Vec<RequestCount> {
        lock(&self.counts)
            .iter()
            .map(
                |((verb, group, resource, namespace, watch), count)| RequestCount {
                    verb: verb.clone(),
                    group: group.clone(),
                    resource: resource.clone(),
                    namespace: namespace.clone(),
                    watch: *watch,
                    count: *count,
                },
            )
            .collect()
    }

    /// Waits until `until` holds of the counters, checking again after each request counted:
    /// tests wait on the requests themselves, not on a clock.
    pub async fn counted(&self, until: impl Fn(&[RequestCount]) -> bool) {
        loop {
            let next = self.counted.notified();
            tokio::pin!(next);
            // Registered before the check, so a request counted in between still wakes us.
            next.as_mut().enable();
            if until(&self.counts()) {
                return;
            }
            next.await;
        }
    }

    /// Records a mutating request.
    pub fn record(&self, entry: JournalEntry, body: bytes::Bytes) {
        let mut j = lock(&self.journal);
        if j.len() == JOURNAL_CAPACITY {
            j.pop_front();
        }
        j.push_back((entry, body));
    }

    /// The recorded mutating requests, oldest first, bodies decoded as JSON (or YAML) where
    /// they are, else kept as text.
    pub fn journal(&self) -> Vec<JournalEntry> {
        let raw: Vec<(JournalEntry, bytes::Bytes)> = lock(&self.journal).iter().cloned().collect();
        raw.into_iter()
            .map(|(mut entry, body)| {
                entry.body = decode_body(&body);
                entry
            })
            .collect()
    }

    /// Forgets the recorded requests.
    pub fn clear_journal(&self) {
        lock(&self.journal).clear();
    }

    /// Resets the counters.
    pub fn reset_counts(&self) {
        self.peak_in_flight.store(
            self.in_flight.load(std::sync::atomic::Ordering::Acquire),
            std::sync::atomic::Ordering::Release,
        );
        lock(&self.counts).clear();
    }

    /// Adds a fault rule.
    pub fn add_fault(&self, rule: FaultRule) {
        lock(&self.faults).push(rule);
    }

    /// Fault rules not yet spent.
    pub fn faults(&self) -> Vec<FaultRule> {
        lock(&self.faults).clone()
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        lock(&self.faults).clear();
    }

    /// Adds a latency rule.
    pub fn add_latency(&self, rule: LatencyRule) {
        lock(&self.latency).push(rule);
    }

    /// Removes every latency rule.
    pub fn clear_latency(&self) {
        lock(&self.latency).clear();
    }

    /// Records an authorization decision.
    pub fn record_authz(
        &self,
        user: &str,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: &str,
        allowed: bool,
    ) {
        // One joined key: a single allocation per request (names never contain NUL).
        let mut key = String::with_capacity(
            user.len() + verb.len() + group.len() + resource.len() + namespace.len() + 6,
        );
        for part in [user, verb, group, resource, namespace] {
            key.push_str(part);
            key.push('\0');
        }
        key.push(if allowed { '1' } else { '0' });
        *lock(&self.authz).entry(key).or_default() += 1;
    }

    /// The authorization journal, one row per (user, verb, group, resource, namespace,
    /// allowed).
    pub fn authz(&self) -> Vec<AuthzCount> {
        let mut rows: Vec<AuthzCount> = lock(&self.authz)
            .iter()
            .filter_map(|(key, count)| {
                let mut parts = key.split('\0');
                Some(AuthzCount {
                    user: parts.next()?.to_string(),
                    verb: parts.next()?.to_string(),
                    group: parts.next()?.to_string(),
                    resource: parts.next()?.to_string(),
                    namespace: parts.next()?.to_string(),
                    allowed: parts.next()? == "1",
                    count: *count,
                })
            })
            .collect();
        rows.sort_by(|a, b| {
            (&a.user, &a.group, &a.resource, &a.verb, &a.namespace).cmp(&(
                &b.user,
                &b.group,
                &b.resource,
                &b.verb,
                &b.namespace,
            ))
        });
        rows
    }

    /// Forgets the authorization journal.
    pub fn reset_authz(&self) {
        lock(&self.authz).clear();
    }

    /// Marks a request from `node`'s processes as held by a partition until the guard drops.
    pub fn hold(&self, node: &str) -> Held<'_> {
        *lock(&self.held).entry(node.to_string()).or_default() += 1;
        Held {
            control: self,
            node: node.to_string(),
        }
    }

    /// How many requests from `node`'s processes wait for the node to heal now.
    pub fn held(&self, node: &str) -> u64 {
        lock(&self.held).get(node).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(verb: &'static str, resource: &str) -> RequestInfo {
        RequestInfo {
            verb,
            group: String::new(),
            resource: resource.into(),
            namespace: "ns".into(),
            name: "x".into(),
            watch: false,
        }
    }

    #[test]
    fn fault_fires_count_times_then_is_spent() {
        let c = Control::default();
        c.add_fault(
            serde_json::from_str(r#"{"verb":"create","resource":"pods","count":2,"code":503}"#)
                .unwrap(),
        );
        assert!(c.observe(&req("get", "pods")).0.is_none());
        assert_eq!(
            c.observe(&req("create", "pods")).0.map(|f| f.code),
            Some(503)
        );
        assert!(c.observe(&req("create", "pods")).0.is_some());
        assert!(c.observe(&req("create", "pods")).0.is_none());
        assert!(c.faults().is_empty());
    }

    #[test]
    fn requests_are_counted_by_verb_and_resource() {
        let c = Control::default();
        c.observe(&req("list", "pods"));
        c.observe(&req("list", "pods"));
        c.observe(&req("get", "configmaps"));
        let rows = c.counts();
        assert!(
            rows.iter()
                .any(|r| r.verb == "list" && r.resource == "pods" && r.count == 2)
        );
        c.reset_counts();
        assert!(c.counts().is_empty());
    }

    #[test]
    fn authorization_decisions_are_counted_per_identity() {
        let c = Control::default();
        c.record_authz("u", "list", "", "pods", "ns", true);
        c.record_authz("u", "list", "", "pods", "ns", true);
        c.record_authz("u", "list", "", "secrets", "ns", false);
        let rows = c.authz();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].resource.as_str(), rows[0].count, rows[0].allowed),
            ("pods", 2, true)
        );
        assert_eq!(
            (rows[1].resource.as_str(), rows[1].allowed),
            ("secrets", false)
        );
        c.reset_authz();
        assert!(c.authz().is_empty());
    }

    #[test]
    fn held_requests_are_counted_while_their_guard_lives() {
        let c = Control::default();
        let a = c.hold("n1");
        let b = c.hold("n1");
        assert_eq!((c.held("n1"), c.held("n2")), (2, 0));
        drop(a);
        assert_eq!(c.held("n1"), 1);
        drop(b);
        assert_eq!(c.held("n1"), 0);
    }
}
