//! Kubeflow's examples, unchanged, through our operator with real Spark on kubesim.
//!
//! Every file of kubeflow/spark-operator's `examples/` (the SparkConnect example has its own
//! test) is applied, every document of it, with server-side apply as `kubectl apply
//! --server-side -f` does. The documents come from `tests/data/kubeflow/manifests.rs`, which
//! writes each file's objects with the upstream field values (see that folder's README); with
//! `KUBEFLOW_EXAMPLES_DIR` set to a checkout's `examples/` folder, the upstream files themselves
//! are read and applied instead, after checking that the built-in documents equal them. Each SparkApplication
//! must reach `COMPLETED` with `Pi is roughly 3…` in its driver's log, the TTL example is then
//! deleted by its TTL, and the ScheduledSparkApplication (`@every 3m`, whose first tick is three
//! minutes after it is created) must create its first run, which must complete too. No
//! `UnsupportedFields` condition may appear on any application in any watch event, and no
//! `UnsupportedFields` event may be recorded.
//!
//! The test creates only what the examples presuppose a cluster has: the `default` namespace
//! (kubesim's), the `spark-operator-spark` service account with the Role kubeflow's chart gives
//! it, the `test-configmap` ConfigMap `spark-pi-configmap.yaml` mounts (empty, as kubeflow's own
//! e2e test makes it), and minimal PodGroup CRDs standing for installed Volcano and
//! scheduler-plugins (kubesim's scheduler binds pods whatever their `schedulerName`: it plays
//! those schedulers too).
//!
//! The Spark image: `docker.io/apache/spark:4.0.4` runs the local pyspark 4.3 distribution
//! (kubesim's Spark image mapping), which has `examples/src/main/python/pi.py`. What it lacks is
//! made here as image content, not product: `examples/jars/spark-examples.jar` with a stand-in
//! `org.apache.spark.examples.SparkPi` that caps its slices at 4 (`spark-pi-prometheus.yaml` asks
//! for 100,000 tasks), and `/prometheus/jmx_prometheus_javaagent-0.11.0.jar`, a stand-in Java
//! agent that prints its arguments (`tests/data/kubeflow/image/`, compiled with `javac` against
//! pyspark's jars). The prometheus example's placeholder image is listed in the mapping as an
//! exact image: the simulated cluster's registry has it.
//!
//! Two files run at a time (files whose applications share a name, such as the three
//! `spark-pi`, run one after the other, the previous one deleted first); the schedule's run
//! joins them when its tick comes, and the schedule is deleted once that run is checked. The test prints each example's wall time, the total and the
//! peak memory of the pods' processes.

use crate::e2e_support;
#[path = "../data/kubeflow/manifests.rs"]
mod manifests;
use crate::real_spark_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use e2e_support::install_pod_group_crd;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::discovery::Scope;
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher::{self, Event};
use operator::crd::{ApplicationStateType as State, ScheduledSparkApplication, SparkApplication};
use operator::schedule::SCHEDULED_APP_NAME_LABEL;
use real_spark_support::{PeakMemory, RUN_LIMIT, driver_log, init_tracing};
use sandbox::{Sandbox, SandboxConfig};
use serde_json::{Value, json};

/// Names a checkout's `examples/` folder whose files are applied instead of the built-in
/// manifests.
const EXAMPLES_DIR_VAR: &str = "KUBEFLOW_EXAMPLES_DIR";
/// The stand-ins' sources.
const IMAGE_SOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/kubeflow/image");

/// `spark-pi-prometheus.yaml`'s image, placeholder and all.
const PROMETHEUS_IMAGE: &str =
    "{IMAGE_REGISTRY}/{IMAGE_REPOSITORY}/docker.io/apache/spark:4.0.4-gcs-prometheus";
/// Where the examples find Spark's example programs in the image.
const EXAMPLES_JAR: &str = "/opt/spark/examples/jars/spark-examples.jar";
/// Where `spark-pi-prometheus.yaml` finds the JMX exporter in its image.
const JMX_AGENT: &str = "/prometheus/jmx_prometheus_javaagent-0.11.0.jar";

/// The SparkApplication files, in two lanes that run side by side; a lane's files run one after
/// the other. Files whose applications share a name are in one lane (`spark-pi` thrice,
/// `spark-pi-python` twice); the lanes take about as long (the Python ones are the slowest).
const LANES: [&[&str]; 2] = [
    &[
        "spark-pi.yaml",
        "spark-pi-prometheus.yaml",
        "spark-pi-emptydir.yaml",
        "spark-pi-configmap.yaml",
        "spark-pi-custom-resource.yaml",
        "spark-pi-dynamic-allocation.yaml",
        "spark-pi-kube-scheduler.yaml",
    ],
    &[
        "spark-pi-python.yaml",
        "spark-pi-ttl.yaml",
        "spark-pi-prometheus-servlet.yaml",
        "spark-pi-pod-template.yaml",
        "spark-pi-volcano.yaml",
        "spark-pi-yunikorn.yaml",
    ],
];

/// The ScheduledSparkApplication file and its object's name.
const SCHEDULED: (&str, &str) = ("spark-pi-scheduled.yaml", "spark-pi-scheduled");

/// The first run comes three minutes after the schedule is created; it then runs as any other.
const FIRST_RUN_LIMIT: Duration = Duration::from_secs(180 + 240);

/// The drivers' account as kubeflow's chart renders it for the job namespace `default`
/// (`templates/spark/serviceaccount.yaml` and `rbac.yaml`).
const SPARK_ACCOUNT: &str = r#"
apiVersion: v1
kind: ServiceAccount
automountServiceAccountToken: true
metadata:
  name: spark-operator-spark
  namespace: default
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: spark-operator-spark
  namespace: default
rules:
- apiGroups: [""]
  resources: [pods, configmaps, persistentvolumeclaims, services]
  verbs: [get, list, watch, create, update, patch, delete, deletecollection]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: spark-operator-spark
  namespace: default
subjects:
- kind: ServiceAccount
  name: spark-operator-spark
  namespace: default
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: spark-operator-spark
"#;

/// The documents of a YAML file, as JSON (empty documents left out).
fn documents(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    yaml_serde::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("a YAML document"))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The documents `file` applies: the built-in ones, or with [`EXAMPLES_DIR_VAR`] set the
/// upstream file's, which must equal the built-in ones.
fn example(file: &str) -> Vec<Value> {
    let built_in = manifests::documents(file).unwrap_or_else(|| panic!("{file} is described"));
    let Some(dir) = std::env::var_os(EXAMPLES_DIR_VAR) else {
        return built_in;
    };
    let path = Path::new(&dir).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let upstream = documents(&quote_placeholder_image(&text));
    assert_eq!(
        upstream, built_in,
        "{file}: the built-in documents (left: upstream) follow the file"
    );
    upstream
}

/// `spark-pi-prometheus.yaml` publishes its image unquoted as `{IMAGE_REGISTRY}/…`; a plain YAML
/// value cannot start with `{` (it opens a flow mapping), so `kubectl apply` refuses the file
/// as published. The value is quoted, nothing else changed.
fn quote_placeholder_image(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        match body.split_once("image: {") {
            Some((indent, rest)) if indent.trim().is_empty() => {
                out.push_str(&format!("{indent}image: \"{{{rest}\""));
                out.push_str(&line[body.len()..]);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// Applies every document of `docs` as `kubectl apply --server-side` does: the kind's resource
/// found through discovery, the object's namespace or `default` (the context's), field manager
/// `kubectl`, no forced conflicts.
async fn apply(client: &kube::Client, docs: &[Value]) {
    for doc in docs {
        let api_version = doc["apiVersion"].as_str().expect("apiVersion");
        let kind = doc["kind"].as_str().expect("kind");
        let name = doc["metadata"]["name"].as_str().expect("metadata.name");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, caps): (ApiResource, _) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("{kind} {api_version} is served: {e}"));
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                let ns = doc["metadata"]["namespace"].as_str().unwrap_or("default");
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        api.patch(name, &PatchParams::apply("kubectl"), &Patch::Apply(doc))
            .await
            .unwrap_or_else(|e| panic!("kubectl apply {kind}/{name}: {e}"));
    }
}

/// The stand-ins for the image content pyspark lacks, built into `dir` with the JDK's `javac`
/// and `jar` against the jars of `spark_home`: (spark-examples.jar, the JMX agent jar).
fn image_stand_ins(dir: &Path, spark_home: &Path) -> (PathBuf, PathBuf) {
    let run = |cmd: &mut Command| {
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("{cmd:?} (a JDK is needed: javac and jar): {e}"));
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let sources = Path::new(IMAGE_SOURCES);
    let (pi_classes, agent_classes) = (dir.join("pi"), dir.join("agent"));
    run(Command::new("javac")
        .arg("-d")
        .arg(&pi_classes)
        .arg("-cp")
        .arg(spark_home.join("jars/*"))
        .arg(sources.join("SparkPi.java")));
    run(Command::new("javac")
        .arg("-d")
        .arg(&agent_classes)
        .arg(sources.join("JmxExporterAgent.java")));
    let manifest = dir.join("agent.mf");
    std::fs::write(
        &manifest,
        "Premain-Class: kubesim.standin.JmxExporterAgent\n",
    )
    .expect("the agent's manifest");
    let (examples_jar, agent_jar) = (dir.join("spark-examples.jar"), dir.join("agent.jar"));
    run(Command::new("jar")
        .arg("cf")
        .arg(&examples_jar)
        .arg("-C")
        .arg(&pi_classes)
        .arg("."));
    run(Command::new("jar")
        .arg("cfm")
        .arg(&agent_jar)
        .arg(&manifest)
        .arg("-C")
        .arg(&agent_classes)
        .arg("."));
    (examples_jar, agent_jar)
}

type AppEvents = BoxStream<'static, Result<Event<SparkApplication>, watcher::Error>>;

/// A watch of the applications `config` selects, returned once its initial listing is done, so
/// every change after this call is seen.
async fn watch_apps(api: Api<SparkApplication>, config: watcher::Config) -> AppEvents {
    let mut events = watcher::watcher(api, config).boxed();
    let listed = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = events.next().await {
            if matches!(event, Ok(Event::InitDone)) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(listed, Ok(true), "the watch lists the applications");
    events
}

/// Panics if `app` carries an `UnsupportedFields` condition.
fn assert_nothing_unsupported(app: &SparkApplication) {
    let status = app.status.as_ref();
    let unsupported = status
        .into_iter()
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == operator::unsupported::CONDITION_TYPE);
    assert!(
        unsupported.is_none(),
        "{:?} reports unsupported fields: {unsupported:?}",
        app.metadata.name
    );
}

/// Follows `events` until an application reaches COMPLETED, checking every version seen;
/// another terminal state, a deletion or the end of the bound fails the test.
async fn until_completed(events: &mut AppEvents, what: &str, limit: Duration) -> SparkApplication {
    let watched = async {
        // A watch error is retried by the watcher; a few in a row are tolerated.
        let mut errors = 0;
        while let Some(event) = events.next().await {
            let app = match event {
                Ok(Event::Apply(app) | Event::InitApply(app)) => app,
                Ok(Event::Delete(app)) => {
                    panic!(
                        "{what}: {:?} was deleted before it completed",
                        app.metadata.name
                    )
                }
                Ok(Event::Init | Event::InitDone) => continue,
                Err(e) => {
                    errors += 1;
                    assert!(errors < 20, "{what}: the watch keeps failing: {e}");
                    continue;
                }
            };
            assert_nothing_unsupported(&app);
            let Some(status) = app.status.as_ref() else {
                continue;
            };
            match status.app_state.state {
                State::Completed => return app,
                State::Failed | State::SubmissionFailed => {
                    panic!("{what}: {:?} ended {status:?}", app.metadata.name)
                }
                _ => {}
            }
        }
        panic!("{what}: the watch ended");
    };
    tokio::time::timeout(limit, watched)
        .await
        .unwrap_or_else(|_| panic!("{what} did not complete within {limit:?}"))
}

/// Follows `events` until the application is deleted.
async fn until_deleted(mut events: AppEvents, what: &str, limit: Duration) {
    let watched = async {
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Delete(_)) => return,
                Ok(Event::Apply(app) | Event::InitApply(app)) => assert_nothing_unsupported(&app),
                _ => {}
            }
        }
        panic!("{what}: the watch ended");
    };
    tokio::time::timeout(limit, watched)
        .await
        .unwrap_or_else(|_| panic!("{what} was not deleted within {limit:?}"));
}

/// The completed application's driver log, which must have SparkPi's (or pi.py's) result.
async fn check_pi(sandbox: &Sandbox, app: &SparkApplication, what: &str) -> String {
    let driver = &app.status.as_ref().expect("status").driver_info.pod_name;
    assert!(!driver.is_empty(), "{what}: driverInfo.podName is set");
    let log = driver_log(sandbox, driver).await;
    assert!(
        log.lines().any(|l| l.starts_with("Pi is roughly 3.1")),
        "{what}: the driver {driver} printed the result; its log:\n{log}"
    );
    log
}

async fn driver_pod(sandbox: &Sandbox, app: &SparkApplication) -> Pod {
    let driver = &app.status.as_ref().expect("status").driver_info.pod_name;
    Api::<Pod>::namespaced(sandbox.client.clone(), "default")
        .get(driver)
        .await
        .expect("the driver pod")
}

/// What some examples exist to show, seen on the driver.
async fn check_example_specifics(sandbox: &Sandbox, file: &str, app: &SparkApplication, log: &str) {
    match file {
        "spark-pi-prometheus.yaml" => {
            // The JVM ran the exporter agent with kubeflow's port and the operator's config file.
            assert!(
                log.contains(
                    "jmx exporter stand-in: args=8090:/etc/metrics/conf/prometheus.yaml config-readable=true"
                ),
                "{file}: the driver's JVM ran the JMX exporter agent:\n{log}"
            );
        }
        "spark-pi-configmap.yaml" => {
            // As kubeflow's e2e test checks: the volume and its mount are on the driver.
            let spec = driver_pod(sandbox, app).await.spec.expect("spec");
            let volume = spec
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == "config-vol")
                .expect("the config-vol volume");
            assert_eq!(
                volume.config_map.as_ref().map(|c| c.name.as_str()),
                Some("test-configmap")
            );
            let driver = spec
                .containers
                .iter()
                .find(|c| c.name == real_spark_support::DRIVER_CONTAINER)
                .expect("the driver container");
            assert!(
                driver
                    .volume_mounts
                    .iter()
                    .flatten()
                    .any(|m| m.name == "config-vol" && m.mount_path == "/opt/spark/config"),
                "{file}: {:?}",
                driver.volume_mounts
            );
        }
        "spark-pi-pod-template.yaml" => {
            // The template's environment, from its ConfigMaps and Secrets, is on the driver.
            let spec = driver_pod(sandbox, app).await.spec.expect("spec");
            let driver = spec
                .containers
                .iter()
                .find(|c| c.name == real_spark_support::DRIVER_CONTAINER)
                .expect("the driver container");
            let env: Vec<&str> = driver
                .env
                .iter()
                .flatten()
                .map(|e| e.name.as_str())
                .collect();
            for name in ["KEY0", "KEY1", "KEY2"] {
                assert!(env.contains(&name), "{file}: {name} in {env:?}");
            }
            assert_eq!(driver.env_from.as_ref().map(Vec::len), Some(2), "{file}");
        }
        _ => {}
    }
}

/// Runs one SparkApplication file: applied, each application watched to COMPLETED and checked,
/// then deleted (the TTL example is left to its TTL: the returned task waits for that).
async fn run_example(sandbox: &Sandbox, file: &'static str) -> Option<tokio::task::JoinHandle<()>> {
    let started = Instant::now();
    let docs = example(file);
    let names: Vec<String> = docs
        .iter()
        .filter(|d| d["kind"] == "SparkApplication")
        .map(|d| d["metadata"]["name"].as_str().expect("name").to_owned())
        .collect();
    assert_eq!(names.len(), 1, "{file}: one SparkApplication");
    let name = names[0].clone();
    let apps: Api<SparkApplication> = Api::namespaced(sandbox.client.clone(), "default");
    let mut events = watch_apps(
        apps.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .await;
    apply(&sandbox.client, &docs).await;
    let app = until_completed(&mut events, file, RUN_LIMIT).await;
    let log = check_pi(sandbox, &app, file).await;
    check_example_specifics(sandbox, file, &app, &log).await;
    eprintln!(
        "{file}: COMPLETED in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if let Some(ttl) = app.spec.time_to_live_seconds {
        // Observed COMPLETED above; the operator deletes it `ttl` seconds after it ended.
        let limit = Duration::from_secs(u64::try_from(ttl).unwrap_or(0) + 60);
        return Some(tokio::spawn(until_deleted(events, file, limit)));
    }
    let uid = app.metadata.uid.clone().expect("uid");
    apps.delete(&name, &DeleteParams::default())
        .await
        .expect("delete the application");
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(apps, &name, conditions::is_deleted(&uid)),
    )
    .await
    .unwrap_or_else(|_| panic!("{file}: {name} is gone within a minute"))
    .expect("watching the deletion");
    None
}

/// Runs a lane's files one after the other; the TTL waits it leaves behind.
async fn run_lane(sandbox: &Sandbox, files: &[&'static str]) -> Vec<tokio::task::JoinHandle<()>> {
    let mut left = Vec::new();
    for file in files {
        left.extend(run_example(sandbox, file).await);
    }
    left
}

/// Waits (on `runs`, the watch of the schedule's runs) for the schedule's first run to
/// complete, checks it, then deletes the schedule so that no second run loads the machine
/// while the other examples finish.
async fn first_scheduled_run(sandbox: &Sandbox, mut runs: AppEvents, started: Instant) {
    let (schedule_file, schedule_name) = SCHEDULED;
    let run = until_completed(&mut runs, schedule_file, FIRST_RUN_LIMIT).await;
    let run_name = run.metadata.name.clone().expect("name");
    check_pi(sandbox, &run, schedule_file).await;
    let owner = run
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
        .expect("the run is owned");
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("ScheduledSparkApplication", schedule_name)
    );
    let schedules: Api<ScheduledSparkApplication> =
        Api::namespaced(sandbox.client.clone(), "default");
    let schedule = schedules.get(schedule_name).await.expect("the schedule");
    // Named after its tick, the first `@every 3m` tick: three minutes after the schedule was
    // made (a few seconds more if the operator first saw it late).
    let tick: i64 = run_name
        .strip_prefix(&format!("{schedule_name}-"))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{run_name} is named after its tick"));
    let created = schedule
        .metadata
        .creation_timestamp
        .as_ref()
        .expect("creationTimestamp")
        .0
        .as_second();
    assert!(
        (180..=190).contains(&(tick - created)),
        "first tick {tick}, schedule created {created}"
    );
    eprintln!(
        "{schedule_file}: first run {run_name} COMPLETED at {:.1} s",
        started.elapsed().as_secs_f64()
    );
    schedules
        .delete(schedule_name, &DeleteParams::default())
        .await
        .expect("delete the schedule");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubeflow_example_runs_unchanged_to_completed() {
    init_tracing();
    let total = Instant::now();
    // Every example file runs, once; with upstream files given, each is checked against its
    // built-in description before anything starts.
    let mut planned: Vec<&str> = LANES.concat();
    planned.push(SCHEDULED.0);
    planned.sort_unstable();
    let mut described = manifests::FILES.to_vec();
    described.sort_unstable();
    assert_eq!(planned, described, "every example file is run once");
    for file in manifests::FILES {
        example(file);
    }
    let stand_ins = tempfile::tempdir().expect("tempdir");
    let spark_home = kubesim::kubelet::spark_image::SparkImage::resolve(
        &Default::default(),
        &stand_ins.path().join("resolved"),
    )
    .expect("the local pyspark distribution and Java 17")
    .home;
    let (examples_jar, agent_jar) = image_stand_ins(stand_ins.path(), &spark_home);
    let mut config = SandboxConfig::real_spark(env!("CARGO_BIN_EXE_sandbox").into());
    let spark = config.spark.as_mut().expect("the Spark image mapping");
    spark.images.push(PROMETHEUS_IMAGE.to_owned());
    spark.files.extend(BTreeMap::from([
        (PathBuf::from(EXAMPLES_JAR), examples_jar),
        (PathBuf::from(JMX_AGENT), agent_jar),
    ]));
    let sandbox = Sandbox::start(config)
        .await
        .expect("the real-Spark sandbox starts (root, Java 17 and pyspark are needed)");
    let mut run_config = sandbox.run_config();
    run_config.settings.recovery = None;
    let _operator = sandbox
        .start_operator_with(run_config)
        .await
        .expect("the operator starts");

    // What the examples presuppose.
    apply(&sandbox.client, &documents(SPARK_ACCOUNT)).await;
    let test_configmap: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "test-configmap", "namespace": "default"},
    }))
    .expect("ConfigMap");
    Api::<ConfigMap>::namespaced(sandbox.client.clone(), "default")
        .create(&PostParams::default(), &test_configmap)
        .await
        .expect("create test-configmap");
    install_pod_group_crd(&sandbox.client, "scheduling.volcano.sh", "v1beta1").await;
    install_pod_group_crd(&sandbox.client, "scheduling.x-k8s.io", "v1alpha1").await;

    let memory = PeakMemory::start();
    // The schedule first: its first tick is three minutes away, and its run is watched from now.
    let apps: Api<SparkApplication> = Api::namespaced(sandbox.client.clone(), "default");
    let (schedule_file, schedule_name) = SCHEDULED;
    let runs = watch_apps(
        apps.clone(),
        watcher::Config::default().labels(&format!("{SCHEDULED_APP_NAME_LABEL}={schedule_name}")),
    )
    .await;
    apply(&sandbox.client, &example(schedule_file)).await;
    let schedule = first_scheduled_run(&sandbox, runs, total);

    let (a, b, ()) = tokio::join!(
        run_lane(&sandbox, LANES[0]),
        run_lane(&sandbox, LANES[1]),
        schedule
    );
    for ttl in a.into_iter().chain(b) {
        ttl.await.expect("the TTL example is deleted by its TTL");
    }

    // Nothing was reported unsupported, as an event either.
    let events: Api<KubeEvent> = Api::namespaced(sandbox.client.clone(), "default");
    let unsupported: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(operator::unsupported::REASON))
        .filter_map(|e| e.note)
        .collect();
    assert!(unsupported.is_empty(), "{unsupported:?}");
    eprintln!(
        "kubeflow examples: wall {:.1} s in all, peak memory of the pods' processes {} MiB",
        total.elapsed().as_secs_f64(),
        memory.finish()
    );
}
