//! RBAC authorization (`rbac.authorization.k8s.io/v1`), as Kubernetes' RBAC authorizer decides:
//! a request is allowed when a rule of a role bound to the user (by a ClusterRoleBinding, or by
//! a RoleBinding in the request's namespace) matches its verb, API group, resource and
//! subresource, and resource name (or its non-resource path). Members of `system:masters`
//! bypass it. Refusals carry the API server's own 403 text.
//!
//! The request attributes follow the API server's `RequestInfo` rules (which paths are resource
//! requests, how `list`/`watch`/`deletecollection` are told apart); the rule matching is pure and
//! tested with plain tables. The default cluster roles and bindings a cluster starts with, and
//! the aggregation of `admin`/`edit`/`view`, live here too.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::api_error::ApiError;
use crate::auth::UserInfo;
use crate::meta;
use crate::meta::At;
use crate::selector::LabelSelector;
use crate::store::{Store, WatchFrom, WriteOpts};

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// What a request asks to do, as the authorizer sees it (Kubernetes' `authorizer.Attributes`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestAttributes {
    /// `get`, `list`, `watch`, `create`, ... for resource requests; the lower-case HTTP
    /// method for others.
    pub verb: String,
    /// Whether the path names an API resource (else it is a non-resource path such as
    /// `/version` or a discovery document).
    pub resource_request: bool,
    /// The URL path.
    pub path: String,
    /// API group (`""` for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Namespace (`""` at the cluster scope).
    pub namespace: String,
    /// Resource plural as written in the URL.
    pub resource: String,
    /// Subresource (`status`, `log`, `token`, ...), if any.
    pub subresource: String,
    /// Object name, if any (also from a `metadata.name=` field selector of a list or watch).
    pub name: String,
}

impl RequestAttributes {
    /// `resource` or `resource/subresource`.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// The attributes of a request, by the API server's `RequestInfo` rules. `watch` is the
/// request's `watch` parameter; `field_name` the name a `metadata.name=` field selector pins.
pub fn request_attributes(
    method: &str,
    path: &str,
    watch: bool,
    field_name: Option<&str>,
) -> RequestAttributes {
    let mut a = RequestAttributes {
        verb: method.to_ascii_lowercase(),
        path: path.to_string(),
        ..RequestAttributes::default()
    };
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    if parts.len() < 3 {
        return a;
    }
    let mut rest: &[&str] = match parts[0] {
        "api" => &parts[1..],
        "apis" if parts.len() >= 4 => {
            a.api_group = parts[1].to_string();
            &parts[2..]
        }
        _ => return a,
    };
    a.resource_request = true;
    a.api_version = rest[0].to_string();
    rest = &rest[1..];
    a.verb = match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
    .to_string();
    if rest.first() == Some(&"namespaces")
        && let Some(ns) = rest.get(1)
    {
        a.namespace = (*ns).to_string();
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    if let Some(r) = rest.first() {
        a.resource = (*r).to_string();
    }
    if let Some(n) = rest.get(1) {
        a.name = (*n).to_string();
    }
    if let Some(s) = rest.get(2) {
        a.subresource = (*s).to_string();
    }
    if a.name.is_empty() && a.verb == "get" {
        a.verb = if watch { "watch" } else { "list" }.into();
        if let Some(n) = field_name {
            a.name = n.to_string();
        }
    }
    if a.name.is_empty() && a.verb == "delete" {
        a.verb = "deletecollection".into();
    }
    a
}

/// An authorization decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Why not, when bindings named roles that do not exist (`RBAC: ...`), else empty.
    pub reason: String,
}

fn strings<'a>(rule: &'a Value, field: &str) -> impl Iterator<Item = &'a str> {
    rule.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// Whether one `PolicyRule` allows the request.
pub fn rule_allows(rule: &Value, a: &RequestAttributes) -> bool {
    let verb_ok = strings(rule, "verbs").any(|v| v == "*" || v == a.verb);
    if !verb_ok {
        return false;
    }
    if !a.resource_request {
        return strings(rule, "nonResourceURLs").any(|u| {
            u == "*" || u == a.path || u.strip_suffix('*').is_some_and(|p| a.path.starts_with(p))
        });
    }
    if !strings(rule, "apiGroups").any(|g| g == "*" || g == a.api_group) {
        return false;
    }
    let combined = a.combined_resource();
    let resource_ok = strings(rule, "resources").any(|r| {
        r == "*"
            || r == combined
            || (!a.subresource.is_empty()
                && r.strip_prefix("*/").is_some_and(|s| s == a.subresource))
    });
    if !resource_ok {
        return false;
    }
    let mut names = strings(rule, "resourceNames").peekable();
    names.peek().is_none() || names.any(|n| n == a.name)
}

/// Whether a binding's subject is the user; `namespace` is the binding's (service accounts
/// without a namespace are taken from it).
pub fn subject_matches(subject: &Value, user: &UserInfo, namespace: &str) -> bool {
    let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
    match subject.get("kind").and_then(Value::as_str) {
        Some("User") => user.name == name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let ns = subject
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .unwrap_or(namespace);
            !ns.is_empty() && user.name == crate::auth::service_account_user(ns, name)
        }
        _ => false,
    }
}

/// The rules a binding's `roleRef` names; `Err` with the API server's not-found text when the
/// role does not exist.
fn role_rules(store: &Store, role_ref: &Value, namespace: &str) -> Result<Arc<Value>, String> {
    let name = role_ref.get("name").and_then(Value::as_str).unwrap_or("");
    match role_ref.get("kind").and_then(Value::as_str) {
        Some("ClusterRole") => store
            .get_shared(GROUP, "clusterroles", "", name)
            .ok_or_else(|| format!("clusterrole.{GROUP} \"{name}\" not found")),
        Some("Role") => store
            .get_shared(GROUP, "roles", namespace, name)
            .ok_or_else(|| format!("role.{GROUP} \"{name}\" not found")),
        other => Err(format!(
            "unsupported role reference kind: {:?}",
            other.unwrap_or("")
        )),
    }
}

/// Decides a request by the RBAC objects in the store.
pub fn authorize(store: &Store, user: &UserInfo, a: &RequestAttributes) -> Decision {
    if user.is_privileged() {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let mut errors: Vec<String> = Vec::new();
    let mut check = |binding: &Value, ns: &str| -> bool {
        let applies = binding
            .get("subjects")
            .and_then(Value::as_array)
            .is_some_and(|subs| subs.iter().any(|s| subject_matches(s, user, ns)));
        if !applies {
            return false;
        }
        let Some(role_ref) = binding.get("roleRef") else {
            return false;
        };
        match role_rules(store, role_ref, ns) {
            Ok(role) => role
                .get("rules")
                .and_then(Value::as_array)
                .is_some_and(|rules| rules.iter().any(|r| rule_allows(r, a))),
            Err(e) => {
                errors.push(e);
                false
            }
        }
    };
    let cluster = store.objects(GROUP, "clusterrolebindings", None);
    let mut allowed = cluster.iter().any(|b| check(b, ""));
    if !allowed && !a.namespace.is_empty() {
        let local = store.objects(GROUP, "rolebindings", Some(&a.namespace));
        allowed = local.iter().any(|b| check(b, &a.namespace));
    }
    let reason = match errors.len() {
        _ if allowed => String::new(),
        0 => String::new(),
        1 => format!("RBAC: {}", errors[0]),
        _ => format!("RBAC: [{}]", errors.join(", ")),
    };
    Decision { allowed, reason }
}

/// Every rule bound to `user` in `namespace` (by ClusterRoleBindings, and by RoleBindings in
/// the namespace when it is not empty), and the errors of bindings whose roles are missing
/// (what a SelfSubjectRulesReview reports).
pub fn rules_for(store: &Store, user: &UserInfo, namespace: &str) -> (Vec<Value>, Vec<String>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    let mut collect = |binding: &Value, ns: &str| {
        let applies = binding
            .get("subjects")
            .and_then(Value::as_array)
            .is_some_and(|subs| subs.iter().any(|s| subject_matches(s, user, ns)));
        let Some(role_ref) = binding.get("roleRef").filter(|_| applies) else {
            return;
        };
        match role_rules(store, role_ref, ns) {
            Ok(role) => rules.extend(
                role.get("rules")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .cloned(),
            ),
            Err(e) => errors.push(e),
        }
    };
    for b in store.objects(GROUP, "clusterrolebindings", None) {
        collect(&b, "");
    }
    if !namespace.is_empty() {
        for b in store.objects(GROUP, "rolebindings", Some(namespace)) {
            collect(&b, namespace);
        }
    }
    (rules, errors)
}

/// The 403 the API server answers a refused request with.
pub fn forbidden(user: &UserInfo, a: &RequestAttributes, reason: &str) -> ApiError {
    let mut msg = if !a.resource_request {
        format!("User {:?} cannot {} path {:?}", user.name, a.verb, a.path)
    } else if !a.namespace.is_empty() {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
            user.name,
            a.verb,
            a.combined_resource(),
            a.api_group,
            a.namespace
        )
    } else {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
            user.name,
            a.verb,
            a.combined_resource(),
            a.api_group
        )
    };
    if !reason.is_empty() {
        msg = format!("{msg}: {reason}");
    }
    let qualified = match (a.resource.as_str(), a.api_group.as_str()) {
        ("", _) => String::new(),
        (r, "") => r.to_string(),
        (r, g) => format!("{r}.{g}"),
    };
    let message = if qualified.is_empty() {
        format!("forbidden: {msg}")
    } else if a.name.is_empty() {
        format!("{qualified} is forbidden: {msg}")
    } else {
        format!("{qualified} {:?} is forbidden: {msg}", a.name)
    };
    ApiError::forbidden_details(message, &a.name, &a.api_group, &a.resource)
}

const READ: [&str; 3] = ["get", "list", "watch"];
const WRITE: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn read_write() -> Vec<&'static str> {
    READ.iter().chain(WRITE.iter()).copied().collect()
}

/// The cluster roles and bindings every cluster starts with (as the API server's bootstrap
/// policy creates them, for the resources kubesim serves): `cluster-admin`, the discovery and
/// public-info roles every user gets, and the aggregated `admin`/`edit`/`view`.
pub fn default_policy() -> Vec<(&'static str, Value)> {
    let bootstrap = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let autoupdate = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    let role = |name: &str, extra_labels: Value, rules: Vec<Value>, aggregate: Option<&str>| {
        let mut labels = bootstrap.clone();
        if let (Some(l), Some(e)) = (labels.as_object_mut(), extra_labels.as_object()) {
            l.extend(e.clone());
        }
        let mut r = json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels, "annotations": autoupdate},
            "rules": rules,
        });
        if let Some(a) = aggregate {
            r["aggregationRule"] = json!({"clusterRoleSelectors": [
                {"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{a}"): "true"}}]});
        }
        r
    };
    let binding = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"kind": "Group", "apiGroup": GROUP, "name": g}))
            .collect();
        json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": bootstrap, "annotations": autoupdate},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
            "subjects": subjects,
        })
    };
    let rw = read_write();
    let to = |a: &str| json!({format!("rbac.authorization.k8s.io/aggregate-to-{a}"): "true"});
    vec![
        (
            "clusterroles",
            role(
                "cluster-admin",
                json!({}),
                vec![
                    rule(&["*"], &["*"], &["*"]),
                    json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
                ],
                None,
            ),
        ),
        (
            "clusterroles",
            role(
                "system:discovery",
                json!({}),
                vec![json!({"verbs": ["get"], "nonResourceURLs": [
                    "/livez", "/readyz", "/healthz", "/version", "/version/",
                    "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*"]})],
                None,
            ),
        ),
        (
            "clusterroles",
            role(
                "system:public-info-viewer",
                json!({}),
                vec![json!({"verbs": ["get"], "nonResourceURLs": [
                    "/livez", "/readyz", "/healthz", "/version", "/version/"]})],
                None,
            ),
        ),
        (
            "clusterroles",
            role(
                "system:basic-user",
                json!({}),
                vec![
                    rule(
                        &["create"],
                        &["authorization.k8s.io"],
                        &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    ),
                    rule(
                        &["create"],
                        &["authentication.k8s.io"],
                        &["selfsubjectreviews"],
                    ),
                ],
                None,
            ),
        ),
        (
            "clusterroles",
            role("admin", json!({}), vec![], Some("admin")),
        ),
        (
            "clusterroles",
            role("edit", to("admin"), vec![], Some("edit")),
        ),
        (
            "clusterroles",
            role("view", to("edit"), vec![], Some("view")),
        ),
        (
            "clusterroles",
            role(
                "system:aggregate-to-admin",
                to("admin"),
                vec![
                    rule(
                        &["create"],
                        &["authorization.k8s.io"],
                        &["localsubjectaccessreviews"],
                    ),
                    rule(&rw, &[GROUP], &["roles", "rolebindings"]),
                ],
                None,
            ),
        ),
        (
            "clusterroles",
            role(
                "system:aggregate-to-edit",
                to("edit"),
                vec![
                    rule(&READ, &[""], &["secrets"]),
                    rule(&["impersonate"], &[""], &["serviceaccounts"]),
                    rule(&WRITE, &[""], &["pods"]),
                    rule(
                        &WRITE,
                        &[""],
                        &[
                            "serviceaccounts",
                            "services",
                            "endpoints",
                            "persistentvolumeclaims",
                            "configmaps",
                            "secrets",
                        ],
                    ),
                    rule(&["create"], &[""], &["serviceaccounts/token"]),
                    rule(
                        &WRITE,
                        &["apps"],
                        &[
                            "deployments",
                            "deployments/scale",
                            "replicasets",
                            "replicasets/scale",
                        ],
                    ),
                    rule(&WRITE, &["policy"], &["poddisruptionbudgets"]),
                    rule(&WRITE, &["networking.k8s.io"], &["networkpolicies"]),
                    rule(&WRITE, &["coordination.k8s.io"], &["leases"]),
                ],
                None,
            ),
        ),
        (
            "clusterroles",
            role(
                "system:aggregate-to-view",
                to("view"),
                vec![
                    rule(
                        &READ,
                        &[""],
                        &[
                            "pods",
                            "serviceaccounts",
                            "services",
                            "services/status",
                            "endpoints",
                            "persistentvolumeclaims",
                            "persistentvolumeclaims/status",
                            "configmaps",
                        ],
                    ),
                    rule(
                        &READ,
                        &[""],
                        &[
                            "limitranges",
                            "resourcequotas",
                            "events",
                            "pods/status",
                            "resourcequotas/status",
                            "namespaces/status",
                            "pods/log",
                        ],
                    ),
                    rule(&READ, &[""], &["namespaces"]),
                    rule(
                        &READ,
                        &["apps"],
                        &[
                            "deployments",
                            "deployments/status",
                            "deployments/scale",
                            "replicasets",
                            "replicasets/status",
                            "replicasets/scale",
                        ],
                    ),
                    rule(
                        &READ,
                        &["policy"],
                        &["poddisruptionbudgets", "poddisruptionbudgets/status"],
                    ),
                    rule(&READ, &["networking.k8s.io"], &["networkpolicies"]),
                    rule(&READ, &["discovery.k8s.io"], &["endpointslices"]),
                    rule(&READ, &["events.k8s.io"], &["events"]),
                ],
                None,
            ),
        ),
        (
            "clusterrolebindings",
            binding("cluster-admin", &["system:masters"]),
        ),
        (
            "clusterrolebindings",
            binding("system:discovery", &["system:authenticated"]),
        ),
        (
            "clusterrolebindings",
            binding("system:basic-user", &["system:authenticated"]),
        ),
        (
            "clusterrolebindings",
            binding(
                "system:public-info-viewer",
                &["system:authenticated", "system:unauthenticated"],
            ),
        ),
    ]
}

/// The rules an aggregated cluster role gets: those of every other cluster role its
/// `aggregationRule` selects, without duplicates, in name order.
pub fn aggregated_rules(role: &Value, all: &[Arc<Value>]) -> Option<Vec<Value>> {
    let selectors: Vec<LabelSelector> = role
        .at("/aggregationRule/clusterRoleSelectors")?
        .as_array()?
        .iter()
        .filter_map(LabelSelector::from_label_selector)
        .collect();
    let me = meta::name(role);
    let mut rules: Vec<Value> = Vec::new();
    for other in all {
        if meta::name(other) == me || !selectors.iter().any(|s| s.matches_object(other)) {
            continue;
        }
        for r in other
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !rules.contains(r) {
                rules.push(r.clone());
            }
        }
    }
    Some(rules)
}

/// Starts the cluster-role aggregation controller: whenever a cluster role changes, every
/// aggregated cluster role's rules are recomputed and written when they differ.
pub fn start_aggregator(store: Arc<Store>) {
    tokio::spawn(async move {
        let in_scope = |g: &str, p: &str, _: &str| g == GROUP && p == "clusterroles";
        let mut sub = match store.subscribe(&in_scope, WatchFrom::Now) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "role aggregator cannot subscribe");
                return;
            }
        };
        aggregate(&store);
        loop {
            match sub.live.recv().await {
                Ok(ev) if in_scope(&ev.group, &ev.plural, &ev.namespace) => aggregate(&store),
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => aggregate(&store),
                Err(RecvError::Closed) => return,
            }
        }
    });
}

fn aggregate(store: &Store) {
    let all = store.objects(GROUP, "clusterroles", None);
    let Some(rt) = store.registry().find(GROUP, "v1", "clusterroles") else {
        return;
    };
    for role in &all {
        let Some(rules) = aggregated_rules(role, &all) else {
            continue;
        };
        if role.get("rules").and_then(Value::as_array) == Some(&rules) {
            continue;
        }
        let name = meta::name(role).to_string();
        let written = store.modify(
            &rt,
            "",
            &name,
            crate::store::Part::Main,
            &WriteOpts::default(),
            |cur| {
                let mut next = cur.clone();
                next["rules"] = Value::Array(rules.clone());
                Ok(next)
            },
        );
        if let Err(e) = written {
            tracing::warn!(role = %name, error = %e, "could not aggregate cluster role");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa() -> UserInfo {
        UserInfo::service_account("ns", "sa", "u")
    }

    #[test]
    fn request_attributes_follow_the_api_servers_request_info() {
        let cases = [
            (
                "GET",
                "/api/v1/namespaces/ns/pods",
                false,
                None,
                "list",
                "ns",
                "pods",
                "",
                "",
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods",
                true,
                None,
                "watch",
                "ns",
                "pods",
                "",
                "",
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods",
                false,
                Some("p"),
                "list",
                "ns",
                "pods",
                "",
                "p",
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods/p/log",
                false,
                None,
                "get",
                "ns",
                "pods",
                "log",
                "p",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/ns/pods",
                false,
                None,
                "deletecollection",
                "ns",
                "pods",
                "",
                "",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/ns/pods/p",
                false,
                None,
                "delete",
                "ns",
                "pods",
                "",
                "p",
            ),
            (
                "POST",
                "/api/v1/namespaces/ns/serviceaccounts/sa/token",
                false,
                None,
                "create",
                "ns",
                "serviceaccounts",
                "token",
                "sa",
            ),
            (
                "GET",
                "/api/v1/namespaces/ns",
                false,
                None,
                "get",
                "ns",
                "namespaces",
                "",
                "ns",
            ),
            (
                "PUT",
                "/api/v1/namespaces/ns/finalize",
                false,
                None,
                "update",
                "ns",
                "namespaces",
                "finalize",
                "ns",
            ),
            (
                "GET",
                "/api/v1/namespaces",
                false,
                None,
                "list",
                "",
                "namespaces",
                "",
                "",
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/ns/deployments/d/scale",
                false,
                None,
                "patch",
                "ns",
                "deployments",
                "scale",
                "d",
            ),
            (
                "GET",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                false,
                None,
                "list",
                "",
                "clusterroles",
                "",
                "",
            ),
        ];
        for (method, path, watch, field, verb, ns, resource, sub, name) in cases {
            let a = request_attributes(method, path, watch, field);
            assert!(a.resource_request, "{path}");
            assert_eq!(
                (
                    a.verb.as_str(),
                    a.namespace.as_str(),
                    a.resource.as_str(),
                    a.subresource.as_str(),
                    a.name.as_str()
                ),
                (verb, ns, resource, sub, name),
                "{method} {path}"
            );
        }
        for path in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
            "/openapi/v2",
        ] {
            let a = request_attributes("GET", path, false, None);
            assert!(!a.resource_request, "{path}");
            assert_eq!(a.verb, "get");
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_and_names() {
        let list_pods = request_attributes("GET", "/api/v1/namespaces/ns/pods", false, None);
        let get_log = request_attributes("GET", "/api/v1/namespaces/ns/pods/p/log", false, None);
        let get_cm =
            request_attributes("GET", "/api/v1/namespaces/ns/configmaps/lock", false, None);
        let version = request_attributes("GET", "/version", false, None);
        let cases = [
            (rule(&["list"], &[""], &["pods"]), &list_pods, true),
            (rule(&["get"], &[""], &["pods"]), &list_pods, false),
            (rule(&["list"], &["apps"], &["pods"]), &list_pods, false),
            (rule(&["*"], &["*"], &["*"]), &get_log, true),
            (rule(&["get"], &[""], &["pods"]), &get_log, false),
            (rule(&["get"], &[""], &["pods/log"]), &get_log, true),
            (rule(&["get"], &[""], &["*/log"]), &get_log, true),
            (rule(&["get"], &[""], &["*/status"]), &get_log, false),
            (
                json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["lock"]}),
                &get_cm,
                true,
            ),
            (
                json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["other"]}),
                &get_cm,
                false,
            ),
            (
                json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]}),
                &list_pods,
                false,
            ),
            (
                json!({"verbs": ["get"], "nonResourceURLs": ["/version"]}),
                &version,
                true,
            ),
            (
                json!({"verbs": ["get"], "nonResourceURLs": ["/ver*"]}),
                &version,
                true,
            ),
            (
                json!({"verbs": ["get"], "nonResourceURLs": ["/api"]}),
                &version,
                false,
            ),
            (rule(&["get"], &["*"], &["*"]), &version, false),
        ];
        for (i, (r, a, want)) in cases.iter().enumerate() {
            assert_eq!(rule_allows(r, a), *want, "case {i}: {r} vs {a:?}");
        }
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let user = sa();
        let cases = [
            (
                json!({"kind": "User", "name": "system:serviceaccount:ns:sa"}),
                "",
                true,
            ),
            (
                json!({"kind": "Group", "name": "system:serviceaccounts:ns"}),
                "",
                true,
            ),
            (
                json!({"kind": "Group", "name": "system:serviceaccounts:other"}),
                "",
                false,
            ),
            (
                json!({"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}),
                "",
                true,
            ),
            (json!({"kind": "ServiceAccount", "name": "sa"}), "ns", true),
            (json!({"kind": "ServiceAccount", "name": "sa"}), "", false),
            (
                json!({"kind": "ServiceAccount", "name": "sa", "namespace": "other"}),
                "ns",
                false,
            ),
        ];
        for (s, ns, want) in cases {
            assert_eq!(subject_matches(&s, &user, ns), want, "{s} in {ns:?}");
        }
    }

    #[test]
    fn forbidden_text_is_the_api_servers() {
        let a = request_attributes("GET", "/api/v1/namespaces/ns/secrets", false, None);
        let e = forbidden(&sa(), &a, "");
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            r#"secrets is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "secrets" in API group "" in the namespace "ns""#
        );
        let a = request_attributes(
            "GET",
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            false,
            None,
        );
        assert_eq!(
            forbidden(
                &sa(),
                &a,
                "RBAC: role.rbac.authorization.k8s.io \"r\" not found"
            )
            .message,
            r#"deployments.apps "d" is forbidden: User "system:serviceaccount:ns:sa" cannot get resource "deployments/scale" in API group "apps" in the namespace "ns": RBAC: role.rbac.authorization.k8s.io "r" not found"#
        );
        let a = request_attributes("GET", "/api/v1/nodes", false, None);
        assert_eq!(
            forbidden(&sa(), &a, "").message,
            r#"nodes is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "nodes" in API group "" at the cluster scope"#
        );
        let a = request_attributes("GET", "/apis", false, None);
        assert_eq!(
            forbidden(&UserInfo::anonymous(), &a, "").message,
            r#"forbidden: User "system:anonymous" cannot get path "/apis""#
        );
    }

    #[test]
    fn aggregation_collects_the_selected_roles_rules() {
        let policy: Vec<Arc<Value>> = default_policy()
            .into_iter()
            .filter(|(p, _)| *p == "clusterroles")
            .map(|(_, v)| Arc::new(v))
            .collect();
        let view = policy
            .iter()
            .find(|r| meta::name(r) == "view")
            .expect("view");
        let edit = policy
            .iter()
            .find(|r| meta::name(r) == "edit")
            .expect("edit");
        let view_rules = aggregated_rules(view, &policy).expect("aggregated");
        let secrets = request_attributes("GET", "/api/v1/namespaces/ns/secrets/s", false, None);
        let pods = request_attributes("GET", "/api/v1/namespaces/ns/pods", false, None);
        assert!(view_rules.iter().any(|r| rule_allows(r, &pods)));
        assert!(
            !view_rules.iter().any(|r| rule_allows(r, &secrets)),
            "view cannot read secrets"
        );
        assert!(
            aggregated_rules(edit, &policy)
                .expect("aggregated")
                .iter()
                .any(|r| rule_allows(r, &secrets))
        );
    }
}
