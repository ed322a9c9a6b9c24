//! The table of resource types kubesim serves: built-in ones plus those registered by CRDs.

use std::sync::Arc;

use crate::meta::At;
use serde_json::{Value, json};

/// One served resource type (a row of the API's discovery document).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group, `""` for the core group.
    pub group: String,
    /// Served version (kubesim serves exactly one version per resource).
    pub version: String,
    /// Lower-case plural used in URLs (`pods`).
    pub plural: String,
    /// Lower-case singular (`pod`).
    pub singular: String,
    /// Kind of the objects (`Pod`).
    pub kind: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether `/status` is a subresource (spec writes keep status and vice versa).
    pub status_subresource: bool,
    /// Short names for discovery (`po`).
    pub short_names: Vec<String>,
    /// Whether this type came from a CustomResourceDefinition.
    pub custom: bool,
    /// Name rule for `metadata.name`.
    pub name_rule: NameRule,
}

/// Which DNS rule validates an object's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain: lower-case alphanumerics, `-` and `.`, at most 253 characters.
    Subdomain,
    /// RFC 1123 label: lower-case alphanumerics and `-`, at most 63 characters.
    Label,
    /// RFC 1035 label: an RFC 1123 label that starts with a letter (Services).
    Rfc1035Label,
    /// Any non-empty name without `/` or `%` (Events use arbitrary dotted names).
    Path,
}

/// A type served as a view of another type's objects: stored once, in the other type's form,
/// and converted on the way in and out (`events.k8s.io/v1` Events are core/v1 Events, as in the
/// API server).
#[derive(Debug)]
pub struct View {
    /// The stored type: group, version, plural.
    pub storage: (&'static str, &'static str, &'static str),
    /// A view object in its stored form.
    pub to_storage: fn(Value) -> Value,
    /// A stored object as the view serves it.
    pub from_storage: fn(Value) -> Value,
    /// What a create through the view must satisfy beyond the stored type's own rules (on the
    /// stored form).
    pub validate_create: fn(&Value) -> Vec<crate::api_error::Cause>,
}

/// `events.k8s.io/v1` Events, served from the core/v1 ones.
static EVENTS_V1: View = View {
    storage: ("", "v1", "events"),
    to_storage: crate::events::to_core,
    from_storage: crate::events::to_events_v1,
    validate_create: crate::events::validate_create_v1,
};

impl ResourceType {
    /// The view this type is, if its objects are another type's (see [`View`]).
    pub fn view(&self) -> Option<&'static View> {
        (self.group == "events.k8s.io" && self.plural == "events").then_some(&EVENTS_V1)
    }

    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `leases.coordination.k8s.io`, as Kubernetes names a resource in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The discovery entry (`APIResource`) for this type and its subresources.
    pub fn discovery_entries(&self) -> Vec<Value> {
        let verbs = if is_review(self) {
            json!(["create"])
        } else {
            json!([
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch"
            ])
        };
        let mut main = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": verbs,
            "shortNames": self.short_names,
        });
        if let Some(c) = categories(self) {
            main["categories"] = json!(c);
        }
        let mut out = vec![main];
        for (sub, group, version, kind, verbs) in extra_subresources(self) {
            out.push(json!({
                "name": format!("{}/{sub}", self.plural), "singularName": "",
                "namespaced": self.namespaced, "group": group, "version": version,
                "kind": kind, "verbs": verbs,
            }));
        }
        if self.status_subresource {
            out.push(json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if self.group.is_empty() && self.plural == "pods" {
            out.push(json!({
                "name": "pods/log", "singularName": "", "namespaced": true,
                "kind": "Pod", "verbs": ["get"],
            }));
        }
        out
    }
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    status: bool,
    short: &[&str],
    name_rule: NameRule,
) -> Arc<ResourceType> {
    Arc::new(ResourceType {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        singular: kind.to_ascii_lowercase(),
        kind: kind.into(),
        namespaced,
        status_subresource: status,
        short_names: short.iter().map(|s| (*s).to_string()).collect(),
        custom: false,
        name_rule,
    })
}

/// Whether a type is a review (TokenReview, SubjectAccessReview, ...): created to get an
/// answer, never stored, so `create` is its only verb.
pub fn is_review(rt: &ResourceType) -> bool {
    matches!(
        (rt.group.as_str(), rt.plural.as_str()),
        (
            "authentication.k8s.io",
            "tokenreviews" | "selfsubjectreviews"
        ) | (
            "authorization.k8s.io",
            "selfsubjectaccessreviews"
                | "subjectaccessreviews"
                | "localsubjectaccessreviews"
                | "selfsubjectrulesreviews"
        )
    )
}

/// Discovery categories (`kubectl get all`), as the API server lists them.
fn categories(rt: &ResourceType) -> Option<&'static [&'static str]> {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods" | "services") | ("apps", "deployments" | "replicasets") => Some(&["all"]),
        _ => None,
    }
}

/// Subresources served in another group's kind (`scale` as `autoscaling/v1` `Scale`, `token`
/// as `authentication.k8s.io/v1` `TokenRequest`): (name, group, version, kind, verbs).
type ForeignSubresource = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
);

fn extra_subresources(rt: &ResourceType) -> Vec<ForeignSubresource> {
    const SCALE: ForeignSubresource = (
        "scale",
        "autoscaling",
        "v1",
        "Scale",
        &["get", "patch", "update"],
    );
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments" | "replicasets") => vec![SCALE],
        ("", "serviceaccounts") => vec![(
            "token",
            "authentication.k8s.io",
            "v1",
            "TokenRequest",
            &["create"],
        )],
        _ => vec![],
    }
}

/// Types an API server serves beyond what our own programs started with: apps (Deployments,
/// ReplicaSets), RBAC, PodDisruptionBudgets and the authentication/authorization reviews
/// (what Helm and in-cluster clients need).
fn builtins_api_machinery() -> Vec<Arc<ResourceType>> {
    use NameRule::*;
    let rbac = "rbac.authorization.k8s.io";
    vec![
        builtin(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            true,
            true,
            &["deploy"],
            Subdomain,
        ),
        builtin(
            "apps",
            "v1",
            "replicasets",
            "ReplicaSet",
            true,
            true,
            &["rs"],
            Subdomain,
        ),
        builtin(rbac, "v1", "roles", "Role", true, false, &[], Path),
        builtin(
            rbac,
            "v1",
            "rolebindings",
            "RoleBinding",
            true,
            false,
            &[],
            Path,
        ),
        builtin(
            rbac,
            "v1",
            "clusterroles",
            "ClusterRole",
            false,
            false,
            &[],
            Path,
        ),
        builtin(
            rbac,
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
            false,
            &[],
            Path,
        ),
        builtin(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
            true,
            &["pdb"],
            Subdomain,
        ),
        builtin(
            "authentication.k8s.io",
            "v1",
            "tokenreviews",
            "TokenReview",
            false,
            false,
            &[],
            Path,
        ),
        builtin(
            "authentication.k8s.io",
            "v1",
            "selfsubjectreviews",
            "SelfSubjectReview",
            false,
            false,
            &[],
            Path,
        ),
        builtin(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            false,
            false,
            &[],
            Path,
        ),
        builtin(
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "SubjectAccessReview",
            false,
            false,
            &[],
            Path,
        ),
        builtin(
            "authorization.k8s.io",
            "v1",
            "localsubjectaccessreviews",
            "LocalSubjectAccessReview",
            true,
            false,
            &[],
            Path,
        ),
        builtin(
            "authorization.k8s.io",
            "v1",
            "selfsubjectrulesreviews",
            "SelfSubjectRulesReview",
            false,
            false,
            &[],
            Path,
        ),
    ]
}

/// The built-in types: what our programs and real clients (Spark, kube-rs, Python) use.
pub fn builtins() -> Vec<Arc<ResourceType>> {
    use NameRule::*;
    vec![
        builtin("", "v1", "pods", "Pod", true, true, &["po"], Subdomain),
        builtin(
            "",
            "v1",
            "configmaps",
            "ConfigMap",
            true,
            false,
            &["cm"],
            Subdomain,
        ),
        builtin(
            "",
            "v1",
            "services",
            "Service",
            true,
            true,
            &["svc"],
            Rfc1035Label,
        ),
        builtin("", "v1", "secrets", "Secret", true, false, &[], Subdomain),
        builtin("", "v1", "events", "Event", true, false, &["ev"], Path),
        builtin(
            "",
            "v1",
            "namespaces",
            "Namespace",
            false,
            true,
            &["ns"],
            Label,
        ),
        builtin(
            "",
            "v1",
            "resourcequotas",
            "ResourceQuota",
            true,
            true,
            &["quota"],
            Subdomain,
        ),
        builtin(
            "",
            "v1",
            "limitranges",
            "LimitRange",
            true,
            false,
            &["limits"],
            Subdomain,
        ),
        builtin(
            "",
            "v1",
            "serviceaccounts",
            "ServiceAccount",
            true,
            false,
            &["sa"],
            Subdomain,
        ),
        builtin(
            "",
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            true,
            true,
            &["pvc"],
            Subdomain,
        ),
        builtin("", "v1", "nodes", "Node", false, true, &["no"], Subdomain),
        builtin(
            "",
            "v1",
            "endpoints",
            "Endpoints",
            true,
            false,
            &["ep"],
            Subdomain,
        ),
        builtin(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            "EndpointSlice",
            true,
            false,
            &[],
            Subdomain,
        ),
        builtin(
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            true,
            false,
            &[],
            Subdomain,
        ),
        builtin(
            "events.k8s.io",
            "v1",
            "events",
            "Event",
            true,
            false,
            &["ev"],
            Path,
        ),
        builtin(
            "networking.k8s.io",
            "v1",
            "ingresses",
            "Ingress",
            true,
            true,
            &["ing"],
            Subdomain,
        ),
        builtin(
            "networking.k8s.io",
            "v1",
            "networkpolicies",
            "NetworkPolicy",
            true,
            false,
            &["netpol"],
            Subdomain,
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            true,
            &["crd", "crds"],
            Subdomain,
        ),
    ]
}

/// Derives the served type from a CRD object; `None` when the CRD lacks what a type needs.
///
/// kubesim serves the CRD's storage version (or its first served version) only.
pub fn from_crd(crd: &Value) -> Option<Arc<ResourceType>> {
    let spec = crd.get("spec")?;
    let names = spec.get("names")?;
    let versions = spec.get("versions")?.as_array()?;
    let version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .or_else(|| versions.first())?;
    let plural = names.get("plural")?.as_str()?.to_string();
    let kind = names.get("kind")?.as_str()?.to_string();
    Some(Arc::new(ResourceType {
        group: spec.get("group")?.as_str()?.to_string(),
        version: version.get("name")?.as_str()?.to_string(),
        singular: names
            .get("singular")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_ascii_lowercase()),
        plural,
        kind,
        namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
        status_subresource: version
            .at("/subresources/status")
            .is_some_and(Value::is_object),
        short_names: names
            .get("shortNames")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        custom: true,
        name_rule: NameRule::Subdomain,
    }))
}

/// All types currently served, looked up by group and plural.
#[derive(Debug, Clone)]
pub struct Registry {
    types: Vec<Arc<ResourceType>>,
}

impl Default for Registry {
    fn default() -> Self {
        let mut types = builtins();
        types.extend(builtins_api_machinery());
        Self { types }
    }
}

impl Registry {
    /// Finds a type by API group, version and plural (or short name).
    pub fn find(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| {
                t.group == group
                    && t.version == version
                    && (t.plural == resource || t.short_names.iter().any(|s| s == resource))
            })
            .cloned()
    }

    /// Finds a type by group and kind, whatever its version (for ownerReferences and events).
    pub fn find_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.group == group && t.kind == kind)
            .cloned()
    }

    /// Every served type.
    pub fn all(&self) -> &[Arc<ResourceType>] {
        &self.types
    }

    /// Adds or replaces the type served for a CRD.
    pub fn register(&mut self, rt: Arc<ResourceType>) {
        self.types
            .retain(|t| !(t.custom && t.group == rt.group && t.plural == rt.plural));
        self.types.push(rt);
    }

    /// Stops serving a custom type.
    pub fn unregister(&mut self, group: &str, plural: &str) {
        self.types
            .retain(|t| !(t.custom && t.group == group && t.plural == plural));
    }

    /// Groups and their versions, core excluded, in registration order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.types.iter().filter(|t| !t.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, vs)) if !vs.contains(&t.version) => vs.push(t.version.clone()),
                Some(_) => {}
                None => out.push((t.group.clone(), vec![t.version.clone()])),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_with_status_subresource_becomes_a_namespaced_type() {
        let crd = json!({"spec": {"group": "sparkoperator.k8s.io", "scope": "Namespaced",
            "names": {"plural": "sparkapplications", "kind": "SparkApplication", "shortNames": ["sparkapp"]},
            "versions": [{"name": "v1beta2", "served": true, "storage": true,
                          "subresources": {"status": {}}}]}});
        let rt = from_crd(&crd).expect("valid crd");
        assert_eq!(rt.api_version(), "sparkoperator.k8s.io/v1beta2");
        assert!(rt.namespaced && rt.status_subresource && rt.custom);
        let mut reg = Registry::default();
        reg.register(rt);
        assert!(
            reg.find("sparkoperator.k8s.io", "v1beta2", "sparkapp")
                .is_some()
        );
    }

    #[test]
    fn core_types_are_found_by_short_name() {
        let reg = Registry::default();
        assert_eq!(
            reg.find("", "v1", "po").map(|t| t.kind.clone()),
            Some("Pod".into())
        );
        assert!(reg.find("", "v2", "pods").is_none());
    }
}
