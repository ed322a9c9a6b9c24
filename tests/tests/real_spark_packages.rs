//! Maven packages and a Spark conf ConfigMap, as kubeflow users write them, in a real Spark run on
//! kubesim: a SparkApplication with `deps.packages`, `deps.repositories` and
//! `deps.excludePackages` naming a tiny library (tests/programs/greeting, compiled by the test
//! with javac and laid out as a Maven repository on the local disk), and a `sparkConfigMap`
//! holding a `log4j2.properties`.
//!
//! No client resolves anything: the operator passes the packages as `--packages`,
//! `--repositories` and `--exclude-packages`, the submitter hands them to the driver in
//! `spark.properties`, and the driver's own `spark-submit` (client mode inside the pod) resolves
//! them with Ivy from the repository, which kubesim's Spark image mapping lays at
//! `/opt/maven-repo` (a `file://` repository, no network). The driver calls the library
//! through py4j and the executor through SQL's `reflect` (`tests/programs/packages_job.py`), so
//! the jar reached both class paths. The driver logs through the ConfigMap's log4j2 pattern,
//! which it reads because `SPARK_CONF_DIR` names the ConfigMap's mount, `/etc/spark/conf`.

use crate::real_spark_support;

use std::path::{Path, PathBuf};
use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use operator::crd::{ApplicationStateType, SparkApplication};
use real_spark_support::{
    PeakMemory, app_spark_conf, await_terminal, driver_exit_code, driver_log, init_tracing, report,
};
use sandbox::{Sandbox, SandboxConfig};
use serde_json::json;

/// Where the pods see the Maven repository.
const REPO_IN_IMAGE: &str = "/opt/maven-repo";

/// What the ConfigMap's log4j2 pattern puts before every line the driver's Spark logs.
const LOG_MARK: &str = "from-spark-config-map";

/// The greeting library, built by its script into a Maven repository under `dir`.
fn maven_repository(dir: &Path) -> PathBuf {
    let repo = dir.join("maven-repo");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("programs/greeting/make_repo.sh");
    let status = std::process::Command::new("bash")
        .arg(&script)
        .arg(&repo)
        .status()
        .expect("run make_repo.sh (javac and jar of Java 17 are needed)");
    assert!(status.success(), "make_repo.sh failed: {status}");
    assert!(
        repo.join("org/example/greeting/1.0.0/greeting-1.0.0.jar")
            .is_file()
    );
    repo
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_real_spark_driver_resolves_deps_packages_from_a_local_maven_repository() {
    init_tracing();
    let build = tempfile::tempdir().expect("a temporary folder");
    let repo = maven_repository(build.path());
    let mut config = SandboxConfig::real_spark(env!("CARGO_BIN_EXE_sandbox").into());
    if let Some(spark) = config.spark.as_mut() {
        spark.files.insert(REPO_IN_IMAGE.into(), repo);
    }
    let sandbox = Sandbox::start(config)
        .await
        .expect("the real-Spark sandbox starts (root, Java 17 and pyspark are needed)");
    let mut run = sandbox.run_config();
    run.settings.recovery = None;
    let _operator = sandbox
        .start_operator_with(run)
        .await
        .expect("the operator starts");

    let config_maps: Api<ConfigMap> = Api::namespaced(sandbox.client.clone(), "default");
    let log4j = [
        "rootLogger.level = info",
        "rootLogger.appenderRef.stdout.ref = console",
        "appender.console.type = Console",
        "appender.console.name = console",
        "appender.console.target = SYSTEM_ERR",
        "appender.console.layout.type = PatternLayout",
        &format!("appender.console.layout.pattern = {LOG_MARK} %p %c{{1}}: %m%n"),
    ]
    .join("\n");
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "spark-conf"},
                "data": {"log4j2.properties": log4j},
            }))
            .expect("ConfigMap"),
        )
        .await
        .expect("create the Spark conf ConfigMap");

    let mut spark_conf = app_spark_conf();
    // Ivy's cache in the container's own layer, not the home folder (the host's, here).
    spark_conf.insert(
        "spark.jars.ivy".into(),
        json!(format!("{}/.ivy", sandbox::SPARK_WORK_DIR)),
    );
    let app: SparkApplication = serde_json::from_value(json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "packages-app", "namespace": "default"},
        "spec": {
            "type": "Python",
            "mode": "cluster",
            "image": "apache/spark:4.3.0",
            "sparkVersion": "4.3.0",
            "mainApplicationFile": format!("local://{}/packages_job.py", sandbox::SPARK_WORK_DIR),
            "arguments": ["4"],
            "sparkConf": spark_conf,
            "sparkConfigMap": "spark-conf",
            "deps": {
                "packages": ["org.example:greeting:1.0.0"],
                "repositories": [format!("file://{REPO_IN_IMAGE}")],
                "excludePackages": ["org.example:unused"],
            },
            "driver": {"cores": 1, "memory": "512m", "memoryLimit": "1g",
                       "serviceAccount": sandbox::driver_account::NAME},
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
    let done = await_terminal(&apps, "packages-app").await;
    report(
        "a SparkApplication with deps.packages",
        started,
        memory.finish(),
    );
    let status = done.status.clone().unwrap_or_default();
    let driver = status.driver_info.pod_name.clone();
    let pods: Api<Pod> = Api::namespaced(sandbox.client.clone(), "default");
    let code = driver_exit_code(&pods, &driver).await;
    let log = driver_log(&sandbox, &driver).await;
    assert_eq!(code, 0, "the driver exits 0; its log:\n{log}");
    assert_eq!(
        status.app_state.state,
        ApplicationStateType::Completed,
        "{status:?}"
    );
    assert!(
        !status
            .conditions
            .iter()
            .any(|c| c.type_ == operator::unsupported::CONDITION_TYPE),
        "nothing is reported unsupported: {status:?}"
    );

    // The driver's Ivy resolved the package from the local repository.
    for line in [
        "org.example#greeting added as a dependency",
        "found org.example#greeting;1.0.0 in",
        &format!("downloading file:{REPO_IN_IMAGE}/org/example/greeting/1.0.0/greeting-1.0.0.jar"),
    ] {
        assert!(log.contains(line), "the driver's log has {line:?}:\n{log}");
    }
    // The job used it on the driver and on the executor.
    let result = log
        .lines()
        .find(|l| l.starts_with("packages-result "))
        .unwrap_or_else(|| panic!("the job's result is in the driver's log:\n{log}"));
    assert_eq!(
        result,
        "packages-result driver=hello driver from greeting 1.0.0 executors=hello 0 from greeting \
         1.0.0|hello 1 from greeting 1.0.0|hello 2 from greeting 1.0.0|hello 3 from greeting 1.0.0"
    );
    // Spark logged through the ConfigMap's log4j2.properties.
    assert!(
        log.lines().any(|l| l.starts_with(&format!(
            "{LOG_MARK} INFO SparkContext: Running Spark version"
        ))),
        "the driver logs with the sparkConfigMap's pattern:\n{log}"
    );
    // And the driver pod got the memory limit asked for, over Spark's (request = 512m + 384m).
    let pod = pods.get(&driver).await.expect("the driver pod");
    let container = pod
        .spec
        .as_ref()
        .and_then(|s| {
            s.containers
                .iter()
                .find(|c| c.name == real_spark_support::DRIVER_CONTAINER)
        })
        .expect("the driver container");
    let resources = container.resources.clone().unwrap_or_default();
    let quantity = |m: Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| { m.and_then(|m| m.get("memory").map(|q| q.0.clone())) };
    assert_eq!(quantity(resources.requests).as_deref(), Some("896Mi"));
    assert_eq!(quantity(resources.limits).as_deref(), Some("1Gi"));
}
