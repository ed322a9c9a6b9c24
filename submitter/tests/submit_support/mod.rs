//! Shared by the `service_submit*` tests: an in-process kubesim, the service's `app()` driven
//! with `oneshot` (no socket for the service), and checks over what ended up in the cluster.
#![allow(dead_code)] // each test crate uses a different part

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kubesim::control::{FaultRule, JournalEntry, LatencyRule, RequestCount};
use kubesim::{Cluster, ClusterConfig};
use serde_json::{Value, json};
use submission::builder::{self, DriverObjects};
use submission::meta::labels;
use submitter::policy::{Access, Policy};
use submitter::service::{ServiceConfig, app};
use submitter::state::AppState;
use submitter::tls::PeerIdentity;
use tower::ServiceExt;

/// The identity every test request carries, allowed everything by [`POLICY`].
pub const TESTER: &str = "tester.spark.svc";

pub const POLICY: &str = r#"
clients:
  - identity: tester.spark.svc
    namespaces: ["*"]
    serviceAccounts: ["*"]
  - identity: team-a
    namespaces: ["team-a"]
    serviceAccounts: ["*"]
  - identity: spark-only
    namespaces: ["*"]
    serviceAccounts: ["spark"]
"#;

/// A minimal executor template, so the executor pod-template ConfigMap is built too.
pub fn executor_template() -> Value {
    json!({"metadata": {"labels": {"team": "a"}}, "spec": {"containers": [{"name": "spark-kubernetes-executor"}]}})
}

/// The argument vector of a small cluster-mode application in `default`, plus `extra`.
pub fn args(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--master",
        "k8s://https://kubernetes.default.svc:443",
        "--deploy-mode",
        "cluster",
        "--name",
        "spark-pi",
        "--class",
        "org.apache.spark.examples.SparkPi",
        "--conf",
        "spark.kubernetes.container.image=spark:4.0.0",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for arg in extra {
        args.push((*arg).to_owned());
    }
    args.push("local:///opt/spark/examples/jars/spark-examples.jar".into());
    args
}

/// A submission request body with the executor template.
pub fn request(submission_id: &str, args: &[String]) -> Value {
    json!({
        "submission_id": submission_id,
        "spark_submit_args": args,
        "executor_pod_template": executor_template(),
    })
}

/// What the builder makes for `request` (names are deterministic; the submit time is not).
pub fn built(request: &Value) -> DriverObjects {
    let args: Vec<String> = serde_json::from_value(request["spark_submit_args"].clone()).unwrap();
    builder::build_from_argv(
        &args,
        request.get("driver_pod_template"),
        request.get("executor_pod_template"),
        request["submission_id"].as_str().unwrap(),
        0,
        "root",
    )
    .unwrap()
}

pub struct TestApp {
    pub cluster: Cluster,
    pub state: AppState,
    pub app: Router,
}

/// An answer: status, headers, JSON body (Null when not JSON).
pub struct Answer {
    pub status: StatusCode,
    pub headers: http::HeaderMap,
    pub body: Value,
}

impl TestApp {
    pub async fn start() -> TestApp {
        TestApp::start_with(ServiceConfig::default(), Duration::from_secs(5)).await
    }

    pub async fn start_with(config: ServiceConfig, call_timeout: Duration) -> TestApp {
        let cluster = Cluster::start(ClusterConfig::default()).await.unwrap();
        let state = state_for(&cluster, call_timeout);
        let app = app(state.clone(), &config);
        TestApp {
            cluster,
            state,
            app,
        }
    }

    /// Another replica on the same cluster: its own state (in-flight map), same policy.
    pub fn replica(&self, config: &ServiceConfig) -> Router {
        app(state_for(&self.cluster, Duration::from_secs(5)), config)
    }

    pub fn client(&self) -> kube::Client {
        self.cluster.client().unwrap()
    }

    pub async fn submit(&self, body: &Value) -> Answer {
        send(&self.app, submit_request(body, "", TESTER)).await
    }

    pub async fn submit_as(&self, body: &Value, identity: &str) -> Answer {
        send(&self.app, submit_request(body, "", identity)).await
    }

    pub async fn dry_run(&self, body: &Value) -> Answer {
        send(&self.app, submit_request(body, "?dryRun=true", TESTER)).await
    }

    /// Retries a submission until it succeeds (as the contract's client does on 500/503).
    pub async fn submit_until_success(&self, body: &Value) -> Answer {
        for _ in 0..20 {
            let answer = self.submit(body).await;
            if answer.status.is_success() {
                return answer;
            }
            assert!(
                matches!(answer.status.as_u16(), 500 | 503),
                "only retryable failures expected, got {} {}",
                answer.status,
                answer.body
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("submission did not converge");
    }

    pub fn fault(&self, rule: Value) {
        let rule: FaultRule = serde_json::from_value(rule).unwrap();
        self.cluster.control.add_fault(rule);
    }

    pub fn journal(&self) -> Vec<JournalEntry> {
        self.cluster.control.journal()
    }

    /// Every object of the submission's driver (by the submission label, without the id's
    /// claim), by kind: (kind, object).
    pub async fn objects_of(&self, built: &DriverObjects) -> Vec<(String, Value)> {
        let hash = built.pod()["metadata"]["labels"][labels::SUBMISSION_ID_HASH]
            .as_str()
            .unwrap()
            .to_owned();
        let mut found = Vec::new();
        for (group, version, kind, plural) in KINDS {
            let resource = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, kind),
                plural,
            );
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client(), &built.identity.namespace, &resource);
            let list = api
                .list(
                    &ListParams::default()
                        .labels(&format!("{}={hash}", labels::SUBMISSION_ID_HASH)),
                )
                .await
                .unwrap();
            for item in list.items {
                let item = serde_json::to_value(item).unwrap();
                // The id's claim (or record) is the service's, not one of the driver's objects.
                if item["metadata"]["labels"].get(labels::RECORD).is_some() {
                    continue;
                }
                found.push((kind.to_owned(), item));
            }
        }
        found
    }

    /// Asserts the driver is complete: exactly the built objects, one pod, every dependent
    /// owned by it. Returns the pod's uid.
    pub async fn assert_complete(&self, built: &DriverObjects) -> String {
        let found = self.objects_of(built).await;
        let pods: Vec<&Value> = found
            .iter()
            .filter(|(kind, _)| kind == "Pod")
            .map(|(_, o)| o)
            .collect();
        assert_eq!(pods.len(), 1, "exactly one driver pod: {found:#?}");
        let uid = pods[0]["metadata"]["uid"].as_str().unwrap().to_owned();
        let mut names: Vec<(String, String)> = found
            .iter()
            .map(|(kind, o)| {
                (
                    kind.clone(),
                    o["metadata"]["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let mut expected: Vec<(String, String)> = built
            .objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap().to_owned(),
                    o["metadata"]["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        names.sort();
        expected.sort();
        assert_eq!(names, expected, "every built object, nothing else");
        for (kind, object) in &found {
            if kind == "Pod" {
                continue;
            }
            let owners = object["metadata"]["ownerReferences"].as_array();
            assert_eq!(
                owners.map(|o| o.len()),
                Some(1),
                "{kind} has one owner: {object:#}"
            );
            assert_eq!(
                object["metadata"]["ownerReferences"][0]["uid"],
                uid.as_str()
            );
            assert_eq!(object["metadata"]["ownerReferences"][0]["kind"], "Pod");
        }
        uid
    }

    /// Waits until nothing of the submission is left (garbage collection is asynchronous).
    pub async fn assert_nothing_left(&self, built: &DriverObjects) {
        let mut found = Vec::new();
        for _ in 0..100 {
            found = self.objects_of(built).await;
            if found.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("objects left behind: {found:#?}");
    }

    /// Waits (bounded) until kubesim's journal of mutating requests satisfies `done`.
    pub async fn wait_for_journal(&self, done: impl Fn(&[JournalEntry]) -> bool) {
        for _ in 0..400 {
            if done(&self.journal()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!(
            "kubesim never saw the expected request: {:#?}",
            self.journal()
        );
    }

    /// Waits (bounded) until no creation runs in this replica.
    pub async fn wait_in_flight_done(&self) {
        for _ in 0..400 {
            if self.state.in_flight.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("a creation is still running after 10 s");
    }

    /// Waits (bounded) until the sweeper has completed `passes` whole passes after this call:
    /// the first pass that ends may have begun before, so `passes` of 2 guarantees a whole one.
    pub async fn wait_sweep_passes(&self, passes: u64) {
        let target = self.state.metrics.sweep_passes() + passes;
        for _ in 0..400 {
            if self.state.metrics.sweep_passes() >= target {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the sweeper did not complete {passes} passes in 10 s");
    }

    /// Starts the sweeper with no grace period, polling often.
    pub fn start_sweeper(&self) -> tokio::task::JoinHandle<()> {
        let client = self.client();
        let caches = submitter::caches::WatchCaches::start(&client);
        tokio::spawn(submitter::sweep::run(
            client,
            caches,
            self.state.in_flight.clone(),
            self.state.metrics.clone(),
            submitter::sweep::SweepConfig {
                grace: Duration::ZERO,
                interval: Duration::from_millis(50),
                ..Default::default()
            },
        ))
    }
}

const KINDS: [(&str, &str, &str, &str); 5] = [
    ("", "v1", "Pod", "pods"),
    ("", "v1", "ConfigMap", "configmaps"),
    ("", "v1", "Service", "services"),
    ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    (
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
    ),
];

fn state_for(cluster: &Cluster, call_timeout: Duration) -> AppState {
    let policy = Arc::new(Policy::parse(POLICY).unwrap());
    AppState::new(cluster.client().unwrap(), Access::Policy(policy)).with_call_timeout(call_timeout)
}

pub fn submit_request(body: &Value, query: &str, identity: &str) -> Request<Body> {
    let mut request = Request::post(format!("/api/v1/spark-submit{query}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    request.extensions_mut().insert(verified_identity(identity));
    request
}

/// `request` as the test identity [`TESTER`] sends it.
pub fn as_tester(mut request: Request<Body>) -> Request<Body> {
    request.extensions_mut().insert(verified_identity(TESTER));
    request
}

/// The identity of a client certificate whose CN is `name`, made the only way there is: a
/// certificate issued by a throwaway CA and verified against it (one per name, kept).
pub fn verified_identity(name: &str) -> PeerIdentity {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    use submitter::tls::ClientCertificateVerifier;
    struct TestCa {
        issuer: CertifiedIssuer<'static, KeyPair>,
        verifier: ClientCertificateVerifier,
        issued: Mutex<HashMap<String, PeerIdentity>>,
    }
    static CA: OnceLock<TestCa> = OnceLock::new();
    let ca = CA.get_or_init(|| {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(issuer.der().clone()).unwrap();
        let verifier = ClientCertificateVerifier::new(Arc::new(roots), Vec::new()).unwrap();
        TestCa {
            issuer,
            verifier,
            issued: Mutex::new(HashMap::new()),
        }
    });
    let mut issued = ca.issued.lock().unwrap();
    issued
        .entry(name.to_owned())
        .or_insert_with(|| {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name.push(DnType::CommonName, name);
            let leaf = params
                .signed_by(&KeyPair::generate().unwrap(), &ca.issuer)
                .unwrap();
            ca.verifier
                .verify(&[leaf.der().clone()], rustls_pki_types::UnixTime::now())
                .unwrap()
                .identity()
                .clone()
        })
        .clone()
}

/// Drops every watch of `cluster` and holds each re-watch for `hold`; returns once the service's
/// two watches (pods, ConfigMaps) have asked again, so that its caches see nothing new until the
/// hold ends.
pub async fn hold_rewatches(cluster: &Cluster, hold: Duration) {
    let watches = |counts: &[RequestCount]| {
        counts
            .iter()
            .filter(|c| c.watch)
            .map(|c| c.count)
            .sum::<u64>()
    };
    let before = watches(&cluster.control.counts());
    cluster.control.add_latency(LatencyRule {
        verb: Some("watch".into()),
        resource: None,
        millis: u64::try_from(hold.as_millis()).unwrap(),
    });
    cluster.store.drop_watches();
    tokio::time::timeout(
        Duration::from_secs(30),
        cluster
            .control
            .counted(|counts| watches(counts) >= before + 2),
    )
    .await
    .expect("both re-watches are held");
}

/// The `/metrics` text, read as [`TESTER`].
pub async fn metrics_text(app: &Router) -> String {
    let answer = send(
        app,
        as_tester(Request::get("/metrics").body(Body::empty()).unwrap()),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    answer.body.as_str().unwrap_or_default().to_owned()
}

pub async fn send(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Answer {
        status,
        headers,
        body,
    }
}

/// Positions of the journal's creating POSTs (not dry runs) of `resource`.
pub fn creates(journal: &[JournalEntry], resource: &str) -> Vec<usize> {
    journal
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e.method == "POST"
                && !e.path.contains("dryRun")
                && e.path
                    .split('?')
                    .next()
                    .unwrap_or("")
                    .ends_with(&format!("/{resource}"))
        })
        .map(|(i, _)| i)
        .collect()
}

/// A `submitter serve` child process on an ephemeral port, its JSON log lines kept.
pub struct ServeProcess {
    pub child: tokio::process::Child,
    pub addr: std::net::SocketAddr,
    /// Its log lines (JSON), for diagnostics.
    pub logs: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ServeProcess {
    /// Starts `submitter serve --listen 127.0.0.1:0 ARGS` and returns once it logs
    /// "submitter serving" (not yet ready: the caller waits for `/readyz` its own way).
    pub async fn start(args: &[&std::ffi::OsStr]) -> ServeProcess {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_submitter"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let logs = Arc::new(std::sync::Mutex::new(Vec::new()));
        let serving = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                logs.lock().unwrap().push(line.clone());
                let Ok(event) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if event["fields"]["message"] == "submitter serving" {
                    return event["fields"]["addr"].as_str().unwrap().parse().unwrap();
                }
            }
            panic!(
                "submitter exited before serving: {:#?}",
                logs.lock().unwrap()
            );
        })
        .await;
        let addr = serving.expect("submitter did not start serving within 30 s");
        // Keep draining, so the pipe never fills.
        let sink = logs.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().unwrap().push(line);
            }
        });
        ServeProcess { child, addr, logs }
    }
}
