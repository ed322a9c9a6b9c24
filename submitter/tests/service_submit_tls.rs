//! The whole path over a real socket: the crate's client, mTLS through `tls::serve`, the
//! service's `app()` with its layers, the policy reading the client certificate's identities,
//! and kubesim behind.

mod service_support;
mod submit_support;

use std::time::Duration;

use service_support::{Ca, Dir, start, tls};
use submission::api::{ErrorCode, SubmitRequest};
use submit_support::{TESTER, TestApp, args, built};
use submitter::tls::ClientAuth;
use submitter_client::{ClientConfig, SubmitterClient};

fn client(
    addr: std::net::SocketAddr,
    files: (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf),
) -> SubmitterClient {
    let (ca, cert, key) = files;
    let mut config = ClientConfig::new(format!(
        "https://localhost:{}/api/v1/spark-submit",
        addr.port()
    ));
    config.ca = Some(ca);
    config.cert = Some(cert);
    config.key = Some(key);
    config.max_retries = 1;
    config.request_timeout = Duration::from_secs(10);
    SubmitterClient::new(config).unwrap()
}

fn submission(id: &str) -> SubmitRequest {
    serde_json::from_value(submit_support::request(id, &args(&[]))).unwrap()
}

#[tokio::test]
async fn submission_over_mtls_creates_then_answers_the_duplicate() {
    let t = TestApp::start().await;
    let ca = Ca::new("test ca");
    let dir = Dir::new();
    let (transport, _) = tls(
        dir.server_files(&ca, &ca.server("submitter")),
        ClientAuth::Required,
    );
    let server = start(t.app.clone(), transport).await;
    let identity = ca.client(
        TESTER,
        "spiffe://cluster.local/ns/spark/sa/tester",
        "tester",
    );
    let client = client(server.addr, dir.client_files("tester", &ca, &identity));

    client
        .wait_for_connection(Duration::from_secs(5))
        .await
        .unwrap();
    let request = submission("mtls-1");
    let created = client.submit(&request).await.unwrap();
    assert!(!created.duplicate_submission);
    let again = client.submit(&request).await.unwrap();
    assert!(again.duplicate_submission);
    assert_eq!(again.driver_pod_uid, created.driver_pod_uid);
    let uid = t
        .assert_complete(&built(&submit_support::request("mtls-1", &args(&[]))))
        .await;
    assert_eq!(created.driver_pod_uid, uid);
}

#[tokio::test]
async fn certificate_identity_outside_the_policy_is_forbidden() {
    let t = TestApp::start().await;
    let ca = Ca::new("test ca");
    let dir = Dir::new();
    let (transport, _) = tls(
        dir.server_files(&ca, &ca.server("submitter")),
        ClientAuth::Required,
    );
    let server = start(t.app.clone(), transport).await;
    let stranger = ca.client("stranger.example", "spiffe://elsewhere/x", "stranger");
    let client = client(server.addr, dir.client_files("stranger", &ca, &stranger));
    let error = client.submit(&submission("mtls-2")).await.unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::Forbidden));
    assert!(!error.retryable());
    assert!(t.journal().is_empty());
}
