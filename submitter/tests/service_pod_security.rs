//! Pod security per identity through the service against kubesim: by default a submission's
//! pods must pass the baseline Pod Security Standard; the policy relaxes named controls per
//! identity. A refused submission is 403 naming what its pods asked for, and creates nothing.

use crate::submit_support;

use std::sync::Arc;

use http::StatusCode;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use submit_support::{TestApp, args, built, request, send, submit_request};
use submitter::policy::{Access, Policy};
use submitter::service::{ServiceConfig, app};
use submitter::state::AppState;

const POLICY: &str = r#"
clients:
  - identity: baseline-client
    namespaces: ["*"]
    serviceAccounts: ["*"]
  - identity: storage-client
    namespaces: ["*"]
    serviceAccounts: ["*"]
    podSecurity:
      allow: [hostPath]
      capabilities: [NET_ADMIN]
  - identity: infra-client
    namespaces: ["*"]
    serviceAccounts: ["*"]
    podSecurity:
      level: privileged
  - identity: split-client
    namespaces: ["*"]
    serviceAccounts: ["spark"]
    podSecurity:
      allow: [hostPath]
  - identity: split-client
    namespaces: ["*"]
    serviceAccounts: ["other"]
"#;

fn driver_template(spec: Value) -> Value {
    let mut container = json!({"name": "spark-kubernetes-driver"});
    let mut pod_spec = spec;
    if let Some(extra) = pod_spec.get("container").cloned() {
        container
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        pod_spec.as_object_mut().unwrap().remove("container");
    }
    pod_spec["containers"] = json!([container]);
    json!({"spec": pod_spec})
}

#[tokio::test]
async fn pods_are_held_to_baseline_unless_the_identity_is_allowed_more() {
    let t = TestApp::start().await;
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "spark"}})).unwrap();
    Api::<ServiceAccount>::namespaced(t.client(), "default")
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let policy = Arc::new(Policy::parse(POLICY).unwrap());
    let service = app(
        AppState::new(t.client(), Access::Policy(policy)),
        &ServiceConfig::default(),
    );
    let privileged =
        driver_template(json!({"container": {"securityContext": {"privileged": true}}}));
    let net_admin = driver_template(
        json!({"container": {"securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}}),
    );
    let chown = driver_template(
        json!({"container": {"securityContext": {"capabilities": {"add": ["CHOWN"], "drop": ["ALL"]}}}}),
    );
    let host_path = driver_template(json!({
        "volumes": [{"name": "host", "hostPath": {"path": "/var/run"}}],
        "container": {"volumeMounts": [{"name": "host", "mountPath": "/host"}]},
    }));
    let host_port = driver_template(
        json!({"container": {"ports": [{"containerPort": 4040, "hostPort": 4040}]}}),
    );
    let host_network_executors = json!({"spec": {"hostNetwork": true, "containers": [{"name": "spark-kubernetes-executor"}]}});
    let executor_host_path = [
        "--conf",
        "spark.kubernetes.executor.volumes.hostPath.data.mount.path=/data",
        "--conf",
        "spark.kubernetes.executor.volumes.hostPath.data.options.path=/mnt/data",
    ];
    let driver_host_path = [
        "--conf",
        "spark.kubernetes.driver.volumes.hostPath.data.mount.path=/data",
        "--conf",
        "spark.kubernetes.driver.volumes.hostPath.data.options.path=/mnt/data",
    ];
    let as_spark_and_other = [
        "--conf",
        "spark.kubernetes.authenticate.driver.serviceAccountName=spark",
        "--conf",
        "spark.kubernetes.authenticate.executor.serviceAccountName=other",
    ];
    let as_spark = [
        "--conf",
        "spark.kubernetes.authenticate.driver.serviceAccountName=spark",
    ];

    struct Case<'a> {
        identity: &'a str,
        driver_template: Option<&'a Value>,
        executor_template: Option<&'a Value>,
        extra_args: Vec<&'a str>,
        /// 201, or 403 with these fragments in the message.
        refused: &'a [&'a str],
    }
    let case = |identity, driver_template, refused| Case {
        identity,
        driver_template,
        executor_template: None,
        extra_args: Vec::new(),
        refused,
    };
    let cases = [
        case("baseline-client", None, &[]),
        case(
            "baseline-client",
            Some(&privileged),
            &["spec.containers[0].securityContext.privileged (privileged)"],
        ),
        case(
            "baseline-client",
            Some(&net_admin),
            &["\"NET_ADMIN\" (capabilities)"],
        ),
        case("baseline-client", Some(&chown), &[]),
        case(
            "baseline-client",
            Some(&host_path),
            &["spec.volumes[", "hostPath (hostPath)"],
        ),
        case(
            "baseline-client",
            Some(&host_port),
            &["hostPort (hostPorts)"],
        ),
        Case {
            executor_template: Some(&host_network_executors),
            ..case(
                "baseline-client",
                None,
                &["executor pod template spec.hostNetwork (hostNamespaces)"],
            )
        },
        Case {
            extra_args: executor_host_path.to_vec(),
            ..case(
                "baseline-client",
                None,
                &["conf spark.kubernetes.executor.volumes.hostPath.data (hostPath)"],
            )
        },
        Case {
            extra_args: driver_host_path.to_vec(),
            ..case("baseline-client", None, &["driver pod spec.volumes["])
        },
        case("storage-client", Some(&host_path), &[]),
        case("storage-client", Some(&net_admin), &[]),
        case("storage-client", Some(&privileged), &["(privileged)"]),
        Case {
            executor_template: Some(&host_network_executors),
            ..case("storage-client", None, &["(hostNamespaces)"])
        },
        case("infra-client", Some(&privileged), &[]),
        Case {
            executor_template: Some(&host_network_executors),
            ..case("infra-client", Some(&host_port), &[])
        },
        // hostPath is allowed for pods running as spark only: executors running as other
        // would get the conf's hostPath volume too.
        Case {
            extra_args: [as_spark_and_other.as_slice(), executor_host_path.as_slice()].concat(),
            ..case("split-client", None, &["(hostPath)"])
        },
        Case {
            extra_args: [as_spark.as_slice(), executor_host_path.as_slice()].concat(),
            ..case("split-client", None, &[])
        },
    ];
    for (index, case) in cases.iter().enumerate() {
        let mut body = request(&format!("pod-security-{index}"), &args(&case.extra_args));
        if let Some(template) = case.driver_template {
            body["driver_pod_template"] = template.clone();
        }
        if let Some(template) = case.executor_template {
            body["executor_pod_template"] = template.clone();
        }
        let answer = send(&service, submit_request(&body, "", case.identity)).await;
        let what = format!("case {index} ({}): {}", case.identity, answer.body);
        if case.refused.is_empty() {
            assert_eq!(answer.status, StatusCode::CREATED, "{what}");
            continue;
        }
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{what}");
        assert_eq!(answer.body["error_code"], "FORBIDDEN", "{what}");
        let message = answer.body["message"].as_str().unwrap();
        for fragment in case.refused {
            assert!(message.contains(fragment), "{what}: no {fragment:?}");
        }
        assert!(
            t.objects_of(&built(&body)).await.is_empty(),
            "{what}: objects left"
        );
    }
}

#[test]
fn bad_pod_security_entries_are_refused_at_load() {
    let entry = |pod_security: &str| {
        format!(
            "clients: [{{identity: a, namespaces: [x], serviceAccounts: [y], podSecurity: {pod_security}}}]"
        )
    };
    for (text, kind) in [
        (entry("{allow: [hostpath]}"), "parse"),
        (entry("{level: restricted}"), "parse"),
        (entry("{allow: [hostPath], denyAll: true}"), "parse"),
        (entry("{capabilities: [net_admin]}"), "invalid"),
        (entry("{level: privileged, allow: [hostPath]}"), "invalid"),
    ] {
        assert_eq!(Policy::parse(&text).unwrap_err().kind(), kind, "{text}");
    }
    assert!(
        Policy::parse(&entry(
            "{allow: [hostPath, hostNamespaces], capabilities: [NET_ADMIN]}"
        ))
        .is_ok()
    );
}
