//! The kubelet as clients see it: phases by Kubernetes' rules, sidecars, exit codes, logs, kills,
//! partitions, missing volumes, and real processes.

use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kubesim::Cluster;
use serde_json::{Value, json};

use super::support::{Sim, eventually, grant, start, start_with_images};

fn pod(name: &str, annotations: Value, spec: Value) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": name, "annotations": annotations}, "spec": spec}),
    )
    .unwrap()
}

fn one(image: &str) -> Value {
    json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": image}]})
}

async fn phase_of(api: &Api<Pod>, name: &str, want: &str) -> Pod {
    eventually(15, || async {
        let p = api.get(name).await.ok()?;
        (p.status.as_ref()?.phase.as_deref() == Some(want)).then_some(p)
    })
    .await
}

fn main_state(p: &Pod) -> Value {
    let st = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    st.iter()
        .find(|c| c.name == "main")
        .and_then(|c| c.state.clone())
        .map(|s| serde_json::to_value(s).unwrap())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn scripted_pod_runs_to_success_on_a_node() {
    let sim = start().await;
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    api.create(
        &PostParams::default(),
        &pod(
            "ok",
            json!({"kubesim.io/run-seconds": "0.2"}),
            one("busybox:1"),
        ),
    )
    .await
    .unwrap();
    let p = phase_of(&api, "ok", "Running").await;
    assert!(p.spec.unwrap().node_name.is_some_and(|n| !n.is_empty()));
    assert!(p.status.unwrap().pod_ip.is_some());
    let p = phase_of(&api, "ok", "Succeeded").await;
    assert_eq!(main_state(&p)["terminated"]["exitCode"], 0);
    let logs = api.logs("ok", &LogParams::default()).await.unwrap();
    assert!(!logs.is_empty());
}

#[tokio::test]
async fn non_zero_exit_fails_the_pod_with_that_code() {
    let sim = start().await;
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let ann = json!({"kubesim.io/run-seconds": "0.1", "kubesim.io/exit-code": "3"});
    api.create(&PostParams::default(), &pod("bad", ann, one("busybox:1")))
        .await
        .unwrap();
    let p = phase_of(&api, "bad", "Failed").await;
    assert_eq!(main_state(&p)["terminated"]["exitCode"], 3);
}

#[tokio::test]
async fn native_sidecar_does_not_hold_the_pod() {
    let sim = start().await;
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let spec = json!({"restartPolicy": "Never",
        "initContainers": [{"name": "agent", "image": "agent:1", "restartPolicy": "Always"}],
        "containers": [{"name": "main", "image": "busybox:1"}]});
    api.create(
        &PostParams::default(),
        &pod("native", json!({"kubesim.io/run-seconds": "0.2"}), spec),
    )
    .await
    .unwrap();
    phase_of(&api, "native", "Succeeded").await;
}

#[tokio::test]
async fn plain_sidecar_keeps_the_pod_running_after_the_driver_exits() {
    let sim = start().await;
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let spec = json!({"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "busybox:1"}, {"name": "proxy", "image": "envoy:1"}]});
    let ann = json!({"kubesim.io/run-seconds": "0.2", "kubesim.io/run-seconds.proxy": "-1"});
    api.create(&PostParams::default(), &pod("mesh", ann, spec))
        .await
        .unwrap();
    let p = eventually(15, || async {
        let p = api.get("mesh").await.ok()?;
        main_state(&p).get("terminated").is_some().then_some(p)
    })
    .await;
    assert_eq!(
        p.status.unwrap().phase.as_deref(),
        Some("Running"),
        "a plain sidecar holds the phase"
    );
}

#[tokio::test]
async fn never_start_pod_stays_pending() {
    let sim = start().await;
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    api.create(
        &PostParams::default(),
        &pod(
            "stuck",
            json!({"kubesim.io/never-start": "true"}),
            one("busybox:1"),
        ),
    )
    .await
    .unwrap();
    // Barrier: a pod created after it goes through scheduling and start-up on the same
    // kubelet ticks; once it runs, the stuck pod has had every chance to start.
    api.create(
        &PostParams::default(),
        &pod(
            "witness",
            json!({"kubesim.io/run-seconds": "-1"}),
            one("busybox:1"),
        ),
    )
    .await
    .unwrap();
    phase_of(&api, "witness", "Running").await;
    let p = api.get("stuck").await.unwrap();
    assert!(
        p.spec.as_ref().unwrap().node_name.is_some(),
        "it was scheduled"
    );
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(
        main_state(&p)["waiting"]["reason"],
        "ContainerCreating",
        "{p:?}"
    );
}

#[tokio::test]
async fn killed_container_reports_the_given_exit_code() {
    let sim = start().await;
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    api.create(
        &PostParams::default(),
        &pod(
            "victim",
            json!({"kubesim.io/run-seconds": "-1"}),
            one("busybox:1"),
        ),
    )
    .await
    .unwrap();
    phase_of(&api, "victim", "Running").await;
    sim.control("POST", "/pods/default/victim/kill", r#"{"exitCode": 143}"#)
        .await;
    let p = phase_of(&api, "victim", "Failed").await;
    assert_eq!(main_state(&p)["terminated"]["exitCode"], 143);
}

#[tokio::test]
async fn pod_waits_for_its_configmap_and_reports_failed_mount() {
    let sim = start().await;
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let spec = json!({"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1", "volumeMounts": [{"name": "conf", "mountPath": "/etc/conf"}]}],
        "volumes": [{"name": "conf", "configMap": {"name": "late"}}]});
    api.create(
        &PostParams::default(),
        &pod("mounts", json!({"kubesim.io/run-seconds": "0.1"}), spec),
    )
    .await
    .unwrap();
    let events: Api<Event> = Api::namespaced(sim.client.clone(), "default");
    eventually(10, || async {
        let evs = events
            .list(&ListParams::default().fields("involvedObject.name=mounts"))
            .await
            .ok()?;
        evs.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedMount"))
            .then_some(())
    })
    .await;
    assert_eq!(
        api.get("mounts")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Pending")
    );
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "late"}, "data": {"a": "b"}})).unwrap(),
    )
    .await
    .unwrap();
    phase_of(&api, "mounts", "Succeeded").await;
}

#[tokio::test]
async fn partitioned_node_freezes_status_and_holds_deletion_until_healed() {
    let sim = start().await;
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    api.create(
        &PostParams::default(),
        &pod(
            "zombie",
            json!({"kubesim.io/run-seconds": "-1"}),
            one("busybox:1"),
        ),
    )
    .await
    .unwrap();
    let p = phase_of(&api, "zombie", "Running").await;
    let node = p.spec.unwrap().node_name.unwrap();
    sim.control("POST", &format!("/nodes/{node}/partition"), "")
        .await;
    api.delete("zombie", &DeleteParams::default())
        .await
        .unwrap();
    // New pods avoid the partitioned node. Getting one running takes several kubelet ticks:
    // the barrier after which the held pod's status would have moved if it could.
    api.create(
        &PostParams::default(),
        &pod(
            "fresh",
            json!({"kubesim.io/run-seconds": "-1"}),
            one("busybox:1"),
        ),
    )
    .await
    .unwrap();
    let fresh = phase_of(&api, "fresh", "Running").await;
    assert_ne!(fresh.spec.unwrap().node_name.unwrap(), node);
    let held = api.get("zombie").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(
        held.status.unwrap().phase.as_deref(),
        Some("Running"),
        "status stops changing"
    );
    sim.control("POST", &format!("/nodes/{node}/heal"), "")
        .await;
    eventually(10, || async {
        api.get_opt("zombie").await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn graceful_delete_of_a_running_pod_completes() {
    let sim = start().await;
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    api.create(
        &PostParams::default(),
        &pod(
            "g",
            json!({"kubesim.io/run-seconds": "-1"}),
            one("busybox:1"),
        ),
    )
    .await
    .unwrap();
    phase_of(&api, "g", "Running").await;
    api.delete("g", &DeleteParams::default()).await.unwrap();
    eventually(10, || async {
        api.get_opt("g").await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn mapped_image_runs_a_real_process_with_env_and_volumes() {
    let sim = start_with_images().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "cfg"}, "data": {"k": "from-configmap"}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let spec = json!({"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "local/shell:1",
            "args": ["echo \"$(GREETING) $POD_NAME $POD_IP\"; cat \"$KUBESIM_POD_ROOT/etc/cfg/k\"; exit 4"],
            "env": [{"name": "GREETING", "value": "hello"},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}]}],
        "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}]});
    api.create(&PostParams::default(), &pod("real", json!({}), spec))
        .await
        .unwrap();
    let p = phase_of(&api, "real", "Failed").await;
    assert_eq!(main_state(&p)["terminated"]["exitCode"], 4);
    let ip = p.status.unwrap().pod_ip.unwrap();
    let logs = api.logs("real", &LogParams::default()).await.unwrap();
    assert!(logs.contains(&format!("hello real {ip}")), "{logs}");
    assert!(logs.contains("from-configmap"), "{logs}");
}

/// What a real process printed: its first `n` log lines, once there are that many.
async fn first_lines(api: &Api<Pod>, name: &str, n: usize) -> Vec<String> {
    eventually(10, || async {
        let logs = api.logs(name, &LogParams::default()).await.ok()?;
        let lines: Vec<String> = logs.lines().take(n).map(str::to_string).collect();
        (lines.len() == n).then_some(lines)
    })
    .await
}

/// A pod whose process prints its pod folder, its `KUBECONFIG` and its service-account token
/// (from the real path), then sleeps; returns the pod (Running), its folder and its token.
async fn pod_with_token(sim: &Sim, name: &str) -> (Pod, std::path::PathBuf, String) {
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let spec = json!({"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "local/shell:1",
            "args": ["echo \"$KUBESIM_POD_ROOT\"; echo \"KUBECONFIG=[$KUBECONFIG]\"; \
                      cat /var/run/secrets/kubernetes.io/serviceaccount/token; echo; sleep 60"]}]});
    api.create(&PostParams::default(), &pod(name, json!({}), spec))
        .await
        .unwrap();
    let p = phase_of(&api, name, "Running").await;
    let lines = first_lines(&api, name, 3).await;
    // With their own network, processes find the API server as in a cluster, not through a
    // kubeconfig of kubesim's.
    assert_eq!(lines[1], "KUBECONFIG=[]");
    (p, lines[0].clone().into(), lines[2].clone())
}

/// A kube-rs client over HTTPS with `token`, as a pod's process authenticates.
async fn client_with_token(sim: &Sim, token: &str) -> kube::Client {
    Cluster::client_from_kubeconfig(&sim.cluster.token_kubeconfig(token, "default"))
        .await
        .unwrap()
}

#[tokio::test]
async fn partitioned_nodes_processes_lose_the_api_server_until_heal() {
    let sim = start_with_images().await;
    // What the pod's process may do, granted to its service account as a chart would.
    let rules = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                       {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]);
    grant(&sim.client, "default", "default", "agent", rules).await;
    let (p, root, token) = pod_with_token(&sim, "agent").await;
    let node = p.spec.unwrap().node_name.unwrap();
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");

    // The pod's kubeconfig (for tools that take one) names the `kubernetes` Service over HTTPS
    // and carries the same token.
    let text = std::fs::read_to_string(root.join(".kubesim/kubeconfig")).unwrap();
    let kubeconfig: Value = yaml_serde::from_str(&text).unwrap();
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["server"],
        "https://198.19.0.1:443"
    );
    assert_eq!(kubeconfig["users"][0]["user"]["token"], token.as_str());

    // The test speaks as the pod's process, with its token.
    let agent: Api<Pod> = Api::namespaced(client_with_token(&sim, &token).await, "default");
    agent.get("agent").await.unwrap();

    sim.control("POST", &format!("/nodes/{node}/partition"), "")
        .await;
    let held_path = format!("/nodes/{node}/held");
    // No answer while cut off: a read and a write sent now are held by the server, neither
    // answered nor lost, and the write is not applied.
    let read = tokio::spawn({
        let agent = agent.clone();
        async move { agent.get("agent").await }
    });
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "heartbeat"}})).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(agent.clone().into_client(), "default");
    let write = tokio::spawn({
        let cms = cms.clone();
        let cm = cm.clone();
        async move { cms.create(&PostParams::default(), &cm).await }
    });
    eventually(10, || async {
        (sim.control("GET", &held_path, "").await["held"] == 2).then_some(())
    })
    .await;
    let others: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    assert!(others.get_opt("heartbeat").await.unwrap().is_none());
    assert!(
        !read.is_finished(),
        "a partitioned node's process got an answer"
    );
    assert!(!write.is_finished());
    // Everyone else still reaches the API server.
    api.get("agent").await.unwrap();

    // Healed, the held write goes through, as TCP would deliver it, and new requests are served.
    sim.control("POST", &format!("/nodes/{node}/heal"), "")
        .await;
    write.await.unwrap().unwrap();
    read.await.unwrap().unwrap();
    assert!(others.get_opt("heartbeat").await.unwrap().is_some());
    agent.get("agent").await.unwrap();
}

#[tokio::test]
async fn a_zombies_requests_are_lost_in_the_partition_then_refused_after_heal() {
    let sim = start_with_images().await;
    let rules = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]);
    grant(&sim.client, "default", "default", "agent", rules).await;
    let (p, _, token) = pod_with_token(&sim, "zombie").await;
    let node = p.spec.unwrap().node_name.unwrap();
    let zombie: Api<Pod> = Api::namespaced(client_with_token(&sim, &token).await, "default");
    zombie.get("zombie").await.unwrap();

    // Cut off, the pod is force-deleted: gone from the API, its process lives on.
    sim.control("POST", &format!("/nodes/{node}/partition"), "")
        .await;
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    api.delete("zombie", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually(10, || async {
        api.get_opt("zombie").await.unwrap().is_none().then_some(())
    })
    .await;
    // Its token names a pod that no longer exists, yet its request is not refused: it never
    // reaches the API server while the partition lasts.
    let read = tokio::spawn({
        let zombie = zombie.clone();
        async move { zombie.get("zombie").await }
    });
    eventually(10, || async {
        (sim.control("GET", &format!("/nodes/{node}/held"), "").await["held"] == 1).then_some(())
    })
    .await;
    assert!(!read.is_finished());

    // Healed, it arrives with a token bound to a deleted pod: 401, as the API server answers.
    sim.control("POST", &format!("/nodes/{node}/heal"), "")
        .await;
    let err = read.await.unwrap().unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 401),
        "{err:?}"
    );
}
