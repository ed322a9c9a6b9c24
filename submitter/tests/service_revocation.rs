//! Revoking a client certificate with a CRL file (`--client-crl`), reloaded like the
//! certificates: the revoked certificate gets no identity from its next connection on (its
//! requests are answered as a revoked certificate's: 401 on the API), and a connection opened
//! before the revocation answers its next request the same way and closes. Real sockets on 127.0.0.1,
//! real rustls, CRLs signed by the test CA with rcgen.

use crate::service_support;
use crate::submit_support;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use rustls_pki_types::pem::PemObject;
use serde_json::Value;
use service_support::{Ca, Dir, Leaf, client_config, start, whoami};
use submit_support::{TESTER, TestApp, args};
use submitter::tls::{ClientAuth, ReloadingTlsConfig, TlsFiles, Transport};
use tokio::net::TcpStream;

/// A TLS transport with a CRL file, re-reading its files on every connection and request.
fn transport_with_crl(files: TlsFiles, crl: std::path::PathBuf) -> Arc<ReloadingTlsConfig> {
    Arc::new(
        ReloadingTlsConfig::with_client_crl(files, Some(crl), ClientAuth::Optional)
            .unwrap()
            .with_check_interval(std::time::Duration::ZERO),
    )
}

/// One kept-alive TLS connection sending HTTP/1 requests one after another.
struct KeepAlive {
    sender: hyper::client::conn::http1::SendRequest<http_body_util::Full<Bytes>>,
}

/// What one request on a kept-alive connection got.
struct Reply {
    status: u16,
    closes: bool,
    body: Value,
}

impl KeepAlive {
    async fn open(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<KeepAlive, service_support::BoxError> {
        let tcp = TcpStream::connect(addr).await?;
        let name = ServerName::try_from("localhost")?.to_owned();
        let stream = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(KeepAlive { sender })
    }

    async fn send(
        &mut self,
        method: http::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Reply, service_support::BoxError> {
        self.sender.ready().await?;
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, "localhost")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(Bytes::from(
                body.map(Value::to_string).unwrap_or_default(),
            )))?;
        let response = self.sender.send_request(request).await?;
        let status = response.status().as_u16();
        let closes = response
            .headers()
            .get(http::header::CONNECTION)
            .is_some_and(|value| value == "close");
        let bytes = response.into_body().collect().await?.to_bytes();
        Ok(Reply {
            status,
            closes,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        })
    }

    async fn whoami(&mut self) -> Result<Reply, service_support::BoxError> {
        self.send(http::Method::GET, "/whoami", None).await
    }
}

/// A client config pinned to one TLS version (rustls resumes sessions by default, so a
/// reconnect after a revocation also tries to resume).
fn client_config_for(
    ca: &Ca,
    leaf: &Leaf,
    version: &'static rustls::SupportedProtocolVersion,
) -> Arc<rustls::ClientConfig> {
    let config = rustls::ClientConfig::builder_with_provider(submitter::tls::crypto_provider())
        .with_protocol_versions(&[version])
        .unwrap()
        .with_root_certificates(roots(ca))
        .with_client_auth_cert(
            vec![pem_cert(&leaf.cert_pem)],
            rustls_pki_types::PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    Arc::new(config)
}

fn pem_cert(pem: &str) -> rustls_pki_types::CertificateDer<'static> {
    rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

fn roots(ca: &Ca) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pem_cert(&ca.pem())).unwrap();
    roots
}

#[tokio::test]
async fn revoked_certificate_is_cut_off_on_its_open_connection_and_unidentified_on_the_next() {
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let ca = Ca::new("test ca");
        let dir = Dir::new();
        let files = dir.server_files(&ca, &ca.server("submitter"));
        let crl = dir.write("crl.pem", &ca.crl(&[]));
        let server = start(whoami(), Transport::Tls(transport_with_crl(files, crl))).await;
        let leaked = ca.client("leaked.spark.svc", "spiffe://x/leaked", "leaked");
        let steady = ca.client("steady.spark.svc", "spiffe://x/steady", "steady");
        let leaked_config = client_config_for(&ca, &leaked, version);
        let mut leaked_conn = KeepAlive::open(server.addr, leaked_config.clone())
            .await
            .unwrap();
        let mut steady_conn =
            KeepAlive::open(server.addr, client_config_for(&ca, &steady, version))
                .await
                .unwrap();
        let before = leaked_conn.whoami().await.unwrap();
        assert_eq!(before.body["names"][0], "leaked.spark.svc", "{version:?}");
        assert!(!before.closes);
        assert_eq!(
            steady_conn.whoami().await.unwrap().body["names"][0],
            "steady.spark.svc"
        );

        dir.write("crl.pem", &ca.crl(&[&leaked]));

        // The open connection: this request has no identity, its answer closes the connection.
        let after = leaked_conn.whoami().await.unwrap();
        assert_eq!(after.status, 200);
        assert_eq!(
            after.body,
            serde_json::json!({"names": [], "rejected": "revoked"}),
            "{version:?}"
        );
        assert!(after.closes, "{version:?}: the connection stays open");
        assert!(
            leaked_conn.whoami().await.is_err(),
            "{version:?}: the connection served another request"
        );
        // A new connection (resuming the old session, if the client can) gets through the
        // handshake, without identity: its certificate is verified after it, whatever session
        // it resumed.
        let mut reconnected = KeepAlive::open(server.addr, leaked_config).await.unwrap();
        let again = reconnected.whoami().await.unwrap();
        assert_eq!(
            again.body,
            serde_json::json!({"names": [], "rejected": "revoked"}),
            "{version:?}: a revoked certificate got an identity on a new connection"
        );
        // Another client's open connection is untouched.
        let other = steady_conn.whoami().await.unwrap();
        assert_eq!(other.body["names"][0], "steady.spark.svc");
        assert!(!other.closes);
    }
}

#[tokio::test]
async fn broken_crl_file_keeps_the_previous_revocations() {
    let ca = Ca::new("test ca");
    let dir = Dir::new();
    let files = dir.server_files(&ca, &ca.server("submitter"));
    let leaked = ca.client("leaked.spark.svc", "spiffe://x/leaked", "leaked");
    let crl = dir.write("crl.pem", &ca.crl(&[&leaked]));
    let reloading = transport_with_crl(files, crl);
    let server = start(whoami(), Transport::Tls(reloading.clone())).await;
    let config = client_config(&ca, Some(&leaked));

    for (text, kind) in [
        ("", "empty_client_crl"),
        (
            "-----BEGIN X509 CRL-----\nnot base64!\n",
            "parse_client_crl",
        ),
        (ca.pem().as_str(), "empty_client_crl"),
    ] {
        dir.write("crl.pem", text);
        assert_eq!(reloading.reload_now().unwrap_err().kind(), kind);
        let answer = service_support::get(server.addr, config.clone(), "/whoami")
            .await
            .unwrap();
        let body: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"names": [], "rejected": "revoked"}),
            "a CRL file holding {text:?} lifted the revocation"
        );
    }
}

#[test]
fn unusable_crl_file_fails_start_up_with_its_kind() {
    let ca = Ca::new("test ca");
    let dir = Dir::new();
    let files = dir.server_files(&ca, &ca.server("submitter"));
    let missing = ReloadingTlsConfig::with_client_crl(
        files.clone(),
        Some(dir.dir.path().join("absent.pem")),
        ClientAuth::Optional,
    )
    .unwrap_err();
    assert_eq!(missing.kind(), "load_client_crl");
    // A CRL signed by a CA the server does not trust is still a CRL: it revokes nothing here.
    let foreign = dir.write("foreign.pem", &Ca::new("other ca").crl(&[]));
    assert!(
        ReloadingTlsConfig::with_client_crl(files, Some(foreign), ClientAuth::Optional).is_ok()
    );
}

#[tokio::test]
async fn revoked_client_mid_session_gets_401_in_the_envelope_and_creates_nothing() {
    let t = TestApp::start().await;
    let ca = Ca::new("test ca");
    let dir = Dir::new();
    let files = dir.server_files(&ca, &ca.server("submitter"));
    let crl = dir.write("crl.pem", &ca.crl(&[]));
    let server = start(
        t.app.clone(),
        Transport::Tls(transport_with_crl(files, crl)),
    )
    .await;
    let tester = ca.client(
        TESTER,
        "spiffe://cluster.local/ns/spark/sa/tester",
        "tester",
    );
    let mut conn = KeepAlive::open(server.addr, client_config(&ca, Some(&tester)))
        .await
        .unwrap();
    let first = submit_support::request("revocation-1", &args(&[]));
    let created = conn
        .send(http::Method::POST, "/api/v1/spark-submit", Some(&first))
        .await
        .unwrap();
    assert_eq!(created.status, 201, "{}", created.body);

    dir.write("crl.pem", &ca.crl(&[&tester]));
    let second = submit_support::request("revocation-2", &args(&["--name", "other-app"]));
    let refused = conn
        .send(http::Method::POST, "/api/v1/spark-submit", Some(&second))
        .await
        .unwrap();
    assert_eq!(refused.status, 401);
    assert_eq!(refused.body["error_code"], "UNAUTHENTICATED");
    assert_eq!(
        refused.body["message"],
        "the client certificate has been revoked"
    );
    assert!(refused.closes);
    t.assert_nothing_left(&submit_support::built(&second)).await;
}
