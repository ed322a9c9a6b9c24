//! Fenced restarts end to end on kubesim: the operator, the submitter over mTLS, and real agent
//! and staged-driver processes (this crate's `operator` binary), on both state stores. What a user
//! would check: the rerun resumes after the last committed stage, each stage's output is
//! published exactly once even with a zombie driver still running, and the events say what
//! happened.

use crate::e2e_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams};
use operator::crd::{ApplicationStateType, SparkApplication};
use operator::recovery::StoreKind;
use operator::state_machine::reasons;
use sandbox::{NAMESPACE, OperatorHandle, Sandbox, SandboxConfig, StagedApp, StagedRun};

use e2e_support::wait_within;
use sandbox::redis::RedisServer;
use sandbox::redis_cluster::RedisCluster;

/// Longest one scenario waits for a condition (drivers are real processes on 2 shared cores).
const WAIT: Duration = Duration::from_secs(60);

async fn sandbox(store: StoreKind, heartbeat_timeout_seconds: i64) -> (Sandbox, OperatorHandle) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
    let mut config = SandboxConfig::new(env!("CARGO_BIN_EXE_sandbox").into());
    config.store = store;
    config.heartbeat_timeout_seconds = heartbeat_timeout_seconds;
    config.agent_heartbeat_millis = 300;
    let sandbox = Sandbox::start(config).await.unwrap();
    let operator = sandbox.start_operator().await.unwrap();
    (sandbox, operator)
}

fn apps(sandbox: &Sandbox) -> Api<SparkApplication> {
    Api::namespaced(sandbox.client.clone(), NAMESPACE)
}

/// Waits until the driver of the current epoch committed `stage` and started the next one;
/// returns its pod name and epoch.
async fn wait_mid_stage_after(sandbox: &Sandbox, app: &str, stage: u64) -> (String, u64) {
    let apps = apps(sandbox);
    wait_within(&format!("{app} to commit stage {stage}"), WAIT, || {
        let apps = apps.clone();
        async move {
            let current = apps.get(app).await.ok()?;
            let status = current.status?;
            let epoch = status.recovery_status?.epoch;
            let run = StagedRun::read(sandbox, app);
            let mid = run.committed.contains(&(stage, epoch))
                && run.started.contains(&(stage + 1, epoch));
            (mid && !status.driver_info.pod_name.is_empty())
                .then_some((status.driver_info.pod_name, epoch))
        }
    })
    .await
}

async fn wait_for_state(
    sandbox: &Sandbox,
    app: &str,
    state: ApplicationStateType,
) -> SparkApplication {
    let apps = apps(sandbox);
    wait_within(&format!("{app} to reach {state:?}"), WAIT, || {
        let apps = apps.clone();
        async move {
            let current = apps.get(app).await.ok()?;
            let now = current.status.as_ref()?.app_state.state;
            assert!(
                now == state || !now.is_terminal(),
                "{app} ended {now:?} instead of {state:?}: {:?}",
                current.status
            );
            (now == state).then_some(current)
        }
    })
    .await
}

/// `(type, reason, note)` of the app's events.
async fn events(sandbox: &Sandbox, app: &str) -> Vec<(String, String, String)> {
    let events: Api<Event> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(app))
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

fn has_reason(events: &[(String, String, String)], reason: &str) -> bool {
    events.iter().any(|(_, r, _)| r == reason)
}

/// Every stage `1..=stages` was published exactly once, in order.
fn assert_each_stage_once(run: &StagedRun, stages: u64) {
    let published: Vec<u64> = run.committed.iter().map(|(stage, _)| *stage).collect();
    assert_eq!(
        published,
        (1..=stages).collect::<Vec<_>>(),
        "published stages {:?} (the whole run: {run:?})",
        run.committed
    );
}

async fn killed_driver_resumes_from_the_next_stage(store: StoreKind) -> Sandbox {
    let (sandbox, _operator) = sandbox(store, 30).await;
    let app = StagedApp {
        stages: 5,
        stage_millis: 600,
        ..StagedApp::new("killed")
    };
    sandbox.create_staged_app(&app).await.unwrap();
    let (pod, epoch) = wait_mid_stage_after(&sandbox, "killed", 2).await;
    sandbox
        .cluster
        .kubelet
        .kill(NAMESPACE, &pod, None, 137)
        .unwrap();

    let done = wait_for_state(&sandbox, "killed", ApplicationStateType::Completed).await;
    let run = StagedRun::read(&sandbox, "killed");
    assert_each_stage_once(&run, 5);
    assert_eq!(run.resumed_from_stage(), Some(3), "{run:?}");
    assert_eq!(
        run.stages_redone(),
        vec![3],
        "only the stage in flight is redone"
    );
    assert!(run.restored.contains(&(Some(2), epoch + 1)), "{run:?}");
    let recovery = done.status.unwrap().recovery_status.unwrap();
    assert_eq!(recovery.epoch, epoch + 1);
    assert_eq!(recovery.restored_from_epoch, Some(epoch));
    let events = events(&sandbox, "killed").await;
    assert!(
        events
            .iter()
            .any(|(_, reason, note)| reason == reasons::EPOCH_ADVANCED
                && note.contains(&format!("epoch {}", epoch + 1))),
        "{events:?}"
    );
    assert!(
        !has_reason(&events, reasons::RESTART_FROM_ZERO),
        "{events:?}"
    );
    // The killed driver's pod went before its successor came: one driver pod is left.
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    let left: Vec<String> = pods
        .list(&ListParams::default().labels("spark-role=driver"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(left, vec![format!("killed-driver-e{}", epoch + 1)]);
    sandbox
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_driver_resumes_from_the_next_stage_with_the_kubernetes_store() {
    let sandbox = killed_driver_resumes_from_the_next_stage(StoreKind::Kubernetes).await;
    // The progress ConfigMap belongs to the application: deleting one deletes the other.
    let configmaps: Api<ConfigMap> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    let progress = configmaps.get("killed-progress").await.unwrap();
    let owners = progress.metadata.owner_references.unwrap_or_default();
    assert_eq!(
        owners
            .iter()
            .map(|o| (o.kind.as_str(), o.name.as_str()))
            .collect::<Vec<_>>(),
        [("SparkApplication", "killed")]
    );
    apps(&sandbox)
        .delete("killed", &DeleteParams::default())
        .await
        .unwrap();
    wait_within("the progress ConfigMap to be collected", WAIT, || {
        let configmaps = configmaps.clone();
        async move {
            configmaps
                .get_opt("killed-progress")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_driver_resumes_from_the_next_stage_with_the_redis_store() {
    let redis = RedisServer::start().unwrap();
    killed_driver_resumes_from_the_next_stage(StoreKind::Redis { url: redis.url() }).await;
}

/// The operator and every agent process on a Redis Cluster, through the one `redis+cluster://` URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_driver_resumes_from_the_next_stage_with_a_redis_cluster_store() {
    let cluster = tokio::task::block_in_place(RedisCluster::start).unwrap();
    killed_driver_resumes_from_the_next_stage(StoreKind::Redis { url: cluster.url() }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_before_any_commit_warns_that_it_starts_from_zero() {
    let (sandbox, _operator) = sandbox(StoreKind::Kubernetes, 30).await;
    let app = StagedApp {
        stages: 2,
        stage_millis: 1500,
        ..StagedApp::new("from-zero")
    };
    sandbox.create_staged_app(&app).await.unwrap();
    let apps = apps(&sandbox);
    let pod = wait_within("the first stage to start", WAIT, || {
        let apps = apps.clone();
        let sandbox = &sandbox;
        async move {
            let status = apps.get("from-zero").await.ok()?.status?;
            let epoch = status.recovery_status?.epoch;
            let run = StagedRun::read(sandbox, "from-zero");
            run.started
                .contains(&(1, epoch))
                .then_some(status.driver_info.pod_name)
        }
    })
    .await;
    sandbox
        .cluster
        .kubelet
        .kill(NAMESPACE, &pod, None, 137)
        .unwrap();

    wait_for_state(&sandbox, "from-zero", ApplicationStateType::Completed).await;
    let run = StagedRun::read(&sandbox, "from-zero");
    assert_each_stage_once(&run, 2);
    assert_eq!(run.resumed_from_stage(), Some(1));
    let events = events(&sandbox, "from-zero").await;
    let warning = events
        .iter()
        .find(|(_, reason, _)| reason == reasons::RESTART_FROM_ZERO)
        .unwrap_or_else(|| panic!("no {} event: {events:?}", reasons::RESTART_FROM_ZERO));
    assert_eq!(warning.0, "Warning");
}

/// The node a pod runs on.
async fn node_of(sandbox: &Sandbox, pod: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    pods.get(pod)
        .await
        .unwrap()
        .spec
        .unwrap()
        .node_name
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_driver_on_a_partitioned_node_is_fenced_and_each_stage_is_published_once() {
    // The zombie still reaches Redis (the partition cuts it from the API server only), so only
    // fencing stops its commits.
    let redis = RedisServer::start().unwrap();
    let (sandbox, _operator) = sandbox(StoreKind::Redis { url: redis.url() }, 30).await;
    let app = StagedApp {
        stages: 6,
        stage_millis: 800,
        ..StagedApp::new("zombie")
    };
    sandbox.create_staged_app(&app).await.unwrap();
    let (pod, epoch) = wait_mid_stage_after(&sandbox, "zombie", 2).await;
    let node = node_of(&sandbox, &pod).await;
    assert!(sandbox.cluster.kubelet.partition(&node));
    // The node is evicted: its pod is force-deleted while its processes keep running.
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    pods.delete(&pod, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();

    // The zombie's next commit after the fence is refused, and it stops.
    wait_within("the zombie to be fenced", WAIT, || async {
        let run = StagedRun::read(&sandbox, "zombie");
        run.fenced.iter().any(|(_, e)| *e == epoch).then_some(())
    })
    .await;
    let done = wait_for_state(&sandbox, "zombie", ApplicationStateType::Completed).await;
    assert!(sandbox.cluster.kubelet.heal(&node));

    let run = StagedRun::read(&sandbox, "zombie");
    assert_each_stage_once(&run, 6);
    let fenced_at = run
        .fenced
        .iter()
        .find(|(_, e)| *e == epoch)
        .map(|(stage, _)| *stage)
        .unwrap();
    // Whatever the zombie committed before the fence was restored, not redone; nothing after.
    assert!(
        run.committed
            .iter()
            .all(|(stage, e)| *e != epoch || *stage < fenced_at),
        "{run:?}"
    );
    let recovery = done.status.unwrap().recovery_status.unwrap();
    assert!(recovery.epoch > epoch);
    assert_eq!(recovery.restored_from_epoch, Some(epoch));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_whose_agent_stops_heartbeating_is_fenced_and_replaced() {
    // A partitioned node's agent cannot reach the API server, so the Kubernetes store hears no
    // heartbeat while the pod still looks Running.
    let (sandbox, _operator) = sandbox(StoreKind::Kubernetes, 3).await;
    let app = StagedApp {
        stages: 5,
        stage_millis: 700,
        ..StagedApp::new("silent")
    };
    sandbox.create_staged_app(&app).await.unwrap();
    let (pod, epoch) = wait_mid_stage_after(&sandbox, "silent", 2).await;
    let node = node_of(&sandbox, &pod).await;
    assert!(sandbox.cluster.kubelet.partition(&node));

    let done = wait_for_state(&sandbox, "silent", ApplicationStateType::Completed).await;
    let events = events(&sandbox, "silent").await;
    assert!(has_reason(&events, reasons::HEARTBEAT_LOST), "{events:?}");
    let recovery = done.status.unwrap().recovery_status.unwrap();
    assert!(recovery.epoch > epoch);
    assert_eq!(recovery.restored_from_epoch, Some(epoch));
    let replacement = format!("silent-driver-e{}", recovery.epoch);
    assert_ne!(node_of(&sandbox, &replacement).await, node);

    // Healed, the node learns its pod was deleted and stops the zombie; whatever the zombie tried
    // meanwhile (its commits could not reach the store, then were fenced) changed nothing.
    assert!(sandbox.cluster.kubelet.heal(&node));
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    wait_within("the zombie's pod to be gone", WAIT, || {
        let pods = pods.clone();
        let pod = pod.clone();
        async move { pods.get_opt(&pod).await.ok()?.is_none().then_some(()) }
    })
    .await;
    let run = StagedRun::read(&sandbox, "silent");
    assert_each_stage_once(&run, 5);
    assert!(
        run.committed
            .iter()
            .all(|(stage, e)| *e != epoch || *stage <= 2),
        "{run:?}"
    );
}

/// Deletes `app` (with `propagation`) and waits until it is gone.
async fn delete_app(sandbox: &Sandbox, app: &str, params: &DeleteParams) {
    let apps = apps(sandbox);
    apps.delete(app, params).await.unwrap();
    wait_within(&format!("{app} to be deleted"), WAIT, || {
        let apps = apps.clone();
        async move { apps.get_opt(app).await.ok()?.is_none().then_some(()) }
    })
    .await;
}

/// An application deleted while its progress stays behind (`keep` deletes it so), then created
/// again under the same name: the new object's driver restores nothing and runs every stage.
async fn a_recreated_application_starts_from_nothing(
    store: StoreKind,
    keep: DeleteParams,
) -> Sandbox {
    let (sandbox, _operator) = sandbox(store, 30).await;
    let first = StagedApp {
        stages: 4,
        stage_millis: 500,
        ..StagedApp::new("again")
    };
    sandbox.create_staged_app(&first).await.unwrap();
    wait_mid_stage_after(&sandbox, "again", 2).await;
    delete_app(&sandbox, "again", &keep).await;

    let second = StagedApp {
        files: "again-second".into(),
        ..first
    };
    sandbox.create_staged_app(&second).await.unwrap();
    let done = wait_for_state(&sandbox, "again", ApplicationStateType::Completed).await;
    let run = StagedRun::read(&sandbox, "again-second");
    assert_each_stage_once(&run, 4);
    assert_eq!(
        run.restored.first().map(|(stage, _)| *stage),
        Some(None),
        "the new object's first driver restored nothing: {run:?}"
    );
    assert_eq!(run.resumed_from_stage(), Some(1), "{run:?}");
    let recovery = done.status.unwrap().recovery_status.unwrap();
    assert_eq!(recovery.restored_from_epoch, None);
    sandbox
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_application_starts_from_nothing_with_the_redis_store() {
    // Redis keys outlive the application (they only expire).
    let redis = RedisServer::start().unwrap();
    a_recreated_application_starts_from_nothing(
        StoreKind::Redis { url: redis.url() },
        DeleteParams::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_application_starts_from_nothing_with_the_kubernetes_store() {
    // Deleted with its dependents orphaned (`kubectl delete --cascade=orphan`), the progress
    // ConfigMap stays under the application's name.
    let sandbox =
        a_recreated_application_starts_from_nothing(StoreKind::Kubernetes, DeleteParams::orphan())
            .await;
    // The ConfigMap now belongs to the new object.
    let configmaps: Api<ConfigMap> = Api::namespaced(sandbox.client.clone(), NAMESPACE);
    let progress = configmaps.get("again-progress").await.unwrap();
    let app = apps(&sandbox).get("again").await.unwrap();
    let owners: Vec<_> = progress
        .metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .map(|o| o.uid)
        .collect();
    assert_eq!(owners, [app.metadata.uid.unwrap()]);
}
