//! mTLS at the service's edge: who gets through the handshake, what the handler learns about
//! them, and certificate rotation without restart. Real sockets on 127.0.0.1, real rustls.

use crate::service_support;

use std::time::Duration;

use serde_json::{Value, json};
use service_support::{Ca, Dir, client_config, common_name, start, tls, whoami};
use submitter::tls::{ClientAuth, Transport};

/// The `/whoami` answer's body.
fn seen(answer: &service_support::Answer) -> Value {
    serde_json::from_str(&answer.body).unwrap()
}

struct Setup {
    ca: Ca,
    dir: Dir,
    files: submitter::tls::TlsFiles,
}

fn setup() -> Setup {
    let ca = Ca::new("test ca");
    let dir = Dir::new();
    let files = dir.server_files(&ca, &ca.server("server-one"));
    Setup { ca, dir, files }
}

fn operator(ca: &Ca) -> service_support::Leaf {
    ca.client(
        "operator.spark.svc",
        "spiffe://cluster.local/ns/spark/sa/operator",
        "operator",
    )
}

#[tokio::test]
async fn good_client_gets_through_and_the_handler_sees_its_identities() {
    let setup = setup();
    let (transport, _) = tls(setup.files.clone(), ClientAuth::Required);
    let server = start(whoami(), transport).await;
    let answer = service_support::get(
        server.addr,
        client_config(&setup.ca, Some(&operator(&setup.ca))),
        "/whoami",
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(
        seen(&answer),
        json!({"names": [
            "operator.spark.svc",
            "spiffe://cluster.local/ns/spark/sa/operator",
            "operator"
        ], "rejected": null})
    );
}

#[tokio::test]
async fn client_without_a_certificate_is_refused_at_the_handshake() {
    let setup = setup();
    let (transport, _) = tls(setup.files.clone(), ClientAuth::Required);
    let server = start(whoami(), transport).await;
    let result = service_support::get(server.addr, client_config(&setup.ca, None), "/whoami").await;
    assert!(
        result.is_err(),
        "a client without a certificate got an answer"
    );
}

#[tokio::test]
async fn a_certificate_from_another_ca_gets_through_the_handshake_without_identity() {
    for auth in [ClientAuth::Required, ClientAuth::Optional] {
        let setup = setup();
        let (transport, _) = tls(setup.files.clone(), auth);
        let server = start(whoami(), transport).await;
        let stranger = Ca::new("other ca");
        // Trusts the right server CA, but presents a certificate the server's CA did not sign,
        // naming the same identities as a good one.
        let config = client_config(&setup.ca, Some(&operator(&stranger)));
        let answer = service_support::get(server.addr, config, "/whoami")
            .await
            .unwrap_or_else(|error| panic!("{auth:?}: no answer: {error}"));
        assert_eq!(
            seen(&answer),
            json!({"names": [], "rejected": "untrusted_issuer"}),
            "{auth:?}"
        );
    }
}

#[tokio::test]
async fn optional_client_auth_lets_anonymous_clients_through_without_identity() {
    let setup = setup();
    let (transport, _) = tls(setup.files.clone(), ClientAuth::Optional);
    let server = start(whoami(), transport).await;
    let answer = service_support::get(server.addr, client_config(&setup.ca, None), "/whoami")
        .await
        .unwrap();
    assert_eq!(seen(&answer), json!({"names": [], "rejected": null}));
}

#[tokio::test]
async fn rotated_server_certificate_is_used_by_the_next_connection() {
    let setup = setup();
    let (transport, _) = tls(setup.files.clone(), ClientAuth::Required);
    let server = start(whoami(), transport).await;
    let config = client_config(&setup.ca, Some(&operator(&setup.ca)));

    let before = service_support::get(server.addr, config.clone(), "/whoami")
        .await
        .unwrap();
    assert_eq!(common_name(&before.server_cert), "server-one");

    let rotated = setup.ca.server("server-two");
    setup.dir.write("tls.key", &rotated.key_pem);
    setup.dir.write("tls.crt", &rotated.cert_pem);

    let after = service_support::get(server.addr, config, "/whoami")
        .await
        .unwrap();
    assert_eq!(common_name(&after.server_cert), "server-two");
}

#[tokio::test]
async fn half_written_rotation_keeps_the_previous_certificate() {
    let setup = setup();
    let (transport, reloading) = tls(setup.files.clone(), ClientAuth::Required);
    let server = start(whoami(), transport).await;
    let config = client_config(&setup.ca, Some(&operator(&setup.ca)));

    // New certificate written, its key not yet: the pair does not match.
    setup
        .dir
        .write("tls.crt", &setup.ca.server("server-two").cert_pem);
    assert_eq!(reloading.reload_now().unwrap_err().kind(), "build_config");
    let answer = service_support::get(server.addr, config, "/whoami")
        .await
        .unwrap();
    assert_eq!(common_name(&answer.server_cert), "server-one");
}

#[tokio::test]
async fn rotated_client_ca_admits_clients_of_the_new_ca() {
    let setup = setup();
    let (transport, _) = tls(setup.files.clone(), ClientAuth::Required);
    let server = start(whoami(), transport).await;
    let new_ca = Ca::new("new client ca");
    let config = client_config(&setup.ca, Some(&operator(&new_ca)));
    let before = service_support::get(server.addr, config.clone(), "/whoami")
        .await
        .unwrap();
    assert_eq!(seen(&before)["rejected"], "untrusted_issuer");

    // Both CAs in the bundle, as during a real CA rotation.
    setup
        .dir
        .write("ca.crt", &format!("{}{}", setup.ca.pem(), new_ca.pem()));
    let answer = service_support::get(server.addr, config, "/whoami")
        .await
        .unwrap();
    assert_eq!(seen(&answer)["names"][0], "operator.spark.svc");
}

#[tokio::test]
async fn a_silent_connection_does_not_block_others() {
    let setup = setup();
    let (transport, _) = tls(setup.files.clone(), ClientAuth::Required);
    let server = start(whoami(), transport).await;
    // Connects and never starts the handshake.
    let _silent = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let config = client_config(&setup.ca, Some(&operator(&setup.ca)));
    let answer = tokio::time::timeout(
        Duration::from_secs(1),
        service_support::get(server.addr, config, "/whoami"),
    )
    .await
    .expect("the accept loop waited on a silent handshake")
    .unwrap();
    assert_eq!(answer.status, 200);
}

#[tokio::test]
async fn insecure_dev_serves_plain_http_without_identity() {
    let server = start(whoami(), Transport::InsecureDev).await;
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = http::Request::get("/whoami")
        .header(http::header::HOST, "localhost")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    use http_body_util::BodyExt;
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body, json!({"names": [], "rejected": null}));
}
