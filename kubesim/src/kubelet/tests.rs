//! The kubelet driving a real store: pods go from creation to their final phase.

use std::time::Instant;

use super::pod_world::token_refresh_after;
use super::*;

fn store() -> Arc<Store> {
    let store = Store::new(1000);
    let reg = store.registry();
    let rt = |p: &str| reg.find("", "v1", p).expect("core type");
    let opts = WriteOpts::default();
    store
        .create(
            &rt("namespaces"),
            "",
            json!({"metadata": {"name": "default"}}),
            &opts,
        )
        .expect("namespace");
    store
        .create(
            &rt("serviceaccounts"),
            "default",
            json!({"metadata": {"name": "default"}}),
            &opts,
        )
        .expect("serviceaccount");
    store
}

fn create(store: &Store, plural: &str, obj: Value) {
    let rt = store.registry().find("", "v1", plural).expect("core type");
    store
        .create(&rt, "default", obj, &WriteOpts::default())
        .expect("create");
}

fn pod(name: &str, annotations: Value, spec: Value) -> Value {
    json!({"metadata": {"name": name, "annotations": annotations}, "spec": spec})
}

/// Polls the pod until `done` holds (bounded), returning it.
async fn wait_for(store: &Store, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let p = store.get_raw("", "pods", "default", name);
        if let Some(p) = &p
            && done(p)
        {
            return p.clone();
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {p:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn phase(p: &Value) -> &str {
    p.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

async fn wait_phase(store: &Store, name: &str, want: &str) -> Value {
    wait_for(store, name, want, |p| phase(p) == want).await
}

fn config(dir: &std::path::Path) -> KubeletConfig {
    KubeletConfig {
        work_dir: dir.to_path_buf(),
        ..KubeletConfig::default()
    }
}

#[tokio::test]
async fn scripted_pods_reach_their_final_phase() {
    let store = store();
    let dir = tempfile::tempdir().expect("tempdir");
    let kubelet = Kubelet::start(store.clone(), config(dir.path()));
    assert_eq!(store.all_of("", "nodes").len(), 3);
    create(
        &store,
        "pods",
        pod(
            "ok",
            json!({RUN_SECONDS: "0.2"}),
            json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}),
        ),
    );
    create(
        &store,
        "pods",
        pod(
            "bad",
            json!({RUN_SECONDS: "0.2", EXIT_CODE: "3"}),
            json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}),
        ),
    );

    let running = wait_phase(&store, "ok", "Running").await;
    // Without a cluster network (`network: host`) pods share the host's address.
    assert_eq!(running["status"]["podIP"], HOST_IP);
    assert_eq!(running["status"]["hostIP"], HOST_IP);
    let conds = running["status"]["conditions"]
        .as_array()
        .expect("conditions");
    for kind in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert!(
            conds.iter().any(|c| c["type"] == kind
                && c["status"] == "True"
                && c["lastTransitionTime"].is_string()),
            "{kind} in {conds:?}"
        );
    }
    assert_eq!(running["status"]["containerStatuses"][0]["ready"], true);
    assert_eq!(
        running["status"]["qosClass"], "BestEffort",
        "status fields we do not own are kept"
    );

    let ok = wait_phase(&store, "ok", "Succeeded").await;
    assert_eq!(
        ok["status"]["containerStatuses"][0]["state"]["terminated"]["reason"],
        "Completed"
    );
    let bad = wait_phase(&store, "bad", "Failed").await;
    let term = &bad["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(
        (term["exitCode"].as_i64(), term["reason"].as_str()),
        (Some(3), Some("Error"))
    );
    assert_ne!(
        ok["spec"]["nodeName"], bad["spec"]["nodeName"],
        "least-loaded node first"
    );

    let logs = kubelet.logs("default", "bad", "main").expect("logs");
    assert!(logs.contains("kubesim: container main started"), "{logs}");
    assert!(logs.contains("exited with code 3"), "{logs}");
    assert!(kubelet.logs("default", "bad", "nope").is_none());
}

#[tokio::test]
async fn missing_configmap_blocks_start_and_records_failed_mount() {
    let store = store();
    let dir = tempfile::tempdir().expect("tempdir");
    let _kubelet = Kubelet::start(store.clone(), config(dir.path()));
    create(
        &store,
        "pods",
        pod(
            "waits",
            json!({RUN_SECONDS: "0.1"}),
            json!({
        "restartPolicy": "Never",
        "volumes": [{"name": "conf", "configMap": {"name": "later"}}],
        "containers": [{"name": "main", "image": "busybox",
                        "volumeMounts": [{"name": "conf", "mountPath": "/etc/conf"}]}]}),
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let event = loop {
        let found = store
            .all_of("", "events")
            .into_iter()
            .find(|e| e["reason"] == "FailedMount");
        if let Some(e) = found {
            break e;
        }
        assert!(Instant::now() < deadline, "no FailedMount event");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        event["message"],
        "MountVolume.SetUp failed for volume \"conf\" : configmap \"later\" not found"
    );
    assert_eq!(event["involvedObject"]["name"], "waits");
    assert_eq!(event["type"], "Warning");
    let p = store.get_raw("", "pods", "default", "waits").expect("pod");
    assert_eq!(phase(&p), "Pending");
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"],
        "ContainerCreating"
    );

    create(
        &store,
        "configmaps",
        json!({"metadata": {"name": "later"}, "data": {"k": "v"}}),
    );
    wait_phase(&store, "waits", "Succeeded").await;
    let events = store.all_of("", "events");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["reason"] == "FailedMount")
            .count(),
        1
    );
}

#[tokio::test]
async fn native_sidecar_stops_when_main_finishes_and_init_runs_first() {
    let store = store();
    let dir = tempfile::tempdir().expect("tempdir");
    let _kubelet = Kubelet::start(store.clone(), config(dir.path()));
    create(
        &store,
        "pods",
        pod(
            "sc",
            json!({RUN_SECONDS: "0.2"}),
            json!({
        "restartPolicy": "Never",
        "initContainers": [
            {"name": "setup", "image": "busybox"},
            {"name": "agent", "image": "busybox", "restartPolicy": "Always"},
        ],
        "containers": [{"name": "main", "image": "busybox"}]}),
        ),
    );
    let done = wait_phase(&store, "sc", "Succeeded").await;
    let init = done["status"]["initContainerStatuses"]
        .as_array()
        .expect("init statuses");
    assert_eq!(init[0]["state"]["terminated"]["exitCode"], 0);
    assert_eq!(init[1]["state"]["terminated"]["reason"], "Completed");
    let setup_end = init[0]["state"]["terminated"]["finishedAt"]
        .as_str()
        .unwrap_or("");
    let main_start = done["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"]
        .as_str()
        .unwrap_or("");
    assert!(setup_end <= main_start, "{setup_end} <= {main_start}");
}

#[tokio::test]
async fn deletion_kill_and_partition() {
    let store = store();
    let dir = tempfile::tempdir().expect("tempdir");
    let kubelet = Kubelet::start(store.clone(), config(dir.path()));
    let forever = json!({"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "busybox"}, {"name": "side", "image": "busybox"}]});
    create(
        &store,
        "pods",
        pod("k", json!({RUN_SECONDS: "-1"}), forever.clone()),
    );
    wait_phase(&store, "k", "Running").await;
    assert_eq!(
        kubelet
            .kill("default", "k", Some("nope"), 1)
            .map_err(|e| e.kind()),
        Err("ContainerNotFound")
    );
    assert_eq!(
        kubelet.kill("default", "x", None, 1).map_err(|e| e.kind()),
        Err("PodNotFound")
    );
    kubelet.kill("default", "k", None, 7).expect("kill main");
    assert_eq!(
        kubelet.kill("default", "k", None, 7).map_err(|e| e.kind()),
        Err("NotRunning")
    );
    let p = wait_for(&store, "k", "main killed", |p| {
        p.pointer("/status/containerStatuses/0/state/terminated/exitCode") == Some(&json!(7))
    })
    .await;
    assert_eq!(
        phase(&p),
        "Running",
        "the plain sidecar keeps the pod running"
    );

    // Partition: status freezes, the node turns Unknown, deletion waits for heal.
    let node = p["spec"]["nodeName"].as_str().expect("bound").to_string();
    assert!(kubelet.partition(&node));
    assert!(!kubelet.partition("no-such-node"));
    let node_obj = store.get_raw("", "nodes", "", &node).expect("node");
    assert_eq!(node_obj["status"]["conditions"][0]["status"], "Unknown");
    kubelet
        .kill("default", "k", Some("side"), 0)
        .expect("kill side");
    let pods_rt = store.registry().find("", "v1", "pods").expect("pods");
    store
        .delete(&pods_rt, "default", "k", &DeleteOpts::default())
        .expect("delete");
    // Barrier: a pod created now is scheduled and started on the same kubelet ticks that
    // would have reported the kill and finished the deletion, were the node reachable.
    create(
        &store,
        "pods",
        pod("witness", json!({RUN_SECONDS: "-1"}), forever.clone()),
    );
    let witness = wait_phase(&store, "witness", "Running").await;
    assert_ne!(witness["spec"]["nodeName"], json!(node));
    let frozen = store
        .get_raw("", "pods", "default", "k")
        .expect("still there while partitioned");
    assert!(frozen["status"]["containerStatuses"][1]["state"]["running"].is_object());
    assert!(kubelet.heal(&node));
    let deadline = Instant::now() + Duration::from_secs(5);
    while store.get_raw("", "pods", "default", "k").is_some() {
        assert!(Instant::now() < deadline, "pod not deleted after heal");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let node_obj = store.get_raw("", "nodes", "", &node).expect("node");
    assert_eq!(node_obj["status"]["conditions"][0]["status"], "True");
    assert!(kubelet.logs("default", "k", "main").is_none());
}

#[tokio::test]
async fn real_process_sees_env_and_configmap_volume() {
    let store = store();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.images.insert(
        "local/sh".into(),
        ImageCommand {
            command: vec!["sh".into(), "-c".into()],
            env: BTreeMap::from([("FROM_IMAGE".to_string(), "img".to_string())]),
        },
    );
    let kubelet = Kubelet::start(store.clone(), cfg);
    create(
        &store,
        "configmaps",
        json!({"metadata": {"name": "cfg"}, "data": {"k": "hello from cm"}}),
    );
    create(
        &store,
        "pods",
        pod(
            "real",
            json!({}),
            json!({
            "restartPolicy": "Never",
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}],
            "containers": [{
                "name": "main", "image": "local/sh:1.0",
                "args": ["echo $POD_IP; echo $(NAME) $$FROM_IMAGE; cat $KUBESIM_POD_ROOT/etc/cfg/k; echo; exit 4"],
                "env": [
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}],
            }]}),
        ),
    );
    let done = wait_phase(&store, "real", "Failed").await;
    assert_eq!(
        done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        4
    );
    let ip = done["status"]["podIP"].as_str().expect("podIP");
    let logs = kubelet.logs("default", "real", "main").expect("logs");
    assert_eq!(logs, format!("{ip}\nreal img\nhello from cm\n"));
}

#[tokio::test]
async fn real_process_is_killed_on_deletion() {
    let store = store();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.images.insert(
        "local/sleep".into(),
        ImageCommand {
            command: vec!["sh".into(), "-c".into(), "echo up; sleep 30".into()],
            env: BTreeMap::new(),
        },
    );
    let kubelet = Kubelet::start(store.clone(), cfg);
    create(
        &store,
        "pods",
        pod(
            "sleeper",
            json!({}),
            json!({
        "restartPolicy": "Always",
        "containers": [{"name": "main", "image": "local/sleep"}]}),
        ),
    );
    wait_phase(&store, "sleeper", "Running").await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while kubelet.logs("default", "sleeper", "main").as_deref() != Some("up\n") {
        assert!(Instant::now() < deadline, "process did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pods_rt = store.registry().find("", "v1", "pods").expect("pods");
    store
        .delete(&pods_rt, "default", "sleeper", &DeleteOpts::default())
        .expect("delete");
    let deadline = Instant::now() + Duration::from_secs(5);
    while store.get_raw("", "pods", "default", "sleeper").is_some() {
        assert!(
            Instant::now() < deadline,
            "pod not deleted: SIGTERM did not stop the group"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_pod_lifecycle_is_a_handful_of_writes() {
    let store = store();
    let dir = tempfile::tempdir().expect("tempdir");
    let _kubelet = Kubelet::start(store.clone(), config(dir.path()));
    let mut sub = store
        .subscribe(&|g, p, _| g.is_empty() && p == "pods", WatchFrom::Now)
        .expect("subscribe");
    const PODS: usize = 300;
    for i in 0..PODS {
        create(
            &store,
            "pods",
            pod(
                &format!("p{i}"),
                json!({RUN_SECONDS: "0.1"}),
                json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}),
            ),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let pods = store.all_of("", "pods");
        if pods.iter().all(|p| phase(p) == "Succeeded") {
            break;
        }
        assert!(Instant::now() < deadline, "not all pods succeeded in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut modified = 0;
    let mut phases_seen = std::collections::BTreeSet::new();
    while let Ok(ev) = sub.live.try_recv() {
        if ev.plural == "pods" && ev.kind == EventType::Modified {
            modified += 1;
            phases_seen.insert(phase(&ev.object).to_string());
        }
    }
    // Bind, Pending (ContainerCreating), Running, Succeeded.
    assert_eq!(modified, PODS * 4, "writes per pod");
    assert_eq!(
        phases_seen.into_iter().collect::<Vec<_>>(),
        vec!["Pending", "Running", "Succeeded"]
    );
    let per_node: Vec<usize> = ["kubesim-node-1", "kubesim-node-2", "kubesim-node-3"]
        .iter()
        .map(|n| {
            store
                .all_of("", "pods")
                .iter()
                .filter(|p| p["spec"]["nodeName"] == *n)
                .count()
        })
        .collect();
    // Finished pods free their slot, so the spread is even only up to timing.
    assert!(
        per_node.iter().all(|n| *n >= PODS / 4),
        "pods spread evenly: {per_node:?}"
    );
}

fn file_len(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

#[tokio::test]
async fn force_deleted_pod_on_a_partitioned_node_lives_on_until_heal() {
    let store = store();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(&dir.path().join("work"));
    cfg.images.insert(
        "local/beat".into(),
        ImageCommand {
            command: vec![
                "sh".into(),
                "-c".into(),
                "echo $$ > \"$BEAT.pid\"; while true; do echo x >> \"$BEAT\"; sleep 0.05; done"
                    .into(),
            ],
            env: BTreeMap::new(),
        },
    );
    let kubelet = Kubelet::start(store.clone(), cfg);
    let driver = |beat: &std::path::Path| {
        pod(
            "driver",
            json!({}),
            json!({"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "local/beat",
            "env": [{"name": "BEAT", "value": beat.display().to_string()}]}]}),
        )
    };
    let (beat1, beat2) = (dir.path().join("beat-1"), dir.path().join("beat-2"));
    create(&store, "pods", driver(&beat1));
    let first = wait_phase(&store, "driver", "Running").await;
    let node = first["spec"]["nodeName"]
        .as_str()
        .expect("bound")
        .to_string();
    assert!(kubelet.partition(&node));
    let pods_rt = store.registry().find("", "v1", "pods").expect("pods");
    let force = DeleteOpts {
        grace_period: Some(0),
        ..DeleteOpts::default()
    };
    store
        .delete(&pods_rt, "default", "driver", &force)
        .expect("force delete");
    assert!(store.get_raw("", "pods", "default", "driver").is_none());

    create(&store, "pods", driver(&beat2));
    let second = wait_phase(&store, "driver", "Running").await;
    assert_ne!(
        second["spec"]["nodeName"],
        json!(node),
        "partitioned nodes get no pods"
    );
    // The zombie keeps running while partitioned: its beat file keeps growing after the
    // successor started.
    let before = file_len(&beat1);
    wait_until("the zombie beats while partitioned", || {
        file_len(&beat1) > before
    })
    .await;

    assert!(kubelet.heal(&node));
    // The zombie is stopped on heal: its process is gone (the script names its shell's pid).
    let zombie_pid = first_line(&beat1.with_extension("pid"));
    wait_until("the zombie's process exits on heal", || {
        !process_alive(&zombie_pid)
    })
    .await;
    let before = file_len(&beat2);
    wait_until("the successor beats after the heal", || {
        file_len(&beat2) > before
    })
    .await;
    assert!(process_alive(&first_line(&beat2.with_extension("pid"))));
}

/// Polls `done` every 20 ms for at most 8 s.
async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(8);
    while !done() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn first_line(p: &std::path::Path) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Whether a process runs (an exited one that is not yet reaped counts as gone).
fn process_alive(pid: &str) -> bool {
    !pid.is_empty()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
}

#[tokio::test]
async fn a_node_selector_binds_to_a_fitting_node_and_waits_while_none_is_healthy() {
    let store = store();
    let dir = tempfile::tempdir().expect("tempdir");
    let kubelet = Kubelet::start(store.clone(), config(dir.path()));
    let on = |node: &str| {
        json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}],
               "nodeSelector": {"kubernetes.io/hostname": node}})
    };
    // The least-loaded node would be node-1; the selector names node-3.
    create(
        &store,
        "pods",
        pod("picky", json!({}), on("kubesim-node-3")),
    );
    let p = wait_phase(&store, "picky", "Succeeded").await;
    assert_eq!(p.pointer("/spec/nodeName"), Some(&json!("kubesim-node-3")));

    // No node carries the label: the pod waits unbound.
    create(
        &store,
        "pods",
        pod("nowhere", json!({}), on("kubesim-node-9")),
    );
    // Its partitioned node: the pod waits until the node heals.
    assert!(kubelet.partition("kubesim-node-2"));
    create(
        &store,
        "pods",
        pod("patient", json!({}), on("kubesim-node-2")),
    );
    // A pod created after both, without a selector, is bound: the scheduler has run past them.
    create(
        &store,
        "pods",
        pod(
            "easy",
            json!({}),
            json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}),
        ),
    );
    wait_phase(&store, "easy", "Succeeded").await;
    // The scheduler says why, on the pod and in a Warning event, as a real one does.
    let p = store
        .get_raw("", "pods", "default", "nowhere")
        .expect("pod");
    let scheduled = p
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled").cloned())
        .expect("a PodScheduled condition");
    assert_eq!(scheduled["status"], "False");
    assert_eq!(scheduled["reason"], "Unschedulable");
    let message = scheduled["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("0/3 nodes are available: ")
            && message.contains("node(s) didn't match Pod's node affinity/selector"),
        "{message}"
    );
    let events = store.all_of("", "events");
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["reason"] == "FailedScheduling" && e["involvedObject"]["name"] == "nowhere")
        .collect();
    assert_eq!(failed.len(), 1, "one FailedScheduling event");
    assert_eq!(failed[0]["type"], "Warning");
    assert_eq!(failed[0]["message"], scheduled["message"]);
    for name in ["nowhere", "patient"] {
        let p = store.get_raw("", "pods", "default", name).expect("pod");
        assert_eq!(p.pointer("/spec/nodeName"), None, "{name} stays unbound");
    }
    assert!(kubelet.heal("kubesim-node-2"));
    let p = wait_phase(&store, "patient", "Succeeded").await;
    assert_eq!(p.pointer("/spec/nodeName"), Some(&json!("kubesim-node-2")));
    kubelet.shutdown();
}

#[test]
fn pod_tokens_are_renewed_at_four_fifths_of_their_life_and_at_least_daily() {
    for (lifetime, after) in [(3607, 2885), (600, 480), (7 * 24 * 3600, 24 * 3600)] {
        assert_eq!(
            token_refresh_after(Duration::from_secs(lifetime)).as_secs(),
            after,
            "{lifetime}"
        );
    }
}

#[test]
fn the_kubelets_status_replaces_its_own_fields_and_conditions_and_keeps_the_rest() {
    let current = json!({"phase": "Pending", "nominatedNodeName": "n1", "hostIP": "10.0.0.1",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t0"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "t0"},
            {"type": "Initialized", "status": "True", "lastTransitionTime": "t0"},
            {"type": "example.com/gate", "status": "False", "lastTransitionTime": "t0"}]});
    let ours = json!({"phase": "Running", "podIP": "10.1.0.5",
        "conditions": [
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": "True"},
            {"type": "ContainersReady", "status": "True"}]});
    let merged = super::merge_status(Some(&current), &ours, "t1");
    assert_eq!(
        merged,
        json!({"phase": "Running", "nominatedNodeName": "n1", "hostIP": "10.0.0.1", "podIP": "10.1.0.5",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t0"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "t1"},
                {"type": "Initialized", "status": "True", "lastTransitionTime": "t0"},
                {"type": "example.com/gate", "status": "False", "lastTransitionTime": "t0"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "t1"}]})
    );
    let first = super::merge_status(None, &ours, "t1");
    assert_eq!(first["conditions"].as_array().map(Vec::len), Some(3));
    assert_eq!(first["conditions"][0]["lastTransitionTime"], "t1");
    assert_eq!(first["phase"], "Running");
}
