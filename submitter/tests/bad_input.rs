//! Bad input, counted: one table of the classes of bad input the submitter's REST API can be
//! sent (the body, the arguments, the templates, the client's identity), each with the answer it
//! must get, driven through the service's whole layer stack against kubesim. After each one the
//! cluster holds exactly what it held before: nothing created, nothing left behind. The table is
//! published in docs/security.md ("Bad input, counted"); the classes of the other inputs (policy
//! file, CRD spec, agent API) are covered by the tests the document names.

use crate::submit_support;

use std::collections::BTreeSet;

use axum::body::Body;
use http::{Request, header};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::{Value, json};
use submit_support::{TESTER, TestApp, args, request, send};

/// One class of bad input.
struct Class {
    name: &'static str,
    method: &'static str,
    path: String,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    /// `None`: no client certificate.
    identity: Option<&'static str>,
    status: u16,
    code: &'static str,
}

/// A submission body with `args` (placed before the primary resource) and `edit` applied.
fn submission(id: &str, extra: &[&str], edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut body = request(id, &args(extra));
    edit(&mut body);
    body.to_string().into_bytes()
}

/// A submission of exactly `argv`.
fn raw_argv(id: &str, argv: &[&str]) -> Vec<u8> {
    json!({"submission_id": id, "spark_submit_args": argv})
        .to_string()
        .into_bytes()
}

fn post(name: &'static str, body: Vec<u8>, status: u16, code: &'static str) -> Class {
    Class {
        name,
        method: "POST",
        path: "/api/v1/spark-submit".into(),
        content_type: Some("application/json"),
        body,
        identity: Some(TESTER),
        status,
        code,
    }
}

fn classes() -> Vec<Class> {
    const ARGS: (u16, &str) = (400, "INVALID_SPARK_SUBMIT_ARGS");
    const BODY: (u16, &str) = (400, "BAD_REQUEST");
    const TEMPLATE: (u16, &str) = (422, "INVALID_POD_TEMPLATE");
    const FORBIDDEN: (u16, &str) = (403, "FORBIDDEN");
    let ok = |id| submission(id, &[], |_| {});
    let with_args = |id, extra: &[&str]| submission(id, extra, |_| {});
    let driver_template =
        |id, template: Value| submission(id, &[], |body| body["driver_pod_template"] = template);
    let executor_template =
        |id, template: Value| submission(id, &[], |body| body["executor_pod_template"] = template);
    let base = [
        "--master",
        "k8s://https://kubernetes.default.svc:443",
        "--deploy-mode",
        "cluster",
    ];
    let image = "spark.kubernetes.container.image=spark:4.0.0";
    vec![
        // The REST body and the HTTP request.
        post("body is not JSON", b"{not json".to_vec(), BODY.0, BODY.1),
        post("body is a JSON array", b"[]".to_vec(), BODY.0, BODY.1),
        post("body is empty", Vec::new(), BODY.0, BODY.1),
        post(
            "submission_id missing",
            br#"{"spark_submit_args": []}"#.to_vec(),
            BODY.0,
            BODY.1,
        ),
        post(
            "spark_submit_args missing",
            br#"{"submission_id": "b-1"}"#.to_vec(),
            BODY.0,
            BODY.1,
        ),
        post(
            "spark_submit_args not a list of strings",
            br#"{"submission_id": "b-2", "spark_submit_args": ["--name", 7]}"#.to_vec(),
            BODY.0,
            BODY.1,
        ),
        post(
            "body is not UTF-8",
            b"{\"submission_id\": \"\xff\xfe\", \"spark_submit_args\": []}".to_vec(),
            BODY.0,
            BODY.1,
        ),
        post("submission id empty", ok(""), BODY.0, BODY.1),
        post(
            "submission id with a control character",
            ok("a\nb"),
            BODY.0,
            BODY.1,
        ),
        post(
            "submission id too long",
            ok(&"x".repeat(300)),
            BODY.0,
            BODY.1,
        ),
        Class {
            content_type: Some("text/plain"),
            ..post(
                "wrong Content-Type",
                ok("b-3"),
                415,
                "UNSUPPORTED_MEDIA_TYPE",
            )
        },
        Class {
            content_type: None,
            ..post("no Content-Type", ok("b-4"), 415, "UNSUPPORTED_MEDIA_TYPE")
        },
        post(
            "body over 1 MiB",
            submission("b-5", &[], |body| body["pad"] = json!("x".repeat(1 << 20))),
            413,
            "PAYLOAD_TOO_LARGE",
        ),
        Class {
            path: "/api/v1/spark-submit?dryRun=maybe".into(),
            ..post("dryRun neither true nor false", ok("b-6"), BODY.0, BODY.1)
        },
        Class {
            method: "PUT",
            ..post(
                "wrong method on the submit route",
                ok("b-7"),
                405,
                "METHOD_NOT_ALLOWED",
            )
        },
        Class {
            path: "/api/v1/spark-submits".into(),
            ..post("unknown route", ok("b-8"), 404, "NOT_FOUND")
        },
        // Who asks.
        Class {
            identity: None,
            ..post("no client certificate", ok("b-9"), 401, "UNAUTHENTICATED")
        },
        Class {
            identity: Some("stranger"),
            ..post(
                "identity unknown to the policy",
                ok("b-10"),
                FORBIDDEN.0,
                FORBIDDEN.1,
            )
        },
        Class {
            identity: Some("team-a"),
            ..post(
                "namespace the identity may not use",
                ok("b-11"),
                FORBIDDEN.0,
                FORBIDDEN.1,
            )
        },
        Class {
            identity: Some("spark-only"),
            ..post(
                "service account the identity may not use",
                ok("b-12"),
                FORBIDDEN.0,
                FORBIDDEN.1,
            )
        },
        post(
            "pod asks for what the identity may not (privileged)",
            driver_template(
                "b-13",
                json!({"spec": {"containers": [{"name": "spark-kubernetes-driver", "securityContext": {"privileged": true}}]}}),
            ),
            FORBIDDEN.0,
            FORBIDDEN.1,
        ),
        // The arguments.
        post("no arguments", raw_argv("a-1", &[]), ARGS.0, ARGS.1),
        post(
            "no primary resource",
            raw_argv(
                "a-2",
                &[base[0], base[1], base[2], base[3], "--conf", image],
            ),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "unknown option",
            with_args("a-3", &["--frobnicate", "x"]),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "option without its value",
            raw_argv(
                "a-4",
                &[
                    base[0], base[1], base[2], base[3], "--conf", image, "--class",
                ],
            ),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "--conf without '='",
            with_args("a-5", &["--conf", "spark.executor.instances"]),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "master that is not k8s://",
            raw_argv(
                "a-6",
                &[
                    "--master",
                    "yarn",
                    "--deploy-mode",
                    "cluster",
                    "--conf",
                    image,
                    "local:///app.jar",
                ],
            ),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "client deploy mode",
            raw_argv(
                "a-7",
                &[
                    base[0],
                    base[1],
                    "--deploy-mode",
                    "client",
                    "--conf",
                    image,
                    "local:///app.jar",
                ],
            ),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "no container image",
            raw_argv(
                "a-8",
                &[base[0], base[1], base[2], base[3], "local:///app.jar"],
            ),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "NUL byte in an argument",
            with_args("a-9", &["--conf", "spark.app.name=a\u{0}b"]),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "memory that is not a size",
            with_args("a-10", &["--conf", "spark.driver.memory=lots"]),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "cores that are not a number",
            with_args("a-11", &["--conf", "spark.driver.cores=many"]),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "namespace that is not a DNS label",
            with_args("a-12", &["--conf", "spark.kubernetes.namespace=Bad_NS"]),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "driver pod name that is not a DNS name",
            with_args(
                "a-13",
                &["--conf", "spark.kubernetes.driver.pod.name=Not_A_Name"],
            ),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "secretKeyRef without name:key",
            with_args(
                "a-14",
                &["--conf", "spark.kubernetes.driver.secretKeyRef.PASS=nokey"],
            ),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "volume without its mount path",
            with_args(
                "a-15",
                &[
                    "--conf",
                    "spark.kubernetes.driver.volumes.hostPath.d.options.path=/x",
                ],
            ),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "reserved Spark label set by the user",
            with_args(
                "a-16",
                &[
                    "--conf",
                    "spark.kubernetes.driver.label.spark-role=executor",
                ],
            ),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "--kill instead of a submission",
            raw_argv("a-17", &[base[0], base[1], "--kill", "default:some-driver"]),
            ARGS.0,
            ARGS.1,
        ),
        post(
            "namespace that does not exist",
            with_args("a-18", &["--conf", "spark.kubernetes.namespace=nowhere"]),
            ARGS.0,
            ARGS.1,
        ),
        // The templates.
        post(
            "driver template not an object",
            driver_template("t-1", json!("a pod, please")),
            TEMPLATE.0,
            TEMPLATE.1,
        ),
        post(
            "driver template containers not a list",
            driver_template("t-2", json!({"spec": {"containers": {"name": "x"}}})),
            TEMPLATE.0,
            TEMPLATE.1,
        ),
        post(
            "driver template of another kind",
            driver_template("t-3", json!({"kind": "Service", "spec": {}})),
            TEMPLATE.0,
            TEMPLATE.1,
        ),
        post(
            "executor template not an object",
            executor_template("t-4", json!([1, 2])),
            TEMPLATE.0,
            TEMPLATE.1,
        ),
        post(
            "driver template field the API server rejects",
            driver_template(
                "t-5",
                json!({"spec": {"containers": [{"name": "spark-kubernetes-driver"}, {"name": "sidecar"}]}}),
            ),
            TEMPLATE.0,
            TEMPLATE.1,
        ),
        post(
            "driver template container name the API server rejects",
            driver_template(
                "t-6",
                json!({"spec": {"containers": [{"name": "spark-kubernetes-driver"}, {"name": "Side_car", "image": "busybox"}]}}),
            ),
            TEMPLATE.0,
            TEMPLATE.1,
        ),
        // Status look-ups.
        Class {
            method: "GET",
            path: "/api/v1/drivers/default".into(),
            body: Vec::new(),
            ..post("driver id without a pod name", Vec::new(), 404, "NOT_FOUND")
        },
        Class {
            method: "GET",
            path: "/api/v1/drivers/Bad_NS/pod".into(),
            body: Vec::new(),
            identity: Some("team-a"),
            ..post(
                "look-up in a namespace the identity may not read",
                Vec::new(),
                FORBIDDEN.0,
                FORBIDDEN.1,
            )
        },
    ]
}

/// Every object of the kinds a submission creates, in every namespace.
async fn snapshot(t: &TestApp) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (group, version, kind, plural) in [
        ("", "v1", "Pod", "pods"),
        ("", "v1", "ConfigMap", "configmaps"),
        ("", "v1", "Service", "services"),
        ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    ] {
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::all_with(t.client(), &resource);
        for item in api.list(&ListParams::default()).await.unwrap().items {
            let meta = &item.metadata;
            found.insert(format!(
                "{kind} {}/{}",
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default()
            ));
        }
    }
    found
}

#[tokio::test]
async fn every_class_of_bad_input_gets_its_answer_and_leaves_nothing() {
    let t = TestApp::start().await;
    let classes = classes();
    assert!(classes.len() >= 40, "the table shrank: {}", classes.len());
    let before = snapshot(&t).await;
    let mut failures = Vec::new();
    for class in &classes {
        let mut builder = Request::builder().method(class.method).uri(&class.path);
        if let Some(content_type) = class.content_type {
            builder = builder.header(header::CONTENT_TYPE, content_type);
        }
        let mut http_request = builder.body(Body::from(class.body.clone())).unwrap();
        if let Some(identity) = class.identity {
            http_request
                .extensions_mut()
                .insert(submit_support::verified_identity(identity));
        }
        let answer = send(&t.app, http_request).await;
        let got = (
            answer.status.as_u16(),
            answer.body["error_code"].as_str().unwrap_or("-"),
        );
        if got != (class.status, class.code) {
            failures.push(format!(
                "{}: expected {} {}, got {} {}: {}",
                class.name, class.status, class.code, got.0, got.1, answer.body
            ));
        }
        if answer.body["status"] != class.status || !answer.body["message"].is_string() {
            failures.push(format!("{}: not the envelope: {}", class.name, answer.body));
        }
    }
    let after = snapshot(&t).await;
    assert!(failures.is_empty(), "{:#?}", failures);
    assert_eq!(after, before, "bad input created or left objects");
}
