//! Clients without a certificate against the real `submitter serve` over TLS (kubesim behind):
//! the TLS layer asks for a client certificate but does not require one, so such a client gets
//! an answer instead of a handshake failure (which the contract's Go client would retry
//! forever): probes answer, every API route answers 401 `UNAUTHENTICATED` in the envelope (not
//! retryable), `/metrics` only behind `--anonymous-metrics`. Clients with a certificate are
//! served as before.

mod service_support;
mod submit_support;

use std::ffi::OsStr;
use std::time::Duration;

use http::Method;
use serde_json::Value;
use service_support::{Ca, Dir, client_config, get, send};
use submission::api::{ErrorCode, SubmitRequest};
use submit_support::{POLICY, ServeProcess, TESTER, TestApp, args, request};
use submitter_client::{ClientConfig, SubmitterClient};

struct Served {
    t: TestApp,
    ca: Ca,
    dir: Dir,
    process: ServeProcess,
}

impl Served {
    /// `submitter serve` with TLS files and the tests' policy, ready once `/readyz` answers 200
    /// to a client that presents a certificate.
    async fn start(extra: &[&str]) -> Served {
        let t = TestApp::start().await;
        let ca = Ca::new("test ca");
        let dir = Dir::new();
        let files = dir.server_files(&ca, &ca.server("submitter"));
        let kubeconfig = dir.dir.path().join("kubeconfig");
        t.cluster.write_kubeconfig(&kubeconfig).unwrap();
        let policy = dir.write("policy.yaml", POLICY);
        let mut args: Vec<&OsStr> = vec![
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
        ];
        args.extend(extra.iter().map(OsStr::new));
        let process = ServeProcess::start(&args).await;
        let served = Served {
            t,
            ca,
            dir,
            process,
        };
        let tester = served.tester();
        for _ in 0..200 {
            if let Ok(answer) = get(served.process.addr, tester.clone(), "/readyz").await
                && answer.status == 200
            {
                return served;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("never ready: {:#?}", served.process.logs.lock().unwrap());
    }

    fn tester(&self) -> std::sync::Arc<rustls::ClientConfig> {
        let leaf = self.ca.client(
            TESTER,
            "spiffe://cluster.local/ns/spark/sa/tester",
            "tester",
        );
        client_config(&self.ca, Some(&leaf))
    }

    fn anonymous(&self) -> std::sync::Arc<rustls::ClientConfig> {
        client_config(&self.ca, None)
    }

    /// The crate's client, without a client certificate, allowed three retries.
    fn anonymous_client(&self) -> SubmitterClient {
        let mut config = ClientConfig::new(format!(
            "https://localhost:{}/api/v1/spark-submit",
            self.process.addr.port()
        ));
        config.ca = Some(self.dir.write("ca-only.crt", &self.ca.pem()));
        config.max_retries = 3;
        config.initial_backoff = Duration::from_millis(10);
        SubmitterClient::new(config).unwrap()
    }
}

fn envelope(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| panic!("not the envelope: {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_a_certificate_gets_401_on_every_api_route_and_probes_answer() {
    let s = Served::start(&[]).await;
    let addr = s.process.addr;
    let submission = request("anonymous-1", &args(&[]));
    for path in ["/healthz", "/readyz"] {
        let answer = get(addr, s.anonymous(), path).await.unwrap();
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    }
    let calls: [(Method, &str, Option<String>); 6] = [
        (
            Method::POST,
            "/api/v1/spark-submit",
            Some(submission.to_string()),
        ),
        (
            Method::POST,
            "/api/v1/spark-submit",
            Some("{not json".into()),
        ),
        (Method::GET, "/api/v1/spark-submit", None),
        (Method::GET, "/api/v1/spark-submit/anonymous-1", None),
        (Method::GET, "/api/v1/drivers/default/some-driver", None),
        (Method::GET, "/metrics", None),
    ];
    for (method, path, body) in calls {
        let answer = send(addr, s.anonymous(), method.clone(), path, body)
            .await
            .unwrap_or_else(|error| panic!("{method} {path}: no answer: {error}"));
        assert_eq!(answer.status, 401, "{method} {path}: {}", answer.body);
        let body = envelope(&answer.body);
        assert_eq!(body["error_code"], "UNAUTHENTICATED", "{method} {path}");
        assert_eq!(body["status"], 401);
    }
    // The crate's client takes the 401 as final: one attempt, no retry.
    let request: SubmitRequest = serde_json::from_value(submission.clone()).unwrap();
    let error = s.anonymous_client().submit(&request).await.unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::Unauthenticated), "{error}");
    assert!(!error.retryable());
    assert!(s.t.journal().is_empty(), "nothing was created");

    // Nothing changes for a client with a certificate.
    let answer = send(
        addr,
        s.tester(),
        Method::POST,
        "/api/v1/spark-submit",
        Some(submission.to_string()),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 201, "{}", answer.body);
    let answer = get(addr, s.tester(), "/metrics").await.unwrap();
    assert_eq!(answer.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answer_without_a_certificate_behind_the_flag() {
    let s = Served::start(&["--anonymous-metrics"]).await;
    let answer = get(s.process.addr, s.anonymous(), "/metrics")
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("submitter_http_requests_in_flight"));
    let answer = get(s.process.addr, s.anonymous(), "/api/v1/spark-submit/x")
        .await
        .unwrap();
    assert_eq!(answer.status, 401);
}
