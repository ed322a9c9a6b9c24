//! Pod logs as kube-rs reads them from the API server: followed while the container runs and
//! ended at its exit, tails, limits, timestamps, the previous instance after a restart, and the
//! API server's refusals.

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, PostParams};
use serde_json::{Value, json};

use super::support::{Sim, eventually, start, start_with_images};

fn pod(name: &str, annotations: Value, spec: Value) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": name, "annotations": annotations}, "spec": spec}),
    )
    .unwrap()
}

async fn create(sim: &Sim, name: &str, annotations: Value, spec: Value) -> Api<Pod> {
    let api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    api.create(&PostParams::default(), &pod(name, annotations, spec))
        .await
        .unwrap();
    api
}

/// Waits until `container` (or init container) of the pod is running.
async fn running(api: &Api<Pod>, name: &str, container: &str) {
    eventually(15, || async {
        let p = api.get(name).await.ok()?;
        let status = p.status?;
        let statuses = status.container_statuses.into_iter().flatten();
        let init = status.init_container_statuses.into_iter().flatten();
        let c = statuses.chain(init).find(|c| c.name == container)?;
        c.state.as_ref()?.running.as_ref().map(|_| ())
    })
    .await
}

async fn kill(sim: &Sim, name: &str, container: &str) {
    sim.control(
        "POST",
        &format!("/pods/default/{name}/kill"),
        &json!({"container": container, "exitCode": 137}).to_string(),
    )
    .await;
}

/// The error status kube-rs reports for a log request: (code, message).
async fn refusal(api: &Api<Pod>, name: &str, params: &LogParams) -> (u16, String) {
    match api.logs(name, params).await {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_followed_scripted_log_shows_lines_while_it_runs_and_ends_at_exit() {
    let sim = start().await;
    let spec = json!({"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1"}]});
    let api = create(&sim, "f", json!({"kubesim.io/run-seconds": "-1"}), spec).await;
    running(&api, "f", "main").await;
    let params = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let mut lines = api.log_stream("f", &params).await.unwrap().lines();
    let first = lines.next().await.unwrap().unwrap();
    assert_eq!(first, "kubesim: container main started");
    let progress = lines.next().await.unwrap().unwrap();
    assert_eq!(progress, "kubesim: container main running for 1s");
    // The container still runs: the stream is open, and ends only once it is killed.
    kill(&sim, "f", "main").await;
    let mut rest = Vec::new();
    while let Some(line) = lines.next().await {
        rest.push(line.unwrap());
    }
    assert_eq!(
        rest.last().map(String::as_str),
        Some("kubesim: container main exited with code 137"),
        "{rest:?}"
    );
}

#[tokio::test]
async fn a_followed_process_log_streams_its_output_and_ends_when_it_is_killed() {
    let sim = start_with_images().await;
    let spec = json!({"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "local/shell:1",
            "args": ["echo out-1; echo err-1 >&2; sleep 60"]}]});
    let api = create(&sim, "p", json!({}), spec).await;
    running(&api, "p", "main").await;
    let params = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let mut lines = api.log_stream("p", &params).await.unwrap().lines();
    let mut seen = vec![
        lines.next().await.unwrap().unwrap(),
        lines.next().await.unwrap().unwrap(),
    ];
    seen.sort();
    assert_eq!(seen, ["err-1", "out-1"]);
    kill(&sim, "p", "main").await;
    assert!(lines.next().await.is_none(), "the stream ends at the exit");
}

#[tokio::test]
async fn tail_limit_since_and_timestamps_shape_the_log() {
    let sim = start_with_images().await;
    let spec = json!({"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "local/shell:1",
            "args": ["for i in 1 2 3 4 5 6 7 8 9 10; do echo line-$i; done"]}]});
    let api = create(&sim, "t", json!({}), spec).await;
    eventually(15, || async {
        let p = api.get("t").await.ok()?;
        (p.status?.phase.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
    let read = |params: LogParams| {
        let api = api.clone();
        async move { api.logs("t", &params).await.unwrap() }
    };
    let all = read(LogParams::default()).await;
    assert_eq!(all.lines().count(), 10, "{all}");
    let tail = read(LogParams {
        tail_lines: Some(3),
        ..LogParams::default()
    })
    .await;
    assert_eq!(tail, "line-8\nline-9\nline-10\n");
    let limited = read(LogParams {
        limit_bytes: Some(9),
        ..LogParams::default()
    })
    .await;
    assert_eq!(limited, "line-1\nli");
    let stamped = read(LogParams {
        timestamps: true,
        tail_lines: Some(1),
        ..LogParams::default()
    })
    .await;
    let (stamp, text) = stamped.split_once(' ').unwrap();
    assert_eq!(text, "line-10\n");
    // RFC 3339 with nine fraction digits, as the kubelet writes it.
    assert_eq!(
        stamp.len(),
        "2024-01-01T00:00:00.000000000Z".len(),
        "{stamp}"
    );
    assert!(
        stamp.ends_with('Z') && stamp.as_bytes()[19] == b'.',
        "{stamp}"
    );
    let recent = read(LogParams {
        since_seconds: Some(3600),
        ..LogParams::default()
    })
    .await;
    assert_eq!(recent, all);
}

#[tokio::test]
async fn previous_reads_the_instance_before_a_restart_and_a_follow_ends_at_its_exit() {
    let sim = start_with_images().await;
    let spec = json!({"restartPolicy": "Always", "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "local/shell:1",
            "args": ["echo \"started $(date +%s%N)\"; sleep 60"]}]});
    let api = create(&sim, "r", json!({}), spec).await;
    running(&api, "r", "main").await;
    let previous = LogParams {
        previous: true,
        ..LogParams::default()
    };
    let (code, message) = refusal(&api, "r", &previous).await;
    assert_eq!(
        (code, message.as_str()),
        (
            400,
            "previous terminated container \"main\" in pod \"r\" not found"
        )
    );
    let follow = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let mut first = api.log_stream("r", &follow).await.unwrap().lines();
    let first_line = first.next().await.unwrap().unwrap();
    kill(&sim, "r", "main").await;
    // Following one instance ends when it exits, though the container restarts.
    assert!(first.next().await.is_none());
    let old = eventually(15, || async { api.logs("r", &previous).await.ok() }).await;
    assert_eq!(old, format!("{first_line}\n"));
    let restarted = eventually(15, || async {
        let p = api.get("r").await.ok()?;
        let c = p.status?.container_statuses?.into_iter().next()?;
        (c.restart_count == 1 && c.state?.running.is_some()).then_some(())
    });
    restarted.await;
    let current = eventually(15, || async {
        let text = api.logs("r", &LogParams::default()).await.ok()?;
        (!text.is_empty()).then_some(text)
    })
    .await;
    assert_ne!(current, old, "the new instance has a log of its own");
}

#[tokio::test]
async fn log_requests_are_refused_with_the_api_servers_messages() {
    let sim = start().await;
    let two = json!({"restartPolicy": "Never",
        "initContainers": [{"name": "setup", "image": "busybox:1"}],
        "containers": [{"name": "driver", "image": "busybox:1"},
                       {"name": "agent", "image": "busybox:1"}]});
    // The init container runs until killed: the others wait for it.
    let api = create(
        &sim,
        "two",
        json!({"kubesim.io/run-seconds.setup": "-1"}),
        two,
    )
    .await;
    let one = json!({"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1"}]});
    create(&sim, "one", json!({"kubesim.io/never-start": "true"}), one).await;
    let cases = [
        (
            "missing",
            LogParams::default(),
            404u16,
            "pods \"missing\" not found",
        ),
        (
            "two",
            LogParams::default(),
            400,
            "a container name must be specified for pod two, choose one of: [setup driver agent]",
        ),
        (
            "two",
            LogParams {
                container: Some("nope".into()),
                ..LogParams::default()
            },
            400,
            "container nope is not valid for pod two",
        ),
        (
            "two",
            LogParams {
                container: Some("driver".into()),
                ..LogParams::default()
            },
            400,
            "container \"driver\" in pod \"two\" is waiting to start: PodInitializing",
        ),
        (
            "one",
            LogParams::default(),
            400,
            "container \"main\" in pod \"one\" is waiting to start: ContainerCreating",
        ),
    ];
    running(&api, "two", "setup").await;
    eventually(15, || async {
        let p = api.get("one").await.ok()?;
        p.spec?.node_name.map(|_| ())
    })
    .await;
    for (i, (name, params, code, message)) in cases.into_iter().enumerate() {
        let got = refusal(&api, name, &params).await;
        assert_eq!(got, (code, message.to_string()), "case {i}");
    }
}

/// Starts a pod whose scripted container runs until killed and returns its node.
async fn running_forever(sim: &Sim, name: &str) -> (Api<Pod>, String) {
    let spec = json!({"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1"}]});
    let api = create(sim, name, json!({"kubesim.io/run-seconds": "-1"}), spec).await;
    running(&api, name, "main").await;
    let node = api
        .get(name)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.node_name)
        .expect("a running pod is bound");
    (api, node)
}

#[tokio::test]
async fn a_log_request_for_a_partitioned_nodes_pod_fails_as_an_undialled_kubelet() {
    let sim = start().await;
    let (api, node) = running_forever(&sim, "cut").await;
    let host = api
        .get("cut")
        .await
        .unwrap()
        .status
        .and_then(|s| s.host_ip)
        .expect("a running pod has its node's address");
    sim.control("POST", &format!("/nodes/{node}/partition"), "")
        .await;
    let params = LogParams {
        follow: true,
        tail_lines: Some(5),
        ..LogParams::default()
    };
    match api.logs("cut", &params).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 500);
            assert_eq!(
                s.reason, "",
                "the API server does not classify a dial error"
            );
            assert_eq!(
                s.message,
                format!(
                    "Get \"https://{host}:10250/containerLogs/default/cut/main?follow=true&tailLines=5\": \
                     dial tcp {host}:10250: i/o timeout"
                )
            );
        }
        other => panic!("expected the API server's 500, got {other:?}"),
    }
    sim.control("POST", &format!("/nodes/{node}/heal"), "")
        .await;
    let log = api.logs("cut", &LogParams::default()).await.unwrap();
    assert!(
        log.starts_with("kubesim: container main started"),
        "served again after the heal: {log:?}"
    );
}

#[tokio::test]
async fn a_followed_log_ends_when_its_node_is_partitioned() {
    let sim = start().await;
    let (api, node) = running_forever(&sim, "followed").await;
    let params = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let mut lines = api.log_stream("followed", &params).await.unwrap().lines();
    let first = lines.next().await.unwrap().unwrap();
    assert_eq!(first, "kubesim: container main started");
    sim.control("POST", &format!("/nodes/{node}/partition"), "")
        .await;
    // The stream ends cleanly (the API server finishes the body it was relaying) while the
    // container still runs: no exit line comes.
    let mut rest = Vec::new();
    while let Some(line) = lines.next().await {
        rest.push(line.expect("a clean end, not a broken connection"));
    }
    assert!(
        rest.iter().all(|l| !l.contains("exited")),
        "the container did not stop: {rest:?}"
    );
}
