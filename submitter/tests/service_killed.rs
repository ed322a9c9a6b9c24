//! The real `submitter serve` process, SIGKILLed in the middle of a submission, against an
//! in-process kubesim. The kill lands at a chosen step: a kubesim fault holds one API call
//! (`when: before` with a long `delayMs`, so the held call never takes effect whatever happens to
//! its connection), the test waits until kubesim's journal shows that call has arrived (every
//! step before it is then in the store), and kills the process. Then a fresh process either gets
//! the client's retry with the same `submission_id`, which must converge on one complete driver
//! (every ConfigMap it mounts exists, every dependent is owned by the pod, the answer names the
//! same pod unless the dead process's rollback had decided its end, a second retry is a plain
//! duplicate), or gets no retry at all, and whatever the dead
//! process left must be able to start or be collected (by the garbage collector through the pod,
//! or by the fresh process's sweeper once no pod needs it).

use crate::submit_support;

use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kubesim::control::JournalEntry;
use serde_json::{Value, json};
use submission::builder::DriverObjects;
use submission::meta::{annotations, labels};
use submit_support::{ServeProcess, TestApp, args, built, creates, request};
use tokio::net::TcpStream;
use tokio::process::Child;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long kubesim holds the chosen call. The process is killed within one poll of the call's
/// arrival, long before its own 10 s call timeout could end the wait on its side; kubesim drops
/// the held request with the dead connection, and `when: before` means it would have had no
/// effect anyway.
const HOLD_MS: u64 = 60_000;

/// Polls of bounded waits, and the pause between two.
const POLLS: usize = 200;
const POLL: Duration = Duration::from_millis(50);

/// A `submitter serve --insecure-dev` child process.
struct Submitter {
    child: Child,
    addr: SocketAddr,
    /// Its log lines (JSON), for diagnostics.
    logs: Arc<Mutex<Vec<String>>>,
}

impl Submitter {
    /// Starts the binary on an ephemeral port and returns once it serves and its watch caches
    /// have synced (`/readyz` is 200).
    async fn start(kubeconfig: &Path, sweep_grace_secs: u64) -> Submitter {
        let grace = sweep_grace_secs.to_string();
        let ServeProcess { child, addr, logs } = ServeProcess::start(&[
            "--insecure-dev".as_ref(),
            "--kubeconfig".as_ref(),
            kubeconfig.as_os_str(),
            "--sweep-grace".as_ref(),
            grace.as_ref(),
        ])
        .await;
        let submitter = Submitter { child, addr, logs };
        submitter.wait_ready().await;
        submitter
    }

    async fn wait_ready(&self) {
        for _ in 0..POLLS {
            if let Ok((200, _)) = call(self.addr, http::Method::GET, "/readyz", None).await {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
        panic!("submitter never ready: {:#?}", self.logs.lock().unwrap());
    }

    /// SIGKILL: no drain, no rollback, no clean-up of any kind.
    async fn kill(mut self) {
        self.child.start_kill().unwrap();
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("a SIGKILLed process exits")
            .unwrap();
        assert_eq!(status.signal(), Some(9), "killed by SIGKILL: {status:?}");
    }

    async fn submit(&self, body: &Value) -> (u16, Value) {
        call(
            self.addr,
            http::Method::POST,
            "/api/v1/spark-submit",
            Some(body),
        )
        .await
        .unwrap()
    }

    /// Waits (bounded) until at least `passes` sweep passes have completed
    /// (`submitter_sweep_passes_total`).
    async fn wait_sweep_passes(&self, passes: u64) {
        for _ in 0..POLLS {
            let metrics = self.metrics().await;
            let done: u64 = metrics
                .lines()
                .find_map(|line| line.strip_prefix("submitter_sweep_passes_total "))
                .and_then(|count| count.trim().parse().ok())
                .unwrap_or(0);
            if done >= passes {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
        panic!("the sweeper did not reach {passes} passes");
    }

    async fn metrics(&self) -> String {
        let (status, body) = call(self.addr, http::Method::GET, "/metrics", None)
            .await
            .unwrap();
        assert_eq!(status, 200);
        body.as_str().unwrap().to_owned()
    }
}

/// One HTTP/1 request on a fresh connection, bounded by 30 s; the body as JSON (or a string).
async fn call(
    addr: SocketAddr,
    method: http::Method,
    path: &str,
    body: Option<&Value>,
) -> Result<(u16, Value), BoxError> {
    let exchange = async {
        let tcp = TcpStream::connect(addr).await?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        tokio::spawn(connection);
        let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, addr.to_string())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(bytes))?;
        let response = sender.send_request(request).await?;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await?.to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Ok::<_, BoxError>((status, body))
    };
    tokio::time::timeout(Duration::from_secs(30), exchange).await?
}

/// Where the kill lands.
struct Case {
    name: &'static str,
    /// Fault rules: the last one holds the call the kill lands in.
    faults: Vec<Value>,
    /// The held call, as it appears in kubesim's journal.
    held: fn(&JournalEntry) -> bool,
    /// Whether the driver pod exists when the process dies.
    pod_created: bool,
    /// Whether the dead process had decided to delete its pod (its rollback held the pod's
    /// fence): nobody answered that pod, and the retry deletes it and makes the driver anew.
    rolled_back: bool,
}

fn hold(verb: &str, resource: &str) -> Value {
    json!({"verb": verb, "resource": resource, "code": 504, "when": "before", "delayMs": HOLD_MS})
}

fn is_post(entry: &JournalEntry, resource: &str) -> bool {
    !creates(std::slice::from_ref(entry), resource).is_empty()
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            // The ConfigMaps exist without owner; the pod's POST never took effect.
            name: "pod-post",
            faults: vec![hold("create", "pods")],
            held: |e| is_post(e, "pods"),
            pod_created: false,
            rolled_back: false,
        },
        Case {
            // The pod exists; its Service and NetworkPolicy do not; the ConfigMaps have no owner.
            name: "service-post",
            faults: vec![hold("create", "services")],
            held: |e| is_post(e, "services"),
            pod_created: true,
            rolled_back: false,
        },
        Case {
            // Everything exists, the Service and NetworkPolicy owned by the pod; the ConfigMaps'
            // owner references are not attached yet.
            name: "owner-patch",
            faults: vec![hold("patch", "configmaps")],
            held: |e| e.method == "PATCH" && e.path.contains("/configmaps/"),
            pod_created: true,
            rolled_back: false,
        },
        Case {
            // The Service POST fails, the rollback's pod DELETE is held: the pod stays, with
            // ownerless ConfigMaps and no Service.
            name: "rollback-delete",
            faults: vec![
                json!({"verb": "create", "resource": "services", "code": 500}),
                hold("delete", "pods"),
            ],
            held: |e| e.method == "DELETE" && e.path.contains("/pods/"),
            pod_created: true,
            rolled_back: true,
        },
    ]
}

/// A cluster and the kubeconfig file the child processes read.
struct Fixture {
    t: TestApp,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

async fn fixture() -> Fixture {
    let t = TestApp::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    t.cluster.write_kubeconfig(&kubeconfig).unwrap();
    Fixture {
        t,
        _dir: dir,
        kubeconfig,
    }
}

/// The state the dead process left, by kind.
struct Left {
    pod_uid: Option<String>,
    /// (name, uid, owned)
    config_maps: Vec<(String, String, bool)>,
    found: Vec<(String, Value)>,
}

async fn left(t: &TestApp, built: &DriverObjects) -> Left {
    let found = t.objects_of(built).await;
    let pod_uid = found
        .iter()
        .find(|(kind, _)| kind == "Pod")
        .map(|(_, o)| o["metadata"]["uid"].as_str().unwrap().to_owned());
    let config_maps = found
        .iter()
        .filter(|(kind, _)| kind == "ConfigMap")
        .map(|(_, o)| {
            (
                o["metadata"]["name"].as_str().unwrap().to_owned(),
                o["metadata"]["uid"].as_str().unwrap().to_owned(),
                o["metadata"].get("ownerReferences").is_some(),
            )
        })
        .collect();
    Left {
        pod_uid,
        config_maps,
        found,
    }
}

fn built_config_maps(built: &DriverObjects) -> Vec<String> {
    let mut names: Vec<String> = built
        .objects
        .iter()
        .filter(|o| o["kind"] == "ConfigMap")
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// Sends the submission to `submitter`, waits until the held call reached kubesim, SIGKILLs
/// the process, and returns what it left (checked against the case).
async fn kill_mid_request(f: &Fixture, submitter: Submitter, case: &Case, body: &Value) -> Left {
    let built = built(body);
    for rule in &case.faults {
        f.t.fault(rule.clone());
    }
    let addr = submitter.addr;
    let request = body.clone();
    let in_flight = tokio::spawn(async move {
        call(
            addr,
            http::Method::POST,
            "/api/v1/spark-submit",
            Some(&request),
        )
        .await
    });
    let mut arrived = false;
    for _ in 0..POLLS {
        if f.t.journal().iter().any(case.held) {
            arrived = true;
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    assert!(
        arrived,
        "{}: the held call never arrived: {:#?}",
        case.name,
        f.t.journal()
    );
    submitter.kill().await;
    // The client saw no answer: the connection died under it.
    let answer = tokio::time::timeout(Duration::from_secs(10), in_flight)
        .await
        .expect("the client's request ends with the process")
        .unwrap();
    assert!(
        answer.is_err(),
        "{}: no answer from a killed process: {answer:?}",
        case.name
    );

    let left = left(&f.t, &built).await;
    assert_eq!(
        left.pod_uid.is_some(),
        case.pod_created,
        "{}: {:#?}",
        case.name,
        left.found
    );
    // ConfigMaps go first: whatever the step, both exist, and none has an owner yet.
    let mut names: Vec<String> = left.config_maps.iter().map(|c| c.0.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        built_config_maps(&built),
        "{}: no pod without its ConfigMaps",
        case.name
    );
    assert!(
        left.config_maps.iter().all(|c| !c.2),
        "{}: {:#?}",
        case.name,
        left.found
    );
    left
}

/// A ConfigMap of ours (labels and annotation) for a submission that never got a pod: the
/// sweeper deleting it shows a sweep pass has run.
async fn decoy(t: &TestApp) -> String {
    let name = "decoy-submission-cm".to_owned();
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {labels::SUBMISSION_ID_HASH: "decoy"},
            "annotations": {annotations::SUBMISSION_ID: "decoy-submission"},
        },
        "data": {"k": "v"},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(t.client(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    name
}

async fn wait_gone(t: &TestApp, name: &str) {
    let api = Api::<ConfigMap>::namespaced(t.client(), "default");
    for _ in 0..POLLS {
        if api.get_opt(name).await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
    panic!("{name} was never swept");
}

/// Killed mid-request, then the client retries with the same id on a fresh process: one
/// complete driver, the same pod (unless the dead process's rollback had decided its end), leftovers reused, and a second retry is a duplicate that
/// writes nothing.
async fn killed_then_retried(case: &Case) {
    let f = fixture().await;
    let body = request(&format!("killed-{}", case.name), &args(&[]));
    let built = built(&body);
    let first = Submitter::start(&f.kubeconfig, 300).await;
    let before = kill_mid_request(&f, first, case, &body).await;

    // The default grace: the fresh process's sweeper leaves the crash's ConfigMaps to the retry.
    let fresh = Submitter::start(&f.kubeconfig, 300).await;
    let (status, answer) = fresh.submit(&body).await;
    let uid = f.t.assert_complete(&built).await;
    match &before.pod_uid {
        None => assert_eq!(status, 201, "{}: {answer}", case.name),
        Some(pod_uid) if case.rolled_back => {
            assert_eq!(status, 201, "{}: {answer}", case.name);
            assert_ne!(&uid, pod_uid, "{}: the rolled-back pod is gone", case.name);
        }
        Some(pod_uid) => {
            assert_eq!(status, 200, "{}: {answer}", case.name);
            assert_eq!(answer["duplicate_submission"], true, "{}", case.name);
            assert_eq!(
                &uid, pod_uid,
                "{}: the pod the dead process made",
                case.name
            );
        }
    }
    assert_eq!(answer["driver_pod_uid"], uid.as_str(), "{}", case.name);
    assert_eq!(
        answer["driver_pod_name"],
        built.identity.driver_pod_name.as_str()
    );
    assert_eq!(answer["submission_id"], body["submission_id"]);
    // The crash's ConfigMaps were adopted, not recreated.
    let after = left(&f.t, &built).await;
    let uids = |l: &Left| {
        let mut v: Vec<(String, String)> = l
            .config_maps
            .iter()
            .map(|c| (c.0.clone(), c.1.clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(uids(&after), uids(&before), "{}", case.name);

    let writes = f.t.journal().len();
    let (status, again) = fresh.submit(&body).await;
    assert_eq!(status, 200, "{}: {again}", case.name);
    assert_eq!(again["duplicate_submission"], true);
    assert_eq!(again["driver_pod_uid"], uid.as_str());
    assert_eq!(
        f.t.journal().len(),
        writes,
        "{}: a complete duplicate writes nothing",
        case.name
    );
    f.t.assert_complete(&built).await;
    fresh.kill().await;
}

/// Killed mid-request and the client gives up. The fresh process's sweeper (grace 0) removes
/// ownerless ConfigMaps whose pod never came; while a pod exists it leaves its ConfigMaps (the
/// pod mounts them), and once the pod is deleted the next sweep removes them. Owned dependents
/// go with the pod through the garbage collector.
async fn killed_and_abandoned(case: &Case) {
    let f = fixture().await;
    let body = request(&format!("abandoned-{}", case.name), &args(&[]));
    let built = built(&body);
    let first = Submitter::start(&f.kubeconfig, 300).await;
    let before = kill_mid_request(&f, first, case, &body).await;

    let decoy = decoy(&f.t).await;
    let sweeper = Submitter::start(&f.kubeconfig, 0).await;
    // The decoy going shows a sweep pass ran over a cache that also held our objects.
    wait_gone(&f.t, &decoy).await;
    let Some(pod_uid) = before.pod_uid else {
        // No pod: the ConfigMaps are swept.
        f.t.assert_nothing_left(&built).await;
        let mut metrics = String::new();
        for _ in 0..POLLS {
            metrics = sweeper.metrics().await;
            if metrics.contains("submitter_swept_config_maps_total 3") {
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        assert!(
            metrics.contains("submitter_swept_config_maps_total 3"),
            "{}: two ConfigMaps and the decoy swept: {metrics}",
            case.name
        );
        sweeper.kill().await;
        return;
    };
    // A pod exists: it can start (its ConfigMaps are there), and the sweeper kept them. The
    // first pass (right after the caches synced, over a listing that held the decoy and ours)
    // removed the decoy; once it has ended, every delete it made is done.
    sweeper.wait_sweep_passes(1).await;
    let now = left(&f.t, &built).await;
    assert_eq!(now.pod_uid.as_deref(), Some(pod_uid.as_str()));
    assert_eq!(
        now.config_maps.len(),
        2,
        "{}: the sweeper keeps a living pod's ConfigMaps: {:#?}",
        case.name,
        now.found
    );
    sweeper.kill().await;

    // The driver goes (finished and cleaned up, or deleted by hand): the garbage collector takes
    // what the pod owns; the next sweeper takes the ownerless ConfigMaps.
    let pods = Api::<Pod>::namespaced(f.t.client(), &built.identity.namespace);
    pods.delete(
        &built.identity.driver_pod_name,
        &DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(pod_uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap();
    let mut gone = false;
    for _ in 0..POLLS {
        let now = left(&f.t, &built).await;
        if now.found.iter().all(|(kind, _)| kind == "ConfigMap") {
            gone = true;
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    assert!(gone, "{}: the pod and what it owns go", case.name);
    let sweeper = Submitter::start(&f.kubeconfig, 0).await;
    f.t.assert_nothing_left(&built).await;
    sweeper.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_submission_a_retry_converges_on_one_complete_driver() {
    for case in cases() {
        eprintln!("case {}", case.name);
        killed_then_retried(&case).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_submission_without_retry_leaves_nothing_uncollectable() {
    for case in cases() {
        eprintln!("case {}", case.name);
        killed_and_abandoned(&case).await;
    }
}

/// The same binary, not killed: a first attempt that fails after the pod rolls back (pod and
/// ConfigMaps deleted by uid, the rest by the garbage collector), and a retry starts clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_first_attempt_rolls_back_and_a_retry_starts_clean() {
    let f = fixture().await;
    let body = request("rolled-back", &args(&[]));
    let built = built(&body);
    let submitter = Submitter::start(&f.kubeconfig, 300).await;
    f.t.fault(json!({"verb": "create", "resource": "services", "code": 500}));
    let (status, answer) = submitter.submit(&body).await;
    assert_eq!(status, 500, "{answer}");
    assert_eq!(answer["error_code"], "INTERNAL_SERVER_ERROR");
    f.t.assert_nothing_left(&built).await;
    let (status, answer) = submitter.submit(&body).await;
    assert_eq!(status, 201, "{answer}");
    let uid = f.t.assert_complete(&built).await;
    assert_eq!(answer["driver_pod_uid"], uid.as_str());
    submitter.kill().await;
}
