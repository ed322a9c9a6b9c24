//! Shared by the `e2e_*` tests: the operator's sandbox (an in-process kubesim and a real
//! submitter over mTLS on 127.0.0.1:0) and the operator's controller as a task that can be dropped
//! and started again.
#![allow(dead_code)] // each test crate uses a different part

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use operator::controller::{RunConfig, run};
use operator::crd::{ApplicationStateType, SparkApplication};
use operator::leader::{LeaderConfig, run_elected};
use operator::reconciler::Health;
use sandbox::{Sandbox, SandboxConfig};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

pub const LEASE: &str = "spark-operator-leader";

/// Longest a test waits for one condition.
pub const WAIT: Duration = Duration::from_secs(30);

/// The lease duration of [`Env::elected_operator`] replicas.
pub const LEASE_DURATION: Duration = Duration::from_secs(2);

/// The sandbox (kubesim and the submitter over mTLS) with fenced restarts off by default; it
/// derefs to the [`Sandbox`] for `cluster` and `client`.
pub struct Env {
    sandbox: Sandbox,
}

impl std::ops::Deref for Env {
    type Target = Sandbox;

    fn deref(&self) -> &Sandbox {
        &self.sandbox
    }
}

/// A running operator; dropping it stops it (the task is aborted, as a crash would).
pub struct Operator {
    pub health: Arc<Health>,
    task: JoinHandle<()>,
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

impl Env {
    pub async fn start() -> Env {
        init_tracing();
        let config = SandboxConfig::new(env!("CARGO_BIN_EXE_sandbox").into());
        Env {
            sandbox: Sandbox::start(config).await.unwrap(),
        }
    }

    /// The sandbox's configuration without fenced restarts.
    pub fn run_config(&self) -> RunConfig {
        let mut config = self.sandbox.run_config();
        config.settings.recovery = None;
        config.instance = Some("e2e".into());
        config
    }

    /// Starts the controller and waits until the CRD is served.
    pub async fn operator(&self) -> Operator {
        self.operator_with(self.run_config()).await
    }

    pub async fn operator_with(&self, config: RunConfig) -> Operator {
        self.operator_as(self.client.clone(), config).await
    }

    /// Starts the controller with `client`'s credentials and waits until its caches sync.
    pub async fn operator_as(&self, client: kube::Client, config: RunConfig) -> Operator {
        let health = Arc::new(Health::default());
        let task = tokio::spawn({
            let health = health.clone();
            async move {
                run(client, config, health, std::future::pending())
                    .await
                    .unwrap();
            }
        });
        let operator = Operator { health, task };
        let health = operator.health.clone();
        wait_until("the operator's caches to sync", || {
            let ready = health.ready();
            async move { ready.then_some(()) }
        })
        .await;
        operator
    }

    /// Starts a replica behind leader election on the Lease `default/spark-operator-leader`
    /// (2 s lease); it does not wait for anything.
    pub fn elected_operator(&self, identity: &str) -> Operator {
        let health = Arc::new(Health::default());
        let leader = LeaderConfig {
            namespace: "default".into(),
            lease_name: LEASE.into(),
            identity: identity.into(),
            lease_duration: LEASE_DURATION,
            retry_period: Duration::from_millis(300),
        };
        let mut config = self.run_config();
        config.instance = Some(identity.into());
        let task = tokio::spawn({
            let client = self.client.clone();
            let health = health.clone();
            async move {
                let _ = run_elected(client, config, leader, health, std::future::pending()).await;
            }
        });
        Operator { health, task }
    }

    /// The leader Lease's holder.
    pub async fn lease_holder(&self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), "default");
        leases.get_opt(LEASE).await.unwrap()?.spec?.holder_identity
    }

    pub fn apps(&self) -> Api<SparkApplication> {
        Api::namespaced(self.client.clone(), "default")
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// Creates a SparkApplication named `name` in `default`, with `extra` merged into its spec.
    pub async fn create_app(&self, name: &str, extra: Value) -> SparkApplication {
        self.create_app_in("default", name, extra).await
    }

    /// Creates a SparkApplication named `name` in `namespace`, with `extra` merged into its spec.
    pub async fn create_app_in(
        &self,
        namespace: &str,
        name: &str,
        extra: Value,
    ) -> SparkApplication {
        let mut spec = json!({
            "type": "Scala",
            "mode": "cluster",
            "image": "spark:4.0.0",
            "sparkVersion": "4.0.0",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            "driver": {"cores": 1, "memory": "512m",
                       "annotations": {"kubesim.io/run-seconds": "0.3"}},
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
        });
        merge(&mut spec, &extra);
        let app: SparkApplication = serde_json::from_value(json!({
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": "SparkApplication",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }))
        .unwrap();
        Api::<SparkApplication>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), &app)
            .await
            .unwrap()
    }

    /// Waits until the app reaches `state`.
    pub async fn wait_for_state(
        &self,
        name: &str,
        state: ApplicationStateType,
    ) -> SparkApplication {
        self.wait_for_state_in("default", name, state).await
    }

    /// [`Env::wait_for_state`] for an app in `namespace`.
    pub async fn wait_for_state_in(
        &self,
        namespace: &str,
        name: &str,
        state: ApplicationStateType,
    ) -> SparkApplication {
        let apps: Api<SparkApplication> = Api::namespaced(self.client.clone(), namespace);
        watch_app(apps, name, &format!("{name} to reach {state:?}"), |app| {
            app.status.as_ref().map(|s| s.app_state.state) == Some(state)
        })
        .await
    }

    /// Waits until `probe` holds for the app.
    pub async fn wait_for_app(
        &self,
        name: &str,
        what: &str,
        probe: impl Fn(&SparkApplication) -> bool,
    ) -> SparkApplication {
        watch_app(self.apps(), name, what, probe).await
    }

    /// The driver pods of `app` (by the operator's app-name label).
    pub async fn driver_pods(&self, app: &str) -> Vec<Pod> {
        self.pods()
            .list(&ListParams::default().labels(&format!(
                "sparkoperator.k8s.io/app-name={app},spark-role=driver"
            )))
            .await
            .unwrap()
            .items
    }

    /// How many pod `create` requests kubesim has counted (not bounded like the journal).
    pub fn pod_create_requests(&self) -> u64 {
        self.cluster
            .control
            .counts()
            .iter()
            .filter(|c| c.verb == "create" && c.resource == "pods")
            .map(|c| c.count)
            .sum()
    }

    /// How many watch requests kubesim has served for `resource` (each resume is one).
    pub fn watch_requests(&self, resource: &str) -> u64 {
        self.cluster
            .control
            .counts()
            .iter()
            .filter(|c| c.watch && c.resource == resource)
            .map(|c| c.count)
            .sum()
    }

    /// How many `list` requests kubesim has served (watches excluded).
    pub fn list_calls(&self) -> u64 {
        self.cluster
            .control
            .counts()
            .iter()
            .filter(|c| c.verb == "list" && !c.watch)
            .map(|c| c.count)
            .sum()
    }

    /// A client of the service account `default/spark-operator` (made here), granted `rules`
    /// by a Role and a RoleBinding in each of `namespaces`, and nothing anywhere else.
    pub async fn operator_account(&self, namespaces: &[&str], rules: &Value) -> kube::Client {
        use k8s_openapi::api::core::v1::ServiceAccount;
        use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "spark-operator"}})).unwrap();
        Api::<ServiceAccount>::namespaced(self.client.clone(), "default")
            .create(&PostParams::default(), &account)
            .await
            .unwrap();
        for ns in namespaces {
            let role: Role = serde_json::from_value(
                json!({"metadata": {"name": "spark-operator"}, "rules": rules}),
            )
            .unwrap();
            Api::<Role>::namespaced(self.client.clone(), ns)
                .create(&PostParams::default(), &role)
                .await
                .unwrap();
            let binding: RoleBinding = serde_json::from_value(json!({
                "metadata": {"name": "spark-operator"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": "spark-operator"},
                "subjects": [{"kind": "ServiceAccount", "name": "spark-operator",
                              "namespace": "default"}],
            }))
            .unwrap();
            Api::<RoleBinding>::namespaced(self.client.clone(), ns)
                .create(&PostParams::default(), &binding)
                .await
                .unwrap();
        }
        let token = self
            .cluster
            .service_account_token("default", "spark-operator")
            .unwrap();
        kubesim::Cluster::client_from_kubeconfig(&self.cluster.token_kubeconfig(&token, "default"))
            .await
            .unwrap()
    }

    /// The Warning events with `reason` recorded about the application `app` in `default`.
    pub async fn warnings(&self, app: &str, reason: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), "default");
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some("Warning")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(app)
            })
            .collect()
    }

    /// Pod creations kubesim journaled (POSTs to a pods collection).
    pub fn pod_creations(&self) -> usize {
        self.cluster
            .control
            .journal()
            .iter()
            .filter(|e| {
                e.method == "POST"
                    && !e.path.contains("dryRun")
                    && e.path.split('?').next().unwrap_or("").ends_with("/pods")
            })
            .count()
    }
}

/// An executor pod as a Spark driver of `app` creates it: Spark's role label, the operator's
/// labels from the executor confs, owned by the driver pod; its `spark-exec-id` is the number
/// that ends `name`.
pub fn executor_pod(app: &SparkApplication, driver: &Pod, name: &str, annotations: Value) -> Pod {
    let status = app.status.as_ref().unwrap();
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": annotations,
            "labels": {
                "spark-role": "executor",
                "spark-exec-id": name.rsplit('-').next(),
                "spark-app-selector": status.spark_application_id,
                "sparkoperator.k8s.io/app-name": app.metadata.name,
                "sparkoperator.k8s.io/launched-by-spark-operator": "true",
                "sparkoperator.k8s.io/submission-id": status.submission_id,
            },
            // As Spark makes them from the operator's executor template: the driver as
            // controller, the application as a plain owner.
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                "name": driver.metadata.name, "uid": driver.metadata.uid, "controller": true},
                {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
                "name": app.metadata.name, "uid": app.metadata.uid}],
        },
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "spark-kubernetes-executor", "image": "apache/spark:4.0.4"}]},
    }))
    .unwrap()
}

/// The operator's rules in a namespace as the chart grants them (`ss.operator.rules` in
/// charts/spark-submitter/templates/_helpers.tpl), without a recovery store.
pub fn chart_operator_rules() -> Value {
    json!([
        {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["sparkapplications"],
         "verbs": ["get", "list", "watch", "create", "delete"]},
        {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["sparkapplications/status"],
         "verbs": ["update"]},
        {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["scheduledsparkapplications"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["sparkoperator.k8s.io"],
         "resources": ["scheduledsparkapplications/status"], "verbs": ["update"]},
        {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["sparkconnects"],
         "verbs": ["list", "watch"]},
        {"apiGroups": ["sparkoperator.k8s.io"], "resources": ["sparkconnects/status"],
         "verbs": ["update"]},
        {"apiGroups": [""], "resources": ["pods"],
         "verbs": ["get", "list", "watch", "create", "delete"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "create"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["create"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {"apiGroups": ["scheduling.volcano.sh", "scheduling.x-k8s.io"],
         "resources": ["podgroups"], "verbs": ["create"]},
    ])
}

fn merge(base: &mut Value, extra: &Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (key, value) in extra {
                match base.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge(existing, value)
                    }
                    _ => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, extra) => *base = extra.clone(),
    }
}

/// Waits until `probe` holds for the app `name`, for at most [`WAIT`]: reads it (a GET), then
/// watches it from that version (its name as the field selector), reading it again when the
/// watch ends (at the latest after 10 s). No LIST, so tests that count the operator's LIST calls
/// can wait with it too.
async fn watch_app(
    apps: Api<SparkApplication>,
    name: &str,
    what: &str,
    probe: impl Fn(&SparkApplication) -> bool,
) -> SparkApplication {
    use futures::TryStreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let follow = async {
        loop {
            // An app not made yet (a schedule's next run) is watched from now, and read again
            // within a second in case it was made between the read and the watch.
            let (version, seconds) = match apps.get_opt(name).await.ok().flatten() {
                Some(app) if probe(&app) => return app,
                Some(app) => (app.metadata.resource_version.unwrap_or_default(), 10),
                None => (String::new(), 1),
            };
            let params = WatchParams::default()
                .fields(&format!("metadata.name={name}"))
                .timeout(seconds);
            let Ok(events) = apps.watch(&params, &version).await else {
                continue;
            };
            let mut events = std::pin::pin!(events);
            while let Ok(Some(event)) = events.try_next().await {
                match event {
                    WatchEvent::Added(app) | WatchEvent::Modified(app) if probe(&app) => {
                        return app;
                    }
                    WatchEvent::Deleted(_) => panic!("{what}: the app was deleted"),
                    // An expired version (410) ends this watch: read the app again.
                    WatchEvent::Error(_) => break,
                    _ => {}
                }
            }
        }
    };
    tokio::time::timeout(WAIT, follow)
        .await
        .unwrap_or_else(|_| panic!("timed out after {WAIT:?} waiting for {what}"))
}

/// Polls `probe` every 50 ms until it answers, for at most [`WAIT`].
pub async fn wait_until<T, F, Fut>(what: &str, probe: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_within(what, WAIT, probe).await
}

/// Polls `probe` every 50 ms until it answers, for at most `limit`.
pub async fn wait_within<T, F, Fut>(what: &str, limit: Duration, probe: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Installs a minimal copy of a PodGroup CRD (`podgroups.<group>`, namespaced, schemaless), as
/// the tests' stand-in for a batch scheduler's installation (Volcano's
/// `scheduling.volcano.sh/v1beta1`, scheduler-plugins' `scheduling.x-k8s.io/v1alpha1`).
pub async fn install_pod_group_crd(client: &kube::Client, group: &str, version: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("podgroups.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "PodGroup", "plural": "podgroups", "singular": "podgroup",
                      "listKind": "PodGroupList"},
            "versions": [{"name": version, "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}
