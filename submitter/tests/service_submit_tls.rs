//! The whole path over a real socket: the crate's client, mTLS through `tls::serve`, the
//! service's `app()` with its layers, the policy reading the client certificate's identities,
//! and kubesim behind.

use crate::service_support;
use crate::submit_support;

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

#[tokio::test]
async fn the_client_trusts_a_rotated_ca_without_a_restart() {
    let t = TestApp::start().await;
    let old_ca = Ca::new("old ca");
    let new_ca = Ca::new("new ca");
    let dir = Dir::new();
    let (transport, _) = tls(
        dir.server_files(&old_ca, &old_ca.server("submitter")),
        ClientAuth::Required,
    );
    let server = start(t.app.clone(), transport).await;
    let identity = old_ca.client(
        TESTER,
        "spiffe://cluster.local/ns/spark/sa/tester",
        "tester",
    );
    let (ca, cert, key) = dir.client_files("tester", &old_ca, &identity);
    let mut config = ClientConfig::new(format!(
        "https://localhost:{}/api/v1/spark-submit",
        server.addr.port()
    ));
    config.ca = Some(ca.clone());
    config.cert = Some(cert);
    config.key = Some(key);
    config.max_retries = 1;
    config.cert_check_interval = Duration::ZERO;
    let client = SubmitterClient::new(config).unwrap();

    // The CA is replaced before the first connection: the server presents a certificate of the
    // new CA, and the client's bundle (read at start) now holds only the new CA.
    let rotated = new_ca.server("submitter");
    dir.write("tls.key", &rotated.key_pem);
    dir.write("tls.crt", &rotated.cert_pem);
    dir.write("tester-ca.crt", &new_ca.pem());
    // Any HTTP answer means the handshake verified the new server certificate (the service's
    // caches are not synced here, so it answers 503); trusting the old CA would fail the
    // handshake, with no HTTP status at all.
    let error = client
        .driver_status("default", "no-such-driver")
        .await
        .unwrap_err();
    assert!(error.status().is_some(), "no HTTP answer: {error}");
}
