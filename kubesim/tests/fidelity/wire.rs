//! What goes over the wire as client-go sends it: Kubernetes protobuf bodies and answers
//! (objects, lists, errors, watch frames), JSON for custom resources, the OpenAPI v3 documents,
//! and server-side field validation.

use kubesim::protobuf::{self, MEDIA_TYPE};
use serde_json::{Value, json};

use super::support::{RawResponse, start};

const PB_ACCEPT: &str = "application/vnd.kubernetes.protobuf, */*";

fn pb(v: Value) -> Vec<u8> {
    protobuf::encode(&v).expect("encodes")
}

fn decoded(r: &RawResponse) -> Value {
    assert_eq!(
        r.header("content-type"),
        vec![MEDIA_TYPE],
        "answered as protobuf"
    );
    protobuf::decode(&r.body).expect("a protobuf answer")
}

#[tokio::test]
async fn protobuf_bodies_and_answers_round_trip_through_the_api() {
    let sim = start().await;
    let path = "/api/v1/namespaces/default/secrets";
    let headers = [("Content-Type", MEDIA_TYPE), ("Accept", PB_ACCEPT)];
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "release", "labels": {"owner": "helm"}},
        "type": "helm.sh/release.v1", "data": {"release": "aGVsbG8="}});
    let created = sim.request("POST", path, &headers, &pb(secret)).await;
    assert_eq!(created.code, 201);
    let obj = decoded(&created);
    assert_eq!(obj["kind"], "Secret");
    assert_eq!(obj["data"]["release"], "aGVsbG8=");
    assert!(
        obj["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );

    // The same object as JSON, for a JSON client.
    let (code, json_view) = sim.raw("GET", &format!("{path}/release"), None, "").await;
    assert_eq!(code, 200);
    assert_eq!(json_view["type"], "helm.sh/release.v1");

    let list = sim
        .request(
            "GET",
            &format!("{path}?labelSelector=owner%3Dhelm"),
            &[("Accept", PB_ACCEPT)],
            b"",
        )
        .await;
    let list = decoded(&list);
    assert_eq!(list["kind"], "SecretList");
    assert_eq!(list["items"][0]["metadata"]["name"], "release");

    // Errors are Status objects in protobuf too.
    let missing = sim
        .request(
            "GET",
            &format!("{path}/nope"),
            &[("Accept", PB_ACCEPT)],
            b"",
        )
        .await;
    assert_eq!(missing.code, 404);
    let status = decoded(&missing);
    assert_eq!(
        (status["kind"].as_str(), status["reason"].as_str()),
        (Some("Status"), Some("NotFound"))
    );
    assert_eq!(status["message"], "secrets \"nope\" not found");

    // A PUT in protobuf, with a stale resourceVersion: the conflict comes back in protobuf.
    let stale = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "release", "resourceVersion": "1"}, "type": "helm.sh/release.v1"});
    let conflict = sim
        .request("PUT", &format!("{path}/release"), &headers, &pb(stale))
        .await;
    assert_eq!(conflict.code, 409);
    assert_eq!(decoded(&conflict)["reason"], "Conflict");

    // DeleteOptions in protobuf (what client-go sends with a protobuf content type).
    let opts =
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"});
    let deleted = sim
        .request("DELETE", &format!("{path}/release"), &headers, &pb(opts))
        .await;
    assert_eq!(deleted.code, 200);
    assert_eq!(decoded(&deleted)["status"], "Success");

    // Garbage is a 400, not a crash.
    let garbage = sim.request("POST", path, &headers, b"k8s\0\xff\xff").await;
    assert_eq!(garbage.code, 400);
}

#[tokio::test]
async fn protobuf_watches_stream_length_prefixed_watch_events() {
    let sim = start().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let (_, list) = sim.raw("GET", path, None, "").await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    for name in ["a", "b"] {
        let (code, _) = sim
            .raw(
                "POST",
                path,
                Some("application/json"),
                &format!(r#"{{"metadata":{{"name":"{name}"}}}}"#),
            )
            .await;
        assert_eq!(code, 201);
    }
    let watch = sim
        .request(
            "GET",
            &format!("{path}?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
            &[("Accept", PB_ACCEPT)],
            b"",
        )
        .await;
    assert_eq!(
        watch.header("content-type"),
        vec!["application/vnd.kubernetes.protobuf;stream=watch"]
    );
    let mut events = Vec::new();
    let mut rest = watch.body.as_slice();
    while rest.len() >= 4 {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        let event = &rest[4..4 + len];
        rest = &rest[4 + len..];
        let fields = protobuf::wire::fields(event).unwrap();
        let protobuf::wire::Raw::Len(kind) = fields[0].1 else {
            panic!("type")
        };
        let protobuf::wire::Raw::Len(raw_ext) = fields[1].1 else {
            panic!("object")
        };
        let protobuf::wire::Raw::Len(inner) = protobuf::wire::fields(raw_ext).unwrap()[0].1 else {
            panic!("raw")
        };
        let obj = protobuf::decode(inner).unwrap();
        events.push((
            String::from_utf8_lossy(kind).to_string(),
            obj["metadata"]["name"].clone(),
        ));
    }
    assert_eq!(
        events,
        vec![
            ("ADDED".to_string(), json!("a")),
            ("ADDED".to_string(), json!("b"))
        ]
    );
}

#[tokio::test]
async fn custom_resources_stay_json() {
    let sim = start().await;
    let crd = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"things.ex.io"},
        "spec":{"group":"ex.io","scope":"Namespaced","names":{"plural":"things","kind":"Thing"},
        "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;
    let (code, _) = sim
        .raw(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some("application/json"),
            crd,
        )
        .await;
    assert_eq!(code, 201);
    let path = "/apis/ex.io/v1/namespaces/default/things";
    let thing = json!({"apiVersion": "ex.io/v1", "kind": "Thing", "metadata": {"name": "t"}});
    let (code, _) = sim
        .raw("POST", path, Some("application/json"), &thing.to_string())
        .await;
    assert_eq!(code, 201);
    // Asked for protobuf first, a custom resource is answered in JSON, the next acceptable type.
    let got = sim
        .request("GET", &format!("{path}/t"), &[("Accept", PB_ACCEPT)], b"")
        .await;
    assert_eq!(got.header("content-type"), vec!["application/json"]);
    // Sent as protobuf, it is refused: custom resources have no protobuf form.
    let refused = sim
        .request(
            "POST",
            path,
            &[("Content-Type", MEDIA_TYPE)],
            &pb(json!({"apiVersion": "v1", "kind": "ConfigMap"})),
        )
        .await;
    assert_eq!(refused.code, 415);
}

#[tokio::test]
async fn field_validation_is_strict_warns_or_ignores_as_asked() {
    let sim = start().await;
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let body = |name: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replica": 3, "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicyy": "Always"}]}}}})
        .to_string()
    };
    let json_ct = [("Content-Type", "application/json")];
    let strict = sim
        .request(
            "POST",
            &format!("{path}?fieldValidation=Strict"),
            &json_ct,
            body("strict").as_bytes(),
        )
        .await;
    assert_eq!(strict.code, 400);
    let status: Value = serde_json::from_slice(&strict.body).unwrap();
    assert_eq!(
        status["message"],
        r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.replica", unknown field "spec.template.spec.containers[0].imagePullPolicyy""#
    );
    let (code, _) = sim.raw("GET", &format!("{path}/strict"), None, "").await;
    assert_eq!(code, 404, "nothing was stored");

    // Warn (the default): stored without the unknown fields, with a warning per field.
    let warned = sim
        .request("POST", path, &json_ct, body("warned").as_bytes())
        .await;
    assert_eq!(warned.code, 201);
    assert_eq!(
        warned.header("warning"),
        vec![
            r#"299 - "unknown field \"spec.replica\"""#,
            r#"299 - "unknown field \"spec.template.spec.containers[0].imagePullPolicyy\"""#,
        ]
    );
    let stored: Value = serde_json::from_slice(&warned.body).unwrap();
    assert!(stored["spec"].get("replica").is_none());
    assert_eq!(stored["spec"]["replicas"], 1, "defaulted, the typo ignored");

    let ignored = sim
        .request(
            "POST",
            &format!("{path}?fieldValidation=Ignore"),
            &json_ct,
            body("ignored").as_bytes(),
        )
        .await;
    assert_eq!(ignored.code, 201);
    assert!(ignored.header("warning").is_empty());

    // Patches too; strategic-merge directives are not fields.
    let patch = r#"{"spec":{"paused":true,"pausd":true,"template":{"spec":{"$setElementOrder/containers":[{"name":"c"}]}}}}"#;
    let patched = sim
        .request(
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/warned?fieldValidation=Strict",
            &[("Content-Type", "application/strategic-merge-patch+json")],
            patch.as_bytes(),
        )
        .await;
    assert_eq!(patched.code, 400);
    let status: Value = serde_json::from_slice(&patched.body).unwrap();
    assert_eq!(
        status["message"],
        r#"strict decoding error: unknown field "spec.pausd""#
    );
}

#[tokio::test]
async fn openapi_v3_documents_tell_clients_the_server_validates_fields() {
    let sim = start().await;
    let (code, index) = sim.raw("GET", "/openapi/v3", None, "").await;
    assert_eq!(code, 200);
    let apps = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .expect("apps/v1 listed");
    assert!(apps.starts_with("/openapi/v3/apis/apps/v1?hash="), "{apps}");
    assert!(index["paths"]["api/v1"].is_object());
    let (code, doc) = sim.raw("GET", apps, None, "").await;
    assert_eq!(code, 200);
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
    );
    let schema = &doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        schema["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
    );
    assert!(schema["properties"]["spec"].is_object());
    assert!(
        doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
            .is_object()
    );
}
