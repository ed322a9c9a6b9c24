//! Spark Connect through our operator, with real Spark: the widely used operator's example
//! application (`examples/sparkconnect/spark-connect.yaml` of kubeflow/spark-operator, written here
//! from its facts as `tests/data/spark_connect/spark-connect.json`: files of fetched repositories
//! stay out of this repository) is applied as a user would, with
//! what it assumes: the `spark-operator-spark` service account, granted what a Spark driver does.
//!
//! The operator makes the server pod, its ConfigMap and Service; the server pod runs Spark's own
//! `start-connect-server.sh` from the local pyspark distribution (kubesim's Spark image mapping)
//! on its own network, and its Spark asks kubesim's API server for the two executors itself.
//! The SparkConnect turns Ready when the pod's real TCP probes on 15002 pass; then pyspark's own
//! Spark Connect client (`SparkSession.builder.remote`, `tests/programs/connect_client.py`), in
//! a pod of its own, reaches the server through the Service's name and runs three queries, whose
//! results are in its log. The status counts the executors, and deleting the SparkConnect takes
//! the server and its executors with it (garbage collection through the owner references).
//!
//! One real run at a time (the `real-spark` nextest test group): three JVMs (the server with
//! Spark's default 1g heap, as the example leaves it, and two 512m executors).

use crate::real_spark_support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use operator::crd::{SparkConnect, SparkConnectState};
use real_spark_support::{PeakMemory, RUN_LIMIT, real_spark_sandbox};
use serde_json::json;

/// The example, exactly as published.
const EXAMPLE: &str = include_str!("../data/spark_connect/spark-connect.json");

/// The account the example's server pod runs as (the widely used operator's chart makes it).
const SERVICE_ACCOUNT: &str = "spark-operator-spark";

/// The client's container.
const CLIENT: &str = "client";

fn ready_with_executors(conn: Option<&SparkConnect>, executors: i64) -> bool {
    conn.and_then(|c| c.status.as_ref()).is_some_and(|s| {
        s.state == SparkConnectState::Ready
            && s.executors.get("running").copied().unwrap_or(0) >= executors
    })
}

/// Waits (on the pod's watch) until `container` of `pod` has terminated; its exit code.
async fn exit_code(pods: &Api<Pod>, pod: &str, container: &'static str) -> i32 {
    let terminated = move |pod: Option<&Pod>| {
        pod.and_then(|p| p.status.as_ref())
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.name == container)
            .and_then(|c| c.state.as_ref()?.terminated.as_ref())
            .map(|t| t.exit_code)
    };
    let pod_now = tokio::time::timeout(
        RUN_LIMIT,
        await_condition(pods.clone(), pod, move |p: Option<&Pod>| {
            terminated(p).is_some()
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("{pod} did not finish within {RUN_LIMIT:?}"))
    .expect("watching the pod");
    terminated(pod_now.as_ref()).expect("terminated")
}

/// The SparkConnect's status, its server pod's status and the server's log, for a failure.
async fn diagnosis(connects: &Api<SparkConnect>, pods: &Api<Pod>, name: &str) -> String {
    let status = connects.get(name).await.map(|c| c.status);
    let server = format!("{name}-server");
    let pod = pods.get(&server).await.map(|p| p.status);
    let log = pods
        .logs(&server, &kube::api::LogParams::default())
        .await
        .unwrap_or_default();
    let previous = pods
        .logs(
            &server,
            &kube::api::LogParams {
                previous: true,
                ..Default::default()
            },
        )
        .await
        .unwrap_or_default();
    format!(
        "status: {status:?}\nserver pod: {pod:?}\nserver log:\n{log}\nprevious server log:\n{previous}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeflows_spark_connect_example_serves_queries_of_a_real_spark_connect_client() {
    let sandbox = real_spark_sandbox().await;
    let client = sandbox.client.clone();
    sandbox::driver_account::grant_named(&client, "default", SERVICE_ACCOUNT)
        .await
        .unwrap();
    let _operator = sandbox.start_operator().await.unwrap();
    let peak = PeakMemory::start();
    let started = Instant::now();

    // `kubectl apply -f` of the example: its objects as written, through the dynamic API.
    let manifest: serde_json::Value = yaml_serde::from_str(EXAMPLE).unwrap();
    let object: DynamicObject = serde_json::from_value(manifest).unwrap();
    let resource = ApiResource::erase::<SparkConnect>(&());
    Api::<DynamicObject>::namespaced_with(client.clone(), "default", &resource)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let connects: Api<SparkConnect> = Api::namespaced(client.clone(), "default");
    let name = object.name_any();

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let Ok(ready) = tokio::time::timeout(
        RUN_LIMIT,
        await_condition(connects.clone(), &name, |c: Option<&SparkConnect>| {
            ready_with_executors(c, 0)
        }),
    )
    .await
    else {
        panic!(
            "{name} was not Ready within {RUN_LIMIT:?}:\n{}",
            diagnosis(&connects, &pods, &name).await
        );
    };
    let ready = ready.unwrap().unwrap();
    let ready_after = started.elapsed();
    let status = ready.status.clone().unwrap();
    assert_eq!(status.server.pod_name, "spark-connect-server");
    assert_eq!(status.server.service_name, "spark-connect-server");
    assert!(status.server.pod_ip.starts_with("198.18."), "{status:?}");
    let condition = &status.conditions[0];
    assert_eq!(
        (condition.type_.as_str(), condition.status.as_str()),
        ("ServerPodReady", "True")
    );
    assert!(status.start_time.is_some() && status.last_update_time.is_some());

    // The objects the operator made, owned by the SparkConnect.
    let uid = ready.uid().unwrap();
    let owned_by_it =
        |owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference]| {
            owners
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        };
    let service = Api::<Service>::namespaced(client.clone(), "default")
        .get(&status.server.service_name)
        .await
        .unwrap();
    assert!(owned_by_it(service.owner_references()));
    let ports: Vec<i32> = service
        .spec
        .as_ref()
        .unwrap()
        .ports
        .iter()
        .flatten()
        .map(|p| p.port)
        .collect();
    assert_eq!(ports, [7078, 7079, 4040, 15002]);
    let config_map = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .get("spark-connect-conf")
        .await
        .unwrap();
    assert!(owned_by_it(config_map.owner_references()));
    let server = pods.get(&status.server.pod_name).await.unwrap();
    assert!(owned_by_it(server.owner_references()));
    assert_eq!(server.labels()["key1"], "value1");
    assert_eq!(server.labels()["spark-role"], "connect-server");

    // A real client, in a pod of its own, through the Service's name.
    let url = format!("sc://{}:15002", status.server.service_name);
    let client_pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "connect-client"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": CLIENT, "image": "apache/spark:4.3.0",
            "command": ["python3", format!("{}/connect_client.py", sandbox::SPARK_WORK_DIR), url],
        }]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &client_pod)
        .await
        .unwrap();
    let code = exit_code(&pods, "connect-client", CLIENT).await;
    let log = pods
        .logs(
            "connect-client",
            &kube::api::LogParams {
                container: Some(CLIENT.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(code, 0, "the client failed:\n{log}");
    for line in [
        "connect-count 100",
        "connect-sum 499500",
        "connect-buckets [(0, 334), (1, 333), (2, 333)]",
    ] {
        assert!(log.contains(line), "{line} in:\n{log}");
    }

    // The executors the server's Spark made are in the status, labelled as the widely used
    // operator labels them.
    let with_executors = tokio::time::timeout(
        RUN_LIMIT,
        await_condition(connects.clone(), &name, |c: Option<&SparkConnect>| {
            ready_with_executors(c, 2)
        }),
    )
    .await
    .expect("both executors counted as running in the status")
    .unwrap()
    .unwrap();
    let executors = pods
        .list(&ListParams::default().labels(
            "sparkoperator.k8s.io/connect-name=spark-connect,spark-role=executor,sparkoperator.k8s.io/launched-by-spark-operator=true",
        ))
        .await
        .unwrap();
    assert_eq!(executors.items.len(), 2, "{:?}", with_executors.status);
    let peak_mib = peak.finish();
    eprintln!(
        "spark connect: Ready after {:.1} s, queries answered after {:.1} s, peak memory of the pods' processes {peak_mib} MiB",
        ready_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    // Deleting it takes the server (owned by it) and the executors (owned by the server).
    connects
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(120),
        await_condition(
            pods.clone(),
            &status.server.pod_name,
            conditions::is_deleted(&server.uid().unwrap()),
        ),
    )
    .await
    .expect("the server pod is collected with its SparkConnect")
    .unwrap();
}
