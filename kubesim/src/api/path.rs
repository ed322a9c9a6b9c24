//! Parsing request paths into the API route they name.

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`.
    Resources { group: String, version: String },
    /// A collection, object or subresource.
    Object(ObjectPath),
    /// `/healthz`, `/readyz`, `/livez`.
    Health,
    /// `/openapi/v3`: the index of OpenAPI documents.
    OpenApiIndex,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
    OpenApi { group: String, version: String },
}

/// A resource path: `/api/v1/namespaces/ns/pods/name/status` and friends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectPath {
    /// API group (`""` for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource as written in the URL (plural or short name).
    pub resource: String,
    /// Namespace from the URL, if any.
    pub namespace: Option<String>,
    /// Object name, if any.
    pub name: Option<String>,
    /// Subresource (`status`, `log`, `finalize`), if any.
    pub subresource: Option<String>,
}

/// Parses a path; `None` when it names nothing kubesim serves.
pub fn parse(path: &str) -> Option<Route> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segs.as_slice() {
        ["version"] => Some(Route::Version),
        ["openapi", "v3"] => Some(Route::OpenApiIndex),
        ["openapi", "v3", "api", v] => Some(Route::OpenApi {
            group: String::new(),
            version: (*v).to_string(),
        }),
        ["openapi", "v3", "apis", g, v] => Some(Route::OpenApi {
            group: (*g).to_string(),
            version: (*v).to_string(),
        }),
        ["healthz" | "readyz" | "livez", ..] => Some(Route::Health),
        ["api"] => Some(Route::CoreVersions),
        ["apis"] => Some(Route::Groups),
        ["apis", g] => Some(Route::Group((*g).to_string())),
        ["api", v, rest @ ..] => parse_rest("", v, rest),
        ["apis", g, v, rest @ ..] => parse_rest(g, v, rest),
        _ => None,
    }
}

fn parse_rest(group: &str, version: &str, rest: &[&str]) -> Option<Route> {
    let base = ObjectPath {
        group: group.to_string(),
        version: version.to_string(),
        ..ObjectPath::default()
    };
    let owned = |s: &&str| (*s).to_string();
    let path = match rest {
        [] => {
            return Some(Route::Resources {
                group: group.into(),
                version: version.into(),
            });
        }
        // The namespace object itself and its subresources.
        ["namespaces", ns, sub @ ("status" | "finalize")] if group.is_empty() => ObjectPath {
            resource: "namespaces".into(),
            name: Some(owned(ns)),
            subresource: Some(owned(sub)),
            ..base
        },
        ["namespaces", ns, resource, tail @ ..] => {
            if tail.len() > 2 {
                return None;
            }
            ObjectPath {
                resource: owned(resource),
                namespace: Some(owned(ns)),
                name: tail.first().map(owned),
                subresource: tail.get(1).map(owned),
                ..base
            }
        }
        [resource, tail @ ..] => {
            if tail.len() > 2 {
                return None;
            }
            ObjectPath {
                resource: owned(resource),
                name: tail.first().map(owned),
                subresource: tail.get(1).map(owned),
                ..base
            }
        }
    };
    Some(Route::Object(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(path: &str) -> ObjectPath {
        match parse(path) {
            Some(Route::Object(o)) => o,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_object_with_subresource() {
        let o = obj("/api/v1/namespaces/ns/pods/p/status");
        assert_eq!(o.namespace.as_deref(), Some("ns"));
        assert_eq!(o.resource, "pods");
        assert_eq!(o.name.as_deref(), Some("p"));
        assert_eq!(o.subresource.as_deref(), Some("status"));
    }

    #[test]
    fn namespace_object_and_its_finalize() {
        let o = obj("/api/v1/namespaces/ns");
        assert_eq!(
            (o.resource.as_str(), o.name.as_deref(), o.namespace),
            ("namespaces", Some("ns"), None)
        );
        let f = obj("/api/v1/namespaces/ns/finalize");
        assert_eq!(f.subresource.as_deref(), Some("finalize"));
    }

    #[test]
    fn group_paths_and_discovery() {
        let o = obj("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases");
        assert_eq!(o.group, "coordination.k8s.io");
        assert_eq!(o.name, None);
        assert_eq!(
            parse("/apis/g/v1"),
            Some(Route::Resources {
                group: "g".into(),
                version: "v1".into()
            })
        );
        assert_eq!(parse("/apis/g"), Some(Route::Group("g".into())));
        assert_eq!(parse("/nope"), None);
        assert_eq!(parse("/api/v1/namespaces/a/pods/b/c/d"), None);
    }

    #[test]
    fn cluster_wide_collection() {
        let o = obj("/api/v1/pods");
        assert_eq!((o.namespace, o.name), (None, None));
    }
}
