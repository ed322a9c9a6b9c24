//! Unmodified in-cluster clients inside pods: kube-rs `Config::infer()` (a kubesim example run as
//! a mapped image) and the Python client's `load_incluster_config()`, each with the token of
//! its pod's service account, allowed what a Role grants and refused the rest with the API
//! server's 403; and `automountServiceAccountToken: false` keeping the token out of a pod.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, LogParams, PostParams};
use kubesim::Cluster;
use serde_json::{Value, json};

use super::support::{Sim, eventually, grant, image, start_with};

const IN_CLUSTER_PY: &str = include_str!("programs/in_cluster.py");

/// `target/<profile>/examples/in_cluster`, built with the tests (cargo builds examples for
/// `cargo test` and nextest).
fn in_cluster_example() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/<test>");
    let path = profile_dir.join("examples").join("in_cluster");
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build -p kubesim --examples`",
        path.display()
    );
    path
}

async fn cluster() -> (Cluster, kube::Client) {
    let example = in_cluster_example().display().to_string();
    let images = BTreeMap::from([
        ("in-cluster-rs".to_string(), image(&[&example])),
        (
            "in-cluster-py".to_string(),
            image(&["python3", "-u", "-c", IN_CLUSTER_PY]),
        ),
        ("shell".to_string(), image(&["sh", "-c"])),
    ]);
    let Sim { cluster, client } = start_with(images).await;
    (cluster, client)
}

fn object<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The log of a pod once it has finished (`Succeeded` or `Failed`).
async fn finished_log(pods: &Api<Pod>, name: &str) -> (String, String) {
    let phase = eventually(60, || async {
        let p = pods.get(name).await.ok()?;
        let phase = p.status?.phase?;
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
    })
    .await;
    let log = pods.logs(name, &LogParams::default()).await.unwrap();
    (phase, log)
}

#[tokio::test]
async fn in_cluster_clients_in_pods_act_as_their_service_account() {
    let (_cluster, client) = cluster().await;
    let pp = PostParams::default();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    accounts
        .create(&pp, &object(json!({"metadata": {"name": "lister"}})))
        .await
        .unwrap();
    let read_pods = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]);
    grant(&client, "default", "lister", "pod-lister", read_pods).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // Something to list that exists before either program runs.
    pods.create(
        &pp,
        &object(
            json!({"metadata": {"name": "witness", "labels": {"app": "witness"},
                                    "annotations": {"kubesim.io/never-start": "true"}},
                       "spec": {"containers": [{"name": "main", "image": "busybox"}]}}),
        ),
    )
    .await
    .unwrap();
    for (name, image) in [("rs", "in-cluster-rs"), ("py", "in-cluster-py")] {
        pods.create(
            &pp,
            &object(json!({"metadata": {"name": name},
                "spec": {"serviceAccountName": "lister", "restartPolicy": "Never",
                         "containers": [{"name": "main", "image": image}]}})),
        )
        .await
        .unwrap();
    }
    let refused = "secrets: 403 secrets is forbidden: User \"system:serviceaccount:default:lister\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\"";
    let (phase, log) = finished_log(&pods, "rs").await;
    assert_eq!(phase, "Succeeded", "{log}");
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            "server: https://198.19.0.1/ namespace: default",
            "pods: witness",
            refused
        ],
        "kube-rs Config::infer() in a pod"
    );
    let (phase, log) = finished_log(&pods, "py").await;
    assert_eq!(phase, "Succeeded", "{log}");
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            "server: https://198.19.0.1:443 namespace: default",
            "pods: witness",
            refused
        ],
        "the Python client's load_incluster_config() in a pod"
    );
}

#[tokio::test]
async fn automount_false_keeps_the_token_out_of_the_pod() {
    let (_cluster, client) = cluster().await;
    let pp = PostParams::default();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    accounts
        .create(
            &pp,
            &object(json!({"metadata": {"name": "quiet"}, "automountServiceAccountToken": false})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // (pod, its service account, the pod's own setting, what /var/run/secrets holds)
    let table = [
        ("off-by-pod", "default", Some(false), ""),
        ("off-by-account", "quiet", None, ""),
        ("on-by-pod", "quiet", Some(true), "kubernetes.io"),
        ("on-by-default", "default", None, "kubernetes.io"),
    ];
    for (name, sa, automount, _) in table {
        let mut spec = json!({"serviceAccountName": sa, "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "shell",
                            "args": ["echo \"[$(ls -A /var/run/secrets)]\""]}]});
        if let Some(a) = automount {
            spec["automountServiceAccountToken"] = json!(a);
        }
        pods.create(
            &pp,
            &object(json!({"metadata": {"name": name}, "spec": spec})),
        )
        .await
        .unwrap();
    }
    for (name, _, _, want) in table {
        let (phase, log) = finished_log(&pods, name).await;
        assert_eq!(phase, "Succeeded", "{name}: {log}");
        assert_eq!(log.trim_end(), format!("[{want}]"), "{name}");
    }
}
