//! The fenced restart with real Spark: a recovery-enabled SparkApplication runs
//! `tests/programs/recovery_job.py` (which commits a marker after each stage through the recovery
//! agent, with `docs/examples/spark_recovery.py`) in real driver and executor pods; its driver is
//! killed in the middle of a stage; the operator fences the old epoch and resubmits; the new
//! driver restores the last marker, skips the committed stages and ends with the same results as
//! a clean run.

use crate::real_spark_support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use operator::crd::{ApplicationStateType, SparkApplication};
use real_spark_support::{
    PeakMemory, RUN_LIMIT, app_spark_conf, await_terminal, driver_exit_code, driver_log,
    real_spark_sandbox, report,
};
use sandbox::spark_demo::clean_result;
use serde_json::json;

/// Stages of the job, and seconds per task (four tasks a stage on one executor core).
const STAGES: u64 = 4;
const TASK_SECONDS: &str = "0.75";

/// Polls until `probe` answers (a driver's log line, a status); bounded by [`RUN_LIMIT`]. On
/// time-out it fails with what the application and its pods show.
async fn wait_for<T, F, Fut>(sandbox: &sandbox::Sandbox, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        if started.elapsed() > RUN_LIMIT {
            panic!(
                "{what} did not happen within {RUN_LIMIT:?}\n{}",
                diagnostics(sandbox).await
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The application's status, and every pod's phase, containers and log tail.
async fn diagnostics(sandbox: &sandbox::Sandbox) -> String {
    let apps: Api<SparkApplication> = Api::namespaced(sandbox.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), "default");
    let mut out = format!(
        "application: {:?}\n",
        apps.get("staged").await.ok().and_then(|a| a.status)
    );
    for pod in pods
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let status = pod.status.clone().unwrap_or_default();
        out.push_str(&format!(
            "pod {name}: {:?} init {:?} main {:?}\n",
            status.phase, status.init_container_statuses, status.container_statuses
        ));
        for c in pod
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
        {
            let params = kube::api::LogParams {
                container: Some(c.name.clone()),
                tail_lines: Some(15),
                ..Default::default()
            };
            let log = pods.logs(&name, &params).await.unwrap_or_default();
            out.push_str(&format!("--- {name}/{}:\n{log}\n", c.name));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_real_spark_a_killed_driver_resumes_after_its_last_committed_stage() {
    let sandbox = real_spark_sandbox().await;
    let _operator = sandbox
        .start_operator()
        .await
        .expect("the operator starts with fenced restarts on");
    let app: SparkApplication = serde_json::from_value(json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "staged", "namespace": "default"},
        "spec": {
            "type": "Python",
            "mode": "cluster",
            "image": "apache/spark:4.3.0",
            "sparkVersion": "4.3.0",
            "mainApplicationFile": format!("local://{}/recovery_job.py", sandbox::SPARK_WORK_DIR),
            "arguments": [STAGES.to_string(), TASK_SECONDS],
            "sparkConf": app_spark_conf(),
            "driver": {"cores": 1, "memory": "512m", "serviceAccount": sandbox::driver_account::NAME},
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
            "restartPolicy": {
                "type": "OnFailure",
                "onFailureRetries": 2,
                "onFailureRetryInterval": 1,
                "onSubmissionFailureRetries": 2,
                "onSubmissionFailureRetryInterval": 1,
                "recovery": {"enabled": true},
            },
        },
    }))
    .expect("manifest");
    let apps: Api<SparkApplication> = Api::namespaced(sandbox.client.clone(), "default");
    let memory = PeakMemory::start();
    let started = Instant::now();
    apps.create(&PostParams::default(), &app)
        .await
        .expect("create the SparkApplication");

    // The first driver committed two stages and is in the middle of the third: kill it.
    let (first, epoch) = wait_for(&sandbox, "the first driver to start stage 3", || {
        let (apps, sandbox) = (apps.clone(), &sandbox);
        async move {
            let status = apps.get("staged").await.ok()?.status?;
            let epoch = status.recovery_status?.epoch;
            let pod = status.driver_info.pod_name;
            let log = driver_log(sandbox, &pod).await;
            log.contains(&format!("recovery-started stage=3 epoch={epoch}"))
                .then_some((pod, epoch))
        }
    })
    .await;
    let log = driver_log(&sandbox, &first).await;
    for stage in 1..=2 {
        assert!(
            log.contains(&format!(
                "recovery-committed stage={stage} epoch={epoch} result={}",
                clean_result(stage)
            )),
            "the first driver committed stage {stage}:\n{log}"
        );
    }
    sandbox
        .cluster
        .kubelet
        .kill("default", &first, None, 137)
        .expect("kill the driver mid-stage");

    let done = await_terminal(&apps, "staged").await;
    let status = done.status.clone().unwrap_or_default();
    let second = status.driver_info.pod_name.clone();
    let pods = Api::namespaced(sandbox.client.clone(), "default");
    let code = driver_exit_code(&pods, &second).await;
    report(
        "a killed and fenced SparkApplication",
        started,
        memory.finish(),
    );
    let log = driver_log(&sandbox, &second).await;
    assert_eq!(
        status.app_state.state,
        ApplicationStateType::Completed,
        "{status:?}\n{log}"
    );
    assert_eq!(code, 0, "{log}");
    assert_ne!(second, first, "the rerun is a new driver pod");
    let recovery = status.recovery_status.clone().expect("recovery status");
    assert_eq!(recovery.epoch, epoch + 1);
    assert_eq!(recovery.restored_from_epoch, Some(epoch));

    // The rerun restored stage 2, redid only the stage in flight, and its results are a clean
    // run's.
    let rerun = epoch + 1;
    assert!(
        log.contains(&format!("recovery-restored epoch={rerun} stage=2")),
        "{log}"
    );
    let started_stages: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("recovery-started "))
        .collect();
    assert_eq!(
        started_stages,
        [
            format!("recovery-started stage=3 epoch={rerun}"),
            format!("recovery-started stage=4 epoch={rerun}"),
        ],
        "committed stages are skipped"
    );
    let clean: Vec<String> = (1..=STAGES).map(|s| clean_result(s).to_string()).collect();
    assert!(
        log.contains(&format!(
            "recovery-result epoch={rerun} results={}",
            clean.join(",")
        )),
        "the results equal a clean run's:\n{log}"
    );
}
