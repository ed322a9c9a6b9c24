//! The audit log: one line per submission attempt, status look-up, list, log and kill, with
//! who, where, which submission, which driver, how it ended and how long it took; refused
//! attempts included; and no secret of a submission in any log stream of the real
//! `submitter serve`.

use crate::operate_support;
use crate::service_support;
use crate::submit_support;

use std::ffi::OsStr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use service_support::{Ca, Dir, client_config, get, send};
use submit_support::{POLICY, TESTER, TestApp, args, request, submit_request};
use submitter::fairness::{BudgetConfig, Budgets};
use submitter::service::{ServiceConfig, app};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Collects what a `tracing` subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// The audit lines written so far, as their `fields`.
    fn audit_lines(&self) -> Vec<Value> {
        String::from_utf8(self.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|event| event["target"] == submitter::audit::TARGET)
            .map(|event| event["fields"].clone())
            .collect()
    }
}

/// What this thread's `tracing` events write from now on (INFO and up, JSON), until the guard
/// is dropped.
fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    (captured, tracing::subscriber::set_default(subscriber))
}

fn get_as(path: &str, identity: &str) -> Request<Body> {
    let mut request = Request::get(path).body(Body::empty()).unwrap();
    request
        .extensions_mut()
        .insert(submit_support::verified_identity(identity));
    request
}

#[tokio::test]
async fn every_submission_attempt_and_look_up_writes_one_audit_line() {
    let (captured, _guard) = capture();
    let t = TestApp::start().await;
    // A budget of one request at a time, to see a refusal of the layer stack audited too.
    let budgets = Budgets::new(BudgetConfig {
        max_in_flight: 1,
        rate: 0.0,
        burst: 0,
    });
    let service = app(
        t.state.clone().with_fairness(budgets.clone()),
        &ServiceConfig::default(),
    );
    let send = |request| submit_support::send(&service, request);
    let body = request("audit-1", &args(&[]));

    let created = send(submit_request(&body, "", TESTER)).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let uid = created.body["driver_pod_uid"].as_str().unwrap().to_owned();
    let pod = created.body["driver_pod_name"].as_str().unwrap().to_owned();
    assert_eq!(
        send(submit_request(&body, "", TESTER)).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(submit_request(&body, "", "team-a")).await.status,
        StatusCode::FORBIDDEN
    );
    let mut bad_json = Request::post("/api/v1/spark-submit")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            "{\"submission_id\": \"audit-2\", \"spark_submit_args\": 7}",
        ))
        .unwrap();
    bad_json
        .extensions_mut()
        .insert(submit_support::verified_identity(TESTER));
    assert_eq!(send(bad_json).await.status, StatusCode::BAD_REQUEST);
    let by_driver = format!("/api/v1/drivers/default/{pod}");
    let looked_up = send(get_as(&by_driver, TESTER)).await.status;
    assert!(
        looked_up == StatusCode::OK || looked_up == StatusCode::SERVICE_UNAVAILABLE,
        "{looked_up}"
    );
    assert_eq!(
        send(get_as("/api/v1/drivers/default/nobody-driver", "stranger"))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    // Over the budget: a request of the same identity while one is in flight.
    let held = budgets
        .try_admit(TESTER, std::time::Instant::now())
        .unwrap();
    assert_eq!(
        send(get_as("/api/v1/spark-submit/audit-1", TESTER))
            .await
            .status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    drop(held);
    // Not audited: probes. Audited: the list (also the Go client's readiness GET).
    send(get_as("/healthz", TESTER)).await;
    send(get_as("/api/v1/spark-submit", TESTER)).await;

    let lines = captured.audit_lines();
    let summary: Vec<(&str, &str, &str, u64)> = lines
        .iter()
        .map(|line| {
            (
                line["action"].as_str().unwrap(),
                line["identity"].as_str().unwrap(),
                line["outcome"].as_str().unwrap(),
                line["status"].as_u64().unwrap(),
            )
        })
        .collect();
    let look_up_outcome = if looked_up == StatusCode::OK {
        "FOUND"
    } else {
        "SUBMITTER_OVERLOADED"
    };
    assert_eq!(
        summary,
        [
            ("submit", TESTER, "CREATED", 201),
            ("submit", TESTER, "DUPLICATE", 200),
            ("submit", "team-a", "FORBIDDEN", 403),
            ("submit", TESTER, "BAD_REQUEST", 400),
            (
                "status_by_driver",
                TESTER,
                look_up_outcome,
                looked_up.as_u16() as u64
            ),
            ("status_by_driver", "stranger", "FORBIDDEN", 403),
            ("status_by_submission", TESTER, "SUBMITTER_OVERLOADED", 503),
            ("list", TESTER, "SUBMITTER_OVERLOADED", 503),
        ]
    );
    for (line, id) in lines
        .iter()
        .zip(["audit-1", "audit-1", "audit-1", "audit-2"])
    {
        assert_eq!(line["submission_id"], id, "{line}");
        assert!(line["latency_ms"].is_u64(), "{line}");
        assert!(!line["request_id"].as_str().unwrap().is_empty(), "{line}");
    }
    assert_eq!(
        (lines[0]["pod"].as_str(), lines[0]["uid"].as_str()),
        (Some(pod.as_str()), Some(uid.as_str()))
    );
    assert_eq!(lines[0]["duplicate"], false);
    assert_eq!(
        (lines[1]["uid"].as_str(), lines[1]["duplicate"].as_bool()),
        (Some(uid.as_str()), Some(true))
    );
    assert_eq!(
        lines[2]["uid"], "",
        "a refused submission names no driver uid"
    );
    assert_eq!(
        lines[2]["namespace"], "default",
        "a built submission names its namespace"
    );
    assert_eq!(lines[3]["namespace"], "", "an unreadable body names none");
    assert_eq!(lines[5]["namespace"], "default");
    assert_eq!(lines[6]["submission_id"], "audit-1");
}

#[tokio::test]
async fn a_kill_and_a_log_read_say_who_did_them() {
    let (captured, _guard) = capture();
    let s = operate_support::Operated::start().await;
    let submitted = s
        .submit_image("audit-kill", operate_support::TICKER_IMAGE, &[])
        .await;
    s.wait_for_phase(&submitted, submission::api::DriverPhase::Running)
        .await;
    let log = s
        .get("/api/v1/spark-submit/audit-kill/log?limit_bytes=10", TESTER)
        .await;
    assert_eq!(log.status, StatusCode::OK, "{}", log.body);
    assert_eq!(
        s.delete("/api/v1/spark-submit/audit-kill", "team-a")
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        s.delete("/api/v1/spark-submit/audit-kill", TESTER)
            .await
            .status,
        StatusCode::ACCEPTED
    );
    let lines: Vec<Value> = captured
        .audit_lines()
        .into_iter()
        .filter(|line| line["action"] != "submit")
        .collect();
    let summary: Vec<(&str, &str, &str, &str, &str)> = lines
        .iter()
        .map(|line| {
            (
                line["action"].as_str().unwrap(),
                line["identity"].as_str().unwrap(),
                line["outcome"].as_str().unwrap(),
                line["submission_id"].as_str().unwrap(),
                line["uid"].as_str().unwrap(),
            )
        })
        .collect();
    let uid = submitted["driver_pod_uid"].as_str().unwrap();
    assert_eq!(
        summary,
        [
            ("log_by_submission", TESTER, "LOG", "audit-kill", uid),
            (
                "kill_by_submission",
                "team-a",
                "FORBIDDEN",
                "audit-kill",
                ""
            ),
            ("kill_by_submission", TESTER, "KILLED", "audit-kill", uid),
        ]
    );
}

/// Reads a child's output into `sink`, line by line.
fn drain(output: impl AsyncRead + Unpin + Send + 'static, sink: Arc<Mutex<Vec<String>>>) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(output).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            sink.lock().unwrap().push(line);
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_secrets_reach_no_log_stream() {
    let secret_env = format!("env-secret-{}", uuid::Uuid::new_v4().simple());
    let secret_conf = format!("conf-secret-{}", uuid::Uuid::new_v4().simple());
    let secret_data = format!("secret-data-{}", uuid::Uuid::new_v4().simple());
    let t = TestApp::start().await;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "db-credentials"},
        "stringData": {"password": secret_data},
    }))
    .unwrap();
    Api::<Secret>::namespaced(t.client(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let ca = Ca::new("test ca");
    let dir = Dir::new();
    let files = dir.server_files(&ca, &ca.server("submitter"));
    let kubeconfig = dir.dir.path().join("kubeconfig");
    t.cluster.write_kubeconfig(&kubeconfig).unwrap();
    let policy = dir.write("policy.yaml", POLICY);
    let audit_log = dir.dir.path().join("audit.log");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_submitter"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args::<[&OsStr; 12], &OsStr>([
            "--kubeconfig".as_ref(),
            kubeconfig.as_os_str(),
            "--tls-cert".as_ref(),
            files.cert.as_os_str(),
            "--tls-key".as_ref(),
            files.key.as_os_str(),
            "--client-ca".as_ref(),
            files.client_ca.as_os_str(),
            "--policy".as_ref(),
            policy.as_os_str(),
            "--audit-log".as_ref(),
            audit_log.as_os_str(),
        ])
        // The default level, with our own crates at debug. (kube's client logs the API server's
        // answers at debug, which quote rejected values: see docs/security.md.)
        .env(
            "RUST_LOG",
            "info,submitter=debug,submission=debug,submitter_client=debug",
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let logs = Arc::new(Mutex::new(Vec::new()));
    drain(child.stdout.take().unwrap(), logs.clone());
    drain(child.stderr.take().unwrap(), logs.clone());
    let addr = {
        let mut found = None;
        for _ in 0..600 {
            found = logs.lock().unwrap().iter().find_map(|line| {
                let event: Value = serde_json::from_str(line).ok()?;
                (event["fields"]["message"] == "submitter serving").then(|| {
                    event["fields"]["addr"]
                        .as_str()?
                        .parse::<std::net::SocketAddr>()
                        .ok()
                })?
            });
            if found.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        found.unwrap_or_else(|| panic!("never served: {:#?}", logs.lock().unwrap()))
    };
    let tester = client_config(
        &ca,
        Some(&ca.client(
            TESTER,
            "spiffe://cluster.local/ns/spark/sa/tester",
            "tester",
        )),
    );
    for _ in 0..200 {
        if get(addr, tester.clone(), "/readyz")
            .await
            .is_ok_and(|a| a.status == 200)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let planted = |id: &str, extra: &[&str]| {
        let mut extra_args = vec![
            "--conf".to_owned(),
            format!("spark.hadoop.fs.s3a.secret.key={secret_conf}"),
            "--conf".to_owned(),
            "spark.kubernetes.driver.secretKeyRef.DB_PASSWORD=db-credentials:password".to_owned(),
            "--conf".to_owned(),
            "spark.kubernetes.driver.secrets.db-credentials=/etc/db".to_owned(),
        ];
        extra_args.extend(extra.iter().map(|s| (*s).to_owned()));
        let extra_refs: Vec<&str> = extra_args.iter().map(String::as_str).collect();
        let mut body = request(id, &args(&extra_refs));
        body["driver_pod_template"] = json!({"spec": {"containers": [{
            "name": "spark-kubernetes-driver",
            "env": [{"name": "API_TOKEN", "value": secret_env}],
        }]}});
        body
    };
    let submit = |body: Value, query: &'static str| {
        let tester = tester.clone();
        async move {
            send(
                addr,
                tester,
                Method::POST,
                &format!("/api/v1/spark-submit{query}"),
                Some(body.to_string()),
            )
            .await
            .unwrap()
        }
    };
    let created = submit(planted("secrets-1", &[]), "").await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert!(created.body.contains("secrets-1"));
    assert_eq!(submit(planted("secrets-1", &[]), "").await.status, 200);
    // A dry run answers with the objects, secrets and all: to the client, never to a log.
    let dry = submit(planted("secrets-2", &[]), "?dryRun=true").await;
    assert_eq!(dry.status, 200, "{}", dry.body);
    assert!(dry.body.contains(&secret_env) && dry.body.contains(&secret_conf));
    // Refused by the builder, and by the API server, with the secrets in the request.
    let refused = submit(
        planted("secrets-3", &["--conf", "spark.driver.memory=lots"]),
        "",
    )
    .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    // The API server echoes an invalid value in its answer: the client sees it, no log does.
    let mut rejected = planted("secrets-4", &[]);
    rejected["driver_pod_template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": format!("Sidecar_{secret_env}"), "image": "busybox"}));
    let rejected = submit(rejected, "").await;
    assert_eq!(rejected.status, 422, "{}", rejected.body);
    assert!(rejected.body.contains(&secret_env), "{}", rejected.body);
    let looked_up = get(addr, tester.clone(), "/api/v1/spark-submit/secrets-1")
        .await
        .unwrap();
    assert!(matches!(looked_up.status, 200 | 503), "{}", looked_up.body);

    // Every request above left its audit line before its answer was sent.
    let audit = std::fs::read_to_string(&audit_log).unwrap();
    let audit_lines: Vec<Value> = audit
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(audit_lines.len(), 6, "{audit}");
    assert!(
        audit_lines
            .iter()
            .all(|line| line["target"] == submitter::audit::TARGET)
    );
    assert_eq!(audit_lines[0]["fields"]["outcome"], "CREATED");
    assert_eq!(audit_lines[0]["fields"]["identity"], TESTER);
    let logs = logs.lock().unwrap().join("\n");
    assert!(
        !logs.contains(submitter::audit::TARGET),
        "audit lines went to the main log too"
    );
    for secret in [&secret_env, &secret_conf, &secret_data] {
        assert!(
            !audit.contains(secret.as_str()),
            "the audit log holds {secret}"
        );
        let at = logs.find(secret.as_str());
        assert!(
            at.is_none(),
            "the log holds {secret}: {}",
            &logs[at.unwrap().saturating_sub(500)..(at.unwrap() + 200).min(logs.len())]
        );
    }
    child.kill().await.unwrap();
}
