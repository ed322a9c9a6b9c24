//! Real Spark on kubesim: our PySpark job (`tests/programs/pi.py`) submitted through each of our
//! paths runs in real driver and executor pods, from the local pyspark distribution (kubesim's
//! Spark image mapping, docs/kubesim.md).
//!
//! In every run the driver starts from the objects our submitter created (its `spark.properties`
//! ConfigMap mounted at `/opt/spark/conf`), creates its executor pod through kubesim's API from
//! inside its pod (the service-account token is its only credential: the Spark image gets no
//! kubeconfig), the executor connects back through the driver's headless Service, the tasks run
//! in the executor pod (their host name is in the result), the result is in the driver's log,
//! the driver container exits 0 and the driver deletes its executor.
//!
//! The paths: the REST API (`submitter serve`, the binary, over mTLS, called by our Rust client),
//! the CLI (`submitter submit` and `submitter wait` against it), and a SparkApplication (the
//! operator in process, through the sandbox's submitter).
//!
//! `real_spark_smoke_*` is the quick check; the `slow_real_spark_*` runs cover the other paths
//! (`cargo nextest run -E 'not test(/^slow_/)'` leaves them out locally; CI runs them all). One
//! real run at a time (a lock here, a nextest test group across processes), each bounded in
//! memory (512m driver, one 512m executor) and time; each prints its wall time and the peak
//! memory of the processes it ran.

use crate::real_spark_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, LogParams, PostParams};
use operator::crd::{ApplicationStateType, SparkApplication};
use real_spark_support::{
    DRIVER_CONTAINER, PeakMemory, RUN_LIMIT, app_spark_conf, await_terminal, driver_exit_code,
    real_spark_sandbox, report, spark_confs,
};
use sandbox::Sandbox;
use serde_json::{Value, json};
use submission::api::{DriverPhase, SubmitRequest};
use submitter_client::{ClientConfig, SubmitterClient};

/// What `pi.py 4 100000` computes: its partitions draw from seeded generators, so the count is
/// the same however the tasks are scheduled.
const PI_RESULT: &str = "pi-result pi=3.143460 hits=314346 samples=400000";

/// Only one real Spark run at a time in this process (memory and the two cores).
static ONE_RUN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A `spark-submit` argument vector for `pi.py 4 100000` in `default`.
fn spark_submit_args(name: &str) -> Vec<String> {
    let mut args: Vec<String> = [
        "--master",
        "k8s://https://kubernetes.default.svc:443",
        "--deploy-mode",
        "cluster",
        "--name",
        name,
        "--conf",
        "spark.kubernetes.namespace=default",
    ]
    .map(String::from)
    .into();
    for (k, v) in spark_confs() {
        args.push("--conf".into());
        args.push(format!("{k}={v}"));
    }
    args.extend(
        [
            &format!("local://{}/pi.py", sandbox::SPARK_WORK_DIR),
            "4",
            "100000",
        ]
        .map(|s| s.to_string()),
    );
    args
}

/// What the real run left behind, checked the same way for every path.
async fn check_real_run(sandbox: &Sandbox, driver: &str, exit_code: i32) {
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), "default");
    let log = pods
        .logs(
            driver,
            &LogParams {
                container: Some(DRIVER_CONTAINER.into()),
                ..LogParams::default()
            },
        )
        .await
        .expect("the driver's log");
    assert_eq!(
        exit_code, 0,
        "the driver container exits 0; its log:\n{log}"
    );
    let result = log
        .lines()
        .find(|l| l.starts_with("pi-result "))
        .unwrap_or_else(|| panic!("the job's result is in the driver's log:\n{log}"));
    assert!(result.starts_with(PI_RESULT), "{result}");
    let hosts = result
        .split_once("hosts=")
        .map(|(_, h)| h.trim())
        .unwrap_or_default();

    // The driver's own requests, as kubesim received them: its executor pod, owned by the
    // driver pod, told to reach the driver through the driver's Service.
    let driver_pod = pods.get(driver).await.expect("the driver pod");
    let driver_uid = driver_pod.metadata.uid.clone().unwrap_or_default();
    let journal = sandbox.cluster.control.journal();
    let executors: Vec<&Value> = journal
        .iter()
        .filter(|e| e.method == "POST" && e.path.starts_with("/api/v1/namespaces/default/pods"))
        .map(|e| &e.body)
        .filter(|b| b.pointer("/metadata/labels/spark-role") == Some(&json!("executor")))
        .filter(|b| {
            b.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| refs.iter().any(|r| r["uid"] == json!(driver_uid)))
        })
        .collect();
    assert_eq!(
        executors.len(),
        1,
        "the driver created one executor pod, owned by the driver pod"
    );
    let executor = executors[0];
    let executor_name = executor
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    assert_eq!(hosts, executor_name, "the tasks ran in the executor pod");
    let env = executor
        .pointer("/spec/containers/0/env")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let driver_url = env
        .iter()
        .find(|v| v["name"] == "SPARK_DRIVER_URL")
        .and_then(|v| v["value"].as_str())
        .unwrap_or_default();
    let service = driver_service_host(sandbox, &driver_pod).await;
    assert_eq!(
        driver_url,
        format!("spark://CoarseGrainedScheduler@{service}:7078"),
        "the executor connects to the driver through its Service"
    );
    assert!(
        log.contains("Registered executor"),
        "the executor registered with the driver:\n{log}"
    );
    // The driver deletes its executors when it stops; none is left.
    let left: Vec<String> = pods
        .list(&kube::api::ListParams::default().labels("spark-role=executor"))
        .await
        .expect("list executors")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect();
    assert!(left.is_empty(), "executors left behind: {left:?}");
}

/// `spark.driver.host` from the `spark.properties` the driver was started with (the ConfigMap
/// our submitter made): the driver Service's name.
async fn driver_service_host(sandbox: &Sandbox, driver: &Pod) -> String {
    let conf_map = driver
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter(|v| v.name == "spark-conf-volume-driver")
        .find_map(|v| v.config_map.as_ref().map(|c| c.name.clone()))
        .expect("the driver mounts its conf ConfigMap");
    let maps: Api<ConfigMap> = Api::namespaced(sandbox.client.clone(), "default");
    let properties = maps
        .get(&conf_map)
        .await
        .expect("the driver's ConfigMap")
        .data
        .and_then(|mut d| d.remove("spark.properties"))
        .unwrap_or_default();
    properties
        .lines()
        .find_map(|l| l.strip_prefix("spark.driver.host="))
        .map(str::to_owned)
        .expect("spark.driver.host is set")
}

/// `submitter serve` (the binary) over mTLS against the sandbox's kubesim, with the sandbox's
/// certificates; its client configuration is the operator identity's.
struct SubmitterServe {
    client: ClientConfig,
    _child: tokio::process::Child,
}

impl SubmitterServe {
    async fn start(sandbox: &Sandbox) -> SubmitterServe {
        let dir = sandbox.dir();
        let kubeconfig = dir.join("kubeconfig");
        sandbox
            .cluster
            .write_kubeconfig(&kubeconfig)
            .expect("kubeconfig");
        let policy = dir.join("policy.yaml");
        std::fs::write(
            &policy,
            format!(
                "clients:\n  - identity: {}\n    namespaces: [default]\n    serviceAccounts: [\"*\"]\n",
                sandbox::OPERATOR_IDENTITY
            ),
        )
        .expect("policy");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = tokio::process::Command::new(submitter_bin())
            .arg("serve")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--tls-cert")
            .arg(dir.join("server.crt"))
            .arg("--tls-key")
            .arg(dir.join("server.key"))
            .arg("--client-ca")
            .arg(dir.join("ca.crt"))
            .arg("--policy")
            .arg(&policy)
            .env("RUST_LOG", "warn")
            .kill_on_drop(true)
            .spawn()
            .expect("submitter serve starts");
        let mut client = ClientConfig::new(format!("https://localhost:{port}"));
        client.ca = Some(dir.join("ca.crt"));
        client.cert = Some(dir.join("operator.crt"));
        client.key = Some(dir.join("operator.key"));
        // Status answers wait for the service's watch caches: retry its 503s a while.
        client.max_retries = 30;
        client.initial_backoff = Duration::from_millis(200);
        SubmitterClient::new(client.clone())
            .expect("client")
            .wait_for_connection(Duration::from_secs(30))
            .await
            .expect("submitter serve answers over mTLS");
        SubmitterServe {
            client,
            _child: child,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_spark_smoke_pyspark_pi_runs_in_real_pods_through_the_rest_api() {
    let _one = ONE_RUN.lock().await;
    let sandbox = real_spark_sandbox().await;
    let serve = SubmitterServe::start(&sandbox).await;
    let client = SubmitterClient::new(serve.client.clone()).expect("client");
    let memory = PeakMemory::start();
    let started = Instant::now();
    let response = client
        .submit(&SubmitRequest {
            submission_id: "real-spark-rest-1".into(),
            spark_submit_args: spark_submit_args("pi-rest"),
            driver_pod_template: None,
            executor_pod_template: None,
        })
        .await
        .expect("submitted over mTLS");
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), "default");
    let code = driver_exit_code(&pods, &response.driver_pod_name).await;
    report("the REST API", started, memory.finish());
    check_real_run(&sandbox, &response.driver_pod_name, code).await;
    let status = client
        .driver_status("default", &response.driver_pod_name)
        .await
        .expect("status");
    assert_eq!(status.phase, DriverPhase::Succeeded);
}

/// The `submitter` binary (`SUBMITTER_BIN`, or the one cargo built beside the `sandbox` binary).
fn submitter_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("SUBMITTER_BIN") {
        return path.into();
    }
    let beside = Path::new(env!("CARGO_BIN_EXE_sandbox")).with_file_name("submitter");
    assert!(
        beside.is_file(),
        "the CLI path runs the `submitter` binary: build it (`cargo build -p submitter`) or set \
         SUBMITTER_BIN"
    );
    beside
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_real_spark_pyspark_pi_runs_in_real_pods_through_the_cli() {
    let _one = ONE_RUN.lock().await;
    let sandbox = real_spark_sandbox().await;
    let serve = SubmitterServe::start(&sandbox).await;
    let client = serve.client.clone();
    let cli = |args: &[String]| {
        let mut cmd = tokio::process::Command::new(submitter_bin());
        cmd.args(args)
            .env("SUBMITTER_URL", &client.url)
            .env(
                "SUBMITTER_CA",
                client.ca.as_deref().unwrap_or(Path::new("")),
            )
            .env(
                "SUBMITTER_CERT",
                client.cert.as_deref().unwrap_or(Path::new("")),
            )
            .env(
                "SUBMITTER_KEY",
                client.key.as_deref().unwrap_or(Path::new("")),
            )
            .env("RUST_LOG", "warn")
            .kill_on_drop(true);
        cmd
    };
    let memory = PeakMemory::start();
    let started = Instant::now();
    let mut submit_args = vec!["submit".to_string()];
    submit_args.extend(spark_submit_args("pi-cli"));
    let submitted = cli(&submit_args).output().await.expect("submitter submit");
    assert!(
        submitted.status.success(),
        "{}",
        String::from_utf8_lossy(&submitted.stderr)
    );
    let driver_ref = String::from_utf8_lossy(&submitted.stdout)
        .trim()
        .to_string();
    let (ns, driver) = driver_ref.split_once(':').expect("namespace:pod");
    assert_eq!(ns, "default");
    let waited = tokio::time::timeout(
        RUN_LIMIT,
        cli(&[
            "wait".into(),
            "--interval".into(),
            "1".into(),
            driver_ref.clone(),
        ])
        .output(),
    )
    .await
    .expect("`submitter wait` returns within the run's bound")
    .expect("submitter wait");
    report("`submitter submit`", started, memory.finish());
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), "default");
    let code = driver_exit_code(&pods, driver).await;
    check_real_run(&sandbox, driver, code).await;
    assert_eq!(
        waited.status.code(),
        Some(0),
        "`submitter wait` reports success: {}",
        String::from_utf8_lossy(&waited.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_real_spark_pyspark_pi_runs_in_real_pods_as_a_spark_application() {
    let _one = ONE_RUN.lock().await;
    let sandbox = real_spark_sandbox().await;
    let mut config = sandbox.run_config();
    config.settings.recovery = None;
    let _operator = sandbox
        .start_operator_with(config)
        .await
        .expect("the operator starts");
    let spark_conf = app_spark_conf();
    let app: SparkApplication = serde_json::from_value(json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "pi-app", "namespace": "default"},
        "spec": {
            "type": "Python",
            "mode": "cluster",
            "image": "apache/spark:4.3.0",
            "sparkVersion": "4.3.0",
            "mainApplicationFile": format!("local://{}/pi.py", sandbox::SPARK_WORK_DIR),
            "arguments": ["4", "100000"],
            "sparkConf": spark_conf,
            "driver": {"cores": 1, "memory": "512m", "serviceAccount": sandbox::driver_account::NAME},
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
            "restartPolicy": {"type": "Never"},
        },
    }))
    .expect("manifest");
    let apps: Api<SparkApplication> = Api::namespaced(sandbox.client.clone(), "default");
    let memory = PeakMemory::start();
    let started = Instant::now();
    apps.create(&PostParams::default(), &app)
        .await
        .expect("create the SparkApplication");
    let done = await_terminal(&apps, "pi-app").await;
    report("a SparkApplication", started, memory.finish());
    let status = done.status.clone().unwrap_or_default();
    let driver = status.driver_info.pod_name.clone();
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), "default");
    let code = driver_exit_code(&pods, &driver).await;
    check_real_run(&sandbox, &driver, code).await;
    assert_eq!(
        status.app_state.state,
        ApplicationStateType::Completed,
        "{status:?}"
    );
    // The executor the driver started is in the status, as its pod last showed it (the driver
    // deletes its executors when it finishes).
    assert_eq!(status.executor_state.len(), 1, "{status:?}");
    assert_eq!(
        status
            .executor_counts
            .map(|c| c.pending + c.running + c.completed + c.failed),
        Some(1),
        "{status:?}"
    );
}
