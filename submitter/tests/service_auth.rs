//! Clients without a certificate, or with a bad one, against the real `submitter serve` over TLS
//! (kubesim behind): the TLS layer asks for a client certificate but neither requires one nor
//! verifies it in the handshake (only possession of its key), so such a client gets an answer
//! instead of a handshake failure (which the contract's Go client would retry forever): probes
//! answer, every API route answers 401 `UNAUTHENTICATED` in the envelope (not retryable, naming
//! the check a bad certificate failed), `/metrics` only behind `--anonymous-metrics`. Clients
//! with a good certificate are served as before.

use crate::service_support;
use crate::submit_support;

use std::ffi::OsStr;
use std::time::Duration;

use http::Method;
use serde_json::Value;
use service_support::{Ca, Dir, Leaf, client_config, get, send};
use submission::api::{ErrorCode, SubmitRequest};
use submit_support::{POLICY, ServeProcess, TESTER, TestApp, args, request};
use submitter_client::{ClientConfig, SubmitterClient};

struct Served {
    t: TestApp,
    ca: Ca,
    dir: Dir,
    process: ServeProcess,
    /// A certificate of the tester identity, revoked by the CRL the service reads.
    revoked: Leaf,
}

impl Served {
    /// `submitter serve` with TLS files, a CRL revoking [`Served::revoked`] and the tests'
    /// policy, ready once `/readyz` answers 200 to a client that presents a certificate.
    async fn start(extra: &[&str]) -> Served {
        let t = TestApp::start().await;
        let ca = Ca::new("test ca");
        let dir = Dir::new();
        let files = dir.server_files(&ca, &ca.server("submitter"));
        let kubeconfig = dir.dir.path().join("kubeconfig");
        t.cluster.write_kubeconfig(&kubeconfig).unwrap();
        let policy = dir.write("policy.yaml", POLICY);
        let revoked = tester_leaf(&ca, |_| {});
        let crl = dir.write("crl.pem", &ca.crl(&[&revoked]));
        let mut args: Vec<&OsStr> = vec![
            "--client-crl".as_ref(),
            crl.as_os_str(),
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
            revoked,
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

    /// The crate's client presenting `leaf`, allowed three retries.
    fn client_presenting(&self, name: &str, leaf: &Leaf) -> SubmitterClient {
        let (ca, cert, key) = self.dir.client_files(name, &self.ca, leaf);
        let mut config = ClientConfig::new(format!(
            "https://localhost:{}/api/v1/spark-submit",
            self.process.addr.port()
        ));
        config.ca = Some(ca);
        config.cert = Some(cert);
        config.key = Some(key);
        config.max_retries = 3;
        config.initial_backoff = Duration::from_millis(10);
        SubmitterClient::new(config).unwrap()
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

/// A certificate naming the tester identity (which the policy allows everything), issued by
/// `ca` and shaped by `shape`.
fn tester_leaf(ca: &Ca, shape: impl FnOnce(&mut rcgen::CertificateParams)) -> Leaf {
    ca.issue_shaped(
        "tester",
        vec![rcgen::SanType::DnsName(TESTER.try_into().unwrap())],
        |params| {
            params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
            shape(params);
        },
    )
}

/// One request to every API route (and an unknown path, and `/metrics`), with `submission`
/// as the body of the submission.
fn api_calls(submission: &Value) -> [(Method, &'static str, Option<String>); 7] {
    [
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
        (Method::GET, "/api/v1/no-such-route", None),
        (Method::GET, "/metrics", None),
    ]
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
    for (method, path, body) in api_calls(&submission) {
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

/// A TLS 1.2-only client config trusting `ca` and presenting `leaf`.
fn tls12_config(ca: &Ca, leaf: &Leaf) -> std::sync::Arc<rustls::ClientConfig> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.pem().as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(submitter::tls::crypto_provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    std::sync::Arc::new(config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_client_certificate_gets_401_naming_the_check_and_never_an_identity() {
    let s = Served::start(&[]).await;
    let addr = s.process.addr;
    let now = time::OffsetDateTime::now_utc();
    let days = time::Duration::days;
    // Each names the tester identity, which the policy allows everything: none may get it.
    let kinds: [(&str, Leaf, &str); 6] = [
        (
            "untrusted issuer",
            tester_leaf(&Ca::new("other ca"), |_| {}),
            "the client certificate is not issued by a certificate authority this service trusts",
        ),
        (
            "expired",
            tester_leaf(&s.ca, |p| {
                p.not_before = now - days(30);
                p.not_after = now - days(1);
            }),
            "the client certificate has expired",
        ),
        (
            "not yet valid",
            tester_leaf(&s.ca, |p| {
                p.not_before = now + days(1);
                p.not_after = now + days(30);
            }),
            "the client certificate is not valid yet",
        ),
        (
            "revoked",
            s.revoked.clone(),
            "the client certificate has been revoked",
        ),
        (
            "server auth only",
            tester_leaf(&s.ca, |p| {
                p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
            }),
            "the client certificate may not be used for client authentication (its key usage \
             or extended key usage)",
        ),
        (
            "key usage without digitalSignature",
            tester_leaf(&s.ca, |p| {
                p.key_usages = vec![rcgen::KeyUsagePurpose::KeyEncipherment];
            }),
            "the client certificate may not be used for client authentication (its key usage \
             or extended key usage)",
        ),
    ];
    for (kind, leaf, message) in &kinds {
        let config = client_config(&s.ca, Some(leaf));
        for path in ["/healthz", "/readyz"] {
            let answer = get(addr, config.clone(), path)
                .await
                .unwrap_or_else(|error| panic!("{kind}: {path}: no answer: {error}"));
            assert_eq!(answer.status, 200, "{kind}: {path}: {}", answer.body);
        }
        let submission = request(&format!("bad-cert-{}", kind.replace(' ', "-")), &args(&[]));
        for (method, path, body) in api_calls(&submission) {
            let answer = send(addr, config.clone(), method.clone(), path, body)
                .await
                .unwrap_or_else(|error| panic!("{kind}: {method} {path}: no answer: {error}"));
            assert_eq!(
                answer.status, 401,
                "{kind}: {method} {path}: {}",
                answer.body
            );
            let body = envelope(&answer.body);
            assert_eq!(
                body["error_code"], "UNAUTHENTICATED",
                "{kind}: {method} {path}"
            );
            // The check, and nothing of the certificate: no name, serial or issuer.
            assert_eq!(body["message"], *message, "{kind}: {method} {path}");
        }
        // The crate's client: one attempt, the 401 is final, the message says which check.
        let request: SubmitRequest = serde_json::from_value(submission).unwrap();
        let error = s
            .client_presenting(&kind.replace(' ', "-"), leaf)
            .submit(&request)
            .await
            .unwrap_err();
        assert_eq!(
            error.code(),
            Some(ErrorCode::Unauthenticated),
            "{kind}: {error}"
        );
        assert!(!error.retryable(), "{kind}");
        assert!(error.to_string().contains(message), "{kind}: {error}");
    }
    // The same over TLS 1.2, where the client's certificate is sent before the server's
    // Finished: still an answer, not a handshake failure.
    let (kind, leaf, message) = &kinds[0];
    let answer = send(
        addr,
        tls12_config(&s.ca, leaf),
        Method::GET,
        "/api/v1/spark-submit/x",
        None,
    )
    .await
    .unwrap_or_else(|error| panic!("{kind} over TLS 1.2: no answer: {error}"));
    assert_eq!(answer.status, 401);
    assert_eq!(envelope(&answer.body)["message"], *message);
    assert!(s.t.journal().is_empty(), "nothing was created");

    // The same identity with a good certificate is served.
    let good = tester_leaf(&s.ca, |_| {});
    let answer = send(
        addr,
        client_config(&s.ca, Some(&good)),
        Method::POST,
        "/api/v1/spark-submit",
        Some(request("bad-cert-good", &args(&[])).to_string()),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 201, "{}", answer.body);
}
