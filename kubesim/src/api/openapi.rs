//! `/openapi/v3`: the OpenAPI 3 documents clients read before they validate manifests (kubectl,
//! Helm). The index names one document per group version; each document has the paths of its
//! resources (with `x-kubernetes-group-version-kind` and the `fieldValidation` parameter that
//! tells clients the server validates fields itself) and the schemas of its kinds, derived from
//! the same table as protobuf. Custom resources carry their CRD's `openAPIV3Schema`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::discovery::KUBE_VERSION;
use crate::meta::At;
use crate::protobuf::schema::{Scalar, Type, message_for, messages};
use crate::resources::{Registry, ResourceType, is_review};
use crate::store::Store;

/// The document path of a group version (`api/v1`, `apis/apps/v1`).
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn fnv(text: &str) -> String {
    let h = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{h:016X}")
}

/// `/openapi/v3`: the index of group-version documents.
pub fn index(reg: &Registry, store: &Store) -> Value {
    let gvs: BTreeSet<(String, String)> = reg
        .all()
        .iter()
        .map(|t| (t.group.clone(), t.version.clone()))
        .collect();
    let mut paths = Map::new();
    for (g, v) in gvs {
        let path = gv_path(&g, &v);
        let hash = document(reg, store, &g, &v)
            .map(|d| fnv(&d.to_string()))
            .unwrap_or_default();
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// The OpenAPI schema name of a message (`io.k8s.api.core.v1.Pod`).
fn schema_name(message: &str) -> String {
    let (pkg, rest) = message.split_once('.').unwrap_or(("", message));
    let prefix = match pkg {
        "meta" => "io.k8s.apimachinery.pkg.apis.meta",
        "runtime" => "io.k8s.apimachinery.pkg.runtime",
        "intstr" => "io.k8s.apimachinery.pkg.util.intstr",
        "resource" => "io.k8s.apimachinery.pkg.api.resource",
        "apiextensions" => "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
        other => return format!("io.k8s.api.{other}.{rest}"),
    };
    format!("{prefix}.{rest}")
}

/// The schema of a hand-converted type, as the API server publishes it.
fn special_schema(message: &str) -> Option<Value> {
    Some(match message {
        "meta.v1.Time" => json!({"type": "string", "format": "date-time"}),
        "meta.v1.MicroTime" => json!({"type": "string", "format": "date-time"}),
        "meta.v1.Duration" => json!({"type": "string"}),
        "intstr.IntOrString" => {
            json!({"type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": true})
        }
        "resource.Quantity" => json!({"type": "string", "x-kubernetes-int-or-string": true}),
        "runtime.RawExtension" | "meta.v1.FieldsV1" | "apiextensions.v1.JSON" => {
            json!({"type": "object"})
        }
        "apiextensions.v1.JSONSchemaPropsOrArray"
        | "apiextensions.v1.JSONSchemaPropsOrBool"
        | "apiextensions.v1.JSONSchemaPropsOrStringArray" => json!({}),
        _ => return None,
    })
}

fn type_schema(ty: &Type, wanted: &mut Vec<String>) -> Value {
    match ty {
        Type::Scalar(s) => match s {
            Scalar::String => json!({"type": "string"}),
            Scalar::Bytes => json!({"type": "string", "format": "byte"}),
            Scalar::Bool => json!({"type": "boolean"}),
            Scalar::Int32 | Scalar::Uint32 => json!({"type": "integer", "format": "int32"}),
            Scalar::Int64 | Scalar::Uint64 => json!({"type": "integer", "format": "int64"}),
            Scalar::Double | Scalar::Float => json!({"type": "number", "format": "double"}),
        },
        Type::Message(m) => {
            wanted.push(m.clone());
            json!({"allOf": [{"$ref": format!("#/components/schemas/{}", schema_name(m))}]})
        }
        Type::Repeated(inner) | Type::Wrapped(inner) => {
            json!({"type": "array", "items": type_schema(inner, wanted)})
        }
        Type::Map(_, v) => {
            json!({"type": "object", "additionalProperties": type_schema(v, wanted)})
        }
    }
}

fn message_schema(message: &str, wanted: &mut Vec<String>) -> Value {
    if let Some(s) = special_schema(message) {
        return s;
    }
    let mut properties = Map::new();
    fn collect(message: &str, properties: &mut Map<String, Value>, wanted: &mut Vec<String>) {
        let Some(msg) = messages().get(message) else {
            return;
        };
        for f in &msg.fields {
            match (&f.json, &f.ty) {
                (Some(j), ty) => {
                    properties.insert(j.clone(), type_schema(ty, wanted));
                }
                (None, Type::Message(inner)) => collect(inner, properties, wanted),
                (None, _) => {}
            }
        }
    }
    collect(message, &mut properties, wanted);
    json!({"type": "object", "properties": properties})
}

fn param(name: &str, location: &str, ty: &str) -> Value {
    let mut p = json!({"name": name, "in": location, "schema": {"type": ty, "uniqueItems": true}});
    if location == "path" {
        p["required"] = json!(true);
    }
    p
}

fn operation(action: &str, rt: &ResourceType, schema: &str, write: bool) -> Value {
    let mut params = vec![param("pretty", "query", "string")];
    if write {
        for p in ["dryRun", "fieldManager", "fieldValidation"] {
            params.push(param(p, "query", "string"));
        }
    }
    if action == "patch" {
        params.push(param("force", "query", "boolean"));
    }
    let content = |s: &str| json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{s}")}}});
    let mut op = json!({
        "operationId": format!("{action}{}", rt.kind),
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": content(schema)},
                      "401": {"description": "Unauthorized"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
    });
    if matches!(action, "post" | "put") {
        op["requestBody"] = json!({"content": content(schema), "required": true});
    }
    if action == "patch" {
        let patch = json!({"schema": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}});
        op["requestBody"] = json!({"content": {
            "application/apply-patch+yaml": patch, "application/json-patch+json": patch,
            "application/merge-patch+json": patch, "application/strategic-merge-patch+json": patch},
            "required": true});
    }
    op
}

/// The CRD's schema for a custom resource (what its `openAPIV3Schema` says).
fn custom_schema(store: &Store, rt: &ResourceType) -> Value {
    let crd = store.get_raw(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "",
        &format!("{}.{}", rt.plural, rt.group),
    );
    let schema = crd
        .as_ref()
        .and_then(|c| c.at("/spec/versions"))
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("name").and_then(Value::as_str) == Some(&rt.version))
        })
        .and_then(|v| v.at("/schema/openAPIV3Schema"))
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let mut s = schema;
    s["x-kubernetes-group-version-kind"] =
        json!([{"group": rt.group, "version": rt.version, "kind": rt.kind}]);
    s
}

/// The schema name of a custom kind (reverse domain, as the API server names them).
fn custom_name(rt: &ResourceType) -> String {
    let reversed: Vec<&str> = rt.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), rt.version, rt.kind)
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
pub fn document(reg: &Registry, store: &Store, group: &str, version: &str) -> Option<Value> {
    let types: Vec<&std::sync::Arc<ResourceType>> = reg
        .all()
        .iter()
        .filter(|t| t.group == group && t.version == version)
        .collect();
    if types.is_empty() {
        return None;
    }
    let mut paths = BTreeMap::new();
    let mut schemas = BTreeMap::new();
    let mut wanted: Vec<String> = Vec::new();
    for rt in types {
        let prefix = format!("/{}", gv_path(group, version));
        let collection = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{prefix}/{}", rt.plural)
        };
        let item = format!("{collection}/{{name}}");
        let schema = if rt.custom {
            let name = custom_name(rt);
            schemas.insert(name.clone(), custom_schema(store, rt));
            name
        } else {
            let Some((message, _)) = message_for(&rt.api_version(), &rt.kind) else {
                continue;
            };
            wanted.push(message.to_string());
            schema_name(message)
        };
        let mut path_params = Vec::new();
        if rt.namespaced {
            path_params.push(param("namespace", "path", "string"));
        }
        if is_review(rt) {
            paths.insert(
                collection,
                json!({"parameters": path_params, "post": operation("post", rt, &schema, true)}),
            );
            continue;
        }
        paths.insert(
            collection.clone(),
            json!({"parameters": path_params.clone(),
                   "get": operation("list", rt, &schema, false),
                   "post": operation("post", rt, &schema, true),
                   "delete": operation("deletecollection", rt, &schema, false)}),
        );
        let mut item_params = path_params.clone();
        item_params.push(param("name", "path", "string"));
        paths.insert(
            item.clone(),
            json!({"parameters": item_params.clone(),
                   "get": operation("get", rt, &schema, false),
                   "put": operation("put", rt, &schema, true),
                   "patch": operation("patch", rt, &schema, true),
                   "delete": operation("delete", rt, &schema, false)}),
        );
        if rt.status_subresource {
            paths.insert(
                format!("{item}/status"),
                json!({"parameters": item_params,
                       "get": operation("get", rt, &schema, false),
                       "put": operation("put", rt, &schema, true),
                       "patch": operation("patch", rt, &schema, true)}),
            );
        }
    }
    wanted.push("meta.v1.Patch".into());
    wanted.push("meta.v1.Status".into());
    while let Some(m) = wanted.pop() {
        let name = schema_name(&m);
        if schemas.contains_key(&name) {
            continue;
        }
        let mut s = message_schema(&m, &mut wanted);
        if let Some((g, rest)) = m.split_once('.')
            && let Some((v, kind)) = rest.split_once('.')
            && reg.all().iter().any(|t| {
                t.kind == kind
                    && t.version == v
                    && crate::protobuf::schema::package_of(&t.group) == Some(g)
            })
        {
            let group = reg
                .all()
                .iter()
                .find(|t| {
                    t.kind == kind && crate::protobuf::schema::package_of(&t.group) == Some(g)
                })
                .map(|t| t.group.clone())
                .unwrap_or_default();
            s["x-kubernetes-group-version-kind"] =
                json!([{"group": group, "version": v, "kind": kind}]);
        }
        schemas.insert(name, s);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v{}.{}.0", KUBE_VERSION.0, KUBE_VERSION.1)},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}
